// SPDX-License-Identifier: MIT
/// @file
/// @brief What the VM-entry differential's three files share (vmx/entry_diff.cpp: the baseline
/// VMCS, VMLAUNCH, the run; vmx/entry_models.cpp: the Bochs and KVM models that explain
/// deviations; vmx/entry_mutations.cpp: the mutations). Internal to examples/hypervisor/vmx.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hvkit/vmx/vm_entry_checks.hpp>

#include "../hv.hpp"

namespace hv {

namespace v = hvkit::vmx;

namespace entry_detail {

// ---- entry_diff.cpp ----------------------------------------------------------------------
/// The pages the mutated VMCSs point at, taken from the boot's pool by entry_diff_run.
struct diff_pages {
  std::uint8_t* link_page;       ///< a VMCS-shaped page for the link pointer
  std::uint8_t* vapic_page;      ///< virtual-APIC page
  std::uint64_t* msr_page;       ///< VM-entry MSR-load area
  std::uint64_t* exit_msr_page;  ///< VM-exit MSR-store/load area
};
/// The differential's random numbers (xorshift64, a fixed seed): entry_diff_run's.
struct diff_rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t x = state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return state = x;
  }
  unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};
/// What the mutations use beyond the current VMCS: entry_diff_run's random numbers and pages,
/// the processor's VMX capabilities.
struct mutation_env {
  diff_rng& rng;
  const diff_pages& pages;
  const hvkit::vmx::vmx_capabilities& caps;
};
std::uint64_t rd(std::uint32_t enc);
void wr(std::uint32_t enc, std::uint64_t val);

// ---- entry_models.cpp: the CPUs the differential explains deviations with -----------------
/// What the CPU did on one VMLAUNCH.
struct cpu_outcome {
  v::vm_entry_outcome outcome = v::vm_entry_outcome::success;
  std::uint32_t error = 0, exit_reason = 0;
  std::uint64_t qualification = 0;
  bool fail_invalid = false;
};
bool same(const cpu_outcome& c, const v::vm_entry_verdict& p);
bool msr_write_faults(std::uint32_t index, std::uint64_t value);

/// The Bochs errata of the VM-entry checks (entry_models.cpp has the model and the SDM
/// section of each).
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
/// The name of each (read-only; the cases are counted by entry_diff_run).
extern const char* const erratum_names[erratum_count];
/// The KVM errata: where KVM's nested VM entry, composed with the processor beneath,
/// deviates from the SDM (entry_models.cpp).
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
extern const char* const kvm_erratum_names[kvm_erratum_count];

/// One case of the differential: the state, hvkit's verdict and what the CPU did.
struct diff_case {
  const v::vm_entry_state& s;
  const v::vm_entry_env& env;
  const hvkit::paging::flat_view& mem;
  const v::vm_entry_verdict& pred;
  const cpu_outcome& cpu;
  std::uint64_t tsc_multiplier;
};
/// The Bochs erratum that explains a case (erratum_count: none does).
unsigned explain(const diff_case& c);
/// What KVM in front of the processor does with the case, with the KVM errata in `kmask`.
v::vm_entry_verdict kvm_model(const diff_case& c, unsigned kmask);
/// The KVM erratum that explains a case (kvm_erratum_count: none does).
unsigned explain_kvm(const diff_case& c);

// ---- entry_mutations.cpp -------------------------------------------------------------------
enum probe_kind : unsigned { probe_none, probe_rtm, probe_error_code, probe_count };
extern const char* const probe_name[probe_count];
struct mutation_log {
  static constexpr unsigned max = 8;
  std::uint32_t enc[max]{};
  std::uint64_t val[max]{};
  unsigned n = 0;
  bool host = false;        // touched the host-state area or the host address-space size
  bool activity_risk = false;
  unsigned probe = 0;       // a targeted case of issue 25 (probe_rtm, probe_error_code), counted apart
};
/// Writes a VMCS field and logs it in `log` (the case's mutations, owned by entry_diff_run).
void put(mutation_log& log, std::uint32_t enc, std::uint64_t val);
constexpr std::uint32_t sel_enc(unsigned s) { return 0x0800 + 2 * s; }
constexpr std::uint32_t base_enc(unsigned s) { return 0x6806 + 2 * s; }
constexpr std::uint32_t limit_enc(unsigned s) { return 0x4800 + 2 * s; }
constexpr std::uint32_t ar_enc(unsigned s) { return 0x4814 + 2 * s; }
constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }
/// One random mutation of the current VMCS (or a targeted case), logged in `log`.
void mutate_once(const mutation_env& env, mutation_log& log);

}  // namespace entry_detail
}  // namespace hv
