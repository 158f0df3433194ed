// SPDX-License-Identifier: MIT
/// @file
/// @brief EVENTINJ (VMCB 0A8h) and EXITINTINFO (VMCB 088h): the SVM event format (AMD APM
/// Vol. 2, 15.20 "Event Injection", Figure 15-3 "EVENTINJ Field"; 15.7.2 "Intercepts During
/// IDT Interrupt Delivery"), translated to and from the vendor-neutral x86::event.
///
/// Bits 7:0 VECTOR, 10:8 TYPE (0 external or virtual interrupt, 2 NMI, 3 exception (fault
/// or trap), 4 software interrupt (INTn); 1, 5, 6, 7 reserved), 11 EV (deliver the error
/// code), 30:12 reserved, 31 V (valid), 63:32 ERRORCODE. EXITINTINFO has the same layout.
///
/// Where the two vendors differ: SVM has no "software exception" or "privileged software
/// exception" type and no instruction-length field. The processor classes INT3, INTO and INT1
/// (ICEBP) as exceptions (TYPE 3) and only INTn as a software interrupt (TYPE 4) when it
/// reports an interrupted delivery in EXITINTINFO (APM 15.7.2, "Guest Exception or Interrupt
/// Types"); injection uses the same classes, so a re-injected event keeps its type. A TYPE 3
/// event is delivered without the gate DPL check that INT3 and INTO make (a hypervisor that
/// reflects a guest's INT3 through a DPL-0 gate checks that itself). Instruction events return
/// past the instruction only if the guest RIP already points past it: to_eventinj() reports
/// the advance for the caller to apply (`rip_advance`).
#pragma once

#include <cstdint>

#include "vmcb.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/event.hpp"
#include "../x86/vector.hpp"

namespace hvkit::svm {

/// TYPE, bits 10:8 (15.20).
enum class event_type : std::uint8_t {
  intr = 0,       ///< external or virtual interrupt
  nmi = 2,
  exception = 3,  ///< fault or trap
  soft_int = 4,   ///< software interrupt (INTn)
};

namespace event_bits {
using vector = x86::bitfield<std::uint64_t, 0, 8, std::uint8_t>;
using type = x86::bitfield<std::uint64_t, 8, 3, std::uint8_t>;
using ev = x86::bitflag<std::uint64_t, 11>;
using valid = x86::bitflag<std::uint64_t, 31>;
using error_code = x86::bitfield<std::uint64_t, 32, 32, std::uint32_t>;
inline constexpr std::uint64_t reserved = 0x7fff'f000u;  // bits 30:12
static_assert(x86::fields_disjoint<vector, type, ev, valid, error_code>());
static_assert((x86::fields_mask<vector, type, ev, valid, error_code> & reserved) == 0);
}  // namespace event_bits

/// An EVENTINJ / EXITINTINFO value.
class event_info {
 public:
  constexpr event_info() noexcept = default;
  constexpr explicit event_info(std::uint64_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] static constexpr event_info make(std::uint8_t vector, event_type t, bool ev,
                                                 std::uint32_t error_code = 0) noexcept {
    std::uint64_t r = 0;
    r = event_bits::vector::set(r, vector);
    r = event_bits::type::set(r, static_cast<std::uint8_t>(t));
    r = event_bits::ev::set(r, ev);
    r = event_bits::valid::set(r, true);
    r = event_bits::error_code::set(r, ev ? error_code : 0);
    return event_info{r};
  }
  [[nodiscard]] constexpr std::uint64_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr bool valid() const noexcept { return event_bits::valid::get(raw_); }
  [[nodiscard]] constexpr std::uint8_t vector() const noexcept { return event_bits::vector::get(raw_); }
  /// The raw TYPE (0-7); see event_type for the defined ones.
  [[nodiscard]] constexpr std::uint8_t type_bits() const noexcept { return event_bits::type::get(raw_); }
  [[nodiscard]] constexpr event_type type() const noexcept { return static_cast<event_type>(type_bits()); }
  [[nodiscard]] constexpr bool has_error_code() const noexcept { return event_bits::ev::get(raw_); }
  [[nodiscard]] constexpr std::uint32_t error_code() const noexcept { return event_bits::error_code::get(raw_); }
  friend constexpr bool operator==(event_info, event_info) noexcept = default;

 private:
  std::uint64_t raw_ = 0;
};

/// What to write for an injection: EVENTINJ and how far to advance the guest RIP first.
struct injection {
  event_info eventinj{};
  std::uint8_t rip_advance = 0;  ///< the instruction length for instruction events, else 0
  friend constexpr bool operator==(const injection&, const injection&) noexcept = default;
};

/// The EVENTINJ encoding of a vendor-neutral event.
[[nodiscard]] constexpr injection to_eventinj(const x86::event& e) noexcept {
  switch (e.kind) {
    case x86::event_kind::external_interrupt: return {event_info::make(e.vector, event_type::intr, false), 0};
    case x86::event_kind::nmi: return {event_info::make(2, event_type::nmi, false), 0};
    case x86::event_kind::hardware_exception:
      return {event_info::make(e.vector, event_type::exception, e.has_error_code, e.error_code), 0};
    case x86::event_kind::software_interrupt:
      return {event_info::make(e.vector, event_type::soft_int, false), e.instruction_length};
    case x86::event_kind::software_exception:
      return {event_info::make(e.vector, event_type::exception, false), e.instruction_length};
    case x86::event_kind::privileged_software_exception:
      return {event_info::make(1, event_type::exception, false), e.instruction_length};
  }
  return {};
}

/// The vendor-neutral event of a valid EXITINTINFO (the event whose delivery the #VMEXIT
/// interrupted, 15.7.2), for re-injection. TYPE 3 with vector 3 (#BP) or 4 (#OF) can only come
/// from INT3 or INTO and is returned as that software exception; TYPE 3 vector 1 may be a
/// hardware #DB or INT1 and is returned as a hardware exception. The instruction length is
/// unknown here (0): with NRIP save it is nRIP - RIP. A reserved TYPE yields an exception of
/// the same vector (the processor never reports one).
[[nodiscard]] constexpr x86::event to_event(event_info i) noexcept {
  switch (i.type_bits()) {
    case 0: return x86::event{x86::event_kind::external_interrupt, i.vector(), false, 0, 0};
    case 2: return x86::event::nmi();
    case 4: return x86::event{x86::event_kind::software_interrupt, i.vector(), false, 0, 0};
    case 3:
      if (i.vector() == 3 || i.vector() == 4) return x86::event{x86::event_kind::software_exception, i.vector(), false, 0, 0};
      [[fallthrough]];
    default: return x86::event{x86::event_kind::hardware_exception, i.vector(), i.has_error_code(), i.error_code(), 0};
  }
}

/// Why VMRUN would refuse an EVENTINJ with VMEXIT_INVALID (15.20).
enum class injection_error : std::uint8_t {
  none,
  reserved_type,    ///< TYPE 1, 5, 6 or 7
  reserved_bits,    ///< bits 30:12 not 0
  impossible_in_mode,  ///< an exception impossible in the guest's mode (#BR, #OF in 64-bit mode)
  not_an_exception,    ///< TYPE 3 with a vector that is not an exception (2 = NMI, reserved, >= 32)
};

/// The vectors AMD64 defines as exceptions (APM Vol. 2, 8.2, Table 8-1 "Interrupt Vector
/// Source and Cause"): #DE 0, #DB 1, #BP 3, #OF 4, #BR 5, #UD 6, #NM 7, #DF 8, #TS 10, #NP 11,
/// #SS 12, #GP 13, #PF 14, #MF 16, #AC 17, #MC 18, #XF 19, #CP 21, #HV 28, #VC 29, #SX 30.
/// Vector 2 is the NMI; 9 (coprocessor-segment overrun), 15, 20, 22-27 and 31 are reserved.
inline constexpr std::uint32_t exception_vectors = 0x702f'7dfbu;

/// The checks VMRUN makes on EVENTINJ that hvkit models. An invalid (V=0) value passes.
/// `long_mode_64`: the guest will run in 64-bit mode (EFER.LMA=1 and CS.L=1).
/// 15.20: VMEXIT_INVALID if a reserved TYPE is given, or TYPE 3 (exception) with a vector
/// that does not correspond to an exception ("this includes vector 2, which is an NMI").
/// #BR and #OF cannot arise in 64-bit mode (BOUND and INTO are invalid there, APM Vol. 3;
/// AMD64 has no other source of #BR): injecting them into a 64-bit guest is refused too.
[[nodiscard]] constexpr injection_error check_eventinj(event_info i, bool long_mode_64 = false) noexcept {
  if (!i.valid()) return injection_error::none;
  if ((i.raw() & event_bits::reserved) != 0) return injection_error::reserved_bits;
  const auto t = i.type_bits();
  if (t == 1 || t >= 5) return injection_error::reserved_type;
  if (t == 3 && (i.vector() >= 32 || ((exception_vectors >> i.vector()) & 1u) == 0))
    return injection_error::not_an_exception;
  if (long_mode_64 && t == 3 &&
      (i.vector() == static_cast<std::uint8_t>(x86::vector::br) || i.vector() == static_cast<std::uint8_t>(x86::vector::of)))
    return injection_error::impossible_in_mode;
  return injection_error::none;
}

/// Write an injection: advance RIP for instruction events, then EVENTINJ.
template <vmcb_memory M>
constexpr void write_injection(M& m, const injection& inj) noexcept {
  if (inj.rip_advance != 0) write(m, fields::rip, static_cast<std::uint64_t>(read(m, fields::rip) + inj.rip_advance));
  write(m, fields::event_injection, inj.eventinj.raw());
}

/// The event pending in EVENTINJ (none if V=0).
template <vmcb_memory M>
[[nodiscard]] constexpr event_info read_injection(const M& m) noexcept {
  return event_info{read(m, fields::event_injection)};
}

/// Inject hardware exception `e`, merged with what EVENTINJ already holds (SDM 6.15 /
/// APM 8.2.9). On a shutdown verdict nothing is written. #PF: the caller sets CR2 (VMCB 640h).
template <vmcb_memory M>
constexpr x86::merge_verdict inject_exception(M& m, x86::exception_event e, bool protected_mode = true) noexcept {
  const event_info pending = read_injection(m);
  x86::event p{};
  if (pending.valid()) p = to_event(pending);
  const x86::queued q = x86::queue_exception(pending.valid() ? &p : nullptr, e, x86::vendor::amd, protected_mode);
  if (q.verdict != x86::merge_verdict::shutdown) write(m, fields::event_injection, to_eventinj(q.e).eventinj.raw());
  return q.verdict;
}

}  // namespace hvkit::svm
