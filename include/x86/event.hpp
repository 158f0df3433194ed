// SPDX-License-Identifier: MIT
/// @file
/// @brief The events a hypervisor injects into a guest or finds interrupted by an exit, in the
/// architecture's own terms, shared by the VMX and SVM encodings (vmx/event_injection.hpp
/// and svm/event_injection.hpp translate to and from their fields).
///
/// The kinds follow how the processor delivers the event (SDM Vol. 3A 6.4 "Sources of
/// Interrupts", 6.12 "Exception and Interrupt Handling"; AMD APM Vol. 2, 8.2 "Vectors"):
/// an external interrupt and an NMI have no instruction; a hardware exception is a fault or
/// trap raised by the processor (its error code pushed as Table 6-1 says, and only in
/// protected mode); INT n, INT3 and INTO are instructions, so delivering them needs the
/// instruction length (the return address points past the instruction) and they are subject
/// to the gate's DPL check (SDM 6.12.1.1); INT1 (ICEBP) raises #DB without the DPL check.
#pragma once

#include <cstdint>

#include "contract.hpp"
#include "exception_merge.hpp"
#include "vector.hpp"

namespace hvkit::x86 {

enum class event_kind : std::uint8_t {
  external_interrupt,
  nmi,
  hardware_exception,
  software_interrupt,             ///< INT n
  software_exception,             ///< INT3 (#BP), INTO (#OF)
  privileged_software_exception,  ///< INT1 / ICEBP (#DB)
};

/// Delivery needs the length of the instruction that raised the event.
[[nodiscard]] constexpr bool is_instruction_event(event_kind k) noexcept {
  return k == event_kind::software_interrupt || k == event_kind::software_exception ||
         k == event_kind::privileged_software_exception;
}

/// One event: kind, vector, the error code if one is delivered, and the instruction length
/// for instruction events.
struct event {
  event_kind kind = event_kind::hardware_exception;
  std::uint8_t vector = 0;
  bool has_error_code = false;
  std::uint32_t error_code = 0;         ///< meaningful if has_error_code
  std::uint8_t instruction_length = 0;  ///< meaningful for instruction events (1-15)

  friend constexpr bool operator==(const event&, const event&) noexcept = default;

  /// A hardware exception on a processor of vendor `cpu`; the error code is delivered exactly
  /// when the vector pushes one there (x86::has_error_code: SDM Table 6-1, APM Table 8-1)
  /// and the guest is in protected mode (exceptions in real mode push none).
  [[nodiscard]] static constexpr event exception(::hvkit::x86::vector v, std::uint32_t error_code, vendor cpu,
                                                 bool protected_mode = true) noexcept {
    const bool ec = protected_mode && ::hvkit::x86::has_error_code(v, cpu);
    return {event_kind::hardware_exception, static_cast<std::uint8_t>(v), ec, ec ? error_code : 0, 0};
  }
  [[nodiscard]] static constexpr event nmi() noexcept { return {event_kind::nmi, 2, false, 0, 0}; }
  [[nodiscard]] static constexpr event external_interrupt(std::uint8_t v) noexcept {
    return {event_kind::external_interrupt, v, false, 0, 0};
  }
  /// INT n, of `length` bytes (2 for CD ib, more with prefixes).
  [[nodiscard]] static constexpr event int_n(std::uint8_t v, std::uint8_t length = 2) noexcept {
    HVKIT_EXPECTS(length >= 1 && length <= 15);
    return {event_kind::software_interrupt, v, false, 0, length};
  }
  [[nodiscard]] static constexpr event int3(std::uint8_t length = 1) noexcept {
    HVKIT_EXPECTS(length >= 1 && length <= 15);
    return {event_kind::software_exception, 3, false, 0, length};
  }
  [[nodiscard]] static constexpr event into(std::uint8_t length = 1) noexcept {
    HVKIT_EXPECTS(length >= 1 && length <= 15);
    return {event_kind::software_exception, 4, false, 0, length};
  }
  [[nodiscard]] static constexpr event int1(std::uint8_t length = 1) noexcept {
    HVKIT_EXPECTS(length >= 1 && length <= 15);
    return {event_kind::privileged_software_exception, 1, false, 0, length};
  }
};

/// The result of queueing an exception on top of an event already pending.
struct queued {
  merge_verdict verdict = merge_verdict::deliver_second;
  event e{};  ///< what to deliver (unused on shutdown)
};

/// Queue hardware exception `second` while `pending` (possibly no event) waits for delivery:
/// the processor's merge (SDM 6.15 Tables 6-4/6-5; APM 8.2.9 "Double-Fault Exception").
/// Only a pending hardware exception is classed by its vector; interrupts, NMIs and
/// instruction events are benign.
[[nodiscard]] constexpr queued queue_exception(const event* pending, exception_event second, vendor cpu,
                                               bool protected_mode = true) noexcept {
  if (pending == nullptr)
    return {merge_verdict::deliver_second, event::exception(second.v, second.error_code, cpu, protected_mode)};
  const bool exc = pending->kind == event_kind::hardware_exception;
  const auto m = merge_exception(exc ? first_event::exception : first_event::interrupt,
                                 static_cast<vector>(pending->vector), second);
  if (m.verdict == merge_verdict::shutdown) return {m.verdict, {}};
  return {m.verdict, event::exception(m.event.v, m.event.error_code, cpu, protected_mode)};
}

}  // namespace hvkit::x86
