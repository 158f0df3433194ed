// SPDX-License-Identifier: MIT
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
#include "../x86/cr_rules.hpp"
#include "../x86/efer.hpp"
#include "../x86/flags.hpp"
#include "../x86/guest_owned.hpp"
#include "../x86/paging_mode.hpp"

namespace hvkit::paging {

/// How the hypervisor maps guest memory (two_dimensional: EPT/NPT, or shadow); defined in
/// x86/guest_owned.hpp, next to the CR bits each kind lets the guest own.
using x86::paging_kind;

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

/// A control-register write as the instruction makes it, whoever reports it: a VMX CR-access
/// exit qualification, an SVM CR write intercept (EXITINFO1 with decode assists, the
/// emulator's decode without), or the emulator itself.
struct cr_write_op {
  enum class instruction : std::uint8_t {
    mov_to_cr,  ///< MOV to CR`cr` from a register holding `source`
    clts,       ///< CLTS (CR0.TS cleared)
    lmsw,       ///< LMSW with operand `source` (bits 15:0)
  };
  instruction op = instruction::mov_to_cr;
  unsigned cr = 0;
  std::uint64_t source = 0;
};

/// The outcome of a control-register write.
struct cr_write_outcome {
  unsigned cr = 0;                                   ///< 0, 3, 4 or 8 (or what a MOV named)
  x86::cr_write_fault fault = x86::cr_write_fault::none;  ///< not none: inject #GP(0), change nothing
  cr_state after{};                                  ///< CR0/CR4: the new guest-visible state (if no fault)
  mmu_actions actions{};                             ///< CR0/CR4: what the MMU must do (if no fault)
  std::uint64_t value = 0;                           ///< CR3/CR8: the value to load (if no fault)
  bool cr3_noflush = false;                          ///< CR3: bit 63 with CR4.PCIDE=1, keep the PCID's TLB entries
};

/// Evaluates a control-register write against the guest-visible state `c`: the #GP(0) rules of
/// x86/cr_rules.hpp, the new value, and for CR0/CR4 the MMU actions (cr_write_actions). A MOV
/// source is the whole register as saved: outside 64-bit mode only its low 32 bits are the
/// operand (x86::mov_to_cr_source). CR8: bits 63:4 reserved. CR3: x86::check_cr3_write. A MOV
/// to another CR is returned with `cr` and `value` for the caller to decide.
[[nodiscard]] constexpr cr_write_outcome evaluate_cr_write(cr_write_op w, const x86::cr_context& c,
                                                           paging_kind kind) noexcept {
  cr_write_outcome out;
  cr_state after{c.cr0, c.cr4, c.efer};
  const std::uint64_t v = x86::mov_to_cr_source(c, w.source);
  switch (w.op) {
    case cr_write_op::instruction::mov_to_cr:
      out.cr = w.cr;
      if (w.cr == 0) {
        const x86::cr0 n{v};
        out.fault = x86::check_cr0_write(c, n);
        after.cr0 = x86::cr0_after_mov(n);
      } else if (w.cr == 4) {
        const x86::cr4 n{v};
        out.fault = x86::check_cr4_write(c, n);
        after.cr4 = n;
      } else if (w.cr == 8) {
        out.value = v;
        if (v > 0xf) out.fault = x86::cr_write_fault::reserved_bit;  // CR8 bits 63:4 reserved
        return out;
      } else if (w.cr == 3) {
        const x86::cr3_load l = x86::check_cr3_write(c, v);
        out.value = l.value;
        out.cr3_noflush = l.noflush;
        out.fault = l.fault;
        return out;
      } else {
        out.value = v;
        return out;
      }
      break;
    case cr_write_op::instruction::clts:
      out.cr = 0;
      after.cr0 = x86::cr0_after_clts(c.cr0);
      break;
    case cr_write_op::instruction::lmsw:
      out.cr = 0;
      after.cr0 = x86::cr0_after_lmsw(c.cr0, static_cast<std::uint16_t>(w.source));
      break;
  }
  if (out.fault != x86::cr_write_fault::none) return out;
  // EFER.LMA follows LME && CR0.PG (SDM 2.2.1, 10.8.5; APM Vol. 2 14.6): a CR0 write may enter
  // or leave long mode; a VMX caller mirrors it in the "IA-32e mode guest" entry control.
  after.efer = efer_with_lma(after.cr0, c.efer);
  out.after = after;
  out.actions = cr_write_actions({c.cr0, c.cr4, c.efer}, after, kind);
  return out;
}

}  // namespace hvkit::paging
