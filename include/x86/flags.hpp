// SPDX-License-Identifier: MIT
/// @file
/// @brief `flags<Derived, Storage>`: a typed set of architectural bits over unsigned storage.
///
/// Each register type (cr0, cr4, efer, rflags, pfec, ...) derives from flags<> and names its
/// bits as static constants of its own type, so a CR4 bit cannot be tested against CR0.
///
/// One convention for every bit set in x86/ and cpuid/ (that of std::bitset): set(), reset()
/// and flip() change the object and return it; with() and without() return a changed copy
/// and leave the object alone; `|=`, `&=`, `^=` change it, `|`, `&`, `^`, `~` make new values.
/// @code
///   x86::cr0 v{0x80010033};
///   if (v.test(x86::cr0::wp)) ...
///   v.reset(x86::cr0::wp);                         // v changes
///   const auto with_wp = v.with(x86::cr0::wp);     // v does not
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
  /// Sets every bit of `m`; returns this set.
  constexpr Derived& set(Derived m) noexcept {
    raw_ = static_cast<Storage>(raw_ | m.raw_);
    return self();
  }
  /// Sets the bits of `m` if `on`, clears them otherwise; returns this set.
  constexpr Derived& set(Derived m, bool on) noexcept { return on ? set(m) : reset(m); }
  /// Clears every bit of `m`; returns this set.
  constexpr Derived& reset(Derived m) noexcept {
    raw_ = static_cast<Storage>(raw_ & ~m.raw_);
    return self();
  }
  /// Inverts every bit of `m`; returns this set.
  constexpr Derived& flip(Derived m) noexcept {
    raw_ = static_cast<Storage>(raw_ ^ m.raw_);
    return self();
  }
  constexpr Derived& operator|=(Derived m) noexcept { return set(m); }
  constexpr Derived& operator&=(Derived m) noexcept {
    raw_ = static_cast<Storage>(raw_ & m.raw_);
    return self();
  }
  constexpr Derived& operator^=(Derived m) noexcept { return flip(m); }

  /// A copy with every bit of `m` set.
  [[nodiscard]] constexpr Derived with(Derived m) const noexcept { return Derived{static_cast<Storage>(raw_ | m.raw_)}; }
  /// A copy with every bit of `m` clear.
  [[nodiscard]] constexpr Derived without(Derived m) const noexcept { return Derived{static_cast<Storage>(raw_ & ~m.raw_)}; }
  /// A copy with the bits of `m` set if `on`, clear otherwise.
  [[nodiscard]] constexpr Derived with(Derived m, bool on) const noexcept { return on ? with(m) : without(m); }

  [[nodiscard]] friend constexpr Derived operator|(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() | b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator&(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() & b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator^(Derived a, Derived b) noexcept { return Derived{static_cast<Storage>(a.raw() ^ b.raw())}; }
  [[nodiscard]] friend constexpr Derived operator~(Derived a) noexcept { return Derived{static_cast<Storage>(~a.raw())}; }
  [[nodiscard]] friend constexpr bool operator==(Derived a, Derived b) noexcept { return a.raw() == b.raw(); }

  /// The bits. Public only so that every flag set is a structural type and can be a template
  /// argument (C++20 [temp.param]: `guest_owned_set<x86::cr0::ts | x86::cr0::wp>`); use raw().
  Storage raw_ = 0;

 private:
  constexpr Derived& self() noexcept { return static_cast<Derived&>(*this); }
};

}  // namespace hvkit::x86
