// SPDX-License-Identifier: MIT
/// @file
/// @brief The vendor-neutral state of one run of the reference hypervisor, split in two: the
/// vCPU's state (what a hypervisor keeps for its guest: registers, status, EFER, the MMU
/// context, the test device, exit counts) and the checks' counters (what the differentials
/// and the measured sections count). Neither vendor's header is included.
#pragma once

#include <cstdint>

#include <hvkit/cpuid/guest_cpu_model.hpp>
#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/vmx/register_file.hpp>

#include "../layout.hpp"

namespace hv::core {

enum class run_status { running, done, halted, triple_fault, entry_failed, vm_fail, fatal_exit };

/// One run of the conformance guest, the same on both vendors.
struct run_config {
  const char* name;
  bool wp_intercepted;
  /// Descriptor-table exiting: LTR/STR/LGDT/... exit and the hypervisor emulates them.
  /// Off, the CPU executes them itself: the oracle for the emulated runs.
  bool dt_exiting;
  std::uint64_t guest_flags;  ///< hc::cfg_* beyond the two above
  run_status expected;
  /// Negative control: the emulator checks permissions with the role cached at the last
  /// CR exit, without the CR0.WP passthrough refresh (the KVM bug). The run passes if the
  /// LTR check then fails the way the bug predicts.
  bool stale_role = false;
  /// VMX: two guests and a sibling VMCS, switched by the VMX-preemption timer, with this IBPB
  /// policy deciding each barrier (-1: a single VMCS, no scheduling).
  int ibpb = -1;
  /// VMX: CR3-load and CR3-store exiting.
  bool cr3_exiting = false;
  /// A guest profile (profiles/): the guest image it loads instead of the conformance guest,
  /// with I/O exiting on (nullptr: the conformance guest).
  const struct guest_profile* profile = nullptr;
};

/// What an exit is, whichever vendor's exit code or basic reason said it.
enum class exit_kind : unsigned {
  cpuid,
  msr_read,
  msr_write,
  cr_access,         ///< a CR read or write the backend decodes or the emulator executes
  descriptor_table,  ///< LGDT/LIDT/LLDT/LTR/SGDT/...: emulated
  hypercall,         ///< VMCALL / VMMCALL
  xsetbv,            ///< XSETBV (VMX: always exits; SVM: when intercepted)
  io,                ///< IN/OUT/INS/OUTS to an intercepted port
  memory,            ///< EPT violation / #NPF: MMIO, unassigned space or a differential case
  misconfig,         ///< EPT misconfiguration (VMX only)
  hlt,
  triple_fault,      ///< triple-fault exit / SHUTDOWN intercept
  virt_instruction,  ///< a VMX or SVM instruction: the guest's CPUID offers neither, #UD
  preempted,         ///< VMX-preemption timer / physical interrupt: end of a time slice
  entry_failed,      ///< VM entry failed on guest state / VMEXIT_INVALID
  page_fault,        ///< a host #PF under shadow paging (core/shadow_exits.hpp)
  cr_read,           ///< a CR read that exits: SVM's CR0/CR3/CR4 read intercepts under shadow paging
  invlpg,            ///< INVLPG under shadow paging
  unhandled,
  count
};
inline constexpr unsigned exit_kind_count = static_cast<unsigned>(exit_kind::count);

/// Exit counts: by the vendor's slot (VMX basic reason, SVM exit code folded, for the
/// "HVKIT EXITS" lines) and by kind (what the measured sections compare).
inline constexpr unsigned exit_slots = 0xA0;
struct exit_counters {
  std::uint64_t total;
  std::uint64_t by_slot[exit_slots];
  std::uint64_t by_kind[exit_kind_count];
  [[nodiscard]] std::uint64_t of(exit_kind k) const noexcept { return by_kind[static_cast<unsigned>(k)]; }
};

/// The MMIO test device's registers (layout.hpp): id, scratch, writes, reads.
struct mmio_device {
  std::uint64_t regs[4];
};

/// The guest CPU every vCPU of a boot runs on, built once at boot (vmx_setup.cpp
/// build_cpuid_policy, svm_setup.cpp build_policy) and handed by reference: the CPUID policy,
/// the MSR policy derived from it, and the guest CPU model of that policy (MAXPHYADDR, the CR4
/// and EFER bits the guest may set, the features the rules need: core::guest_cpu_model).
struct guest_cpu {
  hvkit::cpuid::policy cpuid;
  hvkit::cpuid::msr_policy msrs;
  hvkit::cpuid::guest_cpu_model model;
};

/// The guest RAM of a run: [base, base + size), identity-mapped by the second stage (EPT, NPT)
/// and the shadow MMU's frame map; the emulator and the walkers touch guest memory only there
/// (core::guest_ram_view(), guest_ram_data(), guest_ram()).
struct guest_ram_range {
  std::uint64_t base, size;
};
/// The conformance guest's RAM (layout.hpp), every vCPU's unless its profile gives it its own
/// (the Linux guest: its whole identity map, linux/linux.cpp).
inline constexpr guest_ram_range conformance_ram{layout::guest_mem_base, layout::guest_mem_size};

namespace shadow {
struct vcpu_mmu;
}

/// The guest's GPR block as the entry/exit stubs save it (both vendors use the same block).
using guest_regs = hvkit::vmx::gpr_block;

/// The vCPU: what the hypervisor keeps for its guest between exits.
struct vcpu_state {
  const run_config* cfg;
  const guest_cpu* cpu;  ///< the boot's guest CPU (set with `cfg`)
  guest_ram_range ram = conformance_ram;  ///< the guest's RAM (a profile with RAM of its own sets it)
  guest_regs regs;
  run_status status;
  std::uint64_t guest_efer;
  /// The guest MMU context the emulator checks permissions with (hvkit::paging).
  hvkit::paging::mmu_context mmu;
  mmio_device device;
  /// Shadow paging (run --shadow): the vCPU's shadow MMU (core/shadow_paging.hpp), set by
  /// shadow::begin(); nullptr under EPT/NPT.
  shadow::vcpu_mmu* shadow;
  bool preempted;  ///< the last exit ended a time slice: switch, then resume
  bool spin_more;  ///< hc::spin_more's answer, set by a two-guest run's vendor before each slice
  std::uint64_t guest_xcr0;  ///< the guest's XCR0 (0: never set, the reset value 1 applies)
  std::uint32_t x2apic_id;   ///< the vCPU's APIC ID (CPUID leaves 1, 0xB, 0x1F)
  exit_counters exits;
  exit_counters mark;  ///< snapshot taken at hc::mark_begin
};

struct tally;

/// The checks' counters: what the runs' results are computed from.
struct check_counters {
  /// The boot's results (core/report.hpp), where this run's RESULT lines and errata are
  /// counted: set with the vCPU's `cfg` by the run that owns it.
  tally* results;
  // The measured WP-toggle section, kept for the cross-run comparison.
  std::uint64_t wp_toggles, wp_cr_exits, wp_mismatch, wp_tsc;
  bool wp_seen;
  std::uint64_t device_reads, device_writes, unassigned_reads, unassigned_writes, not_emulable, emulated;
  // The MMU context after CR writes that exited (refreshes/resets), passthrough refreshes
  // (CR0.WP found changed at an emulated access), and role rebuilds (paging mode changed).
  std::uint64_t mmu_refreshes, mmu_resets, passthrough_refreshes, role_rebuilds;
  std::uint64_t cr_gp_injected;      ///< CR writes refused by the architectural checks: #GP
  std::uint64_t virt_ud_injected;    ///< VMX/SVM instructions the guest executed: #UD
  std::uint64_t msr_gp;              ///< RDMSR/WRMSR answered with #GP(0)
  std::uint64_t xsetbv_ok, xsetbv_gp;
  std::uint64_t stale_wrong_faults;  ///< negative control: #PF 0x3 injected while live WP=0
  std::uint64_t neg_wp0_result;      ///< negative control: the guest's ltr_ro_gdt_wp0_ok
  bool neg_wp0_seen;
  // Differential paging.
  std::uint64_t pg_cases, pg_mismatches, pg_cpu_faults, pg_a_on_fault;
  std::uint64_t pg_by_kind[7][2];  // [read/write/fetch at CPL 0, then CPL 3, implicit][ok, fault]
  std::uint64_t pg_errata_b3;      // Bochs: AC overrides SMAP for implicit accesses
  std::uint64_t pg_errata_q1;      // QEMU TCG: a reserved-bit #PF without P in the error code
  std::uint64_t pg_errata_b1, pg_errata_b2;  // Bochs: PKRU on supervisor addresses / not for supervisor accesses
  // Per paging mode: [0] 4-level, [1] 32-bit, [2] PAE.
  std::uint64_t pg_mode_cases[3], pg_mode_faults[3], pg_mode_mismatches[3], pg_mode_b3[3];
  std::uint64_t pg_mode_large_ok[3];  // accesses that succeeded through a large page
  std::uint64_t pg_pse36_ok;          // ... through a PSE-36 4 MiB page above 4 GiB
  // PAE: PDPTE loads by the guest's MOV to CR3 compared with paging::load_pdptrs, and the
  // PDPTE registers the CPU saved in the VMCS compared with the snapshot.
  std::uint64_t pdpte_loads, pdpte_gp, pdpte_mismatches, pdpte_register_mismatches;
  std::uint64_t pdpte_errata_q2, pdpte_errata_q3;  // QEMU TCG: a reserved PDPTE bit ignored by the walk under nested paging
  std::uint64_t pdpte_walk_rsv;  // SVM with nested paging: reserved PDPTE found by the walk (#PF), not MOV CR3
  // EPT differential.
  bool ept_armed;
  bool ept_pred_ok;         // hvkit: the access succeeds
  bool ept_pred_ept;        // hvkit: an EPT violation or misconfiguration (else a guest fault)
  bool ept_pred_misconfig;  // hvkit: an EPT misconfiguration
  std::uint64_t ept_pred_qual, ept_pred_gpa, ept_pred_la;
  std::uint32_t ept_pred_result, ept_pred_error;
  bool ept_seen;  // the CPU exited with an EPT violation or misconfiguration
  bool ept_seen_misconfig;
  std::uint64_t ept_seen_qual, ept_seen_gpa, ept_seen_la;
  std::uint64_t ept_cases, ept_mismatches, ept_violations, ept_guest_faults, ept_errata;
  std::uint64_t ept_misconfigs, ept_large_cases;
  std::uint64_t ept_misconfig_by_kind[4];  // by planted kind: [1] W without R, [2] bit 45, [3] type 2 / bit 3
  // The re-injection check (hc::ept_unmap_once): the last report found the page still
  // unmapped, never touched through an exit, so the event delivery the guest saw was the
  // CPU's alone and the guest's next result may report a deviation as the CPU's erratum.
  bool unmap_untouched_at_report;
  /// The re-injection check's page (either vendor's second stage): unmapped (armed) at `gpa`,
  /// the 2 MiB entry it replaced, the hits and the event re-injected at the last one (its
  /// VM-entry interruption information and instruction length), and the SVM errata of
  /// EXITINTINFO met on the way (svm/svm_reinject.cpp).
  struct unmap_check {
    bool armed;
    std::uint64_t gpa, saved_pde, hits;
    std::uint64_t seen_info;
    unsigned seen_length;
    std::uint64_t stale_intn, soft_int_type_for_int3, stale_on_interrupt;
    std::uint64_t stale_on_stack;  // the same, the #PF on the delivery's stack push (no gate tells the vector)
  } unmap;
};

/// Where one vCPU's state and its checks' counters are kept: by the run that owns the vCPU (a
/// local of the run's function) or, under SMP, by the vCPU's processor (smp/smp.hpp). Never a
/// global: the handlers get the two parts as a context.
struct run_state : vcpu_state, check_counters {};

/// What the exit loop and every handler work on: the vCPU and the checks' counters, passed
/// down, never reached through a global.
struct context {
  vcpu_state& vcpu;
  check_counters& checks;
  const hvkit::cpuid::policy& cpuid;     ///< the guest's CPUID policy (built once per boot)
  const hvkit::cpuid::msr_policy& msrs;  ///< the MSR policy derived from it
  [[nodiscard]] const run_config& cfg() const noexcept { return *vcpu.cfg; }
};

}  // namespace hv::core
