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

alignas(4096) std::uint8_t link_page[4096];      // a VMCS-shaped page for the link pointer
alignas(4096) std::uint8_t vapic_page[4096];     // virtual-APIC page
alignas(4096) std::uint64_t msr_page[512];       // VM-entry MSR-load area
alignas(4096) std::uint64_t exit_msr_page[512];  // VM-exit MSR-store/load area

constexpr std::uint32_t case_count = 12000;
constexpr std::uint64_t seed = 0x1857'e47a'd1ff'0018ull;

std::uint64_t rng_state;
std::uint64_t rnd() {
  std::uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
unsigned rnd_below(unsigned n) { return static_cast<unsigned>(rnd() % n); }

// ---- the baseline VMCS ----------------------------------------------------------------
std::uint64_t base_value[v::field_count];
bool base_ok[v::field_count];

std::uint64_t rd(std::uint32_t enc) {
  v::hw::current_vmcs c;
  auto r = c.read(enc);
  return r ? r.value() : 0;
}
void wr(std::uint32_t enc, std::uint64_t val) {
  v::hw::current_vmcs c;
  static_cast<void>(c.write(enc, val));
}

void capture_baseline() {
  for (std::size_t i = 0; i < v::field_count; ++i) {
    const auto& f = v::field_table[i];
    base_ok[i] = false;
    if (f.declared_type == v::field_type::exit_info) continue;
    v::hw::current_vmcs c;
    auto r = c.read(f.encoding);
    if (!r) continue;
    base_ok[i] = true;
    base_value[i] = r.value();
  }
}
bool fresh_vmcs() {
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(vmcs_region)};
  if (!v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs)) return false;
  for (std::size_t i = 0; i < v::field_count; ++i)
    if (base_ok[i]) wr(v::field_table[i].encoding, base_value[i]);
  return true;
}

// ---- what the CPU did -------------------------------------------------------------------
struct cpu_outcome {
  v::vm_entry_outcome outcome = v::vm_entry_outcome::success;
  std::uint32_t error = 0, exit_reason = 0;
  std::uint64_t qualification = 0;
  bool fail_invalid = false;
};
cpu_outcome launch() {
  const int rc = entry_diff_launch();
  cpu_outcome o{};
  if (rc == 1) {
    o.fail_invalid = true;
  } else if (rc == 2) {
    o.outcome = v::vm_entry_outcome::vm_fail_valid;
    o.error = static_cast<std::uint32_t>(rd(fields::vm_instruction_error.encoding));
  } else {
    o.exit_reason = static_cast<std::uint32_t>(rd(fields::exit_reason.encoding));
    if (o.exit_reason & 0x8000'0000u) {
      o.outcome = v::vm_entry_outcome::entry_failure;
      o.qualification = rd(fields::exit_qualification.encoding);
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
v::vm_entry_env make_env() {
  v::vm_entry_env e{};
  e.caps = vcaps;
  e.maxphyaddr = (cpuid(0x80000000).eax >= 0x80000008) ? (cpuid(0x80000008).eax & 0xff) : 36;
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

// ---- Bochs errata (docs/hypervisor.md) -----------------------------------------------------------
// Bochs as a model: hvkit's rules, less the checks Bochs does not make, plus the checks it
// makes that the SDM does not list, in Bochs' order where it differs. A case hvkit and the
// CPU disagree on is explained when the model with the errata switched on says what the
// CPU did: by one erratum alone if one suffices (it gets the count), else by all together
// (the first that changes hvkit's verdict gets it).
enum erratum_id : unsigned {
  e_rip_canonical,     // 27.3.1.4: RIP canonical (IA-32e guest, CS.L = 1) not checked
  e_debugctl,          // 27.3.1.1: IA32_DEBUGCTL reserved bits not checked
  // 27.2.1.3: deliver-error-code by the older SDM text ("unrestricted guest" 0 counts as CR0.PE
  // 1); before e_error_code_bit, which (Bochs with CET checks no error code at all) explains
  // such cases too, so that they are counted here
  e_ec_older_wording,
  e_error_code_bit,    // 27.2.1.3: deliver-error-code must be 0 for non-exception events: not checked
  e_pending_bs,        // 27.3.1.5: pending-debug BS consistency not checked
  e_activity_event,    // 27.3.1.5: events the activity state blocks not refused
  e_pending_high,      // 27.3.1.5: pending-debug bits 63:32 not checked
  e_cs_dpl,            // 27.3.1.2: CS.DPL compared with CS.RPL, not SS.DPL (differs with unrestricted guest)
  e_entry_to_smm,      // 27.2.1.3: "entry to SMM" refused by a guest-state check (exit 33), not error 7
  e_tsc_multiplier,    // Bochs: "use TSC scaling" with TSC multiplier 0 refused (error 7); no SDM check
  e_link_first,        // order: the VMCS link pointer checked before the rest of 27.3.1.5 (and the IF check of 27.3.1.4)
  e_nmi_sti_qual,      // 27.3.1.5 / 28.2.1: NMI injection with STI blocking: qualification 0, not 3
  e_ia32e_no_paging,   // 27.3.1.1: an IA-32e mode guest needs CR0.PG = 1 (unrestricted guest): not checked
  e_vnmi_blocking,     // 27.3.1.5: NMI blocking with an injected NMI under virtual NMIs: not checked
  e_vm_real_mode,      // 27.3.1.4: RFLAGS.VM needs CR0.PE = 1 (unrestricted guest): not checked
  erratum_count
};
struct erratum_info {
  const char* name;
  std::uint64_t cases;
};
erratum_info errata[erratum_count] = {
    {"guest_rip_not_checked_canonical", 0},       {"guest_debugctl_reserved_bits_not_checked", 0},
    {"error_code_rule_older_wording", 0},
    {"injection_error_code_bit_not_checked", 0},  {"pending_debug_bs_not_checked", 0},
    {"injected_event_vs_activity_not_checked", 0}, {"pending_debug_bits_63_32_not_checked", 0},
    {"cs_dpl_checked_against_cs_rpl", 0},         {"entry_to_smm_checked_as_guest_state", 0},
    {"tsc_multiplier_zero_refused", 0},           {"vmcs_link_pointer_checked_first", 0},
    {"nmi_injection_sti_blocking_qualification_0", 0},
    {"ia32e_guest_without_paging_not_checked", 0},
    {"nmi_blocking_with_virtual_nmi_injection_not_checked", 0},
    {"rflags_vm_in_real_mode_not_checked", 0},
};

struct diff_case {
  const v::vm_entry_state& s;
  const v::vm_entry_env& env;
  const hvkit::paging::flat_view& mem;
  const v::vm_entry_verdict& pred;
  const cpu_outcome& cpu;
  std::uint64_t tsc_multiplier;
};

bool named(const v::vm_entry_rule& r, const char* n) { return str_eq(r.info.name, n); }
/// Bochs' CS.DPL rule: non-conforming code DPL = CS.RPL, conforming DPL <= CS.RPL, type 3
/// (unrestricted guest) DPL 0.
bool bochs_cs_dpl_ok(const v::vm_entry_state& s) {
  const std::uint32_t ar = s.seg[1].access_rights;
  const unsigned t = ar & 0xf, dpl = (ar >> 5) & 3, rpl = s.seg[1].selector & 3;
  if (t == 9 || t == 11) return dpl == rpl;
  if (t == 13 || t == 15) return rpl >= dpl;
  if (t == 3) return dpl == 0;
  return true;
}
/// The model's verdict with the errata in `mask`.
/// How the Bochs model is run: on the hypervisor's VMCS (Bochs alone), or as the hardware
/// under KVM on the VMCS KVM builds from it (KVM has made the control and host-state checks
/// in software already, and may have loaded the MSR-load list itself).
struct bochs_phase {
  const v::vm_entry_state* state = nullptr;  // default: the case's state
  const v::vm_entry_env* env = nullptr;      // default: the case's env
  bool hardware_under_kvm = false;           // skip the control and host-state rules
};
v::vm_entry_verdict bochs_model(const diff_case& c, unsigned mask, const bochs_phase& ph = {}) {
  auto on = [&](erratum_id e) { return (mask >> e) & 1u; };
  v::vm_entry_state s = ph.state ? *ph.state : c.s;
  v::vm_entry_env env = ph.env ? *ph.env : c.env;
  if (on(e_ec_older_wording)) env.error_code_older_wording = true;
  if (on(e_pending_high)) s.pending_debug_exceptions &= 0xffff'ffffu;
  auto skipped = [&](const v::vm_entry_rule& r) {
    return (on(e_rip_canonical) && named(r, "guest_rip_not_canonical")) ||
           (on(e_debugctl) && named(r, "guest_debugctl_reserved")) ||
           (on(e_error_code_bit) && named(r, "injection_error_code_unexpected")) ||
           (on(e_pending_bs) && named(r, "guest_pending_debug_bs_mismatch")) ||
           (on(e_activity_event) && named(r, "guest_activity_blocks_injected_event")) ||
           (on(e_ia32e_no_paging) && named(r, "ia32e_guest_without_paging")) ||
           (on(e_vnmi_blocking) && named(r, "guest_nmi_blocking_with_virtual_nmi_injection")) ||
           (on(e_vm_real_mode) && named(r, "guest_rflags_vm_invalid") && !s.ia32e_guest()) ||
           (on(e_cs_dpl) && named(r, "guest_cs_dpl") && bochs_cs_dpl_ok(s)) ||
           (on(e_entry_to_smm) && named(r, "smm_controls_outside_smm") && !s.entry.test(v::entry_controls::deactivate_dual_monitor));
  };
  const bool smm_guest_fail = on(e_entry_to_smm) && s.entry.test(v::entry_controls::entry_to_smm);
  const bool tsc_fail = on(e_tsc_multiplier) && s.secondary().test(v::secondary_proc_based::use_tsc_scaling) &&
                        c.tsc_multiplier == 0;
  // Collect the first failing rule of each kind, in hvkit's (SDM) order.
  const v::vm_entry_rule* first_ctl = nullptr;
  const v::vm_entry_rule* first_host = nullptr;
  const v::vm_entry_rule* first_guest_early = nullptr;  // 27.3.1.1-27.3.1.4
  const v::vm_entry_rule* first_link = nullptr;
  const v::vm_entry_rule* first_nonreg = nullptr;       // the rest of 27.3.1.5
  const v::vm_entry_rule* first_pdpte = nullptr;
  v::vm_entry_hit h_ctl{}, h_host{}, h_early{}, h_link{}, h_nonreg{}, h_pdpte{};
  v::for_each_vm_entry_violation(s, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit& h) {
    if (skipped(r)) return;
    if (ph.hardware_under_kvm &&
        (r.info.phase == v::vm_entry_phase::controls || r.info.phase == v::vm_entry_phase::host_state))
      return;
    auto take = [&](const v::vm_entry_rule*& slot, v::vm_entry_hit& hs) {
      if (!slot) slot = &r, hs = h;
    };
    switch (r.info.phase) {
      case v::vm_entry_phase::controls: take(first_ctl, h_ctl); break;
      case v::vm_entry_phase::host_state: take(first_host, h_host); break;
      default:
        if (r.info.qualification == v::entry_failure_qualification::vmcs_link_pointer) take(first_link, h_link);
        else if (r.info.qualification == v::entry_failure_qualification::pdpte_load) take(first_pdpte, h_pdpte);
        // Bochs checks RFLAGS.IF for an injected external interrupt with the
        // interruptibility state, after the link pointer.
        else if (str_eq(r.info.section, "27.3.1.5") ||
                 (on(e_link_first) && named(r, "guest_rflags_if_clear_for_external_interrupt")))
          take(first_nonreg, h_nonreg);
        else take(first_guest_early, h_early);
    }
  });
  if (first_ctl) return v::make_verdict(first_ctl->info, h_ctl);
  if (tsc_fail) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::vm_fail_valid;
    t.error = v::vm_instruction_error::entry_invalid_control_fields;
    return t;
  }
  if (first_host) return v::make_verdict(first_host->info, h_host);
  auto exit33 = [](std::uint64_t q) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::entry_failure;
    t.exit_reason = 0x8000'0021u;
    t.exit_qualification = q;
    return t;
  };
  if (first_guest_early) return v::make_verdict(first_guest_early->info, h_early);
  // Bochs' own CS.DPL rule can fail where the SDM's passes (unrestricted guest).
  if (on(e_cs_dpl) && !s.guest_rflags.test(x86::rflags::vm) && !bochs_cs_dpl_ok(s)) return exit33(0);
  if (on(e_link_first) && first_link) return v::make_verdict(first_link->info, h_link);
  if (first_nonreg) {
    v::vm_entry_verdict t = v::make_verdict(first_nonreg->info, h_nonreg);
    if (on(e_nmi_sti_qual) && t.exit_qualification == 3) t.exit_qualification = 0;
    return t;
  }
  if (first_link) return v::make_verdict(first_link->info, h_link);
  if (smm_guest_fail) return exit33(0);
  if (first_pdpte) return v::make_verdict(first_pdpte->info, h_pdpte);
  return v::check_msr_load_area(s.entry_msr_load_address, s.entry_msr_load_count, env, c.mem);
}
/// The erratum that explains the case, or erratum_count.
unsigned explain(const diff_case& c) {
  for (unsigned e = 0; e < erratum_count; ++e)
    if (same(c.cpu, bochs_model(c, 1u << e))) return e;
  const unsigned all = (1u << erratum_count) - 1;
  if (!same(c.cpu, bochs_model(c, all))) return erratum_count;
  // Several together: the first whose removal from the full model changes the verdict.
  for (unsigned e = 0; e < erratum_count; ++e)
    if (!same(c.cpu, bochs_model(c, all & ~(1u << e)))) return e;
  return erratum_count;
}

// ---- KVM errata (docs/hypervisor.md, "KVM as a second CPU model") ------------------------
// Under Linux KVM (nested VMX) the VMLAUNCH of the hypervisor is emulated: KVM checks the
// hypervisor's VMCS in software, builds its own VMCS for the guest from it and enters that
// on the processor beneath, here Bochs, whose checks (with its errata, above) come last. A
// KVM erratum is a place where that composition deviates from the SDM. The KVM model runs
// in KVM's order:
//   1. the control and host-state checks (VMfailValid 7 / 8): hvkit's rules;
//   2. KVM's own guest-state checks in software (exit 33): CR0/CR4 fixed bits, DR7, PAT,
//      then the VMCS link pointer (qualification 4), then EFER, BNDCFGS and the activity state;
//   3. building the VMCS it enters: the width of CR3 (exit 33), then the PDPTEs of a PAE
//      guest without EPT, read from the PDPT at CR3 (exit 33, qualification 2);
//   4. the VM-entry MSR-load list, entry by entry with KVM's WRMSR (exit 34, index);
//   5. a guest entered in the HLT activity state with nothing to wake it is not entered on
//      the processor at all: KVM halts the virtual CPU in software until its emulated
//      VMX-preemption timer makes the VM exit; with an event to deliver it is entered in
//      the active state;
//   6. KVM's own segment checks for a guest without "unrestricted guest" (the segments it
//      could not run natively; exit 33), then the processor's checks (the TPR threshold,
//      then the Bochs model with all its errata) on the VMCS KVM built, where an unusable CS
//      has access rights 0x10000. (A halted guest of stage 5 gets KVM's segment checks too.)
// With no KVM erratum switched on, the stages collapse to the SDM's order (the Bochs model);
// each erratum moves or removes exactly one check. A case is attributed as for Bochs: to the
// one erratum whose model says what the entry did, else (all together) to the first whose
// removal changes the verdict.
enum kvm_erratum_id : unsigned {
  k_tpr_threshold,     // 27.2.1.1 order: TPR threshold checks left to the processor (after stages 2-5)
  k_link_first,        // 27.3.1.5 order: link pointer checked after CR0/CR4/DR7/PAT only (stage 2)
  k_pdptes_first,      // 27.3.1.6 order: PAE PDPTEs without EPT loaded before the processor's guest checks
  k_msr_load_first,    // 27.4 after 27.3: the MSR-load list is loaded before the processor's guest checks
  k_cs_unusable,       // 27.3.1.2: CS' unusable bit is ignored; KVM enters CS with access rights 0x10000
  k_debugctl,          // 27.3.1.1: valid IA32_DEBUGCTL bits 6, 11, 14, 15 refused (exit 33)
  k_halted_unchecked,  // 27.3.1.5: HLT never reaches the processor: no checks (or active-state checks)
  k_sysenter_msr_load, // 27.4: a non-canonical IA32_SYSENTER_ESP/EIP in the MSR-load list is accepted
  kvm_erratum_count
};
erratum_info kvm_errata[kvm_erratum_count] = {
    {"tpr_threshold_not_checked", 0},
    {"vmcs_link_pointer_checked_before_guest_state", 0},
    {"pae_pdptes_loaded_before_guest_state", 0},
    {"msr_load_list_loaded_before_guest_state", 0},
    {"unusable_cs_entered_with_access_rights_0x10000", 0},
    {"guest_debugctl_valid_bits_refused", 0},
    {"halted_guest_not_checked", 0},
    {"msr_load_sysenter_not_canonical_accepted", 0},
};
/// KVM's WRMSR for the MSR-load list: IA32_SYSENTER_ESP/EIP take any value (made canonical).
bool kvm_msr_write_faults(std::uint32_t index, std::uint64_t value) {
  if (index == 0x175 || index == 0x176) return false;
  return msr_write_faults(index, value);
}
bool named_any(const v::vm_entry_rule& r, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (named(r, n)) return true;
  return false;
}
/// Stage 5: HLT, and neither an injected event nor an interrupt- or NMI-window exit that
/// could end the halt at once.
bool kvm_halts_in_software(const v::vm_entry_state& s) {
  using pp = v::primary_proc_based;
  if (s.activity_state != 1) return false;
  if (s.entry_interruption_info & 0x8000'0000u) return false;
  if (s.proc.test(pp::interrupt_window_exiting) && s.guest_rflags.test(x86::rflags::if_)) return false;
  if (s.proc.test(pp::nmi_window_exiting) && (s.interruptibility & 8)) return false;
  return true;
}
v::vm_entry_verdict kvm_model(const diff_case& c, unsigned kmask) {
  auto on = [&](kvm_erratum_id e) { return (kmask >> e) & 1u; };
  const v::vm_entry_state& s = c.s;
  v::vm_entry_env env = c.env;
  if (on(k_sysenter_msr_load)) env.msr_write_faults = kvm_msr_write_faults;
  auto exit33 = [](std::uint64_t q) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::entry_failure;
    t.exit_reason = 0x8000'0021u;
    t.exit_qualification = q;
    return t;
  };
  // Stages 1 and 2.
  const v::vm_entry_rule *ctl = nullptr, *host = nullptr, *sw1 = nullptr, *link = nullptr, *sw2 = nullptr,
                         *pdpte = nullptr, *tpr = nullptr, *cr3 = nullptr;
  v::vm_entry_hit h_ctl{}, h_host{}, h_sw1{}, h_link{}, h_sw2{}, h_pdpte{}, h_tpr{}, h_cr3{};
  v::for_each_vm_entry_violation(s, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit& h) {
    auto take = [&](const v::vm_entry_rule*& slot, v::vm_entry_hit& hs) {
      if (!slot) slot = &r, hs = h;
    };
    if (on(k_tpr_threshold) && named_any(r, {"tpr_threshold_reserved", "tpr_threshold_above_vtpr"})) {
      take(tpr, h_tpr);
      return;
    }
    if (r.info.phase == v::vm_entry_phase::controls) take(ctl, h_ctl);
    else if (r.info.phase == v::vm_entry_phase::host_state) take(host, h_host);
    else if (r.info.qualification == v::entry_failure_qualification::vmcs_link_pointer) take(link, h_link);
    else if (r.info.qualification == v::entry_failure_qualification::pdpte_load) take(pdpte, h_pdpte);
    else if (named_any(r, {"guest_cr0_fixed_bits", "guest_cr0_pg_without_pe", "guest_cr4_fixed_bits", "guest_dr7_high",
                           "guest_pat_invalid"}))
      take(sw1, h_sw1);
    else if (named(r, "guest_cr3_beyond_maxphyaddr")) take(cr3, h_cr3);
    // KVM checks IA-32e mode against CR0.PG and CR4.PAE in software too (after the link
    // pointer, before EFER): first seen as exit 33 where the processor would have refused the
    // TPR threshold first (case 10618 under kvm_intel 6.1: IA-32e guest with CR0 0x10031).
    else if (named_any(r, {"ia32e_guest_without_paging", "ia32e_guest_without_pae", "guest_efer_reserved",
                           "guest_efer_lma_mismatch", "guest_efer_lme_mismatch", "guest_bndcfgs_invalid",
                           "guest_activity_state_unsupported"}))
      take(sw2, h_sw2);
  });
  if (ctl) return v::make_verdict(ctl->info, h_ctl);
  if (host) return v::make_verdict(host->info, h_host);
  // Stage 2 in KVM's order, once a later stage refuses the entry (or with k_link_first).
  const v::vm_entry_verdict st2 = sw1    ? v::make_verdict(sw1->info, h_sw1)
                                  : link ? v::make_verdict(link->info, h_link)
                                  : sw2  ? v::make_verdict(sw2->info, h_sw2)
                                         : v::vm_entry_verdict{};
  if (on(k_link_first) && (sw1 || link)) return st2;
  // Stage 3: CR3 (its width), then the PDPTEs without EPT.
  const v::vm_entry_verdict st3 = !st2.ok() ? st2 : cr3 ? v::make_verdict(cr3->info, h_cr3) : st2;
  if (on(k_pdptes_first) && !s.ept() && pdpte) return st3.ok() ? v::make_verdict(pdpte->info, h_pdpte) : st3;
  // KVM's own segment checks for a guest without "unrestricted guest" (those it could not
  // run natively), made in software just before it enters the processor (exit 33). Its data-
  // segment check looks at S, P and DPL against RPL, not at the accessed bit (SDM 27.3.1.2
  // requires it): a halted guest, never given to the processor, is entered with ES type 2
  // (case 5294 under kvm_intel 6.1: ES access rights 0xc092, activity HLT: success).
  auto kvm_segment_refused = [&](const v::vm_entry_state& x) {
    bool bad = false;
    if (!x.unrestricted_guest())
      v::for_each_vm_entry_violation(x, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit&) {
        if (named_any(r, {"guest_segment_s_clear", "guest_segment_not_present", "guest_tr_type", "guest_tr_unusable",
                          "guest_cs_type",
                          "guest_ss_type", "guest_ss_rpl_not_cs_rpl", "guest_ldtr_type", "guest_cs_dpl", "guest_ss_dpl",
                          "guest_data_segment_dpl", "guest_v86_base", "guest_v86_limit", "guest_v86_access_rights"}))
          bad = true;
      });
    return bad;
  };
  // Stage 4.
  v::vm_entry_state hw = s;
  const v::vm_entry_verdict msr = v::check_msr_load_area(s.entry_msr_load_address, s.entry_msr_load_count, env, c.mem);
  if (on(k_msr_load_first)) {
    if (!msr.ok()) return st3.ok() ? msr : st3;
    hw.entry_msr_load_count = 0;
  }
  // Stage 5. KVM never passes the HLT activity state to the processor: it halts the virtual
  // CPU itself, before entering (nothing to wake it) or after (an event to deliver).
  if (on(k_halted_unchecked) && s.activity_state == 1) {
    if (kvm_halts_in_software(s)) {
      if (!st3.ok()) return st3;
      if (!msr.ok()) return msr;
      return kvm_segment_refused(s) ? exit33(0) : v::vm_entry_verdict{};
    }
    hw.activity_state = 0;
  }
  // Stage 6.
  if (on(k_debugctl) && s.entry.test(v::entry_controls::load_debug_controls) &&
      (s.guest_debugctl & (bit(6) | bit(11) | bit(14) | bit(15))))
    return exit33(0);
  // KVM keeps only the unusable bit of an unusable segment's access rights (0x10000);
  // for CS the processor then checks type 0.
  if (on(k_cs_unusable) && (hw.seg[1].access_rights & bit(16))) hw.seg[1].access_rights = 0x10000;
  // The TPR threshold is checked by the processor only, on the VMCS KVM enters; a guest
  // without "unrestricted guest" whose segments KVM could not run natively is refused by KVM
  // (exit 33) just before that entry.
  if (tpr) {
    if (!st3.ok()) return st3;
    if (kvm_segment_refused(hw)) return exit33(0);
    return v::make_verdict(tpr->info, h_tpr);
  }
  bochs_phase ph{};
  ph.state = &hw;
  ph.env = &env;
  ph.hardware_under_kvm = true;
  return bochs_model(c, (1u << erratum_count) - 1, ph);
}
/// The KVM erratum that explains the case, or kvm_erratum_count.
unsigned explain_kvm(const diff_case& c) {
  for (unsigned e = 0; e < kvm_erratum_count; ++e)
    if (same(c.cpu, kvm_model(c, 1u << e))) return e;
  const unsigned all = (1u << kvm_erratum_count) - 1;
  if (!same(c.cpu, kvm_model(c, all))) return kvm_erratum_count;
  for (unsigned e = 0; e < kvm_erratum_count; ++e)
    if (!same(c.cpu, kvm_model(c, all & ~(1u << e)))) return e;
  return kvm_erratum_count;
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
};
constinit counts cnt{};
bool under_kvm = false;

/// How often each rule decided hvkit's verdict (first failing check), by rule position.
constexpr unsigned rule_total = static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count);
std::uint32_t decided[rule_total];
template <class F>
void for_each_rule_info(F&& f) {
  unsigned i = 0;
  v::for_each_vm_entry_rule([&](const v::vm_entry_rule& r) { f(i++, r.info); });
  for (const auto& r : v::entry_rules::msr_load_rules) f(i++, r.info);
}
void count_decided(const v::vm_entry_rule_info* info) {
  if (!info) return;
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (&r == info) ++decided[i];
  });
}


void print_mutations() {
  for (unsigned i = 0; i < mlog.n; ++i) {
    const auto* f = v::find_field(mlog.enc[i]);
    kprintf(" %s=0x%llx", f ? f->name : "?", (unsigned long long)mlog.val[i]);
  }
}

}  // namespace entry_detail

using namespace entry_detail;

void print_vm_entry_diagnosis(const char* context) {
  v::hw::current_vmcs vmcs;
  const auto r = v::check_vm_entry(vmcs, make_env(), host_memory());
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

bool entry_diff_run() {
  static const run_config cfg{"entry_diff", false, false, 0, run_status::done};
  run = run_state{};
  run.cfg = &cfg;
  run.status = run_status::running;
  kprintf("HVKIT RUN entry_diff begin cases=%u seed=0x%llx\n", case_count, (unsigned long long)seed);
  const hc::guest_header* g = load_guest(false);
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(vmcs_region)};
  *reinterpret_cast<std::uint32_t*>(vmcs_region) = vcaps.revision_id();
  if (!g || !v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs) || !setup_vmcs(*g)) {
    result("vm_entry_differential", false, "reason=setup_failed");
    return false;
  }
  // Come back at once: VMX-preemption timer active with value 0.
  wr(fields::pin_based_controls.encoding, rd(fields::pin_based_controls.encoding) | v::pin_based::activate_preemption_timer.raw());
  wr(fields::vmx_preemption_timer_value.encoding, 0);
  wr(fields::host_rip.encoding, reinterpret_cast<std::uint64_t>(&entry_diff_exit));
  *reinterpret_cast<std::uint32_t*>(link_page) = vcaps.revision_id();
  // The baseline guest has RFLAGS.IF = 1 (the PICs masked, so nothing is delivered to it):
  // Linux KVM emulates the timer for a guest hypervisor; with a value of 0 it forces the
  // exit with a self-IPI right after entering the guest, and a Bochs 2.7 erratum blocks that
  // host interrupt while the guest runs with IF = 0 (docs/hypervisor.md, "External
  // interrupts stay blocked after VM entry"): under KVM on Bochs the guest then ran to its
  // first VMCALL. Cases that clear IF again may run guest code before exiting there; any
  // exit counts as a successful entry.
  outb(0x21, 0xFF);
  outb(0xA1, 0xFF);
  wr(fields::guest_rflags.encoding, rd(fields::guest_rflags.encoding) | x86::rflags::if_.raw());
  capture_baseline();
  const v::vm_entry_env env = make_env();
  const auto mem = host_memory();
  under_kvm = running_under_kvm();
  kprintf("HVKIT INFO entry_diff cpu_model=%s\n", under_kvm ? "kvm_on_bochs" : "bochs");

  // The baseline itself enters.
  {
    static_cast<void>(fresh_vmcs());
    v::hw::current_vmcs c;
    const auto r = v::check_vm_entry(c, env, mem);
    const cpu_outcome o = launch();
    const bool ok = r && r.value().ok() && !o.fail_invalid && o.outcome == v::vm_entry_outcome::success &&
                    (o.exit_reason & 0xffff) == static_cast<std::uint32_t>(v::exit_reason::preemption_timer);
    if (!ok) {
      result("vm_entry_differential", false, "reason=baseline_does_not_enter exit_reason=0x%x error=%u", o.exit_reason,
             o.error);
      return false;
    }
  }

  rng_state = seed;
  cnt = counts{};
  for (auto& d : decided) d = 0;
  unsigned printed = 0;
  for (std::uint32_t n = 0; n < case_count; ++n) {
    if (!fresh_vmcs()) {
      result("vm_entry_differential", false, "reason=vmclear_failed case=%u", n);
      return false;
    }
    mlog = mutation_log{};
    const unsigned k = 1 + (rnd_below(10) < 6 ? 0 : rnd_below(10) < 7 ? 1 : 2);
    for (unsigned i = 0; i < k; ++i) mutate_once();
    ++cnt.cases;

    v::hw::current_vmcs c;
    const auto st = v::read_vm_entry_state(c, mem);
    if (!st) {
      result("vm_entry_differential", false, "reason=vmread_failed case=%u", n);
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
          print_mutations();
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
    const bool mtf = vcaps.primary_caps().may_be_one & v::primary_proc_based::monitor_trap_flag.raw();
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
    count_decided(pred.rule);
    cnt.by_outcome[o.outcome == v::vm_entry_outcome::success         ? 0
                   : o.outcome == v::vm_entry_outcome::vm_fail_valid ? (o.error == 7 ? 1 : 2)
                                                                     : 3]++;
    const diff_case dc{st.value(), env, mem, pred, o, rd(fields::tsc_multiplier.encoding)};
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
            if (!same(o, kvm_model(dc, 1u << e))) kprintf(" %s", kvm_errata[e].name);
          kprintf(" model=");
          const v::vm_entry_verdict m = kvm_model(dc, (1u << kvm_erratum_count) - 1);
          print_outcome(m.outcome, static_cast<std::uint32_t>(m.error), m.exit_reason, m.exit_qualification);
          kprintf(":");
          print_mutations();
          kprintf("\n");
        }
      }
      continue;
    }
    // An erratum?
    const unsigned e = explain(dc);
    if (e < erratum_count) {
      if (errata[e].cases++ == 0) {
        kprintf("HVKIT INFO entry_diff erratum=%s first_case=%u cpu=", errata[e].name, n);
        print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
        kprintf(" hvkit=%s:", pred.rule ? pred.rule->name : "-");
        print_mutations();
        kprintf("\n");
      }
      ++cnt.errata;
      ++cnt.probe_errata[mlog.probe];
      continue;
    }
    const unsigned ke = under_kvm ? explain_kvm(dc) : kvm_erratum_count;
    if (ke < kvm_erratum_count) {
      if (kvm_errata[ke].cases++ == 0) {
        kprintf("HVKIT INFO entry_diff kvm_erratum=%s first_case=%u cpu=", kvm_errata[ke].name, n);
        print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
        kprintf(" hvkit=%s:", pred.rule ? pred.rule->name : "-");
        print_mutations();
        kprintf("\n");
      }
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
      print_mutations();
      if (under_kvm) {
        kprintf(" rules:");
        v::for_each_vm_entry_violation(st.value(), env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit&) {
          kprintf(" %s", r.info.name);
        });
        const auto& sv = st.value();
        if (sv.entry_msr_load_count)
          for (unsigned i = 0; i < sv.entry_msr_load_count && i < 3; ++i)
            kprintf(" msr[%u]=0x%llx:0x%llx", i, (unsigned long long)msr_page[2 * i], (unsigned long long)msr_page[2 * i + 1]);
      }
      kprintf("\n");
    }
  }

  const bool pass = cnt.executed >= 10000 && cnt.mismatches == 0 && cnt.host_unsafe == 0;
  result("vm_entry_differential", pass,
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
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info&) { covered += decided[i] ? 1 : 0; });
  if (under_kvm)
    kprintf("HVKIT INFO entry_diff kvm_model_check agreeing_cases=%llu full_kvm_model_differs=%llu\n",
            (unsigned long long)cnt.agree, (unsigned long long)cnt.kvm_model_off_on_agree);
  kprintf("HVKIT INFO entry_diff rules_deciding_a_case=%u of %u; never:", covered, rule_total);
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (!decided[i]) kprintf(" %s", r.name);
  });
  kprintf("\n");
  for (unsigned i = 0; i < erratum_count; ++i)
    if (errata[i].cases) kprintf("HVKIT ERRATUM vm_entry_%s.entry_diff cases=%llu\n", errata[i].name, (unsigned long long)errata[i].cases);
  for (unsigned i = 0; i < kvm_erratum_count; ++i)
    if (kvm_errata[i].cases)
      kprintf("HVKIT ERRATUM vm_entry_kvm_%s.entry_diff cases=%llu\n", kvm_errata[i].name,
              (unsigned long long)kvm_errata[i].cases);

  // A deliberately broken guest state and host state: what the hypervisor prints.
  static_cast<void>(fresh_vmcs());
  wr(fields::guest_tr_access_rights.encoding, 0x89);  // an available (not busy) TSS
  const cpu_outcome g1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=guest_tr_type cpu_exit_reason=0x%x qualification=%llu\n", g1.exit_reason,
          (unsigned long long)g1.qualification);
  print_vm_entry_diagnosis("demo_guest_tr_not_busy");
  static_cast<void>(fresh_vmcs());
  wr(fields::host_tr_selector.encoding, 0);
  const cpu_outcome h1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=host_tr_selector cpu_error=%u\n", h1.error);
  print_vm_entry_diagnosis("demo_host_tr_null");

  run.status = run_status::done;
  kprintf("HVKIT RUN entry_diff end status=done exits=0 host_tsc=0\n");
  return pass;
}

}  // namespace hv

