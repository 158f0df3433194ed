// SPDX-License-Identifier: MIT
/// @file
/// @brief IBPB on VMCS switch: the vendor-neutral policies and tracker of x86/ibpb.hpp under
/// their VMX names (on_vmcs_load() after every VMPTRLD, on_vm_entry() before every
/// VMLAUNCH/VMRESUME).
#pragma once

#include <cstdint>

#include "../x86/ibpb.hpp"

namespace hvkit::vmx {

/// When to issue IBPB (x86::ibpb_policy; `every_vmcs_change` is its VMX spelling).
using ibpb_policy = x86::ibpb_policy;
/// The real barrier: WRMSR IA32_PRED_CMD, IBPB.
using pred_cmd_barrier = x86::pred_cmd_barrier;

/// Identifies a loaded VMCS and its security domain.
struct vmcs_identity {
  std::uint64_t vmcs = 0;  ///< the VMCS (physical address or any unique id; 0 = none)
  std::uint32_t vm = 0;    ///< the guest (VM) it belongs to
  std::uint32_t vcpu = 0;  ///< the vCPU it belongs to (within the VM)
  friend constexpr bool operator==(const vmcs_identity&, const vmcs_identity&) noexcept = default;
};

/// Per-physical-CPU state. Call on_vmcs_load() after every VMPTRLD and on_vm_entry() right
/// before every VMLAUNCH/VMRESUME. The first load after construction always issues a barrier
/// under every policy (the previous occupant of the CPU is unknown).
template <class Barrier = pred_cmd_barrier>
class ibpb_tracker {
 public:
  constexpr explicit ibpb_tracker(ibpb_policy p, Barrier b = Barrier{}) noexcept : t_(p, b) {}
  constexpr void on_vmcs_load(vmcs_identity next) noexcept { t_.on_switch({next.vmcs, next.vm, next.vcpu}); }
  constexpr void on_vm_entry() noexcept { t_.on_vm_entry(); }
  [[nodiscard]] constexpr ibpb_policy policy() const noexcept { return t_.policy(); }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return t_.barrier(); }

 private:
  x86::ibpb_tracker<Barrier> t_;
};

}  // namespace hvkit::vmx
