// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, the SVM runs of the conformance guest: their configurations,
// the VMRUN loop of one run, the two-guest scheduler with the IBPB policy, and the results.
#include "svm.hpp"
#include "svm_internal.hpp"
#include "../core/shadow_paging.hpp"

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
#include "../core/scheduler.hpp"
#include "../profiles/exit_cost.hpp"

extern "C" {
void svm_timer_isr();
void svm_spurious_isr();
}

namespace hv::svm {

/// The APM's name of the exit code counted in slot `s` (Appendix C, Table C-1).
const char* exit_slot_name(unsigned s) {
  if (s == 0x9F) return sv::name(exit_code::npf);
  if (s == 0x9E) return "OTHER";
  const char* n = sv::name(static_cast<exit_code>(s));
  return n ? n : "OTHER";
}

namespace {

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

struct wp_summary {
  bool ok;
  std::uint64_t toggles, cr_exits, mismatch, tsc;
};

// ---- two guests, one CPU: VMCB switches (the SVM vendor of core::run_two_guests) -----------
constexpr std::uint32_t timer_initial_count = 10000;  // local APIC timer, divide by 1
// A slice is a number of timer ticks, not a time: under nested KVM (KVM's APIC timer, and an
// INTR exit that costs far more than 10000 ticks) the next interrupt was pending at every
// VMRUN and no spinner ever ran an instruction (100000 slices, 0 spins). A spinner slice
// that ran none of its instructions doubles the count (up to this cap), and the later
// scheduled runs of the boot start with the count learned (hostile_guest_b expects guest B
// to run its first instruction in its first slice); on Bochs alone every slice makes
// progress and the count stays 10000.
constexpr std::uint32_t timer_max_count = 1u << 26;

/// What the conformance runs of one boot share beyond their own vCPU (run_all()'s, handed to
/// every run): the three VMCB slots, the two-guest runs' slice length in timer ticks (learned,
/// the later scheduled runs start with it) and the once-per-boot probes done.
struct boot_runs {
  svm_host& host;
  conformance_pages& pages;
  const conformance_vmcbs& slots;
  core::tally& results;  ///< the boot's
  std::uint32_t timer_count = timer_initial_count;
  bool cr2_probed = false;
  bool v_intr_masking_probed = false;
  /// The local APIC timer's interrupts during a two-guest run: svm_timer_isr (svm_entry.cpp)
  /// counts them at GS base, which the run points here (and gives back at its end).
  volatile std::uint64_t timer_ticks = 0;
  std::uint64_t saved_gs_base = 0;
};

/// What the two-guest run has seen so far (core::run_two_guests): guest A keeps spinning
/// (hc::spin_more, the vCPU's spin_more) until A2 and B have each spun (run instructions in a
/// slice) and both kinds of switch happened.
bool spin_more_now(const core::sched_progress& p) {
  return p.a2_spins == 0 || (p.b_spins == 0 && !p.b_dead) || p.same_guest == 0 || p.cross_guest == 0;
}
volatile std::uint32_t* lapic(unsigned reg) { return reinterpret_cast<volatile std::uint32_t*>(0xFEE00000ull + reg); }

/// The local APIC timer, periodic, on vector 0x30 (SDM Vol. 3A 11.5.4), and the host's
/// handlers for it and the spurious vector 0x3F.
/// The host IDT of the scheduled runs (conformance_pages::sched_idt, 64 gates): the 32
/// exception gates of the host's own IDT plus vectors 0x30 and 0x3F (the host's IDT has only
/// the exceptions).
constexpr unsigned sched_idt_entries = 2 * 64;

void load_idt(const void* base, std::uint16_t limit) {
  struct __attribute__((packed)) {
    std::uint16_t limit;
    std::uint64_t base;
  } idtr{limit, reinterpret_cast<std::uint64_t>(base)};
  asm volatile("lidt %0" ::"m"(idtr) : "memory");
}

void timer_start(std::uint64_t* sched_idt, std::uint32_t timer_count) {
  for (unsigned i = 0; i < sched_idt_entries; ++i) sched_idt[i] = i < 64 ? current_host_tables().idt[i] : 0;
  auto gate = [sched_idt](unsigned v, void (*h)()) {
    const auto a = reinterpret_cast<std::uint64_t>(h);
    sched_idt[2 * v] = (a & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((a >> 16) & 0xFFFF) << 48);
    sched_idt[2 * v + 1] = a >> 32;
  };
  gate(0x30, &svm_timer_isr);
  gate(0x3F, &svm_spurious_isr);
  load_idt(sched_idt, sched_idt_entries * sizeof(std::uint64_t) - 1);
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
  load_idt(current_host_tables().idt, sizeof current_host_tables().idt - 1);
}

/// The VMCB of a spinner: the common set-up, then its own RIP/RSP/CR3/nested CR3.
void setup_spinner(boot_runs& br, current_vmcb& vmcb, vmcb_slot& sl, const hc::guest_header& g, const svm_run& cfg,
                   core::vcpu_state& vs, const core::spinner_start& s, std::uint64_t ncr3) {
  vmcb.slot = &sl;
  setup_vmcb(br.host, br.pages, vmcb, g, cfg, vs);
  sv::write(vmcb, fld::rip, s.rip);
  sv::write(vmcb, fld::rsp, s.rsp);
  sv::write(vmcb, fld::cr3, x86::cr3{s.cr3});
  // RFLAGS.IF = 1 as on VMX (vmx/scheduler.cpp, spin_rflags): with V_INTR_MASKING the guest's IF
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
void probe_v_intr_masking(boot_runs& br, current_vmcb& vmcb, vmcb_slot& slot, std::uint64_t code_gpa) {
  if (br.v_intr_masking_probed) return;
  br.v_intr_masking_probed = true;
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
  const std::uint64_t ticks_before = br.timer_ticks;
  vmrun(br.host, vmcb, regs);
  const auto code_seen = static_cast<exit_code>(sv::read(vmcb, fld::exit_code));
  const std::uint64_t left = regs[x86::gpr::rcx] & 0xFFFFFFFF;
  const std::uint64_t ticks = br.timer_ticks - ticks_before;
  sv::write(vmcb, fld::rip, rip);
  sv::write(vmcb, fld::rflags, rflags);
  set_tlb_control(vmcb, sv::tlb_control::do_nothing);
  vmcb.slot = saved;
  if (code_seen == exit_code::vmmcall) {
    ++br.results.errata;
    kprintf("HVKIT ERRATUM v_intr_masking_guest_if0 exit=0x81 loop_iterations=%u host_timer_ticks_after_exit=%llu\n",
            iterations, (unsigned long long)ticks);
  } else {
    result(br.results, "v_intr_masking_guest_if0", code_seen == exit_code::intr, "exit=0x%llx loop_iterations_left=%llu",
           (unsigned long long)sv::raw(code_seen), (unsigned long long)left);
  }
}

/// The SVM vendor of core::run_two_guests: VMCB A1 (the run's), A2 and B, a slice ended by
/// the local APIC timer's INTR exit (the host runs the guests with RFLAGS.IF = 1).
struct svm_two_guests {
  current_vmcb& vmcb;  ///< the run's VMCB, switched between the three blocks
  boot_runs& br;
  const conformance_vmcbs& slots = br.slots;
  run_state& vs;
  const svm_run& cfg;
  npt_diff_state& nd;
  vmcb_slot* const blocks[3] = {&slots.a1, &slots.a2, &slots.b};

  std::uint64_t block(unsigned i) const { return pa(blocks[i]->page); }
  /// Guest B's nested page table (its 2 MiB at HPA guest_b_hpa, seen at GPA guest_b_gpa), the
  /// two spinners' VMCBs (A2 on guest A's), A1 current; the timer started and V_INTR_MASKING
  /// probed once per boot.
  bool prepare(const hc::guest_header& g, const core::spinner_start& a2, const core::spinner_start& b) {
    const conformance_npt& n = br.pages.npt;
    for (unsigned i = 0; i < 512; ++i) n.b_pml4[i] = n.b_pdpt[i] = n.b_pd[i] = 0;
    n.b_pml4[0] = pa(n.b_pdpt) | 7;
    n.b_pdpt[0] = pa(n.b_pd) | 7;
    n.b_pd[core::guest_b_gpa >> 21] = core::guest_b_hpa | 0x87;
    setup_spinner(br, vmcb, slots.a2, g, cfg, vs, a2, pa(n.pml4));
    setup_spinner(br, vmcb, slots.b, g, cfg, vs, b, pa(n.b_pml4));
    sv::write(vmcb, fld::idtr_limit, std::uint32_t{0});  // guest B has no IDT
    vmcb.slot = &slots.a1;
    br.timer_ticks = 0;
    br.saved_gs_base = rdmsr(x86::msr::ia32_gs_base);
    wrmsr(x86::msr::ia32_gs_base, reinterpret_cast<std::uint64_t>(&br.timer_ticks));  // svm_timer_isr's counter
    br.host.host_interrupts = true;
    timer_start(br.pages.sched_idt, br.timer_count);
    probe_v_intr_masking(br, vmcb, slots.a2, core::spin_a2_gpa + 0x100);
    br.timer_ticks = 0;
    return true;
  }
  bool host_has_ibpb() const { return (cpuid(0x80000008).ebx >> 12) & 1; }  // AMD: CPUID 8000_0008h:EBX[12] IBPB
  /// There is no VMPTRLD: the VMCB is the operand of the next VMRUN.
  bool load(unsigned i) {
    vmcb.slot = blocks[i];
    return true;
  }
  /// One VMRUN and its exit through the core; a spinner slice that ran none of its
  /// instructions lengthens the slices (boot_runs::timer_count).
  core::slice_end run_slice(unsigned i, core::sched_slot& s, const core::sched_progress& p) {
    write_cr2(sv::read(vmcb, fld::cr2));
    auto* const spins = reinterpret_cast<volatile std::uint64_t*>(s.counter_hpa);
    const std::uint64_t spins_before = i != 0 ? *spins : 0;
    vmrun(br.host, vmcb, s.regs);
    vs.spin_more = spin_more_now(p);
    const bool resume = handle_exit(br.host, vmcb, s.regs, vs, &br.pages.npt, &nd);  // every exit of a spinner is the timer
    s.regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
    if (vs.preempted && i != 0 && *spins == spins_before && br.timer_count < timer_max_count) {
      br.timer_count *= 2;  // a slice shorter than an exit: longer slices (timer_initial_count)
      *lapic(0x380) = br.timer_count;
    }
    return resume ? core::slice_end::again : core::slice_end::stopped;
  }
  void finish() {
    timer_stop();
    vs.spin_more = false;
    br.host.host_interrupts = false;
    wrmsr(x86::msr::ia32_gs_base, br.saved_gs_base);
    vmcb.slot = &slots.a1;
    kprintf("HVKIT INFO run=%s timer_ticks=%llu timer_count=%u\n", cfg.base.name, (unsigned long long)br.timer_ticks,
            br.timer_count);
  }
  void report_exit(const char* what) { svm::report_exit(vmcb, what); }
};
static_assert(core::two_guest_vendor<svm_two_guests>);

/// The two-guest run of `vs` (core::run_two_guests) with the run's IBPB policy.
void run_scheduled(current_vmcb& vmcb, boot_runs& br, const hc::guest_header& g, const svm_run& cfg, run_state& vs,
                   npt_diff_state& nd) {
  svm_two_guests v{vmcb, br, br.slots, vs, cfg, nd};
  static_cast<void>(core::run_two_guests(v, vs, g, cfg.ibpb));
}

using core::status_name;

bool run_guest(const svm_run& cfg, const core::guest_cpu& cpu, boot_runs& br, wp_summary& summary) {
  // The run's vCPU and its checks: this function's, handed on (handle_exit, the scheduler,
  // the reports), never a global.
  run_state vs{};
  vs.cfg = &cfg.base;
  vs.cpu = &cpu;
  vs.results = &br.results;
  vs.status = run_status::running;
  npt_diff_state nd{};  // the run's NPT differential: this function's, handed to handle_exit
  kprintf("HVKIT RUN %s begin wp=%s cr0_intercept=%s\n", cfg.base.name,
          cfg.base.wp_intercepted ? "intercepted" : "guest_owned",
          core::shadow::enabled() ? "all(shadow)" : cr0_intercept_name(cfg.cr.cr0_write));
  hc::guest_header profile_header{};  // a guest profile's header (load_guest)
  const hc::guest_header* g = load_guest(br.results, profile_header, cfg.base.guest_flags & hc::cfg_guest32,
                                         cfg.base.profile);
  if (!g) return false;
  current_vmcb vmcb{&br.slots.a1};  // the run's VMCB: guest A's first, handed down
  setup_vmcb(br.host, br.pages, vmcb, *g, cfg, vs);
  vs.regs[x86::gpr::rdi] = (cfg.base.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                            (cfg.base.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) | cfg.base.guest_flags;
  const std::uint64_t t0 = rdtsc();
  if (cfg.scheduled) run_scheduled(vmcb, br, *g, cfg, vs, nd);
  while (vs.status == run_status::running) {
    // VMRUN loads the guest's CR2 from the VMCB (APM 15.5.1). Bochs 2.7 does not: the guest
    // runs with the host's CR2. The first VMRUN of the boot checks which (the guest's first
    // exit, a CPUID, comes before any fault of its own); every later one also writes the
    // VMCB's CR2 into the real CR2, which is harmless where VMRUN loads it.
    bool& cr2_probed = br.cr2_probed;
    constexpr std::uint64_t cr2_sentinel = 0xFFFFC2C2C2C2C000ull;
    const bool probe = !cr2_probed;
    write_cr2(probe ? cr2_sentinel : sv::read(vmcb, fld::cr2));
    vmrun(br.host, vmcb, vs.regs);
    if (probe) {
      cr2_probed = true;
      const std::uint64_t seen = sv::read(vmcb, fld::cr2);
      if (seen == cr2_sentinel) {
        ++br.results.errata;
        kprintf("HVKIT ERRATUM vmrun_does_not_load_cr2 vmcb_cr2=0x0 guest_cr2_at_first_exit=0x%llx\n",
                (unsigned long long)seen);
      } else {
        result(br.results, "vmrun_loads_cr2", seen == 0, "guest_cr2_at_first_exit=0x%llx", (unsigned long long)seen);
      }
    }
    if (!handle_exit(br.host, vmcb, vs.regs, vs, &br.pages.npt, &nd) && vs.status == run_status::running) vs.status = run_status::fatal_exit;
    vs.regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
  }
  const std::uint64_t t1 = rdtsc();
  for (unsigned i = 0; i < slot_count; ++i)
    if (vs.exits.by_slot[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", cfg.base.name, i == 0x9F ? 0x400u : i, exit_slot_name(i),
              (unsigned long long)vs.exits.by_slot[i]);
  kprintf("HVKIT RUN %s end status=%s exits=%llu host_tsc=%llu\n", cfg.base.name, status_name(vs.status),
          (unsigned long long)vs.exits.total, (unsigned long long)(t1 - t0));
  core::context c = context_of(vs);
  core::report_run(c, !core::shadow::enabled());  // nested paging loads no PDPTEs; the shadow MMU does (SDM 4.4.1)
  if (cfg.base.guest_flags & hc::cfg_ept_diff) npt_diff_report(br.results, br.pages.npt, nd, cpu.model);
  if (const std::uint64_t stale = vs.unmap.stale_intn) {
    ++br.results.errata;
    kprintf("HVKIT ERRATUM exitintinfo_stale_on_intn_delivery.%s cases=%llu\n", cfg.base.name,
            (unsigned long long)stale);
  }
  const bool ok = core::report_status(c);
  summary = {ok && vs.wp_seen, vs.wp_toggles, vs.wp_cr_exits, vs.wp_mismatch, vs.wp_tsc};
  return ok;
}

}  // namespace

/// The choice hv_main makes (and lx::boot): SVM when the processor has no VMX.
bool active() { return ((cpuid(1).ecx >> 5) & 1) == 0 && available(); }

guest_paging_regs live_paging_regs(current_vmcb& vmcb, const core::vcpu_state& st) {
  if (core::shadow::enabled()) {  // the guest's CR0.WP, CR3 and EFER: the real ones are the shadow MMU's
    const x86::cr0 real = sv::read_typed(vmcb, fld::cr0);
    return {core::shadow::guest_cr0(st).test(x86::cr0::wp) ? real : real.without(x86::cr0::wp),
            core::shadow::guest_view_cr4(st, sv::read_typed(vmcb, fld::cr4)),
            core::shadow::guest_efer(st), core::shadow::guest_cr3(st), sv::read_typed(vmcb, fld::rflags)};
  }
  return live_paging_regs(vmcb);
}
guest_paging_regs live_paging_regs(current_vmcb& vmcb) {
  return {sv::read_typed(vmcb, fld::cr0), sv::read_typed(vmcb, fld::cr4), guest_efer(vmcb), sv::read_typed(vmcb, fld::cr3),
          sv::read_typed(vmcb, fld::rflags)};
}

bool available() {
  if (cpuid(0x80000000).eax < 0x8000000A) return false;
  return ((cpuid(0x80000001).ecx >> 2) & 1) && (cpuid(0x8000000A).edx & 1);
}

bool run_all(const core::guest_cpu& cpu, core::page_pool& pool, core::tally& t) {
  // The processor's SVM state and the runs' pages: this function's, from the boot's pool,
  // handed to every run.
  svm_host host{pool};
  if (!enable(host, t)) return false;
  conformance_pages pages = take_conformance_pages(pool);
  build_npt(pages.npt);
  // The runs' three VMCBs: this function's slots over those pages, with the clean-bit
  // trackers VMCB clean bits allow (APM 15.15), handed to every run.
  vmcb_slot a1{*pages.a1}, a2{*pages.a2}, b{*pages.b};
  const bool clean = host.has(cpuid_ns::svm_features::vmcb_clean);
  for (vmcb_slot* s : {&a1, &a2, &b}) s->tracked = sv::clean_tracker<sv::vmcb_view>{s->view, clean};
  const conformance_vmcbs slots{a1, a2, b};
  boot_runs br{host, pages, slots, t};
  bool ok = true;
  if (exit_cost::requested()) {
    // The exit-cost guest profile instead of the conformance runs (docs/exit-cost.md): CR0.WP
    // guest-owned (no CR0 write intercept), then intercepted (the selective CR0 write
    // intercept, which CR0.TS changes do not trigger: APM Vol. 2 15.9.1).
    wp_summary unused{};
    ok = run_guest(svm_run{exit_cost::runs[0], cr_wp_owned}, cpu, br, unused);
    ok = run_guest(svm_run{exit_cost::runs[1], cr_wp_selective}, cpu, br, unused) && ok;
    return ok;
  }
  wp_summary summaries[run_count]{};  // the runs' numbers for the comparison below
  for (int i = 0; i < run_count; ++i) {
    if (const char* why = core::shadow::not_applicable(runs[i].base, runs[i].scheduled)) {
      kprintf("HVKIT INFO run=%s not_applicable_under_shadow reason=%s\n", runs[i].base.name, why);
      continue;
    }
    ok = run_guest(runs[i], cpu, br, summaries[i]) && ok;
  }
  ok = vmrun_diff_run(host, pool, t) && ok;
  if (host.exitcode_32bit_errata)
    kprintf("HVKIT INFO vmexit_invalid_exitcode_32bit cases=%llu\n", (unsigned long long)host.exitcode_32bit_errata);
  if (host.qemu_cr3_errata) {
    ++t.errata;
    kprintf("HVKIT ERRATUM mov_cr3_reserved_bit_vmexit_invalid.all cases=%llu\n", (unsigned long long)host.qemu_cr3_errata);
  }  // VMRUN's consistency checks, the CPU as the oracle (vmrun_diff.cpp)
  // The numbers the CR0.WP work is about: 0 exits per toggle guest-owned, 1 intercepted
  // (selective CR0 write intercept and plain CR0 write intercept alike).
  const wp_summary& owned = summaries[0];
  const wp_summary& sel = summaries[1];
  const wp_summary& all = summaries[2];
  const milli po = ratio(owned.cr_exits, owned.toggles), ps = ratio(sel.cr_exits, sel.toggles),
              pa_ = ratio(all.cr_exits, all.toggles);
  const bool cmp = owned.ok && sel.ok && all.ok && owned.toggles == 10000 && sel.toggles == 10000 &&
                   all.toggles == 10000 && owned.cr_exits == (core::shadow::enabled() ? owned.toggles : 0) &&
                   sel.cr_exits == sel.toggles &&
                   all.cr_exits == all.toggles && owned.mismatch == 0 && sel.mismatch == 0 && all.mismatch == 0;
  result(t, "wp_exits_per_toggle", cmp, "guest_owned=%llu.%03llu intercepted=%llu.%03llu intercepted_cr0_all=%llu.%03llu",
         po.whole, po.frac, ps.whole, ps.frac, pa_.whole, pa_.frac);
  return ok;
}

}  // namespace hv::svm
