// SPDX-License-Identifier: MIT
/// @file
/// @brief Guest interruptibility state and activity state (SDM Vol. 3C 25.4.2, Tables 25-3
/// and 25-4 in current editions), whether an interrupt or NMI can be injected now, when to
/// request interrupt-window / NMI-window exiting (SDM 26.7.5, 26.7.6), and the VM-entry
/// checks that tie an injected event to interruptibility and activity (SDM 27.3.1.5,
/// "Checks on Guest Non-Register State"; 26.3.1.5 in editions before the VMX chapters were
/// renumbered).
#pragma once

#include <cstdint>

#include "event_injection.hpp"
#include "../x86/flags.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::vmx {

/// The interruptibility-state field.
class interruptibility_state : public x86::flags<interruptibility_state, std::uint32_t> {
 public:
  using flags::flags;
  static const interruptibility_state blocking_by_sti;     ///< 0
  static const interruptibility_state blocking_by_mov_ss;  ///< 1 (also POP SS)
  static const interruptibility_state blocking_by_smi;     ///< 2
  static const interruptibility_state blocking_by_nmi;     ///< 3 (virtual-NMI blocking with "virtual NMIs")
  static const interruptibility_state enclave_interruption;///< 4
  /// Bits 31:5 are reserved and must be 0 (SDM 27.3.1.5).
  static const interruptibility_state reserved;
  /// The one-instruction shadows: STI and MOV SS.
  static const interruptibility_state shadow;
};
inline constexpr interruptibility_state interruptibility_state::blocking_by_sti = bit(0);
inline constexpr interruptibility_state interruptibility_state::blocking_by_mov_ss = bit(1);
inline constexpr interruptibility_state interruptibility_state::blocking_by_smi = bit(2);
inline constexpr interruptibility_state interruptibility_state::blocking_by_nmi = bit(3);
inline constexpr interruptibility_state interruptibility_state::enclave_interruption = bit(4);
inline constexpr interruptibility_state interruptibility_state::reserved = interruptibility_state{0xffff'ffe0u};
inline constexpr interruptibility_state interruptibility_state::shadow = interruptibility_state{0x3};

/// The activity-state field (SDM 25.4.2).
enum class activity_state : std::uint32_t { active = 0, hlt = 1, shutdown = 2, wait_for_sipi = 3 };

/// An external interrupt can be delivered now: RFLAGS.IF = 1, no blocking by STI or MOV SS
/// (SDM 6.8.3, 26.7.5), and the vCPU is active or halted (an interrupt wakes HLT; nothing
/// is delivered in shutdown or wait-for-SIPI, SDM 27.3.1.5).
[[nodiscard]] constexpr bool can_inject_interrupt(x86::rflags rflags, interruptibility_state s,
                                                  activity_state a = activity_state::active) noexcept {
  return rflags.test(x86::rflags::if_) && !s.any(interruptibility_state::shadow) &&
         (a == activity_state::active || a == activity_state::hlt);
}

/// An NMI can be injected now: no (virtual-)NMI blocking, no blocking by MOV SS (VM entry
/// refuses an NMI under MOV SS blocking, SDM 27.3.1.5), no blocking by STI (some processors
/// refuse that combination too, same section), and not in wait-for-SIPI.
[[nodiscard]] constexpr bool can_inject_nmi(interruptibility_state s, activity_state a = activity_state::active) noexcept {
  return !s.any(interruptibility_state::blocking_by_nmi | interruptibility_state::shadow) &&
         a != activity_state::wait_for_sipi;
}

/// What to inject on this VM entry and which window exits to request.
struct injection_plan {
  enum class pick : std::uint8_t { none, nmi, interrupt };
  pick inject = pick::none;
  /// Set "interrupt-window exiting": a VM exit as soon as RFLAGS.IF = 1 and there is no
  /// blocking by STI or MOV SS (SDM 26.7.5).
  bool interrupt_window = false;
  /// Set "NMI-window exiting" (needs "virtual NMIs"): a VM exit as soon as there is no
  /// virtual-NMI blocking and no blocking by MOV SS (SDM 26.7.6).
  bool nmi_window = false;
  friend constexpr bool operator==(const injection_plan&, const injection_plan&) noexcept = default;
};

/// Decides the injection for one VM entry. `already_injecting`: an event (e.g. a
/// re-injected one) already occupies the VM-entry interruption-information field, so
/// nothing else can be injected on this entry. NMIs take priority over external interrupts
/// (SDM 6.9, Table 6-2). An event that cannot go now asks for the window exit that opens
/// when it can.
[[nodiscard]] constexpr injection_plan plan_injection(bool already_injecting, bool nmi_pending, bool interrupt_pending,
                                                      x86::rflags rflags, interruptibility_state s,
                                                      activity_state a = activity_state::active) noexcept {
  injection_plan p;
  bool slot_free = !already_injecting;
  if (nmi_pending) {
    if (slot_free && can_inject_nmi(s, a)) {
      p.inject = injection_plan::pick::nmi;
      slot_free = false;
    } else {
      p.nmi_window = true;
    }
  }
  if (interrupt_pending) {
    if (slot_free && can_inject_interrupt(rflags, s, a)) p.inject = injection_plan::pick::interrupt;
    else p.interrupt_window = true;
  }
  return p;
}

/// Why VM entry would fail on the guest's interruptibility/activity state and RFLAGS.IF
/// together with the injected event (SDM 27.3.1.4-27.3.1.5; VM entry fails with exit reason
/// 33, invalid guest state).
enum class entry_state_error : std::uint8_t {
  none,
  reserved_interruptibility_bits,  ///< bits 31:5 set
  sti_and_mov_ss,                  ///< blocking by STI and by MOV SS both set
  sti_with_if_clear,               ///< blocking by STI while RFLAGS.IF = 0
  interrupt_under_shadow,          ///< external interrupt injected under STI or MOV SS blocking
  interrupt_with_if_clear,         ///< external interrupt injected with RFLAGS.IF = 0 (SDM 27.3.1.4)
  nmi_under_mov_ss,                ///< NMI injected under MOV SS blocking
  nmi_under_sti,                   ///< NMI injected under STI blocking (refused by some processors)
  nmi_under_virtual_nmi_blocking,  ///< NMI injected with "virtual NMIs" and blocking by NMI set
  smi_blocking_outside_smm,        ///< blocking by SMI set outside SMM
  enclave_with_mov_ss,             ///< enclave interruption with blocking by MOV SS
  reserved_activity_state,         ///< activity state above 3
  shadow_while_inactive,           ///< blocking by STI or MOV SS with an activity state other than active
  event_blocked_by_activity,       ///< an event the activity state does not accept (HLT, shutdown, wait-for-SIPI)
};

/// The VM-entry checks that relate the injected event, the interruptibility state, the
/// activity state and RFLAGS.IF (SDM 27.3.1.5; the RFLAGS.IF rule is in 27.3.1.4). The hypervisor runs them before VMRESUME to
/// refuse a hostile or inconsistent combination with a typed error instead of a failed entry.
/// `sgx`: the processor supports SGX (CPUID.(7,0):EBX[2]); without it bit 4 (enclave
/// interruption) is reserved too.
[[nodiscard]] constexpr entry_state_error check_entry_state(const injected_event& e, interruptibility_state s,
                                                            activity_state a, x86::rflags rflags,
                                                            bool virtual_nmis, bool in_smm = false,
                                                            bool sgx = true) noexcept {
  using is = interruptibility_state;
  if (static_cast<std::uint32_t>(a) > 3) return entry_state_error::reserved_activity_state;
  if (s.any(is::reserved) || (!sgx && s.any(is::enclave_interruption)))
    return entry_state_error::reserved_interruptibility_bits;
  if (s.test(is::blocking_by_sti) && s.test(is::blocking_by_mov_ss)) return entry_state_error::sti_and_mov_ss;
  if (s.test(is::blocking_by_sti) && !rflags.test(x86::rflags::if_)) return entry_state_error::sti_with_if_clear;
  if (s.test(is::blocking_by_smi) && !in_smm) return entry_state_error::smi_blocking_outside_smm;
  if (s.test(is::enclave_interruption) && s.test(is::blocking_by_mov_ss)) return entry_state_error::enclave_with_mov_ss;
  if (a != activity_state::active && s.any(is::shadow)) return entry_state_error::shadow_while_inactive;
  if (!e.valid()) return entry_state_error::none;
  const auto t = e.info.type();
  if (t == interruption_type::external_interrupt && s.any(is::shadow)) return entry_state_error::interrupt_under_shadow;
  // SDM 27.3.1.4 (checks on guest RFLAGS): IF must be 1 to inject an external interrupt.
  if (t == interruption_type::external_interrupt && !rflags.test(x86::rflags::if_))
    return entry_state_error::interrupt_with_if_clear;
  if (t == interruption_type::nmi) {
    if (s.test(is::blocking_by_mov_ss)) return entry_state_error::nmi_under_mov_ss;
    if (s.test(is::blocking_by_sti)) return entry_state_error::nmi_under_sti;
    if (virtual_nmis && s.test(is::blocking_by_nmi)) return entry_state_error::nmi_under_virtual_nmi_blocking;
  }
  // Events each activity state accepts (SDM 27.3.1.5, activity state).
  const auto v = e.info.vector();
  switch (a) {
    case activity_state::active: break;
    case activity_state::hlt:
      if (t == interruption_type::external_interrupt || t == interruption_type::nmi) break;
      if (t == interruption_type::hardware_exception && (v == 1 || v == 18)) break;
      if (t == interruption_type::other_event && v == 0) break;
      return entry_state_error::event_blocked_by_activity;
    case activity_state::shutdown:
      if (t == interruption_type::nmi) break;
      if (t == interruption_type::hardware_exception && v == 18) break;
      return entry_state_error::event_blocked_by_activity;
    case activity_state::wait_for_sipi: return entry_state_error::event_blocked_by_activity;
  }
  return entry_state_error::none;
}

}  // namespace hvkit::vmx
