// SPDX-License-Identifier: MIT
/// @file
/// @brief After a VM exit: re-injecting the event whose delivery the exit interrupted (SDM
/// Vol. 3C 28.2.4 "Information for VM Exits During Event Delivery") and restoring NMI
/// blocking after an IRET that unblocked NMIs and then faulted or exited (SDM 28.2.3
/// "Information About NMI Unblocking Due to IRET").
///
/// Rules:
/// - IDT-vectoring information valid: the event goes into the next VM entry's injection
///   with the same vector, type and error-code bit; bits 30:12 cleared (bit 12 is undefined
///   in IDT-vectoring information and reserved in the entry field); the error code from the
///   IDT-vectoring error-code field; for software interrupts, privileged software
///   exceptions and software exceptions the VM-exit instruction length (SDM 28.2.5 defines
///   the field for exits during delivery of those events).
/// - Re-injecting an NMI: blocking by NMI must be clear (NMI delivery did not complete, and
///   with "virtual NMIs" VM entry refuses an NMI under virtual-NMI blocking, SDM 27.3.1.5).
/// - Not during event delivery, the exit was caused by a fault or exit on an IRET that had
///   unblocked NMIs (bit 12 of the VM-exit interruption information for exception exits
///   other than #DF, bit 12 of the exit qualification for EPT violations, PML-full and
///   SPP-related exits): set blocking by NMI again, so that the re-executed IRET unblocks
///   them (SDM 28.2.3). Bit 12 is undefined when "NMI exiting" is 1 and "virtual NMIs" is 0
///   (SDM 28.2.1, 28.2.2); then nothing is set.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "controls.hpp"
#include "event_injection.hpp"
#include "exit_reason.hpp"
#include "fields.hpp"
#include "interruptibility.hpp"
#include "interruption_info.hpp"

namespace hvkit::vmx {

/// The exit-information fields the rules read.
struct exit_event_info {
  exit_reason reason = exit_reason::exception_or_nmi;
  idt_vectoring_info idt{};
  std::uint32_t idt_error_code = 0;
  std::uint32_t instruction_length = 0;  ///< VM-exit instruction length
  exit_interruption_info exit_info{};    ///< exception/NMI exits
  std::uint64_t qualification = 0;       ///< EPT violation, PML full, SPP-related event
  /// The pin-based VM-execution controls in force: "NMI exiting" and "virtual NMIs" decide
  /// whether bit 12 (NMI unblocking due to IRET) is defined at all (SDM 28.2.2).
  pin_based pin{};
};

/// What to do before the next VM entry.
struct exit_event_actions {
  injected_event reinject{};      ///< valid: inject this on the next VM entry
  bool set_nmi_blocking = false;  ///< IRET had unblocked NMIs: set blocking by NMI
  bool clear_nmi_blocking = false;///< an NMI is re-injected: clear blocking by NMI
  friend constexpr bool operator==(const exit_event_actions&, const exit_event_actions&) noexcept = default;
};

/// The event from IDT-vectoring information as the next entry's injection (invalid if the
/// exit did not occur during event delivery).
[[nodiscard]] constexpr injected_event reinjection_of(idt_vectoring_info idt, std::uint32_t idt_error_code,
                                                      std::uint32_t exit_instruction_length) noexcept {
  if (!idt.valid()) return {};
  injected_event e{idt.to_entry(), 0, 0};
  if (idt.has_error_code()) e.error_code = idt_error_code;
  if (is_software_event(idt.type())) e.instruction_length = exit_instruction_length;
  return e;
}

/// Bit 12 of the VM-exit interruption information (and of the exit qualification of EPT
/// violations, PML-full and SPP-related exits) is defined: not with "NMI exiting" = 1 and
/// "virtual NMIs" = 0 (SDM 28.2.2: "Bit 12 is undefined in any of the following cases: If
/// the 'NMI exiting' VM-execution control is 1 and the 'virtual NMIs' VM-execution control
/// is 0."). In that configuration blocking by NMI, once in effect, stays in effect as long
/// as the processor is in VMX non-root operation, IRET or not (VM entry's loading of the
/// interruptibility state, SDM 27.3), so there is nothing to restore.
[[nodiscard]] constexpr bool nmi_unblocking_defined(pin_based pin) noexcept {
  return !pin.test(pin_based::nmi_exiting) || pin.test(pin_based::virtual_nmis);
}

/// True if the exit reports "NMI unblocking due to IRET" (SDM 28.2.3).
[[nodiscard]] constexpr bool nmi_unblocked_by_iret(const exit_event_info& x) noexcept {
  if (x.idt.valid()) return false;  // bit 12 is meaningful only outside event delivery
  if (!nmi_unblocking_defined(x.pin)) return false;
  switch (x.reason) {
    case exit_reason::exception_or_nmi:
      return x.exit_info.valid() && x.exit_info.vector() != 8 && x.exit_info.nmi_unblocking();
    case exit_reason::ept_violation:
    case exit_reason::pml_full:
    case exit_reason::spp_event: return (x.qualification >> 12) & 1u;
    default: return false;
  }
}

/// The actions after an exit.
[[nodiscard]] constexpr exit_event_actions events_after_exit(const exit_event_info& x) noexcept {
  exit_event_actions a;
  a.reinject = reinjection_of(x.idt, x.idt_error_code, x.instruction_length);
  a.clear_nmi_blocking = a.reinject.valid() && a.reinject.info.type() == interruption_type::nmi;
  a.set_nmi_blocking = nmi_unblocked_by_iret(x);
  return a;
}

/// Reads the fields the rules need for exit `reason` (IDT-vectoring information always;
/// the rest, and the pin-based controls, only when bit 12 matters).
template <vmcs_backend B>
[[nodiscard, gnu::always_inline]] constexpr result<exit_event_info, vm_fail> read_exit_event_info(B& b, exit_reason reason) noexcept {
  exit_event_info x;
  x.reason = reason;
  auto idt = vmread(b, fields::idt_vectoring_info);
  if (!idt) return unexpected(idt.error());
  x.idt = idt_vectoring_info{idt.value()};
  if (x.idt.valid()) {
    if (x.idt.has_error_code()) {
      auto ec = vmread(b, fields::idt_vectoring_error_code);
      if (!ec) return unexpected(ec.error());
      x.idt_error_code = ec.value();
    }
    if (is_software_event(x.idt.type())) {
      auto len = vmread(b, fields::vm_exit_instruction_length);
      if (!len) return unexpected(len.error());
      x.instruction_length = len.value();
    }
    return x;
  }
  if (reason == exit_reason::exception_or_nmi || reason == exit_reason::ept_violation ||
      reason == exit_reason::pml_full || reason == exit_reason::spp_event) {
    auto p = vmread(b, fields::pin_based_controls);
    if (!p) return unexpected(p.error());
    x.pin = pin_based{static_cast<std::uint32_t>(p.value())};
  }
  if (reason == exit_reason::exception_or_nmi) {
    auto i = vmread(b, fields::vm_exit_interruption_info);
    if (!i) return unexpected(i.error());
    x.exit_info = exit_interruption_info{i.value()};
  } else if (reason == exit_reason::ept_violation || reason == exit_reason::pml_full ||
             reason == exit_reason::spp_event) {
    auto q = vmread(b, fields::exit_qualification);
    if (!q) return unexpected(q.error());
    x.qualification = q.value();
  }
  return x;
}

/// Applies the actions: writes the re-injection and adjusts blocking by NMI.
template <vmcs_backend B>
[[gnu::always_inline]] constexpr result<void, vm_fail> apply_exit_event_actions(B& b, const exit_event_actions& a) noexcept {
  if (a.reinject.valid()) {
    auto r = write_injection(b, a.reinject);
    if (!r) return r;
  }
  if (a.set_nmi_blocking || a.clear_nmi_blocking) {
    auto s = vmread(b, fields::guest_interruptibility_state);
    if (!s) return unexpected(s.error());
    auto v = interruptibility_state{s.value()};
    if (a.set_nmi_blocking) v.set(interruptibility_state::blocking_by_nmi);
    if (a.clear_nmi_blocking) v.reset(interruptibility_state::blocking_by_nmi);
    if (v.raw() != s.value()) return vmwrite(b, fields::guest_interruptibility_state, v.raw());
  }
  return {};
}

/// read_exit_event_info + events_after_exit + apply_exit_event_actions: KVM's
/// vmx_complete_interrupts in one call. Returns the actions taken (the same actions and the
/// same VMCS writes as those three; the tests check one against the other).
///
/// Written as one pass rather than by calling the three: the exit reason is then tested once
/// (an exit outside event delivery that is not an exception, EPT-violation, PML-full or SPP
/// exit, i.e. most exits, costs one VMREAD and that test), and the pin-based controls are
/// read before the field that carries bit 12, which is not read when bit 12 is undefined.
template <vmcs_backend B>
[[gnu::always_inline]] constexpr result<exit_event_actions, vm_fail> complete_exit_events(B& b, exit_reason reason) noexcept {
  // Built in the returned object: a local copied into it at the end is assembled with
  // narrow stores and read back with one wide load, which defeats store forwarding.
  result<exit_event_actions, vm_fail> out{exit_event_actions{}};
  auto idt_raw = vmread(b, fields::idt_vectoring_info);
  if (!idt_raw) return unexpected(idt_raw.error());
  const idt_vectoring_info idt{idt_raw.value()};
  if (idt.valid()) {  // SDM 28.2.4: re-inject the event whose delivery the exit interrupted
    std::uint32_t error_code = 0, length = 0;
    if (idt.has_error_code()) {
      auto ec = vmread(b, fields::idt_vectoring_error_code);
      if (!ec) return unexpected(ec.error());
      error_code = ec.value();
    }
    if (is_software_event(idt.type())) {
      auto len = vmread(b, fields::vm_exit_instruction_length);
      if (!len) return unexpected(len.error());
      length = len.value();
    }
    out->reinject = reinjection_of(idt, error_code, length);
    out->clear_nmi_blocking = idt.type() == interruption_type::nmi;
  } else {  // SDM 28.2.3: NMI unblocking due to IRET, where the exit reports it
    const bool exception = reason == exit_reason::exception_or_nmi;
    switch (reason) {
      case exit_reason::exception_or_nmi:
      case exit_reason::ept_violation:
      case exit_reason::pml_full:
      case exit_reason::spp_event: break;
      default: return out;
    }
    auto p = vmread(b, fields::pin_based_controls);
    if (!p) return unexpected(p.error());
    if (!nmi_unblocking_defined(pin_based{static_cast<std::uint32_t>(p.value())})) return out;
    if (exception) {
      auto i = vmread(b, fields::vm_exit_interruption_info);
      if (!i) return unexpected(i.error());
      const exit_interruption_info info{i.value()};
      out->set_nmi_blocking = info.valid() && info.vector() != 8 && info.nmi_unblocking();
    } else {
      auto q = vmread(b, fields::exit_qualification);
      if (!q) return unexpected(q.error());
      out->set_nmi_blocking = ((q.value() >> 12) & 1u) != 0;
    }
  }
  auto r = apply_exit_event_actions(b, out.value());
  if (!r) return unexpected(r.error());
  return out;
}

}  // namespace hvkit::vmx
