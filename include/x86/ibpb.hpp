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

namespace detail {
[[nodiscard]] constexpr bool same_vcpu(const ibpb_domain& a, const ibpb_domain& b) noexcept {
  return a.vm == b.vm && a.vcpu == b.vcpu;
}
/// The one rule of every policy: does switching from `last` (if `loaded`) to `next` need a
/// barrier now? (deferred_to_entry decides at the entry instead: never here.)
template <ibpb_policy P>
[[nodiscard, gnu::always_inline]] constexpr bool barrier_on_switch(bool loaded, const ibpb_domain& last,
                                                                   const ibpb_domain& next) noexcept {
  if constexpr (P == ibpb_policy::every_switch) {
    return !loaded || last.control_block != next.control_block;
  } else if constexpr (P == ibpb_policy::skip_same_guest) {
    return !loaded || last.vm != next.vm;
  } else if constexpr (P == ibpb_policy::other_vcpu_only) {
    return !loaded || !same_vcpu(last, next);
  } else {
    return false;
  }
}
}  // namespace detail

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
        if (detail::barrier_on_switch<ibpb_policy::every_switch>(loaded_, last_, next)) issue();
        break;
      case ibpb_policy::skip_same_guest:
        if (detail::barrier_on_switch<ibpb_policy::skip_same_guest>(loaded_, last_, next)) issue();
        break;
      case ibpb_policy::other_vcpu_only:
        if (detail::barrier_on_switch<ibpb_policy::other_vcpu_only>(loaded_, last_, next)) issue();
        break;
      case ibpb_policy::deferred_to_entry:
        break;
    }
    last_ = next;
    loaded_ = true;
  }

  constexpr void on_vm_entry() noexcept {
    if (policy_ != ibpb_policy::deferred_to_entry) return;
    if (!entered_ || !detail::same_vcpu(last_entered_, last_)) issue();
    last_entered_ = last_;
    entered_ = true;
  }

  [[nodiscard]] constexpr ibpb_policy policy() const noexcept { return policy_; }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return barrier_; }

 private:
  constexpr void issue() noexcept { barrier_(); }

  ibpb_policy policy_;
  Barrier barrier_;
  ibpb_domain last_{};
  ibpb_domain last_entered_{};
  bool loaded_ = false;
  bool entered_ = false;
};

/// ibpb_tracker with the policy fixed at compile time: the same rules (one definition,
/// detail::barrier_on_switch), without the policy load and dispatch on every switch, and with
/// only the state the policy reads (for skip_same_guest: the last VM). What a hypervisor that
/// picks its policy once, at build time, uses on its VMPTRLD / VMRUN path.
template <ibpb_policy P, class Barrier = pred_cmd_barrier>
class static_ibpb_tracker {
 public:
  constexpr explicit static_ibpb_tracker(Barrier b = Barrier{}) noexcept : barrier_(b) {}

  [[gnu::always_inline]] constexpr void on_switch(ibpb_domain next) noexcept {
    if (detail::barrier_on_switch<P>(loaded_, last_, next)) barrier_();
    if constexpr (P == ibpb_policy::skip_same_guest) {
      last_.vm = next.vm;  // the only field the rule reads
    } else {
      last_ = next;
    }
    loaded_ = true;
  }
  constexpr void on_vm_entry() noexcept {
    if constexpr (P == ibpb_policy::deferred_to_entry) {
      if (!entered_ || !detail::same_vcpu(last_entered_, last_)) barrier_();
      last_entered_ = last_;
      entered_ = true;
    }
  }
  [[nodiscard]] static constexpr ibpb_policy policy() noexcept { return P; }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return barrier_; }

 private:
  Barrier barrier_;
  ibpb_domain last_{};
  ibpb_domain last_entered_{};
  bool loaded_ = false;
  bool entered_ = false;
};

}  // namespace hvkit::x86
