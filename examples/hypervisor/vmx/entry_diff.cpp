// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the CPU as the oracle for the VM-entry checks (issue 18).
//
// Start from the hypervisor's own valid VMCS (setup_vmcs), mutate one to three fields at
// random (fixed seed), ask hvkit::vmx::check_vm_entry for its verdict, execute VMLAUNCH and
// compare what the CPU did: success, VMfailValid with its error number, or a VM-entry
// failure exit (reason 33/34) with its exit qualification. A successful entry comes back at
// once: the VMX-preemption timer is active with value 0, so the VM exit happens before the
// guest executes an instruction (SDM Vol. 3C 26.5.1). Each case runs on a freshly cleared
// VMCS (VMCLEAR + VMPTRLD, every field restored from the baseline).
//
// Classification of a case:
//   agree       the CPU did what hvkit said;
//   erratum     the CPU deviates from the SDM in a known, documented way (docs/hypervisor.md,
//               "Bochs errata of the VM-entry checks"): hvkit's verdict with that rule
//               removed (or with Bochs' extra check added) is what the CPU did;
//   kvm erratum under Linux KVM (CPUID leaf 0x40000000 "KVMKVMKVM"): what KVM's nested VM
//               entry on Bochs did, explained by a model of KVM's checks followed by the
//               Bochs model's (docs/hypervisor.md, "KVM as a second CPU model"); counted apart;
//   mismatch    anything else (the run fails if there is one).
// Mutations of the host state are invalid by construction (the host never runs on a
// mutated host state): a case whose host mutation hvkit does not refuse is not executed
// and counted as host_unsafe (the run fails if there is one).
//
// Also here: print_vm_entry_diagnosis(), what the hypervisor prints when a VM entry fails.
#include "entry_diff.hpp"

extern "C" {
int entry_diff_launch();
void entry_diff_exit();
}
static_assert(hvkit::vmx::fields::host_rsp.encoding == 0x6C14);  // the assembly's HOST_RSP encoding

// VMLAUNCH with HOST_RSP = this stack; a VM exit (HOST_RIP = entry_diff_exit) returns 0,
// VMfailInvalid 1, VMfailValid 2. The guest's general-purpose registers are whatever the
// host had; the callee-saved ones are restored from the stack on either path.
asm(R"(
  .text
  .globl entry_diff_launch
entry_diff_launch:
  push %rbp
  push %rbx
  push %r12
  push %r13
  push %r14
  push %r15
  sub $8, %rsp
  mov $0x6C14, %eax
  vmwrite %rsp, %rax
  jbe 1f
  vmlaunch
1:
  mov $2, %eax
  jz 2f
  mov $1, %eax
2:
  add $8, %rsp
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbx
  pop %rbp
  ret
  .globl entry_diff_exit
entry_diff_exit:
  xor %eax, %eax
  jmp 2b
)");

namespace hv {

namespace entry_detail {

constexpr std::uint32_t case_count = 12000;
constexpr std::uint64_t seed = 0x1857'e47a'd1ff'0018ull;

// ---- the baseline VMCS ----------------------------------------------------------------
/// The valid VMCS every case starts from: each readable field's value (entry_diff_run's).
struct baseline {
  std::uint64_t value[v::field_count];
  bool ok[v::field_count];
};

std::uint64_t rd(std::uint32_t enc) {
  v::hw::current_vmcs c;
  auto r = c.read(enc);
  return r ? r.value() : 0;
}
void wr(std::uint32_t enc, std::uint64_t val) {
  v::hw::current_vmcs c;
  static_cast<void>(c.write(enc, val));
}

void capture_baseline(baseline& b) {
  for (std::size_t i = 0; i < v::field_count; ++i) {
    const auto& f = v::field_table[i];
    b.ok[i] = false;
    if (f.declared_type == v::field_type::exit_info) continue;
    v::hw::current_vmcs c;
    auto r = c.read(f.encoding);
    if (!r) continue;
    b.ok[i] = true;
    b.value[i] = r.value();
  }
}
bool fresh_vmcs(const vmx_host& h, const baseline& b) {
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(h.vmcs)};
  if (!v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs)) return false;
  for (std::size_t i = 0; i < v::field_count; ++i)
    if (b.ok[i]) wr(v::field_table[i].encoding, b.value[i]);
  return true;
}

// ---- what the CPU did -------------------------------------------------------------------
cpu_outcome launch() {
  const int rc = entry_diff_launch();
  cpu_outcome o{};
  if (rc == 1) {
    o.fail_invalid = true;
  } else if (rc == 2) {
    o.outcome = v::vm_entry_outcome::vm_fail_valid;
    o.error = static_cast<std::uint32_t>(vmread(fields::vm_instruction_error));
  } else {
    o.exit_reason = static_cast<std::uint32_t>(vmread(fields::exit_reason));
    if (o.exit_reason & 0x8000'0000u) {
      o.outcome = v::vm_entry_outcome::entry_failure;
      o.qualification = vmread(fields::exit_qualification);
    }
  }
  return o;
}
bool same(const cpu_outcome& c, const v::vm_entry_verdict& p) {
  if (c.fail_invalid || c.outcome != p.outcome) return false;
  switch (c.outcome) {
    case v::vm_entry_outcome::success: return true;
    case v::vm_entry_outcome::vm_fail_valid: return c.error == static_cast<std::uint32_t>(p.error);
    case v::vm_entry_outcome::entry_failure: return c.exit_reason == p.exit_reason && c.qualification == p.exit_qualification;
  }
  return false;
}
void print_outcome(v::vm_entry_outcome o, std::uint32_t error, std::uint32_t reason, std::uint64_t q) {
  switch (o) {
    case v::vm_entry_outcome::success: kprintf("success"); break;
    case v::vm_entry_outcome::vm_fail_valid: kprintf("VMfailValid(%u)", error); break;
    case v::vm_entry_outcome::entry_failure:
      kprintf("exit(%u,qual=%llu)", reason & 0xffffu, (unsigned long long)q);
      break;
  }
}

// ---- the processor for hvkit ------------------------------------------------------------
bool msr_write_faults(std::uint32_t index, std::uint64_t value) {
  // WRMSR #GP(0) for a non-canonical IA32_SYSENTER_ESP/EIP or IA32_KERNEL_GS_BASE, and for
  // an MSR the processor does not have (SDM Vol. 4; Bochs runs with ignore_bad_msrs=0).
  const bool canonical = static_cast<std::uint64_t>(static_cast<std::int64_t>(value << 16) >> 16) == value;
  if (index == 0x175 || index == 0x176 || index == 0xc000'0102u) return !canonical;
  if (index == 0x174) return false;
  return true;  // every other index this run uses is refused by an earlier rule or is unknown
}
v::vm_entry_env make_env(const vmx_host& h) {
  v::vm_entry_env e{};
  e.caps = h.caps;
  e.maxphyaddr = core::host_maxphyaddr();  // the processor's: VM entry checks host-physical addresses
  const cpuid_regs l7 = cpuid(7, 0);
  e.linear = ((l7.ecx >> 16) & 1) ? x86::linear_width::la57 : x86::linear_width::la48;
  e.sgx = (l7.ebx >> 2) & 1;
  e.rtm = (l7.ebx >> 11) & 1;
  e.in_ia32e_mode = true;
  e.msr_write_faults = msr_write_faults;
  return e;
}
/// Host physical memory the checks may read: [1 MiB, 128 MiB), identity-mapped.
hvkit::paging::flat_view host_memory() {
  return {reinterpret_cast<const std::uint8_t*>(std::uintptr_t{0x100000}), 127u << 20, x86::gpa{0x100000}};
}

// ---- the run --------------------------------------------------------------------------
struct counts {
  std::uint64_t cases, executed, agree, errata, kvm_errata, mismatches, host_unsafe, not_executed;
  std::uint64_t bochs_panic_injection;  // not launched: Bochs panics (type 7 without MTF)
  std::uint64_t kvm_model_off_on_agree; // agreeing cases the full KVM model gets wrong
  std::uint64_t by_outcome[4];  // CPU: success, VMfail 7, VMfail 8, exit 33/34
  std::uint64_t multi_violation;
  // The targeted cases of issue 25, per probe_kind: executed, agreeing, explained by an erratum.
  std::uint64_t probe_executed[probe_count], probe_agree[probe_count], probe_errata[probe_count];
  /// The cases each Bochs and KVM erratum explained.
  std::uint64_t erratum_cases[erratum_count], kvm_erratum_cases[kvm_erratum_count];
  /// How often each rule decided hvkit's verdict (first failing check), by rule position.
  std::uint32_t decided[static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count)];
};
constexpr unsigned rule_total = static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count);
template <class F>
void for_each_rule_info(F&& f) {
  unsigned i = 0;
  v::for_each_vm_entry_rule([&](const v::vm_entry_rule& r) { f(i++, r.info); });
  for (const auto& r : v::entry_rules::msr_load_rules) f(i++, r.info);
}
void count_decided(std::uint32_t (&decided)[rule_total], const v::vm_entry_rule_info* info) {
  if (!info) return;
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (&r == info) ++decided[i];
  });
}


void print_mutations(const mutation_log& mlog) {
  for (unsigned i = 0; i < mlog.n; ++i) {
    const auto* f = v::find_field(mlog.enc[i]);
    kprintf(" %s=0x%llx", f ? f->name : "?", (unsigned long long)mlog.val[i]);
  }
}
/// Counts a case an erratum explains; its first case is printed whole (CPU, hvkit's rule,
/// the mutations).
void note_erratum(std::uint64_t& cases, const char* name, const char* kind, unsigned n, const cpu_outcome& o,
                  const v::vm_entry_verdict& pred, const mutation_log& mlog) {
  if (cases++ != 0) return;
  kprintf("HVKIT INFO entry_diff %s=%s first_case=%u cpu=", kind, name, n);
  print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
  kprintf(" hvkit=%s:", pred.rule ? pred.rule->name : "-");
  print_mutations(mlog);
  kprintf("\n");
}

}  // namespace entry_detail

using namespace entry_detail;

void print_vm_entry_diagnosis(const vmx_host& h, const char* context) {
  v::hw::current_vmcs vmcs;
  const auto r = v::check_vm_entry(vmcs, make_env(h), host_memory());
  if (!r) {
    kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=vmread_failed\n", context);
    return;
  }
  const v::vm_entry_verdict& d = r.value();
  if (d.ok()) {
    kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=no_check_fails (a check hvkit does not model)\n", context);
    return;
  }
  const auto* f1 = v::find_field(d.hit.field);
  const auto* f2 = v::find_field(d.hit.field2);
  kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=", context);
  print_outcome(d.outcome, static_cast<std::uint32_t>(d.error), d.exit_reason, d.exit_qualification);
  kprintf(" check=%s sdm=%s %s=0x%llx", d.rule->name, d.rule->section, f1 ? f1->name : "field",
          (unsigned long long)d.hit.value);
  if (f2) kprintf(" %s=0x%llx", f2->name, (unsigned long long)d.hit.value2);
  if (d.rule->phase == v::vm_entry_phase::msr_load)
    kprintf(" msr_index=0x%x msr_value=0x%llx", d.msr.index, (unsigned long long)d.msr.value);
  kprintf("\n");
}

/// Linux KVM's hypervisor CPUID signature (leaf 0x40000000: "KVMKVMKVM\0\0\0").
bool running_under_kvm() {
  if (((cpuid(1).ecx >> 31) & 1) == 0) return false;  // no hypervisor present
  const cpuid_regs r = cpuid(0x40000000);
  return r.ebx == 0x4b4d564bu && r.ecx == 0x564b4d56u && r.edx == 0x4du;
}

bool entry_diff_run(core::tally& t, const vmx_host& h, core::page_pool& pool, const core::guest_cpu& cpu) {
  static constexpr run_config cfg{"entry_diff", false, false, 0, run_status::done};
  run_state vs{};  // the VMCS set-up's vCPU; no guest runs (every case is a failed entry)
  vs.cfg = &cfg;
  vs.results = &t;
  vs.cpu = &cpu;
  vs.status = run_status::running;
  // The run's pages (once per boot), random numbers, baseline and counts: this function's,
  // handed down.
  const diff_pages pages{pool.take_page(), pool.take_page(), pool.take_table(), pool.take_table()};
  diff_rng rng{seed};
  const mutation_env menv{rng, pages, h.caps};
  baseline base{};
  kprintf("HVKIT RUN entry_diff begin cases=%u seed=0x%llx\n", case_count, (unsigned long long)seed);
  hc::guest_header profile_header{};
  const hc::guest_header* g = load_guest(t, profile_header, false);
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(h.vmcs)};
  *reinterpret_cast<std::uint32_t*>(h.vmcs) = h.caps.revision_id();
  if (!g || !v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs) || !setup_vmcs(h, *g, vs)) {
    result(t, "vm_entry_differential", false, "reason=setup_failed");
    return false;
  }
  // Come back at once: VMX-preemption timer active with value 0.
  vmwrite(fields::pin_based_controls, vmread(fields::pin_based_controls) | v::pin_based::activate_preemption_timer.raw());
  vmwrite(fields::vmx_preemption_timer_value, 0);
  vmwrite(fields::host_rip, reinterpret_cast<std::uint64_t>(&entry_diff_exit));
  *reinterpret_cast<std::uint32_t*>(pages.link_page) = h.caps.revision_id();
  // The baseline guest has RFLAGS.IF = 1 (the PICs masked, so nothing is delivered to it):
  // Linux KVM emulates the timer for a guest hypervisor; with a value of 0 it forces the
  // exit with a self-IPI right after entering the guest, and a Bochs 2.7 erratum blocks that
  // host interrupt while the guest runs with IF = 0 (docs/hypervisor.md, "External
  // interrupts stay blocked after VM entry"): under KVM on Bochs the guest then ran to its
  // first VMCALL. Cases that clear IF again may run guest code before exiting there; any
  // exit counts as a successful entry.
  outb(0x21, 0xFF);
  outb(0xA1, 0xFF);
  vmwrite(fields::guest_rflags, vmread(fields::guest_rflags) | x86::rflags::if_.raw());
  capture_baseline(base);
  const v::vm_entry_env env = make_env(h);
  const auto mem = host_memory();
  const bool under_kvm = running_under_kvm();
  kprintf("HVKIT INFO entry_diff cpu_model=%s\n", under_kvm ? "kvm_on_bochs" : "bochs");

  // The baseline itself enters.
  {
    static_cast<void>(fresh_vmcs(h, base));
    v::hw::current_vmcs c;
    const auto r = v::check_vm_entry(c, env, mem);
    const cpu_outcome o = launch();
    const bool ok = r && r.value().ok() && !o.fail_invalid && o.outcome == v::vm_entry_outcome::success &&
                    (o.exit_reason & 0xffff) == static_cast<std::uint32_t>(v::exit_reason::preemption_timer);
    if (!ok) {
      result(t, "vm_entry_differential", false, "reason=baseline_does_not_enter exit_reason=0x%x error=%u", o.exit_reason,
             o.error);
      return false;
    }
  }

  counts cnt{};  // the run's counts and each case's mutations: this function's, passed down
  unsigned printed = 0;
  for (std::uint32_t n = 0; n < case_count; ++n) {
    if (!fresh_vmcs(h, base)) {
      result(t, "vm_entry_differential", false, "reason=vmclear_failed case=%u", n);
      return false;
    }
    mutation_log mlog{};
    const unsigned k = 1 + (rng.below(10) < 6 ? 0 : rng.below(10) < 7 ? 1 : 2);
    for (unsigned i = 0; i < k; ++i) mutate_once(menv, mlog);
    ++cnt.cases;

    v::hw::current_vmcs c;
    const auto st = v::read_vm_entry_state(c, mem);
    if (!st) {
      result(t, "vm_entry_differential", false, "reason=vmread_failed case=%u", n);
      return false;
    }
    const v::vm_entry_verdict pred = v::check_vm_entry_state(st.value(), env).ok()
                                         ? v::check_msr_load_area(st.value().entry_msr_load_address,
                                                                  st.value().entry_msr_load_count, env, mem)
                                         : v::check_vm_entry_state(st.value(), env);
    unsigned nviol = 0;
    v::for_each_vm_entry_violation(st.value(), env, [&](const v::vm_entry_rule&, const v::vm_entry_hit&) { ++nviol; });
    if (nviol > 1) ++cnt.multi_violation;
    // Never run the host on a mutated host state, never wait for a SIPI.
    if (mlog.host && !(pred.outcome == v::vm_entry_outcome::vm_fail_valid &&
                       pred.error == v::vm_instruction_error::entry_invalid_host_state)) {
      const bool controls_first = pred.outcome == v::vm_entry_outcome::vm_fail_valid;
      if (!controls_first) {
        ++cnt.host_unsafe;
        if (printed++ < 40) {
          kprintf("HVKIT INFO entry_diff host_unsafe case=%u hvkit=%s:", n, pred.rule ? pred.rule->name : "success");
          print_mutations(mlog);
          kprintf("\n");
        }
        continue;
      }
    }
    // Bochs accepts an IA-32e mode guest without paging (erratum) and panics when that
    // guest also has CR0.PE = 0 ("EFER.LMA is set when CR0.PE=0"): never launch one.
    const bool bochs_panics = st.value().ia32e_guest() && !st.value().guest_cr0.test(x86::cr0::pe) &&
                              pred.outcome != v::vm_entry_outcome::vm_fail_valid;
    // Bochs 2.7 without the monitor trap flag (corei7_skylake_x) does not refuse an injected
    // event of type 7 (other event, reserved without MTF: SDM 27.2.1.3) and panics when it
    // injects it ("VMENTER: unsupported event injection type 7"): never launch one on Bochs.
    // KVM refuses it itself (VMfailValid 7), so under KVM it is launched.
    const std::uint32_t inj = st.value().entry_interruption_info;
    const bool mtf = h.caps.primary_caps().may_be_one & v::primary_proc_based::monitor_trap_flag.raw();
    const bool bochs_panics_injection = !under_kvm && !mtf && (inj & 0x8000'0000u) && ((inj >> 8) & 7) == 7;
    if (bochs_panics_injection) {
      ++cnt.not_executed;
      ++cnt.bochs_panic_injection;
      continue;
    }
    if ((mlog.activity_risk && pred.outcome != v::vm_entry_outcome::vm_fail_valid) || bochs_panics) {
      ++cnt.not_executed;
      continue;
    }
    const cpu_outcome o = launch();
    ++cnt.executed;
    ++cnt.probe_executed[mlog.probe];
    count_decided(cnt.decided, pred.rule);
    cnt.by_outcome[o.outcome == v::vm_entry_outcome::success         ? 0
                   : o.outcome == v::vm_entry_outcome::vm_fail_valid ? (o.error == 7 ? 1 : 2)
                                                                     : 3]++;
    const diff_case dc{st.value(), env, mem, pred, o, vmread(fields::tsc_multiplier)};
    if (same(o, pred)) {
      ++cnt.agree;
      ++cnt.probe_agree[mlog.probe];
      // How faithful the KVM model is: where KVM did what hvkit said, the model with every
      // KVM erratum on should say so too (reported, not a failure: the errata are narrow
      // predicates, but their composition is an inference from the outcomes).
      if (under_kvm && !same(o, kvm_model(dc, (1u << kvm_erratum_count) - 1))) {
        if (cnt.kvm_model_off_on_agree++ < 40) {
          kprintf("HVKIT INFO entry_diff kvm_model_differs case=%u hvkit=%s errata_alone:", n,
                  pred.rule ? pred.rule->name : "success");
          for (unsigned e = 0; e < kvm_erratum_count; ++e)
            if (!same(o, kvm_model(dc, 1u << e))) kprintf(" %s", kvm_erratum_names[e]);
          kprintf(" model=");
          const v::vm_entry_verdict m = kvm_model(dc, (1u << kvm_erratum_count) - 1);
          print_outcome(m.outcome, static_cast<std::uint32_t>(m.error), m.exit_reason, m.exit_qualification);
          kprintf(":");
          print_mutations(mlog);
          kprintf("\n");
        }
      }
      continue;
    }
    // An erratum?
    const unsigned e = explain(dc);
    if (e < erratum_count) {
      note_erratum(cnt.erratum_cases[e], erratum_names[e], "erratum", n, o, pred, mlog);
      ++cnt.errata;
      ++cnt.probe_errata[mlog.probe];
      continue;
    }
    const unsigned ke = under_kvm ? explain_kvm(dc) : kvm_erratum_count;
    if (ke < kvm_erratum_count) {
      note_erratum(cnt.kvm_erratum_cases[ke], kvm_erratum_names[ke], "kvm_erratum", n, o, pred, mlog);
      ++cnt.kvm_errata;
      ++cnt.probe_errata[mlog.probe];
      continue;
    }
    ++cnt.mismatches;
    if (printed++ < (under_kvm ? 400u : 60u)) {
      kprintf("HVKIT INFO entry_diff mismatch case=%u hvkit=", n);
      print_outcome(pred.outcome, static_cast<std::uint32_t>(pred.error), pred.exit_reason, pred.exit_qualification);
      kprintf(" rule=%s cpu=%s", pred.rule ? pred.rule->name : "-", o.fail_invalid ? "VMfailInvalid " : "");
      print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
      kprintf(" violations=%u:", nviol);
      print_mutations(mlog);
      if (under_kvm) {
        kprintf(" rules:");
        v::for_each_vm_entry_violation(st.value(), env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit&) {
          kprintf(" %s", r.info.name);
        });
        const auto& sv = st.value();
        if (sv.entry_msr_load_count)
          for (unsigned i = 0; i < sv.entry_msr_load_count && i < 3; ++i)
            kprintf(" msr[%u]=0x%llx:0x%llx", i, (unsigned long long)pages.msr_page[2 * i],
                    (unsigned long long)pages.msr_page[2 * i + 1]);
      }
      kprintf("\n");
    }
  }

  const bool pass = cnt.executed >= 10000 && cnt.mismatches == 0 && cnt.host_unsafe == 0;
  result(t, "vm_entry_differential", pass,
         "cases=%llu executed=%llu agree=%llu errata=%llu kvm_errata=%llu mismatches=%llu host_unsafe=%llu not_executed=%llu "
         "cpu_success=%llu cpu_vmfail7=%llu cpu_vmfail8=%llu cpu_entry_failure=%llu multi_violation=%llu rules=%u "
         "not_launched_type7=%llu model=%s",
         (unsigned long long)cnt.cases, (unsigned long long)cnt.executed, (unsigned long long)cnt.agree,
         (unsigned long long)cnt.errata, (unsigned long long)cnt.kvm_errata, (unsigned long long)cnt.mismatches, (unsigned long long)cnt.host_unsafe,
         (unsigned long long)cnt.not_executed, (unsigned long long)cnt.by_outcome[0],
         (unsigned long long)cnt.by_outcome[1], (unsigned long long)cnt.by_outcome[2],
         (unsigned long long)cnt.by_outcome[3], (unsigned long long)cnt.multi_violation,
         static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count),
         (unsigned long long)cnt.bochs_panic_injection, under_kvm ? "kvm_on_bochs" : "bochs");
  for (unsigned k = probe_rtm; k < probe_count; ++k)
    kprintf("HVKIT INFO entry_diff probe=%s executed=%llu agree=%llu errata=%llu\n", probe_name[k],
            (unsigned long long)cnt.probe_executed[k], (unsigned long long)cnt.probe_agree[k],
            (unsigned long long)cnt.probe_errata[k]);
  unsigned covered = 0;
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info&) { covered += cnt.decided[i] ? 1 : 0; });
  if (under_kvm)
    kprintf("HVKIT INFO entry_diff kvm_model_check agreeing_cases=%llu full_kvm_model_differs=%llu\n",
            (unsigned long long)cnt.agree, (unsigned long long)cnt.kvm_model_off_on_agree);
  kprintf("HVKIT INFO entry_diff rules_deciding_a_case=%u of %u; never:", covered, rule_total);
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (!cnt.decided[i]) kprintf(" %s", r.name);
  });
  kprintf("\n");
  for (unsigned i = 0; i < erratum_count; ++i)
    if (cnt.erratum_cases[i])
      kprintf("HVKIT ERRATUM vm_entry_%s.entry_diff cases=%llu\n", erratum_names[i], (unsigned long long)cnt.erratum_cases[i]);
  for (unsigned i = 0; i < kvm_erratum_count; ++i)
    if (cnt.kvm_erratum_cases[i])
      kprintf("HVKIT ERRATUM vm_entry_kvm_%s.entry_diff cases=%llu\n", kvm_erratum_names[i],
              (unsigned long long)cnt.kvm_erratum_cases[i]);

  // A deliberately broken guest state and host state: what the hypervisor prints.
  static_cast<void>(fresh_vmcs(h, base));
  vmwrite(fields::guest_tr_access_rights, 0x89);  // an available (not busy) TSS
  const cpu_outcome g1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=guest_tr_type cpu_exit_reason=0x%x qualification=%llu\n", g1.exit_reason,
          (unsigned long long)g1.qualification);
  print_vm_entry_diagnosis(h, "demo_guest_tr_not_busy");
  static_cast<void>(fresh_vmcs(h, base));
  vmwrite(fields::host_tr_selector, 0);
  const cpu_outcome h1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=host_tr_selector cpu_error=%u\n", h1.error);
  print_vm_entry_diagnosis(h, "demo_host_tr_null");

  kprintf("HVKIT RUN entry_diff end status=done exits=0 host_tsc=0\n");
  return pass;
}

}  // namespace hv

