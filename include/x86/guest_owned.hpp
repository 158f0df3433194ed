// SPDX-License-Identifier: MIT
/// @file
/// @brief The CR bits a hypervisor may ever let the guest own, and the CR bits that feed
/// the MMU role. Kept here so that paging/ and vmx/ share one definition.
///
/// A guest-owned bit is clear in the CR0/CR4 guest/host mask: the guest writes it without a
/// VM exit (SDM 25.6.6), so any state the hypervisor derived from it may be stale. The only
/// such bit that changes translation is CR0.WP, which is why the MMU role must re-sync it
/// from the live register before every permission check (docs/background.md §1: KVM's CR0.WP work).
#pragma once

#include "cr.hpp"

namespace hvkit::x86 {

/// CR0 bits that may be guest-owned: TS (lazy FPU) and WP (only with two-dimensional paging;
/// shadow paging encodes WP in its page tables and must intercept it).
inline constexpr cr0 cr0_possible_guest_owned = cr0::ts | cr0::wp;

/// CR4 bits that may be guest-owned: none of them affects translation or access rights.
inline constexpr cr4 cr4_possible_guest_owned = cr4::pvi | cr4::de | cr4::pce | cr4::osfxsr | cr4::osxmmexcpt |
                                                cr4::pge | cr4::tsd | cr4::fsgsbase | cr4::cet;

/// CR0 bits that change translation or access rights (SDM 4.1.3): paging on/off and WP.
inline constexpr cr0 cr0_mmu_role_bits = cr0::pg | cr0::wp;

/// CR4 bits that change translation or access rights (SDM 4.1.3, 4.6).
inline constexpr cr4 cr4_mmu_role_bits =
    cr4::pse | cr4::pae | cr4::la57 | cr4::smep | cr4::smap | cr4::pke | cr4::pks;

// The invariant the CR0.WP passthrough refresh relies on: the only bit that both feeds the
// role and may be guest-owned is CR0.WP. Adding a role bit to a guest-owned set breaks the build.
static_assert((cr0_mmu_role_bits & cr0_possible_guest_owned) == cr0::wp,
              "CR0: role bits & possibly guest-owned bits must be exactly {WP}");
static_assert((cr4_mmu_role_bits & cr4_possible_guest_owned).none(),
              "CR4: no bit may both feed the MMU role and be guest-owned");

/// A set of guest-owned CR bits, checked at compile time. Every policy that lets the guest
/// own CR bits is spelled as a guest_owned_set of flag values, as in
/// `guest_owned_set<x86::cr0::ts | x86::cr0::wp, x86::cr4::pge>`, so a policy that would hand
/// the guest a bit feeding the MMU role (other than CR0.WP) does not compile. Raw integers are
/// not accepted (the x86::cr0/x86::cr4 constructors from integers are explicit).
template <cr0 Cr0Bits = cr0{}, cr4 Cr4Bits = cr4{}>
struct guest_owned_set {
  static constexpr cr0 cr0_bits = Cr0Bits;
  static constexpr cr4 cr4_bits = Cr4Bits;
  static_assert((cr0_bits & ~cr0_possible_guest_owned).none(), "CR0 bit that may never be guest-owned");
  static_assert((cr4_bits & ~cr4_possible_guest_owned).none(), "CR4 bit that may never be guest-owned");
  static_assert(((cr0_bits & cr0_mmu_role_bits) & ~cr0::wp).none(),
                "a guest-owned CR0 bit feeds the MMU role (only WP is refreshed from the live CR0)");
  static_assert((cr4_bits & cr4_mmu_role_bits).none(), "a guest-owned CR4 bit feeds the MMU role");
};

/// The widest policy: every bit that may be guest-owned.
using max_guest_owned = guest_owned_set<cr0_possible_guest_owned, cr4_possible_guest_owned>;

}  // namespace hvkit::x86
