// SPDX-License-Identifier: MIT
/// @file
/// @brief What the SVM backend's files share: svm.cpp (the core::backend over the VMCB, the
/// VMRUN), svm_setup.cpp (bring-up, nested page table, VMCB set-up), svm_runs.cpp (the runs,
/// the two-guest scheduler), npt_diff.cpp. Internal to examples/hypervisor/svm.
#pragma once

#include <cstdint>
#include <new>

#include <hvkit/cpuid/svm.hpp>
#include <hvkit/emulate/instruction.hpp>
#include <hvkit/emulate/outcome.hpp>
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
#include "svm.hpp"
#include "../core/page_pool.hpp"
#include "../core/report.hpp"
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

/// A `T` constructed in zeroed pages of the boot's pool (page_pool::take is for types whose
/// value is all-zero bytes; these have constructors: the SVM host, a processor's SVM state).
template <class T, class... A>
T& make(core::page_pool& pool, A&&... a) {
  return *::new (pool.take_bytes(sizeof(T), alignof(T))) T(static_cast<A&&>(a)...);
}
/// A permission map that intercepts every access (APM 15.10.1, 15.11) in pages of the pool.
template <class M>
M& take_intercept_all(core::page_pool& pool) {
  return *::new (pool.take_bytes(sizeof(M), alignof(M))) M(M::intercept_all());
}

/// What the SVM backend reads once and owns on the processor that runs the conformance guest
/// (or the Linux guest's bootstrap processor): CPUID Fn8000_000A, the ASID allocator, the
/// VM_HSAVE_PA area and the host's VMSAVE area (pages of the boot's pool), the VMCB run last
/// and the boot's counts of two QEMU errata. Built by the boot's SVM entry (run_all, or the
/// Linux guest's prepare_svm), filled by enable(), handed down by reference.
struct svm_host {
  cpuid_ns::svm_info svm{};             ///< CPUID Fn8000_000A of the host (APM Vol. 3, Appendix E), read at enable()
  sv::asid_allocator asids{2};          ///< the host's ASIDs (1 .. NASID-1), handed to the VMCBs by generation (15.16)
  std::uint8_t* hsave;                  ///< VM_HSAVE_PA: what VMRUN saves of the host
  std::uint8_t* host_save;              ///< VMSAVE/VMLOAD of the host's own state
  /// The last VMCB run on this processor: another one ran in between, nothing of the next one's
  /// may come from the processor's VMCB cache (APM 15.15).
  const vmcb_slot* last_run = nullptr;
  /// QEMU 7.2 TCG errata met (svm.cpp): VMEXIT_INVALID written as 32 bits, MOV to CR3 with a
  /// reserved bit ending in VMEXIT_INVALID.
  std::uint64_t exitcode_32bit_errata = 0, qemu_cr3_errata = 0;
  /// The host's RFLAGS.IF = 1 at VMRUN: the two-guest runs, whose slices end on the host's
  /// timer interrupt (an INTR #VMEXIT, svm_runs.cpp).
  bool host_interrupts = false;
  explicit svm_host(core::page_pool& pool) noexcept : hsave(pool.take_page()), host_save(pool.take_page()) {}
  svm_host(const svm_host&) = delete;
  svm_host& operator=(const svm_host&) = delete;
  [[nodiscard]] bool has(cpuid_ns::svm_features f) const noexcept { return svm.features.test(f); }
};

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
/// APM 15.4 "Enabling SVM" on this processor with `h`'s VM_HSAVE_PA area; `h` gets CPUID
/// Fn8000_000A and its ASID allocator. Result lines and errata counted in `t`.
bool enable(svm_host& h, core::tally& t);
/// The conformance guest's nested page tables (the host's 4-level format, APM 15.25): guest A's
/// (entry 0 of its PML4 maps guest RAM, entry 1 the NPT differential's alias while it runs),
/// the pages its checks put in it (the re-injection check's split page, svm_reinject.cpp; the
/// NPT differential's alias, npt_diff.cpp) and guest B's. Pages of the boot's pool.
struct conformance_npt {
  std::uint64_t *pml4, *pdpt, *pd, *pd_alias;  ///< guest A: RAM in 2 MiB pages, the PSE-36 alias
  std::uint64_t* unmap_pt;                     ///< the 2 MiB around the unmapped page, in 4 KiB pages
  std::uint64_t *alias_pdpt, *alias_pd, *alias_pt;  ///< the NPT differential's alias
  std::uint64_t *b_pml4, *b_pdpt, *b_pd;       ///< guest B: GPA 16 MiB (2 MiB) -> HPA 48 MiB
};
/// What the conformance runs own besides the host's: their three VMCB pages (guest A, its
/// second VMCB, the vmcb02 stand-in, and guest B), the permission maps (every MSR and port
/// access exits: APM 15.10.1, 15.11), the nested page tables and the scheduled runs' host IDT.
/// Taken from the boot's pool once (run_all) and handed down.
struct conformance_pages {
  sv::vmcb_page *a1, *a2, *b;
  sv::msr_permission_map* msrpm;
  sv::io_permission_map* iopm;
  conformance_npt npt;
  std::uint64_t* sched_idt;  ///< 64 gates (svm_runs.cpp): the host's exceptions, the timer's
  core::shadow::vcpu_mmu* shadow;  ///< shadow paging (run --shadow): the vCPU's shadow MMU
};
conformance_pages take_conformance_pages(core::page_pool& pool);
/// The nested page table: guest RAM identity-mapped, nothing else.
void build_npt(conformance_npt& npt);
/// The three slots over the conformance VMCB pages (run_all()'s), handed to every run.
struct conformance_vmcbs {
  vmcb_slot& a1;
  vmcb_slot& a2;
  vmcb_slot& b;
};
/// The VMCB for a fresh run of the conformance guest.
void setup_vmcb(svm_host& h, const conformance_pages& cp, current_vmcb& vmcb, const hc::guest_header& g,
                const svm_run& r, core::vcpu_state& st);
/// The pieces of a VMCB every guest (the conformance guest, the Linux guest) fills the same
/// way: a zeroed VMCB with the common intercepts, the permission maps, an ASID of `asids` and
/// nested paging (then `icpt`'s; `ncr3` 0: no nested paging, for shadow paging), and a flat
/// guest's first state.
void start_vmcb(sv::asid_allocator& asids, current_vmcb& vmcb, sv::intercept_set icpt, const sv::io_permission_map& io,
                const sv::msr_permission_map& msr, std::uint64_t ncr3);
void write_flat_state(current_vmcb& vmcb, core::vcpu_state& st, const flat_guest& g, x86::cr0 cr0, x86::cr4 cr4,
                      std::uint64_t cr3);

// ---- the backend (svm.cpp) --------------------------------------------------------------------
/// An exception into the guest through EVENTINJ, merged with a pending event.
void inject(current_vmcb& vmcb, core::vcpu_state& st, x86::vector vec, std::uint32_t error_code = 0);
void report_exit(current_vmcb& vmcb, const char* what, bool expected = false);
/// One #VMEXIT of the vCPU `st` (its registers `regs`: its own, or a second VMCB's) through
/// the core's exit loop on the processor of `h`; true: run the guest again.
/// `npt`: the conformance guest's nested tables (nullptr: another guest), `nd`: the run's NPT
/// differential (nullptr: a guest without it); `linux`: the Linux guest's run, whose profile
/// then handles the exit (linux/linux_profile.hpp).
struct npt_diff_state;
bool handle_exit(svm_host& h, current_vmcb& vmcb, guest_regs& regs, run_state& st, conformance_npt* npt = nullptr,
                 npt_diff_state* nd = nullptr, lx::linux_state* linux = nullptr);
/// One VMRUN of `vmcb` on the processor of `h` (its host save area, the VMCB it ran last).
void vmrun(svm_host& h, current_vmcb& vmcb, guest_regs& regs);
/// One VMRUN of `s` (the current VMCB) with the host's VMSAVE area `host_save`; `last` is
/// the VMCB this processor ran last (its clean bits count only if it is `s`, APM 15.15);
/// `host_if`: the host's RFLAGS.IF = 1 at VMRUN (svm_entry.cpp).
void vmrun(guest_regs& regs, vmcb_slot& s, std::uint8_t* host_save, const vmcb_slot*& last, bool host_if = false);
/// The length of the instruction at the guest RIP: nRIP - RIP with NRIP save, else decoded
/// (0 when the fetch faults); and that instruction.
unsigned instruction_length(const svm_host& h, current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st);
hvkit::result<em::instruction, em::outcome> instruction_at_rip(current_vmcb& vmcb, guest_regs& regs,
                                                               const core::vcpu_state& st);
/// An EXITCODE of 0xFFFF_FFFF (QEMU TCG's 32-bit VMEXIT_INVALID, svm.cpp): counted in `h`
/// (the erratum once in `t`), returned as the APM's -1.
std::uint64_t note_exitcode_32bit(svm_host& h, core::tally& t, std::uint64_t raw);
// ---- re-injection and the re-injection check's unmapped page (svm_reinject.cpp) ----------------
/// The event whose delivery the exit interrupted, as re-injected (kind none: nothing was).
struct reinjected {
  x86::event e{};
  unsigned rip_advance = 0;
  bool valid = false;
};
/// EXITINTINFO corrected for the errata and written into EVENTINJ with the RIP advance a
/// software event needs (APM 15.7.1, 15.7.2).
reinjected reinject_interrupted_event(const svm_host& h, current_vmcb& vmcb, guest_regs& regs,
                                      const core::vcpu_state& st, core::check_counters& k);
/// Unmaps the 4 KiB guest page at `gpa` from the nested page table `npt` (once).
bool npt_unmap_once(conformance_npt& npt, current_vmcb& vmcb, core::check_counters& k, std::uint64_t gpa);
/// An #NPF on the unmapped page: mapped back, the interrupted event re-injected; false: not it.
bool npt_unmapped_page_hit(const svm_host& h, conformance_npt& npt, current_vmcb& vmcb, guest_regs& regs,
                           const core::vcpu_state& st, core::check_counters& k);
/// The re-injection check's report (hits, instruction length, the event in the VMX layout).
std::uint64_t npt_unmap_report(conformance_npt& npt, current_vmcb& vmcb, core::check_counters& k);
/// The guest's EFER: the VMCB's without SVME.
x86::efer guest_efer(current_vmcb& vmcb);
/// The guest's CR0/CR4/EFER (without SVME)/CR3/RFLAGS from `vmcb` (svm_runs.cpp).
guest_paging_regs live_paging_regs(current_vmcb& vmcb);
/// The same as the vCPU `st` sees them (shadow paging: CR0.WP, CR4.PAE, EFER and CR3 the shadow MMU's).
guest_paging_regs live_paging_regs(current_vmcb& vmcb, const core::vcpu_state& st);

// ---- the VMRUN differential (vmrun_diff.cpp) --------------------------------------------------
/// The VMRUN consistency-check differential: hvkit's checks against the CPU, on the processor
/// of `h` with pages of `pool` (taken when it runs, once per boot), its result in `t`.
bool vmrun_diff_run(svm_host& h, core::page_pool& pool, core::tally& t);

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
/// hc::ept_arm: apply the case's nested layout to `npt` and predict its outcome (guest CPU `model`).
void npt_arm(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd, const cpuid_ns::guest_cpu_model& model,
             guest_regs& r);
/// A #NPF while a case is armed inside the alias: recorded (true), else false.
bool npt_case_npf(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd);
/// hc::ept_check: compare the CPU's outcome with the prediction (0 same, 1 mismatch); an
/// erratum met for the first time counted in `t`.
std::uint64_t npt_check(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd, guest_regs& r, core::tally& t);
/// The run's npt_differential result (counted in `t`); the alias removed from `npt`.
void npt_diff_report(core::tally& t, conformance_npt& npt, const npt_diff_state& nd,
                     const cpuid_ns::guest_cpu_model& model);

}  // namespace hv::svm
