// SPDX-License-Identifier: MIT
/// @file
/// @brief The CR bits a hypervisor may ever let the guest own (per paging kind), the CR bits
/// that feed the MMU role, and the CR bits whose change invalidates TLBs or reloads PDPTEs.
/// Kept here so that paging/, vmx/ and svm/ share one definition.
///
/// A guest-owned bit is clear in the CR0/CR4 guest/host mask (VMX) or not intercepted (SVM):
/// the guest writes it without a VM exit (SDM 25.6.6), so any state the hypervisor derived
/// from it may be stale, and nothing the hypervisor would do on that write happens.
/// - With two-dimensional paging (EPT/NPT) the processor walks the guest's tables and performs
///   the guest's own TLB invalidations (for its VPID/ASID), so a bit may be guest-owned unless
///   it feeds the MMU role; the one exception, CR0.WP, is re-synced from the live register
///   before every permission check (docs/background.md §1: KVM's CR0.WP work).
/// - With shadow paging the processor walks the hypervisor's tables: a guest write that would
///   invalidate TLB entries (SDM 4.10.4.1), reload the PDPTEs (SDM 4.4.1) or change the role
///   of the shadow pages must exit, or the shadow MMU keeps translations the guest removed.
///   Shadow paging also runs the guest with the real CR0.WP forced to 1, so the processor
///   would accept a guest's CR4.CET=1 while the guest's own CR0.WP is 0 (SDM 2.5: CET "can be
///   set only if CR0.WP is set"): that write must exit for its #GP.
///   So CR0.WP, CR4.PGE and CR4.CET are guest-ownable only with two-dimensional paging.
#pragma once

#include <cstdint>

#include "cr.hpp"

namespace hvkit::x86 {

/// How the hypervisor maps guest memory.
enum class paging_kind : std::uint8_t {
  two_dimensional,  ///< EPT / NPT: the hardware walks the guest page tables
  shadow,           ///< shadow page tables built by the hypervisor
};

/// CR0 bits that may be guest-owned with some paging kind: TS (lazy FPU) and WP (only with
/// two-dimensional paging; shadow paging encodes WP in its page tables and must intercept it).
inline constexpr cr0 cr0_possible_guest_owned = cr0::ts | cr0::wp;

/// CR4 bits that may be guest-owned with some paging kind: none of them affects translation or
/// access rights; PGE (global-TLB flush when it changes) and CET (legal only with CR0.WP=1)
/// only with two-dimensional paging.
inline constexpr cr4 cr4_possible_guest_owned = cr4::pvi | cr4::de | cr4::pce | cr4::osfxsr | cr4::osxmmexcpt |
                                                cr4::pge | cr4::tsd | cr4::fsgsbase | cr4::cet;

/// CR0 bits whose change (by MOV to CR0) invalidates TLB entries: PG going 1->0 (SDM 4.10.4.1).
inline constexpr cr0 cr0_tlb_flush_bits = cr0::pg;
/// CR4 bits whose change invalidates TLB entries (SDM 4.10.4.1, "MOV to CR4"): PGE either way
/// and PCIDE 1->0 (all PCIDs, global entries included); PAE either way and SMEP 0->1 (the
/// current PCID).
inline constexpr cr4 cr4_tlb_flush_bits = cr4::pge | cr4::pcide | cr4::pae | cr4::smep;
/// CR0 bits whose change reloads the PDPTEs when PAE paging is in use after the write (SDM 4.4.1).
inline constexpr cr0 cr0_pdpte_reload_bits = cr0::cd | cr0::nw | cr0::pg;
/// CR4 bits whose change reloads the PDPTEs when PAE paging is in use after the write (SDM 4.4.1).
inline constexpr cr4 cr4_pdpte_reload_bits = cr4::pae | cr4::pge | cr4::pse | cr4::smep;

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

/// The CR0 bits that may be guest-owned under paging kind `k`: WP only with two-dimensional
/// paging (a shadow MMU encodes WP in its tables).
[[nodiscard]] constexpr cr0 guest_ownable_cr0(paging_kind k) noexcept {
  return k == paging_kind::two_dimensional ? cr0_possible_guest_owned : cr0_possible_guest_owned.without(cr0::wp);
}
/// The CR4 bits that may be guest-owned under paging kind `k`. PGE and CET only with
/// two-dimensional paging: a guest PGE toggle flushes global translations (SDM 4.10.4.1),
/// which a shadow MMU must see, and CET=1 needs the guest's CR0.WP=1, which the processor
/// cannot check while shadow paging forces the real CR0.WP to 1.
[[nodiscard]] constexpr cr4 guest_ownable_cr4(paging_kind k) noexcept {
  return k == paging_kind::two_dimensional ? cr4_possible_guest_owned
                                           : cr4_possible_guest_owned.without(cr4::pge | cr4::cet);
}
// Shadow paging: no guest-ownable bit feeds the role, invalidates TLB entries or reloads PDPTEs.
static_assert((guest_ownable_cr0(paging_kind::shadow) &
               (cr0_mmu_role_bits | cr0_tlb_flush_bits | cr0_pdpte_reload_bits)).none(),
              "shadow paging: a guest-ownable CR0 bit feeds the role, flushes the TLB or reloads PDPTEs");
static_assert((guest_ownable_cr4(paging_kind::shadow) &
               (cr4_mmu_role_bits | cr4_tlb_flush_bits | cr4_pdpte_reload_bits)).none(),
              "shadow paging: a guest-ownable CR4 bit feeds the role, flushes the TLB or reloads PDPTEs");
// Two-dimensional paging: the hardware performs the guest's TLB flushes and PDPTE loads, only
// the role matters (the CR0.WP exception above).
static_assert((guest_ownable_cr4(paging_kind::two_dimensional) & cr4_mmu_role_bits).none());

/// The widest policy: every bit that may be guest-owned.
using max_guest_owned = guest_owned_set<cr0_possible_guest_owned, cr4_possible_guest_owned>;

}  // namespace hvkit::x86
