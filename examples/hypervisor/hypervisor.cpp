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
#include "core/page_pool.hpp"
#include "linux/linux.hpp"
#include "profiles/exit_cost.hpp"
#include "svm/svm.hpp"
#include "core/shadow_paging.hpp"

namespace hv {

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

/// Under shadow paging (run --shadow), the runs that need what only EPT or a second VM gives;
/// nullptr: the run applies.
const char* shadow_not_applicable(const run_config& cfg) { return core::shadow::not_applicable(cfg, cfg.ibpb >= 0); }

bool run_guest(core::tally& tally, const vmx_host& h, const run_config& cfg, const core::guest_cpu& cpu,
               run_summary& summary) {
  // The run's vCPU and its checks: this function's, handed on (vmx_enter, the scheduler, the
  // reports), never a global.
  run_state st{};
  st.cfg = &cfg;
  st.results = &tally;
  st.cpu = &cpu;
  st.status = run_status::running;
  kprintf("HVKIT RUN %s begin wp=%s\n", cfg.name, cfg.wp_intercepted ? "intercepted" : "guest_owned");

  hc::guest_header profile_header{};
  const hc::guest_header* g = load_guest(tally, profile_header, cfg.guest_flags & hc::cfg_guest32, cfg.profile);
  if (!g) return false;
  std::uint64_t vmcs = reinterpret_cast<std::uint64_t>(h.vmcs);
  *reinterpret_cast<std::uint32_t*>(h.vmcs) = static_cast<std::uint32_t>(h.caps.basic & 0x7FFFFFFF);
  if (!hvkit::vmx::hw::vmclear(x86::hpa{vmcs}) || !hvkit::vmx::hw::vmptrld(x86::hpa{vmcs})) {
    result(tally, "vmcs_load", false, "reason=vmclear_or_vmptrld_failed");
    return false;
  }
  if (!setup_vmcs(h, *g, st)) return false;
  if (h.caps.ept_vpid_cap & (1ull << 26))  // INVEPT all-context supported (SDM Vol. 3D A.10)
    static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  st.regs[x86::gpr::rdi] = (cfg.wp_intercepted ? std::uint64_t{hc::cfg_wp_intercepted} : 0) |
                 (cfg.dt_exiting ? 0 : std::uint64_t{hc::cfg_dt_native}) |
                 (cfg.cr3_exiting ? std::uint64_t{hc::cfg_cr3_exiting} : 0) | cfg.guest_flags;

  std::uint64_t t0 = rdtsc();
  if (cfg.guest_flags & hc::cfg_ept_diff) ept_scratch_split(h, true);
  int rc = cfg.ibpb >= 0 ? run_scheduled(h, *g, st) : vmx_enter(&st.regs, 0, &st, &h);
  if (cfg.guest_flags & hc::cfg_ept_diff) {
    ept_scratch_split(h, false);
    result(tally, "ept_differential",
           st.ept_cases >= 2000 && st.ept_mismatches == 0 && st.ept_misconfig_by_kind[0] == 0 &&
               st.ept_misconfig_by_kind[1] > 0 && st.ept_misconfig_by_kind[2] > 0 && st.ept_misconfig_by_kind[3] > 0,
           "cases=%llu mismatches=%llu ept_violations=%llu ept_misconfigs=%llu misconfig_w_without_r=%llu "
           "misconfig_above_maxphyaddr=%llu misconfig_type2_or_bit3=%llu large_page_cases=%llu guest_faults=%llu "
           "bochs_ad_write_errata=%llu",
           (unsigned long long)st.ept_cases, (unsigned long long)st.ept_mismatches,
           (unsigned long long)st.ept_violations, (unsigned long long)st.ept_misconfigs,
           (unsigned long long)st.ept_misconfig_by_kind[1], (unsigned long long)st.ept_misconfig_by_kind[2],
           (unsigned long long)st.ept_misconfig_by_kind[3],
           (unsigned long long)st.ept_large_cases, (unsigned long long)st.ept_guest_faults,
           (unsigned long long)st.ept_errata);
    if (st.ept_errata)
      kprintf("HVKIT ERRATUM ept_guest_ad_update_ignores_ept_write.ept_diff cases=%llu\n",
              (unsigned long long)st.ept_errata);
  }
  std::uint64_t t1 = rdtsc();
  if (rc != 0) {
    st.status = run_status::vm_fail;
    kprintf("HVKIT ERROR vmlaunch/vmresume failed: %s vm_instruction_error=%llu\n",
            rc == 1 ? "VMfailInvalid" : "VMfailValid",
            (unsigned long long)(rc == 2 ? vmread(fields::vm_instruction_error) : 0));
    if (rc == 2) print_vm_entry_diagnosis(h, cfg.name);
  }
  for (unsigned i = 0; i < exit_reason_slots; ++i)
    if (st.exits.by_slot[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", cfg.name, i, reason_name(i), (unsigned long long)st.exits.by_slot[i]);
  kprintf("HVKIT RUN %s end status=%s exits=%llu host_tsc=%llu\n", cfg.name, core::status_name(st.status),
          (unsigned long long)st.exits.total, (unsigned long long)(t1 - t0));
  core::context c = context_of(st);
  core::report_run(c, false);
  const bool ok = core::report_status(c);
  summary = {ok && st.wp_seen, st.wp_toggles, st.wp_cr_exits, st.wp_mismatch, st.wp_tsc};
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
  // The boot's guest CPU, results and pages: this function's (it never returns), handed down.
  core::guest_cpu boot_cpu{};
  // "linux" on the multiboot command line: host the Linux guest instead (linux/linux.cpp).
  if (hv::lx::requested()) hv::lx::boot(boot_cpu);
  core::tally tally{};
  core::page_pool pool = core::boot_page_pool();
  console_init();
  std::uint64_t t_start = rdtsc();
  kprintf("\nHVKIT BOOT hvkit reference hypervisor (multiboot magic 0x%x)\n", boot_multiboot_magic);
  setup_host_tables(pool);

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
    const bool svm_ok = svm::build_policy(boot_cpu, tally) && svm::run_all(boot_cpu, pool, tally);
    kprintf("HVKIT INFO tsc_total=%llu\n", (unsigned long long)(rdtsc() - t_start));
    kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", tally.pass, tally.fail, tally.errata);
    const bool pass = svm_ok && tally.fail == 0 && tally.pass > 0;
    kprintf("HVKIT DONE %s\n", pass ? "PASS" : "FAIL");
    machine_exit(pass);
  }
  if (((cpuid(1).ecx >> 5) & 1) == 0) {
    kprintf("HVKIT SKIP this CPU has neither VMX (CPUID.1:ECX.VMX=0) nor SVM with nested paging\n");
    kprintf("HVKIT DONE SKIP\n");
    machine_exit(true);
  }
  // VMX: the capabilities and the pages, hv_main's, handed to every run and every exit.
  vmx_host host{};
  read_capabilities(host);
  take_vmx_pages(host, pool);
  bool ok = build_cpuid_policy(tally, host, boot_cpu) && enable_vmx(tally, host) && build_ept(tally, host);
  if (ok && exit_cost::requested()) {
    // The exit-cost guest profile instead of the conformance runs (docs/exit-cost.md).
    run_summary unused{};
    for (const run_config& cfg : exit_cost::runs) ok = run_guest(tally, host, cfg, boot_cpu, unused) && ok;
  } else if (ok) {
    run_summary summaries[run_count]{};  // the runs' numbers for the comparison below
    for (int i = 0; i < run_count; ++i) {
      if (const char* why = shadow_not_applicable(runs[i])) {
        kprintf("HVKIT INFO run=%s not_applicable_under_shadow reason=%s\n", runs[i].name, why);
        continue;
      }
      ok = run_guest(tally, host, runs[i], boot_cpu, summaries[i]) && ok;
    }
    if (core::shadow::enabled())
      kprintf("HVKIT INFO run=entry_diff not_applicable_under_shadow reason=vm_entry_checks_of_the_ept_vmcs\n");
    else
      ok = entry_diff_run(tally, host, pool, boot_cpu) && ok;
    // Cross-run comparison: the numbers the CR0.WP work is about.
    const run_summary& owned = summaries[0];
    const run_summary& icpt = summaries[1];
    milli po = ratio(owned.cr_exits, owned.toggles), pi = ratio(icpt.cr_exits, icpt.toggles);
    milli to = ratio(owned.tsc, owned.toggles), ti = ratio(icpt.tsc, icpt.toggles);
    // Shadow paging: WP cannot be guest-owned, the "guest_owned" run's toggles exit too.
    const std::uint64_t owned_exits = core::shadow::enabled() ? owned.toggles : 0;
    bool cmp = owned.ok && icpt.ok && owned.toggles == 10000 && icpt.toggles == 10000 && owned.cr_exits == owned_exits &&
               icpt.cr_exits == icpt.toggles && owned.mismatch == 0 && icpt.mismatch == 0;
    result(tally, "wp_exits_per_toggle", cmp,
           "guest_owned=%llu.%03llu intercepted=%llu.%03llu tsc_per_toggle_guest_owned=%llu.%03llu "
           "tsc_per_toggle_intercepted=%llu.%03llu",
           po.whole, po.frac, pi.whole, pi.frac, to.whole, to.frac, ti.whole, ti.frac);
  }
  std::uint64_t t_end = rdtsc();
  kprintf("HVKIT INFO tsc_total=%llu\n", (unsigned long long)(t_end - t_start));
  kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", tally.pass, tally.fail, tally.errata);
  const bool pass = tally.fail == 0 && tally.pass > 0;
  kprintf("HVKIT DONE %s\n", pass ? "PASS" : "FAIL");
  machine_exit(pass);
}
