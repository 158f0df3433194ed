// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, the VM-entry differential (entry_diff.cpp): the CPU models a
// case where hvkit and the CPU disagree is explained with. Bochs: hvkit's rules less the
// checks Bochs does not make, plus those it makes that the SDM does not list; KVM: its
// software checks of the nested VM entry in KVM's order, then the Bochs model. Each erratum
// switches exactly one deviation on (docs/hypervisor.md).
#include "entry_diff.hpp"

namespace hv {
namespace entry_detail {

// ---- Bochs errata (docs/hypervisor.md) -----------------------------------------------------------
// Bochs as a model: hvkit's rules, less the checks Bochs does not make, plus the checks it
// makes that the SDM does not list, in Bochs' order where it differs. A case hvkit and the
// CPU disagree on is explained when the model with the errata switched on says what the
// CPU did: by one erratum alone if one suffices (it gets the count), else by all together
// (the first that changes hvkit's verdict gets it).
const char* const erratum_names[erratum_count] = {
    "guest_rip_not_checked_canonical",       "guest_debugctl_reserved_bits_not_checked",
    "error_code_rule_older_wording",
    "injection_error_code_bit_not_checked",  "pending_debug_bs_not_checked",
    "injected_event_vs_activity_not_checked", "pending_debug_bits_63_32_not_checked",
    "cs_dpl_checked_against_cs_rpl",         "entry_to_smm_checked_as_guest_state",
    "tsc_multiplier_zero_refused",           "vmcs_link_pointer_checked_first",
    "nmi_injection_sti_blocking_qualification_0",
    "ia32e_guest_without_paging_not_checked",
    "nmi_blocking_with_virtual_nmi_injection_not_checked",
    "rflags_vm_in_real_mode_not_checked",
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
const char* const kvm_erratum_names[kvm_erratum_count] = {
    "tpr_threshold_not_checked",
    "vmcs_link_pointer_checked_before_guest_state",
    "pae_pdptes_loaded_before_guest_state",
    "msr_load_list_loaded_before_guest_state",
    "unusable_cs_entered_with_access_rights_0x10000",
    "guest_debugctl_valid_bits_refused",
    "halted_guest_not_checked",
    "msr_load_sysenter_not_canonical_accepted",
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

}  // namespace entry_detail
}  // namespace hv
