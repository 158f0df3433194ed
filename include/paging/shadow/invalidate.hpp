// SPDX-License-Identifier: MIT
/// @file
/// @brief What a shadow MMU does for the guest's TLB-management operations: INVLPG,
/// INVPCID, MOV to CR3 (with and without the PCID no-flush bit), and MOV to CR0/CR4 or a
/// WRMSR to EFER, driven by the library's cr_write_outcome / mmu_actions.
///
/// The rules (SDM 4.10.4.1, 4.10.4.2, 4.4.1) and what they need here:
/// - The shadow tables never hold a translation the guest's tables do not give (write
///   protection, shadow_mmu.hpp): a TLB that is always up to date is allowed, since the SDM
///   only says when translations *must* be gone (4.10.4.1) and allows the processor to drop
///   any of them at any time (4.10.4.3, "... may invalidate ... at any time"). So INVLPG,
///   INVPCID (any type) and MOV to CR3 with or without the no-flush bit need no shadow work
///   and no host flush; the guest's global pages and PCIDs need nothing either.
/// - MOV to CR3 loads a new root: the cached root for (CR3 root, role[, PDPTEs]) or a new
///   one. With PAE paging the MOV loads the PDPTE registers (SDM 4.4.1): they are part of the
///   root's key, so a PDPT changed in memory takes effect exactly at the next load.
/// - MOV to CR0/CR4 and EFER writes: mmu_actions::reset_mmu (a role bit changed: CR0.WP,
///   PG, CR4.PAE/PSE/SMEP/SMAP/PKE/PKS/LA57, EFER.NXE/LMA) switches to the root of the new
///   role (cached if the role was seen before: a CR0.WP toggle back and forth rebuilds
///   nothing); reload_pdptrs loads the root for the new PDPTEs; flush_tlb_* need nothing
///   (see above).
#pragma once

#include <cstdint>

#include "fault_answer.hpp"
#include "shadow_mmu.hpp"
#include "../cr_write.hpp"
#include "../pdptr.hpp"
#include "../role.hpp"
#include "../../x86/address.hpp"
#include "../../x86/cr3.hpp"

namespace hvkit::paging::shadow {

/// INVLPG `linear` (SDM 4.10.4.1): nothing to do for an always-synchronised shadow MMU.
[[nodiscard]] constexpr host_flush invlpg(x86::gva linear) noexcept {
  static_cast<void>(linear);
  return host_flush::none;
}

/// INVPCID types (SDM Vol. 2A, INVPCID): 0 individual address, 1 single context, 2 all
/// contexts including global, 3 all contexts except global.
enum class invpcid_type : std::uint8_t { address = 0, single_context = 1, all_global = 2, all_nonglobal = 3 };

/// INVPCID of any type: nothing to do (see the file comment).
[[nodiscard]] constexpr host_flush invpcid(invpcid_type type, std::uint16_t pcid, x86::gva linear) noexcept {
  static_cast<void>(type), static_cast<void>(pcid), static_cast<void>(linear);
  return host_flush::none;
}

/// A MOV to CR3 evaluated by evaluate_cr_write() (no fault): loads the root of the new CR3
/// under the current role; `pdptes` are the PDPTE registers the MOV loaded (PAE paging,
/// load_pdptrs()). The no-flush bit changes nothing here (see the file comment).
template <frame_map Map>
context_answer mov_to_cr3(shadow_mmu<Map>& mmu, const cr_write_outcome& o, unsigned maxphyaddr,
                          const pdpte_snapshot& pdptes = {}) noexcept {
  const cpu_role r = mmu.role();
  return mmu.load(r, x86::cr3_root(x86::cr3{o.value}, r.mode(), maxphyaddr), pdptes);
}

/// A MOV to CR0/CR4, CLTS or LMSW evaluated by evaluate_cr_write() (no fault), or a CR0/CR4/
/// EFER change given as `o.after` with `o.actions` from cr_write_actions(..., shadow): acts
/// on the mmu_actions (the file comment); `cr3` is the guest's CR3, `pdptes` the PDPTE
/// registers after the write when it reloads them.
template <frame_map Map>
context_answer control_registers_written(shadow_mmu<Map>& mmu, const cr_write_outcome& o, x86::cr3 cr3,
                                         unsigned maxphyaddr, const pdpte_snapshot& pdptes = {}) noexcept {
  if (!o.actions.any(mmu_actions::reset_mmu | mmu_actions::reload_pdptrs | mmu_actions::refresh_permissions))
    return {mmu.root(), host_flush::none, true};
  const cpu_role r = make_cpu_role(o.after.cr0, o.after.cr4, o.after.efer);
  const pdpte_snapshot p = o.actions.test(mmu_actions::reload_pdptrs) ? pdptes : mmu.pdptes();
  return mmu.load(r, x86::cr3_root(cr3, r.mode(), maxphyaddr), p);
}

}  // namespace hvkit::paging::shadow
