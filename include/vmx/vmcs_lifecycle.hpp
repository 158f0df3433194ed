// SPDX-License-Identifier: MIT
/// @file
/// @brief Per-vCPU VMCS lifecycle across physical CPUs as a typed state machine: the launch
/// state (clear/launched), on which logical processor the VMCS is active, which VMCS is
/// current on each processor, and the VMCLEAR/VMPTRLD/VMLAUNCH/VMRESUME rules for moving a
/// vCPU between processors (SDM Vol. 3C 25.1 "Overview", 25.11.1 "Software Use of Virtual-
/// Machine Control Structures", 25.11.3 "Initializing a VMCS", Figure 25-1 "States of VMCS X";
/// 31.3 VMCLEAR/VMPTRLD/VMLAUNCH/VMRESUME). `physical_cpu` joins it to the per-CPU IBPB
/// tracker of vmx/ibpb.hpp.
///
/// The rules:
///  - VMLAUNCH needs the current VMCS in the clear launch state (else VMfailValid, error 4);
///    VMRESUME needs it launched (else VMfailValid, error 5); with no current VMCS both are
///    VMfailInvalid. A successful VMLAUNCH makes the state launched.
///  - VMCLEAR makes the VMCS inactive and clear, writes its processor-cached data to memory,
///    and, if it was current, makes the current-VMCS pointer invalid.
///  - "A VMCS that is made active on more than one logical processor may become corrupted"
///    (25.1): to migrate, VMCLEAR it on the old processor (the only one holding its cached
///    data), then VMPTRLD it on the new one, and enter with VMLAUNCH (25.11.1: software
///    "should use VMLAUNCH" for a VMCS whose launch state is clear). The processor does not
///    detect the violations; this model reports them as typed errors.
#pragma once

#include <cstdint>

#include "ibpb.hpp"
#include "vm_fail.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// A logical processor (any dense id the hypervisor uses).
using cpu_id = std::uint32_t;
inline constexpr cpu_id no_cpu = ~cpu_id{0};

/// The launch state of a VMCS (25.1).
enum class launch_state : std::uint8_t { clear, launched };

/// A VMCS and its state in the model. `id` is its physical address (or any non-zero unique id).
struct vmcs_state {
  std::uint64_t id = 0;
  launch_state launch = launch_state::clear;
  cpu_id active_on = no_cpu;  ///< the processor it is active on, or no_cpu (inactive)
};

/// The per-processor state: its current VMCS (0 = the current-VMCS pointer is invalid).
struct cpu_vmcs {
  cpu_id cpu = 0;
  std::uint64_t current = 0;
};

/// An illegal operation, architectural (the instruction fails) or a software rule (the
/// processor would not detect it and the VMCS may be corrupted).
enum class lifecycle_error : std::uint8_t {
  none,
  no_current_vmcs,        ///< VMLAUNCH/VMRESUME with no current VMCS: VMfailInvalid
  vmlaunch_non_clear,     ///< VMfailValid, VM-instruction error 4
  vmresume_non_launched,  ///< VMfailValid, VM-instruction error 5
  not_current,            ///< entering a VMCS that is not this processor's current one
  active_on_other_cpu,    ///< VMPTRLD here of a VMCS still active on another processor
  vmclear_on_other_cpu,   ///< VMCLEAR here of a VMCS active on another processor
};

/// The VMX instruction failure for an architectural error (no_current_vmcs,
/// vmlaunch_non_clear, vmresume_non_launched); `vm_fail{}` for a software rule.
[[nodiscard]] constexpr vm_fail vm_fail_of(lifecycle_error e, vmx_instruction i) noexcept {
  switch (e) {
    case lifecycle_error::no_current_vmcs: return vm_fail::fail_invalid(i);
    case lifecycle_error::vmlaunch_non_clear: return vm_fail::fail_valid(i, vm_instruction_error::vmlaunch_non_clear_vmcs);
    case lifecycle_error::vmresume_non_launched:
      return vm_fail::fail_valid(i, vm_instruction_error::vmresume_non_launched_vmcs);
    default: return vm_fail{};
  }
}

/// VMCLEAR of `v` executed on `c`.
constexpr result<void, lifecycle_error> vmclear(vmcs_state& v, cpu_vmcs& c) noexcept {
  if (v.active_on != no_cpu && v.active_on != c.cpu) return unexpected(lifecycle_error::vmclear_on_other_cpu);
  v.launch = launch_state::clear;
  v.active_on = no_cpu;
  if (c.current == v.id) c.current = 0;  // "the current-VMCS pointer ... made invalid"
  return {};
}

/// VMPTRLD of `v` executed on `c`: `v` becomes active on `c` and current. Other VMCSs active on
/// `c` stay active (a processor may have several active VMCSs, one current).
constexpr result<void, lifecycle_error> vmptrld(vmcs_state& v, cpu_vmcs& c) noexcept {
  if (v.active_on != no_cpu && v.active_on != c.cpu) return unexpected(lifecycle_error::active_on_other_cpu);
  v.active_on = c.cpu;
  c.current = v.id;
  return {};
}

namespace detail {
constexpr result<void, lifecycle_error> check_current(const vmcs_state& v, const cpu_vmcs& c) noexcept {
  if (c.current == 0) return unexpected(lifecycle_error::no_current_vmcs);
  if (c.current != v.id || v.active_on != c.cpu) return unexpected(lifecycle_error::not_current);
  return {};
}
}  // namespace detail

/// VMLAUNCH of the current VMCS `v` on `c`; `entered`: the VM entry succeeded (a VM-entry
/// failure leaves the launch state clear).
constexpr result<void, lifecycle_error> vmlaunch(vmcs_state& v, const cpu_vmcs& c, bool entered = true) noexcept {
  if (auto r = detail::check_current(v, c); !r) return r;
  if (v.launch != launch_state::clear) return unexpected(lifecycle_error::vmlaunch_non_clear);
  if (entered) v.launch = launch_state::launched;
  return {};
}

/// VMRESUME of the current VMCS `v` on `c`.
constexpr result<void, lifecycle_error> vmresume(const vmcs_state& v, const cpu_vmcs& c) noexcept {
  if (auto r = detail::check_current(v, c); !r) return r;
  if (v.launch != launch_state::launched) return unexpected(lifecycle_error::vmresume_non_launched);
  return {};
}

/// The entry instruction `v` needs next: VMLAUNCH while clear, VMRESUME once launched.
[[nodiscard]] constexpr vmx_instruction entry_instruction(const vmcs_state& v) noexcept {
  return v.launch == launch_state::clear ? vmx_instruction::vmlaunch : vmx_instruction::vmresume;
}

/// A physical CPU: its current VMCS and its IBPB tracker (one per processor: the barrier is
/// needed when the previous VMCS loaded on *this* processor belonged to another domain).
template <class Barrier = pred_cmd_barrier>
class physical_cpu {
 public:
  constexpr physical_cpu(cpu_id id, ibpb_policy p, Barrier b = Barrier{}) noexcept : cpu_{id, 0}, ibpb_(p, b) {}

  /// Makes vCPU `v` (of guest `vm`, vCPU `vcpu`) current here: VMPTRLD unless it already is,
  /// and the IBPB decision for the switch.
  constexpr result<void, lifecycle_error> load(vmcs_state& v, std::uint32_t vm, std::uint32_t vcpu) noexcept {
    if (cpu_.current == v.id && v.active_on == cpu_.cpu) return {};
    if (auto r = vmptrld(v, cpu_); !r) return r;
    ibpb_.on_vmcs_load({v.id, vm, vcpu});
    return {};
  }
  /// VMCLEAR here (before `v` may run on another processor).
  constexpr result<void, lifecycle_error> clear(vmcs_state& v) noexcept { return vmclear(v, cpu_); }
  /// The entry: VMLAUNCH or VMRESUME as the launch state requires, after the IBPB decision.
  constexpr result<vmx_instruction, lifecycle_error> enter(vmcs_state& v) noexcept {
    const vmx_instruction i = entry_instruction(v);
    auto r = i == vmx_instruction::vmlaunch ? vmlaunch(v, cpu_) : vmresume(v, cpu_);
    if (!r) return unexpected(r.error());
    ibpb_.on_vm_entry();
    return i;
  }
  [[nodiscard]] constexpr const cpu_vmcs& state() const noexcept { return cpu_; }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return ibpb_.barrier(); }

 private:
  cpu_vmcs cpu_;
  ibpb_tracker<Barrier> ibpb_;
};

}  // namespace hvkit::vmx
