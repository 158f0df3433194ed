// SPDX-License-Identifier: MIT
/// @file
/// @brief Event injection: the three VM-entry event-injection fields as one value
/// (`injected_event`: interruption information, exception error code, instruction length,
/// SDM Vol. 3C 25.8.3), constructors for each kind of event, the VM-entry checks on them
/// (SDM 27.2.1.3), writing them to a VMCS backend, and queueing an exception on top of an
/// event already set up for injection with the processor's merge rules (SDM 6.15).
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"
#include "fields.hpp"
#include "interruption_info.hpp"
#include "../x86/event.hpp"
#include "../x86/exception_merge.hpp"
#include "../x86/result.hpp"
#include "../x86/vector.hpp"

namespace hvkit::vmx {

namespace detail {
/// delivers_error_code() for every vector: one byte load on the injection path, where a
/// mask needs a range test for vectors 32-255 (a compare, a set and an and, which GCC also
/// duplicates into both sides of the caller's branches).
inline constexpr std::array<std::uint8_t, 256> vm_entry_error_code_vectors = [] {
  std::array<std::uint8_t, 256> t{};
  for (unsigned v : {8u, 10u, 11u, 12u, 13u, 14u, 17u}) t[v] = 1;
  return t;
}();
}  // namespace detail

/// The vectors VM entry requires to be injected with an error code (SDM 27.2.1.3, current
/// editions: "#DF (vector 8), #TS (10), #NP (11), #SS (12), #GP (13), #PF (14), or #AC (17)")
/// when IA32_VMX_BASIC[56] is 0 and the guest's CR0.PE is 1. Every other vector (0-7, 9, 15,
/// 16, 18-31) must then be injected without one, #CP (21) included: on such a processor VM
/// entry cannot deliver #CP with its error code. x86::has_error_code(v, vendor::intel) is
/// the architectural push (#CP included).
[[nodiscard, gnu::always_inline]] constexpr bool delivers_error_code(std::uint8_t vector) noexcept {
  // A table, not a branch on the vector (the vector of an exception queued on an exit is
  // data, not a pattern a predictor learns).
  return detail::vm_entry_error_code_vectors[vector] != 0;
}

/// The VM-entry event-injection fields.
struct injected_event {
  entry_interruption_info info{};
  std::uint32_t error_code = 0;          ///< meaningful if info.has_error_code()
  std::uint32_t instruction_length = 0;  ///< meaningful for software events
  [[nodiscard]] constexpr bool valid() const noexcept { return info.valid(); }
  friend constexpr bool operator==(const injected_event&, const injected_event&) noexcept = default;
};

/// A hardware exception, built so that the VM-entry checks accept it
/// (check_injection_fields with the same `protected_mode` and `any_error_code`).
/// `protected_mode`: the guest's CR0.PE (SDM 27.2.1.3: no error code with CR0.PE = 0; real
/// mode pushes none). `any_error_code`: IA32_VMX_BASIC[56] (SDM A.1), the processor lets a
/// hardware exception be injected with or without an error code; then the error code is the
/// architectural one (x86::has_error_code for Intel: #CP included), else VM entry's list
/// (delivers_error_code: #CP without). #BP and #OF raised by INT3/INTO are software
/// exceptions: use software_exception().
[[nodiscard, gnu::always_inline]] constexpr injected_event hardware_exception(x86::vector v, std::uint32_t error_code = 0,
                                                          bool protected_mode = true,
                                                          bool any_error_code = false) noexcept {
  const auto vec = static_cast<std::uint8_t>(v);
  const bool ec = protected_mode &&
                  (any_error_code ? x86::has_error_code(v, x86::vendor::intel) : delivers_error_code(vec));
  return {entry_interruption_info::make(vec, interruption_type::hardware_exception, ec), ec ? error_code : 0, 0};
}
/// An NMI (vector 2, type NMI).
[[nodiscard]] constexpr injected_event nmi() noexcept {
  return {entry_interruption_info::make(2, interruption_type::nmi, false), 0, 0};
}
/// An external interrupt on `vector`.
[[nodiscard]] constexpr injected_event external_interrupt(std::uint8_t vector) noexcept {
  return {entry_interruption_info::make(vector, interruption_type::external_interrupt, false), 0, 0};
}
/// INT n, with the length of the INT instruction (RIP points at it; delivery pushes
/// RIP + length as the return address, SDM 27.6.1.1).
[[nodiscard]] constexpr injected_event software_interrupt(std::uint8_t vector, std::uint32_t instruction_length) noexcept {
  return {entry_interruption_info::make(vector, interruption_type::software_interrupt, false), 0, instruction_length};
}
/// INT3 (#BP) or INTO (#OF) as the instruction raises them: a software exception.
[[nodiscard]] constexpr injected_event software_exception(x86::vector v, std::uint32_t instruction_length) noexcept {
  HVKIT_EXPECTS(v == x86::vector::bp || v == x86::vector::of);
  return {entry_interruption_info::make(static_cast<std::uint8_t>(v), interruption_type::software_exception, false), 0,
          instruction_length};
}
[[nodiscard]] constexpr injected_event int3(std::uint32_t instruction_length = 1) noexcept {
  return software_exception(x86::vector::bp, instruction_length);
}
[[nodiscard]] constexpr injected_event into(std::uint32_t instruction_length = 1) noexcept {
  return software_exception(x86::vector::of, instruction_length);
}
/// INT1 (ICEBP, opcode F1): a privileged software exception on vector 1.
[[nodiscard]] constexpr injected_event privileged_software_exception(std::uint32_t instruction_length = 1) noexcept {
  return {entry_interruption_info::make(1, interruption_type::privileged_software_exception, false), 0,
          instruction_length};
}
/// A pending MTF VM exit (type other event, vector 0; SDM 27.6.2).
[[nodiscard]] constexpr injected_event pending_mtf() noexcept {
  return {entry_interruption_info::make(0, interruption_type::other_event, false), 0, 0};
}

/// The VM-entry injection of a vendor-neutral event (x86/event.hpp): each kind has its own
/// interruption type on VMX; the error-code bit and the instruction length are taken as the
/// event states them.
[[nodiscard]] constexpr injected_event from_event(const x86::event& e) noexcept {
  interruption_type t = interruption_type::hardware_exception;
  switch (e.kind) {
    case x86::event_kind::external_interrupt: t = interruption_type::external_interrupt; break;
    case x86::event_kind::nmi: t = interruption_type::nmi; break;
    case x86::event_kind::hardware_exception: t = interruption_type::hardware_exception; break;
    case x86::event_kind::software_interrupt: t = interruption_type::software_interrupt; break;
    case x86::event_kind::software_exception: t = interruption_type::software_exception; break;
    case x86::event_kind::privileged_software_exception: t = interruption_type::privileged_software_exception; break;
  }
  return {entry_interruption_info::make(e.vector, t, e.has_error_code), e.has_error_code ? e.error_code : 0,
          is_software_event(t) ? e.instruction_length : 0u};
}

/// The vendor-neutral event of a valid injection (or of IDT-vectoring information turned into
/// one with to_entry()). Types 1 and 7 (reserved, other event) have no neutral kind: they come
/// back as hardware exceptions of their vector.
[[nodiscard]] constexpr x86::event to_event(const injected_event& i) noexcept {
  x86::event e{};
  e.vector = i.info.vector();
  e.has_error_code = i.info.has_error_code();
  e.error_code = e.has_error_code ? i.error_code : 0;
  switch (i.info.type()) {
    case interruption_type::external_interrupt: e.kind = x86::event_kind::external_interrupt; break;
    case interruption_type::nmi: e.kind = x86::event_kind::nmi; break;
    case interruption_type::software_interrupt: e.kind = x86::event_kind::software_interrupt; break;
    case interruption_type::software_exception: e.kind = x86::event_kind::software_exception; break;
    case interruption_type::privileged_software_exception: e.kind = x86::event_kind::privileged_software_exception; break;
    default: e.kind = x86::event_kind::hardware_exception; break;
  }
  if (x86::is_instruction_event(e.kind)) e.instruction_length = static_cast<std::uint8_t>(i.instruction_length);
  return e;
}

/// Why VM entry would fail on the event-injection fields (SDM 27.2.1.3; VM entry fails
/// with VM-instruction error 7, "invalid control field").
enum class injection_error : std::uint8_t {
  none,
  reserved_type,         ///< interruption type 1
  mtf_unsupported,       ///< type 7 without the monitor-trap-flag capability
  nmi_vector,            ///< type NMI with a vector other than 2
  exception_vector,      ///< type hardware exception with a vector above 31
  other_event_vector,    ///< type other event with a vector other than 0
  error_code_mismatch,   ///< deliver-error-code set where it must be clear, or clear where it must be set
  reserved_bits,         ///< bits 30:12 not 0
  error_code_reserved,   ///< an error code is delivered and its bits 31:16 are not 0
  instruction_length,    ///< software event with a length outside 1..15 (0 only with IA32_VMX_MISC[30])
};

/// What the checks depend on beyond the fields themselves.
struct injection_environment {
  /// The guest's CR0.PE (the CR0 field of the guest-state area). Current SDM editions tie the
  /// deliver-error-code rule to CR0.PE alone; editions up to about 2016 said "the
  /// 'unrestricted guest' VM-execution control is 0, or CR0.PE = 1" (which is what
  /// vm_entry_env::error_code_older_wording asks the VM-entry checks for).
  bool protected_mode = true;
  bool mtf_supported = true;           ///< IA32_VMX_PROCBASED_CTLS allows "monitor trap flag"
  bool zero_length_allowed = false;    ///< IA32_VMX_MISC bit 30
  /// IA32_VMX_BASIC bit 56 (SDM A.1): a hardware exception may be injected with or without an
  /// error code, whatever its vector (other events still never deliver one). Processors with
  /// CET report it; injecting #CP with its error code needs it.
  bool any_error_code = false;
};

/// The event-injection checks of SDM 27.2.1.3, one predicate per rule: check_injection_fields
/// runs them in order, and the VM-entry rules of vm_entry_controls_checks.hpp
/// (injection_type_reserved, injection_vector, injection_error_code_missing, ...) call them,
/// so the rules the VM-entry differential checks against the CPU are these. Each is false
/// for an invalid event (valid bit clear).
namespace injection_rules {
/// Bits 30:12 reserved.
[[nodiscard]] constexpr bool reserved_bits(const injected_event& e) noexcept {
  return e.valid() && (e.info.raw() & interruption_bits::entry_reserved) != 0;
}
/// "Value 1 is reserved on all logical processors".
[[nodiscard]] constexpr bool reserved_type(const injected_event& e) noexcept {
  return e.valid() && e.info.type() == interruption_type::reserved;
}
/// "value 7 (other event) is reserved on logical processors that do not support the
/// 1-setting of the 'monitor trap flag' VM-execution control".
[[nodiscard]] constexpr bool mtf_unsupported(const injected_event& e, const injection_environment& env) noexcept {
  return e.valid() && e.info.type() == interruption_type::other_event && !env.mtf_supported;
}
/// The vector against the type: NMI 2, hardware exception at most 31, other event 0.
[[nodiscard]] constexpr injection_error vector_error(const injected_event& e) noexcept {
  if (!e.valid()) return injection_error::none;
  const auto t = e.info.type();
  const auto v = e.info.vector();
  if (t == interruption_type::nmi && v != 2) return injection_error::nmi_vector;
  if (t == interruption_type::hardware_exception && v > 31) return injection_error::exception_vector;
  if (t == interruption_type::other_event && v != 0) return injection_error::other_event_vector;
  return injection_error::none;
}
/// SDM 27.2.1.3: "The field's deliver-error-code bit (bit 11) must be 1 if each of the
/// following holds: (1) the interruption type is hardware exception; (2) bit 0
/// (corresponding to CR0.PE) is set in the CR0 field in the guest-state area; (3)
/// IA32_VMX_BASIC[56] is read as 0 (see Appendix A.1); and (4) the vector indicates one of
/// the following exceptions: #DF (vector 8), #TS (10), #NP (11), #SS (12), #GP (13), #PF
/// (14), or #AC (17)."
[[nodiscard]] constexpr bool error_code_missing(const injected_event& e, const injection_environment& env) noexcept {
  return e.valid() && !e.info.has_error_code() && e.info.type() == interruption_type::hardware_exception &&
         env.protected_mode && !env.any_error_code && delivers_error_code(e.info.vector());
}
/// SDM 27.2.1.3: "The field's deliver-error-code bit must be 0 if any of the following
/// holds: (1) the interruption type is not hardware exception; (2) bit 0 is clear in the CR0
/// field in the guest-state area; or (3) IA32_VMX_BASIC[56] is read as 0 and the vector is
/// in one of the following ranges: 0-7, 9, 15, 16, or 18-31."
[[nodiscard]] constexpr bool error_code_unexpected(const injected_event& e, const injection_environment& env) noexcept {
  return e.valid() && e.info.has_error_code() &&
         (e.info.type() != interruption_type::hardware_exception || !env.protected_mode ||
          (!env.any_error_code && !delivers_error_code(e.info.vector())));
}
/// An error code is delivered and its bits 31:16 are not 0 ("If the deliver-error-code bit
/// (bit 11) is 1, bits 31:16 of the VM-entry exception error-code field are 0").
[[nodiscard]] constexpr bool error_code_reserved(const injected_event& e) noexcept {
  return e.valid() && e.info.has_error_code() && (e.error_code >> 16) != 0;
}
/// Software interrupt, software exception or privileged software exception: instruction
/// length 1-15 (0 only with IA32_VMX_MISC[30]).
[[nodiscard]] constexpr bool instruction_length_invalid(const injected_event& e, const injection_environment& env) noexcept {
  if (!e.valid() || !is_software_event(e.info.type())) return false;
  return e.instruction_length > 15 || (e.instruction_length == 0 && !env.zero_length_allowed);
}
}  // namespace injection_rules

/// The VM-entry checks on the event-injection fields (SDM 27.2.1.3), in the order the
/// error enumeration lists them. An invalid event (valid bit clear) passes.
[[nodiscard]] constexpr injection_error check_injection_fields(const injected_event& e,
                                                                const injection_environment& env = {}) noexcept {
  namespace r = injection_rules;
  if (!e.valid()) return injection_error::none;
  if (r::reserved_bits(e)) return injection_error::reserved_bits;
  if (r::reserved_type(e)) return injection_error::reserved_type;
  if (r::mtf_unsupported(e, env)) return injection_error::mtf_unsupported;
  if (const auto v = r::vector_error(e); v != injection_error::none) return v;
  if (r::error_code_missing(e, env) || r::error_code_unexpected(e, env)) return injection_error::error_code_mismatch;
  if (r::error_code_reserved(e)) return injection_error::error_code_reserved;
  if (r::instruction_length_invalid(e, env)) return injection_error::instruction_length;
  return injection_error::none;
}

/// Writes the event to the VM-entry fields: interruption information always (an invalid
/// event clears the field, cancelling a previous injection), the error code only if it is
/// delivered, the instruction length only for software events.
template <vmcs_backend B>
[[gnu::always_inline]] constexpr result<void, vm_fail> write_injection(B& b, const injected_event& e) noexcept {
  if (e.valid() && e.info.has_error_code()) {
    auto r = vmwrite(b, fields::vm_entry_exception_error_code, e.error_code);
    if (!r) return r;
  }
  if (e.valid() && is_software_event(e.info.type())) {
    auto r = vmwrite(b, fields::vm_entry_instruction_length, e.instruction_length);
    if (!r) return r;
  }
  return vmwrite(b, fields::vm_entry_interruption_info, e.info.raw());
}

/// The event set up for the next VM entry, read back from the VMCS.
template <vmcs_backend B>
[[nodiscard, gnu::always_inline]] constexpr result<injected_event, vm_fail> read_injection(B& b) noexcept {
  auto i = vmread(b, fields::vm_entry_interruption_info);
  if (!i) return unexpected(i.error());
  injected_event e{entry_interruption_info{i.value()}, 0, 0};
  if (e.valid() && e.info.has_error_code()) {
    auto c = vmread(b, fields::vm_entry_exception_error_code);
    if (!c) return unexpected(c.error());
    e.error_code = c.value();
  }
  if (e.valid() && is_software_event(e.info.type())) {
    auto l = vmread(b, fields::vm_entry_instruction_length);
    if (!l) return unexpected(l.error());
    e.instruction_length = l.value();
  }
  return e;
}

/// The result of queueing an exception on top of a pending injection.
struct queued_event {
  /// shutdown: the guest triple-faulted (a contributory or page-fault exception while
  /// delivering #DF); the hypervisor ends or resets the VM instead of entering it.
  x86::merge_verdict verdict = x86::merge_verdict::deliver_second;
  injected_event event{};  ///< what to inject (unused on shutdown)
};

/// Queue hardware exception `second` (its error code pushed per delivers_error_code) when
/// `pending` may already hold an event, e.g. one re-injected from IDT-vectoring
/// information: the processor's merge (SDM 6.15 Table 6-5). Only a pending hardware
/// exception is classed by its vector; interrupts, NMIs and software events are benign
/// (Table 6-4: "All INT n", "All INTR"; #DB, #BP, #OF are benign).
[[nodiscard, gnu::always_inline]] constexpr queued_event queue_exception(const injected_event& pending, x86::exception_event second,
                                                     bool protected_mode = true, bool any_error_code = false) noexcept {
  if (!pending.valid())
    return {x86::merge_verdict::deliver_second, hardware_exception(second.v, second.error_code, protected_mode, any_error_code)};
  const bool exception = pending.info.type() == interruption_type::hardware_exception;
  const auto m = x86::merge_exception(exception ? x86::first_event::exception : x86::first_event::interrupt,
                                      static_cast<x86::vector>(pending.info.vector()), second);
  if (m.verdict == x86::merge_verdict::shutdown) return {m.verdict, {}};
  return {m.verdict, hardware_exception(m.event.v, m.event.error_code, protected_mode, any_error_code)};
}

/// Injects hardware exception `e` on the next VM entry, merged with whatever the VM-entry
/// fields already hold (a re-injected event, an exception queued earlier in this exit):
/// read_injection + queue_exception + write_injection. On a shutdown verdict nothing is
/// written; the hypervisor must not enter the guest as if nothing happened (a triple fault).
/// #PF: VM entry does not load CR2 (SDM 27.3.2 lists what it loads); the caller sets it.
template <vmcs_backend B>
[[gnu::always_inline]] constexpr result<queued_event, vm_fail> inject_exception(B& b, x86::exception_event e,
                                                         bool protected_mode = true) noexcept {
  // Only the pending event's information field is read: queue_exception() classes it by
  // its type and vector alone, and the event it returns replaces the pending one whole (its
  // error code and instruction length are never merged: SDM Table 6-5), so the VMREADs of
  // read_injection() for those two fields would be dead work on every exit with an event.
  auto info = vmread(b, fields::vm_entry_interruption_info);
  if (!info) return unexpected(info.error());
  const injected_event pending{entry_interruption_info{info.value()}, 0, 0};
  // Built in the returned object: a local copied into it at the end is assembled with
  // narrow stores and read back with one wide load, which defeats store forwarding.
  result<queued_event, vm_fail> q{queue_exception(pending, e, protected_mode)};
  if (q->verdict == x86::merge_verdict::shutdown) return q;
  auto w = write_injection(b, q->event);
  if (!w) return unexpected(w.error());
  return q;
}

}  // namespace hvkit::vmx
