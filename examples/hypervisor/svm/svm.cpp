// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend (AMD APM Vol. 2, chapter 15): SVM bring-up, the
// nested page table, the VMCB, the VMRUN loop, exit handling and the SVM runs of the
// conformance guest. The guest, its hypercall ABI (VMMCALL instead of VMCALL), the MMIO test
// device, the CPUID/MSR policy and the emulator are the ones the VMX backend uses; the SVM
// vocabulary (typed VMCB, intercepts, permission maps, exit decoding, event injection, ASIDs,
// clean bits, IBPB, the NPT stage of the nested walk) is hvkit's include/svm/ and paging/.
//
// Without decode assists (Bochs 2.7 has none) a CR-write or descriptor-table exit says
// which instruction kind exited but not its operands: the instruction at the guest RIP is
// decoded and executed by hvkit::emulate, as an MMIO access after a nested page fault is.
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/cpuid/svm.hpp>
#include <hvkit/emulate/vmcb_context.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/svm/controls.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/event_injection.hpp>
#include <hvkit/svm/exit_code.hpp>
#include <hvkit/svm/exit_info.hpp>
#include <hvkit/svm/ibpb.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/svm/npf.hpp>
#include <hvkit/svm/register_file.hpp>
#include <hvkit/svm/segment.hpp>
#include <hvkit/svm/skip.hpp>
#include <hvkit/svm/tlb.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../hv.hpp"
#include "../core/exit_loop.hpp"
#include "../profiles/exit_cost.hpp"

extern "C" {
void svm_vmrun(hv::vmx::guest_regs* regs, std::uint64_t vmcb_pa, std::uint64_t host_save_pa);
void svm_gp_skip();
void svm_timer_isr();
void svm_spurious_isr();
extern volatile std::uint8_t svm_msr_faulted;
extern volatile std::uint8_t svm_host_if;
extern volatile std::uint64_t svm_timer_ticks;
}

namespace hv::svm {

namespace {

using exit_code = sv::exit_code;

}  // namespace

constinit current_vmcb vmcb{nullptr};  // set to &vmcb_a1 by run_all()
alignas(4096) std::uint64_t npt_pml4[512];
std::uint64_t pa(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
/// TLB_CONTROL for the next VMRUN (APM 15.16.1).
void set_tlb_control(sv::tlb_control c) { sv::write(vmcb, fld::tlb_control, static_cast<std::uint8_t>(c)); }

namespace {

sv::vmcb_page a1_page;  // guest A (the conformance guest)
sv::vmcb_page a2_page;  // guest A's second VMCB (vmcb02 stand-in)
sv::vmcb_page b_page;   // guest B
constinit vmcb_slot vmcb_a1{a1_page}, vmcb_a2{a2_page}, vmcb_b{b_page};


alignas(4096) std::uint8_t host_save_page[4096];  // VMSAVE/VMLOAD of the host's own state
alignas(4096) std::uint8_t hsave_page[4096];      // VM_HSAVE_PA: what VMRUN saves of the host
// Every MSR access and every port access exits (APM 15.10.1, 15.11).
constinit sv::msr_permission_map msrpm = sv::msr_permission_map::intercept_all();
constinit sv::io_permission_map iopm = sv::io_permission_map::intercept_all();
alignas(4096) std::uint64_t npt_pdpt[512];
alignas(4096) std::uint64_t npt_pd[512];
alignas(4096) std::uint64_t npt_pd_alias[512];

alignas(4096) std::uint64_t npt_b_pml4[512];    // guest B: GPA 16 MiB (2 MiB) -> HPA 48 MiB
alignas(4096) std::uint64_t npt_b_pdpt[512];
alignas(4096) std::uint64_t npt_b_pd[512];

/// CPUID Fn8000_000A of the host (APM Vol. 3, Appendix E), read at enable().
cpuid_ns::svm_info host_svm{};
/// The host's ASIDs (1 .. NASID-1), handed to the VMCBs by generation (15.16).
sv::asid_allocator asids{2};

/// The CR intercepts of a run: the guest-owned policy of the VMX runs (hv.hpp), expressed as
/// SVM intercepts by svm::make_cr_intercepts (APM 15.9, 15.9.1 "Selective CR0 Write
/// Intercept"; docs/svm.md has the table). With nested paging: CR0.WP guest-owned -> no CR0
/// write intercept (WP toggles never exit); only CR0.TS guest-owned -> the selective CR0
/// write intercept (a WP change exits); nothing guest-owned -> the CR0 write intercept
/// (every MOV to CR0, LMSW and CLTS exits). CR4 writes are always intercepted, no CR read is.
using policy_nothing_owned = x86::guest_owned_set<>;
constexpr sv::cr_intercept_features with_npt{.npt = true};
constexpr sv::cr_intercepts cr_wp_owned = sv::make_cr_intercepts<policy_wp_guest_owned>(with_npt);
constexpr sv::cr_intercepts cr_wp_selective = sv::make_cr_intercepts<policy_wp_intercepted>(with_npt);
constexpr sv::cr_intercepts cr_all = sv::make_cr_intercepts<policy_nothing_owned>(with_npt);
static_assert(cr_wp_owned.cr0_write == sv::cr0_write_intercept::none && cr_wp_owned.cr0_owned.test(x86::cr0::wp));
static_assert(cr_wp_selective.cr0_write == sv::cr0_write_intercept::selective &&
              !cr_wp_selective.cr0_owned.test(x86::cr0::wp));
static_assert(cr_all.cr0_write == sv::cr0_write_intercept::all && cr_all.cr0_owned.none());
static_assert(!cr_wp_owned.cr0_read && !cr_wp_owned.cr4_read && cr_wp_owned.cr4_write && cr_all.cr4_write);

const char* cr0_intercept_name(sv::cr0_write_intercept w) {
  switch (w) {
    case sv::cr0_write_intercept::none: return "none";
    case sv::cr0_write_intercept::selective: return "selective";
    case sv::cr0_write_intercept::all: return "all";
  }
  return "?";
}

struct svm_run {
  run_config base;
  sv::cr_intercepts cr;
  /// Two guests and guest A's second VMCB switched on local APIC timer interrupts (INTR
  /// intercept), with this IBPB policy deciding each barrier (else one VMCB, no scheduling).
  bool scheduled = false;
  sv::ibpb_policy ibpb = sv::ibpb_policy::skip_same_guest;
};

constexpr svm_run runs[] = {
    {{"guest_owned", false, true, 0, run_status::done}, cr_wp_owned},
    {{"intercepted", true, true, 0, run_status::done}, cr_wp_selective},
    {{"intercepted_cr0_all", true, true, 0, run_status::done}, cr_all},
    {{"native_dt", false, false, 0, run_status::done}, cr_wp_owned},
    {{"triple_fault", false, true, hc::cfg_quick | hc::cfg_triple_fault, run_status::triple_fault}, cr_wp_owned},
    {{"after_triple_fault", false, true, hc::cfg_quick, run_status::done}, cr_wp_owned},
    {{"stale_role_demo", false, true, hc::cfg_ltr_only, run_status::done, true}, cr_wp_owned},
    // The CPU as the oracle: random page tables and registers, each access done natively by
    // the guest (under nested paging) and repeated by hvkit's walker.
    {{"paging_diff", false, false, hc::cfg_paging_diff, run_status::done}, cr_wp_owned},
    // Nested paging as the second stage: random nested permissions, page sizes and reserved
    // bits on the guest's page-table pages and data page, #NPF predicted by hvkit's nested
    // walk over NPT (paging::nested_walker with paging::npt_walker).
    {{"npt_diff", false, false, hc::cfg_ept_diff, run_status::done}, cr_wp_owned},
    // The 32-bit guest: 32-bit and PAE paging under nested paging, the CPU as the oracle.
    {{"paging_diff32", false, false, hc::cfg_guest32, run_status::done}, cr_wp_owned},
    // Guest A (the conformance guest, spinning) with a second VMCB of its own vCPU and guest
    // B, round-robin A1 A2 A1 B on timer interrupts; the IBPB policy decides every barrier.
    {{"ibpb_skip_same_guest", false, true, hc::cfg_spin, run_status::done}, cr_wp_owned, true,
     sv::ibpb_policy::skip_same_guest},
    {{"ibpb_every_change", false, true, hc::cfg_spin, run_status::done}, cr_wp_owned, true,
     sv::ibpb_policy::every_vmcb_change},
    // Hostile: guest B triple-faults on its first slice (UD2 without an IDT: SHUTDOWN exit);
    // guest A (another VM) must go on.
    {{"hostile_guest_b", false, true, hc::cfg_spin | hc::cfg_hostile_b, run_status::done}, cr_wp_owned, true,
     sv::ibpb_policy::skip_same_guest},
};
constexpr int run_count = sizeof(runs) / sizeof(runs[0]);

/// Exit-code counters: codes 0x00-0x9D as themselves, #NPF (0x400) in slot 0x9F, anything
/// else in 0x9E.
constexpr unsigned slot_count = 0xA0;
constexpr unsigned slot(exit_code code) {
  const std::uint64_t c = sv::raw(code);
  return c < 0x9E ? static_cast<unsigned>(c) : code == exit_code::npf ? 0x9F : 0x9E;
}
/// The run's SVM configuration (CR intercepts, scheduling); its state is the core's `run`.
struct svm_state {
  const svm_run* cfg;
};
constinit svm_state st{};

struct wp_summary {
  bool ok;
  std::uint64_t toggles, cr_exits, mismatch, tsc;
};
wp_summary summaries[run_count];

/// The APM's name of the exit code counted in slot `s` (Appendix C, Table C-1).
const char* exit_name(unsigned s) {
  if (s == 0x9F) return sv::name(exit_code::npf);
  if (s == 0x9E) return "OTHER";
  const char* n = sv::name(static_cast<exit_code>(s));
  return n ? n : "OTHER";
}

// ---- CPUID policy ---------------------------------------------------------------------
/// CR4 bits the guest may set: every defined bit the guest's CPUID policy allows (the CPU's
/// own CR4 has no fixed bits under SVM; core::cr4_allowed).
x86::cr4 cr4_allowed() { return core::cr4_allowed(guest_policy, x86::cr4::defined); }

/// The guest's CPUID policy: host features pass through except SVM and VMX (no nested
/// virtualization offered), XSAVES (IA32_XSS is not virtualized here) and WAITPKG; the KVM
/// signature with the "realtime" hint, as on VMX.
bool build_policy() {
  namespace feat = cpuid_ns::feat;
  if (!cpuid_ns::read_all(cpuid_ns::host_source{}, host_cpuid)) {
    result("cpuid_policy", false, "reason=host_table_full");
    return false;
  }
  cpuid_ns::hypervisor_caps hvc{};
  hvc.passthrough = cpuid_ns::feature_set::all();
  for (const cpuid_ns::feature f : {feat::svm, feat::vmx, feat::xsaves, feat::waitpkg}) hvc.passthrough.reset(f);
  cpuid_ns::policy_config cfg{};
  cfg.hints = cpuid_ns::feature_set{cpuid_ns::kvm::hints::realtime};
  auto p = cpuid_ns::build_policy(host_cpuid, hvc, cfg);
  if (!p) {
    result("cpuid_policy", false, "reason=build_policy_error_%u", static_cast<unsigned>(p.error()));
    return false;
  }
  guest_policy = p.value();
  guest_msrs = cpuid_ns::derive_msr_policy(guest_policy.features(), guest_policy.xss_components());
  const bool consistent = cpuid_ns::check_consistency(guest_policy.features(), guest_msrs).has_value();
  const cpuid_ns::regs e1 = guest_policy.answer(0x80000001, 0, {});
  result("cpuid_policy", consistent && !guest_policy.has(feat::svm) && ((e1.ecx >> 2) & 1) == 0,
         "kvm_base=0x%x svm_hidden=%d msr_policy_consistent=%d", guest_policy.kvm_base(),
         ((e1.ecx >> 2) & 1) == 0 ? 1 : 0, consistent ? 1 : 0);
  return true;
}

// ---- bring-up ------------------------------------------------------------------------------
/// RDMSR that survives #GP (svm_gp_skip in the host IDT for the time): false if it faulted.
bool rdmsr_safe(std::uint32_t m, std::uint64_t& v) {
  const std::uint64_t lo = host_idt[2 * 13], hi = host_idt[2 * 13 + 1];
  const auto h = reinterpret_cast<std::uint64_t>(&svm_gp_skip);
  host_idt[2 * 13] = (h & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((h >> 16) & 0xFFFF) << 48);
  host_idt[2 * 13 + 1] = h >> 32;
  svm_msr_faulted = 0;
  asm volatile("" ::: "memory");
  v = rdmsr(m);
  asm volatile("" ::: "memory");
  host_idt[2 * 13] = lo;
  host_idt[2 * 13 + 1] = hi;
  if (svm_msr_faulted == 0) return true;
  v = 0;
  return false;
}

/// APM 15.4 "Enabling SVM": VM_CR.SVMDIS must be clear; EFER.SVME = 1; VM_HSAVE_PA.
bool enable() {
  std::uint64_t vmcr = 0;
  const bool has_vmcr = rdmsr_safe(x86::msr::amd_vm_cr, vmcr);
  const auto e8a = cpuid(0x8000000A);
  host_svm = cpuid_ns::decode_svm({e8a.eax, e8a.ebx, e8a.ecx, e8a.edx});
  kprintf("HVKIT INFO svm_revision=%u asids=%u svm_features_edx=0x%x vm_cr=0x%llx\n", host_svm.revision,
          host_svm.nasid, host_svm.features.raw(), (unsigned long long)vmcr);
  if (!has_vmcr) {
    // APM 15.30.1: VM_CR exists on every CPU with SVM. Bochs 2.7 raises #GP on RDMSR of it.
    ++results_errata;
    kprintf("HVKIT ERRATUM vm_cr_msr_not_implemented rdmsr_0xc0010114=#GP\n");
  }
  if (vmcr & (1u << 4)) {
    result("svm_enable", false, "reason=vm_cr_svmdis");
    return false;
  }
  if (host_svm.nasid < 2) {
    result("svm_enable", false, "reason=no_guest_asid nasid=%u", host_svm.nasid);
    return false;
  }
  // SVME, and NXE: nested entries use the host's paging mode, NX needs EFER.NXE (15.25.5).
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  x86::efer efer{rdmsr(x86::msr::ia32_efer)};
  efer |= x86::efer::svme;
  if (nx) efer |= x86::efer::nxe;
  wrmsr(x86::msr::ia32_efer, efer.raw());
  wrmsr(x86::msr::amd_vm_hsave_pa, pa(hsave_page));
  asids = sv::asid_allocator{host_svm.nasid};
  const bool clean = host_svm.features.test(cpuid_ns::svm_features::vmcb_clean);
  for (vmcb_slot* s : {&vmcb_a1, &vmcb_a2, &vmcb_b}) s->tracked = sv::clean_tracker<sv::vmcb_view>{s->view, clean};
  using F = cpuid_ns::svm_features;
  result("svm_enable", true, "nrips=%u npt=%u decode_assists=%u vmcb_clean=%u flush_by_asid=%u",
         host_svm.features.test(F::nrip_save) ? 1 : 0, host_svm.features.test(F::np) ? 1 : 0,
         host_svm.features.test(F::decode_assists) ? 1 : 0, clean ? 1 : 0,
         host_svm.features.test(F::flush_by_asid) ? 1 : 0);
  return true;
}

/// Nested page table (APM 15.25): the host's 4-level format; guest RAM [16 MiB, 32 MiB)
/// identity-mapped with 2 MiB pages, nothing else (the hypervisor's memory and the MMIO
/// device are not mapped: a guest access is a #NPF). Every nested access is checked as a
/// user access (15.25.5), so U/S = 1 at every level.
void build_npt() {
  constexpr std::uint64_t p = 1, rw = 2, us = 4, ps = 0x80;
  for (auto& e : npt_pml4) e = 0;
  for (auto& e : npt_pdpt) e = 0;
  for (auto& e : npt_pd) e = 0;
  npt_pml4[0] = pa(npt_pdpt) | p | rw | us;
  npt_pdpt[0] = pa(npt_pd) | p | rw | us;
  for (std::uint64_t gpa = layout::guest_mem_base; gpa < layout::guest_mem_base + layout::guest_mem_size; gpa += 0x200000)
    npt_pd[gpa >> 21] = gpa | p | rw | us | ps;
  // The PSE-36 alias: GPA 4 GiB + [28 MiB, 32 MiB) -> host [28 MiB, 32 MiB), where the
  // 32-bit guest's 4 MiB pages with PA bit 32 land.
  for (auto& e : npt_pd_alias) e = 0;
  npt_pdpt[hc::pse36_alias_gpa >> 30] = pa(npt_pd_alias) | p | rw | us;
  for (std::uint64_t gpa = 0x1C00000; gpa < 0x2000000; gpa += 0x200000) npt_pd_alias[gpa >> 21] = gpa | p | rw | us | ps;
}

/// The VMCB for a fresh run of the conformance guest: 64-bit mode, flat segments matching
/// its GDT, nested paging, the intercepts of the run (APM 15.5.1 lists the consistency
/// checks VMRUN makes: EFER.SVME set, the VMRUN intercept set, ASID non-zero, ...).
void setup_vmcb(const hc::guest_header& g, const svm_run& r) {
  std::uint8_t* const bytes = vmcb.slot->view.data();
  for (std::size_t i = 0; i < sv::vmcb_size; ++i) bytes[i] = 0;
  vmcb.slot->tracked.invalidate();  // a new VMCB: nothing may come from the processor's cache (15.15)
  const bool guest32 = r.base.guest_flags & hc::cfg_guest32;
  sv::intercept_set icpt;
  // CR0/CR4 from the run's guest-owned policy. CR4: every write exits (SVM has no CR4 mask;
  // on VMX the bits that feed translation are host-owned) and is done by the emulator with
  // the CR4 bits the CPUID policy allows. Not for the 32-bit guest: its CR4.PAE toggles stay
  // native, the PAE check is the CPU's (a test set-up: paging::sync_cr0_role rebuilds the role
  // at the next emulated access, since it compares the whole role with the live registers).
  r.cr.apply(icpt);
  if (guest32) icpt.clear(sv::cr_write(4));
  using I = sv::intercept;
  for (I i : {I::cpuid, I::hlt, I::ioio_prot, I::msr_prot, I::shutdown, I::invlpga, I::vmrun, I::vmmcall, I::vmload,
              I::vmsave, I::stgi, I::clgi, I::skinit})
    icpt.set(i);
  if (r.scheduled) icpt.set(I::intr);  // the scheduled runs: timer interrupts end a slice
  if (r.base.dt_exiting)
    for (I i : {I::idtr_read, I::gdtr_read, I::ldtr_read, I::tr_read, I::idtr_write, I::gdtr_write, I::ldtr_write,
                I::tr_write})
      icpt.set(i);
  icpt.store(vmcb);
  sv::write(vmcb, fld::iopm_base_pa, pa(&iopm));
  sv::write(vmcb, fld::msrpm_base_pa, pa(&msrpm));
  // The vCPU's ASID, and a flush of every ASID's entries at this VMRUN: the nested page
  // table was rebuilt or edited since the last run (15.16.1).
  asids.assign(vmcb.slot->asid);
  sv::set_asid(vmcb, vmcb.slot->asid.asid, sv::tlb_control::flush_all);
  sv::write(vmcb, fld::nested_control, sv::nested_control::np_enable::set(std::uint64_t{0}, true));
  sv::write(vmcb, fld::n_cr3, pa(npt_pml4));
  // V_INTR_MASKING (APM 15.21.1): the host's RFLAGS.IF, not the guest's, masks physical
  // interrupts; with the INTR intercept they exit.
  if (r.scheduled)
    sv::write(vmcb, fld::interrupt_control, sv::interrupt_control::v_intr_masking::set(std::uint64_t{0}, true));

  // Attributes: descriptor bits 47:40 in 7:0 and 55:52 in 11:8 (APM 15.5.1 "segment state").
  namespace at = sv::attrib;
  constexpr std::uint16_t code_rx = 0xB, data_rw = 0x3, tss64_busy = 0xB;  // descriptor types (SDM 3.4.5.1, 3.5)
  const std::uint16_t cs_attr = guest32 ? at::g | at::db | at::p | at::s | code_rx   // 32-bit code, DPL 0
                                        : at::g | at::l | at::p | at::s | code_rx;   // 64-bit code, DPL 0
  sv::store_segment(vmcb, sv::segment::cs, {x86::selector{hc::guest_cs}, cs_attr, 0xFFFFFFFF, 0});
  for (sv::segment sg : {sv::segment::ss, sv::segment::ds, sv::segment::es, sv::segment::fs, sv::segment::gs})
    sv::store_segment(vmcb, sg, {x86::selector{hc::guest_ds}, at::g | at::db | at::p | at::s | data_rw, 0xFFFFFFFF, 0});
  sv::store_segment(vmcb, sv::segment::ldtr, {});
  sv::store_segment(vmcb, sv::segment::tr, {x86::selector{hc::guest_tr}, at::p | tss64_busy, 103, g.tss_base});
  sv::write(vmcb, fld::gdtr_limit, static_cast<std::uint32_t>(g.gdt_limit));
  sv::write(vmcb, fld::gdtr_base, std::uint64_t{g.gdt_base});
  sv::write(vmcb, fld::idtr_limit, static_cast<std::uint32_t>(g.idt_limit));
  sv::write(vmcb, fld::idtr_base, std::uint64_t{g.idt_base});
  sv::write(vmcb, fld::cpl, 0);
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  run.guest_efer = guest32 ? 0 : efer_lme | efer_lma | (nx ? efer_nxe : 0);
  sv::write(vmcb, fld::efer, x86::efer{run.guest_efer} | x86::efer::svme);  // SVME must be set (15.5.1)
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  sv::write(vmcb, fld::cr0, cr0);
  sv::write(vmcb, fld::cr3, x86::cr3{layout::guest_boot_pt_gpa});
  const x86::cr4 cr4 = guest32 ? x86::cr4::pse : x86::cr4::pae;  // 32-bit paging with 4 MiB pages
  sv::write(vmcb, fld::cr4, cr4);
  sv::write(vmcb, fld::dr6, 0xFFFF0FF0);
  sv::write(vmcb, fld::dr7, 0x400);
  sv::write(vmcb, fld::rflags, x86::rflags{0x2});
  sv::write(vmcb, fld::rip, std::uint64_t{g.entry});
  sv::write(vmcb, fld::rsp, std::uint64_t{g.stack_top});
  sv::write(vmcb, fld::g_pat, 0x0007040600070406ull);  // the power-on PAT (APM Vol. 2, 7.8.2)
  run.mmu = pg::mmu_context::make(cr0, cr4, x86::efer{run.guest_efer}, x86::gpa{layout::guest_boot_pt_gpa});
}

// ---- events ------------------------------------------------------------------------------
/// An exception into the guest through EVENTINJ (APM 15.20), merged with an event whose
/// delivery the exit interrupted (EXITINTINFO, already copied into EVENTINJ) by the double-
/// fault rules (svm::inject_exception; SDM 6.15 / APM 8.2.9). A shutdown verdict is a triple
/// fault of the guest.
void inject(x86::vector vec, std::uint32_t error_code = 0) {
  const bool protected_mode = sv::read_typed(vmcb, fld::cr0).test(x86::cr0::pe);
  if (sv::inject_exception(vmcb, {vec, error_code}, protected_mode) == x86::merge_verdict::shutdown)
    run.status = run_status::triple_fault;
}

/// NRIP save (CPUID Fn8000_000A EDX[3]): the #VMEXIT writes the next instruction's address
/// into nRIP (VMCB 0C8h) for the intercepts of APM 15.7.1. Without it the field is never
/// written and must never be read: the length comes from emulate's decoder instead.
bool nrip_save() { return host_svm.features.test(cpuid_ns::svm_features::nrip_save); }


/// The length of the instruction at the guest RIP (at an intercept that reports none):
/// nRIP - RIP with NRIP save, else fetched and decoded through the guest's paging by
/// emulate::fetch_instruction (0 when the fetch faults: a host-side problem, fatal).
unsigned instruction_length(guest_regs& regs);
hvkit::result<em::instruction, em::outcome> instruction_at_rip(guest_regs& regs);

/// Past an instruction that exited (CPUID, RDMSR/WRMSR, VMMCALL): RIP = nRIP with NRIP save
/// (APM 15.7.1), else RIP + the decoded length in the code segment's width; the interrupt
/// shadow ends, a single-step trap is #DB (svm::skip_to_next_rip / svm::skip_instruction).
/// IA32_DEBUGCTL is not virtualized for the guest (its accesses are #GP): BTF is 0.
void skip_instruction(guest_regs& regs) {
  sv::skip_effects fx;
  if (nrip_save()) {
    fx = sv::skip_to_next_rip(vmcb, 0);
  } else {
    const unsigned len = instruction_length(regs);
    if (len == 0) {
      const auto in = instruction_at_rip(regs);
      kprintf("HVKIT ERROR cannot decode the exiting instruction at rip=0x%llx: outcome=%u vector=%u why=%u cr0=0x%llx "
              "cr4=0x%llx efer=0x%llx cr3=0x%llx\n",
              (unsigned long long)sv::read(vmcb, fld::rip), in ? 0u : static_cast<unsigned>(in.error().kind),
              in ? 0u : static_cast<unsigned>(in.error().vector), in ? 0u : static_cast<unsigned>(in.error().why),
              (unsigned long long)sv::read(vmcb, fld::cr0), (unsigned long long)sv::read(vmcb, fld::cr4),
              (unsigned long long)sv::read(vmcb, fld::efer), (unsigned long long)sv::read(vmcb, fld::cr3));
      run.status = run_status::fatal_exit;
      return;
    }
    fx = sv::skip_instruction(vmcb, len, 0);
  }
  if (fx.single_step && fx.verdict == x86::merge_verdict::shutdown) run.status = run_status::triple_fault;
}

// ---- the emulator on a VMCB ----------------------------------------------------------------
/// The guest's registers at this exit: RAX and RSP from the VMCB, the others from the block
/// the VMRUN stub saved (svm::register_file).
using vcpu = sv::register_file<current_vmcb>;

/// The guest's EFER: the VMCB's without SVME, which is the host's (APM 15.5.1).
x86::efer guest_efer() { return sv::read_typed(vmcb, fld::efer).without(x86::efer::svme); }

/// The emulator's context from the VMCB (emulate/vmcb_context.hpp) with the guest CPU
/// model's MAXPHYADDR and CR4 bits.
em::context read_context(guest_regs& regs) {
  const vcpu rf{vmcb, regs};
  return em::read_emulation_context(vmcb, rf, static_cast<std::uint8_t>(guest_cpu_properties().maxphyaddr),
                                    cr4_allowed());
}

void report_exit(const char* what, bool expected = false) {
  kprintf("HVKIT %s %s: exitcode=0x%llx exitinfo1=0x%llx exitinfo2=0x%llx rip=0x%llx exitintinfo=0x%llx\n",
          expected ? "INFO expected" : "ERROR", what, (unsigned long long)sv::read(vmcb, fld::exit_code),
          (unsigned long long)sv::read(vmcb, fld::exit_info_1), (unsigned long long)sv::read(vmcb, fld::exit_info_2),
          (unsigned long long)sv::read(vmcb, fld::rip), (unsigned long long)sv::read(vmcb, fld::exit_int_info));
}

hvkit::result<em::instruction, em::outcome> instruction_at_rip(guest_regs& regs) {
  em::context ctx = read_context(regs);
  const pg::cpu_properties props = guest_cpu_properties();
  // The live paging mode (the run's MMU context may lag behind a guest-owned CR0.WP/PG).
  pg::mmu_context mmu = pg::mmu_context::make(ctx.cr0, ctx.cr4, ctx.efer, run.mmu.root());
  mmu.set_root(x86::cr3_root(ctx.cr3, mmu.role().mode(), props.maxphyaddr));
  pg::flat_memory tables = guest_ram_view();
  em::flat_ram ram{reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
                   x86::gpa{layout::guest_mem_base}};
  // PAE under nested paging: no PDPTE registers, the walk reads the PDPTEs from memory
  // (APM 15.25.10): the four entries as they are now.
  // A PDPTE with a reserved bit is taken as it is: the walk through it faults (#PF RSVD),
  // walks through the other three do not.
  pg::pdpte_snapshot pdptes{};
  if (mmu.role().mode() == x86::paging_mode::pae) {
    pdptes.pdpt = x86::cr3_root(ctx.cr3, x86::paging_mode::pae, props.maxphyaddr);
    pdptes.loaded = true;
    for (unsigned i = 0; i < 4; ++i) {
      const auto v = tables.read64(pdptes.pdpt + 8u * i);
      pdptes.loaded = pdptes.loaded && v.has_value();
      pdptes.entries[i] = v ? *v : 0;
    }
  }
  em::walker_translator<pg::flat_memory> tr{mmu, tables, props, pdptes};
  return em::fetch_instruction(ctx, tr, ram);
}

unsigned instruction_length(guest_regs& regs) {
  if (nrip_save()) return static_cast<unsigned>(sv::read(vmcb, fld::next_rip) - sv::read(vmcb, fld::rip));
  const auto in = instruction_at_rip(regs);
  return in ? in->length : 0;
}

/// QEMU 7.2 TCG erratum (docs/hypervisor.md, SVM errata): a guest MOV to CR3 with a bit at or
/// above MAXPHYADDR set in long mode ends in #VMEXIT with VMEXIT_INVALID (exit code -1)
/// instead of #GP(0) in the guest (APM Vol. 2 3.1.2 / Vol. 3 "MOV CRn": a reserved CR3 bit is
/// #GP(0); VMEXIT_INVALID is only VMRUN's consistency-check failure, 15.5.1). Recognized
/// narrowly: the guest had run (not the first exit of the VMCB), long mode, the instruction
/// at RIP is MOV to CR3 and its source has a bit at or above MAXPHYADDR. The guest gets the
/// #GP(0) the architecture gives it; the first case is printed, every case counted.
std::uint64_t qemu_cr3_errata = 0;
bool qemu_mov_cr3_invalid_erratum(guest_regs& regs, std::uint64_t exits_before) {
  if (exits_before == 0 || !guest_efer().test(x86::efer::lma)) return false;
  const auto in = instruction_at_rip(regs);
  if (!in || in->op != em::mnemonic::mov_to_cr || in->dst.reg != 3) return false;
  const std::uint64_t value = vcpu{vmcb, regs}.read(in->src.reg);
  const unsigned maxpa = guest_cpu_properties().maxphyaddr;
  if (maxpa >= 64 || (value >> maxpa) == 0) return false;
  if (qemu_cr3_errata++ == 0)
    kprintf("HVKIT ERRATUM mov_cr3_reserved_bit_vmexit_invalid rip=0x%llx cr3_source=0x%llx maxphyaddr=%u "
            "exitcode=0x%llx (expected #GP(0) in the guest)\n",
            (unsigned long long)sv::read(vmcb, fld::rip), (unsigned long long)value, maxpa,
            (unsigned long long)sv::read(vmcb, fld::exit_code));
  inject(x86::vector::gp, 0);
  return true;
}



// ---- one guest page unmapped from the nested page table (hc::ept_unmap_once) ---------------
// The re-injection check: the guest puts an exception handler's stack (IST) on that page, so
// the #NPF happens while the processor delivers the event (EXITINTINFO valid, APM 15.7.2).
// The 2 MiB nested page around it is split into 4 KiB pages meanwhile.
alignas(4096) std::uint64_t npt_unmap_pt[512];
struct unmap_state {
  bool armed;
  std::uint64_t gpa, saved_pde, hits;
  std::uint64_t seen_info;  // the re-injected event, in the VMX layout the guest's check reads
  unsigned seen_length;
  std::uint64_t stale_intn;  // Bochs erratum: EXITINTINFO of an INT n delivery was another event
  std::uint64_t soft_int_type_for_int3;  // QEMU erratum: INT3/INTO reported as TYPE 4
};
constinit unmap_state unmap{};

void npt_unmap_restore() {
  npt_pd[unmap.gpa >> 21] = unmap.saved_pde;
  unmap.armed = false;
  set_tlb_control(sv::tlb_control::flush_all);
}

bool npt_unmap_once(std::uint64_t gpa) {
  if (unmap.armed) npt_unmap_restore();
  if (gpa < layout::guest_mem_base || gpa >= layout::guest_mem_base + layout::guest_mem_size) return false;
  const std::uint64_t region2m = gpa & ~0x1FFFFFull;
  for (std::uint64_t i = 0; i < 512; ++i) npt_unmap_pt[i] = (region2m + (i << 12)) | 7;
  npt_unmap_pt[(gpa >> 12) & 511] = 0;
  unmap.armed = true;
  unmap.gpa = gpa & ~0xFFFull;
  unmap.saved_pde = npt_pd[gpa >> 21];
  npt_pd[gpa >> 21] = pa(npt_unmap_pt) | 7;
  set_tlb_control(sv::tlb_control::flush_all);
  return true;
}

/// The unmapped page was touched while an event was delivered: map it back and re-inject
/// the event (handle_exit copied EXITINTINFO into EVENTINJ; it is written again here, with
/// the Bochs correction below). A software interrupt
/// (type 4) or a software exception (INT3, INTO: type 3, vectors 3 and 4) returns after its
/// instruction: the guest's RIP becomes NRIP (15.7.1) before the injection, since the
/// processor pushes the VMCB's RIP. The report gives the event in the VMX layout (SDM Vol. 3C
/// 25.8.3: type 6 software exception, 4 software interrupt, 3 hardware exception) with the
/// instruction length NRIP - RIP for software events, so one guest check serves both vendors.
bool npt_unmapped_page_hit(guest_regs& regs) {
  if (!unmap.armed || (sv::read(vmcb, fld::exit_info_2) & ~0xFFFull) != unmap.gpa) return false;
  npt_unmap_restore();
  ++unmap.hits;
  sv::event_info ii{sv::read(vmcb, fld::exit_int_info)};
  const std::uint64_t rip = sv::read(vmcb, fld::rip);
  // Bochs 2.7 erratum (docs/hypervisor.md): a #NPF while delivering INT n reports, in
  // EXITINTINFO, the last exception it delivered instead of the INT n (APM 15.7.2: vector n,
  // type 4). The instruction at the guest RIP tells (the guest's code is identity-mapped):
  // CD ib is INT n; the event is re-injected as what the guest executed, and counted.
  if (const std::uint8_t* code = guest_ram(rip, 2); code && code[0] == 0xCD && ii.valid() &&
                                                    !(ii.type() == sv::event_type::soft_int && ii.vector() == code[1])) {
    ++unmap.stale_intn;
    kprintf("HVKIT INFO run=%s exitintinfo=0x%llx at INT 0x%x: re-injected as INT 0x%x\n", st.cfg->base.name,
            (unsigned long long)ii.raw(), code[1], code[1]);
    ii = sv::event_info::make(code[1], sv::event_type::soft_int, false);
  }
  // QEMU 7.2 TCG erratum (docs/hypervisor.md): EXITINTINFO of an INT3 or INTO delivery has
  // TYPE 4 (software interrupt) instead of 3 (APM 15.7.2 / 15.20: TYPE 4 is INTn only; #BP and
  // #OF are exceptions, TYPE 3). Recognized by the instruction at RIP (CC or CE, decoded),
  // re-injected as the exception, counted.
  if (ii.valid() && ii.type() == sv::event_type::soft_int && (ii.vector() == 3 || ii.vector() == 4)) {
    if (const auto in = instruction_at_rip(regs);
        in && (in->op == em::mnemonic::int3 || in->op == em::mnemonic::into)) {
      if (unmap.soft_int_type_for_int3++ == 0) {
        ++results_errata;
        kprintf("HVKIT ERRATUM exitintinfo_int3_into_as_soft_int.%s exitintinfo=0x%llx rip=0x%llx\n", st.cfg->base.name,
                (unsigned long long)ii.raw(), (unsigned long long)rip);
      }
      ii = sv::event_info::make(ii.vector(), sv::event_type::exception, false);
    }
  }
  if (!ii.valid()) return true;
  // The event as the vendor-neutral x86::event (svm::to_event: TYPE 3 #BP/#OF are INT3/INTO),
  // an instruction event with its length nRIP - RIP; svm::to_eventinj gives it back with the
  // RIP advance that makes it return past its instruction, write_injection applies both.
  x86::event e = sv::to_event(ii);
  if (x86::is_instruction_event(e.kind)) e.instruction_length = static_cast<std::uint8_t>(instruction_length(regs));
  const sv::injection inj = sv::to_eventinj(e);
  sv::write_injection(vmcb, inj);
  unmap.seen_length = inj.rip_advance;
  unmap.seen_info = hvkit::vmx::from_event(e).info.raw();
  return true;
}

std::uint64_t npt_unmap_report() {
  const std::uint64_t r = (unmap.hits & 0xFF) | (std::uint64_t{unmap.seen_length & 0xFF} << 8) | (unmap.seen_info << 32);
  run.unmap_untouched_at_report = unmap.armed && unmap.hits == 0;
  if (unmap.armed) npt_unmap_restore();
  unmap.hits = 0;
  unmap.seen_info = 0;
  unmap.seen_length = 0;
  return r;
}

// ---- exit handlers -------------------------------------------------------------------------

/// The MSRs whose guest values live in the VMCB state-save area (APM Table B-2; VMLOAD and
/// VMSAVE move FS/GS base, KernelGsBase, STAR/LSTAR/CSTAR/SFMASK and SYSENTER_*): read or
/// write one. False for any other MSR.
template <class F>
bool vmcb_msr_field(F f, bool write, std::uint64_t& v) {
  if (write) sv::write(vmcb, f, v);
  else v = sv::read(vmcb, f);
  return true;
}
bool vmcb_msr(std::uint32_t m, bool write, std::uint64_t& v) {
  switch (m) {
    case x86::msr::ia32_fs_base: return vmcb_msr_field(fld::fs_base, write, v);
    case x86::msr::ia32_gs_base: return vmcb_msr_field(fld::gs_base, write, v);
    case x86::msr::ia32_sysenter_cs: return vmcb_msr_field(fld::sysenter_cs, write, v);
    case x86::msr::ia32_sysenter_esp: return vmcb_msr_field(fld::sysenter_esp, write, v);
    case x86::msr::ia32_sysenter_eip: return vmcb_msr_field(fld::sysenter_eip, write, v);
    case x86::msr::ia32_star: return vmcb_msr_field(fld::star, write, v);
    case x86::msr::ia32_lstar: return vmcb_msr_field(fld::lstar, write, v);
    case x86::msr::ia32_cstar: return vmcb_msr_field(fld::cstar, write, v);
    case x86::msr::ia32_fmask: return vmcb_msr_field(fld::sfmask, write, v);
    case x86::msr::ia32_kernel_gs_base: return vmcb_msr_field(fld::kernel_gs_base, write, v);
    case x86::msr::ia32_pat: return vmcb_msr_field(fld::g_pat, write, v);
    default: return false;
  }
}

bool spin_more();

/// QEMU 7.2 TCG erratum: it writes VMEXIT_INVALID (-1) as the 32-bit 0xFFFF_FFFF, its upper
/// half of EXITCODE 0 (APM Vol. 2 Appendix C: EXITCODE is 64 bits, VMEXIT_INVALID is -1).
/// Read as -1, counted, the first case printed.
std::uint64_t exitcode_32bit_errata = 0;
exit_code read_exit_code() {
  const std::uint64_t raw = sv::read(vmcb, fld::exit_code);
  if (raw != 0xFFFF'FFFFull) return static_cast<exit_code>(raw);
  return static_cast<exit_code>(note_exitcode_32bit(raw));
}


/// The core::backend over the current VMCB: RAX and RSP in the VMCB, the other GPRs in the
/// block the VMRUN stub saved (svm::register_file). Without decode assists (Bochs 2.7 has
/// none) a CR-write or descriptor-table exit names the instruction class but not its
/// operands: the emulator decodes and executes the instruction at the guest RIP.
struct svm_backend {
  guest_regs& regs;
  core::context& c;
  exit_code code = exit_code::invalid;

  core::exit_info decode() {
    using K = core::exit_kind;
    code = read_exit_code();
    const unsigned s = slot(code);
    const char* n = sv::name(code);
    if (sv::is_cr_write(code)) return {K::cr_access, s, n};
    using enum sv::exit_code;
    switch (code) {
      case vmmcall: return {K::hypercall, s, n};
      case cpuid: return {K::cpuid, s, n};
      case msr: return {sv::msr_is_write(sv::read(vmcb, fld::exit_info_1)) ? K::msr_write : K::msr_read, s, n};
      case cr0_sel_write: return {K::cr_access, s, n};
      case idtr_read: case gdtr_read: case ldtr_read: case tr_read:
      case idtr_write: case gdtr_write: case ldtr_write: case tr_write: return {K::descriptor_table, s, n};
      case npf: return {K::memory, s, "npf"};
      case vmrun: case vmload: case vmsave: case stgi: case clgi: case skinit: case invlpga:
        return {K::virt_instruction, s, n};
      case intr: return {K::preempted, s, n};
      case hlt: return {K::hlt, s, n};
      case ioio: return {K::io, s, n};
      case shutdown: return {K::triple_fault, s, n};
      case invalid: return {K::entry_failed, s, n};
      default: return {K::unhandled, s, n};
    }
  }
  std::uint64_t gpr(x86::gpr r) const { return vcpu{vmcb, regs}.read(r); }
  void set_gpr(x86::gpr r, std::uint64_t v) {
    vcpu rf{vmcb, regs};
    rf.write(r, v);
  }
  guest_regs& gprs() { return regs; }
  unsigned cpl() const { return static_cast<unsigned>(sv::read(vmcb, fld::cpl)); }
  core::guest_crs crs() const {
    return {{sv::read_typed(vmcb, fld::cr0), sv::read_typed(vmcb, fld::cr4), guest_efer()}, sv::read_typed(vmcb, fld::cr3)};
  }
  void skip() { skip_instruction(regs); }
  void inject(x86::vector v, std::uint32_t error_code) { svm::inject(v, error_code); }
  void report_exit(const char* what, bool expected) { svm::report_exit(what, expected); }

  bool state_msr(std::uint32_t m, bool write, std::uint64_t& v) { return vmcb_msr(m, write, v); }
  void write_efer(const pg::cr_state& after) { sv::write(vmcb, fld::efer, after.efer | x86::efer::svme); }
  /// Nested paging: no PDPTE registers, no shadow roots; the MMU role follows the registers.
  bool apply_mmu_actions(pg::mmu_actions actions, const pg::cr_state& after, x86::cr3) {
    if (!actions.any(pg::mmu_actions::refresh_permissions | pg::mmu_actions::reset_mmu)) return false;
    run.mmu = pg::mmu_context::make(after.cr0, after.cr4, after.efer, run.mmu.root());
    return true;
  }

  /// IOIO intercept, EXITINFO1 (APM Vol. 2 15.10.2, Figure 15-2).
  core::io_access io() const {
    const sv::ioio_info i{sv::read(vmcb, fld::exit_info_1)};
    return {i.port(), i.size(), i.in(), i.string()};
  }
  bool cr_access() { return core::emulate_instruction(*this, c, sv::name(code)); }
  bool entry_failed() {
    if (qemu_mov_cr3_invalid_erratum(regs, run.exits.total - 1)) return true;
    svm::report_exit("vmrun_consistency_check_failed");
    return false;
  }

  bool read_context(em::context& ctx) {
    ctx = svm::read_context(regs);
    return true;
  }
  /// emulate/vmcb_context.hpp writes a `done` instruction back; an exception goes into
  /// EVENTINJ (CR2 for #PF into the VMCB, which VMRUN loads).
  core::applied apply(const em::context& before, const em::context& after, const em::outcome& o) {
    switch (o.kind) {
      case em::outcome_kind::exception:
        if (o.vector == x86::vector::pf) sv::write(vmcb, fld::cr2, o.cr2);
        svm::inject(o.vector, o.error_code);
        return run.status == run_status::triple_fault ? core::applied::shutdown : core::applied::injected;
      case em::outcome_kind::needs_io:
      case em::outcome_kind::needs_mmio:
      case em::outcome_kind::unsupported: return core::applied::not_applied;
      case em::outcome_kind::done: break;
    }
    vcpu rf{vmcb, regs};
    em::write_emulation_context(vmcb, rf, before, after, o);
    return core::applied::done;
  }

  bool memory_case() { return npt_case_npf() || npt_unmapped_page_hit(regs); }
  bool during_delivery() const { return sv::event_info{sv::read(vmcb, fld::exit_int_info)}.valid(); }
  bool fetch_fault() const {
    return sv::decode_npf(sv::read(vmcb, fld::exit_info_1), sv::read(vmcb, fld::exit_info_2)).error.is_fetch();
  }
  bool misconfig_case() { return false; }
  std::uint64_t second_stage_arm(guest_regs& r) {
    npt_arm(r);
    return 0;
  }
  std::uint64_t second_stage_check(guest_regs& r) { return npt_check(r); }
  bool unmap_once(std::uint64_t gpa) { return npt_unmap_once(gpa); }
  std::uint64_t unmap_report() { return npt_unmap_report(); }
  bool spin_more() { return svm::spin_more(); }
};
static_assert(core::backend<svm_backend>);

/// One #VMEXIT: TLB_CONTROL back to nothing, the event whose delivery the exit interrupted
/// re-injected (APM 15.7.2; EXITINTINFO has the EVENTINJ layout) unless a handler replaces or
/// merges it, then the core's exit loop. True: run the guest again.
bool handle_exit(guest_regs& regs) {
  set_tlb_control(sv::tlb_control::do_nothing);
  const sv::event_info intinfo{sv::read(vmcb, fld::exit_int_info)};
  sv::write(vmcb, fld::event_injection, intinfo.valid() ? intinfo.raw() : std::uint64_t{0});
  core::context c{run, run, guest_policy, guest_msrs};
  svm_backend b{regs, c};
  return core::handle_exit(b, c);
}


/// The last VMCB run on this CPU: another one ran in between, nothing of the next one's may
/// come from the processor's VMCB cache (APM 15.15).
const vmcb_slot* last_vmcb_run = nullptr;

/// One VMRUN of the current VMCB: RAX from the register block into the VMCB (VMRUN loads it
/// from there, 15.5.1), VMCB_CLEAN from the tracker, and RAX back into the block afterwards.
void vmrun(guest_regs& regs) {
  vmcb_slot& s = *vmcb.slot;
  sv::write(vmcb, fld::rax, regs[x86::gpr::rax]);
  if (last_vmcb_run != &s) s.tracked.invalidate();
  s.tracked.prepare_vmrun();
  last_vmcb_run = &s;
  svm_vmrun(&regs, pa(s.page), pa(host_save_page));
  regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
}

// ---- two guests, one CPU: VMCB switches and the IBPB policy --------------------------------
constexpr std::uint64_t guest_b_hpa = 0x3000000;  // 48 MiB: guest B's 2 MiB of RAM
constexpr std::uint64_t guest_b_gpa = 0x1000000;  // seen by guest B at 16 MiB
constexpr std::uint64_t spin_a2_gpa = layout::guest_mem_base + 0xE00000;
constexpr std::uint32_t timer_initial_count = 10000;  // local APIC timer, divide by 1
// A slice is a number of timer ticks, not a time: under nested KVM (KVM's APIC timer, and an
// INTR exit that costs far more than 10000 ticks) the next interrupt was pending at every
// VMRUN and no spinner ever ran an instruction (100000 slices, 0 spins). A spinner slice
// that ran none of its instructions doubles the count (up to this cap), and the later
// scheduled runs of the boot start with the count learned (hostile_guest_b expects guest B
// to run its first instruction in its first slice); on Bochs alone every slice makes
// progress and the count stays 10000.
constexpr std::uint32_t timer_max_count = 1u << 26;
std::uint32_t timer_count = timer_initial_count;

std::uint64_t ibpb_barriers;
/// What the running two-guest run has seen so far (run_scheduled): guest A keeps spinning
/// (hc::spin_more) until A2 and B have each spun (run instructions in a slice) and both kinds
/// of switch happened.
struct sched_progress {
  bool active;
  std::uint64_t a2_spins, b_spins, same_guest, cross_guest;
  bool b_dead;
};
constinit sched_progress sched{};
bool spin_more() {
  if (!sched.active) return false;
  return sched.a2_spins == 0 || (sched.b_spins == 0 && !sched.b_dead) || sched.same_guest == 0 ||
         sched.cross_guest == 0;
}
bool host_has_ibpb;
struct counting_barrier {
  void operator()() const noexcept {
    ++ibpb_barriers;
    if (host_has_ibpb) sv::pred_cmd_barrier{}();
  }
};

/// `inc qword [counter]; jmp back` (SDM Vol. 2A 2.1.5: ModRM 04, SIB 25, disp32).
void write_spin_code(std::uint8_t* at, std::uint32_t counter_gpa) {
  const std::uint8_t code[] = {0x48, 0xFF, 0x04, 0x25, static_cast<std::uint8_t>(counter_gpa),
                               static_cast<std::uint8_t>(counter_gpa >> 8), static_cast<std::uint8_t>(counter_gpa >> 16),
                               static_cast<std::uint8_t>(counter_gpa >> 24), 0xEB, 0xF6};
  for (unsigned i = 0; i < sizeof code; ++i) at[i] = code[i];
}

volatile std::uint32_t* lapic(unsigned reg) { return reinterpret_cast<volatile std::uint32_t*>(0xFEE00000ull + reg); }

/// The local APIC timer, periodic, on vector 0x30 (SDM Vol. 3A 11.5.4), and the host's
/// handlers for it and the spurious vector 0x3F.
/// The host IDT of the scheduled runs: the 32 exception gates of the host's own IDT plus
/// vectors 0x30 and 0x3F (the host's IDT has only the exceptions).
alignas(16) std::uint64_t sched_idt[2 * 64];

void load_idt(const void* base, std::uint16_t limit) {
  struct __attribute__((packed)) {
    std::uint16_t limit;
    std::uint64_t base;
  } idtr{limit, reinterpret_cast<std::uint64_t>(base)};
  asm volatile("lidt %0" ::"m"(idtr) : "memory");
}

void timer_start() {
  for (unsigned i = 0; i < 2 * 64; ++i) sched_idt[i] = i < 64 ? host_idt[i] : 0;
  auto gate = [](unsigned v, void (*h)()) {
    const auto a = reinterpret_cast<std::uint64_t>(h);
    sched_idt[2 * v] = (a & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((a >> 16) & 0xFFFF) << 48);
    sched_idt[2 * v + 1] = a >> 32;
  };
  gate(0x30, &svm_timer_isr);
  gate(0x3F, &svm_spurious_isr);
  load_idt(sched_idt, sizeof sched_idt - 1);
  outb(0x21, 0xFF);  // 8259 PICs: every line masked (OCW1)
  outb(0xA1, 0xFF);
  *lapic(0xF0) = 0x100 | 0x3F;        // spurious-interrupt vector register: APIC enabled
  *lapic(0x3E0) = 0xB;                // divide by 1
  *lapic(0x320) = 0x30 | (1u << 17);  // LVT timer: vector 0x30, periodic
  *lapic(0x380) = timer_count;
}
void timer_stop() {
  *lapic(0x380) = 0;
  *lapic(0x320) = 0x30 | (1u << 16);  // masked
  load_idt(host_idt, sizeof host_idt - 1);
}

struct vcpu_slot {
  const char* name;
  vmcb_slot* vmcb;
  sv::vmcb_identity id;  // VMCB address, VM, vCPU (the IBPB tracker's identity)
  guest_regs regs;
  std::uint64_t slices;
  std::uint64_t counter_hpa;
};

/// The VMCB of a spinner: the common set-up, then its own RIP/RSP/CR3/nested CR3.
void setup_spinner(vcpu_slot& sl, const hc::guest_header& g, const svm_run& cfg, std::uint64_t rip, std::uint64_t rsp,
                   std::uint64_t cr3, std::uint64_t ncr3) {
  vmcb.slot = sl.vmcb;
  setup_vmcb(g, cfg);
  sv::write(vmcb, fld::rip, rip);
  sv::write(vmcb, fld::rsp, rsp);
  sv::write(vmcb, fld::cr3, x86::cr3{cr3});
  // RFLAGS.IF = 1 as on VMX (scheduler.cpp, spin_rflags): with V_INTR_MASKING the guest's IF
  // should not matter for physical interrupts (APM 15.21.1), but Bochs 2.7 did not deliver
  // the host's timer interrupt (no INTR exit) while a spinner with IF = 0 ran.
  sv::write(vmcb, fld::rflags, x86::rflags{0x202});
  sv::write(vmcb, fld::n_cr3, ncr3);
}

/// APM 15.21.1: with V_INTR_MASKING the host's RFLAGS.IF at VMRUN masks physical interrupts,
/// the guest's only virtual ones; with the INTR intercept a physical interrupt is a #VMEXIT
/// whatever the guest's IF. The probe (once per boot, timer running, host IF = 1): guest A's
/// second VMCB runs `mov ecx, N; 1: dec ecx; jnz 1b; vmmcall` with RFLAGS = 0x2. N = 1000000
/// iterations last some 200 timer periods (a spinner does about 4800 loop iterations per
/// slice), so the exit must be INTR (60h); VMMCALL (81h) means the interrupt stayed pending
/// through the whole loop because the guest's IF was 0: a deviation, reported as an erratum
/// (the spinners run with IF = 1 for that reason, see setup_spinner).
void probe_v_intr_masking(vmcb_slot& slot, std::uint64_t code_gpa) {
  static bool probed = false;
  if (probed) return;
  probed = true;
  constexpr std::uint32_t iterations = 1000000;
  const std::uint8_t code[] = {0xB9, static_cast<std::uint8_t>(iterations), static_cast<std::uint8_t>(iterations >> 8),
                               static_cast<std::uint8_t>(iterations >> 16), static_cast<std::uint8_t>(iterations >> 24),
                               0xFF, 0xC9,          // dec ecx
                               0x75, 0xFC,          // jnz back to the dec
                               0x0F, 0x01, 0xD9,    // vmmcall
                               0xEB, 0xFE};         // jmp $
  auto* at = reinterpret_cast<std::uint8_t*>(code_gpa);
  for (unsigned i = 0; i < sizeof code; ++i) at[i] = code[i];
  vmcb_slot* const saved = vmcb.slot;
  vmcb.slot = &slot;
  const std::uint64_t rip = sv::read(vmcb, fld::rip);
  const x86::rflags rflags = sv::read_typed(vmcb, fld::rflags);
  sv::write(vmcb, fld::rip, code_gpa);
  sv::write(vmcb, fld::rflags, x86::rflags{0x2});
  guest_regs regs{};
  const std::uint64_t ticks_before = svm_timer_ticks;
  vmrun(regs);
  const auto code_seen = static_cast<exit_code>(sv::read(vmcb, fld::exit_code));
  const std::uint64_t left = regs[x86::gpr::rcx] & 0xFFFFFFFF;
  const std::uint64_t ticks = svm_timer_ticks - ticks_before;
  sv::write(vmcb, fld::rip, rip);
  sv::write(vmcb, fld::rflags, rflags);
  set_tlb_control(sv::tlb_control::do_nothing);
  vmcb.slot = saved;
  if (code_seen == exit_code::vmmcall) {
    ++results_errata;
    kprintf("HVKIT ERRATUM v_intr_masking_guest_if0 exit=0x81 loop_iterations=%u host_timer_ticks_after_exit=%llu\n",
            iterations, (unsigned long long)ticks);
  } else {
    result("v_intr_masking_guest_if0", code_seen == exit_code::intr, "exit=0x%llx loop_iterations_left=%llu",
           (unsigned long long)sv::raw(code_seen), (unsigned long long)left);
  }
}

/// Runs guest A (VMCB A1: the conformance guest in spin mode), guest A's second VMCB (A2)
/// and guest B round-robin A1 A2 A1 B, one timer slice each, until guest A reports done.
/// The tracker sees every VMCB switch and every VMRUN: the policy decides the barriers, the
/// run counts them.
void run_scheduled(const hc::guest_header& g, const svm_run& cfg) {
  auto* b = reinterpret_cast<std::uint8_t*>(guest_b_hpa);
  for (std::uint64_t i = 0; i < 0x200000; ++i) b[i] = 0;
  auto* bpt = reinterpret_cast<std::uint64_t*>(guest_b_hpa + 0x100000);  // identity, 2 MiB pages
  bpt[0] = (guest_b_gpa + 0x101000) | 0x3;
  bpt[512] = (guest_b_gpa + 0x102000) | 0x3;
  for (std::uint64_t i = 0; i < 512; ++i) bpt[1024 + i] = (i << 21) | 0x83;
  const bool hostile_b = cfg.base.guest_flags & hc::cfg_hostile_b;
  if (hostile_b) {
    b[0] = 0x0F;  // UD2 with an empty IDT (limit 0): #UD, #GP, #DF, shutdown
    b[1] = 0x0B;
  } else {
    write_spin_code(b, static_cast<std::uint32_t>(guest_b_gpa + 0x90000));
  }
  for (auto& e : npt_b_pml4) e = 0;
  for (auto& e : npt_b_pdpt) e = 0;
  for (auto& e : npt_b_pd) e = 0;
  npt_b_pml4[0] = pa(npt_b_pdpt) | 7;
  npt_b_pdpt[0] = pa(npt_b_pd) | 7;
  npt_b_pd[guest_b_gpa >> 21] = guest_b_hpa | 0x87;
  write_spin_code(reinterpret_cast<std::uint8_t*>(spin_a2_gpa), static_cast<std::uint32_t>(spin_a2_gpa + 0x10000));

  vcpu_slot slots[3] = {
      {"A1", &vmcb_a1, {pa(vmcb_a1.page), 1, 0}, run.regs, 0, 0},
      {"A2", &vmcb_a2, {pa(vmcb_a2.page), 1, 0}, {}, 0, spin_a2_gpa + 0x10000},
      {"B", &vmcb_b, {pa(vmcb_b.page), 2, 0}, {}, 0, guest_b_hpa + 0x90000},
  };
  setup_spinner(slots[1], g, cfg, spin_a2_gpa, spin_a2_gpa + 0x8000, layout::guest_boot_pt_gpa, pa(npt_pml4));
  setup_spinner(slots[2], g, cfg, guest_b_gpa, guest_b_gpa + 0x80000, guest_b_gpa + 0x100000, pa(npt_b_pml4));
  sv::write(vmcb, fld::idtr_limit, std::uint32_t{0});  // guest B has no IDT
  vmcb.slot = &vmcb_a1;

  host_has_ibpb = (cpuid(0x80000008).ebx >> 12) & 1;  // AMD: CPUID 8000_0008h:EBX[12] IBPB
  ibpb_barriers = 0;
  // svm::ibpb_tracker sees every VMRUN with the VMCB it runs: running another VMCB than the
  // last one is the switch (there is no VMPTRLD); the first VMRUN on this CPU is a barrier.
  sv::ibpb_tracker<counting_barrier> tracker{cfg.ibpb};
  std::uint64_t same_guest = 0, cross_guest = 0;
  static constexpr int order[4] = {0, 1, 0, 2};
  int current = 0;
  bool b_dead = false;
  svm_timer_ticks = 0;
  svm_host_if = 1;
  timer_start();
  probe_v_intr_masking(vmcb_a2, spin_a2_gpa + 0x100);
  svm_timer_ticks = 0;
  for (std::uint64_t n = 0; n < 100000 && run.status == run_status::running; ++n) {
    const int next = order[n % 4];
    if (next == 2 && b_dead) continue;  // a guest that died is not scheduled again
    if (next != current) {
      (slots[next].id.vm == slots[current].id.vm ? same_guest : cross_guest)++;
      current = next;
    }
    vmcb.slot = slots[current].vmcb;
    tracker.on_vmrun(slots[current].id);
    run.preempted = false;
    guest_regs& regs = slots[current].regs;
    write_cr2(sv::read(vmcb, fld::cr2));
    auto* const spins = reinterpret_cast<volatile std::uint64_t*>(slots[current].counter_hpa);
    const std::uint64_t spins_before = current != 0 ? *spins : 0;
    vmrun(regs);
    ++slots[current].slices;
    sched = {true, *reinterpret_cast<volatile std::uint64_t*>(slots[1].counter_hpa),
             *reinterpret_cast<volatile std::uint64_t*>(slots[2].counter_hpa), same_guest, cross_guest, b_dead};
    // Every exit of a spinner is the timer; guest A's are handled as in any run.
    const bool resume = handle_exit(regs);
    regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
    if (run.preempted && current != 0 && *spins == spins_before && timer_count < timer_max_count) {
      timer_count *= 2;  // a slice shorter than an exit: longer slices (timer_initial_count)
      *lapic(0x380) = timer_count;
    }
    if (run.preempted) continue;
    if (current == 2 && hostile_b && run.status == run_status::triple_fault) {
      kprintf("HVKIT INFO run=%s guest B triple-faulted after %llu slices: stopped, guest A continues\n",
              cfg.base.name, (unsigned long long)slots[2].slices);
      b_dead = true;
      sched.b_dead = true;
      run.status = run_status::running;
      continue;
    }
    if (!resume && run.status == run_status::running) run.status = run_status::fatal_exit;
    if (current != 0 && run.status == run_status::running) {
      report_exit("spinner_exit");
      run.status = run_status::fatal_exit;
    }
    if (resume) {
      // guest A asked for more (a hypercall): run it again at once, no switch
      --n;
    }
  }
  timer_stop();
  sched = {};
  svm_host_if = 0;
  vmcb.slot = &vmcb_a1;
  const std::uint64_t a2 = *reinterpret_cast<volatile std::uint64_t*>(slots[1].counter_hpa);
  const std::uint64_t bc = *reinterpret_cast<volatile std::uint64_t*>(slots[2].counter_hpa);
  const bool skip = cfg.ibpb == sv::ibpb_policy::skip_same_guest;
  const std::uint64_t expected = 1 + cross_guest + (skip ? 0 : same_guest);
  if (hostile_b) {
    result("hostile_guest_b_contained", b_dead && run.status == run_status::done && slots[2].slices == 1 && a2 > 0,
           "b_dead=%d b_slices=%llu a1_slices=%llu", b_dead ? 1 : 0, (unsigned long long)slots[2].slices,
           (unsigned long long)slots[0].slices);
    return;
  }
  kprintf("HVKIT INFO run=%s slices_a1=%llu slices_a2=%llu slices_b=%llu spins_a2=%llu spins_b=%llu timer_ticks=%llu "
          "timer_count=%u host_ibpb=%d\n",
          cfg.base.name, (unsigned long long)slots[0].slices, (unsigned long long)slots[1].slices,
          (unsigned long long)slots[2].slices, (unsigned long long)a2, (unsigned long long)bc,
          (unsigned long long)svm_timer_ticks, timer_count, host_has_ibpb ? 1 : 0);
  result(skip ? "ibpb_policy.skip_same_guest" : "ibpb_policy.every_vmcs_change",
         ibpb_barriers == expected && same_guest > 0 && cross_guest > 0 && a2 > 0 && bc > 0,
         "switches_same_guest=%llu switches_cross_guest=%llu barriers=%llu expected=%llu", (unsigned long long)same_guest,
         (unsigned long long)cross_guest, (unsigned long long)ibpb_barriers, (unsigned long long)expected);
}

using core::status_name;

bool run_guest(const svm_run& cfg, wp_summary& summary) {
  run = run_state{};
  run.cfg = &cfg.base;
  run.status = run_status::running;
  npt_diff_reset();
  unmap = unmap_state{};
  st.cfg = &cfg;
  kprintf("HVKIT RUN %s begin wp=%s cr0_intercept=%s\n", cfg.base.name,
          cfg.base.wp_intercepted ? "intercepted" : "guest_owned", cr0_intercept_name(cfg.cr.cr0_write));
  const hc::guest_header* g = load_guest(cfg.base.guest_flags & hc::cfg_guest32);
  if (!g) return false;
  vmcb.slot = &vmcb_a1;
  setup_vmcb(*g, cfg);
  run.regs[x86::gpr::rdi] = (cfg.base.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                            (cfg.base.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) | cfg.base.guest_flags;
  const std::uint64_t t0 = rdtsc();
  if (cfg.scheduled) run_scheduled(*g, cfg);
  while (run.status == run_status::running) {
    // VMRUN loads the guest's CR2 from the VMCB (APM 15.5.1). Bochs 2.7 does not: the guest
    // runs with the host's CR2. The first VMRUN of the boot checks which (the guest's first
    // exit, a CPUID, comes before any fault of its own); every later one also writes the
    // VMCB's CR2 into the real CR2, which is harmless where VMRUN loads it.
    static bool cr2_probed = false;
    constexpr std::uint64_t cr2_sentinel = 0xFFFFC2C2C2C2C000ull;
    const bool probe = !cr2_probed;
    write_cr2(probe ? cr2_sentinel : sv::read(vmcb, fld::cr2));
    vmrun(run.regs);
    if (probe) {
      cr2_probed = true;
      const std::uint64_t seen = sv::read(vmcb, fld::cr2);
      if (seen == cr2_sentinel) {
        ++results_errata;
        kprintf("HVKIT ERRATUM vmrun_does_not_load_cr2 vmcb_cr2=0x0 guest_cr2_at_first_exit=0x%llx\n",
                (unsigned long long)seen);
      } else {
        result("vmrun_loads_cr2", seen == 0, "guest_cr2_at_first_exit=0x%llx", (unsigned long long)seen);
      }
    }
    if (!handle_exit(run.regs) && run.status == run_status::running) run.status = run_status::fatal_exit;
    run.regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
  }
  const std::uint64_t t1 = rdtsc();
  for (unsigned i = 0; i < slot_count; ++i)
    if (run.exits.by_slot[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", cfg.base.name, i == 0x9F ? 0x400u : i, exit_name(i),
              (unsigned long long)run.exits.by_slot[i]);
  kprintf("HVKIT RUN %s end status=%s exits=%llu host_tsc=%llu\n", cfg.base.name, status_name(run.status),
          (unsigned long long)run.exits.total, (unsigned long long)(t1 - t0));
  core::context c{run, run, guest_policy, guest_msrs};
  core::report_run(c, true);
  if (cfg.base.guest_flags & hc::cfg_ept_diff) npt_diff_report();
  if (unmap.stale_intn) {
    ++results_errata;
    kprintf("HVKIT ERRATUM exitintinfo_stale_on_intn_delivery.%s cases=%llu\n", cfg.base.name,
            (unsigned long long)unmap.stale_intn);
  }
  const bool ok = core::report_status(c);
  summary = {ok && run.wp_seen, run.wp_toggles, run.wp_cr_exits, run.wp_mismatch, run.wp_tsc};
  return ok;
}

}  // namespace

bool g_active = false;

unsigned long long note_exitcode_32bit(unsigned long long raw) {
  if (exitcode_32bit_errata++ == 0) {
    ++results_errata;
    kprintf("HVKIT ERRATUM vmexit_invalid_exitcode_32bit exitcode=0x%llx (APM Appendix C: -1, 64 bits)\n", raw);
  }
  return sv::raw(exit_code::invalid);
}

bool active() { return g_active; }

guest_paging_regs live_paging_regs() {
  return {sv::read_typed(vmcb, fld::cr0), sv::read_typed(vmcb, fld::cr4), guest_efer(), sv::read_typed(vmcb, fld::cr3),
          sv::read_typed(vmcb, fld::rflags)};
}

bool available() {
  if (cpuid(0x80000000).eax < 0x8000000A) return false;
  return ((cpuid(0x80000001).ecx >> 2) & 1) && (cpuid(0x8000000A).edx & 1);
}

bool run_all() {
  g_active = true;
  vmcb.slot = &vmcb_a1;
  if (!build_policy() || !enable()) return false;
  build_npt();
  bool ok = true;
  if (exit_cost::requested()) {
    // The exit-cost guest profile instead of the conformance runs (docs/exit-cost.md): CR0.WP
    // guest-owned (no CR0 write intercept), then intercepted (the selective CR0 write
    // intercept, which CR0.TS changes do not trigger: APM Vol. 2 15.9.1).
    wp_summary unused{};
    ok = run_guest(svm_run{exit_cost::runs[0], cr_wp_owned}, unused);
    ok = run_guest(svm_run{exit_cost::runs[1], cr_wp_selective}, unused) && ok;
    return ok;
  }
  for (int i = 0; i < run_count; ++i) ok = run_guest(runs[i], summaries[i]) && ok;
  ok = vmrun_diff_run() && ok;
  if (exitcode_32bit_errata)
    kprintf("HVKIT INFO vmexit_invalid_exitcode_32bit cases=%llu\n", (unsigned long long)exitcode_32bit_errata);
  if (qemu_cr3_errata) {
    ++results_errata;
    kprintf("HVKIT ERRATUM mov_cr3_reserved_bit_vmexit_invalid.all cases=%llu\n", (unsigned long long)qemu_cr3_errata);
  }  // VMRUN's consistency checks, the CPU as the oracle (vmrun_diff.cpp)
  // The numbers the CR0.WP work is about: 0 exits per toggle guest-owned, 1 intercepted
  // (selective CR0 write intercept and plain CR0 write intercept alike).
  const wp_summary& owned = summaries[0];
  const wp_summary& sel = summaries[1];
  const wp_summary& all = summaries[2];
  const milli po = ratio(owned.cr_exits, owned.toggles), ps = ratio(sel.cr_exits, sel.toggles),
              pa_ = ratio(all.cr_exits, all.toggles);
  const bool cmp = owned.ok && sel.ok && all.ok && owned.toggles == 10000 && sel.toggles == 10000 &&
                   all.toggles == 10000 && owned.cr_exits == 0 && sel.cr_exits == sel.toggles &&
                   all.cr_exits == all.toggles && owned.mismatch == 0 && sel.mismatch == 0 && all.mismatch == 0;
  result("wp_exits_per_toggle", cmp, "guest_owned=%llu.%03llu intercepted=%llu.%03llu intercepted_cr0_all=%llu.%03llu",
         po.whole, po.frac, ps.whole, ps.frac, pa_.whole, pa_.frac);
  return ok;
}

}  // namespace hv::svm

