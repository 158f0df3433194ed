// SPDX-License-Identifier: MIT
/// @file
/// @brief The TLB flush a change to a nested page table requires under SVM (AMD APM Vol. 2,
/// 15.16 "TLB Control"; 15.25 "Nested Paging").
///
/// Guest translations, nested ones included, are cached tagged with the guest's ASID on each
/// processor. After a change paging/tlb_invalidation.hpp calls required, every vCPU using the
/// nested table must, on every processor it may have cached entries on, either run its next
/// VMRUN with TLB_CONTROL = 03h (flush this ASID; with FlushByAsid) or 01h (flush everything;
/// without it), or get a new ASID. A vCPU running at the time is kicked out first. A removed
/// restriction needs nothing: AMD processors re-walk before reporting a fault that a stale
/// entry alone would cause (the exit, when it comes, is then spurious at most).
#pragma once

#include <cstdint>

#include "tlb.hpp"
#include "vcpu_asid.hpp"
#include "../paging/tlb_invalidation.hpp"

namespace hvkit::svm {

/// The TLB_CONTROL the change needs on the next VMRUN of each affected vCPU (do_nothing if none).
[[nodiscard]] constexpr tlb_control npt_change_flush(paging::mapping_change c, bool flush_by_asid) noexcept {
  if (paging::required_invalidation(c) == paging::invalidation::none) return tlb_control::do_nothing;
  return flush_guest(flush_by_asid);
}

/// Records the change on a vCPU: its next prepare_vmrun() flushes (or gives it a fresh ASID).
constexpr void note_npt_change(vcpu_asid& v, paging::mapping_change c) noexcept {
  if (paging::required_invalidation(c) != paging::invalidation::none) v.flush_requested = true;
}

}  // namespace hvkit::svm
