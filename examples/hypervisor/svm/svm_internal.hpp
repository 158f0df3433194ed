// SPDX-License-Identifier: MIT
/// @file
/// @brief What the SVM backend's files share: svm.cpp (the core::backend over the VMCB, the
/// VMRUN), svm_setup.cpp (bring-up, nested page table, VMCB set-up), svm_runs.cpp (the runs,
/// the two-guest scheduler), npt_diff.cpp. Internal to examples/hypervisor/svm.
#pragma once

#include <cstdint>

#include <hvkit/cpuid/svm.hpp>
#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/x86/event.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/exit_code.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/ibpb.hpp>
#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/svm/tlb.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../hv.hpp"
#include "../core/state.hpp"

namespace hv::lx {
struct linux_state;
}

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
  /// Shadow paging: EVENTINJ, RIP and RSP of the last VMRUN of this VMCB, to tell an exact
  /// EXITINTINFO from a stale one (svm_reinject.cpp, the Bochs erratum).
  std::uint64_t entry_eventinj = 0, entry_rip = 0, entry_rsp = 0;
  constexpr explicit vmcb_slot(sv::vmcb_page& p) noexcept : page(&p), view(p), tracked(view, false) {}
  vmcb_slot(const vmcb_slot&) = delete;
  vmcb_slot& operator=(const vmcb_slot&) = delete;
};


/// This processor's VMCB when every processor runs a vCPU (svm/svm_smp.cpp: the smp::cpu
/// that GS:[0] points to).
vmcb_slot& this_cpu_slot() noexcept;

/// The VMCB a vCPU's exits work on: an svm::vmcb_memory whose every store goes through its
/// slot's clean-bit tracker. Made by the run (or the processor) that owns the vCPU, bound to
/// one slot (never null) and passed down by reference; the two-guest runs rebind `slot` when
/// they switch VMCBs.
struct current_vmcb {
  vmcb_slot* slot;
  [[nodiscard]] vmcb_slot& cur() const noexcept { return *slot; }
  [[nodiscard]] std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    return slot->tracked.load(offset, bytes);
  }
  void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept { slot->tracked.store(offset, bytes, v); }
};
static_assert(sv::vmcb_memory<current_vmcb>);
/// This processor's VMCB when every processor runs a vCPU: this_cpu_slot()'s (svm/svm_smp.cpp
/// names it `vmcb`; the rest of the backend takes a current_vmcb).
struct this_cpu_vmcb {
  [[nodiscard]] std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    return this_cpu_slot().tracked.load(offset, bytes);
  }
  void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept {
    this_cpu_slot().tracked.store(offset, bytes, v);
  }
};
static_assert(sv::vmcb_memory<this_cpu_vmcb>);
extern this_cpu_vmcb vmcb;
/// The nested page table's PML4 (guest A): entry 0 maps guest RAM, entry 1 the NPT
/// differential's alias while it runs (npt_diff.cpp).
extern std::uint64_t npt_pml4[512];
/// The (identity-mapped) physical address of a hypervisor object.
std::uint64_t pa(const void* p);
/// TLB_CONTROL for the next VMRUN (APM 15.16.1).
void set_tlb_control(current_vmcb& vmcb, sv::tlb_control c);

using exit_code = sv::exit_code;

/// One SVM run of the conformance guest: the vendor-neutral configuration, the CR intercepts
/// (the guest-owned policy expressed as SVM intercepts), and the scheduling.
struct svm_run {
  run_config base;
  sv::cr_intercepts cr;
  /// Two guests and guest A's second VMCB switched on local APIC timer interrupts (INTR
  /// intercept), with this IBPB policy deciding each barrier (else one VMCB, no scheduling).
  bool scheduled = false;
  sv::ibpb_policy ibpb = sv::ibpb_policy::skip_same_guest;
};

/// Exit-code counters: codes 0x00-0x9D as themselves, #NPF (0x400) in slot 0x9F, anything
/// else in 0x9E.
inline constexpr unsigned slot_count = 0xA0;
constexpr unsigned slot(exit_code code) {
  const std::uint64_t c = sv::raw(code);
  return c < 0x9E ? static_cast<unsigned>(c) : code == exit_code::npf ? 0x9F : 0x9E;
}
static_assert(slot_count <= core::exit_slots);

// ---- bring-up (svm_setup.cpp) ---------------------------------------------------------------
extern std::uint8_t host_save_page[4096];    ///< VMSAVE/VMLOAD of the host's own state
extern std::uint64_t npt_pd[512];            ///< guest RAM's 2 MiB nested pages
extern std::uint64_t npt_b_pml4[512], npt_b_pdpt[512], npt_b_pd[512];  ///< guest B's NPT
extern cpuid_ns::svm_info host_svm;          ///< CPUID Fn8000_000A of the host
extern sv::asid_allocator asids;
/// The guest CPU `g` of this boot: the CPUID policy (SVM and VMX hidden), the MSR policy derived
/// from it and its model; for_linux: with the Linux guest's deny list (lx::denied_features);
/// `cpus` cores in the topology (a vCPU per processor).
bool build_policy(core::guest_cpu& g, bool for_linux = false, unsigned cpus = 1);
/// APM 15.4 "Enabling SVM".
bool enable();
/// The nested page table: guest RAM identity-mapped, nothing else.
void build_npt();
/// The conformance runs' VMCB pages: guest A, its second VMCB (vmcb02 stand-in), guest B.
/// Page-aligned storage reserved once (svm_setup.cpp) and handed out by reference; run_all()
/// makes their slots.
struct conformance_vmcb_pages {
  sv::vmcb_page& a1;
  sv::vmcb_page& a2;
  sv::vmcb_page& b;
};
conformance_vmcb_pages conformance_pages();
/// The three slots over those pages (run_all()'s), handed to every run.
struct conformance_vmcbs {
  vmcb_slot& a1;
  vmcb_slot& a2;
  vmcb_slot& b;
};
/// The VMCB for a fresh run of the conformance guest.
void setup_vmcb(current_vmcb& vmcb, const hc::guest_header& g, const svm_run& r, core::vcpu_state& st);
/// The pieces of a VMCB every guest (the conformance guest, the Linux guest) fills the same
/// way: a zeroed VMCB with the common intercepts, the permission maps, ASID and nested paging
/// (then `icpt`'s; `ncr3` 0: no nested paging, for shadow paging), and a flat guest's first state.
void start_vmcb(current_vmcb& vmcb, sv::intercept_set icpt, const sv::io_permission_map& io,
                const sv::msr_permission_map& msr, std::uint64_t ncr3);
void write_flat_state(current_vmcb& vmcb, core::vcpu_state& st, const flat_guest& g, x86::cr0 cr0, x86::cr4 cr4,
                      std::uint64_t cr3);

// ---- the backend (svm.cpp) --------------------------------------------------------------------
/// An exception into the guest through EVENTINJ, merged with a pending event.
void inject(current_vmcb& vmcb, core::vcpu_state& st, x86::vector vec, std::uint32_t error_code = 0);
void report_exit(current_vmcb& vmcb, const char* what, bool expected = false);
/// One #VMEXIT of the vCPU `st` (its registers `regs`: its own, or a second VMCB's) through
/// the core's exit loop; true: run the guest again.
/// `nd`: the run's NPT differential (nullptr: a guest without it); `linux`: the Linux guest's
/// run, whose profile then handles the exit (linux/linux_profile.hpp).
struct npt_diff_state;
bool handle_exit(current_vmcb& vmcb, guest_regs& regs, run_state& st, npt_diff_state* nd = nullptr,
                 lx::linux_state* linux = nullptr);
/// One VMRUN of `vmcb` on the conformance runs' processor.
void vmrun(current_vmcb& vmcb, guest_regs& regs);
/// One VMRUN of `s` (the current VMCB) with the host's VMSAVE area `host_save`; `last` is
/// the VMCB this processor ran last (its clean bits count only if it is `s`, APM 15.15).
void vmrun(guest_regs& regs, vmcb_slot& s, std::uint8_t* host_save, const vmcb_slot*& last);
// ---- re-injection and the re-injection check's unmapped page (svm_reinject.cpp) ----------------
/// The event whose delivery the exit interrupted, as re-injected (kind none: nothing was).
struct reinjected {
  x86::event e{};
  unsigned rip_advance = 0;
  bool valid = false;
};
/// EXITINTINFO corrected for the errata and written into EVENTINJ with the RIP advance a
/// software event needs (APM 15.7.1, 15.7.2).
reinjected reinject_interrupted_event(current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st,
                                      core::check_counters& k);
/// Unmaps the 4 KiB guest page at `gpa` from the nested page table (once).
bool npt_unmap_once(current_vmcb& vmcb, core::check_counters& k, std::uint64_t gpa);
/// An #NPF on the unmapped page: mapped back, the interrupted event re-injected; false: not it.
bool npt_unmapped_page_hit(current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st, core::check_counters& k);
/// The re-injection check's report (hits, instruction length, the event in the VMX layout).
std::uint64_t npt_unmap_report(current_vmcb& vmcb, core::check_counters& k);
extern std::uint64_t exitcode_32bit_errata, qemu_cr3_errata;
/// The guest's EFER: the VMCB's without SVME.
x86::efer guest_efer(current_vmcb& vmcb);
/// The guest's CR0/CR4/EFER (without SVME)/CR3/RFLAGS from `vmcb` (svm_runs.cpp).
guest_paging_regs live_paging_regs(current_vmcb& vmcb);
/// The same as the vCPU `st` sees them (shadow paging: CR0.WP, CR4.PAE, EFER and CR3 the shadow MMU's).
guest_paging_regs live_paging_regs(current_vmcb& vmcb, const core::vcpu_state& st);

// ---- the NPT differential (npt_diff.cpp) ----------------------------------------------------
/// The NPT differential's state: the armed case, hvkit's prediction and what the CPU did, and
/// the run's counts. The run's (svm_runs.cpp run_guest), passed to the backend and down.
struct npt_diff_state {
  bool armed;
  bool pred_npf;
  std::uint64_t pred_info, pred_gpa;
  std::uint32_t pred_result, pred_error;
  bool seen;
  std::uint64_t seen_info, seen_gpa;
  std::uint64_t cases, mismatches, npfs, table_npfs, rsv_npfs, guest_faults, large_cases, errata_ad, errata_q1;
  // ---- issue 25 items 7-8: two processor properties measured against the CPU ----
  // Some cases run with the host's EFER.NXE cleared (VMRUN keeps the host's EFER, so the
  // nested walk sees NXE = 0; the nested entries then carry no NX), some with bit 8 set in
  // the alias's nested PML4E. Each such case is also predicted with the property flipped;
  // where the two predictions differ, the CPU's outcome counts for one or the other.
  bool host_nxe_off, pml4e_bit8;
  std::uint64_t alt_pred_info, alt_pred_gpa;
  bool alt_pred_npf, alt_differs;
  std::uint32_t alt_pred_result, alt_pred_error;
  std::uint64_t nonxe_cases, nonxe_fetch_npfs, id_split, id_set, id_clear;
  std::uint64_t bit8_cases, bit8_split, bit8_reserved, bit8_ignored;
};
/// hc::ept_arm: apply the case's nested layout and predict its outcome (guest CPU `model`).
void npt_arm(current_vmcb& vmcb, npt_diff_state& nd, const cpuid_ns::guest_cpu_model& model, guest_regs& r);
/// A #NPF while a case is armed inside the alias: recorded (true), else false.
bool npt_case_npf(current_vmcb& vmcb, npt_diff_state& nd);
/// hc::ept_check: compare the CPU's outcome with the prediction (0 same, 1 mismatch).
std::uint64_t npt_check(current_vmcb& vmcb, npt_diff_state& nd, guest_regs& r);
/// The run's npt_differential result; the alias removed.
void npt_diff_report(const npt_diff_state& nd, const cpuid_ns::guest_cpu_model& model);

}  // namespace hv::svm
