// SPDX-License-Identifier: MIT
/// @file
/// @brief Typed bitfield descriptors over unsigned storage.
///
/// A bitfield names a run of bits in an unsigned integer and the type its value has.
/// get() and set() are constexpr; a value wider than the field is a contract violation
/// (`set`) or is reported (`try_set`), never silently truncated. Overlap of fields that
/// describe one layout is checked at compile time with `fields_disjoint`.
/// This replaces C++ bit-field structs (layout owned by the compiler) and unions
/// (type punning is UB and rejected in constant evaluation).
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "contract.hpp"

namespace hvkit::x86 {

namespace detail {
template <class T>
struct underlying_or_self { using type = T; };
template <class T>
  requires std::is_enum_v<T>
struct underlying_or_self<T> { using type = std::underlying_type_t<T>; };
}  // namespace detail

/// A value type a bitfield can hold: an unsigned integer, bool, or an enum over one.
template <class T>
concept bitfield_value = std::unsigned_integral<typename detail::underlying_or_self<T>::type> ||
                         std::same_as<T, bool>;

/// Bits [Offset, Offset + Width) of a Storage word, read and written as Value.
template <std::unsigned_integral Storage, unsigned Offset, unsigned Width, bitfield_value Value = Storage>
struct bitfield {
  static_assert(Width > 0, "a bitfield has at least one bit");
  static_assert(Offset + Width <= std::numeric_limits<Storage>::digits,
                "a bitfield must fit in its storage");
  static_assert(!std::same_as<Value, bool> || Width == 1, "a bool field is one bit wide");

  using storage_type = Storage;
  using value_type = Value;
  static constexpr unsigned offset = Offset;
  static constexpr unsigned width = Width;
  /// The largest raw value the field can hold.
  static constexpr Storage max_raw =
      Width == std::numeric_limits<Storage>::digits ? std::numeric_limits<Storage>::max()
                                                     : static_cast<Storage>((Storage{1} << Width) - 1);
  /// The field's bits in place.
  static constexpr Storage mask = static_cast<Storage>(max_raw << Offset);

  /// The raw bits of the field, shifted down.
  [[nodiscard]] static constexpr Storage raw(Storage word) noexcept {
    return static_cast<Storage>((word >> Offset) & max_raw);
  }
  /// The field's value.
  [[nodiscard]] static constexpr Value get(Storage word) noexcept { return static_cast<Value>(raw(word)); }

  /// True if `v` fits in the field.
  [[nodiscard]] static constexpr bool fits(Value v) noexcept {
    using U = typename detail::underlying_or_self<Value>::type;
    return static_cast<std::uint64_t>(static_cast<U>(v)) <= static_cast<std::uint64_t>(max_raw);
  }
  /// `word` with the field replaced by `v`. A value wider than the field is a contract
  /// violation (and fails constant evaluation).
  [[nodiscard]] static constexpr Storage set(Storage word, Value v) noexcept {
    HVKIT_EXPECTS(fits(v));
    using U = typename detail::underlying_or_self<Value>::type;
    auto bits = static_cast<Storage>(static_cast<U>(v)) & max_raw;
    return static_cast<Storage>((word & ~mask) | static_cast<Storage>(bits << Offset));
  }
  /// Like set(), but reports a too-wide value instead of treating it as a contract violation.
  [[nodiscard]] static constexpr bool try_set(Storage& word, Value v) noexcept {
    if (!fits(v)) return false;
    word = set(word, v);
    return true;
  }
};

/// A one-bit boolean field.
template <std::unsigned_integral Storage, unsigned Bit>
using bitflag = bitfield<Storage, Bit, 1, bool>;

/// True if no two of the fields share a bit (use in a static_assert next to a layout).
template <class... Fields>
[[nodiscard]] consteval bool fields_disjoint() noexcept {
  using S = std::common_type_t<typename Fields::storage_type...>;
  S seen = 0;
  bool ok = true;
  (([&] {
     if ((seen & static_cast<S>(Fields::mask)) != 0) ok = false;
     seen |= static_cast<S>(Fields::mask);
   }()),
   ...);
  return ok;
}

/// The union of the fields' masks.
template <class... Fields>
inline constexpr auto fields_mask = (static_cast<std::common_type_t<typename Fields::storage_type...>>(0) | ... |
                                     Fields::mask);

/// Bits [lo, hi] (inclusive) of a 64-bit word as a mask; for reserved-bit and address masks.
[[nodiscard]] constexpr std::uint64_t bit_range(unsigned hi, unsigned lo) noexcept {
  HVKIT_EXPECTS(hi < 64 && lo <= hi);
  const std::uint64_t top = hi == 63 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (hi + 1)) - 1);
  return top & ~((std::uint64_t{1} << lo) - 1);
}

}  // namespace hvkit::x86
