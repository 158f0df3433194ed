// hvkit reference hypervisor, SVM backend (AMD APM Vol. 2, chapter 15): SVM bring-up, the
// nested page table, the VMCB, the VMRUN loop, exit handling and the SVM runs of the
// conformance guest. The guest, its hypercall ABI (VMMCALL instead of VMCALL), the MMIO test
// device, the CPUID/MSR policy and the emulator are the ones the VMX backend uses.
//
// Without decode assists (Bochs 2.7 has none) a CR-write or descriptor-table exit says
// which instruction kind exited but not its operands: the instruction at the guest RIP is
// decoded and executed by hvkit::emulate, as an MMIO access after a nested page fault is.
#include "svm.hpp"

#include "../hv.hpp"
#include "vmcb.hpp"

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

alignas(4096) std::uint8_t vmcb_page[4096];
alignas(4096) std::uint8_t host_save_page[4096];  // VMSAVE/VMLOAD of the host's own state
alignas(4096) std::uint8_t hsave_page[4096];      // VM_HSAVE_PA: what VMRUN saves of the host
alignas(4096) std::uint8_t msrpm[8192];           // all ones: every MSR access exits
alignas(4096) std::uint8_t iopm[12288];           // all ones: every port access exits
alignas(4096) std::uint64_t npt_pml4[512];
alignas(4096) std::uint64_t npt_pdpt[512];
alignas(4096) std::uint64_t npt_pd[512];
alignas(4096) std::uint64_t npt_pd_alias[512];

alignas(4096) std::uint8_t vmcb_a2_page[4096];  // guest A's second VMCB (vmcb02 stand-in)
alignas(4096) std::uint8_t vmcb_b_page[4096];   // guest B
alignas(4096) std::uint64_t npt_b_pml4[512];    // guest B: GPA 16 MiB (2 MiB) -> HPA 48 MiB
alignas(4096) std::uint64_t npt_b_pdpt[512];
alignas(4096) std::uint64_t npt_b_pd[512];

/// The VMCB the exit handlers work on (the scheduled runs switch it).
vmcb_ref vmcb{vmcb_page};
std::uint64_t pa(const void* p) { return reinterpret_cast<std::uint64_t>(p); }

/// How CR0 writes are intercepted (APM 15.9 "Instruction Intercepts", 15.10.1 "CR0
/// Selective Write Intercept"): SVM has no guest/host masks; the guest owns every CR0 bit
/// whose change does not exit.
enum class cr0_intercept : std::uint8_t {
  none,       ///< the guest owns CR0 (WP toggles never exit; NPT keeps the host safe)
  selective,  ///< CR0_SEL_WRITE: any change of a bit other than TS and MP exits (WP does)
  all,        ///< CR0 write intercept: every MOV to CR0 / LMSW / CLTS exits
};

struct svm_run {
  run_config base;
  cr0_intercept cr0;
  /// Two guests and guest A's second VMCB switched on local APIC timer interrupts (INTR
  /// intercept), with this IBPB policy deciding each barrier (-1: one VMCB, no scheduling).
  int ibpb = -1;
};

constexpr svm_run runs[] = {
    {{"guest_owned", false, true, 0, run_status::done}, cr0_intercept::none},
    {{"intercepted", true, true, 0, run_status::done}, cr0_intercept::selective},
    {{"intercepted_cr0_all", true, true, 0, run_status::done}, cr0_intercept::all},
    {{"native_dt", false, false, 0, run_status::done}, cr0_intercept::none},
    {{"triple_fault", false, true, hc::cfg_quick | hc::cfg_triple_fault, run_status::triple_fault}, cr0_intercept::none},
    {{"after_triple_fault", false, true, hc::cfg_quick, run_status::done}, cr0_intercept::none},
    {{"stale_role_demo", false, true, hc::cfg_ltr_only, run_status::done, true}, cr0_intercept::none},
    // The CPU as the oracle: random page tables and registers, each access done natively by
    // the guest (under nested paging) and repeated by hvkit's walker.
    {{"paging_diff", false, false, hc::cfg_paging_diff, run_status::done}, cr0_intercept::none},
    // Nested paging as the second stage: random nested permissions, page sizes and reserved
    // bits on the guest's page-table pages and data page, #NPF predicted by a rule model.
    {{"npt_diff", false, false, hc::cfg_ept_diff, run_status::done}, cr0_intercept::none},
    // The 32-bit guest: 32-bit and PAE paging under nested paging, the CPU as the oracle.
    {{"paging_diff32", false, false, hc::cfg_guest32, run_status::done}, cr0_intercept::none},
    // Guest A (the conformance guest, spinning) with a second VMCB of its own vCPU and guest
    // B, round-robin A1 A2 A1 B on timer interrupts; the IBPB policy decides every barrier.
    {{"ibpb_skip_same_guest", false, true, hc::cfg_spin, run_status::done}, cr0_intercept::none,
     static_cast<int>(hvkit::vmx::ibpb_policy::skip_same_guest)},
    {{"ibpb_every_change", false, true, hc::cfg_spin, run_status::done}, cr0_intercept::none,
     static_cast<int>(hvkit::vmx::ibpb_policy::every_vmcs_change)},
    // Hostile: guest B triple-faults on its first slice (UD2 without an IDT: SHUTDOWN exit);
    // guest A (another VM) must go on.
    {{"hostile_guest_b", false, true, hc::cfg_spin | hc::cfg_hostile_b, run_status::done}, cr0_intercept::none,
     static_cast<int>(hvkit::vmx::ibpb_policy::skip_same_guest)},
};
constexpr int run_count = sizeof(runs) / sizeof(runs[0]);

/// Exit-code counters: codes 0x00-0x9D as themselves, #NPF (0x400) in slot 0x9F, anything
/// else in 0x9E.
constexpr unsigned slot_count = 0xA0;
constexpr unsigned slot(std::uint64_t code) {
  return code < 0x9E ? static_cast<unsigned>(code) : code == exit::npf ? 0x9F : 0x9E;
}
struct svm_counters {
  std::uint64_t total;
  std::uint64_t by[slot_count];
};
struct svm_state {
  const svm_run* cfg;
  svm_counters exits, mark;
  std::uint64_t pending_event;  // EXITINTINFO of this exit, re-injected unless replaced
  bool preempted;               // the last exit was a timer interrupt: switch, then resume
};
constinit svm_state st{};

struct wp_summary {
  bool ok;
  std::uint64_t toggles, cr_exits, mismatch, tsc;
};
wp_summary summaries[run_count];

const char* exit_name(unsigned s) {
  switch (s) {
    case 0x10: return "cr0_write";
    case 0x60: return "intr";
    case 0x14: return "cr4_write";
    case 0x65: return "cr0_sel_write";
    case 0x66: return "idtr_read";
    case 0x67: return "gdtr_read";
    case 0x68: return "ldtr_read";
    case 0x69: return "tr_read";
    case 0x6A: return "idtr_write";
    case 0x6B: return "gdtr_write";
    case 0x6C: return "ldtr_write";
    case 0x6D: return "tr_write";
    case 0x72: return "cpuid";
    case 0x78: return "hlt";
    case 0x7B: return "ioio";
    case 0x7C: return "msr";
    case 0x7F: return "shutdown";
    case 0x80: return "vmrun";
    case 0x81: return "vmmcall";
    case 0x82: return "vmload";
    case 0x83: return "vmsave";
    case 0x84: return "stgi";
    case 0x85: return "clgi";
    case 0x86: return "skinit";
    case 0x9F: return "npf";
    default: return s >= 0x40 && s < 0x60 ? "exception" : "other";
  }
}

// ---- CPUID policy ---------------------------------------------------------------------
/// CR4 bits the guest may set: the defined ones minus VMXE/SMXE (no VMX or SMX on this CPU
/// for the guest) and those whose feature the guest's CPUID does not enumerate.
x86::cr4 cr4_allowed() {
  namespace feat = cpuid_ns::feat;
  x86::cr4 a = x86::cr4::defined & ~(x86::cr4::vmxe | x86::cr4::smxe);
  struct {
    x86::cr4 bit;
    cpuid_ns::feature f;
  } const gates[] = {{x86::cr4::smep, feat::smep},         {x86::cr4::smap, feat::smap},
                     {x86::cr4::fsgsbase, feat::fsgsbase}, {x86::cr4::pcide, feat::pcid},
                     {x86::cr4::osxsave, feat::xsave},     {x86::cr4::umip, feat::umip},
                     {x86::cr4::pke, feat::pku},           {x86::cr4::la57, feat::la57}};
  for (const auto& g : gates)
    if (!guest_policy.has(g.f)) a = a.without(g.bit);
  return a;
}

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
  constexpr std::uint32_t vm_cr = 0xC0010114;
  std::uint64_t vmcr = 0;
  const bool has_vmcr = rdmsr_safe(vm_cr, vmcr);
  const auto e8a = cpuid(0x8000000A);
  kprintf("HVKIT INFO svm_revision=%u asids=%u svm_features_edx=0x%x vm_cr=0x%llx\n", e8a.eax & 0xFF, e8a.ebx,
          e8a.edx, (unsigned long long)vmcr);
  if (!has_vmcr) {
    // APM 15.30.1: VM_CR exists on every CPU with SVM. Bochs 2.7 raises #GP on RDMSR of it.
    ++results_errata;
    kprintf("HVKIT ERRATUM vm_cr_msr_not_implemented rdmsr_0xc0010114=#GP\n");
  }
  if (vmcr & (1u << 4)) {
    result("svm_enable", false, "reason=vm_cr_svmdis");
    return false;
  }
  // SVME, and NXE: nested entries use the host's paging mode, NX needs EFER.NXE (15.25.5).
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  wrmsr(x86::msr::ia32_efer, rdmsr(x86::msr::ia32_efer) | efer_svme | (nx ? efer_nxe : 0));
  wrmsr(msr_vm_hsave_pa, pa(hsave_page));
  for (auto& b : msrpm) b = 0xFF;
  for (auto& b : iopm) b = 0xFF;
  result("svm_enable", true, "nrips=%u npt=%u decode_assists=%u vmcb_clean=%u", (e8a.edx >> 3) & 1, e8a.edx & 1,
         (e8a.edx >> 7) & 1, (e8a.edx >> 5) & 1);
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

void set_seg(unsigned o, std::uint16_t sel, std::uint16_t attrib, std::uint32_t limit, std::uint64_t base) {
  vmcb.set<std::uint16_t>(o, sel);
  vmcb.set<std::uint16_t>(o + 2, attrib);
  vmcb.set<std::uint32_t>(o + 4, limit);
  vmcb.set<std::uint64_t>(o + 8, base);
}

/// The VMCB for a fresh run of the conformance guest: 64-bit mode, flat segments matching
/// its GDT, nested paging, the intercepts of the run (APM 15.5.1 lists the consistency
/// checks VMRUN makes: EFER.SVME set, the VMRUN intercept set, ASID non-zero, ...).
void setup_vmcb(const hc::guest_header& g, const svm_run& r) {
  for (unsigned i = 0; i < 4096; ++i) vmcb.p[i] = 0;
  // CR4: every write exits (SVM has no CR4 mask; on VMX the bits that feed translation are
  // host-owned), and is done by the emulator with the CR4 bits the CPUID policy allows.
  // (Not for the 32-bit guest: its CR4.PAE toggles stay native, the PAE check is the CPU's.)
  const bool guest32 = r.base.guest_flags & hc::cfg_guest32;
  std::uint32_t cr = guest32 ? 0 : 1u << (16 + 4);
  if (r.cr0 == cr0_intercept::all) cr |= 1u << (16 + 0);  // CR0 write
  vmcb.set<std::uint32_t>(off::intercept_cr, cr);
  std::uint32_t m1 = icpt1::cpuid | icpt1::hlt | icpt1::ioio_prot | icpt1::msr_prot | icpt1::shutdown | icpt1::invlpga;
  if (r.cr0 == cr0_intercept::selective) m1 |= icpt1::cr0_sel_write;
  if (r.ibpb >= 0) m1 |= icpt1::intr;  // the scheduled runs: timer interrupts end a slice
  if (r.base.dt_exiting)
    m1 |= icpt1::idtr_read | icpt1::gdtr_read | icpt1::ldtr_read | icpt1::tr_read | icpt1::idtr_write |
          icpt1::gdtr_write | icpt1::ldtr_write | icpt1::tr_write;
  vmcb.set<std::uint32_t>(off::intercept_misc1, m1);
  vmcb.set<std::uint32_t>(off::intercept_misc2, icpt2::vmrun | icpt2::vmmcall | icpt2::vmload | icpt2::vmsave |
                                                    icpt2::stgi | icpt2::clgi | icpt2::skinit);
  vmcb.set(off::iopm_base_pa, pa(iopm));
  vmcb.set(off::msrpm_base_pa, pa(msrpm));
  vmcb.set<std::uint32_t>(off::guest_asid, 1);
  vmcb.set<std::uint8_t>(off::tlb_control, 1);  // flush every ASID's entries at this VMRUN (15.16.1)
  vmcb.set(off::np_enable, 1);
  vmcb.set(off::n_cr3, pa(npt_pml4));
  // V_INTR_MASKING (bit 24 of 060h, APM 15.21.1): the host's RFLAGS.IF, not the guest's,
  // masks physical interrupts; with the INTR intercept they exit.
  if (r.ibpb >= 0) vmcb.set(off::vintr, 1ull << 24);

  // Attributes: descriptor bits 47:40 in 7:0 and 55:52 in 11:8 (APM 15.5.1 "segment state").
  set_seg(off::cs, hc::guest_cs, guest32 ? 0xC9B : 0xA9B, 0xFFFFFFFF, 0);  // 64-bit (or 32-bit) code, DPL 0
  for (unsigned o : {off::ss, off::ds, off::es, off::fs, off::gs}) set_seg(o, hc::guest_ds, 0xC93, 0xFFFFFFFF, 0);
  set_seg(off::ldtr, 0, 0, 0, 0);
  set_seg(off::tr, hc::guest_tr, 0x08B, 103, g.tss_base);  // busy 64-bit TSS
  vmcb.set<std::uint32_t>(off::gdtr + 4, static_cast<std::uint32_t>(g.gdt_limit));
  vmcb.set(off::gdtr + 8, g.gdt_base);
  vmcb.set<std::uint32_t>(off::idtr + 4, static_cast<std::uint32_t>(g.idt_limit));
  vmcb.set(off::idtr + 8, g.idt_base);
  vmcb.set<std::uint8_t>(off::cpl, 0);
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  run.guest_efer = guest32 ? 0 : efer_lme | efer_lma | (nx ? efer_nxe : 0);
  vmcb.set(off::efer, run.guest_efer | efer_svme);  // SVME must be set in the guest's EFER (15.5.1)
  const std::uint64_t cr0 = cr0_pg | cr0_wp | cr0_ne | cr0_et | cr0_pe;
  vmcb.set(off::cr0, cr0);
  vmcb.set(off::cr3, layout::guest_boot_pt_gpa);
  const std::uint64_t cr4 = guest32 ? x86::cr4::pse.raw() : cr4_pae;  // 32-bit paging with 4 MiB pages
  vmcb.set(off::cr4, cr4);
  vmcb.set(off::dr6, 0xFFFF0FF0);
  vmcb.set(off::dr7, 0x400);
  vmcb.set(off::rflags, 0x2);
  vmcb.set(off::rip, g.entry);
  vmcb.set(off::rsp, g.stack_top);
  vmcb.set(off::g_pat, 0x0007040600070406ull);  // the power-on PAT (APM Vol. 2, 7.8.2)
  run.mmu = pg::mmu_context::make(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{run.guest_efer},
                                  x86::gpa{layout::guest_boot_pt_gpa});
}

// ---- events ------------------------------------------------------------------------------
/// An exception into the guest through EVENTINJ (APM 15.20), merged with an event whose
/// delivery the exit interrupted (EXITINTINFO) by the SDM/APM rules (x86::merge_exception).
void inject(x86::vector vec, std::uint32_t error_code = 0) {
  x86::exception_event e{vec, error_code};
  const std::uint64_t pend = vmcb.get(off::eventinj);
  if (pend & event_valid) {
    const unsigned type = (pend >> 8) & 7;
    const auto first = static_cast<x86::vector>(pend & 0xFF);
    const auto m = x86::merge_exception(type == event_type_exception ? x86::first_event::exception
                                                                     : x86::first_event::interrupt,
                                        first, e);
    if (m.verdict == x86::merge_verdict::shutdown) {
      run.status = run_status::triple_fault;
      return;
    }
    e = m.event;
  }
  std::uint64_t ev = static_cast<std::uint64_t>(e.v) | (event_type_exception << 8) | event_valid;
  if (e.pushes_error_code()) ev |= event_has_error | (std::uint64_t{e.error_code} << 32);
  vmcb.set(off::eventinj, ev);
}

void skip_instruction() { vmcb.set(off::rip, vmcb.get(off::next_rip)); }  // NRIPS (15.7.1)

// ---- the emulator on a VMCB ----------------------------------------------------------------
em::segment read_seg(unsigned o) {
  em::segment s;
  s.selector = vmcb.get<std::uint16_t>(o);
  const std::uint32_t at = vmcb.get<std::uint16_t>(o + 2);
  // VMCB attributes -> the emulator's (VMX-layout) access rights: 7:0 stay, 11:8 -> 15:12;
  // a segment that is not present holds no usable descriptor.
  std::uint32_t ar = (at & 0xFF) | ((at & 0xF00) << 4);
  if (!(at & 0x80)) ar |= em::segment_ar::unusable.raw();
  s.ar = em::segment_ar{ar};
  s.limit = vmcb.get<std::uint32_t>(o + 4);
  s.base = vmcb.get(o + 8);
  return s;
}
void write_seg(unsigned o, const em::segment& s) {
  const std::uint32_t ar = s.ar.raw();
  const std::uint16_t at = s.ar.test(em::segment_ar::unusable) ? 0 : static_cast<std::uint16_t>((ar & 0xFF) | ((ar >> 4) & 0xF00));
  set_seg(o, s.selector, at, s.limit, s.base);
}
constexpr unsigned seg_off[6] = {off::es, off::cs, off::ss, off::ds, off::fs, off::gs};  // emulate::sreg order

em::context read_context(const guest_regs& regs) {
  em::context c;
  for (unsigned i = 0; i < 16; ++i) c.gpr[i] = regs[static_cast<x86::gpr>(i)];
  c.gpr[static_cast<unsigned>(x86::gpr::rax)] = vmcb.get(off::rax);
  c.gpr[static_cast<unsigned>(x86::gpr::rsp)] = vmcb.get(off::rsp);
  c.rip = vmcb.get(off::rip);
  c.rflags = x86::rflags{vmcb.get(off::rflags)};
  for (unsigned i = 0; i < 6; ++i) c.seg[i] = read_seg(seg_off[i]);
  c.ldtr = read_seg(off::ldtr);
  c.tr = read_seg(off::tr);
  c.gdtr = {vmcb.get(off::gdtr + 8), static_cast<std::uint16_t>(vmcb.get<std::uint32_t>(off::gdtr + 4))};
  c.idtr = {vmcb.get(off::idtr + 8), static_cast<std::uint16_t>(vmcb.get<std::uint32_t>(off::idtr + 4))};
  c.cr0 = x86::cr0{vmcb.get(off::cr0)};
  c.cr2 = vmcb.get(off::cr2);
  c.cr3 = x86::cr3{vmcb.get(off::cr3)};
  c.cr4 = x86::cr4{vmcb.get(off::cr4)};
  c.efer = x86::efer{vmcb.get(off::efer) & ~efer_svme};  // SVME is the host's, not the guest's
  c.dr[6] = vmcb.get(off::dr6);
  c.dr[7] = vmcb.get(off::dr7);
  c.cpl = vmcb.get<std::uint8_t>(off::cpl);
  c.maxphyaddr = static_cast<std::uint8_t>(guest_cpu_properties().maxphyaddr);
  c.cr4_allowed = cr4_allowed();
  return c;
}

/// The device and unassigned guest-physical space, as on VMX (exits.cpp's hv_platform).
struct platform : em::null_platform {
  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    const std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size) {
      out = device_read(g - layout::mmio_device_gpa, size);
    } else {
      out = size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
      ++run.unassigned_reads;
    }
    return true;
  }
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    const std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size)
      device_write(g - layout::mmio_device_gpa, size, v);
    else
      ++run.unassigned_writes;
    return true;
  }
};
static_assert(em::platform<platform>);

/// The guest MMU context with the CR0.WP passthrough refresh (counted), or without it in the
/// negative-control run (the stale role of the KVM bug).
struct translator {
  em::walker_translator<pg::flat_memory> inner;
  bool stale;
  bool refresh_passthrough_bits(x86::cr0 live) {
    if (stale) return false;
    const bool changed = inner.refresh_passthrough_bits(live);
    if (changed) ++run.passthrough_refreshes;
    return changed;
  }
  pg::walk_result walk(const pg::walk_request& req) { return inner.walk(req); }
};
static_assert(em::translator<translator>);

void report_exit(const char* what, bool expected = false) {
  kprintf("HVKIT %s %s: exitcode=0x%llx exitinfo1=0x%llx exitinfo2=0x%llx rip=0x%llx exitintinfo=0x%llx\n",
          expected ? "INFO expected" : "ERROR", what, (unsigned long long)vmcb.get(off::exitcode),
          (unsigned long long)vmcb.get(off::exitinfo1), (unsigned long long)vmcb.get(off::exitinfo2),
          (unsigned long long)vmcb.get(off::rip), (unsigned long long)vmcb.get(off::exitintinfo));
}

/// Emulates the instruction at the guest RIP (hvkit::emulate) and writes the outcome back
/// into the VMCB: registers, RIP, RFLAGS, segments, descriptor tables, CR0/CR3/CR4/EFER on
/// a CR write (the MMU role refreshed as paging::cr_write_actions says), the interrupt
/// shadow; an exception goes into EVENTINJ (CR2 for #PF into the VMCB, which VMRUN loads).
bool emulate_instruction(guest_regs& regs, const char* why) {
  em::context ctx = read_context(regs);
  const em::context before = ctx;
  const pg::cpu_properties props = guest_cpu_properties();
  run.mmu.set_root(x86::cr3_root(ctx.cr3, run.mmu.role().mode(), props.maxphyaddr));
  pg::flat_memory tables = guest_ram_view();
  em::flat_ram ram{reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
                   x86::gpa{layout::guest_mem_base}};
  translator tr{em::walker_translator<pg::flat_memory>{run.mmu, tables, props}, st.cfg->base.stale_role};
  platform plat;
  const em::outcome o = em::emulate(ctx, tr, ram, plat);
  ++run.emulated;
  switch (o.kind) {
    case em::outcome_kind::exception:
      if (o.vector == x86::vector::pf && st.cfg->base.stale_role && o.error_code == 0x3 &&
          !before.cr0.test(x86::cr0::wp))
        ++run.stale_wrong_faults;
      if (o.vector == x86::vector::pf) vmcb.set(off::cr2, o.cr2);
      inject(o.vector, o.error_code);
      return run.status == run_status::running;
    case em::outcome_kind::needs_io:
    case em::outcome_kind::needs_mmio:
    case em::outcome_kind::unsupported:
      if (o.kind == em::outcome_kind::unsupported &&
          (o.why == em::unsupported_reason::page_table_unbacked || o.why == em::unsupported_reason::fetch_not_ram)) {
        kprintf("HVKIT ERROR run=%s cannot emulate at rip=0x%llx (%s exit): reason %u\n", st.cfg->base.name,
                (unsigned long long)before.rip, why, static_cast<unsigned>(o.why));
        run.status = run_status::fatal_exit;
        return false;
      }
      ++run.not_emulable;
      kprintf("HVKIT INFO run=%s not_emulable rip=0x%llx (%s exit) outcome=%u mnemonic=%u: #UD\n", st.cfg->base.name,
              (unsigned long long)before.rip, why, static_cast<unsigned>(o.kind), static_cast<unsigned>(o.op));
      inject(x86::vector::ud);
      return true;
    case em::outcome_kind::done: break;
  }
  if (o.what == em::event::dr_write || o.what == em::event::halt) {
    kprintf("HVKIT ERROR run=%s emulated instruction with unexpected side effect %u (%s exit)\n", st.cfg->base.name,
            static_cast<unsigned>(o.what), why);
    run.status = run_status::fatal_exit;
    return false;
  }
  for (unsigned i = 0; i < 16; ++i)
    if (ctx.gpr[i] != before.gpr[i]) regs[static_cast<x86::gpr>(i)] = ctx.gpr[i];
  vmcb.set(off::rax, ctx.gpr[static_cast<unsigned>(x86::gpr::rax)]);
  vmcb.set(off::rsp, ctx.gpr[static_cast<unsigned>(x86::gpr::rsp)]);
  vmcb.set(off::rip, ctx.rip);
  vmcb.set(off::rflags, ctx.rflags.raw());
  for (unsigned i = 0; i < 6; ++i)
    if (!(ctx.seg[i] == before.seg[i])) write_seg(seg_off[i], ctx.seg[i]);
  if (!(ctx.ldtr == before.ldtr)) write_seg(off::ldtr, ctx.ldtr);
  if (!(ctx.tr == before.tr)) write_seg(off::tr, ctx.tr);
  if (!(ctx.gdtr == before.gdtr)) {
    vmcb.set<std::uint32_t>(off::gdtr + 4, ctx.gdtr.limit);
    vmcb.set(off::gdtr + 8, ctx.gdtr.base);
  }
  if (!(ctx.idtr == before.idtr)) {
    vmcb.set<std::uint32_t>(off::idtr + 4, ctx.idtr.limit);
    vmcb.set(off::idtr + 8, ctx.idtr.base);
  }
  if (o.what == em::event::cr_write) {
    const pg::cr_state b{before.cr0, before.cr4, before.efer}, a{ctx.cr0, ctx.cr4, ctx.efer};
    const auto actions = pg::cr_write_actions(b, a, pg::paging_kind::two_dimensional);
    if (actions.any(pg::mmu_actions::reset_mmu)) ++run.mmu_resets;
    if (actions.any(pg::mmu_actions::refresh_permissions | pg::mmu_actions::reset_mmu)) {
      run.mmu = pg::mmu_context::make(a.cr0, a.cr4, a.efer, run.mmu.root());
      ++run.mmu_refreshes;
    }
    vmcb.set(off::cr0, ctx.cr0.raw());
    vmcb.set(off::cr2, ctx.cr2);
    vmcb.set(off::cr3, ctx.cr3.raw());
    vmcb.set(off::cr4, ctx.cr4.raw());
    vmcb.set(off::efer, ctx.efer.raw() | efer_svme);
    run.guest_efer = ctx.efer.raw();
  }
  // The interrupt shadow after the instruction (APM 15.21.5): MOV SS sets it, else none.
  vmcb.set(off::interrupt_shadow, (vmcb.get(off::interrupt_shadow) & ~1ull) | (o.mov_ss_shadow ? 1 : 0));
  return true;
}


// ---- the NPT differential -------------------------------------------------------------------
// The EPT differential's guest (check_ept_differential) on nested paging: the guest's PD page,
// PT page and data page are reached through an alias at GPA 512 GiB + their address, whose
// nested entries (PML4E, PDPTE, PDE, and the PTE of each page) get the case's permission
// patterns (bit 0 -> P, bit 1 -> RW, bit 2 clear -> NX), a 2 MiB or 1 GiB nested page, or a
// reserved bit (a bit at or above MAXPHYADDR). The access is done natively; the hypervisor
// predicts #NPF (EXITINFO1 error code and bits 32/33, EXITINFO2 the guest-physical address)
// or the guest's own outcome with the rules of APM 15.25.5-15.25.6, written here apart from
// the CPU: every nested access is a user access; guest page-table reads are reads, their A/D
// updates writes; a fetch is checked against NX (the host runs with EFER.NXE = 1).
alignas(4096) std::uint64_t npt_alias_pdpt[512];
alignas(4096) std::uint64_t npt_alias_pd[512];
alignas(4096) std::uint64_t npt_alias_pt[512];
constexpr std::uint64_t np_p = 1, np_rw = 2, np_us = 4, np_ps = 0x80, np_nx = 1ull << 63;
constexpr std::uint64_t alias_base = hc::ept_alias_gpa;  // 512 GiB
constexpr std::uint64_t region = 0x1C00000;               // guest [28 MiB, 30 MiB)

struct npt_diff_state {
  bool armed;
  bool pred_npf;
  std::uint64_t pred_info, pred_gpa;
  std::uint32_t pred_result, pred_error;
  bool seen;
  std::uint64_t seen_info, seen_gpa;
  std::uint64_t cases, mismatches, npfs, table_npfs, rsv_npfs, guest_faults, large_cases, errata_ad;
};
constinit npt_diff_state nd{};

unsigned host_maxphyaddr() { return guest_cpu_properties().maxphyaddr; }

void npt_alias_reset() {
  for (std::uint64_t i = 0; i < 512; ++i) npt_alias_pt[i] = (region + (i << 12)) | np_p | np_rw | np_us;
  for (auto& e : npt_alias_pd) e = 0;
  for (auto& e : npt_alias_pdpt) e = 0;
  npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | np_p | np_rw | np_us;
  npt_alias_pdpt[0] = pa(npt_alias_pd) | np_p | np_rw | np_us;
  npt_pml4[1] = pa(npt_alias_pdpt) | np_p | np_rw | np_us;
  vmcb.set<std::uint8_t>(off::tlb_control, 1);  // the nested entries changed: flush (15.16.1)
}

std::uint64_t perm_entry(unsigned p) { return (p & 1 ? np_p : 0) | (p & 2 ? np_rw : 0) | np_us | (p & 4 ? 0 : np_nx); }

/// Applies hc::ept_arm's layout (hypercall.hpp) to the alias.
unsigned npt_apply_case(std::uint64_t d) {
  npt_alias_reset();
  unsigned perm[6] = {static_cast<unsigned>(d & 7),         static_cast<unsigned>((d >> 8) & 7),
                      static_cast<unsigned>((d >> 16) & 7), static_cast<unsigned>((d >> 24) & 7),
                      static_cast<unsigned>((d >> 27) & 7), static_cast<unsigned>((d >> 32) & 7)};
  // [0] data PTE, [1] PT page PTE, [2] PD page PTE, [3] PDE, [4] PDPTE, [5] PML4E
  const unsigned size = (d >> 36) & 3, kind = (d >> 40) & 3, level = (d >> 42) & 3;
  std::uint64_t bad = 0;
  if (kind == 1) perm[level == 0 ? 0 : level + 2] = 2;  // "W without R": not present here
  const unsigned maxpa = host_maxphyaddr();
  if (kind == 2 && maxpa < 52) bad = 1ull << maxpa;
  if (kind == 3 && maxpa < 51) bad = 1ull << 51;
  npt_pml4[1] = pa(npt_alias_pdpt) | perm_entry(perm[5]);
  std::uint64_t* leaf = &npt_alias_pt[2];
  if (size == 3) {
    npt_alias_pdpt[0] = perm_entry(perm[4]) | np_ps;  // 1 GiB at host 0 (this one case)
    leaf = &npt_alias_pdpt[0];
  } else {
    npt_alias_pdpt[0] = pa(npt_alias_pd) | perm_entry(perm[4]);
    if (size == 2) {
      npt_alias_pd[(region >> 21) & 511] = region | perm_entry(perm[3]) | np_ps;
      leaf = &npt_alias_pd[(region >> 21) & 511];
    } else {
      npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | perm_entry(perm[3]);
      npt_alias_pt[1] = (region + 0x1000) | perm_entry(perm[1]);
      npt_alias_pt[2] = (region + 0x2000) | perm_entry(perm[0]);
      npt_alias_pt[3] = (region + 0x3000) | perm_entry(perm[2]);
    }
  }
  if (bad) {
    std::uint64_t* at[4] = {leaf, &npt_alias_pd[(region >> 21) & 511], &npt_alias_pdpt[0], &npt_pml4[1]};
    *at[level] |= bad;
  }
  return size;
}

/// The rule model of one nested translation (APM 15.25.5: the host's long-mode format, user
/// access). Returns 0 if allowed, else the #NPF error code (P, W, U = 1, RSV, I/D).
std::uint64_t npt_model(std::uint64_t gpa, bool write, bool fetch) {
  const std::uint64_t acc = (write ? 2u : 0u) | 4u | (fetch ? 0x10u : 0u);
  const unsigned maxpa = host_maxphyaddr();
  const std::uint64_t rsv_hi = maxpa < 52 ? (((1ull << 52) - 1) & ~((1ull << maxpa) - 1)) : 0;
  const std::uint64_t* table = npt_pml4;
  bool rw = true, nx = false;
  for (int level = 4; level >= 1; --level) {
    const std::uint64_t e = table[(gpa >> (12 + 9 * (level - 1))) & 511];
    if (!(e & np_p)) return acc;
    const bool large = level > 1 && (e & np_ps);
    std::uint64_t rsv = rsv_hi;
    if (level == 4) rsv |= np_ps;
    if (large && level == 3) rsv |= 0x3FFFE000ull;
    if (large && level == 2) rsv |= 0x1FE000ull;
    if (e & rsv) return acc | 1 | 8;
    rw = rw && (e & np_rw);
    nx = nx || (e & np_nx);
    if (large || level == 1) break;
    table = reinterpret_cast<const std::uint64_t*>(e & 0x000FFFFFFFFFF000ull);
  }
  if (write && !rw) return acc | 1;
  if (fetch && nx) return acc | 1;
  return 0;
}

/// hc::ept_arm on SVM: apply the layout, predict.
void npt_arm(guest_regs& r) {
  using enum x86::gpr;
  const std::uint64_t la = r[rbx];
  const unsigned access = static_cast<unsigned>(r[rcx]);
  const unsigned size = npt_apply_case(r[rdx]);
  if (size) ++nd.large_cases;
  const bool write = access & 2, fetch = access & 0x10;
  nd.pred_npf = false;
  nd.pred_result = 0;
  nd.pred_error = 0;
  const std::uint64_t pde_gpa = alias_base + hc::ept_test_pd_gpa + 8 * ((la >> 21) & 511);
  const std::uint64_t pte_gpa = alias_base + hc::ept_test_pt_gpa + 8 * ((la >> 12) & 511);
  auto npf = [&](std::uint64_t err, std::uint64_t gpa, bool final_translation) {
    nd.pred_npf = true;
    nd.pred_info = err | (final_translation ? 1ull << 32 : 1ull << 33);
    nd.pred_gpa = gpa;
  };
  // 1. The guest walk: PML4E and PDPTE are in guest RAM (identity, RWX); the PDE and PTE are
  //    accessed through the alias, each checked as a user write as it is walked (the guest's
  //    entries have A clear, so each access also sets A: the nested check is a write, made at
  //    the walk, before the final translation; the #NPF error code then has W = 1).
  if (const std::uint64_t e = npt_model(pde_gpa, true, false)) return npf(e, pde_gpa, false);
  if (const std::uint64_t e = npt_model(pte_gpa, true, false)) return npf(e, pte_gpa, false);
  // 2. The guest's own permission check (CPL 0, CR0.WP = 1; PDE/PDPTE/PML4E are P|RW).
  const std::uint64_t pte = *reinterpret_cast<const volatile std::uint64_t*>(hc::ept_test_pt_gpa + 8 * ((la >> 12) & 511));
  if (!(pte & 1) || (write && !(pte & 2))) {
    nd.pred_result = 0x100 | 14;
    nd.pred_error = (pte & 1) | (write ? 2u : 0u) | (fetch ? 0x10u : 0u);
    return;
  }
  // 3. The final guest-physical address with the access itself.
  const std::uint64_t data_gpa = (pte & 0x000FFFFFFFFFF000ull) | (la & 0xFFF);
  if (const std::uint64_t e = npt_model(data_gpa, write, fetch)) return npf(e, data_gpa, true);
}

/// A #NPF inside the alias while a case is armed: recorded, the alias made RWX again, the
/// guest retries (and completes the access).
bool npt_case_npf() {
  const std::uint64_t gpa = vmcb.get(off::exitinfo2);
  if (!nd.armed || gpa < alias_base || gpa >= alias_base + (1ull << 30)) return false;
  if (!nd.seen) {
    nd.seen = true;
    nd.seen_info = vmcb.get(off::exitinfo1);
    nd.seen_gpa = gpa;
  }
  npt_alias_reset();
  return true;
}

/// hc::ept_check on SVM: compare. The error code bits P, W, U, RSV, I/D and bits 32/33 must
/// agree, and the guest-physical address.
std::uint64_t npt_check(guest_regs& r) {
  using enum x86::gpr;
  const auto cpu_result = static_cast<std::uint32_t>(r[rbx]);
  const auto cpu_error = static_cast<std::uint32_t>(r[rcx]);
  constexpr std::uint64_t mask = 0x1F | (3ull << 32);
  bool same;
  if (nd.pred_npf)
    same = nd.seen && (nd.seen_info & mask) == (nd.pred_info & mask) && nd.seen_gpa == nd.pred_gpa;
  else
    same = !nd.seen && cpu_result == nd.pred_result && (cpu_result == 0 || cpu_error == nd.pred_error);
  ++nd.cases;
  if (nd.seen) {
    ++nd.npfs;
    if (nd.seen_info & (1ull << 33)) ++nd.table_npfs;
    if (nd.seen_info & 8) ++nd.rsv_npfs;
  }
  if (cpu_result != 0) ++nd.guest_faults;
  if (!same && ++nd.mismatches <= 12)
    kprintf("HVKIT MISMATCH npt case=%llu case_info=0x%llx cpu: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x "
            "hvkit: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x\n",
            (unsigned long long)nd.cases, (unsigned long long)r[rsi], nd.seen ? 1 : 0,
            (unsigned long long)nd.seen_info, (unsigned long long)nd.seen_gpa, cpu_result, cpu_error,
            nd.pred_npf ? 1 : 0, (unsigned long long)nd.pred_info, (unsigned long long)nd.pred_gpa, nd.pred_result,
            nd.pred_error);
  nd.armed = false;
  nd.seen = false;
  npt_alias_reset();
  return same ? 0 : 1;
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
};
constinit unmap_state unmap{};

void npt_unmap_restore() {
  npt_pd[unmap.gpa >> 21] = unmap.saved_pde;
  unmap.armed = false;
  vmcb.set<std::uint8_t>(off::tlb_control, 1);
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
  vmcb.set<std::uint8_t>(off::tlb_control, 1);
  return true;
}

/// The unmapped page was touched while an event was delivered: map it back and re-inject
/// the event (handle_exit already copied EXITINTINFO into EVENTINJ). A software interrupt
/// (type 4) or a software exception (INT3, INTO: type 3, vectors 3 and 4) returns after its
/// instruction: the guest's RIP becomes NRIP (15.7.1) before the injection, since the
/// processor pushes the VMCB's RIP. The report gives the event in the VMX layout (SDM Vol. 3C
/// 25.8.3: type 6 software exception, 4 software interrupt, 3 hardware exception) with the
/// instruction length NRIP - RIP for software events, so one guest check serves both vendors.
bool npt_unmapped_page_hit() {
  if (!unmap.armed || (vmcb.get(off::exitinfo2) & ~0xFFFull) != unmap.gpa) return false;
  npt_unmap_restore();
  ++unmap.hits;
  std::uint64_t ii = vmcb.get(off::exitintinfo);
  // Bochs 2.7 erratum (docs/hypervisor.md): a #NPF while delivering INT n reports, in
  // EXITINTINFO, the last exception it delivered instead of the INT n (APM 15.7.2: vector n,
  // type 4). The instruction at the guest RIP tells (the guest's code is identity-mapped):
  // CD ib is INT n; the event is re-injected as what the guest executed, and counted.
  if (const std::uint8_t* code = guest_ram(vmcb.get(off::rip), 2); code && code[0] == 0xCD && (ii & event_valid) &&
                                                                    !(((ii >> 8) & 7) == 4 && (ii & 0xFF) == code[1])) {
    ++unmap.stale_intn;
    kprintf("HVKIT INFO run=%s exitintinfo=0x%llx at INT 0x%x: re-injected as INT 0x%x\n", st.cfg->base.name,
            (unsigned long long)ii, code[1], code[1]);
    ii = code[1] | (4u << 8) | event_valid;
    vmcb.set(off::eventinj, ii);
  }
  if (!(ii & event_valid)) return true;
  const unsigned type = (ii >> 8) & 7, vector = ii & 0xFF;
  const bool soft = type == 4 || (type == event_type_exception && (vector == 3 || vector == 4));
  unsigned vmx_type = type;
  if (type == event_type_exception && soft) vmx_type = 6;
  unmap.seen_length = 0;
  if (soft) {
    const std::uint64_t rip = vmcb.get(off::rip), nrip = vmcb.get(off::next_rip);
    unmap.seen_length = static_cast<unsigned>(nrip - rip);
    vmcb.set(off::rip, nrip);
  }
  unmap.seen_info = vector | (vmx_type << 8) | (ii & event_has_error) | event_valid;
  return true;
}

std::uint64_t npt_unmap_report() {
  const std::uint64_t r = (unmap.hits & 0xFF) | (std::uint64_t{unmap.seen_length & 0xFF} << 8) | (unmap.seen_info << 32);
  if (unmap.armed) npt_unmap_restore();
  unmap.hits = 0;
  unmap.seen_info = 0;
  unmap.seen_length = 0;
  return r;
}

// ---- exit handlers -------------------------------------------------------------------------
void handle_cpuid(guest_regs& regs) {
  using enum x86::gpr;
  cpuid_ns::vcpu_state vs{};
  vs.cr4 = x86::cr4{vmcb.get(off::cr4)};
  const cpuid_ns::regs a = guest_policy.answer(static_cast<std::uint32_t>(vmcb.get(off::rax)),
                                               static_cast<std::uint32_t>(regs[rcx]), vs);
  vmcb.set(off::rax, std::uint64_t{a.eax});
  regs[rbx] = a.ebx;
  regs[rcx] = a.ecx;
  regs[rdx] = a.edx;
  skip_instruction();
}

/// RDMSR/WRMSR (EXITINFO1 = 0 read, 1 write; APM 15.11): the CPUID-derived MSR policy first
/// (IA32_PRED_CMD ...), then the MSRs whose guest values live in the VMCB; anything else #GP.
void handle_msr(guest_regs& regs) {
  using enum x86::gpr;
  const bool write = vmcb.get(off::exitinfo1) & 1;
  const auto m = static_cast<std::uint32_t>(regs[rcx]);
  std::uint64_t v = (regs[rdx] << 32) | (vmcb.get(off::rax) & 0xFFFFFFFF);
  const cpuid_ns::msr_verdict verdict = write ? guest_msrs.write(m, v) : guest_msrs.read(m);
  if (verdict == cpuid_ns::msr_verdict::gp) return inject(x86::vector::gp);
  bool ok = true;
  unsigned field = 0;
  switch (m) {
    case x86::msr::ia32_fs_base: field = off::fs + 8; break;
    case x86::msr::ia32_gs_base: field = off::gs + 8; break;
    case x86::msr::ia32_sysenter_cs: field = off::sysenter_cs; break;
    case x86::msr::ia32_sysenter_esp: field = off::sysenter_esp; break;
    case x86::msr::ia32_sysenter_eip: field = off::sysenter_eip; break;
    case x86::msr::ia32_star: field = off::star; break;
    case x86::msr::ia32_lstar: field = off::lstar; break;
    case x86::msr::ia32_cstar: field = off::cstar; break;
    case x86::msr::ia32_fmask: field = off::sfmask; break;
    case x86::msr::ia32_kernel_gs_base: field = off::kernel_gs_base; break;
    case x86::msr::ia32_pat: field = off::g_pat; break;
    default: break;
  }
  if (verdict == cpuid_ns::msr_verdict::allow) {
    if (write) wrmsr(m, v);
    else v = rdmsr(m);
  } else if (m == x86::msr::ia32_efer) {
    const std::uint64_t cur = vmcb.get(off::efer) & ~efer_svme;
    if (!write) {
      v = cur;
    } else {
      // SCE and NXE may change; LME may not change with paging on; LMA is read-only.
      const std::uint64_t changeable = efer_sce | efer_nxe;
      if ((v & ~(changeable | efer_lme | efer_lma)) || ((v ^ cur) & efer_lme)) {
        ok = false;
      } else {
        const x86::cr0 cr0{vmcb.get(off::cr0)};
        const x86::cr4 cr4{vmcb.get(off::cr4)};
        const pg::cr_state b{cr0, cr4, x86::efer{cur}}, a{cr0, cr4, x86::efer{(cur & ~changeable) | (v & changeable)}};
        const auto actions = pg::cr_write_actions(b, a, pg::paging_kind::two_dimensional);
        if (actions.any(pg::mmu_actions::refresh_permissions | pg::mmu_actions::reset_mmu)) {
          run.mmu = pg::mmu_context::make(a.cr0, a.cr4, a.efer, run.mmu.root());
          ++run.mmu_refreshes;
        }
        vmcb.set(off::efer, a.efer.raw() | efer_svme);
        run.guest_efer = a.efer.raw();
      }
    }
  } else if (field != 0) {
    if (write) vmcb.set(field, v);
    else v = vmcb.get(field);
  } else {
    ok = false;
  }
  if (!ok) return inject(x86::vector::gp);
  if (!write) {
    vmcb.set(off::rax, v & 0xFFFFFFFF);
    regs[rdx] = v >> 32;
  }
  skip_instruction();
}

void print_section(const char* name, std::uint64_t ops, std::uint64_t guest_mismatch, std::uint64_t guest_tsc) {
  std::uint64_t total = st.exits.total - st.mark.total - 1;  // minus this mark_end VMMCALL
  const std::uint64_t cr = st.exits.by[slot(exit::cr0_sel_write)] - st.mark.by[slot(exit::cr0_sel_write)] +
                           st.exits.by[slot(exit::cr0_write)] - st.mark.by[slot(exit::cr0_write)];
  const std::uint64_t expect = st.cfg->base.wp_intercepted ? ops : 0;
  const bool pass = cr == expect && total == expect && guest_mismatch == 0;
  const milli per = ratio(cr, ops), tsc_per = ratio(guest_tsc, ops);
  char check[64];
  std::size_t n = 0;
  for (const char* p = name; *p && n < 40; ++p) check[n++] = *p;
  check[n++] = '.';
  for (const char* p = st.cfg->base.name; *p && n < 62; ++p) check[n++] = *p;
  check[n] = '\0';
  result(check, pass,
         "toggles=%llu cr_exits=%llu all_exits=%llu exits_per_toggle=%llu.%03llu expected=%llu guest_mismatches=%llu "
         "tsc_per_toggle=%llu.%03llu",
         (unsigned long long)ops, (unsigned long long)cr, (unsigned long long)total, per.whole, per.frac,
         (unsigned long long)expect, (unsigned long long)guest_mismatch, tsc_per.whole, tsc_per.frac);
  if (str_eq(name, "wp_toggle")) {
    run.wp_seen = true;
    run.wp_toggles = ops;
    run.wp_cr_exits = cr;
    run.wp_mismatch = guest_mismatch;
    run.wp_tsc = guest_tsc;
  }
}

/// VMMCALL (exit code 0x81): the hypercall ABI of hypercall.hpp, for CPL 0 only.
bool handle_vmmcall(guest_regs& regs) {
  using enum x86::gpr;
  char name[64];
  std::uint64_t ret = 0;
  const std::uint64_t nr = vmcb.get(off::rax);
  if (vmcb.get<std::uint8_t>(off::cpl) != 0) {
    vmcb.set(off::rax, ~0ull);
    skip_instruction();
    return true;
  }
  switch (nr) {
    case hc::log: {
      char buf[160];
      read_guest_string(regs[rbx], buf, sizeof buf);
      kprintf("guest: %s\n", buf);
      break;
    }
    case hc::mark_begin: st.mark = st.exits; break;
    case hc::mark_end:
      read_guest_string(regs[rbx], name, sizeof name);
      print_section(name, regs[rcx], regs[rdx], regs[rsi]);
      break;
    case hc::result: {
      read_guest_string(regs[rbx], name, sizeof name);
      char check[80];
      std::size_t n = 0;
      for (const char* p = name; *p && n < 60; ++p) check[n++] = *p;
      check[n++] = '.';
      for (const char* p = st.cfg->base.name; *p && n < 78; ++p) check[n++] = *p;
      check[n] = '\0';
      if (st.cfg->base.stale_role) {
        kprintf("HVKIT INFO run=%s guest_check=%s guest_verdict=%s a=0x%llx b=0x%llx\n", st.cfg->base.name, name,
                regs[rcx] == hc::result_pass ? "PASS" : "FAIL", (unsigned long long)regs[rdx],
                (unsigned long long)regs[rsi]);
        if (str_eq(name, "ltr_ro_gdt_wp0_ok")) {
          run.neg_wp0_seen = true;
          run.neg_wp0_result = regs[rcx];
        }
      } else if (regs[rcx] == hc::result_erratum && !st.cfg->base.dt_exiting) {
        ++results_errata;
        kprintf("HVKIT ERRATUM %s a=0x%llx b=0x%llx\n", check, (unsigned long long)regs[rdx],
                (unsigned long long)regs[rsi]);
      } else {
        result(check, regs[rcx] == hc::result_pass, "a=0x%llx b=0x%llx", (unsigned long long)regs[rdx],
               (unsigned long long)regs[rsi]);
      }
      break;
    }
    case hc::paging_case: ret = handle_paging_case(regs); break;
    case hc::paging_case32: ret = handle_paging_case32(regs); break;
    case hc::ept_arm:
      npt_arm(regs);
      nd.armed = true;
      nd.seen = false;
      break;
    case hc::ept_check: ret = npt_check(regs); break;
    case hc::ept_unmap_once: ret = npt_unmap_once(regs[rbx]) ? 0 : ~0ull; break;
    case hc::ept_unmap_report: ret = npt_unmap_report(); break;
    case hc::done:
      run.status = run_status::done;
      skip_instruction();
      return false;
    case hc::unexpected:
      kprintf("HVKIT ERROR guest exception vector=%llu error=0x%llx rip=0x%llx cr2=0x%llx\n",
              (unsigned long long)regs[rbx], (unsigned long long)regs[rcx], (unsigned long long)regs[rdx],
              (unsigned long long)regs[rsi]);
      run.status = run_status::fatal_exit;
      return false;
    default:
      ret = ~0ull;  // unknown (or VMX-only) hypercall: error return, the guest keeps running
      break;
  }
  vmcb.set(off::rax, ret);
  skip_instruction();
  return true;
}

/// #NPF (exit code 0x400; APM 15.25.6): EXITINFO1 = the #PF-style error code (bit 32: the
/// final guest-physical access faulted, bit 33: a guest page-table access did), EXITINFO2 =
/// the guest-physical address. Guest RAM is all mapped: this is the MMIO device or
/// unassigned space, done by the emulator against the platform.
bool handle_npf(guest_regs& regs) {
  const std::uint64_t info = vmcb.get(off::exitinfo1);
  if (npt_case_npf()) return true;  // a provoked one (NPT differential): retry
  if (npt_unmapped_page_hit()) return true;  // the re-injection check's page: mapped back
  if (vmcb.get(off::exitintinfo) & event_valid) {
    report_exit("npf_during_event_delivery");
    run.status = run_status::fatal_exit;
    return false;
  }
  if (info & (1u << 4)) {  // instruction fetch
    report_exit("guest_fetch_outside_memory");
    run.status = run_status::fatal_exit;
    return false;
  }
  return emulate_instruction(regs, "npf");
}

/// One #VMEXIT. Returns true to run the guest again.
bool handle_exit(guest_regs& regs) {
  const std::uint64_t code = vmcb.get(off::exitcode);
  ++st.exits.total;
  ++st.exits.by[slot(code)];
  vmcb.set<std::uint8_t>(off::tlb_control, 0);
  // An event whose delivery the exit interrupted is re-injected (APM 15.7.2), unless a
  // handler replaces or merges it.
  const std::uint64_t intinfo = vmcb.get(off::exitintinfo);
  vmcb.set(off::eventinj, (intinfo & event_valid) ? intinfo : 0);
  switch (code) {
    case exit::vmmcall: return handle_vmmcall(regs);
    case exit::cpuid: handle_cpuid(regs); return true;
    case exit::msr: handle_msr(regs); return run.status == run_status::running;
    case exit::cr0_sel_write: return emulate_instruction(regs, "cr0_sel_write");
    case exit::cr0_write: return emulate_instruction(regs, "cr0_write");
    case exit::cr4_write: return emulate_instruction(regs, "cr4_write");
    case exit::idtr_read: case exit::gdtr_read: case exit::ldtr_read: case exit::tr_read:
    case exit::idtr_write: case exit::gdtr_write: case exit::ldtr_write: case exit::tr_write:
      return emulate_instruction(regs, exit_name(slot(code)));
    case exit::npf: return handle_npf(regs);
    case exit::vmrun: case exit::vmload: case exit::vmsave: case exit::stgi: case exit::clgi: case exit::skinit:
    case exit::invlpga:
      // The guest's CPUID does not offer SVM: each SVM instruction is #UD (APM Vol. 3).
      ++run.vmx_ud_injected;
      inject(x86::vector::ud);
      return run.status == run_status::running;
    case exit::intr:
      st.preempted = true;  // end of a time slice (the scheduled runs)
      return false;
    case exit::hlt:
      report_exit("guest_halted");
      run.status = run_status::halted;
      return false;
    case exit::shutdown:
      report_exit("guest_triple_fault", st.cfg->base.expected == run_status::triple_fault ||
                                            (st.cfg->base.guest_flags & hc::cfg_hostile_b));
      run.status = run_status::triple_fault;
      return false;
    case exit::invalid:
      report_exit("vmrun_consistency_check_failed");
      run.status = run_status::entry_failed;
      return false;
    default:
      report_exit("unexpected_exit");
      run.status = run_status::fatal_exit;
      return false;
  }
}


// ---- two guests, one CPU: VMCB switches and the IBPB policy --------------------------------
constexpr std::uint64_t guest_b_hpa = 0x3000000;  // 48 MiB: guest B's 2 MiB of RAM
constexpr std::uint64_t guest_b_gpa = 0x1000000;  // seen by guest B at 16 MiB
constexpr std::uint64_t spin_a2_gpa = layout::guest_mem_base + 0xE00000;
constexpr std::uint32_t timer_initial_count = 10000;  // local APIC timer, divide by 1

std::uint64_t ibpb_barriers;
bool host_has_ibpb;
struct counting_barrier {
  void operator()() const noexcept {
    ++ibpb_barriers;
    if (host_has_ibpb) hvkit::vmx::pred_cmd_barrier{}();
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
  *lapic(0x380) = timer_initial_count;
}
void timer_stop() {
  *lapic(0x380) = 0;
  *lapic(0x320) = 0x30 | (1u << 16);  // masked
  load_idt(host_idt, sizeof host_idt - 1);
}

struct vcpu_slot {
  const char* name;
  std::uint8_t* page;
  hvkit::vmx::vmcs_identity id;  // VMCB address, VM, vCPU (the tracker's identity)
  guest_regs regs;
  std::uint64_t slices;
  std::uint64_t counter_hpa;
};

/// The VMCB of a spinner: the common set-up, then its own RIP/RSP/CR3/ASID/nested CR3.
void setup_spinner(vcpu_slot& sl, const hc::guest_header& g, const svm_run& cfg, std::uint64_t rip, std::uint64_t rsp,
                   std::uint64_t cr3, std::uint32_t asid, std::uint64_t ncr3) {
  vmcb = vmcb_ref{sl.page};
  setup_vmcb(g, cfg);
  vmcb.set(off::rip, rip);
  vmcb.set(off::rsp, rsp);
  vmcb.set(off::cr3, cr3);
  // RFLAGS.IF = 1 as on VMX (scheduler.cpp, spin_rflags): with V_INTR_MASKING the guest's IF
  // should not matter for physical interrupts (APM 15.21.1), but Bochs 2.7 did not deliver
  // the host's timer interrupt (no INTR exit) while a spinner with IF = 0 ran.
  vmcb.set(off::rflags, 0x202);
  vmcb.set<std::uint32_t>(off::guest_asid, asid);
  vmcb.set(off::n_cr3, ncr3);
}

/// Runs guest A (VMCB A1: the conformance guest in spin mode), guest A's second VMCB (A2)
/// and guest B round-robin A1 A2 A1 B, one timer slice each, until guest A reports done.
/// The tracker sees every VMCB switch and every VMRUN: the policy decides the barriers, the
/// run counts them.
void run_scheduled(const hc::guest_header& g, const svm_run& cfg) {
  namespace v = hvkit::vmx;
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
      {"A1", vmcb_page, {pa(vmcb_page), 1, 0}, run.regs, 0, 0},
      {"A2", vmcb_a2_page, {pa(vmcb_a2_page), 1, 0}, {}, 0, spin_a2_gpa + 0x10000},
      {"B", vmcb_b_page, {pa(vmcb_b_page), 2, 0}, {}, 0, guest_b_hpa + 0x90000},
  };
  setup_spinner(slots[1], g, cfg, spin_a2_gpa, spin_a2_gpa + 0x8000, layout::guest_boot_pt_gpa, 3, pa(npt_pml4));
  setup_spinner(slots[2], g, cfg, guest_b_gpa, guest_b_gpa + 0x80000, guest_b_gpa + 0x100000, 2, pa(npt_b_pml4));
  vmcb.set<std::uint32_t>(off::idtr + 4, 0);  // guest B has no IDT
  vmcb = vmcb_ref{vmcb_page};

  host_has_ibpb = (cpuid(0x80000008).ebx >> 12) & 1;  // AMD: CPUID 8000_0008h:EBX[12] IBPB
  ibpb_barriers = 0;
  v::ibpb_tracker<counting_barrier> tracker{static_cast<v::ibpb_policy>(cfg.ibpb)};
  tracker.on_vmcs_load(slots[0].id);  // the first VMCB on this CPU: always a barrier
  std::uint64_t same_guest = 0, cross_guest = 0;
  static constexpr int order[4] = {0, 1, 0, 2};
  int current = 0;
  bool b_dead = false;
  svm_timer_ticks = 0;
  svm_host_if = 1;
  timer_start();
  for (std::uint64_t n = 0; n < 100000 && run.status == run_status::running; ++n) {
    const int next = order[n % 4];
    if (next == 2 && b_dead) continue;  // a guest that died is not scheduled again
    if (next != current) {
      tracker.on_vmcs_load(slots[next].id);
      (slots[next].id.vm == slots[current].id.vm ? same_guest : cross_guest)++;
      current = next;
    }
    vmcb = vmcb_ref{slots[current].page};
    tracker.on_vm_entry();
    st.preempted = false;
    guest_regs& regs = slots[current].regs;
    vmcb.set(off::rax, regs[x86::gpr::rax]);
    write_cr2(vmcb.get(off::cr2));
    svm_vmrun(&regs, pa(slots[current].page), pa(host_save_page));
    regs[x86::gpr::rax] = vmcb.get(off::rax);
    ++slots[current].slices;
    // Every exit of a spinner is the timer; guest A's are handled as in any run.
    const bool resume = handle_exit(regs);
    regs[x86::gpr::rax] = vmcb.get(off::rax);
    if (st.preempted) continue;
    if (current == 2 && hostile_b && run.status == run_status::triple_fault) {
      kprintf("HVKIT INFO run=%s guest B triple-faulted after %llu slices: stopped, guest A continues\n",
              cfg.base.name, (unsigned long long)slots[2].slices);
      b_dead = true;
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
  svm_host_if = 0;
  vmcb = vmcb_ref{vmcb_page};
  const std::uint64_t a2 = *reinterpret_cast<volatile std::uint64_t*>(slots[1].counter_hpa);
  const std::uint64_t bc = *reinterpret_cast<volatile std::uint64_t*>(slots[2].counter_hpa);
  const bool skip = cfg.ibpb == static_cast<int>(v::ibpb_policy::skip_same_guest);
  const std::uint64_t expected = 1 + cross_guest + (skip ? 0 : same_guest);
  if (hostile_b) {
    result("hostile_guest_b_contained", b_dead && run.status == run_status::done && slots[2].slices == 1 && a2 > 0,
           "b_dead=%d b_slices=%llu a1_slices=%llu", b_dead ? 1 : 0, (unsigned long long)slots[2].slices,
           (unsigned long long)slots[0].slices);
    return;
  }
  kprintf("HVKIT INFO run=%s slices_a1=%llu slices_a2=%llu slices_b=%llu spins_a2=%llu spins_b=%llu timer_ticks=%llu "
          "host_ibpb=%d\n",
          cfg.base.name, (unsigned long long)slots[0].slices, (unsigned long long)slots[1].slices,
          (unsigned long long)slots[2].slices, (unsigned long long)a2, (unsigned long long)bc,
          (unsigned long long)svm_timer_ticks, host_has_ibpb ? 1 : 0);
  result(skip ? "ibpb_policy.skip_same_guest" : "ibpb_policy.every_vmcs_change",
         ibpb_barriers == expected && same_guest > 0 && cross_guest > 0 && a2 > 0 && bc > 0,
         "switches_same_guest=%llu switches_cross_guest=%llu barriers=%llu expected=%llu", (unsigned long long)same_guest,
         (unsigned long long)cross_guest, (unsigned long long)ibpb_barriers, (unsigned long long)expected);
}

const char* status_name(run_status s) {
  switch (s) {
    case run_status::running: return "running";
    case run_status::done: return "done";
    case run_status::halted: return "halted";
    case run_status::triple_fault: return "triple_fault";
    case run_status::entry_failed: return "entry_failed";
    case run_status::vm_fail: return "vm_fail";
    case run_status::fatal_exit: return "fatal_exit";
  }
  return "?";
}

void name_check(char (&out)[48], const char* prefix, const char* name) {
  std::size_t n = 0;
  for (const char* p = prefix; *p && n < sizeof out - 1; ++p) out[n++] = *p;
  for (const char* p = name; *p && n < sizeof out - 1; ++p) out[n++] = *p;
  out[n] = '\0';
}

bool run_guest(int index) {
  const svm_run& cfg = runs[index];
  run = run_state{};
  run.cfg = &cfg.base;
  run.status = run_status::running;
  st = svm_state{};
  nd = npt_diff_state{};
  unmap = unmap_state{};
  st.cfg = &cfg;
  kprintf("HVKIT RUN %s begin wp=%s cr0_intercept=%s\n", cfg.base.name,
          cfg.base.wp_intercepted ? "intercepted" : "guest_owned",
          cfg.cr0 == cr0_intercept::none ? "none" : cfg.cr0 == cr0_intercept::selective ? "selective" : "all");
  const hc::guest_header* g = load_guest(cfg.base.guest_flags & hc::cfg_guest32);
  if (!g) return false;
  setup_vmcb(*g, cfg);
  run.regs[x86::gpr::rdi] = (cfg.base.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                            (cfg.base.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) | cfg.base.guest_flags;
  const std::uint64_t t0 = rdtsc();
  if (cfg.ibpb >= 0) run_scheduled(*g, cfg);
  while (run.status == run_status::running) {
    vmcb.set(off::rax, run.regs[x86::gpr::rax]);
    // VMRUN loads the guest's CR2 from the VMCB (APM 15.5.1). Bochs 2.7 does not: the guest
    // runs with the host's CR2. The first VMRUN of the boot checks which (the guest's first
    // exit, a CPUID, comes before any fault of its own); every later one also writes the
    // VMCB's CR2 into the real CR2, which is harmless where VMRUN loads it.
    static bool cr2_probed = false;
    constexpr std::uint64_t cr2_sentinel = 0xFFFFC2C2C2C2C000ull;
    const bool probe = !cr2_probed;
    write_cr2(probe ? cr2_sentinel : vmcb.get(off::cr2));
    svm_vmrun(&run.regs, pa(vmcb_page), pa(host_save_page));
    if (probe) {
      cr2_probed = true;
      const std::uint64_t seen = vmcb.get(off::cr2);
      if (seen == cr2_sentinel) {
        ++results_errata;
        kprintf("HVKIT ERRATUM vmrun_does_not_load_cr2 vmcb_cr2=0x0 guest_cr2_at_first_exit=0x%llx\n",
                (unsigned long long)seen);
      } else {
        result("vmrun_loads_cr2", seen == 0, "guest_cr2_at_first_exit=0x%llx", (unsigned long long)seen);
      }
    }
    run.regs[x86::gpr::rax] = vmcb.get(off::rax);
    if (!handle_exit(run.regs) && run.status == run_status::running) run.status = run_status::fatal_exit;
    run.regs[x86::gpr::rax] = vmcb.get(off::rax);
  }
  const std::uint64_t t1 = rdtsc();
  for (unsigned i = 0; i < slot_count; ++i)
    if (st.exits.by[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", cfg.base.name, i == 0x9F ? 0x400u : i, exit_name(i),
              (unsigned long long)st.exits.by[i]);
  kprintf("HVKIT RUN %s end status=%s exits=%llu host_tsc=%llu\n", cfg.base.name, status_name(run.status),
          (unsigned long long)st.exits.total, (unsigned long long)(t1 - t0));
  kprintf("HVKIT INFO run=%s mmio_reads=%llu mmio_writes=%llu unassigned_reads=%llu unassigned_writes=%llu "
          "not_emulable=%llu emulated=%llu\n",
          cfg.base.name, (unsigned long long)run.device_reads, (unsigned long long)run.device_writes,
          (unsigned long long)run.unassigned_reads, (unsigned long long)run.unassigned_writes,
          (unsigned long long)run.not_emulable, (unsigned long long)run.emulated);
  char check[48];
  if (cfg.base.guest_flags & hc::cfg_paging_diff) {
    static const char* const kinds[7] = {"cpl0_read",  "cpl0_write", "cpl0_fetch",        "cpl3_read",
                                         "cpl3_write", "cpl3_fetch", "implicit_supervisor"};
    for (unsigned k = 0; k < 7; ++k)
      kprintf("HVKIT INFO run=%s paging_cases kind=%s ok=%llu fault=%llu\n", cfg.base.name, kinds[k],
              (unsigned long long)run.pg_by_kind[k][0], (unsigned long long)run.pg_by_kind[k][1]);
    result("paging_differential", run.pg_cases >= 10000 && run.pg_mismatches == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu a_set_on_faulting_walk=%llu bochs_b1_errata=%llu "
           "bochs_b2_errata=%llu bochs_b3_errata=%llu",
           (unsigned long long)run.pg_cases, (unsigned long long)run.pg_mismatches,
           (unsigned long long)run.pg_cpu_faults, (unsigned long long)run.pg_a_on_fault,
           (unsigned long long)run.pg_errata_b1, (unsigned long long)run.pg_errata_b2,
           (unsigned long long)run.pg_errata_b3);
    if (run.pg_errata_b3)
      kprintf("HVKIT ERRATUM smap_ac_overrides_implicit_access.%s cases=%llu\n", cfg.base.name,
              (unsigned long long)run.pg_errata_b3);
  }
  if (cfg.base.guest_flags & hc::cfg_guest32) {
    result("paging_differential_32bit", run.pg_mode_cases[1] >= 5000 && run.pg_mode_mismatches[1] == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu ok_4m_pages=%llu ok_pse36_above_4g=%llu bochs_b3_errata=%llu",
           (unsigned long long)run.pg_mode_cases[1], (unsigned long long)run.pg_mode_mismatches[1],
           (unsigned long long)run.pg_mode_faults[1], (unsigned long long)run.pg_mode_large_ok[1],
           (unsigned long long)run.pg_pse36_ok, (unsigned long long)run.pg_mode_b3[1]);
    result("paging_differential_pae", run.pg_mode_cases[2] >= 5000 && run.pg_mode_mismatches[2] == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu ok_2m_pages=%llu bochs_b3_errata=%llu",
           (unsigned long long)run.pg_mode_cases[2], (unsigned long long)run.pg_mode_mismatches[2],
           (unsigned long long)run.pg_mode_faults[2], (unsigned long long)run.pg_mode_large_ok[2],
           (unsigned long long)run.pg_mode_b3[2]);
    // With nested paging MOV to CR3 loads no PDPTEs (no #GP); a reserved bit is the walk's #PF.
    result("pae_pdpte_load", run.pdpte_loads >= 5000 && run.pdpte_gp == 0 && run.pdpte_walk_rsv > 0 &&
                                 run.pdpte_mismatches == 0,
           "loads=%llu gp=%llu reserved_pdpte_walk_pf=%llu mismatches=%llu", (unsigned long long)run.pdpte_loads,
           (unsigned long long)run.pdpte_gp, (unsigned long long)run.pdpte_walk_rsv,
           (unsigned long long)run.pdpte_mismatches);
  }
  if (cfg.base.guest_flags & hc::cfg_ept_diff) {
    result("npt_differential", nd.cases >= 2000 && nd.mismatches == 0 && nd.table_npfs > 0 && nd.rsv_npfs > 0,
           "cases=%llu mismatches=%llu npfs=%llu guest_table_npfs=%llu reserved_bit_npfs=%llu large_page_cases=%llu "
           "guest_faults=%llu",
           (unsigned long long)nd.cases, (unsigned long long)nd.mismatches, (unsigned long long)nd.npfs,
           (unsigned long long)nd.table_npfs, (unsigned long long)nd.rsv_npfs, (unsigned long long)nd.large_cases,
           (unsigned long long)nd.guest_faults);
    npt_pml4[1] = 0;  // the alias exists only during this run
  }
  if (cfg.base.stale_role) {
    result("stale_wp_role_negative_control",
           run.neg_wp0_seen && run.neg_wp0_result == hc::result_fail && run.stale_wrong_faults > 0,
           "guest_ltr_wp0_verdict=%s wrong_pf_0x3_injected=%llu",
           run.neg_wp0_seen ? (run.neg_wp0_result == hc::result_pass ? "PASS" : "FAIL") : "missing",
           (unsigned long long)run.stale_wrong_faults);
  } else if (cfg.base.dt_exiting && !(cfg.base.guest_flags & (hc::cfg_quick | hc::cfg_spin))) {
    // As on VMX: intercepted WP toggles refresh the role at the exit; guest-owned toggles
    // are caught by the passthrough refresh at the next emulated access.
    const bool pass = run.mmu_resets == 0 &&
                      (cfg.base.wp_intercepted ? run.mmu_refreshes >= 11000 && run.passthrough_refreshes == 0
                                               : run.mmu_refreshes == 0 && run.passthrough_refreshes >= 2);
    name_check(check, "mmu_wp_sync.", cfg.base.name);
    result(check, pass, "cr_exit_refreshes=%llu resets=%llu passthrough_refreshes=%llu",
           (unsigned long long)run.mmu_refreshes, (unsigned long long)run.mmu_resets,
           (unsigned long long)run.passthrough_refreshes);
  }
  if (unmap.stale_intn) {
    ++results_errata;
    kprintf("HVKIT ERRATUM exitintinfo_stale_on_intn_delivery.%s cases=%llu\n", cfg.base.name,
            (unsigned long long)unmap.stale_intn);
  }
  const bool ok = run.status == cfg.base.expected;
  name_check(check, "run.", cfg.base.name);
  result(check, ok, "status=%s expected=%s", status_name(run.status), status_name(cfg.base.expected));
  const bool intact = *reinterpret_cast<const volatile std::uint32_t*>(layout::hypervisor_image_gpa) == 0x1BADB002;
  if (!intact) result("hypervisor_memory_intact", false, "run=%s", cfg.base.name);
  summaries[index] = {ok && run.wp_seen, run.wp_toggles, run.wp_cr_exits, run.wp_mismatch, run.wp_tsc};
  return ok;
}

}  // namespace

bool g_active = false;

bool active() { return g_active; }

guest_paging_regs live_paging_regs() {
  return {x86::cr0{vmcb.get(off::cr0)}, x86::cr4{vmcb.get(off::cr4)}, x86::efer{vmcb.get(off::efer) & ~efer_svme},
          x86::cr3{vmcb.get(off::cr3)}, x86::rflags{vmcb.get(off::rflags)}};
}

bool available() {
  if (cpuid(0x80000000).eax < 0x8000000A) return false;
  return ((cpuid(0x80000001).ecx >> 2) & 1) && (cpuid(0x8000000A).edx & 1);
}

bool run_all() {
  g_active = true;
  if (!build_policy() || !enable()) return false;
  build_npt();
  bool ok = true;
  for (int i = 0; i < run_count; ++i) ok = run_guest(i) && ok;
  ok = vmrun_diff_run() && ok;  // VMRUN's consistency checks, the CPU as the oracle (vmrun_diff.cpp)
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
