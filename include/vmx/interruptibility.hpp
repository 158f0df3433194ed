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

/// What the 27.3.1.5 checks need beyond the fields: the processor and its mode.
struct entry_state_environment {
  bool virtual_nmis = false;  ///< the "virtual NMIs" VM-execution control
  bool in_smm = false;        ///< VM entry executed in SMM (blocking by SMI then allowed)
  /// The processor supports SGX (CPUID.(7,0):EBX[2]); without it bit 4 (enclave
  /// interruption) is reserved too.
  bool sgx = true;
  /// A processor property (SDM 27.3.1.5: "A processor may require bit 0 (blocking by STI) to
  /// be 0 if the valid bit (bit 31) in the VM-entry interruption-information field is 1 and
  /// the interruption type (bits 10:8) in that field has value 2, indicating NMI. Other
  /// processors may not make this requirement."). Default: required, the answer that is
  /// right on either kind of processor for a hypervisor deciding whether it may inject
  /// (vm_entry_env::nmi_refused_under_sti is the same property for check_vm_entry).
  bool nmi_refused_under_sti = true;
};

/// The 27.3.1.5 checks (and the RFLAGS.IF check of 27.3.1.4) relating the injected event,
/// the interruptibility state, the activity state and RFLAGS.IF, one predicate per rule:
/// check_entry_state runs them in order, and the VM-entry rules of
/// vm_entry_guest_checks.hpp call them, so the rules the VM-entry differential checks
/// against the CPU are these. `injecting(e, t)`: the event is valid and of type t.
namespace entry_state_rules {
using is = interruptibility_state;
[[nodiscard]] constexpr bool injecting(const injected_event& e, interruption_type t) noexcept {
  return e.valid() && e.info.type() == t;
}
/// Activity state 0-3 (whether the processor supports it is IA32_VMX_MISC's, checked by the
/// VM-entry rule).
[[nodiscard]] constexpr bool reserved_activity_state(activity_state a) noexcept { return static_cast<std::uint32_t>(a) > 3; }
/// "The reserved bits (bits 31:5) must be 0"; bit 4 too without SGX.
[[nodiscard]] constexpr bool reserved_interruptibility(interruptibility_state s, bool sgx) noexcept {
  return s.any(is::reserved) || (!sgx && s.any(is::enclave_interruption));
}
/// "The field cannot indicate blocking by both STI and MOV SS".
[[nodiscard]] constexpr bool sti_and_mov_ss(interruptibility_state s) noexcept {
  return s.test(is::blocking_by_sti) && s.test(is::blocking_by_mov_ss);
}
/// "Bit 0 (blocking by STI) must be 0 if the IF flag (bit 9) is 0 in the RFLAGS field."
[[nodiscard]] constexpr bool sti_with_if_clear(interruptibility_state s, x86::rflags rflags) noexcept {
  return s.test(is::blocking_by_sti) && !rflags.test(x86::rflags::if_);
}
/// "Bit 2 (blocking by SMI) must be 0 if the processor is not in SMM."
[[nodiscard]] constexpr bool smi_blocking_outside_smm(interruptibility_state s, bool in_smm) noexcept {
  return s.test(is::blocking_by_smi) && !in_smm;
}
/// "If bit 4 (enclave interruption) is 1, bit 1 (blocking by MOV-SS) must be 0".
[[nodiscard]] constexpr bool enclave_with_mov_ss(interruptibility_state s) noexcept {
  return s.test(is::enclave_interruption) && s.test(is::blocking_by_mov_ss);
}
/// "The activity-state field must indicate the active state if the interruptibility-state
/// field indicates blocking by either MOV-SS or by STI".
[[nodiscard]] constexpr bool shadow_while_inactive(activity_state a, interruptibility_state s) noexcept {
  return a != activity_state::active && s.any(is::shadow);
}
/// "Bit 0 (blocking by STI) and bit 1 (blocking by MOV-SS) must both be 0 if ... the
/// interruption type ... has value 0, indicating external interrupt."
[[nodiscard]] constexpr bool interrupt_under_shadow(const injected_event& e, interruptibility_state s) noexcept {
  return injecting(e, interruption_type::external_interrupt) && s.any(is::shadow);
}
/// SDM 27.3.1.4: "The IF flag (RFLAGS[bit 9]) must be 1 if the valid bit (bit 31) in the
/// VM-entry interruption-information field is 1 and the interruption type (bits 10:8) is
/// external interrupt."
[[nodiscard]] constexpr bool interrupt_with_if_clear(const injected_event& e, x86::rflags rflags) noexcept {
  return injecting(e, interruption_type::external_interrupt) && !rflags.test(x86::rflags::if_);
}
/// "Bit 1 (blocking by MOV-SS) must be 0 if ... the interruption type ... has value 2,
/// indicating non-maskable interrupt (NMI)."
[[nodiscard]] constexpr bool nmi_under_mov_ss(const injected_event& e, interruptibility_state s) noexcept {
  return injecting(e, interruption_type::nmi) && s.test(is::blocking_by_mov_ss);
}
/// NMI under blocking by STI, on a processor that refuses it (entry_state_environment::
/// nmi_refused_under_sti; VM-entry failure with exit qualification 3, SDM 28.2.1).
[[nodiscard]] constexpr bool nmi_under_sti(const injected_event& e, interruptibility_state s, bool refused) noexcept {
  return refused && injecting(e, interruption_type::nmi) && s.test(is::blocking_by_sti);
}
/// "Bit 3 (blocking by NMI) must be 0 if the 'virtual NMIs' VM-execution control is 1, ...
/// and the interruption type ... has value 2 (indicating NMI)."
[[nodiscard]] constexpr bool nmi_under_virtual_nmi_blocking(const injected_event& e, interruptibility_state s,
                                                            bool virtual_nmis) noexcept {
  return virtual_nmis && injecting(e, interruption_type::nmi) && s.test(is::blocking_by_nmi);
}
/// The injected event is not one the activity state accepts: "Active. Any interruption is
/// allowed. HLT. The only events allowed are ... external interrupt or non-maskable interrupt
/// (NMI) ... hardware exception and vector 1 (debug exception) or vector 18 (machine-check
/// exception) ... other event and vector 0 (pending MTF VM exit). Shutdown. Only NMIs and
/// machine-check exceptions are allowed. Wait-for-SIPI. No interruptions are allowed."
/// Reserved activity states are the activity rule's, not this one's.
[[nodiscard]] constexpr bool event_blocked_by_activity(const injected_event& e, activity_state a) noexcept {
  if (!e.valid()) return false;
  const auto t = e.info.type();
  const auto v = e.info.vector();
  switch (a) {
    case activity_state::active: return false;
    case activity_state::hlt:
      return !(t == interruption_type::external_interrupt || t == interruption_type::nmi ||
               (t == interruption_type::hardware_exception && (v == 1 || v == 18)) ||
               (t == interruption_type::other_event && v == 0));
    case activity_state::shutdown:
      return !(t == interruption_type::nmi || (t == interruption_type::hardware_exception && v == 18));
    case activity_state::wait_for_sipi: return true;
  }
  return false;
}
}  // namespace entry_state_rules

/// The VM-entry checks that relate the injected event, the interruptibility state, the
/// activity state and RFLAGS.IF (SDM 27.3.1.5; the RFLAGS.IF rule is in 27.3.1.4), in the
/// order of the error enumeration. The hypervisor runs them before VMRESUME to refuse a
/// hostile or inconsistent combination with a typed error instead of a failed entry.
[[nodiscard]] constexpr entry_state_error check_entry_state(const injected_event& e, interruptibility_state s,
                                                            activity_state a, x86::rflags rflags,
                                                            const entry_state_environment& env) noexcept {
  namespace r = entry_state_rules;
  if (r::reserved_activity_state(a)) return entry_state_error::reserved_activity_state;
  if (r::reserved_interruptibility(s, env.sgx)) return entry_state_error::reserved_interruptibility_bits;
  if (r::sti_and_mov_ss(s)) return entry_state_error::sti_and_mov_ss;
  if (r::sti_with_if_clear(s, rflags)) return entry_state_error::sti_with_if_clear;
  if (r::smi_blocking_outside_smm(s, env.in_smm)) return entry_state_error::smi_blocking_outside_smm;
  if (r::enclave_with_mov_ss(s)) return entry_state_error::enclave_with_mov_ss;
  if (r::shadow_while_inactive(a, s)) return entry_state_error::shadow_while_inactive;
  if (r::interrupt_under_shadow(e, s)) return entry_state_error::interrupt_under_shadow;
  if (r::interrupt_with_if_clear(e, rflags)) return entry_state_error::interrupt_with_if_clear;
  if (r::nmi_under_mov_ss(e, s)) return entry_state_error::nmi_under_mov_ss;
  if (r::nmi_under_sti(e, s, env.nmi_refused_under_sti)) return entry_state_error::nmi_under_sti;
  if (r::nmi_under_virtual_nmi_blocking(e, s, env.virtual_nmis)) return entry_state_error::nmi_under_virtual_nmi_blocking;
  if (r::event_blocked_by_activity(e, a)) return entry_state_error::event_blocked_by_activity;
  return entry_state_error::none;
}

/// The same with the environment spelled out: "virtual NMIs", in SMM, SGX; NMI under STI
/// refused (the documented default of entry_state_environment).
[[nodiscard]] constexpr entry_state_error check_entry_state(const injected_event& e, interruptibility_state s,
                                                            activity_state a, x86::rflags rflags,
                                                            bool virtual_nmis, bool in_smm = false,
                                                            bool sgx = true) noexcept {
  return check_entry_state(e, s, a, rflags, entry_state_environment{virtual_nmis, in_smm, sgx, true});
}

}  // namespace hvkit::vmx
