/// @file
/// @brief IBPB on VMCS switch: per-CPU tracking of the security domain last loaded, and the
/// policies deciding when an Indirect Branch Prediction Barrier is issued.
///
/// History (docs/background.md §2): issuing IBPB whenever another VMCS was loaded made a nested
/// guest's vmcall round trip cost 33488 cycles; skipping it between vmcs01 and vmcs02 of the
/// same guest (one security domain) brought it to 14898. The barrier is a WRMSR of
/// IA32_PRED_CMD (MSR 0x49) with bit 0 set (Intel "Speculative Execution Side Channel
/// Mitigations", IBPB), supplied as a template parameter so tests can count it.
#pragma once

#include <cstdint>

#include "../x86/msr.hpp"

namespace hvkit::vmx {

/// When to issue IBPB.
enum class ibpb_policy : std::uint8_t {
  /// On every load of a different VMCS (the original, conservative rule).
  every_vmcs_change,
  /// Skip between VMCSes of the same guest (vmcs01 <-> vmcs02): barrier only when the new
  /// VMCS belongs to another VM.
  skip_same_guest,
  /// Barrier only when another vCPU's domain is loaded (VMCSes of the same vCPU, i.e. its
  /// vmcs01 and vmcs02, share a domain; two vCPUs of one VM do not).
  other_vcpu_only,
  /// Like other_vcpu_only, but decided at the next VM entry: switches that return to the
  /// domain that last ran on this CPU before any entry cost no barrier.
  deferred_to_entry,
};

/// Identifies a loaded VMCS and its security domain.
struct vmcs_identity {
  std::uint64_t vmcs = 0;  ///< the VMCS (physical address or any unique id; 0 = none)
  std::uint32_t vm = 0;    ///< the guest (VM) it belongs to
  std::uint32_t vcpu = 0;  ///< the vCPU it belongs to (within the VM)
  friend constexpr bool operator==(const vmcs_identity&, const vmcs_identity&) noexcept = default;
};

/// The real barrier: WRMSR IA32_PRED_CMD, IBPB (x86-64, ring 0).
struct pred_cmd_barrier {
  void operator()() const noexcept {
#if defined(__x86_64__)
    const std::uint64_t v = x86::msr::pred_cmd::ibpb;
    asm volatile("wrmsr" ::"c"(x86::msr::ia32_pred_cmd), "a"(static_cast<std::uint32_t>(v)),
                 "d"(static_cast<std::uint32_t>(v >> 32))
                 : "memory");
#endif
  }
};

/// Per-physical-CPU state. Call on_vmcs_load() after every VMPTRLD and on_vm_entry() right
/// before every VMLAUNCH/VMRESUME. The first load after construction always issues a barrier
/// under every policy (the previous occupant of the CPU is unknown).
template <class Barrier = pred_cmd_barrier>
class ibpb_tracker {
 public:
  constexpr explicit ibpb_tracker(ibpb_policy p, Barrier b = Barrier{}) noexcept : policy_(p), barrier_(b) {}

  constexpr void on_vmcs_load(vmcs_identity next) noexcept {
    switch (policy_) {
      case ibpb_policy::every_vmcs_change:
        if (!loaded_ || last_.vmcs != next.vmcs) issue();
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
  static constexpr bool same_vcpu(const vmcs_identity& a, const vmcs_identity& b) noexcept {
    return a.vm == b.vm && a.vcpu == b.vcpu;
  }
  constexpr void issue() noexcept { barrier_(); }

  ibpb_policy policy_;
  Barrier barrier_;
  vmcs_identity last_{};
  vmcs_identity last_entered_{};
  bool loaded_ = false;
  bool entered_ = false;
};

}  // namespace hvkit::vmx
