// SPDX-License-Identifier: MIT
/// @file
/// @brief IBPB across VMCB switches: the vendor-neutral policies and tracker of x86/ibpb.hpp
/// under SVM names. There is no VMPTRLD on SVM: the VMCB is the operand of each VMRUN, so a
/// "switch" is running another VMCB than the last one on this CPU (vmcb01 <-> vmcb02 of one
/// vCPU when it runs a nested guest, or another guest's VMCB).
///
/// Call on_vmcb_switch() when the hypervisor changes the VMCB it will run (e.g. emulating
/// VMRUN or #VMEXIT for a nested guest, or scheduling another vCPU), and on_vmrun() right
/// before every VMRUN; on_vmrun(id) does both for a hypervisor that knows the VMCB only there.
#pragma once

#include <cstdint>

#include "../x86/ibpb.hpp"

namespace hvkit::svm {

using ibpb_policy = x86::ibpb_policy;
using pred_cmd_barrier = x86::pred_cmd_barrier;

/// Identifies a VMCB and its security domain.
struct vmcb_identity {
  std::uint64_t vmcb = 0;  ///< the VMCB (physical address or any unique id; 0 = none)
  std::uint32_t vm = 0;
  std::uint32_t vcpu = 0;
  friend constexpr bool operator==(const vmcb_identity&, const vmcb_identity&) noexcept = default;
};

template <class Barrier = pred_cmd_barrier>
class ibpb_tracker {
 public:
  constexpr explicit ibpb_tracker(ibpb_policy p, Barrier b = Barrier{}) noexcept : t_(p, b) {}
  constexpr void on_vmcb_switch(vmcb_identity next) noexcept {
    if (have_ && current_ == next) return;  // the same VMCB again is no switch
    t_.on_switch({next.vmcb, next.vm, next.vcpu});
    current_ = next;
    have_ = true;
  }
  /// Right before VMRUN (the deferred policy decides here).
  constexpr void on_vmrun() noexcept { t_.on_vm_entry(); }
  /// Right before VMRUN of `id`: on_vmcb_switch(id) then on_vmrun().
  constexpr void on_vmrun(vmcb_identity id) noexcept {
    on_vmcb_switch(id);
    on_vmrun();
  }
  [[nodiscard]] constexpr ibpb_policy policy() const noexcept { return t_.policy(); }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return t_.barrier(); }

 private:
  x86::ibpb_tracker<Barrier> t_;
  vmcb_identity current_{};
  bool have_ = false;
};

}  // namespace hvkit::svm
