// SPDX-License-Identifier: MIT
/// @file
/// @brief INIT and SIPI under VMX: the activity states a processor supports for guests
/// (IA32_VMX_MISC bits 8:6, SDM Vol. 3D A.6), the INIT (basic exit reason 3) and SIPI (4) VM
/// exits and the SIPI vector in the exit qualification (SDM Vol. 3C 26.2 "Other Causes of VM
/// Exits"; 28.2.1: the exit qualification of a SIPI exit is the SIPI vector), and what a hypervisor does with
/// each for a vCPU (x86/init_sipi.hpp holds the architectural state).
///
/// SDM 26.2: "INIT signals. INIT signals cause VM exits. A logical processor performs none of
/// the operations normally associated with these events." "Start-up IPIs (SIPIs). SIPIs cause
/// VM exits. If a logical processor is not in the wait-for-SIPI activity state when a SIPI
/// arrives, no VM exit occurs and the SIPI is discarded." In VMX root operation INIT is blocked
/// (SDM 24.8: "INIT signals are blocked whenever a logical processor is in VMX root operation").
#pragma once

#include <cstdint>

#include "exit_reason.hpp"
#include "interruptibility.hpp"
#include "../x86/init_sipi.hpp"

namespace hvkit::vmx {

/// IA32_VMX_MISC bits 8:6: "the activity states supported by the implementation": bit 6 HLT,
/// bit 7 shutdown, bit 8 wait-for-SIPI. Active (0) is always supported; VM entry with an
/// activity state the processor does not support fails (SDM 27.3.1.5).
[[nodiscard]] constexpr bool activity_state_supported(std::uint64_t vmx_misc, activity_state a) noexcept {
  switch (a) {
    case activity_state::active: return true;
    case activity_state::hlt: return (vmx_misc >> 6) & 1u;
    case activity_state::shutdown: return (vmx_misc >> 7) & 1u;
    case activity_state::wait_for_sipi: return (vmx_misc >> 8) & 1u;
  }
  return false;
}

/// The SIPI vector of a SIPI VM exit: exit qualification bits 7:0 (bits 63:8 are 0).
[[nodiscard]] constexpr std::uint8_t sipi_vector(std::uint64_t exit_qualification) noexcept {
  return static_cast<std::uint8_t>(exit_qualification);
}

/// What the hypervisor does for the vCPU on an INIT or SIPI exit.
enum class init_sipi_action : std::uint8_t {
  none,                 ///< not an INIT/SIPI exit
  enter_wait_for_sipi,  ///< INIT: load x86::state_after_init, then wait for a SIPI (AP)
  restart_at_reset,     ///< INIT of the bootstrap processor: run from the reset vector
  start_at_sipi_vector, ///< SIPI while waiting: apply x86::apply_sipi(vector), activity active
};

/// The action for `reason` on a vCPU that is (`bsp`) the bootstrap processor. A SIPI exit only
/// happens in wait-for-SIPI (26.2), so it always starts the vCPU.
[[nodiscard]] constexpr init_sipi_action on_exit(exit_reason reason, bool bsp) noexcept {
  switch (reason) {
    case exit_reason::init_signal:
      return x86::on_init(bsp) == x86::mp_state::running ? init_sipi_action::restart_at_reset
                                                          : init_sipi_action::enter_wait_for_sipi;
    case exit_reason::sipi: return init_sipi_action::start_at_sipi_vector;
    default: return init_sipi_action::none;
  }
}

/// The guest activity state for a vCPU in MP state `s`. Waiting for a SIPI, the vCPU can be
/// entered in the wait-for-SIPI activity state only if IA32_VMX_MISC[8] says the processor
/// supports it (`enterable`); otherwise the hypervisor keeps it off the CPU until its virtual
/// SIPI arrives.
struct guest_activity {
  activity_state state = activity_state::active;
  bool enterable = true;
};
[[nodiscard]] constexpr guest_activity activity_for(x86::mp_state s, std::uint64_t vmx_misc) noexcept {
  if (s == x86::mp_state::running) return {activity_state::active, true};
  if (activity_state_supported(vmx_misc, activity_state::wait_for_sipi)) return {activity_state::wait_for_sipi, true};
  return {activity_state::wait_for_sipi, false};
}

}  // namespace hvkit::vmx
