/// @file
/// @brief `flags<Derived, Storage>`: a typed set of architectural bits over unsigned storage.
///
/// Each register type (cr0, cr4, efer, rflags, pfec, ...) derives from flags<> and names its
/// bits as static constants of its own type, so a CR4 bit cannot be tested against CR0:
/// @code
///   x86::cr0 v{0x80010033};
///   if (v.test(x86::cr0::wp)) ...
///   v = v.clear(x86::cr0::wp);
/// @endcode
#pragma once

#include <concepts>
#include <cstdint>

namespace hvkit::x86 {

template <class Derived, std::unsigned_integral Storage = std::uint64_t>
class flags {
 public:
  using storage_type = Storage;

  constexpr flags() noexcept = default;
  constexpr explicit flags(Storage raw) noexcept : raw_(raw) {}

  /// The set with only bit `n`.
  [[nodiscard]] static constexpr Derived bit(unsigned n) noexcept { return Derived{static_cast<Storage>(Storage{1} << n)}; }

  [[nodiscard]] constexpr Storage raw() const noexcept { return raw_; }
  /// True if every bit of `m` is set (and `m` is not empty).
  [[nodiscard]] constexpr bool test(Derived m) const noexcept { return m.raw_ != 0 && (raw_ & m.raw_) == m.raw_; }
  /// True if any bit of `m` is set.
  [[nodiscard]] constexpr bool any(Derived m) const noexcept { return (raw_ & m.raw_) != 0; }
  [[nodiscard]] constexpr bool none() const noexcept { return raw_ == 0; }
  [[nodiscard]] constexpr Derived set(Derived m) const noexcept { return Derived{static_cast<Storage>(raw_ | m.raw_)}; }
  [[nodiscard]] constexpr Derived clear(Derived m) const noexcept { return Derived{static_cast<Storage>(raw_ & ~m.raw_)}; }
  /// Set or clear `m` according to `on`.
  [[nodiscard]] constexpr Derived assign(Derived m, bool on) const noexcept { return on ? set(m) : clear(m); }

  [[nodiscard]] friend constexpr Derived operator|(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() | b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator&(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() & b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator^(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() ^ b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator~(Derived a) noexcept { return Derived{static_cast<Storage>(~a.raw())}; }
  [[nodiscard]] friend constexpr bool operator==(Derived a, Derived b) noexcept { return a.raw() == b.raw(); }

 private:
  Storage raw_ = 0;
};

}  // namespace hvkit::x86
