// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, vendor-neutral core: guest memory, the MMIO test device, the
// emulator's platform and translator, the hypercalls' reports and the per-run results that
// both backends print the same way (core/report.hpp).
#include "report.hpp"
#include "shadow_paging.hpp"

#include <hvkit/cpuid/features.hpp>
#include <hvkit/x86/pfec.hpp>

#include "../hypercall.hpp"
#include "cpu.hpp"

namespace hv::core {

namespace x86 = hvkit::x86;
namespace pg = hvkit::paging;

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

// ---- guest memory ---------------------------------------------------------------------------
pg::flat_memory guest_ram_view(const guest_ram_range& r) {
  return {reinterpret_cast<std::uint8_t*>(r.base), r.size, x86::gpa{r.base}};
}
hvkit::emulate::flat_ram guest_ram_data(const guest_ram_range& r) {
  return {reinterpret_cast<std::uint8_t*>(r.base), r.size, x86::gpa{r.base}};
}
std::uint8_t* guest_ram(const guest_ram_range& r, std::uint64_t gpa, std::uint64_t size) {
  if (gpa < r.base || size > r.size || gpa - r.base > r.size - size) return nullptr;
  return reinterpret_cast<std::uint8_t*>(gpa);
}
pg::cpu_properties guest_cpu_properties(const hvkit::cpuid::guest_cpu_model& m) {
  pg::cpu_properties props{};
  props.maxphyaddr = m.maxphyaddr;
  props.gbpages = m.gbpages();
  return props;
}
unsigned host_maxphyaddr() {
  return cpuid(0x80000000).eax >= 0x80000008 ? (cpuid(0x80000008).eax & 0xFF) : x86::default_maxphyaddr;
}
hvkit::cpuid::guest_cpu_model guest_cpu_model(const hvkit::cpuid::policy& policy, x86::cr4 cpu) {
  hvkit::cpuid::guest_cpu_model m = hvkit::cpuid::make_guest_cpu_model(policy);
  m.cr4_allowed = m.cr4_allowed & cpu;
  return m;
}
bool complete_guest_cpu(guest_cpu& g, x86::cr4 cpu) {
  g.msrs = hvkit::cpuid::derive_msr_policy(g.cpuid.features(), g.cpuid.xss_components());
  g.model = guest_cpu_model(g.cpuid, cpu);
  return hvkit::cpuid::check_consistency(g.cpuid.features(), g.msrs).has_value();
}

// ---- the MMIO test device -----------------------------------------------------------------
std::uint64_t device_read(context& c, std::uint64_t offset, unsigned size) {
  mmio_device& d = c.vcpu.device;
  d.regs[0] = layout::mmio_device_id;
  std::uint64_t v = 0;
  for (unsigned k = 0; k < size; ++k) {
    const std::uint64_t o = offset + k;
    const std::uint64_t byte = o < sizeof d.regs ? (d.regs[o / 8] >> (8 * (o % 8))) & 0xFF : 0;
    v |= byte << (8 * k);
  }
  d.regs[3] = ++c.checks.device_reads;
  return v;
}
void device_write(context& c, std::uint64_t offset, unsigned size, std::uint64_t v) {
  mmio_device& d = c.vcpu.device;
  for (unsigned k = 0; k < size; ++k) {
    const std::uint64_t o = offset + k;
    if (o >= 8 && o < 16) {  // only the scratch register is writable
      const unsigned sh = 8 * (o % 8);
      d.regs[1] = (d.regs[1] & ~(0xFFull << sh)) | (((v >> (8 * k)) & 0xFF) << sh);
    }
  }
  d.regs[2] = ++c.checks.device_writes;
}

namespace {
bool is_device(std::uint64_t g) {
  return g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size;
}
/// The 32-bit guest's PSE-36 alias, RAM as the EPT/NPT and the shadow frame map give it:
/// GPA 4 GiB + [28 MiB, 32 MiB) is [28 MiB, 32 MiB). An emulated access there (under shadow
/// paging: a CR0.WP = 0 supervisor write under SMAP through a 4 MiB PSE-36 page) reaches that
/// RAM; nullptr outside it.
std::uint8_t* pse36_alias(const guest_ram_range& ram, std::uint64_t g, unsigned size) {
  constexpr std::uint64_t first = hc::pse36_alias_gpa + 0x1C00000, length = 0x400000;
  if (g < first || g - first > length - size) return nullptr;
  return guest_ram(ram, g - hc::pse36_alias_gpa, size);
}
}  // namespace

bool platform::mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
  const std::uint64_t g = a.value();
  if (is_device(g)) {
    out = device_read(*c, g - layout::mmio_device_gpa, size);
  } else if (const std::uint8_t* p = size <= 8 ? pse36_alias(c->vcpu.ram, g, size) : nullptr) {
    out = 0;
    __builtin_memcpy(&out, p, size);
  } else {
    out = size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
    if (++c->checks.unassigned_reads <= 4)
      kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx read(all-ones) size=%u\n", c->cfg().name,
              (unsigned long long)g, size);
  }
  return true;
}
bool platform::mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
  const std::uint64_t g = a.value();
  if (is_device(g)) {
    device_write(*c, g - layout::mmio_device_gpa, size, v);
  } else if (std::uint8_t* p = size <= 8 ? pse36_alias(c->vcpu.ram, g, size) : nullptr) {
    __builtin_memcpy(p, &v, size);
  } else if (++c->checks.unassigned_writes <= 4) {
    kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx write(dropped) size=%u\n", c->cfg().name,
            (unsigned long long)g, size);
  }
  return true;
}
static_assert(hvkit::emulate::platform<platform>);

bool translator::refresh_passthrough_bits(x86::cr0 live) {
  if (c->cfg().stale_role) return false;
  const bool changed = inner.refresh_passthrough_bits(live);
  if (changed) ++c->checks.passthrough_refreshes;
  return changed;
}
static_assert(hvkit::emulate::translator<translator>);

// ---- hypercalls -----------------------------------------------------------------------------
void print_section(context& c, const char* name, std::uint64_t ops, std::uint64_t guest_mismatch,
                   std::uint64_t guest_tsc) {
  const vcpu_state& v = c.vcpu;
  const std::uint64_t total = v.exits.total - v.mark.total - 1;  // minus this mark_end hypercall
  const std::uint64_t cr = v.exits.of(exit_kind::cr_access) - v.mark.of(exit_kind::cr_access);
  // Shadow paging: CR0.WP cannot be guest-owned (the shadow entries encode it), every toggle
  // exits; the shadow MMU's #PF exits (filling the shadow tables) are not the toggles' cost.
  const bool shadow_paging = shadow::enabled();
  const std::uint64_t expect = c.cfg().wp_intercepted || shadow_paging ? ops : 0;
  // SVM under shadow paging also intercepts CR reads (the real CR0.WP is 1): counted apart.
  const std::uint64_t fills = shadow_paging ? v.exits.of(exit_kind::page_fault) - v.mark.of(exit_kind::page_fault) : 0;
  const std::uint64_t reads = v.exits.of(exit_kind::cr_read) - v.mark.of(exit_kind::cr_read);
  const bool pass = cr == expect && total - fills - reads == expect && guest_mismatch == 0;
  const milli per = ratio(cr, ops), tsc_per = ratio(guest_tsc, ops);
  char check[64];
  join(check, name, ".", c.cfg().name);
  result(*c.checks.results, check, pass,
         "toggles=%llu cr_exits=%llu all_exits=%llu exits_per_toggle=%llu.%03llu expected=%llu guest_mismatches=%llu "
         "tsc_per_toggle=%llu.%03llu shadow_fills=%llu cr_read_exits=%llu",
         (unsigned long long)ops, (unsigned long long)cr, (unsigned long long)total, per.whole, per.frac,
         (unsigned long long)expect, (unsigned long long)guest_mismatch, tsc_per.whole, tsc_per.frac,
         (unsigned long long)fills, (unsigned long long)reads);
  if (str_eq(name, "wp_toggle")) {  // kept for the cross-run comparison
    c.checks.wp_seen = true;
    c.checks.wp_toggles = ops;
    c.checks.wp_cr_exits = cr;
    c.checks.wp_mismatch = guest_mismatch;
    c.checks.wp_tsc = guest_tsc;
  }
}

namespace {
bool starts_with_reinject(const char* s) {
  const char* p = "reinject_";
  while (*p && *s == *p) ++s, ++p;
  return *p == 0;
}
}  // namespace

void guest_result(context& c, const guest_regs& r) {
  using enum x86::gpr;
  char name[64], check[80];
  read_guest_string(r[rbx], name, sizeof name);
  join(check, name, ".", c.cfg().name);
  if (c.cfg().stale_role) {
    // Negative control: the guest's verdicts are evidence, not results.
    kprintf("HVKIT INFO run=%s guest_check=%s guest_verdict=%s a=0x%llx b=0x%llx\n", c.cfg().name, name,
            r[rcx] == hc::result_pass ? "PASS" : "FAIL", (unsigned long long)r[rdx], (unsigned long long)r[rsi]);
    if (str_eq(name, "ltr_ro_gdt_wp0_ok")) {
      c.checks.neg_wp0_seen = true;
      c.checks.neg_wp0_result = r[rcx];
    }
  } else if (shadow::enabled() && starts_with_reinject(name)) {
    // The re-injection checks take a guest page out of the second stage (EPT) until the
    // event delivery touches it; without EPT that page is not unmapped and no exit is seen
    // (the guest's own event delivery is still checked: a's vector and count).
    kprintf("HVKIT INFO %s not_applicable=needs_ept a=0x%llx b=0x%llx\n", check, (unsigned long long)r[rdx],
            (unsigned long long)r[rsi]);
  } else if (r[rcx] == hc::result_erratum && (!c.cfg().dt_exiting || c.checks.unmap_untouched_at_report)) {
    // Only runs where the CPU executes the instruction itself may report an erratum, and a
    // re-injection check whose event never reached the hypervisor.
    ++c.checks.results->errata;
    kprintf("HVKIT ERRATUM %s a=0x%llx b=0x%llx\n", check, (unsigned long long)r[rdx], (unsigned long long)r[rsi]);
  } else {
    result(*c.checks.results, check, r[rcx] == hc::result_pass, "a=0x%llx b=0x%llx", (unsigned long long)r[rdx],
           (unsigned long long)r[rsi]);
  }
  c.checks.unmap_untouched_at_report = false;
}

void guest_log(const guest_regs& r) {
  char buf[160];
  read_guest_string(r[x86::gpr::rbx], buf, sizeof buf);
  kprintf("guest: %s\n", buf);
}

void guest_exception(const guest_regs& r) {
  using enum x86::gpr;
  kprintf("HVKIT ERROR guest exception vector=%llu error=0x%llx rip=0x%llx cr2=0x%llx\n", (unsigned long long)r[rbx],
          (unsigned long long)r[rcx], (unsigned long long)r[rdx], (unsigned long long)r[rsi]);
}

// ---- the end of a run -----------------------------------------------------------------------
namespace {
using ull = unsigned long long;

void paging_kinds(const context& c) {
  static const char* const kinds[7] = {"cpl0_read",  "cpl0_write", "cpl0_fetch",         "cpl3_read",
                                       "cpl3_write", "cpl3_fetch", "implicit_supervisor"};
  for (unsigned k = 0; k < 7; ++k)
    kprintf("HVKIT INFO run=%s paging_cases kind=%s ok=%llu fault=%llu\n", c.cfg().name, kinds[k],
            (ull)c.checks.pg_by_kind[k][0], (ull)c.checks.pg_by_kind[k][1]);
}

void erratum_lines(const context& c, bool pkru) {
  const check_counters& k = c.checks;
  if (k.pg_errata_b3) kprintf("HVKIT ERRATUM smap_ac_overrides_implicit_access.%s cases=%llu\n", c.cfg().name, (ull)k.pg_errata_b3);
  if (!pkru) return;
  if (k.pg_errata_b1) kprintf("HVKIT ERRATUM pkru_on_supervisor_addresses.%s cases=%llu\n", c.cfg().name, (ull)k.pg_errata_b1);
  if (k.pg_errata_b2)
    kprintf("HVKIT ERRATUM pkru_ignored_for_supervisor_accesses.%s cases=%llu\n", c.cfg().name, (ull)k.pg_errata_b2);
}
}  // namespace

void report_run(context& c, bool nested_pdptes) {
  const run_config& cfg = c.cfg();
  const check_counters& k = c.checks;
  tally& t = *k.results;
  kprintf("HVKIT INFO run=%s mmio_reads=%llu mmio_writes=%llu unassigned_reads=%llu unassigned_writes=%llu "
          "not_emulable=%llu emulated=%llu\n",
          cfg.name, (ull)k.device_reads, (ull)k.device_writes, (ull)k.unassigned_reads, (ull)k.unassigned_writes,
          (ull)k.not_emulable, (ull)k.emulated);
  kprintf("HVKIT INFO run=%s mmu_refreshes=%llu mmu_resets=%llu wp_passthrough_refreshes=%llu role_rebuilds=%llu\n",
          cfg.name, (ull)k.mmu_refreshes, (ull)k.mmu_resets, (ull)k.passthrough_refreshes, (ull)k.role_rebuilds);
  if (shadow::enabled()) {
    const shadow::stats& st = shadow::counters(c.vcpu);
    kprintf("HVKIT INFO run=%s shadow_faults=%llu fixed=%llu injected=%llu emulated=%llu refused_fixes=%llu "
            "cr_writes=%llu invlpg=%llu cache_rebuilds=%u\n",
            cfg.name, (ull)st.faults, (ull)st.fixed, (ull)st.injected, (ull)st.emulated, (ull)st.refused,
            (ull)st.cr_writes, (ull)st.invlpg, static_cast<unsigned>(shadow::mmu(c.vcpu).rebuilds()));
  }
  if (cfg.guest_flags & hc::cfg_paging_diff) {
    paging_kinds(c);
    result(t, "paging_differential", k.pg_cases >= 10000 && k.pg_mismatches == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu a_set_on_faulting_walk=%llu bochs_b1_errata=%llu "
           "bochs_b2_errata=%llu bochs_b3_errata=%llu qemu_q1_errata=%llu",
           (ull)k.pg_cases, (ull)k.pg_mismatches, (ull)k.pg_cpu_faults, (ull)k.pg_a_on_fault, (ull)k.pg_errata_b1,
           (ull)k.pg_errata_b2, (ull)k.pg_errata_b3, (ull)k.pg_errata_q1);
    erratum_lines(c, !nested_pdptes);
  }
  if (cfg.guest_flags & hc::cfg_guest32) {
    paging_kinds(c);
    result(t, "paging_differential_32bit", k.pg_mode_cases[1] >= 5000 && k.pg_mode_mismatches[1] == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu ok_4m_pages=%llu ok_pse36_above_4g=%llu bochs_b3_errata=%llu",
           (ull)k.pg_mode_cases[1], (ull)k.pg_mode_mismatches[1], (ull)k.pg_mode_faults[1], (ull)k.pg_mode_large_ok[1],
           (ull)k.pg_pse36_ok, (ull)k.pg_mode_b3[1]);
    result(t, "paging_differential_pae", k.pg_mode_cases[2] >= 5000 && k.pg_mode_mismatches[2] == 0,
           "cases=%llu mismatches=%llu cpu_faults=%llu ok_2m_pages=%llu bochs_b3_errata=%llu", (ull)k.pg_mode_cases[2],
           (ull)k.pg_mode_mismatches[2], (ull)k.pg_mode_faults[2], (ull)k.pg_mode_large_ok[2], (ull)k.pg_mode_b3[2]);
    if (nested_pdptes) {
      // With nested paging MOV to CR3 loads no PDPTEs (no #GP); a reserved bit is the walk's #PF.
      result(t, "pae_pdpte_load",
             k.pdpte_loads >= 5000 && k.pdpte_gp == 0 && k.pdpte_walk_rsv > 0 && k.pdpte_mismatches == 0,
             "loads=%llu gp=%llu reserved_pdpte_walk_pf=%llu mismatches=%llu qemu_q2_errata=%llu qemu_q3_errata=%llu",
             (ull)k.pdpte_loads, (ull)k.pdpte_gp, (ull)k.pdpte_walk_rsv, (ull)k.pdpte_mismatches,
             (ull)k.pdpte_errata_q2, (ull)k.pdpte_errata_q3);
    } else {
      result(t, "pae_pdpte_load",
             k.pdpte_loads >= 5000 && k.pdpte_gp > 0 && k.pdpte_mismatches == 0 && k.pdpte_register_mismatches == 0,
             "loads=%llu gp=%llu mismatches=%llu vmcs_pdpte_register_mismatches=%llu", (ull)k.pdpte_loads,
             (ull)k.pdpte_gp, (ull)k.pdpte_mismatches, (ull)k.pdpte_register_mismatches);
      if (k.pg_errata_b3) erratum_lines(c, false);
    }
    kprintf("HVKIT INFO run=%s a_set_on_faulting_walk=%llu\n", cfg.name, (ull)k.pg_a_on_fault);
  }
  char check[48];
  if (cfg.cr3_exiting) {
    // The guest's MOV to CR3 with a reserved bit exited and the architectural check refused it.
    join(check, "cr3_write_gp_injected.", cfg.name);
    result(t, check, k.cr_gp_injected >= 1 && c.vcpu.exits.of(exit_kind::cr_access) > 0, "gp_injected=%llu",
           (ull)k.cr_gp_injected);
  }
  if (cfg.stale_role && shadow::enabled()) {
    // The bug needs CR0.WP guest-owned (toggles that never exit); shadow paging intercepts
    // every toggle, so the stale role cannot arise.
    kprintf("HVKIT INFO stale_wp_role_negative_control not_applicable=wp_always_intercepted_under_shadow "
            "guest_ltr_wp0_verdict=%s\n", k.neg_wp0_seen ? (k.neg_wp0_result == hc::result_pass ? "PASS" : "FAIL") : "missing");
  } else if (cfg.stale_role) {
    result(t, "stale_wp_role_negative_control", k.neg_wp0_seen && k.neg_wp0_result == hc::result_fail && k.stale_wrong_faults > 0,
           "guest_ltr_wp0_verdict=%s wrong_pf_0x3_injected=%llu",
           k.neg_wp0_seen ? (k.neg_wp0_result == hc::result_pass ? "PASS" : "FAIL") : "missing",
           (ull)k.stale_wrong_faults);
  } else if (cfg.dt_exiting && !(cfg.guest_flags & (hc::cfg_quick | hc::cfg_spin))) {
    // WP toggles that exit keep the role in sync at the exit (refresh only, never a reset);
    // toggles that do not exit are caught by the passthrough refresh at the next emulated
    // access (the two LTRs run with different WP values).
    // Shadow paging: WP is in the shadow pages' role, every toggle exits and resets the
    // shadow context (a cached root per value), never a passthrough refresh.
    const bool pass = shadow::enabled() ? k.mmu_resets >= 11000 && k.passthrough_refreshes == 0
                      : k.mmu_resets == 0 && (cfg.wp_intercepted ? k.mmu_refreshes >= 11000 && k.passthrough_refreshes == 0
                                                                 : k.mmu_refreshes == 0 && k.passthrough_refreshes >= 2);
    join(check, "mmu_wp_sync.", cfg.name);
    result(t, check, pass, "cr_exit_refreshes=%llu resets=%llu passthrough_refreshes=%llu", (ull)k.mmu_refreshes,
           (ull)k.mmu_resets, (ull)k.passthrough_refreshes);
  }
}

bool report_status(context& c) {
  const run_config& cfg = c.cfg();
  const bool ok = c.vcpu.status == cfg.expected;
  char check[48];
  join(check, "run.", cfg.name);
  result(*c.checks.results, check, ok, "status=%s expected=%s", status_name(c.vcpu.status), status_name(cfg.expected));
  const bool intact = *reinterpret_cast<const volatile std::uint32_t*>(layout::hypervisor_image_gpa) == 0x1BADB002;
  if (!intact) result(*c.checks.results, "hypervisor_memory_intact", false, "run=%s", cfg.name);
  return ok;
}

}  // namespace hv::core
