// SPDX-License-Identifier: MIT
/// @file
/// @brief CR0/CR4 guest/host masks: the guest-owned-bit policy, masks computed from it and
/// the enabled features, the guest-visible value, and the CR4.CET / CR0.WP rule.
///
/// A bit clear in the guest/host mask is guest-owned: guest reads return the real register
/// bit and guest writes change it without a VM exit. A bit set in the mask is host-owned:
/// reads return the read-shadow bit, and a write that would change it relative to the shadow
/// exits (SDM 25.6.6, 26.1.3, 26.3 "MOV to CR0/CR4").
/// The sets of bits that may ever be guest-owned live in <hvkit/x86/guest_owned.hpp>, next to the
/// MMU-role invariant; every policy here is an x86::guest_owned_set, so a policy handing the
/// guest a role bit other than CR0.WP does not compile.
#pragma once

#include <cstdint>

#include "../x86/cr.hpp"
#include "../x86/cr_rules.hpp"
#include "../x86/guest_owned.hpp"

namespace hvkit::vmx {

/// What the guest-owned set may depend on at run time.
struct cr_mask_features {
  /// EPT on: CR0.WP, CR4.PGE and CR4.CET may be guest-owned. With shadow paging the shadow
  /// page tables encode WP (docs/background.md §1), a PGE toggle flushes global translations
  /// the shadow MMU must drop (SDM 4.10.4.1), and CET=1 with the guest's WP=0 must #GP while
  /// the real WP is forced to 1: all three exit (x86::guest_ownable_cr0/cr4).
  bool ept = false;
  /// The CR4 bits the guest's CPUID allows it to set (e.g. FSGSBASE, CET only when exposed).
  /// A bit the guest may not set must stay host-owned, so that setting it exits and the
  /// hypervisor can inject #GP.
  x86::cr4 guest_cr4_allowed{};
  /// The paging kind `ept` selects.
  [[nodiscard]] constexpr x86::paging_kind paging() const noexcept {
    return ept ? x86::paging_kind::two_dimensional : x86::paging_kind::shadow;
  }
};

/// The guest-owned bits (mask zeros) of a policy under the given features.
struct guest_owned_bits {
  x86::cr0 cr0{};
  x86::cr4 cr4{};
  /// The CR0 guest/host mask: every bit host-owned except the guest-owned ones.
  [[nodiscard]] constexpr std::uint64_t cr0_mask() const noexcept { return ~cr0.raw(); }
  /// The CR4 guest/host mask.
  [[nodiscard]] constexpr std::uint64_t cr4_mask() const noexcept { return ~cr4.raw(); }
};

/// Computes the guest-owned bits of `Policy` (an x86::guest_owned_set, default the widest).
/// CR0.TS is always allowed (lazy FPU switching is the hypervisor's choice); CR0.WP, CR4.PGE
/// and CR4.CET only with EPT (x86::guest_ownable_cr0/cr4); a CR4 bit only if the guest may set it.
template <class Policy = x86::max_guest_owned>
[[nodiscard]] constexpr guest_owned_bits make_guest_owned(cr_mask_features f) noexcept {
  const x86::cr0 c0 = Policy::cr0_bits & x86::guest_ownable_cr0(f.paging());
  const x86::cr4 c4 = Policy::cr4_bits & x86::guest_ownable_cr4(f.paging()) & f.guest_cr4_allowed;
  return {c0, c4};
}

/// The value the guest sees for a CR (MOV from CR0/CR4, SMSW): guest-owned bits from the
/// real register, host-owned bits from the read shadow (SDM 26.3, "MOV from CR0/CR4").
[[nodiscard]] constexpr std::uint64_t guest_visible(std::uint64_t actual, std::uint64_t read_shadow,
                                                    std::uint64_t guest_host_mask) noexcept {
  return (actual & ~guest_host_mask) | (read_shadow & guest_host_mask);
}
[[nodiscard]] constexpr x86::cr0 guest_visible_cr0(x86::cr0 actual, x86::cr0 shadow, std::uint64_t mask) noexcept {
  return x86::cr0{guest_visible(actual.raw(), shadow.raw(), mask)};
}
[[nodiscard]] constexpr x86::cr4 guest_visible_cr4(x86::cr4 actual, x86::cr4 shadow, std::uint64_t mask) noexcept {
  return x86::cr4{guest_visible(actual.raw(), shadow.raw(), mask)};
}

/// True if a guest MOV to CR with value `v` exits: some host-owned bit differs from the read
/// shadow (SDM 26.1.3 "MOV to CR0/CR4").
[[nodiscard]] constexpr bool mov_to_cr_exits(std::uint64_t v, std::uint64_t read_shadow, std::uint64_t mask) noexcept {
  return ((v ^ read_shadow) & mask) != 0;
}

/// CR4.CET needs CR0.WP (x86/cr_rules.hpp).
using x86::cet_wp_consistent;

}  // namespace hvkit::vmx
