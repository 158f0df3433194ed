// SPDX-License-Identifier: MIT
/// @file
/// @brief Opt-in: typed VMCS field lists built with Boost.Hana (granular headers only):
/// guest state, host state, controls, VM-exit information, and what they are for:
/// iterating, copying and diffing VMCSes, and the VMCS-shadowing VMREAD/VMWRITE bitmaps
/// generated at compile time (SDM Vol. 3C 25.6.15; 26.1.3 "VMREAD, VMWRITE").
///
/// Each list is a hana::tuple of field<> objects, so a visitor sees each field's own value
/// type. Requires Boost.Hana (Boost >= 1.66) on the include path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/hana/bool.hpp>
#include <boost/hana/filter.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>

#include "backend.hpp"
#include "fields.hpp"

namespace hvkit::vmx::lists {

namespace detail {
template <std::size_t... I>
constexpr auto make_all(std::index_sequence<I...>) noexcept {
  return boost::hana::make_tuple(field<field_table[I].encoding>{}...);
}
template <field_type T>
constexpr auto of_type() noexcept {
  return boost::hana::filter(make_all(std::make_index_sequence<field_count>{}),
                             [](auto f) { return boost::hana::bool_c<decltype(f)::type == T>; });
}
}  // namespace detail

/// Every field of the table, in table order.
inline constexpr auto all = detail::make_all(std::make_index_sequence<field_count>{});
/// Guest-state area (SDM 25.4).
inline constexpr auto guest_state = detail::of_type<field_type::guest>();
/// Host-state area (SDM 25.5).
inline constexpr auto host_state = detail::of_type<field_type::host>();
/// VM-execution, VM-exit and VM-entry control fields (SDM 25.6-25.8).
inline constexpr auto controls = detail::of_type<field_type::control>();
/// VM-exit information fields, read-only (SDM 25.9).
inline constexpr auto exit_info = detail::of_type<field_type::exit_info>();

/// The number of fields in a list.
template <class List>
inline constexpr std::size_t size_v = decltype(boost::hana::length(std::declval<List>()))::value;

/// Calls `fn(field)` for every field of `list` (each field<> has its own value_type).
template <class List, class Fn>
constexpr void for_each_field(const List& list, Fn&& fn) noexcept {
  boost::hana::for_each(list, fn);
}

/// Copies every field of `list` from `src` to `dst` (VMREAD, then VMWRITE). Read-only fields
/// go through `dst.store()` when the destination has it (a software VMCS standing for the
/// processor), and are skipped otherwise. Stops at the first failure.
template <class List, vmcs_backend Src, vmcs_backend Dst>
constexpr result<void, vm_fail> copy(const List& list, Src& src, Dst& dst) noexcept {
  result<void, vm_fail> out{};
  boost::hana::for_each(list, [&](auto f) {
    using F = decltype(f);
    if (!out) return;
    auto v = vmread(src, f);
    if (!v) { out = unexpected(v.error()); return; }
    if constexpr (F::read_only) {
      if constexpr (requires { dst.store(f, v.value()); }) dst.store(f, v.value());
    } else {
      auto w = vmwrite(dst, f, v.value());
      if (!w) out = unexpected(w.error());
    }
  });
  return out;
}

/// Compares every field of `list` in `a` and `b`; calls `on_diff(field, value_a, value_b)`
/// for each difference and returns how many fields differ.
template <class List, vmcs_backend A, vmcs_backend B, class OnDiff>
constexpr result<std::size_t, vm_fail> diff(const List& list, A& a, B& b, OnDiff&& on_diff) noexcept {
  std::size_t n = 0;
  bool failed = false;
  vm_fail err{};
  boost::hana::for_each(list, [&](auto f) {
    if (failed) return;
    auto va = vmread(a, f);
    auto vb = vmread(b, f);
    if (!va || !vb) { failed = true; err = !va ? va.error() : vb.error(); return; }
    if (va.value() != vb.value()) { ++n; on_diff(f, va.value(), vb.value()); }
  });
  if (failed) return unexpected(err);
  return n;
}

/// A 4 KiB VMREAD or VMWRITE bitmap: bit n (byte n/8, bit n%8) belongs to the encoding whose
/// bits 14:0 are n; a 1 makes the access exit, a 0 lets it use the shadow VMCS.
using shadow_bitmap = std::array<std::uint8_t, 4096>;

namespace detail {
constexpr void clear_bit(shadow_bitmap& b, std::uint32_t enc) noexcept {
  const std::uint32_t n = enc & 0x7fffu;
  b[n / 8] = static_cast<std::uint8_t>(b[n / 8] & ~(1u << (n % 8)));
}
}  // namespace detail

/// The VMREAD bitmap that lets a guest hypervisor read every field of `list` from the shadow
/// VMCS without a VM exit (HIGH halves of 64-bit fields included); everything else exits.
/// constexpr: a constant initialiser builds it at compile time, a call at run time builds it
/// into a caller's page.
template <class List>
[[nodiscard]] constexpr shadow_bitmap make_vmread_bitmap(const List& list) noexcept {
  shadow_bitmap b{};
  for (auto& x : b) x = 0xff;
  boost::hana::for_each(list, [&](auto f) {
    using F = decltype(f);
    detail::clear_bit(b, F::encoding);
    if constexpr (F::width == field_width::w64) detail::clear_bit(b, F::encoding | 1u);
  });
  return b;
}

/// The VMWRITE bitmap for `list`: like make_vmread_bitmap(), but read-only fields keep
/// exiting (shadow VMWRITE to them needs IA32_VMX_MISC bit 29; the hypervisor decides).
template <class List>
[[nodiscard]] constexpr shadow_bitmap make_vmwrite_bitmap(const List& list) noexcept {
  shadow_bitmap b{};
  for (auto& x : b) x = 0xff;
  boost::hana::for_each(list, [&](auto f) {
    using F = decltype(f);
    if constexpr (!F::read_only) {
      detail::clear_bit(b, F::encoding);
      if constexpr (F::width == field_width::w64) detail::clear_bit(b, F::encoding | 1u);
    }
  });
  return b;
}

}  // namespace hvkit::vmx::lists
