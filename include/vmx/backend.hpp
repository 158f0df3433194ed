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
/// that does not fit, a run-time integer of another type or another register type
/// (x86::cr4 into a CR0 field) does not compile. A run-time integer of another type is
/// narrowed explicitly: vmx::narrow(fields::x, v) checks that it fits (typed error
/// field_overflow otherwise), vmx::truncate(fields::x, v) keeps the low bits as the VMWRITE
/// instruction would. The compile error for a run-time integer names the field and its width:
///   call to non-constexpr function 'run_time_integer_is_not_the_vmcs_field_type__narrow_it_with_
///   vmx_narrow_or_vmx_truncate<field_name{"guest_cs_selector"}, field_width::w16>()'
/// (GCC; Clang prints the name as character codes, and both show the call).
///
/// The backend's own `write(encoding, value)` is the VMWRITE instruction, for code that
/// emulates it (a nested hypervisor's vmcs12): like the instruction it stores the low
/// bits_of(encoding) bits (SDM VMWRITE). Code that is not emulating VMWRITE writes through
/// vmx::vmwrite, or checks a raw value with vmx::fits(encoding, value) first.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "field.hpp"
#include "fields.hpp"
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

/// True if `value` fits the field `encoding` names (no bit above its width; a HIGH access
/// holds 32 bits).
[[nodiscard]] constexpr bool fits(std::uint32_t encoding, std::uint64_t value) noexcept {
  return (value & ~value_mask(encoding)) == 0;
}

/// A run-time value that does not fit a VMCS field: the typed error of vmx::narrow().
struct field_overflow {
  std::uint32_t encoding = 0;  ///< the field
  std::uint64_t value = 0;     ///< the value (a negative one sign-extended to 64 bits)
  /// The field's width in bits (16, 32 or 64; 32 for a HIGH access).
  [[nodiscard]] constexpr unsigned bits() const noexcept { return bits_of(encoding); }
  friend constexpr bool operator==(const field_overflow&, const field_overflow&) noexcept = default;
};

/// Checked narrowing of a run-time integer to the field's value type: the value if it fits
/// (a negative value never fits), field_overflow otherwise.
template <std::uint32_t E, std::integral T>
  requires(!std::same_as<T, bool>)
[[nodiscard]] constexpr result<typename field<E>::value_type, field_overflow> narrow(field<E>, T v) noexcept {
  using raw_type = typename field<E>::value_type;
  if constexpr (std::is_signed_v<T>) {
    if (v < 0) return unexpected(field_overflow{E, static_cast<std::uint64_t>(static_cast<std::int64_t>(v))});
  }
  const auto u = static_cast<std::uint64_t>(v);
  if (u > std::numeric_limits<raw_type>::max()) return unexpected(field_overflow{E, u});
  return static_cast<raw_type>(u);
}

/// Explicit truncation to the field's width: the low bits, as the VMWRITE instruction keeps
/// them (SDM VMWRITE: excess high bits of the source are ignored). For when that is meant.
template <std::uint32_t E, std::integral T>
  requires(!std::same_as<T, bool>)
[[nodiscard]] constexpr typename field<E>::value_type truncate(field<E>, T v) noexcept {
  return static_cast<typename field<E>::value_type>(v);
}

namespace detail {
/// A field's name as a template argument, so that a compile error can print it.
struct field_name {
  char text[64]{};
};
/// The name of `encoding` from the field table ("..._high" for a HIGH access; empty if unknown).
[[nodiscard]] consteval field_name name_of_field(std::uint32_t encoding) noexcept {
  field_name n{};
  const std::uint32_t full = encoding & ~1u;
  for (const field_info& f : field_table) {
    if (f.encoding != full) continue;
    std::size_t k = 0;
    for (; f.name[k] != '\0' && k + 6 < sizeof n.text; ++k) n.text[k] = f.name[k];
    if (is_high_access(encoding)) {
      for (const char c : {'_', 'h', 'i', 'g', 'h'}) n.text[k++] = c;
    }
  }
  return n;
}

// Called only when an integer constant does not fit the field: not constexpr, so the
// consteval conversion below fails to compile and names the reason, the field and its width.
template <field_name Field, field_width Width>
void integer_constant_does_not_fit_the_vmcs_field_width() noexcept {}
// Called only for a run-time integer whose type is not the field's value type (a uint64_t
// into a 16-bit field, an int into a 32-bit field): the name says what to do.
template <field_name Field, field_width Width>
void run_time_integer_is_not_the_vmcs_field_type__narrow_it_with_vmx_narrow_or_vmx_truncate() noexcept {}

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

  /// An integer constant: compiles only if its value fits the field. A run-time integer of
  /// another type does not compile either, with a message naming the field, its width and
  /// vmx::narrow / vmx::truncate. (Taken by reference, so that __builtin_constant_p can tell
  /// a run-time value from a constant before the value is read.)
  template <std::integral T>
    requires(!std::same_as<T, raw_type> && !std::same_as<T, bool>)
  consteval field_value(const T& constant) noexcept  // NOLINT(google-explicit-constructor)
      : raw_(0) {
    if (!__builtin_constant_p(constant))
      detail::run_time_integer_is_not_the_vmcs_field_type__narrow_it_with_vmx_narrow_or_vmx_truncate<
          detail::name_of_field(E), field<E>::width>();
    if (!detail::constant_fits<T, raw_type>(constant))
      detail::integer_constant_does_not_fit_the_vmcs_field_width<detail::name_of_field(E), field<E>::width>();
    raw_ = static_cast<raw_type>(constant);
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
