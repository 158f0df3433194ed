// SPDX-License-Identifier: MIT
/// @file
/// @brief The SVM adapter of the neutral executor paging::apply_mmu_actions
/// (paging/cr_write_apply.hpp): refresh or rebuild the mmu_context after a CR write the
/// hypervisor emulated or intercepted, check the PAE PDPTEs, and say which TLB_CONTROL the
/// next VMRUN needs.
///
/// - PDPTEs: the VMCB has no PDPTE fields (APM Vol. 2, Table B-2), so nothing is stored;
///   the PDPTEs are still loaded and checked (a present one with a reserved bit makes the
///   emulated MOV #GP(0), SDM 4.4.1), and returned for a shadow-paging caller.
/// - TLB: any flush action (SDM 4.10.4.1) becomes a flush of the guest's translations on
///   the next VMRUN: TLB_CONTROL 03h (the guest's ASID, global entries included) if the
///   processor has FlushByAsid (CPUID Fn8000_000A EDX[6]), else 01h, the entire TLB, the
///   only flush older processors offer (APM 15.16). Nested paging does not change that: the
///   TLB caches the guest's linear translations whatever stage produced them.
/// - Shadow paging: reset_mmu means the caller unloads its shadow roots (reported in the
///   actions).
#pragma once

#include <cstdint>

#include "tlb.hpp"
#include "../paging/cr_write.hpp"
#include "../paging/cr_write_apply.hpp"
#include "../paging/guest_memory.hpp"
#include "../paging/mmu.hpp"
#include "../paging/pdptr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/result.hpp"

namespace hvkit::svm {

/// What was done.
struct cr_apply_result {
  tlb_control flush = tlb_control::do_nothing;  ///< OR it into the VMCB's TLB_CONTROL for the next VMRUN
  bool pdptes_loaded = false;
  bool mmu_rebuilt = false;  ///< role refreshed (and, on reset_mmu, root recomputed)
};

/// The TLB_CONTROL for `actions` (see the file comment).
[[nodiscard]] constexpr tlb_control tlb_control_for(paging::mmu_actions actions, bool flush_by_asid) noexcept {
  if (paging::tlb_flush_scope_for(actions) == paging::tlb_flush_scope::none) return tlb_control::do_nothing;
  return flush_guest(flush_by_asid);
}

/// Applies `actions` (from cr_write_actions(before, after, ...)) for the new state `after`
/// with guest CR3 `cr3`: PDPTEs first (a reserved bit: the pdptr_error, #GP(0), and nothing
/// changed), then the MMU context, then the TLB_CONTROL verdict.
template <paging::guest_memory M>
constexpr result<cr_apply_result, paging::pdptr_error> apply_cr_write_actions(paging::mmu_context& mmu,
                                                                           paging::mmu_actions actions,
                                                                           const paging::cr_state& after,
                                                                           x86::cr3 cr3, const M& memory,
                                                                           unsigned maxphyaddr,
                                                                           bool flush_by_asid) noexcept {
  const auto r = paging::apply_mmu_actions(mmu, actions, after, cr3, memory, maxphyaddr);
  if (!r) return unexpected(r.error().pdpte);
  cr_apply_result out;
  out.pdptes_loaded = r->pdptes_loaded;
  out.mmu_rebuilt = r->mmu_rebuilt;
  out.flush = tlb_control_for(actions, flush_by_asid);
  return out;
}

}  // namespace hvkit::svm
