/// @file
/// @brief The `vmcs_backend` concept and the typed VMREAD/VMWRITE front end.
///
/// A backend moves raw values by encoding (hardware VMREAD/VMWRITE, a software VMCS, a cache
/// in front of either). The typed front end, vmx::vmread(b, fields::x) and
/// vmx::vmwrite(b, fields::x, v), takes the value type from the field: writing a read-only
/// (VM-exit information) field or writing/reading with the wrong width does not compile.
#pragma once

#include <concepts>
#include <cstdint>
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

/// VMREAD into `out`, whose type must be exactly the field's value type.
template <vmcs_backend B, std::uint32_t E, class T>
[[nodiscard]] constexpr result<void, vm_fail> vmread(B& b, field<E> f, T& out) noexcept {
  static_assert(std::same_as<T, typename field<E>::value_type>,
                "VMCS field width mismatch: read into the field's own value type (SDM 25.11.2 bits 14:13)");
  auto r = vmread(b, f);
  if (!r) return unexpected(r.error());
  out = r.value();
  return {};
}

/// VMWRITE of a typed field. `V` must be exactly the field's value type (no silent
/// truncation), and the field must not be a read-only VM-exit information field.
template <vmcs_backend B, std::uint32_t E, class V>
constexpr result<void, vm_fail> vmwrite(B& b, field<E>, V v) noexcept {
  static_assert(!field<E>::read_only,
                "VMWRITE to a read-only VMCS field (VM-exit information, SDM 25.9; error 13)");
  static_assert(std::same_as<V, typename field<E>::value_type>,
                "VMCS field width mismatch: write the field's own value type (SDM 25.11.2 bits 14:13)");
  if constexpr (requires { { b.write(field<E>{}, std::uint64_t{}) } -> std::same_as<result<void, vm_fail>>; })
    return b.write(field<E>{}, static_cast<std::uint64_t>(v));
  else
    return b.write(E, static_cast<std::uint64_t>(v));
}

}  // namespace hvkit::vmx
