// SPDX-License-Identifier: MIT
/// @file
/// @brief The `vmcs_backend` concept and the typed VMREAD/VMWRITE front end.
///
/// A backend moves raw values by encoding (hardware VMREAD/VMWRITE, a software VMCS, a cache
/// in front of either). The typed front end, vmx::vmread(b, fields::x) and
/// vmx::vmwrite(b, fields::x, v), takes the value type from the field: writing a read-only
/// (VM-exit information) field or writing/reading with the wrong width does not compile.
/// A write accepts the field's unsigned value type, the architectural register the field
/// holds (`vmwrite(v, fields::guest_cr0, x86::cr0::pe | x86::cr0::pg)`), or an integer
/// constant that fits the field (`vmwrite(v, fields::guest_cs_selector, 0x10)`); a constant
/// that does not fit, a run-time integer of another width or another register type
/// (x86::cr4 into a CR0 field) does not compile.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "field.hpp"
#include "vm_fail.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// A VMCS access backend: raw reads and writes by encoding, failures as vm_fail.
/// Raw values are zero-extended to 64 bits; a write stores the low bits_of(encoding) bits
/// (SDM VMWRITE: the excess high bits of the source are ignored).
template <class B>
concept vmcs_backend = requires(B& b, std::uint32_t enc, std::uint64_t v) {
  { b.read(enc) } -> std::same_as<result<std::uint64_t, vm_fail>>;
  { b.write(enc, v) } -> std::same_as<result<void, vm_fail>>;
};

namespace detail {
// Called only when an integer constant does not fit the field: not constexpr, so the
// consteval conversion below fails to compile and names the reason.
inline void integer_constant_does_not_fit_the_vmcs_field_width() noexcept {}

template <class T, class Raw>
[[nodiscard]] consteval bool constant_fits(T v) noexcept {
  if constexpr (std::is_signed_v<T>) {
    if (v < 0) return false;
  }
  return static_cast<std::make_unsigned_t<T>>(v) <= std::numeric_limits<Raw>::max();
}
template <class>
inline constexpr bool dependent_false = false;
}  // namespace detail

/// A value VMWRITE may store in `field<E>` (the parameter type of vmwrite()):
/// - the field's value_type itself (a run-time value of exactly the field's width);
/// - the field's typed_type (x86::cr0, x86::cr4, x86::efer, x86::rflags, x86::cr3, x86::selector);
/// - an integer constant of any type whose value fits the field (checked at compile time;
///   a negative constant never fits).
/// Anything else does not compile; nothing is truncated silently.
template <std::uint32_t E>
class field_value {
  using raw_type = typename field<E>::value_type;
  using typed = typename field<E>::typed_type;

 public:
  /// The field's own unsigned value type.
  template <class T>
    requires std::same_as<T, raw_type>
  constexpr field_value(T v) noexcept : raw_(v) {}  // NOLINT(google-explicit-constructor)

  /// The architectural register the field holds.
  template <class T>
    requires(!std::is_void_v<typed> && std::same_as<T, typed>)
  constexpr field_value(T v) noexcept : raw_(v.raw()) {}  // NOLINT(google-explicit-constructor)

  /// An integer constant: compiles only if its value fits the field.
  template <std::integral T>
    requires(!std::same_as<T, raw_type> && !std::same_as<T, bool>)
  consteval field_value(T constant) noexcept  // NOLINT(google-explicit-constructor)
      : raw_(static_cast<raw_type>(constant)) {
    if (!detail::constant_fits<T, raw_type>(constant)) detail::integer_constant_does_not_fit_the_vmcs_field_width();
  }

  /// Anything else: a register of another type, a bool, a pointer, an address type.
  template <class T>
    requires(!std::same_as<T, raw_type> && !std::same_as<T, typed> && !std::integral<T>) ||
            std::same_as<T, bool>
  constexpr field_value(T) noexcept : raw_(0) {  // NOLINT(google-explicit-constructor)
    static_assert(detail::dependent_false<T>,
                  "VMCS field value type mismatch: write the field's value_type, its typed_type "
                  "(x86::cr0, x86::selector, ...) or an integer constant that fits (SDM 25.11.2)");
  }

  /// The bits VMWRITE transfers.
  [[nodiscard]] constexpr raw_type raw() const noexcept { return raw_; }

 private:
  raw_type raw_;
};

/// VMREAD of a typed field; the result has the field's own value type.
template <vmcs_backend B, std::uint32_t E>
[[nodiscard]] constexpr result<typename field<E>::value_type, vm_fail> vmread(B& b, field<E>) noexcept {
  using T = typename field<E>::value_type;
  // A backend with a typed read (cached_vmcs) gets the field itself, so that it can resolve
  // the field at compile time; any other backend gets the encoding.
  auto r = [&] {
    if constexpr (requires { { b.read(field<E>{}) } -> std::same_as<result<std::uint64_t, vm_fail>>; })
      return b.read(field<E>{});
    else
      return b.read(E);
  }();
  if (!r) return unexpected(r.error());
  return static_cast<T>(r.value());
}

/// VMREAD into `out`, whose type must be exactly the field's value type or the register
/// type the field holds (an x86::cr0 from GUEST_CR0, ...).
template <vmcs_backend B, std::uint32_t E, class T>
[[nodiscard]] constexpr result<void, vm_fail> vmread(B& b, field<E> f, T& out) noexcept {
  using raw_type = typename field<E>::value_type;
  static_assert(std::same_as<T, raw_type> || std::same_as<T, typename field<E>::typed_type>,
                "VMCS field width mismatch: read into the field's own value type (SDM 25.11.2 bits 14:13)");
  auto r = vmread(b, f);
  if (!r) return unexpected(r.error());
  if constexpr (std::same_as<T, raw_type>)
    out = r.value();
  else
    out = T{r.value()};
  return {};
}

/// VMWRITE of a typed field. `v` is a field_value: the field's value type, the register
/// type it holds, or an integer constant that fits (no silent truncation); the field must
/// not be a read-only VM-exit information field.
template <vmcs_backend B, std::uint32_t E>
constexpr result<void, vm_fail> vmwrite(B& b, field<E>, std::type_identity_t<field_value<E>> v) noexcept {
  static_assert(!field<E>::read_only,
                "VMWRITE to a read-only VMCS field (VM-exit information, SDM 25.9; error 13)");
  const auto raw = static_cast<std::uint64_t>(v.raw());
  if constexpr (requires { { b.write(field<E>{}, std::uint64_t{}) } -> std::same_as<result<void, vm_fail>>; })
    return b.write(field<E>{}, raw);
  else
    return b.write(E, raw);
}

}  // namespace hvkit::vmx
