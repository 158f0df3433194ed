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

/// The VMCB the exit handlers work on (the scheduled runs switch it): an svm::vmcb_memory
/// whose every store goes through the current slot's clean-bit tracker. `slot` null: the
/// vCPU of this processor (a vCPU per processor, svm/svm_smp.cpp).
struct current_vmcb {
  vmcb_slot* slot;
  [[nodiscard]] vmcb_slot& cur() const noexcept { return slot ? *slot : this_cpu_slot(); }
  [[nodiscard]] std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    return cur().tracked.load(offset, bytes);
  }
  void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept { cur().tracked.store(offset, bytes, v); }
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
extern vmcb_slot vmcb_a1, vmcb_a2, vmcb_b;   ///< guest A, its second VMCB (vmcb02 stand-in), guest B
extern std::uint8_t host_save_page[4096];    ///< VMSAVE/VMLOAD of the host's own state
extern std::uint64_t npt_pd[512];            ///< guest RAM's 2 MiB nested pages
extern std::uint64_t npt_b_pml4[512], npt_b_pdpt[512], npt_b_pd[512];  ///< guest B's NPT
extern cpuid_ns::svm_info host_svm;          ///< CPUID Fn8000_000A of the host
extern sv::asid_allocator asids;
/// The guest's CPUID policy (SVM and VMX hidden) and the MSR policy derived from it;
/// for_linux: with the Linux guest's deny list (lx::denied_features); `cpus` cores in the
/// topology (a vCPU per processor).
bool build_policy(bool for_linux = false, unsigned cpus = 1);
/// APM 15.4 "Enabling SVM".
bool enable();
/// The nested page table: guest RAM identity-mapped, nothing else.
void build_npt();
/// The VMCB for a fresh run of the conformance guest.
void setup_vmcb(const hc::guest_header& g, const svm_run& r, core::vcpu_state& st);
/// The pieces of a VMCB every guest (the conformance guest, the Linux guest) fills the same
/// way: a zeroed VMCB with the common intercepts, the permission maps, ASID and nested paging
/// (then `icpt`'s; `ncr3` 0: no nested paging, for shadow paging), and a flat guest's first state.
void start_vmcb(sv::intercept_set icpt, const sv::io_permission_map& io, const sv::msr_permission_map& msr,
                std::uint64_t ncr3);
void write_flat_state(core::vcpu_state& st, const flat_guest& g, x86::cr0 cr0, x86::cr4 cr4, std::uint64_t cr3);
/// The guest CPU model (MAXPHYADDR, LAM, the CR4 bits the guest may set) of the guest's policy.
cpuid_ns::guest_cpu_model guest_model();

// ---- the backend (svm.cpp) --------------------------------------------------------------------
/// An exception into the guest through EVENTINJ, merged with a pending event.
void inject(core::vcpu_state& st, x86::vector vec, std::uint32_t error_code = 0);
void report_exit(const char* what, bool expected = false);
/// One #VMEXIT of the vCPU `st` (its registers `regs`: its own, or a second VMCB's) through
/// the core's exit loop; true: run the guest again.
bool handle_exit(guest_regs& regs, run_state& st);
/// One VMRUN of the current VMCB.
void vmrun(guest_regs& regs);
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
reinjected reinject_interrupted_event(guest_regs& regs, const core::vcpu_state& st);
/// Unmaps the 4 KiB guest page at `gpa` from the nested page table (once).
bool npt_unmap_once(std::uint64_t gpa);
/// An #NPF on the unmapped page: mapped back, the interrupted event re-injected; false: not it.
bool npt_unmapped_page_hit(guest_regs& regs, const core::vcpu_state& st);
/// The re-injection check's report (hits, instruction length, the event in the VMX layout).
std::uint64_t npt_unmap_report(core::check_counters& k);
/// A new run: the re-injection check's page mapped, its counts zero.
void unmap_reset();
/// Bochs erratum: #NPF during INT n delivery reported another event (this run's count).
std::uint64_t unmap_stale_intn();
extern std::uint64_t exitcode_32bit_errata, qemu_cr3_errata;
/// The guest's EFER: the VMCB's without SVME.
x86::efer guest_efer();

// ---- the runs (svm_runs.cpp) -------------------------------------------------------------
/// hc::spin_more: guest A keeps spinning until the two-guest run saw what it needs.
bool spin_more();

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
