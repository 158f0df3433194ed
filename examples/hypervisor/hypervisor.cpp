// hvkit reference L1 hypervisor: VMX bring-up, VMCS, identity EPT, exit dispatch and the
// reporting of the conformance guest's results over the serial port.
//
// Output protocol (parsed by examples/hypervisor/run):
//   HVKIT INFO <key>=<value> ...
//   HVKIT RUN <name> begin|end ...
//   HVKIT EXITS <run> <reason-number> <reason-name> <count>
//   HVKIT RESULT <check> PASS|FAIL <details>
//   HVKIT SUMMARY pass=<n> fail=<n>
//   HVKIT DONE PASS|FAIL          (last line; absent means the hypervisor died)
#include <cstddef>
#include <cstdint>

#include <emulate/context.hpp>
#include <emulate/emulator.hpp>
#include <emulate/outcome.hpp>
#include <emulate/platform.hpp>
#include <cpuid/features.hpp>
#include <cpuid/host.hpp>
#include <cpuid/kvm.hpp>
#include <cpuid/msr_policy.hpp>
#include <cpuid/policy.hpp>
#include <vmx/capabilities.hpp>
#include <vmx/controls.hpp>
#include <vmx/cr_access.hpp>
#include <vmx/cr_mask.hpp>
#include <vmx/dispatch.hpp>
#include <vmx/ept_entry.hpp>
#include <vmx/exit_qualification.hpp>
#include <vmx/exit_reason.hpp>
#include <vmx/ibpb.hpp>
#include <paging/cr_write.hpp>
#include <paging/guest_memory.hpp>
#include <paging/mmu.hpp>
#include <paging/ept_walker.hpp>
#include <paging/nested.hpp>
#include <paging/walker.hpp>
#include <x86/cr3.hpp>
#include <x86/xcr0.hpp>
#include <x86/rflags.hpp>
#include <x86/address.hpp>
#include <x86/cr.hpp>
#include <x86/efer.hpp>
#include <x86/guest_owned.hpp>
#include <x86/msr.hpp>
#include <x86/pfec.hpp>

#include "console.hpp"
#include "hypercall.hpp"
#include "layout.hpp"

#include "vmx_glue.hpp"

extern "C" {
extern const unsigned char guest_blob_start[], guest_blob_end[];
extern const std::uint64_t host_isr_table[32];
extern std::uint32_t boot_multiboot_magic;
int vmx_enter(hv::vmx::guest_regs* regs, int launched);
void vmx_exit_stub();
[[noreturn]] void hv_main();
int hv_handle_exit(hv::vmx::guest_regs* regs);
[[noreturn]] void hv_host_exception(const std::uint64_t* frame);
}

namespace hv {
namespace {

using namespace vmx;
namespace hc = hv::hc;

namespace x86 = hvkit::x86;
constexpr std::uint64_t cr0_pe = x86::cr0::pe.raw(), cr0_ts = x86::cr0::ts.raw(), cr0_ne = x86::cr0::ne.raw();
constexpr std::uint64_t cr0_et = x86::cr0::et.raw(), cr0_wp = x86::cr0::wp.raw();
constexpr std::uint64_t cr0_nw = x86::cr0::nw.raw(), cr0_cd = x86::cr0::cd.raw(), cr0_pg = x86::cr0::pg.raw();
constexpr std::uint64_t cr4_pae = x86::cr4::pae.raw(), cr4_vmxe = x86::cr4::vmxe.raw();
constexpr std::uint64_t cr4_osxsave = x86::cr4::osxsave.raw(), cr4_umip = x86::cr4::umip.raw();
constexpr std::uint64_t efer_sce = x86::efer::sce.raw(), efer_lme = x86::efer::lme.raw();
constexpr std::uint64_t efer_lma = x86::efer::lma.raw(), efer_nxe = x86::efer::nxe.raw();

// ---- configuration ----------------------------------------------------------------------
/// Guest-owned CR bits come from hvkit's policy (x86/guest_owned.hpp): a guest_owned_set
/// that would hand the guest a bit feeding the MMU role other than CR0.WP does not compile.
/// With EPT the guest owns CR0.TS and CR0.WP and the CR4 bits that never affect
/// translation; every other bit (CR4.VMXE in particular) is host-owned. A bit clear in the
/// guest/host mask is guest-owned (SDM Vol. 3C 25.6.6).
using policy_wp_guest_owned = x86::guest_owned_set<(x86::cr0::ts | x86::cr0::wp).raw(),
                                                   x86::cr4_possible_guest_owned.raw()>;
/// The configuration switch: the same policy with CR0.WP intercepted, so every WP toggle is
/// a CR-access exit (SDM Vol. 3C 26.1.3: MOV to CR0 exits when it would change a bit set
/// in the mask away from the read shadow).
using policy_wp_intercepted = x86::guest_owned_set<x86::cr0::ts.raw(), x86::cr4_possible_guest_owned.raw()>;

enum class run_status { running, done, halted, triple_fault, entry_failed, vm_fail, fatal_exit };

struct run_config {
  const char* name;
  bool wp_intercepted;
  /// Descriptor-table exiting: LTR/STR/LGDT/... exit and the hypervisor emulates them.
  /// Off, the CPU (Bochs) executes them itself: the oracle for the emulated runs.
  bool dt_exiting;
  std::uint64_t guest_flags;  ///< hc::cfg_* beyond the two above
  run_status expected;
  /// Negative control: the emulator checks permissions with the role cached at the last
  /// CR exit, without the CR0.WP passthrough refresh (the KVM bug). The run passes if the
  /// LTR check then fails the way the bug predicts.
  bool stale_role = false;
  /// Two guests and a sibling VMCS, switched by the VMX-preemption timer, with this IBPB
  /// policy deciding each barrier (-1: a single VMCS, no scheduling).
  int ibpb = -1;
};
constexpr run_config runs[] = {
    {"guest_owned", false, true, 0, run_status::done},
    {"intercepted", true, true, 0, run_status::done},
    {"native_dt", false, false, 0, run_status::done},
    // Hostile: the guest wrecks its IDT and triple-faults; the hypervisor must report it
    // and go on with the next guest.
    {"triple_fault", false, true, hc::cfg_quick | hc::cfg_triple_fault, run_status::triple_fault},
    {"after_triple_fault", false, true, hc::cfg_quick, run_status::done},
    {"stale_role_demo", false, true, hc::cfg_ltr_only, run_status::done, true},
    // The CPU as the oracle: random page tables and registers, each access done natively
    // by the guest and repeated by hvkit's walker (issue 9, CPL 0 part).
    {"paging_diff", false, false, hc::cfg_paging_diff, run_status::done},
    // Guest A (the conformance guest, spinning) with a second VMCS of its own vCPU (the
    // vmcs02 stand-in) and guest B, round-robin A1 A2 A1 B on VMX-preemption timer exits;
    // vmx::ibpb_tracker decides every barrier (issue 9, item 3).
    // EPT as the second stage: random EPT permissions on the guest's page-table page and
    // data page, the access done natively, hvkit's nested walker predicting the outcome.
    {"ept_diff", false, false, hc::cfg_ept_diff, run_status::done},
    {"ibpb_skip_same_guest", false, true, hc::cfg_spin, run_status::done, false,
     static_cast<int>(hvkit::vmx::ibpb_policy::skip_same_guest)},
    {"ibpb_every_change", false, true, hc::cfg_spin, run_status::done, false,
     static_cast<int>(hvkit::vmx::ibpb_policy::every_vmcs_change)},
};
constexpr int run_count = sizeof(runs) / sizeof(runs[0]);

// ---- state --------------------------------------------------------------------------------
alignas(16) std::uint64_t host_gdt[6];
alignas(16) std::uint8_t host_tss[104];
alignas(16) std::uint64_t host_idt[64];
alignas(4096) std::uint8_t vmxon_region[4096];
alignas(4096) std::uint8_t vmcs_region[4096];
alignas(4096) std::uint8_t vmcs_a2_region[4096];  // guest A, second VMCS (vmcs02 stand-in)
alignas(4096) std::uint8_t vmcs_b_region[4096];   // guest B
alignas(4096) std::uint64_t ept_b_pml4[512];      // guest B's EPT: GPA 16 MiB (2 MiB) -> HPA 48 MiB
alignas(4096) std::uint64_t ept_b_pdpt[512];
alignas(4096) std::uint64_t ept_b_pd[512];
alignas(4096) std::uint64_t ept_pml4[512];
alignas(4096) std::uint64_t ept_pdpt[512];
alignas(4096) std::uint64_t ept_pd[512];
alignas(4096) std::uint64_t ept_pt_scratch[512];  // 4 KiB EPT pages for the EPT differential

/// Capability MSRs, read once (hvkit::vmx::vmx_capabilities: TRUE_* and secondary/EPT MSRs
/// only where the architecture says they exist, SDM Vol. 3D A.1-A.10).
hvkit::vmx::vmx_capabilities vcaps;
struct capabilities {
  std::uint64_t basic, ept_vpid;
  std::uint64_t cr0_fixed0, cr0_fixed1, cr4_fixed0, cr4_fixed1;
};
capabilities caps;

// ---- CPUID and MSR policy (hvkit::cpuid), built once --------------------------------
namespace cpuid_ns = hvkit::cpuid;
constinit cpuid_ns::table<128> host_cpuid{};
constinit cpuid_ns::policy guest_policy{};
/// The MSR policy derived from the CPUID policy: one source for both (background.md 2).
constinit cpuid_ns::msr_policy guest_msrs{};

struct counters {
  std::uint64_t total;
  std::uint64_t by_reason[exit_reason_slots];
};

struct mmio_device {
  std::uint64_t regs[4];  // id, scratch, writes, reads
};

struct run_state {
  const run_config* cfg;
  guest_regs regs;
  counters exits;
  counters mark;  // snapshot taken at hc::mark_begin
  run_status status;
  std::uint64_t guest_efer;
  std::uint64_t cr0_mask, cr4_mask;
  // Results of the measured sections, kept for the cross-run comparison.
  std::uint64_t wp_toggles, wp_cr_exits, wp_mismatch, wp_tsc;
  bool wp_seen;
  mmio_device device;
  std::uint64_t device_reads, device_writes, unassigned_reads, unassigned_writes, not_emulable, emulated;
  // The guest MMU context the emulator checks permissions with (hvkit::paging), and what
  // happened to it: refreshes/resets after CR writes that exited, and passthrough refreshes
  // (CR0.WP found changed at an emulated access, i.e. toggled without an exit).
  hvkit::paging::mmu_context mmu;
  std::uint64_t mmu_refreshes, mmu_resets, passthrough_refreshes;
  std::uint64_t stale_wrong_faults;  // negative control: #PF 0x3 injected while live WP=0
  std::uint64_t neg_wp0_result;      // negative control: the guest's ltr_ro_gdt_wp0_ok
  bool neg_wp0_seen;
  // Differential paging.
  std::uint64_t pg_cases, pg_mismatches, pg_cpu_faults, pg_a_on_fault;
  std::uint64_t pg_by_kind[6][2];  // [read/write/fetch at CPL 0, then CPL 3][ok, fault]
  bool preempted;  // the last exit was the VMX-preemption timer: switch, then resume
  // EPT differential.
  bool ept_armed;
  bool ept_pred_ok;                       // hvkit: the access succeeds
  bool ept_pred_ept;                      // hvkit: an EPT violation (else a guest fault)
  std::uint64_t ept_pred_qual, ept_pred_gpa, ept_pred_la;
  std::uint32_t ept_pred_result, ept_pred_error;
  bool ept_seen;                          // the CPU exited with an EPT violation
  std::uint64_t ept_seen_qual, ept_seen_gpa, ept_seen_la;
  std::uint64_t ept_cases, ept_mismatches, ept_violations, ept_guest_faults, ept_errata;
};
constinit run_state run{};

struct run_summary {
  bool ok;
  std::uint64_t toggles, cr_exits, mismatch, tsc;
};
run_summary summaries[run_count];

int results_pass, results_fail, results_errata;

// ---- small helpers -------------------------------------------------------------------
bool str_eq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
void report_exit(const char* what, bool expected = false);
bool ept_case_violation();
void result(const char* name, bool pass, const char* fmt = nullptr, ...) __attribute__((format(printf, 3, 4)));
void result(const char* name, bool pass, const char* fmt, ...) {
  (pass ? results_pass : results_fail)++;
  kprintf("HVKIT RESULT %s %s", name, pass ? "PASS" : "FAIL");
  if (fmt) {
    console_putc(' ');
    va_list ap;
    va_start(ap, fmt);
    kvprintf(fmt, ap);
    va_end(ap);
  }
  console_putc('\n');
}

/// VMWRITE through hvkit::vmx (typed field, hardware backend). Values are computed in
/// 64 bits here; the narrowing to the field's own width is explicit and checked.
template <std::uint32_t E>
void vmwrite(hvkit::vmx::field<E> f, std::uint64_t v) {
  using T = typename hvkit::vmx::field<E>::value_type;
  if (v & ~hvkit::vmx::value_mask(E))
    kprintf("HVKIT ERROR vmwrite field=0x%x value=0x%llx does not fit the field\n", E, (unsigned long long)v);
  hvkit::vmx::hw::current_vmcs vmcs;
  auto r = hvkit::vmx::vmwrite(vmcs, f, static_cast<T>(v));
  if (!r)
    kprintf("HVKIT ERROR vmwrite field=0x%x value=0x%llx failed (VM-instruction error %u)\n", E,
            (unsigned long long)v, static_cast<unsigned>(r.error().error));
}

/// Prints milli-units as "<int>.<3 digits>".
struct milli {
  unsigned long long whole, frac;
};
milli ratio(std::uint64_t num, std::uint64_t den) {
  if (den == 0) return {0, 0};
  std::uint64_t m = num * 1000 / den;
  return {m / 1000, m % 1000};
}

std::uint64_t& gpr(guest_regs& r, unsigned index) {
  std::uint64_t* table[16] = {&r.rax, &r.rcx, &r.rdx, &r.rbx, nullptr, &r.rbp, &r.rsi, &r.rdi,
                              &r.r8,  &r.r9,  &r.r10, &r.r11, &r.r12, &r.r13, &r.r14, &r.r15};
  return *table[index & 15];
}
std::uint64_t read_gpr(guest_regs& r, unsigned index) {
  return (index & 15) == 4 ? vmread(fields::guest_rsp) : gpr(r, index);
}
void write_gpr(guest_regs& r, unsigned index, std::uint64_t v) {
  if ((index & 15) == 4) vmwrite(fields::guest_rsp, v);
  else gpr(r, index) = v;
}

void skip_instruction() {
  vmwrite(fields::guest_rip, vmread(fields::guest_rip) + vmread(fields::vm_exit_instruction_length));
}

void inject_exception(unsigned vector, bool has_error_code, std::uint32_t error_code = 0) {
  std::uint32_t info = vector | intr_type_hw_exception | intr_info_valid;
  if (has_error_code) {
    info |= intr_info_deliver_error_code;
    vmwrite(fields::vm_entry_exception_error_code, error_code);
  }
  vmwrite(fields::vm_entry_interruption_info, info);
}
void inject_gp(std::uint32_t error_code = 0) { inject_exception(13, true, error_code); }

/// #PF into the guest: VM entry does not load CR2, so the hypervisor sets the real CR2,
/// which the guest then sees (SDM Vol. 3C 27.3 lists the registers VM exits and entries
/// load; CR2 is not one of them).
void inject_pf(std::uint64_t la, x86::pfec error) {
  asm volatile("mov %0, %%cr2" ::"r"(la) : "memory");
  inject_exception(14, true, static_cast<std::uint32_t>(error.hardware_bits().raw()));
}

/// Reads a NUL-terminated guest string at a guest-physical address into buf. The guest
/// runs identity-paged and EPT is an identity map, so the GPA is also the HPA; it is only
/// trusted after the bounds check against guest memory.
bool read_guest_string(std::uint64_t gpa, char* buf, std::size_t size) {
  for (std::size_t i = 0; i + 1 < size; ++i) {
    std::uint64_t a = gpa + i;
    if (a < layout::guest_mem_base || a >= layout::guest_mem_base + layout::guest_mem_size) {
      buf[i] = '\0';
      return false;
    }
    char c = *reinterpret_cast<const volatile char*>(a);
    buf[i] = c;
    if (c == '\0') return true;
    if (c < ' ' || c > '~') buf[i] = '?';
  }
  buf[size - 1] = '\0';
  return true;
}

// ---- host descriptor tables -----------------------------------------------------------
void setup_host_tables() {
  auto tss = reinterpret_cast<std::uint64_t>(host_tss);
  host_gdt[0] = 0;
  host_gdt[1] = 0x00AF9A000000FFFF;  // 0x08 code64
  host_gdt[2] = 0x00CF92000000FFFF;  // 0x10 data
  // 0x18: 64-bit available TSS (SDM Vol. 3A 8.2.3, Figure 8-4)
  host_gdt[3] = (sizeof(host_tss) - 1) | ((tss & 0xFFFFFF) << 16) | (0x89ull << 40) | (((tss >> 24) & 0xFF) << 56);
  host_gdt[4] = tss >> 32;
  host_gdt[5] = 0;
  host_tss[102] = sizeof(host_tss);  // I/O map base beyond the limit: no I/O bitmap
  for (int v = 0; v < 32; ++v) {
    std::uint64_t h = host_isr_table[v];
    host_idt[2 * v] = (h & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((h >> 16) & 0xFFFF) << 48);
    host_idt[2 * v + 1] = h >> 32;
  }
  struct __attribute__((packed)) {
    std::uint16_t limit;
    std::uint64_t base;
  } gdtr{sizeof(host_gdt) - 1, reinterpret_cast<std::uint64_t>(host_gdt)},
      idtr{sizeof(host_idt) - 1, reinterpret_cast<std::uint64_t>(host_idt)};
  asm volatile(
      "lgdt %0\n\t"
      "pushq $0x08\n\t"
      "leaq 1f(%%rip), %%rax\n\t"
      "pushq %%rax\n\t"
      "lretq\n"
      "1:\n\t"
      "movl $0x10, %%eax\n\t"
      "movl %%eax, %%ds\n\t"
      "movl %%eax, %%es\n\t"
      "movl %%eax, %%ss\n\t"
      "movl %%eax, %%fs\n\t"
      "movl %%eax, %%gs\n\t"
      "movw $0x18, %%ax\n\t"
      "ltr %%ax\n\t"
      "lidt %1"
      :
      : "m"(gdtr), "m"(idtr)
      : "rax", "memory");
}

// ---- VMX bring-up ------------------------------------------------------------------------
void read_capabilities() {
  vcaps = hvkit::vmx::vmx_capabilities::read([](std::uint32_t m) { return rdmsr(m); });
  caps = {vcaps.basic, vcaps.ept_vpid_cap, vcaps.cr0_fixed0, vcaps.cr0_fixed1, vcaps.cr4_fixed0, vcaps.cr4_fixed1};
  auto pair = [](hvkit::vmx::control_capability c) {
    return (static_cast<unsigned long long>(c.may_be_one) << 32) | c.must_be_one;
  };
  kprintf("HVKIT INFO vmx_basic=0x%016llx true_ctls=%d revision=0x%x\n", (unsigned long long)vcaps.basic,
          vcaps.has_true_controls() ? 1 : 0, vcaps.revision_id());
  kprintf("HVKIT INFO pin=0x%016llx proc=0x%016llx proc2=0x%016llx\n", pair(vcaps.pin_caps()),
          pair(vcaps.primary_caps()), pair(vcaps.secondary_caps()));
  kprintf("HVKIT INFO exit=0x%016llx entry=0x%016llx ept_vpid_cap=0x%016llx\n", pair(vcaps.exit_caps()),
          pair(vcaps.entry_caps()), (unsigned long long)vcaps.ept_vpid_cap);
  kprintf("HVKIT INFO cr0_fixed0=0x%llx cr0_fixed1=0x%llx cr4_fixed0=0x%llx cr4_fixed1=0x%llx\n",
          (unsigned long long)caps.cr0_fixed0, (unsigned long long)caps.cr0_fixed1,
          (unsigned long long)caps.cr4_fixed0, (unsigned long long)caps.cr4_fixed1);
}

/// Builds the guest's CPUID policy (hvkit::cpuid::build_policy) and the MSR policy derived
/// from it. Host features pass through except those whose instructions or state this
/// hypervisor does not virtualize with the VMX controls it sets (RDTSCP, INVPCID, XSAVES
/// need their secondary controls; RDPID reads TSC_AUX; a feature whose CR4 bit VMX does not
/// allow in the guest is hidden); VMX is not offered (no nested virtualization). No KVM
/// paravirtual feature is implemented, so none is offered; the hints word says
/// "realtime" (one vCPU, never preempted). Hints may change later, features may not.
bool build_cpuid_policy() {
  namespace feat = cpuid_ns::feat;
  if (!cpuid_ns::read_all(cpuid_ns::host_source{}, host_cpuid)) {
    result("cpuid_policy", false, "reason=host_table_full");
    return false;
  }
  cpuid_ns::hypervisor_caps hvc{};
  hvc.passthrough = cpuid_ns::feature_set::all();
  for (const cpuid_ns::feature f : {feat::vmx, feat::rdtscp, feat::invpcid, feat::xsaves, feat::rdpid, feat::waitpkg})
    hvc.passthrough.clear(f);
  const x86::cr4 vmx_cr4{caps.cr4_fixed1};
  if (!vmx_cr4.test(x86::cr4::pke)) hvc.passthrough.clear(feat::pku);
  if (!vmx_cr4.test(x86::cr4::la57)) hvc.passthrough.clear(feat::la57);
  if (!vmx_cr4.test(x86::cr4::umip)) hvc.passthrough.clear(feat::umip);
  if (!vmx_cr4.test(x86::cr4::smep)) hvc.passthrough.clear(feat::smep);
  if (!vmx_cr4.test(x86::cr4::smap)) hvc.passthrough.clear(feat::smap);
  if (!vmx_cr4.test(x86::cr4::fsgsbase)) hvc.passthrough.clear(feat::fsgsbase);
  // XSAVE state: x87, SSE and AVX only. The host never touches FP/vector state
  // (-mgeneral-regs-only), so these survive exits untouched; larger components are not
  // offered (and the library refuses components whose size the host does not report).
  hvc.xsave_components = x86::xfeatures{0x7};
  cpuid_ns::policy_config cfg{};
  cfg.xsave_components = x86::xfeatures{0x7};
  cfg.hints = cpuid_ns::feature_set{cpuid_ns::kvm::hints::realtime};
  auto p = cpuid_ns::build_policy(host_cpuid, hvc, cfg);
  if (!p) {
    result("cpuid_policy", false, "reason=build_policy_error_%u", static_cast<unsigned>(p.error()));
    return false;
  }
  guest_policy = p.value();
  guest_msrs = cpuid_ns::derive_msr_policy(guest_policy.features(), guest_policy.xss_components());
  const bool consistent = cpuid_ns::check_consistency(guest_policy.features(), guest_msrs).has_value();
  const cpuid_ns::regs sig = guest_policy.answer(guest_policy.kvm_base(), 0, {});
  const cpuid_ns::regs pv = guest_policy.answer(guest_policy.kvm_base() + 1, 0, {});
  result("cpuid_policy", consistent,
         "kvm_base=0x%x max_leaf=0x%x pv_features=0x%x hints=0x%x ibpb=%d pred_cmd_bits=0x%llx msr_policy_consistent=%d",
         guest_policy.kvm_base(), sig.eax, pv.eax, pv.edx, guest_policy.has(feat::spec_ctrl) ? 1 : 0,
         (unsigned long long)guest_msrs.pred_cmd_bits, consistent ? 1 : 0);
  return true;
}

bool enable_vmx() {
  // SDM Vol. 3C 24.7 "Enabling and Entering VMX Operation".
  std::uint64_t fc = rdmsr(x86::msr::ia32_feature_control);
  if ((fc & feature_control_lock) == 0) {
    fc |= feature_control_lock | feature_control_vmxon_outside_smx;
    wrmsr(x86::msr::ia32_feature_control, fc);
    kprintf("HVKIT INFO feature_control=0x%llx (set and locked by us)\n", (unsigned long long)fc);
  } else {
    kprintf("HVKIT INFO feature_control=0x%llx (locked by firmware)\n", (unsigned long long)fc);
    if ((fc & feature_control_vmxon_outside_smx) == 0) {
      result("vmx_enable", false, "reason=feature_control_locked_without_vmx");
      return false;
    }
  }
  // SDM Vol. 3C 24.8 "Restrictions on VMX Operation": CR0/CR4 fixed bits (CR4.VMXE is a
  // fixed-1 bit).
  write_cr0((read_cr0() | caps.cr0_fixed0) & caps.cr0_fixed1);
  write_cr4((read_cr4() | caps.cr4_fixed0 | cr4_vmxe) & caps.cr4_fixed1);

  const std::uint32_t revision = vcaps.revision_id();
  *reinterpret_cast<std::uint32_t*>(vmxon_region) = revision;
  auto on = hvkit::vmx::hw::vmxon(x86::hpa{reinterpret_cast<std::uint64_t>(vmxon_region)});
  if (!on) {
    result("vmx_enable", false, "reason=vmxon_failed kind=%s", on.error().how == hvkit::vmx::vm_fail::kind::invalid ? "VMfailInvalid" : "VMfailValid");
    return false;
  }
  result("vmx_enable", true, "revision=0x%x", revision);
  return true;
}

/// Identity EPT for guest memory only: GPA [guest_mem_base, +guest_mem_size) -> same HPA,
/// 2 MiB pages, RWX, write-back. Nothing else is mapped: neither the hypervisor's memory
/// nor the MMIO test device (SDM Vol. 3C 29.3.2 "EPT Translation Mechanism").
std::uint64_t eptp_value;

bool build_ept() {
  namespace v = hvkit::vmx;
  const v::ept_caps ec{vcaps.ept_vpid_cap};
  const unsigned maxphyaddr = (cpuid(0x80000000).eax >= 0x80000008) ? (cpuid(0x80000008).eax & 0xFF) : 36;
  const v::ept_permissions rwx{true, true, true, false};
  for (auto& e : ept_pml4) e = 0;
  for (auto& e : ept_pdpt) e = 0;
  for (auto& e : ept_pd) e = 0;
  auto pml4e = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pdpt)}, rwx, ec, maxphyaddr);
  auto pdpte = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pd)}, rwx, ec, maxphyaddr);
  auto eptp = v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pml4)}, v::ept_memory_type::wb, 4, false, ec,
                           maxphyaddr);
  if (!pml4e || !pdpte || !eptp) {
    result("ept_setup", false, "reason=ept_entry_refused ept_vpid_cap=0x%llx", (unsigned long long)vcaps.ept_vpid_cap);
    return false;
  }
  ept_pml4[0] = pml4e.value();
  ept_pdpt[0] = pdpte.value();
  eptp_value = eptp.value();
  static_assert(layout::guest_mem_base + layout::guest_mem_size <= (1ull << 30), "one EPT PD covers 1 GiB");
  static_assert(layout::guest_mem_base % 0x200000 == 0 && layout::guest_mem_size % 0x200000 == 0);
  for (std::uint64_t gpa = layout::guest_mem_base; gpa < layout::guest_mem_base + layout::guest_mem_size;
       gpa += 0x200000) {
    auto leaf = v::make_ept_leaf(x86::hpa{gpa}, v::ept_level::pde, rwx, v::ept_memory_type::wb, ec, false, maxphyaddr);
    if (!leaf) {
      result("ept_setup", false, "reason=2m_leaf_refused ept_vpid_cap=0x%llx", (unsigned long long)vcaps.ept_vpid_cap);
      return false;
    }
    ept_pd[gpa >> 21] = leaf.value();
  }
  return true;
}

/// Clears guest memory, copies the guest image in and writes the guest's boot page
/// tables (identity map of the low 4 GiB with 2 MiB pages; the guest builds its own).
const hc::guest_header* load_guest() {
  std::uint64_t words = layout::guest_mem_size / 8;
  void* dst = reinterpret_cast<void*>(layout::guest_mem_base);
  asm volatile("rep stosq" : "+D"(dst), "+c"(words) : "a"(0ull) : "memory");
  auto size = static_cast<std::size_t>(guest_blob_end - guest_blob_start);
  __builtin_memcpy(reinterpret_cast<void*>(layout::guest_load_gpa), guest_blob_start, size);

  auto* hdr = reinterpret_cast<const hc::guest_header*>(layout::guest_load_gpa);
  if (hdr->magic != hc::header_magic || hdr->image_end > layout::guest_boot_pt_gpa ||
      hdr->entry < layout::guest_load_gpa || hdr->entry >= hdr->image_end) {
    result("guest_load", false, "reason=bad_header magic=0x%x", hdr->magic);
    return nullptr;
  }
  auto* pml4 = reinterpret_cast<std::uint64_t*>(layout::guest_boot_pt_gpa);
  auto* pdpt = pml4 + 512;
  auto* pd = pml4 + 1024;  // four page directories
  pml4[0] = reinterpret_cast<std::uint64_t>(pdpt) | 0x3;
  for (int i = 0; i < 4; ++i) pdpt[i] = reinterpret_cast<std::uint64_t>(pd + 512 * i) | 0x3;
  for (std::uint64_t i = 0; i < 2048; ++i) pd[i] = (i << 21) | 0x83;
  return hdr;
}

/// CR4 bits the guest may set: what the CPU allows in VMX non-root operation, minus VMXE
/// and SMXE (no nested virtualization or SMX offered).
x86::cr4 guest_cr4_allowed() {
  namespace feat = cpuid_ns::feat;
  x86::cr4 a = x86::cr4{caps.cr4_fixed1} & ~(x86::cr4::vmxe | x86::cr4::smxe) & x86::cr4::defined;
  // A CR4 bit whose feature the guest's CPUID does not enumerate is reserved for it.
  struct {
    x86::cr4 bit;
    cpuid_ns::feature f;
  } const gates[] = {{x86::cr4::smep, feat::smep},         {x86::cr4::smap, feat::smap},
                     {x86::cr4::fsgsbase, feat::fsgsbase}, {x86::cr4::pcide, feat::pcid},
                     {x86::cr4::osxsave, feat::xsave},     {x86::cr4::umip, feat::umip},
                     {x86::cr4::pke, feat::pku},           {x86::cr4::la57, feat::la57}};
  for (const auto& g : gates)
    if (!guest_policy.has(g.f)) a = a.clear(g.bit);
  return a;
}

/// Reports a control adjustment the CPU cannot satisfy (a required bit it lacks).
template <class C>
bool controls_ok(const char* what, const hvkit::result<C, hvkit::vmx::control_error<C>>& r) {
  if (r.has_value()) return true;
  result("vmcs_controls", false, "reason=%s unsupported=0x%llx cannot_clear=0x%llx", what,
         (unsigned long long)r.error().unsupported.raw(), (unsigned long long)r.error().cannot_clear.raw());
  return false;
}

/// Fills the current VMCS for a fresh run of the conformance guest.
bool setup_vmcs(const hc::guest_header& g) {
  namespace v = hvkit::vmx;
  // ---- controls, adjusted to the capability MSRs (hvkit::vmx::adjust_controls, SDM Vol. 3D
  // A.3-A.5; through the TRUE_* MSRs when they exist, so CR3-load/store exiting can be 0).
  // Without the TRUE MSRs CR3 accesses exit and handle_cr() emulates them.
  const auto pin = v::adjust_controls(vcaps.pin_caps(), run.cfg->ibpb >= 0 ? v::pin_based::activate_preemption_timer
                                                                         : v::pin_based{});
  const auto proc = v::adjust_controls(vcaps.primary_caps(),
                                       v::primary_proc_based::hlt_exiting | v::primary_proc_based::activate_secondary_controls);
  const auto proc2 = v::adjust_controls(vcaps.secondary_caps(),
                                        run.cfg->dt_exiting ? v::secondary_proc_based::enable_ept |
                                                                  v::secondary_proc_based::descriptor_table_exiting
                                                            : v::secondary_proc_based::enable_ept);
  const auto exitc = v::adjust_controls(vcaps.exit_caps(), v::exit_controls::host_address_space_size |
                                                               v::exit_controls::save_ia32_efer |
                                                               v::exit_controls::load_ia32_efer);
  const auto entry =
      v::adjust_controls(vcaps.entry_caps(), v::entry_controls::ia32e_mode_guest | v::entry_controls::load_ia32_efer);
  if (!controls_ok("pin", pin) || !controls_ok("proc", proc) || !controls_ok("proc2", proc2) ||
      !controls_ok("exit", exitc) || !controls_ok("entry", entry))
    return false;

  vmwrite(fields::pin_based_controls, pin.value().raw());
  vmwrite(fields::primary_processor_based_controls, proc.value().raw());
  vmwrite(fields::secondary_processor_based_controls, proc2.value().raw());
  vmwrite(fields::primary_vm_exit_controls, exitc.value().raw());
  vmwrite(fields::vm_entry_controls, entry.value().raw());
  vmwrite(fields::exception_bitmap, 0);  // guest exceptions go to the guest's IDT
  vmwrite(fields::page_fault_error_code_mask, 0);
  vmwrite(fields::page_fault_error_code_match, 0);
  vmwrite(fields::cr3_target_count, 0);
  vmwrite(fields::vm_exit_msr_store_count, 0);
  vmwrite(fields::vm_exit_msr_load_count, 0);
  vmwrite(fields::vm_entry_msr_load_count, 0);
  vmwrite(fields::vm_entry_interruption_info, 0);
  vmwrite(fields::ept_pointer, eptp_value);

  // ---- CR0/CR4 guest/host masks and read shadows (SDM Vol. 3C 25.6.6) ----
  // Guest-owned bits from the policy under the run's features (vmx::make_guest_owned: WP
  // only with EPT, a CR4 bit only if the guest may set it).
  const v::cr_mask_features features{true, guest_cr4_allowed()};
  const v::guest_owned_bits owned = run.cfg->wp_intercepted ? v::make_guest_owned<policy_wp_intercepted>(features)
                                                             : v::make_guest_owned<policy_wp_guest_owned>(features);
  run.cr0_mask = owned.cr0_mask();
  run.cr4_mask = owned.cr4_mask();
  // Host-required CR bits (the VMX fixed-1 bits) must be host-owned, or the guest could
  // see a value it never wrote.
  if ((caps.cr0_fixed0 & ~run.cr0_mask) || (caps.cr4_fixed0 & ~run.cr4_mask)) {
    result("cr_masks", false, "reason=fixed_bit_guest_owned");
    return false;
  }
  kprintf("HVKIT INFO run=%s cr0_guest_host_mask=0x%016llx cr4_guest_host_mask=0x%016llx dt_exiting=%d\n",
          run.cfg->name, (unsigned long long)run.cr0_mask, (unsigned long long)run.cr4_mask,
          run.cfg->dt_exiting ? 1 : 0);
  std::uint64_t guest_cr0 = cr0_pg | cr0_wp | cr0_ne | cr0_et | cr0_pe;
  std::uint64_t guest_cr4_visible = cr4_pae;
  vmwrite(fields::cr0_guest_host_mask, run.cr0_mask);
  vmwrite(fields::cr0_read_shadow, guest_cr0);
  vmwrite(fields::guest_cr0, (guest_cr0 | caps.cr0_fixed0) & caps.cr0_fixed1);
  vmwrite(fields::cr4_guest_host_mask, run.cr4_mask);
  vmwrite(fields::cr4_read_shadow, guest_cr4_visible);
  vmwrite(fields::guest_cr4, (guest_cr4_visible | caps.cr4_fixed0) & caps.cr4_fixed1);
  vmwrite(fields::guest_cr3, layout::guest_boot_pt_gpa);

  // ---- host state (SDM Vol. 3C 26.2.2 / 26.2.3 checks) ----
  vmwrite(fields::host_cr0, read_cr0());
  vmwrite(fields::host_cr3, read_cr3());
  vmwrite(fields::host_cr4, read_cr4());
  vmwrite(fields::host_cs_selector, 0x08);
  vmwrite(fields::host_ss_selector, 0x10);
  vmwrite(fields::host_ds_selector, 0x10);
  vmwrite(fields::host_es_selector, 0x10);
  vmwrite(fields::host_fs_selector, 0x10);
  vmwrite(fields::host_gs_selector, 0x10);
  vmwrite(fields::host_tr_selector, 0x18);  // must be non-zero: hence the host TSS
  vmwrite(fields::host_fs_base, 0);
  vmwrite(fields::host_gs_base, 0);
  vmwrite(fields::host_tr_base, reinterpret_cast<std::uint64_t>(host_tss));
  vmwrite(fields::host_gdtr_base, reinterpret_cast<std::uint64_t>(host_gdt));
  vmwrite(fields::host_idtr_base, reinterpret_cast<std::uint64_t>(host_idt));
  vmwrite(fields::host_ia32_sysenter_cs, 0);
  vmwrite(fields::host_ia32_sysenter_esp, 0);
  vmwrite(fields::host_ia32_sysenter_eip, 0);
  vmwrite(fields::host_ia32_efer, rdmsr(x86::msr::ia32_efer));
  vmwrite(fields::host_rip, reinterpret_cast<std::uint64_t>(&vmx_exit_stub));
  // host_rsp is written by vmx_enter just before VMLAUNCH/VMRESUME.

  // ---- guest state: 64-bit mode, flat segments matching the guest's GDT ----
  // Access rights: SDM Vol. 3C 25.4.1, Table 25-2.
  auto data_segment = [](auto sel, auto base, auto limit, auto ar) {
    vmwrite(sel, hc::guest_ds);
    vmwrite(base, 0);
    vmwrite(limit, 0xFFFFFFFF);
    vmwrite(ar, 0xC093);  // data, read/write, accessed, P, D/B=1, G=1
  };
  vmwrite(fields::guest_cs_selector, hc::guest_cs);
  vmwrite(fields::guest_cs_base, 0);
  vmwrite(fields::guest_cs_limit, 0xFFFFFFFF);
  vmwrite(fields::guest_cs_access_rights, 0xA09B);  // code, exec/read, accessed, P, L=1, G=1
  data_segment(fields::guest_ss_selector, fields::guest_ss_base, fields::guest_ss_limit, fields::guest_ss_access_rights);
  data_segment(fields::guest_ds_selector, fields::guest_ds_base, fields::guest_ds_limit, fields::guest_ds_access_rights);
  data_segment(fields::guest_es_selector, fields::guest_es_base, fields::guest_es_limit, fields::guest_es_access_rights);
  data_segment(fields::guest_fs_selector, fields::guest_fs_base, fields::guest_fs_limit, fields::guest_fs_access_rights);
  data_segment(fields::guest_gs_selector, fields::guest_gs_base, fields::guest_gs_limit, fields::guest_gs_access_rights);
  vmwrite(fields::guest_ldtr_selector, 0);
  vmwrite(fields::guest_ldtr_base, 0);
  vmwrite(fields::guest_ldtr_limit, 0);
  vmwrite(fields::guest_ldtr_access_rights, 1u << 16);  // unusable
  vmwrite(fields::guest_tr_selector, hc::guest_tr);
  vmwrite(fields::guest_tr_base, g.tss_base);
  vmwrite(fields::guest_tr_limit, 103);
  vmwrite(fields::guest_tr_access_rights, 0x008B);  // busy 64-bit TSS, P
  vmwrite(fields::guest_gdtr_base, g.gdt_base);
  vmwrite(fields::guest_gdtr_limit, g.gdt_limit);
  vmwrite(fields::guest_idtr_base, g.idt_base);
  vmwrite(fields::guest_idtr_limit, g.idt_limit);
  vmwrite(fields::guest_dr7, 0x400);
  vmwrite(fields::guest_ia32_debugctl, 0);
  vmwrite(fields::guest_rsp, g.stack_top);
  vmwrite(fields::guest_rip, g.entry);
  vmwrite(fields::guest_rflags, 0x2);
  vmwrite(fields::guest_pending_debug_exceptions, 0);
  vmwrite(fields::guest_interruptibility_state, 0);
  vmwrite(fields::guest_activity_state, 0);
  vmwrite(fields::guest_ia32_sysenter_cs, 0);
  vmwrite(fields::guest_ia32_sysenter_esp, 0);
  vmwrite(fields::guest_ia32_sysenter_eip, 0);
  bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  run.guest_efer = efer_lme | efer_lma | (nx ? efer_nxe : 0);
  vmwrite(fields::guest_ia32_efer, run.guest_efer);
  vmwrite(fields::vmcs_link_pointer, ~0ull);  // no shadow VMCS: must be all ones
  run.mmu = hvkit::paging::mmu_context::make(x86::cr0{vmread(fields::guest_cr0)}, x86::cr4{vmread(fields::guest_cr4)},
                                             x86::efer{run.guest_efer}, x86::gpa{layout::guest_boot_pt_gpa});
  return true;
}

hvkit::paging::cr_state current_cr_state() {
  return {x86::cr0{vmread(fields::guest_cr0)}, x86::cr4{vmread(fields::guest_cr4)}, x86::efer{vmread(fields::guest_ia32_efer)}};
}

/// After a CR0/CR4/EFER write that exited: what the MMU must do (hvkit::paging::
/// cr_write_actions, EPT = two-dimensional paging). A WP-only change only refreshes the
/// permission metadata and never unloads roots; this hypervisor has no roots to unload, so
/// a reset is only counted (and must not happen for a WP toggle).
void mmu_after_cr_write(const hvkit::paging::cr_state& before) {
  using hvkit::paging::mmu_actions;
  const hvkit::paging::cr_state after = current_cr_state();
  const mmu_actions a = hvkit::paging::cr_write_actions(before, after, hvkit::paging::paging_kind::two_dimensional);
  if (a.any(mmu_actions::reset_mmu)) ++run.mmu_resets;
  if (a.any(mmu_actions::refresh_permissions | mmu_actions::reset_mmu)) {
    ++run.mmu_refreshes;
    run.mmu = hvkit::paging::mmu_context::make(after.cr0, after.cr4, after.efer, run.mmu.root());
  }
}

// ---- exit handlers -------------------------------------------------------------------------
/// CR-access exit (reason 28), qualification decoded by vmx::dispatch_exit (SDM Vol. 3C
/// 28.2.1, Table 28-3). CR0/CR4 writes (MOV, CLTS, LMSW) are evaluated by
/// vmx::evaluate_cr_write against the guest-visible state: the architectural #GP checks,
/// the new value and the MMU actions (paging::cr_write_actions: a WP toggle refreshes the
/// permission table and never resets the MMU). vmx::cr_values_for gives the read shadow and
/// the real value with the VMX fixed bits forced (SDM Vol. 3D A.7, A.8). CR3 accesses exit
/// only without the TRUE controls.
bool handle_cr(guest_regs& r, hvkit::vmx::cr_access_qualification q) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
  if (q.cr() == 3 && q.type() == acc::mov_to_cr) {
    vmwrite(fields::guest_cr3, read_gpr(r, q.gpr()) & ~(1ull << 63));
    skip_instruction();
    return true;
  }
  if (q.cr() == 3 && q.type() == acc::mov_from_cr) {
    write_gpr(r, q.gpr(), vmread(fields::guest_cr3));
    skip_instruction();
    return true;
  }
  const std::uint64_t m0 = vmread(fields::cr0_guest_host_mask), m4 = vmread(fields::cr4_guest_host_mask);
  v::cr_context c{};
  c.cr0 = v::guest_visible_cr0(x86::cr0{vmread(fields::guest_cr0)}, x86::cr0{vmread(fields::cr0_read_shadow)}, m0);
  c.cr4 = v::guest_visible_cr4(x86::cr4{vmread(fields::guest_cr4)}, x86::cr4{vmread(fields::cr4_read_shadow)}, m4);
  c.efer = x86::efer{vmread(fields::guest_ia32_efer)};
  c.cr3 = vmread(fields::guest_cr3);
  c.cr4_allowed = guest_cr4_allowed();
  const std::uint64_t value = q.type() == acc::mov_to_cr ? read_gpr(r, q.gpr()) : 0;
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, value, hvkit::paging::paging_kind::two_dimensional);
  if (out.cr != 0 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    run.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    inject_gp();
    return true;
  }
  if (out.cr == 0) {
    const v::cr_vmcs_values cv = v::cr_values_for(out.after.cr0.raw(), caps.cr0_fixed0, caps.cr0_fixed1);
    vmwrite(fields::cr0_read_shadow, cv.read_shadow);
    vmwrite(fields::guest_cr0, cv.actual);
  } else {
    const v::cr_vmcs_values cv = v::cr_values_for(out.after.cr4.raw(), caps.cr4_fixed0, caps.cr4_fixed1);
    vmwrite(fields::cr4_read_shadow, cv.read_shadow);
    vmwrite(fields::guest_cr4, cv.actual);
  }
  using hvkit::paging::mmu_actions;
  if (out.actions.any(mmu_actions::reset_mmu)) ++run.mmu_resets;
  if (out.actions.any(mmu_actions::refresh_permissions | mmu_actions::reset_mmu)) {
    ++run.mmu_refreshes;
    const hvkit::paging::cr_state now = current_cr_state();
    run.mmu = hvkit::paging::mmu_context::make(now.cr0, now.cr4, now.efer, run.mmu.root());
  }
  skip_instruction();
  return true;
}

/// CPUID exit: the answer of the guest's hvkit::cpuid policy, with the dynamic bits
/// (OSXSAVE, OSPKE) from the guest's CR4 as the guest sees it.
void handle_cpuid(guest_regs& r) {
  auto leaf = static_cast<std::uint32_t>(r.rax), sub = static_cast<std::uint32_t>(r.rcx);
  cpuid_ns::vcpu_state vs{};
  const std::uint64_t m4 = vmread(fields::cr4_guest_host_mask);
  vs.cr4 = hvkit::vmx::guest_visible_cr4(x86::cr4{vmread(fields::guest_cr4)}, x86::cr4{vmread(fields::cr4_read_shadow)}, m4);
  const cpuid_ns::regs a = guest_policy.answer(leaf, sub, vs);
  r.rax = a.eax;
  r.rbx = a.ebx;
  r.rcx = a.ecx;
  r.rdx = a.edx;
  skip_instruction();
}

/// RDMSR/WRMSR: every access exits (no MSR bitmap). The MSR policy follows the CPUID
/// policy: IA32_PRED_CMD is writable exactly when CPUID.7.0:EDX[26] (IBRS/IBPB) is
/// advertised; unknown MSRs raise #GP(0) as on hardware.
bool handle_msr(guest_regs& r, bool write) {
  auto m = static_cast<std::uint32_t>(r.rcx);
  std::uint64_t v = (r.rdx << 32) | (r.rax & 0xFFFFFFFF);
  bool ok = true;
  // MSRs the CPUID-derived policy decides (PRED_CMD, SPEC_CTRL, FLUSH_CMD, ...).
  const cpuid_ns::msr_verdict verdict = write ? guest_msrs.write(m, v) : guest_msrs.read(m);
  if (verdict == cpuid_ns::msr_verdict::gp) {
    inject_gp();
    return true;
  }
  if (verdict == cpuid_ns::msr_verdict::allow) {
    // Allowed means the host has the feature too (the policy only passes host features
    // through): perform the access on the real MSR.
    if (write) {
      wrmsr(m, v);
    } else {
      v = rdmsr(m);
      r.rax = v & 0xFFFFFFFF;
      r.rdx = v >> 32;
    }
    skip_instruction();
    return true;
  }
  if (!write) {
    switch (m) {
      case x86::msr::ia32_efer: v = vmread(fields::guest_ia32_efer); break;
      case x86::msr::ia32_fs_base: v = vmread(fields::guest_fs_base); break;
      case x86::msr::ia32_gs_base: v = vmread(fields::guest_gs_base); break;
      case x86::msr::ia32_sysenter_cs: v = vmread(fields::guest_ia32_sysenter_cs); break;
      case x86::msr::ia32_sysenter_esp: v = vmread(fields::guest_ia32_sysenter_esp); break;
      case x86::msr::ia32_sysenter_eip: v = vmread(fields::guest_ia32_sysenter_eip); break;
      case x86::msr::ia32_pat: v = rdmsr(x86::msr::ia32_pat); break;
      case x86::msr::ia32_star: case x86::msr::ia32_lstar: case x86::msr::ia32_cstar: case x86::msr::ia32_fmask: case x86::msr::ia32_kernel_gs_base:
        v = rdmsr(m);  // not used by the host: the guest's values live in the real MSRs
        break;
      default: ok = false;
    }
    if (ok) {
      r.rax = v & 0xFFFFFFFF;
      r.rdx = v >> 32;
    }
  } else {
    switch (m) {
      case x86::msr::ia32_efer: {
        // SCE and NXE may change; LME may not change while paging is on; LMA is read-only.
        std::uint64_t changeable = efer_sce | efer_nxe;
        std::uint64_t cur = vmread(fields::guest_ia32_efer);
        if ((v & ~(changeable | efer_lme | efer_lma)) || ((v ^ cur) & efer_lme)) {
          ok = false;
        } else {
          const hvkit::paging::cr_state before = current_cr_state();
          vmwrite(fields::guest_ia32_efer, (cur & ~changeable) | (v & changeable));
          mmu_after_cr_write(before);
        }
        run.guest_efer = vmread(fields::guest_ia32_efer);
        break;
      }
      case x86::msr::ia32_fs_base: vmwrite(fields::guest_fs_base, v); break;
      case x86::msr::ia32_gs_base: vmwrite(fields::guest_gs_base, v); break;
      case x86::msr::ia32_sysenter_cs: vmwrite(fields::guest_ia32_sysenter_cs, v); break;
      case x86::msr::ia32_sysenter_esp: vmwrite(fields::guest_ia32_sysenter_esp, v); break;
      case x86::msr::ia32_sysenter_eip: vmwrite(fields::guest_ia32_sysenter_eip, v); break;
      case x86::msr::ia32_star: case x86::msr::ia32_lstar: case x86::msr::ia32_cstar: case x86::msr::ia32_fmask: case x86::msr::ia32_kernel_gs_base:
        wrmsr(m, v);
        break;
      default: ok = false;
    }
  }
  if (!ok) {
    inject_gp();
    return true;
  }
  skip_instruction();
  return true;
}

// ---- guest memory and the emulator ---------------------------------------------------
/// Guest RAM as hvkit::paging sees it: EPT is an identity map, so guest-physical
/// [guest_mem_base, +guest_mem_size) is also host memory at the same address. Anything
/// outside is "unbacked" for the walker: a guest page table there is reported, never read.
hvkit::paging::flat_memory guest_ram_view() {
  return {reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
          x86::gpa{layout::guest_mem_base}};
}
std::uint8_t* guest_ram(std::uint64_t gpa, std::uint64_t size) {
  if (gpa < layout::guest_mem_base || size > layout::guest_mem_size ||
      gpa - layout::guest_mem_base > layout::guest_mem_size - size)
    return nullptr;
  return reinterpret_cast<std::uint8_t*>(gpa);
}

hvkit::paging::cpu_properties guest_cpu_properties() {
  static hvkit::paging::cpu_properties props{};
  static bool done = false;
  if (!done) {
    bool ext8 = cpuid(0x80000000).eax >= 0x80000008;
    props.maxphyaddr = ext8 ? (cpuid(0x80000008).eax & 0xFF) : 36;
    props.gbpages = (cpuid(0x80000001).edx >> 26) & 1;
    done = true;
  }
  return props;
}

unsigned guest_cpl() { return (vmread(fields::guest_ss_access_rights) >> 5) & 3; }  // SDM Vol. 3C 25.4.1

// ---- the MMIO test device and unassigned guest-physical space --------------------------
std::uint64_t device_read(std::uint64_t offset, unsigned size) {
  mmio_device& d = run.device;
  d.regs[0] = layout::mmio_device_id;
  std::uint64_t v = 0;
  for (unsigned k = 0; k < size; ++k) {
    std::uint64_t o = offset + k;
    std::uint64_t byte = o < sizeof d.regs ? (d.regs[o / 8] >> (8 * (o % 8))) & 0xFF : 0;
    v |= byte << (8 * k);
  }
  d.regs[3] = ++run.device_reads;
  return v;
}

void device_write(std::uint64_t offset, unsigned size, std::uint64_t v) {
  mmio_device& d = run.device;
  for (unsigned k = 0; k < size; ++k) {
    std::uint64_t o = offset + k;
    if (o >= 8 && o < 16) {  // only the scratch register is writable
      unsigned sh = 8 * (o % 8);
      d.regs[1] = (d.regs[1] & ~(0xFFull << sh)) | (((v >> (8 * k)) & 0xFF) << sh);
    }
  }
  d.regs[2] = ++run.device_writes;
}

namespace em = hvkit::emulate;
namespace pg = hvkit::paging;

/// The emulator's platform: the test device, and every other non-RAM guest-physical
/// address as unassigned (reads all ones, writes dropped). Ports, CPUID and MSRs are not
/// routed through the emulator here (their exits are handled directly).
struct hv_platform : em::null_platform {
  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size) {
      out = device_read(g - layout::mmio_device_gpa, size);
    } else {
      out = size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
      if (++run.unassigned_reads <= 4)
        kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx read(all-ones) size=%u\n", run.cfg->name,
                (unsigned long long)g, size);
    }
    return true;
  }
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size) {
      device_write(g - layout::mmio_device_gpa, size, v);
    } else if (++run.unassigned_writes <= 4) {
      kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx write(dropped) size=%u\n", run.cfg->name,
              (unsigned long long)g, size);
    }
    return true;
  }
};
static_assert(em::platform<hv_platform>);

/// The translator the emulator walks guest page tables with: emulate::walker_translator over
/// the run's mmu_context. Its refresh_passthrough_bits() re-syncs CR0.WP from the live CR0
/// before every translation; the negative-control run skips that refresh, which is the
/// KVM bug (a role cached at the last CR exit).
struct hv_translator {
  em::walker_translator<pg::flat_memory> inner;
  bool stale;
  bool refresh_passthrough_bits(x86::cr0 live) {
    if (stale) return false;
    bool changed = inner.refresh_passthrough_bits(live);
    if (changed) ++run.passthrough_refreshes;
    return changed;
  }
  pg::walk_result translate(const pg::walk_request& req) { return inner.translate(req); }
};
static_assert(em::translator<hv_translator>);

/// Segment state between the VMCS and the emulator (VMCS access rights are the emulator's
/// segment_ar layout, unusable bit 16 included: SDM Vol. 3C 25.4.1).
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
em::segment read_segment(hvkit::vmx::field<S> s, hvkit::vmx::field<B> b, hvkit::vmx::field<L> l, hvkit::vmx::field<A> a) {
  return {static_cast<std::uint16_t>(vmread(s)), vmread(b), static_cast<std::uint32_t>(vmread(l)),
          em::segment_ar{static_cast<std::uint32_t>(vmread(a))}};
}
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
void write_segment(const em::segment& g, hvkit::vmx::field<S> s, hvkit::vmx::field<B> b, hvkit::vmx::field<L> l,
                   hvkit::vmx::field<A> a) {
  vmwrite(s, g.selector);
  vmwrite(b, g.base);
  vmwrite(l, g.limit);
  vmwrite(a, g.ar.raw());
}
#define HV_SEG(x) fields::guest_##x##_selector, fields::guest_##x##_base, fields::guest_##x##_limit, \
                  fields::guest_##x##_access_rights

/// The guest state the emulator sees, from the VMCS. CR0/CR4 are the values the guest sees
/// (guest-owned bits from the guest CR field, host-owned ones from the read shadow).
em::context read_emulation_context(guest_regs& r) {
  em::context c{};
  for (unsigned i = 0; i < 16; ++i) c.gpr[i] = read_gpr(r, i);
  c.rip = vmread(fields::guest_rip);
  c.rflags = x86::rflags{vmread(fields::guest_rflags)};
  c[em::sreg::es] = read_segment(HV_SEG(es));
  c[em::sreg::cs] = read_segment(HV_SEG(cs));
  c[em::sreg::ss] = read_segment(HV_SEG(ss));
  c[em::sreg::ds] = read_segment(HV_SEG(ds));
  c[em::sreg::fs] = read_segment(HV_SEG(fs));
  c[em::sreg::gs] = read_segment(HV_SEG(gs));
  c.ldtr = read_segment(HV_SEG(ldtr));
  c.tr = read_segment(HV_SEG(tr));
  c.gdtr = {vmread(fields::guest_gdtr_base), static_cast<std::uint16_t>(vmread(fields::guest_gdtr_limit))};
  c.idtr = {vmread(fields::guest_idtr_base), static_cast<std::uint16_t>(vmread(fields::guest_idtr_limit))};
  std::uint64_t m0 = vmread(fields::cr0_guest_host_mask), m4 = vmread(fields::cr4_guest_host_mask);
  c.cr0 = x86::cr0{(vmread(fields::guest_cr0) & ~m0) | (vmread(fields::cr0_read_shadow) & m0)};
  c.cr4 = x86::cr4{(vmread(fields::guest_cr4) & ~m4) | (vmread(fields::cr4_read_shadow) & m4)};
  c.cr3 = x86::cr3{vmread(fields::guest_cr3)};
  c.efer = x86::efer{vmread(fields::guest_ia32_efer)};
  c.cpl = static_cast<std::uint8_t>(guest_cpl());
  c.maxphyaddr = static_cast<std::uint8_t>(guest_cpu_properties().maxphyaddr);
  return c;
}

/// Emulates the instruction at the guest RIP with hvkit::emulate and applies the outcome:
/// a completed instruction writes back what it changed; an exception is injected (#PF
/// with CR2); anything not emulated gets #UD, the architectural default.
bool emulate_instruction(guest_regs& r, const char* why) {
  em::context ctx = read_emulation_context(r);
  const em::context before = ctx;
  const pg::cpu_properties props = guest_cpu_properties();
  run.mmu.set_root(x86::cr3_root(ctx.cr3, run.mmu.role().mode(), props.maxphyaddr));
  pg::flat_memory tables = guest_ram_view();
  em::flat_ram ram{reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
                   x86::gpa{layout::guest_mem_base}};
  hv_translator tr{em::walker_translator<pg::flat_memory>{run.mmu, tables, props}, run.cfg->stale_role};
  hv_platform plat;
  const em::outcome o = em::emulate(ctx, tr, ram, plat);
  ++run.emulated;
  switch (o.kind) {
    case em::outcome_kind::done:
      for (unsigned i = 0; i < 16; ++i)
        if (ctx.gpr[i] != before.gpr[i]) write_gpr(r, i, ctx.gpr[i]);
      vmwrite(fields::guest_rip, ctx.rip);
      if (ctx.rflags.raw() != before.rflags.raw()) vmwrite(fields::guest_rflags, ctx.rflags.raw());
      if (!(ctx.tr == before.tr)) write_segment(ctx.tr, HV_SEG(tr));
      if (!(ctx.ldtr == before.ldtr)) write_segment(ctx.ldtr, HV_SEG(ldtr));
      if (!(ctx.gdtr == before.gdtr)) {
        vmwrite(fields::guest_gdtr_base, ctx.gdtr.base);
        vmwrite(fields::guest_gdtr_limit, ctx.gdtr.limit);
      }
      if (!(ctx.idtr == before.idtr)) {
        vmwrite(fields::guest_idtr_base, ctx.idtr.base);
        vmwrite(fields::guest_idtr_limit, ctx.idtr.limit);
      }
      if (!(ctx[em::sreg::ds] == before[em::sreg::ds])) write_segment(ctx[em::sreg::ds], HV_SEG(ds));
      if (!(ctx[em::sreg::es] == before[em::sreg::es])) write_segment(ctx[em::sreg::es], HV_SEG(es));
      if (!(ctx[em::sreg::fs] == before[em::sreg::fs])) write_segment(ctx[em::sreg::fs], HV_SEG(fs));
      if (!(ctx[em::sreg::gs] == before[em::sreg::gs])) write_segment(ctx[em::sreg::gs], HV_SEG(gs));
      if (o.what == em::event::cr_write || o.what == em::event::dr_write || o.what == em::event::halt) {
        kprintf("HVKIT ERROR run=%s emulated instruction with unexpected side effect %u (%s exit)\n", run.cfg->name,
                static_cast<unsigned>(o.what), why);
        run.status = run_status::fatal_exit;
        return false;
      }
      return true;
    case em::outcome_kind::exception:
      if (o.vector == x86::vector::pf) {
        if (run.cfg->stale_role && o.error_code == 0x3 && !x86::cr0{vmread(fields::guest_cr0)}.test(x86::cr0::wp))
          ++run.stale_wrong_faults;
        inject_pf(o.cr2, x86::pfec{o.error_code});
      } else {
        inject_exception(static_cast<unsigned>(o.vector), x86::has_error_code(o.vector), o.error_code);
      }
      return true;
    case em::outcome_kind::unsupported:
      if (o.why == em::unsupported_reason::page_table_unbacked || o.why == em::unsupported_reason::fetch_not_ram) {
        kprintf("HVKIT ERROR run=%s cannot emulate at rip=0x%llx (%s exit): reason %u\n", run.cfg->name,
                (unsigned long long)before.rip, why, static_cast<unsigned>(o.why));
        run.status = run_status::fatal_exit;
        return false;
      }
      [[fallthrough]];
    case em::outcome_kind::needs_io:
    case em::outcome_kind::needs_mmio:
      ++run.not_emulable;
      kprintf("HVKIT INFO run=%s not_emulable rip=0x%llx (%s exit) outcome=%u mnemonic=%u: #UD\n", run.cfg->name,
              (unsigned long long)before.rip, why, static_cast<unsigned>(o.kind), static_cast<unsigned>(o.op));
      inject_exception(6, false);
      return true;
  }
  return true;
}

/// EPT violation (reason 48); exit qualification: SDM Vol. 3C 28.2.1, Table 28-7. Guest
/// RAM is all mapped, so this is an access to the test device or to unassigned space: the
/// emulator redoes the access against hv_platform.
bool handle_ept_violation(guest_regs& r) {
  if (ept_case_violation()) return true;  // a provoked one (EPT differential): retry
  std::uint64_t q = vmread(fields::exit_qualification);
  if ((vmread(fields::idt_vectoring_info) >> 31) & 1) {
    report_exit("ept_violation_during_event_delivery");
    run.status = run_status::fatal_exit;
    return false;
  }
  if (q & 4) {
    report_exit("guest_fetch_outside_memory");
    run.status = run_status::fatal_exit;
    return false;
  }
  return emulate_instruction(r, "ept_violation");
}

void print_section(const char* name, std::uint64_t ops, std::uint64_t guest_mismatch, std::uint64_t guest_tsc) {
  counters d{};
  d.total = run.exits.total - run.mark.total - 1;  // minus this mark_end VMCALL
  for (unsigned i = 0; i < exit_reason_slots; ++i) d.by_reason[i] = run.exits.by_reason[i] - run.mark.by_reason[i];
  d.by_reason[static_cast<unsigned>(hvkit::vmx::exit_reason::vmcall)] -= 1;
  std::uint64_t cr = d.by_reason[static_cast<unsigned>(hvkit::vmx::exit_reason::cr_access)];
  std::uint64_t expect = run.cfg->wp_intercepted ? ops : 0;
  bool pass = cr == expect && d.total == expect && guest_mismatch == 0;
  milli per = ratio(cr, ops);
  milli tsc_per = ratio(guest_tsc, ops);
  char check[64];
  {
    // "<section>.<run>"
    std::size_t n = 0;
    for (const char* p = name; *p && n < 40; ++p) check[n++] = *p;
    check[n++] = '.';
    for (const char* p = run.cfg->name; *p && n < 62; ++p) check[n++] = *p;
    check[n] = '\0';
  }
  result(check, pass, "toggles=%llu cr_exits=%llu all_exits=%llu exits_per_toggle=%llu.%03llu expected=%llu guest_mismatches=%llu tsc_per_toggle=%llu.%03llu",
         (unsigned long long)ops, (unsigned long long)cr, (unsigned long long)d.total, per.whole, per.frac,
         (unsigned long long)expect, (unsigned long long)guest_mismatch, tsc_per.whole, tsc_per.frac);
  if (name[0] == 'w' && name[1] == 'p' && name[3] == 't') {  // "wp_toggle": kept for the comparison
    run.wp_seen = true;
    run.wp_toggles = ops;
    run.wp_cr_exits = cr;
    run.wp_mismatch = guest_mismatch;
    run.wp_tsc = guest_tsc;
  }
}

/// Entry `i` of a walk path, and the path of a fault if the walker reports one (the
/// walk_result layout is being slimmed down: both forms are accepted).
template <class P>
hvkit::paging::walked_entry path_entry(const P& p, unsigned i) {
  if constexpr (requires { p[i]; }) return p[i];
  else return p.entries[i];
}
template <class F>
const hvkit::paging::walk_path* fault_path(const F& f) {
  if constexpr (requires { f.path; }) return &f.path;
  else return nullptr;
}

/// One differential paging case (hc::paging_case): the guest just did the access natively;
/// hvkit's walker repeats it with the live guest registers against the same memory, with
/// the entries restored to their state before the access.
///
/// Comparison rules: the outcome must be identical (no fault, or #PF with the same error
/// code and CR2 = the linear address). A/D: on success the CPU and hvkit must set exactly
/// the same A flags (every entry used) and D flag (the leaf of a write). On a faulting walk
/// hvkit sets nothing; the SDM allows a processor to set A flags of entries it used before
/// the fault (SDM Vol. 3A 4.8), so A flags set by the CPU on a faulting walk are counted
/// apart, not as mismatches; a D flag there is a mismatch.
std::uint64_t handle_paging_case(guest_regs& r) {
  namespace pg = hvkit::paging;
  const std::uint64_t la = r.rbx;
  const x86::pfec access{r.rcx & 0xFFFFFFFF};
  const std::uint64_t cpu_ad = r.rcx >> 32;
  const auto cpu_result = static_cast<std::uint32_t>(r.rdx);
  const auto cpu_error = static_cast<std::uint32_t>(r.rdx >> 32);
  const std::uint64_t cpu_cr2 = r.rsi;

  const x86::cr0 cr0{vmread(fields::guest_cr0)};
  const x86::cr4 cr4{vmread(fields::guest_cr4)};
  const x86::efer efer{vmread(fields::guest_ia32_efer)};
  const pg::cpu_properties props = guest_cpu_properties();
  const pg::cpu_role role = pg::make_cpu_role(cr0, cr4, efer);
  const pg::mmu_context mmu{role, x86::cr3_root(x86::cr3{vmread(fields::guest_cr3)}, role.mode(), props.maxphyaddr)};
  pg::walk_request req{};
  req.linear = x86::gva{la};
  req.access = access;
  req.rflags = x86::rflags{vmread(fields::guest_rflags)};
  pg::flat_memory mem = guest_ram_view();
  const pg::walk_result res = pg::guest_walker{mmu, props}.walk(mem, mmu, req);

  std::uint32_t hv_result = 0, hv_error = 0;
  std::uint64_t hv_ad = 0;
  if (res.has_value()) {
    const pg::walk_path& path = res.value().path;
    for (unsigned i = 0; i < path.count; ++i) {
      const pg::walked_entry e = path_entry(path, i);
      std::uint8_t* p = guest_ram(e.address.value(), 8);
      std::uint64_t now = p ? *reinterpret_cast<volatile std::uint64_t*>(p) : 0;
      if (now & 0x20) hv_ad |= 1ull << (e.level - 1);
      if (now & 0x40) hv_ad |= 1ull << (hc::ad_dirty_shift + e.level - 1);
    }
  } else {
    const pg::walk_fault& f = res.error();
    hv_result = 0x100 | static_cast<std::uint32_t>(f.vector);
    hv_error = static_cast<std::uint32_t>(f.error_code.raw());
    if (f.kind == pg::fault_kind::unbacked) hv_result = 0xFFFF;  // a paging structure outside RAM: never expected
  }
  ++run.pg_cases;
  if (cpu_result != 0) ++run.pg_cpu_faults;
  unsigned kind = access.test(x86::pfec::write) ? 1 : (access.test(x86::pfec::fetch) ? 2 : 0);
  if (access.test(x86::pfec::user)) kind += 3;
  ++run.pg_by_kind[kind][cpu_result != 0 ? 1 : 0];
  bool same = cpu_result == hv_result;
  if (same && hv_result != 0) same = cpu_error == hv_error && cpu_cr2 == la;
  if (same && hv_result == 0) same = cpu_ad == hv_ad;
  if (same && hv_result != 0 && cpu_ad != 0) {
    if ((cpu_ad >> hc::ad_dirty_shift) != 0) same = false;
    else ++run.pg_a_on_fault;
  }
  if (!same) {
    ++run.pg_mismatches;
    if (run.pg_mismatches <= 8) {
      kprintf("HVKIT MISMATCH paging case=%llu la=0x%llx access=0x%llx cr0=0x%llx cr4=0x%llx efer=0x%llx ac=%d "
              "cpu=0x%x/err=0x%x/cr2=0x%llx/ad=0x%llx hvkit=0x%x/err=0x%x/ad=0x%llx\n",
              (unsigned long long)run.pg_cases, (unsigned long long)la, (unsigned long long)access.raw(),
              (unsigned long long)cr0.raw(), (unsigned long long)cr4.raw(), (unsigned long long)efer.raw(),
              req.rflags.test(x86::rflags::ac) ? 1 : 0, cpu_result, cpu_error, (unsigned long long)cpu_cr2,
              (unsigned long long)cpu_ad, hv_result, hv_error, (unsigned long long)hv_ad);
      const pg::walk_path* path = res.has_value() ? &res.value().path : fault_path(res.error());
      for (unsigned i = 0; path && i < path->count; ++i)
        if (const pg::walked_entry e = path_entry(*path, i); true)
        kprintf("HVKIT MISMATCH   level=%u entry@0x%llx=0x%016llx\n", e.level, (unsigned long long)e.address.value(),
                (unsigned long long)e.value);
    }
  }
  return same ? 0 : 1;
}

// ---- nested (EPT) differential -----------------------------------------------------------
constexpr unsigned ept_scratch_pd_index = 0x1C00000 >> 21;

std::uint64_t ept_perm_bits(unsigned p) { return p & 7; }  // bit 0 R, 1 W, 2 X

/// Splits the scratch 2 MiB EPT page into 4 KiB pages (all RWX, write-back) for the run.
void ept_scratch_split(bool on) {
  namespace v = hvkit::vmx;
  const v::ept_caps ec{vcaps.ept_vpid_cap};
  const v::ept_permissions rwx{true, true, true, false};
  if (on) {
    for (std::uint64_t i = 0; i < 512; ++i)
      ept_pt_scratch[i] = v::make_ept_leaf(x86::hpa{0x1C00000 + (i << 12)}, v::ept_level::pte, rwx,
                                          v::ept_memory_type::wb, ec).value();
    ept_pd[ept_scratch_pd_index] =
        v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pt_scratch)}, rwx, ec).value();
  } else {
    ept_pd[ept_scratch_pd_index] =
        v::make_ept_leaf(x86::hpa{0x1C00000}, v::ept_level::pde, rwx, v::ept_memory_type::wb, ec).value();
  }
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
}

/// Sets the EPT permissions of one scratch page (memory type WB; no permission = not present).
void ept_set_page(std::uint64_t gpa, unsigned perms) {
  std::uint64_t& e = ept_pt_scratch[(gpa - 0x1C00000) >> 12];
  e = (e & ~7ull) | ept_perm_bits(perms);
}

/// The memory the nested walk reads: host-physical memory from 1 MiB (the EPT tables live in
/// the hypervisor's image) to the end of guest A's RAM. EPT maps guest A identically.
hvkit::paging::flat_memory host_memory_view() {
  return {reinterpret_cast<std::uint8_t*>(0x100000), layout::guest_mem_base + layout::guest_mem_size - 0x100000,
          x86::gpa{0x100000}};
}

/// hc::ept_arm: apply the case's EPT permissions and predict the access with hvkit's nested
/// walker (the guest's 4-level tables read through EPT, SDM Vol. 3C 29.3.3), guest A/D
/// updates included (their EPT write check is part of the prediction) and then undone so
/// that the CPU starts from the same state.
void handle_ept_arm(guest_regs& r) {
  namespace pg = hvkit::paging;
  const std::uint64_t la = r.rbx;
  const x86::pfec access{r.rcx};
  ept_set_page(hc::ept_test_data_gpa, r.rdx & 7);
  ept_set_page(hc::ept_test_pt_gpa, (r.rdx >> 8) & 7);
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));

  const pg::cpu_properties props = guest_cpu_properties();
  const x86::cr0 cr0{vmread(fields::guest_cr0)};
  const x86::cr4 cr4{vmread(fields::guest_cr4)};
  const x86::efer efer{vmread(fields::guest_ia32_efer)};
  const pg::cpu_role role = pg::make_cpu_role(cr0, cr4, efer);
  const pg::mmu_context mmu{role, x86::cr3_root(x86::cr3{vmread(fields::guest_cr3)}, role.mode(), props.maxphyaddr)};
  const std::uint64_t c = vcaps.ept_vpid_cap;
  pg::ept_capabilities ecap{};
  ecap.maxphyaddr = props.maxphyaddr;
  ecap.execute_only = c & 1;
  ecap.walk4 = (c >> 6) & 1;
  ecap.walk5 = (c >> 7) & 1;
  ecap.page_2m = (c >> 16) & 1;
  ecap.page_1g = (c >> 17) & 1;
  ecap.ad = (c >> 21) & 1;
  auto ew = pg::ept_walker::make(pg::ept_pointer{eptp_value}, ecap);
  pg::walk_request req{};
  req.linear = x86::gva{la};
  req.access = access;
  req.rflags = x86::rflags{vmread(fields::guest_rflags)};
  pg::flat_memory mem = host_memory_view();
  run.ept_pred_ok = run.ept_pred_ept = false;
  run.ept_pred_result = 0xFFFF;
  if (ew) {
    const pg::nested_walker<pg::format::ia32e<4>, pg::ept_walker> nw{pg::basic_walker<pg::format::ia32e<4>>{mmu, props},
                                                                      ew.value()};
    const pg::nested_result res = nw.walk(mem, mmu, req);
    if (res.has_value()) {
      run.ept_pred_ok = true;
      run.ept_pred_result = 0;
      const pg::walk_path& path = res.value().guest.path;
      for (unsigned i = 0; i < path.count; ++i) {  // undo the guest A/D updates
        const pg::walked_entry e = path_entry(path, i);
        if (std::uint8_t* p = guest_ram(e.address.value(), 8)) *reinterpret_cast<volatile std::uint64_t*>(p) = e.value;
      }
    } else {
      const pg::walk_fault& f = res.error();
      if (f.stage == pg::walk_stage::ept) {
        run.ept_pred_ept = true;
        run.ept_pred_qual = f.qualification.raw();
        run.ept_pred_gpa = f.guest_physical.value();
        run.ept_pred_la = f.linear.value();
      } else {
        run.ept_pred_result = 0x100 | static_cast<std::uint32_t>(f.vector);
        run.ept_pred_error = static_cast<std::uint32_t>(f.error_code.raw());
      }
    }
  }
  run.ept_seen = false;
  run.ept_seen_qual = run.ept_seen_gpa = run.ept_seen_la = 0;
  run.ept_armed = true;
}

/// An EPT violation on a scratch page while a case is armed: record what the CPU reported,
/// give the pages back (RWX) and let the guest retry the access.
bool ept_case_violation() {
  const std::uint64_t gpa = vmread(fields::guest_physical_address);
  if (!run.ept_armed || gpa < 0x1C00000 || gpa >= 0x1E00000) return false;
  if (!run.ept_seen) {
    run.ept_seen = true;
    run.ept_seen_qual = vmread(fields::exit_qualification);
    run.ept_seen_gpa = gpa;
    run.ept_seen_la = vmread(fields::guest_linear_address);
  }
  ept_set_page(hc::ept_test_data_gpa, 7);
  ept_set_page(hc::ept_test_pt_gpa, 7);
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  return true;
}

/// hc::ept_check: compare. Qualification bits 0-5 (access, EPT rights), 7 (linear address
/// valid) and 8 (final translation vs paging-structure access) must agree; bit 6 (XU) is
/// only defined with mode-based execute control, which is off. Then the GPA and the linear
/// address. Without a predicted EPT violation, the CPU must not have exited and the guest
/// must have seen the predicted outcome (success, or #PF with the same error code).
std::uint64_t handle_ept_check(guest_regs& r) {
  const auto cpu_result = static_cast<std::uint32_t>(r.rbx);
  const auto cpu_error = static_cast<std::uint32_t>(r.rcx);
  constexpr std::uint64_t qmask = 0x1BF;  // bits 0-5, 7, 8
  bool same;
  if (run.ept_pred_ept) {
    same = run.ept_seen && (run.ept_seen_qual & qmask) == (run.ept_pred_qual & qmask) &&
           run.ept_seen_gpa == run.ept_pred_gpa && run.ept_seen_la == run.ept_pred_la;
  } else {
    same = !run.ept_seen && cpu_result == run.ept_pred_result && (cpu_result == 0 || cpu_error == run.ept_pred_error);
  }
  // Bochs 2.7 erratum (see docs/hypervisor.md): without EPT A/D (EPTP bit 6 = 0) it sets the
  // A/D flags of guest paging-structure entries without checking EPT write permission. SDM
  // Vol. 3C 29.3.3.2: an A/D update is a write to the guest paging structure, so a
  // read-only page-table page causes an EPT violation (qualification bit 1 set, bit 8 0).
  // Cases where hvkit predicts exactly that violation and the CPU did not exit are counted
  // apart; the rest of the comparison applies to every other case.
  const bool ad_write_erratum = !same && run.ept_pred_ept && !run.ept_seen && (run.ept_pred_qual & 0x2) &&
                                !(run.ept_pred_qual & 0x100);
  if (ad_write_erratum) {
    ++run.ept_errata;
    same = true;
  }
  ++run.ept_cases;
  if (run.ept_seen) ++run.ept_violations;
  if (cpu_result != 0) ++run.ept_guest_faults;
  if (!same && ++run.ept_mismatches <= 12)
    kprintf("HVKIT MISMATCH ept case=%llu case_info=0x%llx cpu: ept=%d qual=0x%llx gpa=0x%llx la=0x%llx guest=0x%x/0x%x "
            "hvkit: ept=%d qual=0x%llx gpa=0x%llx la=0x%llx guest=0x%x/0x%x\n",
            (unsigned long long)run.ept_cases, (unsigned long long)r.rsi, run.ept_seen ? 1 : 0,
            (unsigned long long)run.ept_seen_qual, (unsigned long long)run.ept_seen_gpa,
            (unsigned long long)run.ept_seen_la, cpu_result, cpu_error, run.ept_pred_ept ? 1 : 0,
            (unsigned long long)run.ept_pred_qual, (unsigned long long)run.ept_pred_gpa,
            (unsigned long long)run.ept_pred_la, run.ept_pred_result, run.ept_pred_error);
  run.ept_armed = false;
  ept_set_page(hc::ept_test_data_gpa, 7);
  ept_set_page(hc::ept_test_pt_gpa, 7);
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  return same ? 0 : 1;
}

bool handle_vmcall(guest_regs& r) {
  char name[64];
  // Hypercalls are for the guest kernel only (CPL 0: SS.DPL, SDM Vol. 3C 25.4.1).
  if (((vmread(fields::guest_ss_access_rights) >> 5) & 3) != 0) {
    r.rax = ~0ull;
    skip_instruction();
    return true;
  }
  switch (r.rax) {
    case hc::log: {
      char buf[160];
      read_guest_string(r.rbx, buf, sizeof buf);
      kprintf("guest: %s\n", buf);
      break;
    }
    case hc::mark_begin:
      run.mark = run.exits;
      break;
    case hc::mark_end:
      read_guest_string(r.rbx, name, sizeof name);
      print_section(name, r.rcx, r.rdx, r.rsi);
      break;
    case hc::result: {
      read_guest_string(r.rbx, name, sizeof name);
      char check[80];
      std::size_t n = 0;
      for (const char* p = name; *p && n < 60; ++p) check[n++] = *p;
      check[n++] = '.';
      for (const char* p = run.cfg->name; *p && n < 78; ++p) check[n++] = *p;
      check[n] = '\0';
      if (run.cfg->stale_role) {
        // Negative control: the guest's verdicts are evidence, not results.
        kprintf("HVKIT INFO run=%s guest_check=%s guest_verdict=%s a=0x%llx b=0x%llx\n", run.cfg->name, name,
                r.rcx == hc::result_pass ? "PASS" : "FAIL", (unsigned long long)r.rdx, (unsigned long long)r.rsi);
        if (str_eq(name, "ltr_ro_gdt_wp0_ok")) {
          run.neg_wp0_seen = true;
          run.neg_wp0_result = r.rcx;
        }
      } else if (r.rcx == hc::result_erratum && !run.cfg->dt_exiting) {
        // Only runs where the CPU executes the instruction itself may report an erratum.
        ++results_errata;
        kprintf("HVKIT ERRATUM %s a=0x%llx b=0x%llx\n", check, (unsigned long long)r.rdx,
                (unsigned long long)r.rsi);
      } else {
        result(check, r.rcx == hc::result_pass, "a=0x%llx b=0x%llx", (unsigned long long)r.rdx,
               (unsigned long long)r.rsi);
      }
      break;
    }
    case hc::paging_case:
      r.rax = handle_paging_case(r);
      skip_instruction();
      return true;
    case hc::ept_arm:
      handle_ept_arm(r);
      r.rax = 0;
      skip_instruction();
      return true;
    case hc::ept_check:
      r.rax = handle_ept_check(r);
      skip_instruction();
      return true;
    case hc::done:
      run.status = run_status::done;
      skip_instruction();
      return false;
    case hc::unexpected:
      kprintf("HVKIT ERROR guest exception vector=%llu error=0x%llx rip=0x%llx cr2=0x%llx\n",
              (unsigned long long)r.rbx, (unsigned long long)r.rcx, (unsigned long long)r.rdx,
              (unsigned long long)r.rsi);
      run.status = run_status::fatal_exit;
      return false;
    default:
      r.rax = ~0ull;  // unknown hypercall: error return, the guest keeps running
      skip_instruction();
      return true;
  }
  r.rax = 0;
  skip_instruction();
  return true;
}

/// Prints the exit that ended a run; `expected` (a hostile run meant to end this way) makes
/// it information instead of an error.
void report_exit(const char* what, bool expected) {
  kprintf("HVKIT %s %s: reason=%llu qualification=0x%llx rip=0x%llx gpa=0x%llx intr_info=0x%llx\n",
          expected ? "INFO expected" : "ERROR", what,
          (unsigned long long)(vmread(fields::exit_reason) & 0xFFFF),
          (unsigned long long)vmread(fields::exit_qualification), (unsigned long long)vmread(fields::guest_rip),
          (unsigned long long)vmread(fields::guest_physical_address),
          (unsigned long long)vmread(fields::vm_exit_interruption_info));
}

}  // namespace

const char* vmx::reason_name(std::uint32_t r) {
  return hvkit::vmx::exit_reason_name(static_cast<hvkit::vmx::exit_reason>(r));
}

}  // namespace hv

using namespace hv;
using namespace hv::vmx;

namespace {

/// The exit handler for hvkit::vmx::dispatch_exit: one overload per handled basic exit
/// reason, chosen at compile time (one switch, no function pointers or virtual calls).
/// Each returns 1 to resume the guest, 0 to end the run.
struct exit_handler {
  using result_type = int;
  void* reserved;
  guest_regs& r;

  template <class B>
  int operator()(hvkit::vmx::cr_access_exit e, B&) { return handle_cr(r, e.qualification) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::cpuid>, B&) { handle_cpuid(r); return 1; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::vmcall>, B&) { return handle_vmcall(r) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::rdmsr>, B&) { return handle_msr(r, false) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::wrmsr>, B&) { return handle_msr(r, true) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ldtr_tr_access>, B&) {
    return emulate_instruction(r, "ldtr_tr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::gdtr_idtr_access>, B&) {
    return emulate_instruction(r, "gdtr_idtr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ept_violation>, B&) {
    return handle_ept_violation(r) ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::hlt>, B&) {
    report_exit("guest_halted");
    run.status = run_status::halted;
    return 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::triple_fault>, B&) {
    report_exit("guest_triple_fault", run.cfg->expected == run_status::triple_fault);
    run.status = run_status::triple_fault;
    return 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::preemption_timer>, B&) {
    run.preempted = true;  // end of a time slice: the scheduler switches VMCS
    return 0;
  }
  template <class B>
  int entry_failed(hvkit::vmx::exit_reason_field, B&) {
    // SDM Vol. 3C 27.8 "VM-Entry Failures During or After Loading Guest State".
    report_exit("vm_entry_failed");
    run.status = run_status::entry_failed;
    return 0;
  }
  template <class B>
  int unhandled(hvkit::vmx::exit_reason_field, B&) {
    report_exit("unexpected_exit");
    run.status = run_status::fatal_exit;
    return 0;
  }
};

}  // namespace

extern "C" int hv_handle_exit(guest_regs* regs) {
  auto raw = static_cast<std::uint32_t>(vmread(fields::exit_reason));
  std::uint32_t basic = raw & 0xFFFF;
  run.exits.total++;
  run.exits.by_reason[basic < exit_reason_slots ? basic : exit_reason_slots - 1]++;
  exit_handler h{nullptr, *regs};
  hvkit::vmx::hw::current_vmcs vmcs;
  return hvkit::vmx::dispatch_exit(h, vmcs, hvkit::vmx::exit_reason_field{raw});
}

namespace {

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

// ---- two guests, one CPU: VMCS switches and the IBPB policy ---------------------------
constexpr std::uint64_t guest_b_hpa = 0x3000000;   // 48 MiB: guest B's 2 MiB of RAM
constexpr std::uint64_t guest_b_gpa = 0x1000000;   // seen by guest B at 16 MiB
constexpr std::uint64_t spin_a2_gpa = layout::guest_mem_base + 0xE00000;  // in guest A's RAM
constexpr std::uint32_t preemption_slice = 4000;   // TSC ticks >> IA32_VMX_MISC[4:0]

std::uint64_t ibpb_barriers;
bool host_has_ibpb;
/// The barrier the tracker issues: counted, and the real IBPB when the host has it.
struct counting_barrier {
  void operator()() const noexcept {
    ++ibpb_barriers;
    if (host_has_ibpb) hvkit::vmx::pred_cmd_barrier{}();
  }
};

/// `inc qword [counter]; jmp back`: the whole program of guest B and of guest A's second
/// VMCS. Absolute disp32 addressing (ModRM 04, SIB 25), SDM Vol. 2A 2.1.5.
void write_spin_code(std::uint8_t* at, std::uint32_t counter_gpa) {
  const std::uint8_t code[] = {0x48, 0xFF, 0x04, 0x25, static_cast<std::uint8_t>(counter_gpa),
                               static_cast<std::uint8_t>(counter_gpa >> 8), static_cast<std::uint8_t>(counter_gpa >> 16),
                               static_cast<std::uint8_t>(counter_gpa >> 24), 0xEB, 0xF6};
  for (unsigned i = 0; i < sizeof code; ++i) at[i] = code[i];
}

struct vcpu_slot {
  const char* name;
  std::uint8_t* vmcs;
  hvkit::vmx::vmcs_identity id;
  guest_regs regs;
  bool launched;
  std::uint64_t slices;
  std::uint64_t counter_hpa;
};

/// Prepares one extra VMCS: the common set-up, then its own RIP/RSP/CR3 (and EPTP).
bool setup_extra_vmcs(vcpu_slot& s, const hc::guest_header& g, std::uint64_t rip, std::uint64_t rsp,
                      std::uint64_t cr3, std::uint64_t eptp) {
  *reinterpret_cast<std::uint32_t*>(s.vmcs) = vcaps.revision_id();
  const x86::hpa pa{reinterpret_cast<std::uint64_t>(s.vmcs)};
  if (!hvkit::vmx::hw::vmclear(pa) || !hvkit::vmx::hw::vmptrld(pa) || !setup_vmcs(g)) return false;
  vmwrite(fields::guest_rip, rip);
  vmwrite(fields::guest_rsp, rsp);
  vmwrite(fields::guest_cr3, cr3);
  vmwrite(fields::ept_pointer, eptp);
  vmwrite(fields::vmx_preemption_timer_value, preemption_slice);
  return true;
}

/// Runs guest A (the conformance guest in spin mode, VMCS A1), guest A's second VMCS (A2)
/// and guest B round-robin A1 A2 A1 B, one VMX-preemption-timer slice each, until guest A
/// reports done. Every VMPTRLD is followed by ibpb_tracker::on_vmcs_load and every entry
/// preceded by on_vm_entry: the policy decides the barriers, the run counts them.
int run_scheduled(const hc::guest_header& g) {
  namespace v = hvkit::vmx;
  // Guest B: 2 MiB at HPA 48 MiB, mapped by its own EPT at GPA 16 MiB; identity page
  // tables (2 MiB pages) at GPA +1 MiB, code at GPA +0, stack below GPA +512 KiB.
  auto* b = reinterpret_cast<std::uint8_t*>(guest_b_hpa);
  for (std::uint64_t i = 0; i < 0x200000; ++i) b[i] = 0;
  auto* bpt = reinterpret_cast<std::uint64_t*>(guest_b_hpa + 0x100000);
  bpt[0] = (guest_b_gpa + 0x101000) | 0x3;
  bpt[512] = (guest_b_gpa + 0x102000) | 0x3;
  for (std::uint64_t i = 0; i < 512; ++i) bpt[1024 + i] = (i << 21) | 0x83;
  write_spin_code(b, static_cast<std::uint32_t>(guest_b_gpa + 0x90000));
  const v::ept_caps ec{vcaps.ept_vpid_cap};
  const v::ept_permissions rwx{true, true, true, false};
  for (auto& e : ept_b_pml4) e = 0;
  for (auto& e : ept_b_pdpt) e = 0;
  for (auto& e : ept_b_pd) e = 0;
  ept_b_pml4[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pdpt)}, rwx, ec).value();
  ept_b_pdpt[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pd)}, rwx, ec).value();
  ept_b_pd[guest_b_gpa >> 21] =
      v::make_ept_leaf(x86::hpa{guest_b_hpa}, v::ept_level::pde, rwx, v::ept_memory_type::wb, ec).value();
  const std::uint64_t eptp_b =
      v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pml4)}, v::ept_memory_type::wb, 4, false, ec).value();
  // Guest A's second VMCS: a spinner in guest A's RAM, on the boot page tables.
  write_spin_code(reinterpret_cast<std::uint8_t*>(spin_a2_gpa), static_cast<std::uint32_t>(spin_a2_gpa + 0x10000));

  vcpu_slot slots[3] = {
      {"A1", vmcs_region, {reinterpret_cast<std::uint64_t>(vmcs_region), 1, 0}, run.regs, false, 0, 0},
      {"A2", vmcs_a2_region, {reinterpret_cast<std::uint64_t>(vmcs_a2_region), 1, 0}, {}, false, 0,
       spin_a2_gpa + 0x10000},
      {"B", vmcs_b_region, {reinterpret_cast<std::uint64_t>(vmcs_b_region), 2, 0}, {}, false, 0,
       guest_b_hpa + 0x90000},
  };
  if (!setup_extra_vmcs(slots[1], g, spin_a2_gpa, spin_a2_gpa + 0x8000, layout::guest_boot_pt_gpa, eptp_value) ||
      !setup_extra_vmcs(slots[2], g, guest_b_gpa, guest_b_gpa + 0x80000, guest_b_gpa + 0x100000, eptp_b)) {
    result("ibpb_setup", false, "reason=extra_vmcs_setup_failed");
    return 1;
  }
  // Back to A1 (set up by run_guest), with the same slice.
  if (!v::hw::vmptrld(x86::hpa{slots[0].id.vmcs})) return 1;
  vmwrite(fields::vmx_preemption_timer_value, preemption_slice);

  host_has_ibpb = (cpuid(7, 0).edx >> 26) & 1;
  ibpb_barriers = 0;
  v::ibpb_tracker<counting_barrier> tracker{static_cast<v::ibpb_policy>(run.cfg->ibpb)};
  tracker.on_vmcs_load(slots[0].id);  // the first load on this CPU: always a barrier
  std::uint64_t same_guest = 0, cross_guest = 0;
  static constexpr int order[4] = {0, 1, 0, 2};
  int current = 0;
  int rc = 0;
  for (std::uint64_t n = 0; n < 100000 && run.status == run_status::running; ++n) {
    const int next = order[n % 4];
    if (next != current) {
      if (!v::hw::vmptrld(x86::hpa{slots[next].id.vmcs})) {
        run.status = run_status::vm_fail;
        break;
      }
      tracker.on_vmcs_load(slots[next].id);
      (slots[next].id.vm == slots[current].id.vm ? same_guest : cross_guest)++;
      current = next;
    }
    tracker.on_vm_entry();
    run.preempted = false;
    rc = vmx_enter(&slots[current].regs, slots[current].launched ? 1 : 0);
    slots[current].launched = true;
    ++slots[current].slices;
    if (rc != 0) break;
    if (run.status == run_status::running && !run.preempted) break;  // fatal exit already reported
  }
  const std::uint64_t a2 = *reinterpret_cast<volatile std::uint64_t*>(slots[1].counter_hpa);
  const std::uint64_t bc = *reinterpret_cast<volatile std::uint64_t*>(slots[2].counter_hpa);
  const bool skip = run.cfg->ibpb == static_cast<int>(v::ibpb_policy::skip_same_guest);
  const std::uint64_t expected = 1 + cross_guest + (skip ? 0 : same_guest);
  kprintf("HVKIT INFO run=%s slices_a1=%llu slices_a2=%llu slices_b=%llu spins_a2=%llu spins_b=%llu host_ibpb=%d\n",
          run.cfg->name, (unsigned long long)slots[0].slices, (unsigned long long)slots[1].slices,
          (unsigned long long)slots[2].slices, (unsigned long long)a2, (unsigned long long)bc, host_has_ibpb ? 1 : 0);
  result(skip ? "ibpb_policy.skip_same_guest" : "ibpb_policy.every_vmcs_change",
         ibpb_barriers == expected && same_guest > 0 && cross_guest > 0 && a2 > 0 && bc > 0,
         "switches_same_guest=%llu switches_cross_guest=%llu barriers=%llu expected=%llu", (unsigned long long)same_guest,
         (unsigned long long)cross_guest, (unsigned long long)ibpb_barriers, (unsigned long long)expected);
  return rc;
}

bool run_guest(int index) {
  const run_config& cfg = runs[index];
  run = run_state{};
  run.cfg = &cfg;
  run.status = run_status::running;
  kprintf("HVKIT RUN %s begin wp=%s\n", cfg.name, cfg.wp_intercepted ? "intercepted" : "guest_owned");

  const hc::guest_header* g = load_guest();
  if (!g) return false;
  std::uint64_t vmcs = reinterpret_cast<std::uint64_t>(vmcs_region);
  *reinterpret_cast<std::uint32_t*>(vmcs_region) = static_cast<std::uint32_t>(caps.basic & 0x7FFFFFFF);
  if (!hvkit::vmx::hw::vmclear(x86::hpa{vmcs}) || !hvkit::vmx::hw::vmptrld(x86::hpa{vmcs})) {
    result("vmcs_load", false, "reason=vmclear_or_vmptrld_failed");
    return false;
  }
  if (!setup_vmcs(*g)) return false;
  if (caps.ept_vpid & (1ull << 26))  // INVEPT all-context supported (SDM Vol. 3D A.10)
    static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  run.regs.rdi = (cfg.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                 (cfg.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) | cfg.guest_flags;

  std::uint64_t t0 = rdtsc();
  if (cfg.guest_flags & hc::cfg_ept_diff) ept_scratch_split(true);
  int rc = cfg.ibpb >= 0 ? run_scheduled(*g) : vmx_enter(&run.regs, 0);
  if (cfg.guest_flags & hc::cfg_ept_diff) {
    ept_scratch_split(false);
    result("ept_differential", run.ept_cases >= 2000 && run.ept_mismatches == 0,
           "cases=%llu mismatches=%llu ept_violations=%llu guest_faults=%llu bochs_ad_write_errata=%llu",
           (unsigned long long)run.ept_cases, (unsigned long long)run.ept_mismatches,
           (unsigned long long)run.ept_violations, (unsigned long long)run.ept_guest_faults,
           (unsigned long long)run.ept_errata);
    if (run.ept_errata)
      kprintf("HVKIT ERRATUM ept_guest_ad_update_ignores_ept_write.ept_diff cases=%llu\n",
              (unsigned long long)run.ept_errata);
  }
  std::uint64_t t1 = rdtsc();
  if (rc != 0) {
    run.status = run_status::vm_fail;
    kprintf("HVKIT ERROR vmlaunch/vmresume failed: %s vm_instruction_error=%llu\n",
            rc == 1 ? "VMfailInvalid" : "VMfailValid",
            (unsigned long long)(rc == 2 ? vmread(fields::vm_instruction_error) : 0));
  }
  for (unsigned i = 0; i < exit_reason_slots; ++i)
    if (run.exits.by_reason[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", cfg.name, i, reason_name(i),
              (unsigned long long)run.exits.by_reason[i]);
  kprintf("HVKIT RUN %s end status=%s exits=%llu host_tsc=%llu\n", cfg.name, status_name(run.status),
          (unsigned long long)run.exits.total, (unsigned long long)(t1 - t0));
  kprintf("HVKIT INFO run=%s mmio_reads=%llu mmio_writes=%llu unassigned_reads=%llu unassigned_writes=%llu "
          "not_emulable=%llu\n",
          cfg.name, (unsigned long long)run.device_reads, (unsigned long long)run.device_writes,
          (unsigned long long)run.unassigned_reads, (unsigned long long)run.unassigned_writes,
          (unsigned long long)run.not_emulable);
  kprintf("HVKIT INFO run=%s mmu_refreshes=%llu mmu_resets=%llu wp_passthrough_refreshes=%llu\n", cfg.name,
          (unsigned long long)run.mmu_refreshes, (unsigned long long)run.mmu_resets,
          (unsigned long long)run.passthrough_refreshes);
  if (cfg.guest_flags & hc::cfg_paging_diff) {
    static const char* const kinds[6] = {"cpl0_read", "cpl0_write", "cpl0_fetch", "cpl3_read", "cpl3_write", "cpl3_fetch"};
    for (unsigned k = 0; k < 6; ++k)
      kprintf("HVKIT INFO run=%s paging_cases kind=%s ok=%llu fault=%llu\n", cfg.name, kinds[k],
              (unsigned long long)run.pg_by_kind[k][0], (unsigned long long)run.pg_by_kind[k][1]);
    result("paging_differential", run.pg_cases >= 10000 && run.pg_mismatches == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu a_set_on_faulting_walk=%llu", (unsigned long long)run.pg_cases,
           (unsigned long long)run.pg_mismatches, (unsigned long long)run.pg_cpu_faults,
           (unsigned long long)run.pg_a_on_fault);
  }
  if (cfg.stale_role) {
    result("stale_wp_role_negative_control", run.neg_wp0_seen && run.neg_wp0_result == hc::result_fail &&
                                                 run.stale_wrong_faults > 0,
           "guest_ltr_wp0_verdict=%s wrong_pf_0x3_injected=%llu", run.neg_wp0_seen ? (run.neg_wp0_result == hc::result_pass ? "PASS" : "FAIL") : "missing",
           (unsigned long long)run.stale_wrong_faults);
  } else if (cfg.dt_exiting && !(cfg.guest_flags & (hc::cfg_quick | hc::cfg_spin))) {
    // WP toggles that exit keep the role in sync through cr_write_actions (refresh only,
    // never a reset); toggles that do not exit are caught by the passthrough refresh at
    // the next emulated access (the two LTRs run with different WP values).
    bool pass = run.mmu_resets == 0 &&
                (cfg.wp_intercepted ? run.mmu_refreshes >= 11000 && run.passthrough_refreshes == 0
                                    : run.mmu_refreshes == 0 && run.passthrough_refreshes >= 2);
    char check[48] = "mmu_wp_sync.";
    for (std::size_t n = 12, i = 0; cfg.name[i] && n < sizeof check - 1; ++i, ++n) check[n] = cfg.name[i];
    result(check, pass, "cr_exit_refreshes=%llu resets=%llu passthrough_refreshes=%llu",
           (unsigned long long)run.mmu_refreshes, (unsigned long long)run.mmu_resets,
           (unsigned long long)run.passthrough_refreshes);
  }
  bool ok = run.status == cfg.expected;
  char check[48] = "run.";
  for (std::size_t n = 4, i = 0; cfg.name[i] && n < sizeof check - 1; ++i, ++n) check[n] = cfg.name[i];
  result(check, ok, "status=%s expected=%s", status_name(run.status), status_name(cfg.expected));
  // The guest's writes to the hypervisor's image went nowhere (EPT does not map it).
  bool intact = *reinterpret_cast<const volatile std::uint32_t*>(layout::hypervisor_image_gpa) == 0x1BADB002;
  if (!intact) result("hypervisor_memory_intact", false, "run=%s", cfg.name);
  summaries[index] = {ok && run.wp_seen, run.wp_toggles, run.wp_cr_exits, run.wp_mismatch, run.wp_tsc};
  return ok;
}

}  // namespace

extern "C" void hv_host_exception(const std::uint64_t* f) {
  // frame: r15..rax (15), vector, error code, rip, cs, rflags, rsp, ss
  std::uint64_t cr2;
  asm volatile("mov %%cr2, %0" : "=r"(cr2));
  kprintf("\nHVKIT ERROR host exception vector=%llu error=0x%llx rip=0x%llx rsp=0x%llx cr2=0x%llx\n",
          (unsigned long long)f[15], (unsigned long long)f[16], (unsigned long long)f[17],
          (unsigned long long)f[20], (unsigned long long)cr2);
  kprintf("HVKIT DONE FAIL\n");
  machine_exit(false);
}

extern "C" void hv_main() {
  console_init();
  std::uint64_t t_start = rdtsc();
  kprintf("\nHVKIT BOOT hvkit reference hypervisor (multiboot magic 0x%x)\n", boot_multiboot_magic);
  setup_host_tables();

  cpuid_regs v = cpuid(0);
  char vendor[13];
  __builtin_memcpy(vendor, &v.ebx, 4);
  __builtin_memcpy(vendor + 4, &v.edx, 4);
  __builtin_memcpy(vendor + 8, &v.ecx, 4);
  vendor[12] = '\0';
  kprintf("HVKIT INFO cpu_vendor=%s max_leaf=0x%x\n", vendor, v.eax);
  if (((cpuid(1).ecx >> 5) & 1) == 0) {
    kprintf("HVKIT SKIP this CPU has no VMX (CPUID.1:ECX.VMX=0)\n");
    kprintf("HVKIT DONE SKIP\n");
    machine_exit(true);
  }
  read_capabilities();
  bool ok = build_cpuid_policy() && enable_vmx() && build_ept();
  if (ok) {
    for (int i = 0; i < run_count; ++i) ok = run_guest(i) && ok;
    // Cross-run comparison: the numbers the CR0.WP work is about.
    const run_summary& owned = summaries[0];
    const run_summary& icpt = summaries[1];
    milli po = ratio(owned.cr_exits, owned.toggles), pi = ratio(icpt.cr_exits, icpt.toggles);
    milli to = ratio(owned.tsc, owned.toggles), ti = ratio(icpt.tsc, icpt.toggles);
    bool cmp = owned.ok && icpt.ok && owned.toggles == 10000 && icpt.toggles == 10000 && owned.cr_exits == 0 &&
               icpt.cr_exits == icpt.toggles && owned.mismatch == 0 && icpt.mismatch == 0;
    result("wp_exits_per_toggle", cmp,
           "guest_owned=%llu.%03llu intercepted=%llu.%03llu tsc_per_toggle_guest_owned=%llu.%03llu "
           "tsc_per_toggle_intercepted=%llu.%03llu",
           po.whole, po.frac, pi.whole, pi.frac, to.whole, to.frac, ti.whole, ti.frac);
  }
  std::uint64_t t_end = rdtsc();
  kprintf("HVKIT INFO tsc_total=%llu\n", (unsigned long long)(t_end - t_start));
  kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", results_pass, results_fail, results_errata);
  bool pass = results_fail == 0 && results_pass > 0;
  kprintf("HVKIT DONE %s\n", pass ? "PASS" : "FAIL");
  machine_exit(pass);
}
