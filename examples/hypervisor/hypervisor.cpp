// SPDX-License-Identifier: MIT
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
#include "hv.hpp"
#include "linux/linux.hpp"
#include "svm/svm.hpp"

namespace hv {

// ---- state (declared in hv.hpp) ----------------------------------------------------------
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
alignas(4096) std::uint64_t ept_pd_alias[512];

/// Capability MSRs, read once (hvkit::vmx::vmx_capabilities: TRUE_* and secondary/EPT MSRs
/// only where the architecture says they exist, SDM Vol. 3D A.1-A.10).
hvkit::vmx::vmx_capabilities vcaps;
capabilities caps;
constinit cpuid_ns::table<128> host_cpuid{};
constinit cpuid_ns::policy guest_policy{};
constinit cpuid_ns::msr_policy guest_msrs{};
constinit run_state run{};
int results_pass, results_fail, results_errata;
std::uint64_t eptp_value;

namespace {

constexpr run_config runs[] = {
    {"guest_owned", false, true, 0, run_status::done},
    {"intercepted", true, true, 0, run_status::done, false, -1, true},
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
    // The 32-bit guest (IA-32e mode guest = 0): 32-bit and PAE paging, the CPU as the
    // oracle, PDPTE loads by MOV to CR3 included.
    {"paging_diff32", false, false, hc::cfg_guest32, run_status::done},
    {"ibpb_skip_same_guest", false, true, hc::cfg_spin, run_status::done, false,
     static_cast<int>(hvkit::vmx::ibpb_policy::skip_same_guest)},
    {"ibpb_every_change", false, true, hc::cfg_spin, run_status::done, false,
     static_cast<int>(hvkit::vmx::ibpb_policy::every_vmcs_change)},
    // Hostile: guest B triple-faults on its first slice; guest A (another VM) must go on.
    {"hostile_guest_b", false, true, hc::cfg_spin | hc::cfg_hostile_b, run_status::done, false,
     static_cast<int>(hvkit::vmx::ibpb_policy::skip_same_guest)},
};
constexpr int run_count = sizeof(runs) / sizeof(runs[0]);

run_summary summaries[run_count];

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

bool run_guest(int index) {
  const run_config& cfg = runs[index];
  run = run_state{};
  run.cfg = &cfg;
  run.status = run_status::running;
  kprintf("HVKIT RUN %s begin wp=%s\n", cfg.name, cfg.wp_intercepted ? "intercepted" : "guest_owned");

  const hc::guest_header* g = load_guest(cfg.guest_flags & hc::cfg_guest32);
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
  run.regs[x86::gpr::rdi] = (cfg.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                 (cfg.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) |
                 (cfg.cr3_exiting ? std::uint64_t{hc::cfg_cr3_exiting} : 0) | cfg.guest_flags;

  std::uint64_t t0 = rdtsc();
  if (cfg.guest_flags & hc::cfg_ept_diff) ept_scratch_split(true);
  int rc = cfg.ibpb >= 0 ? run_scheduled(*g) : vmx_enter(&run.regs, 0);
  if (cfg.guest_flags & hc::cfg_ept_diff) {
    ept_scratch_split(false);
    result("ept_differential",
           run.ept_cases >= 2000 && run.ept_mismatches == 0 && run.ept_misconfig_by_kind[0] == 0 &&
               run.ept_misconfig_by_kind[1] > 0 && run.ept_misconfig_by_kind[2] > 0 && run.ept_misconfig_by_kind[3] > 0,
           "cases=%llu mismatches=%llu ept_violations=%llu ept_misconfigs=%llu misconfig_w_without_r=%llu "
           "misconfig_above_maxphyaddr=%llu misconfig_type2_or_bit3=%llu large_page_cases=%llu guest_faults=%llu "
           "bochs_ad_write_errata=%llu",
           (unsigned long long)run.ept_cases, (unsigned long long)run.ept_mismatches,
           (unsigned long long)run.ept_violations, (unsigned long long)run.ept_misconfigs,
           (unsigned long long)run.ept_misconfig_by_kind[1], (unsigned long long)run.ept_misconfig_by_kind[2],
           (unsigned long long)run.ept_misconfig_by_kind[3],
           (unsigned long long)run.ept_large_cases, (unsigned long long)run.ept_guest_faults,
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
    if (rc == 2) print_vm_entry_diagnosis(cfg.name);
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
    static const char* const kinds[7] = {"cpl0_read",  "cpl0_write", "cpl0_fetch",        "cpl3_read",
                                         "cpl3_write", "cpl3_fetch", "implicit_supervisor"};
    for (unsigned k = 0; k < 7; ++k)
      kprintf("HVKIT INFO run=%s paging_cases kind=%s ok=%llu fault=%llu\n", cfg.name, kinds[k],
              (unsigned long long)run.pg_by_kind[k][0], (unsigned long long)run.pg_by_kind[k][1]);
    result("paging_differential", run.pg_cases >= 10000 && run.pg_mismatches == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu a_set_on_faulting_walk=%llu bochs_b1_errata=%llu "
           "bochs_b2_errata=%llu bochs_b3_errata=%llu",
           (unsigned long long)run.pg_cases, (unsigned long long)run.pg_mismatches,
           (unsigned long long)run.pg_cpu_faults, (unsigned long long)run.pg_a_on_fault,
           (unsigned long long)run.pg_errata_b1, (unsigned long long)run.pg_errata_b2,
           (unsigned long long)run.pg_errata_b3);
    if (run.pg_errata_b3)
      kprintf("HVKIT ERRATUM smap_ac_overrides_implicit_access.%s cases=%llu\n", cfg.name,
              (unsigned long long)run.pg_errata_b3);
    if (run.pg_errata_b1)
      kprintf("HVKIT ERRATUM pkru_on_supervisor_addresses.%s cases=%llu\n", cfg.name,
              (unsigned long long)run.pg_errata_b1);
    if (run.pg_errata_b2)
      kprintf("HVKIT ERRATUM pkru_ignored_for_supervisor_accesses.%s cases=%llu\n", cfg.name,
              (unsigned long long)run.pg_errata_b2);
  }
  if (cfg.guest_flags & hc::cfg_guest32) {
    static const char* const kinds[7] = {"cpl0_read",  "cpl0_write", "cpl0_fetch",        "cpl3_read",
                                         "cpl3_write", "cpl3_fetch", "implicit_supervisor"};
    for (unsigned k = 0; k < 7; ++k)
      kprintf("HVKIT INFO run=%s paging_cases kind=%s ok=%llu fault=%llu\n", cfg.name, kinds[k],
              (unsigned long long)run.pg_by_kind[k][0], (unsigned long long)run.pg_by_kind[k][1]);
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
    result("pae_pdpte_load", run.pdpte_loads >= 5000 && run.pdpte_gp > 0 && run.pdpte_mismatches == 0 &&
                                 run.pdpte_register_mismatches == 0,
           "loads=%llu gp=%llu mismatches=%llu vmcs_pdpte_register_mismatches=%llu", (unsigned long long)run.pdpte_loads,
           (unsigned long long)run.pdpte_gp, (unsigned long long)run.pdpte_mismatches,
           (unsigned long long)run.pdpte_register_mismatches);
    kprintf("HVKIT INFO run=%s a_set_on_faulting_walk=%llu\n", cfg.name, (unsigned long long)run.pg_a_on_fault);
    if (run.pg_errata_b3)
      kprintf("HVKIT ERRATUM smap_ac_overrides_implicit_access.%s cases=%llu\n", cfg.name,
              (unsigned long long)run.pg_errata_b3);
  }
  if (cfg.cr3_exiting) {
    // The guest's MOV to CR3 with a reserved bit exited and vmx::evaluate_cr_write refused it.
    char check[48] = "cr3_write_gp_injected.";
    for (std::size_t n = 22, i = 0; cfg.name[i] && n < sizeof check - 1; ++i, ++n) check[n] = cfg.name[i];
    result(check, run.cr_gp_injected >= 1 && run.exits.by_reason[static_cast<unsigned>(hvkit::vmx::exit_reason::cr_access)] > 0,
           "gp_injected=%llu", (unsigned long long)run.cr_gp_injected);
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

}  // namespace hv

using namespace hv;
using namespace hv::vmx;

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
  // "linux" on the multiboot command line: host the Linux guest instead (linux/linux.cpp).
  if (hv::lx::requested()) hv::lx::boot();
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
  if (((cpuid(1).ecx >> 5) & 1) == 0 && svm::available()) {
    // One image for both vendors: AMD-V with nested paging (svm/).
    kprintf("HVKIT INFO backend=svm\n");
    const bool svm_ok = svm::run_all();
    kprintf("HVKIT INFO tsc_total=%llu\n", (unsigned long long)(rdtsc() - t_start));
    kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", results_pass, results_fail, results_errata);
    const bool pass = svm_ok && results_fail == 0 && results_pass > 0;
    kprintf("HVKIT DONE %s\n", pass ? "PASS" : "FAIL");
    machine_exit(pass);
  }
  if (((cpuid(1).ecx >> 5) & 1) == 0) {
    kprintf("HVKIT SKIP this CPU has neither VMX (CPUID.1:ECX.VMX=0) nor SVM with nested paging\n");
    kprintf("HVKIT DONE SKIP\n");
    machine_exit(true);
  }
  read_capabilities();
  bool ok = build_cpuid_policy() && enable_vmx() && build_ept();
  if (ok) {
    for (int i = 0; i < run_count; ++i) ok = run_guest(i) && ok;
    ok = entry_diff_run() && ok;
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
