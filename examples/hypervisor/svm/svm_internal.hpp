// SPDX-License-Identifier: MIT
/// @file
/// @brief What the SVM backend's files share (svm.cpp, npt_diff.cpp): the current VMCB with
/// its clean-bit tracker, the nested page table's root and TLB control. Internal to
/// examples/hypervisor/svm.
#pragma once

#include <cstdint>

#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/svm/tlb.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../hv.hpp"

namespace hv::svm {

namespace sv = hvkit::svm;
namespace fld = hvkit::svm::fields;

/// One VMCB of the backend: the page whose physical address VMRUN takes (identity-mapped),
/// the typed view of it, its clean-bit tracker (APM 15.15; it writes nothing without
/// VmcbClean, as on every Bochs model) and the ASID of the vCPU it belongs to (15.16).
struct vmcb_slot {
  sv::vmcb_page* page;
  sv::vmcb_view view;
  sv::clean_tracker<sv::vmcb_view> tracked;
  sv::asid_allocator::assignment asid{};
  constexpr explicit vmcb_slot(sv::vmcb_page& p) noexcept : page(&p), view(p), tracked(view, false) {}
  vmcb_slot(const vmcb_slot&) = delete;
  vmcb_slot& operator=(const vmcb_slot&) = delete;
};


/// The VMCB the exit handlers work on (the scheduled runs switch it): an svm::vmcb_memory
/// whose every store goes through the current slot's clean-bit tracker.
struct current_vmcb {
  vmcb_slot* slot;
  [[nodiscard]] std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    return slot->tracked.load(offset, bytes);
  }
  void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept { slot->tracked.store(offset, bytes, v); }
};
static_assert(sv::vmcb_memory<current_vmcb>);
extern current_vmcb vmcb;
/// The nested page table's PML4 (guest A): entry 0 maps guest RAM, entry 1 the NPT
/// differential's alias while it runs (npt_diff.cpp).
extern std::uint64_t npt_pml4[512];
/// The (identity-mapped) physical address of a hypervisor object.
std::uint64_t pa(const void* p);
/// TLB_CONTROL for the next VMRUN (APM 15.16.1).
void set_tlb_control(sv::tlb_control c);

// ---- the NPT differential (npt_diff.cpp) ----------------------------------------------------
/// A new run: nothing armed, the counters zero.
void npt_diff_reset();
/// hc::ept_arm: apply the case's nested layout and predict its outcome.
void npt_arm(guest_regs& r);
/// A #NPF while a case is armed inside the alias: recorded (true), else false.
bool npt_case_npf();
/// hc::ept_check: compare the CPU's outcome with the prediction (0 same, 1 mismatch).
std::uint64_t npt_check(guest_regs& r);
/// The run's npt_differential result; the alias removed.
void npt_diff_report();

}  // namespace hv::svm
