/// @file
/// @brief What a hypervisor must do to its MMU after a guest write to CR0, CR4 or EFER: a
/// pure function of (old state, new state, paging kind).
///
/// Rules (docs/background.md §1, SDM 4.4.1, 4.10.4.1):
/// - the paging mode changes (including CR0.PG either way): reset the MMU (unload roots)
///   and rebuild the permission metadata;
/// - another role bit changes (CR0.WP, CR4.SMEP/SMAP/PKE/PKS/PSE, EFER.NXE, as normalised
///   by make_cpu_role): with two-dimensional paging (EPT/NPT) refresh the permission
///   metadata only, the roots stay (the TDP tables do not depend on these bits); with
///   shadow paging reset the MMU, because the shadow page roles encode them;
/// - nothing that feeds the role changes (e.g. a WP toggle while CR0.PG=0): nothing;
/// - PDPTRs are reloaded when PAE paging is in use after a MOV to CR0/CR4 that modifies
///   CR0.CD, CR0.NW, CR0.PG, CR4.PAE, CR4.PGE, CR4.PSE or CR4.SMEP (SDM 4.4.1);
/// - TLB: all entries of all PCIDs, global ones included, when CR0.PG goes 1->0, CR4.PGE
///   changes or CR4.PCIDE goes 1->0; all entries of the current PCID when CR4.PAE changes
///   or CR4.SMEP goes 0->1 (SDM 4.10.4.1).
/// The function does not decide whether the write is legal (#GP); check that first.
#pragma once

#include <cstdint>

#include "role.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/flags.hpp"
#include "../x86/paging_mode.hpp"

namespace hvkit::paging {

/// How the hypervisor maps guest memory.
enum class paging_kind : std::uint8_t {
  two_dimensional,  ///< EPT / NPT: the hardware walks the guest page tables
  shadow,           ///< shadow page tables built by the hypervisor
};

/// Actions after a control-register write. Empty means nothing to do.
class mmu_actions : public x86::flags<mmu_actions, std::uint8_t> {
 public:
  using flags::flags;
  /// Recompute the role and select its permission table (O(1), see mmu_context).
  static const mmu_actions refresh_permissions;
  /// Reset the MMU context and unload its roots (always comes with refresh_permissions).
  static const mmu_actions reset_mmu;
  /// Load the four PDPTEs from CR3 (PAE paging, SDM 4.4.1); a PDPTE with reserved bits
  /// set makes the write #GP.
  static const mmu_actions reload_pdptrs;
  /// Invalidate the TLB and paging-structure caches for the current PCID.
  static const mmu_actions flush_tlb_current;
  /// Invalidate all TLB entries (global ones included) and paging-structure caches for all PCIDs.
  static const mmu_actions flush_tlb_all;
};
inline constexpr mmu_actions mmu_actions::refresh_permissions = mmu_actions::bit(0);
inline constexpr mmu_actions mmu_actions::reset_mmu = mmu_actions::bit(1);
inline constexpr mmu_actions mmu_actions::reload_pdptrs = mmu_actions::bit(2);
inline constexpr mmu_actions mmu_actions::flush_tlb_current = mmu_actions::bit(3);
inline constexpr mmu_actions mmu_actions::flush_tlb_all = mmu_actions::bit(4);

/// The control registers that decide translation.
struct cr_state {
  x86::cr0 cr0{};
  x86::cr4 cr4{};
  x86::efer efer{};
};

/// EFER with LMA = LME && CR0.PG, as the processor sets it (SDM 2.2.1, 10.8.5).
[[nodiscard]] constexpr x86::efer efer_with_lma(x86::cr0 cr0, x86::efer efer) noexcept {
  return efer.with(x86::efer::lma, efer.test(x86::efer::lme) && cr0.test(x86::cr0::pg));
}

/// The actions after the guest's control registers changed from `before` to `after` (one
/// MOV to CR0, MOV to CR4 or WRMSR to EFER, or several at once as on a VM entry). EFER.LMA
/// is recomputed from LME and PG for both states.
[[nodiscard]] constexpr mmu_actions cr_write_actions(cr_state before, cr_state after, paging_kind kind) noexcept {
  const cpu_role old_role = make_cpu_role(before.cr0, before.cr4, efer_with_lma(before.cr0, before.efer));
  const cpu_role new_role = make_cpu_role(after.cr0, after.cr4, efer_with_lma(after.cr0, after.efer));
  mmu_actions out{};
  if (old_role.mode() != new_role.mode()) {
    out = mmu_actions::reset_mmu | mmu_actions::refresh_permissions;
  } else if (old_role != new_role) {
    out = kind == paging_kind::shadow ? mmu_actions::reset_mmu | mmu_actions::refresh_permissions
                                      : mmu_actions::refresh_permissions;
  }

  const x86::cr0 cr0_changed = before.cr0 ^ after.cr0;
  const x86::cr4 cr4_changed = before.cr4 ^ after.cr4;
  // SDM 4.4.1: PDPTEs are loaded if PAE paging is in use after the write and it modifies
  // CR0.CD/NW/PG or CR4.PAE/PGE/PSE/SMEP.
  const bool pdpte_bits_changed = cr0_changed.any(x86::cr0::cd | x86::cr0::nw | x86::cr0::pg) ||
                                  cr4_changed.any(x86::cr4::pae | x86::cr4::pge | x86::cr4::pse | x86::cr4::smep);
  if (new_role.mode() == x86::paging_mode::pae && pdpte_bits_changed) out = out | mmu_actions::reload_pdptrs;

  // SDM 4.10.4.1, MOV to CR0 and MOV to CR4.
  const bool pg_cleared = before.cr0.test(x86::cr0::pg) && !after.cr0.test(x86::cr0::pg);
  const bool pcide_cleared = before.cr4.test(x86::cr4::pcide) && !after.cr4.test(x86::cr4::pcide);
  const bool smep_set = !before.cr4.test(x86::cr4::smep) && after.cr4.test(x86::cr4::smep);
  if (pg_cleared || cr4_changed.any(x86::cr4::pge) || pcide_cleared) {
    out = out | mmu_actions::flush_tlb_all;
  } else if (cr4_changed.any(x86::cr4::pae) || smep_set) {
    out = out | mmu_actions::flush_tlb_current;
  }
  return out;
}

}  // namespace hvkit::paging
