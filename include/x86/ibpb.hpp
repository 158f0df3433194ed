// SPDX-License-Identifier: MIT
/// @file
/// @brief IBPB across switches of the guest control block (a VMCS on VMX, a VMCB on SVM):
/// per-CPU tracking of the security domain last run, and the policies deciding when an
/// Indirect Branch Prediction Barrier is issued. Vendor-neutral; vmx/ibpb.hpp and
/// svm/ibpb.hpp name the switch after their instructions (VMPTRLD, VMRUN of another VMCB).
///
/// History (the KVM record): issuing IBPB whenever another VMCS was loaded made a nested
/// guest's vmcall round trip cost 33488 cycles; skipping it between vmcs01 and vmcs02 of the
/// same guest (one security domain) brought it to 14898. The same holds for vmcb01/vmcb02 of
/// one vCPU on SVM. The barrier is a WRMSR of IA32_PRED_CMD (MSR 49h) with bit 0 set (Intel
/// "Speculative Execution Side Channel Mitigations"; AMD "Software Techniques for Managing
/// Speculation on AMD Processors", IBPB; CPUID 8000_0008 EBX[12] on AMD), supplied as a
/// template parameter so tests can count it.
#pragma once

#include <cstdint>

#include "msr.hpp"

namespace hvkit::x86 {

/// When to issue IBPB.
enum class ibpb_policy : std::uint8_t {
  /// On every switch to a different control block (the original, conservative rule).
  every_switch,
  every_vmcs_change = every_switch,  ///< VMX spelling
  every_vmcb_change = every_switch,  ///< SVM spelling
  /// Skip between control blocks of the same guest (vmcs01 <-> vmcs02, vmcb01 <-> vmcb02):
  /// barrier only when the new one belongs to another VM.
  skip_same_guest,
  /// Barrier only when another vCPU's domain is switched in (control blocks of the same vCPU
  /// share a domain; two vCPUs of one VM do not).
  other_vcpu_only,
  /// Like other_vcpu_only, but decided at the next VM entry: switches that return to the
  /// domain that last ran on this CPU before any entry cost no barrier.
  deferred_to_entry,
};

/// A control block and its security domain.
struct ibpb_domain {
  std::uint64_t control_block = 0;  ///< the VMCS/VMCB (physical address or any unique id; 0 = none)
  std::uint32_t vm = 0;             ///< the guest (VM) it belongs to
  std::uint32_t vcpu = 0;           ///< the vCPU it belongs to (within the VM)
  friend constexpr bool operator==(const ibpb_domain&, const ibpb_domain&) noexcept = default;
};

/// The real barrier: WRMSR IA32_PRED_CMD, IBPB (x86-64, ring 0).
struct pred_cmd_barrier {
  void operator()() const noexcept {
#if defined(__x86_64__)
    const std::uint64_t v = msr::pred_cmd::ibpb;
    asm volatile("wrmsr" ::"c"(msr::ia32_pred_cmd), "a"(static_cast<std::uint32_t>(v)),
                 "d"(static_cast<std::uint32_t>(v >> 32))
                 : "memory");
#endif
  }
};

/// Per-physical-CPU state. Call on_switch() whenever another control block becomes the one
/// the CPU will run, and on_vm_entry() right before every entry. The first switch after
/// construction always issues a barrier under every policy (the previous occupant of the CPU
/// is unknown).
template <class Barrier = pred_cmd_barrier>
class ibpb_tracker {
 public:
  constexpr explicit ibpb_tracker(ibpb_policy p, Barrier b = Barrier{}) noexcept : policy_(p), barrier_(b) {}

  constexpr void on_switch(ibpb_domain next) noexcept {
    switch (policy_) {
      case ibpb_policy::every_switch:
        if (!loaded_ || last_.control_block != next.control_block) issue();
        break;
      case ibpb_policy::skip_same_guest:
        if (!loaded_ || last_.vm != next.vm) issue();
        break;
      case ibpb_policy::other_vcpu_only:
        if (!loaded_ || !same_vcpu(last_, next)) issue();
        break;
      case ibpb_policy::deferred_to_entry:
        break;
    }
    last_ = next;
    loaded_ = true;
  }

  constexpr void on_vm_entry() noexcept {
    if (policy_ != ibpb_policy::deferred_to_entry) return;
    if (!entered_ || !same_vcpu(last_entered_, last_)) issue();
    last_entered_ = last_;
    entered_ = true;
  }

  [[nodiscard]] constexpr ibpb_policy policy() const noexcept { return policy_; }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return barrier_; }

 private:
  static constexpr bool same_vcpu(const ibpb_domain& a, const ibpb_domain& b) noexcept {
    return a.vm == b.vm && a.vcpu == b.vcpu;
  }
  constexpr void issue() noexcept { barrier_(); }

  ibpb_policy policy_;
  Barrier barrier_;
  ibpb_domain last_{};
  ibpb_domain last_entered_{};
  bool loaded_ = false;
  bool entered_ = false;
};

}  // namespace hvkit::x86
