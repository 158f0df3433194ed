// SPDX-License-Identifier: MIT
/// @file
/// @brief A freestanding virtual local APIC: IRR/ISR/TMR, TPR and PPR, acceptance of fixed
/// interrupts, highest-priority selection, acknowledge (INTA), EOI, and the APIC timer in
/// one-shot, periodic and TSC-deadline mode (SDM Vol. 3A 11.5.4, 11.8).
///
/// The model holds state only; delivery to the vCPU (event injection, posted interrupts, a
/// kick of a halted vCPU) is the caller's. No heap, no globals: one object per vCPU.
///
/// Priority rules (SDM 11.8.3.1 "Task and Processor Priorities"):
///  - "The priority class of an interrupt is ... bits 7:4 of the interrupt vector."
///  - PPR: "If TPR[7:4] >= ISRV[7:4], PPR[7:0] = TPR[7:0]; else PPR[7:4] = ISRV[7:4] and
///    PPR[3:0] = 0", where ISRV is the vector of the highest-priority bit set in ISR (0 if none).
///  - The processor is offered the highest-priority interrupt in IRR only if its priority
///    class is above PPR[7:4] (11.8.3.1, 11.8.4).
/// Acceptance (SDM 11.8.4 "Interrupt Acceptance for Fixed Interrupts"): IRR and ISR hold at
/// most one interrupt per vector each; "Any additional interrupts issued for the same interrupt
/// vector are collapsed into the single bit in the IRR." The TMR bit is set for a level-
/// triggered interrupt and cleared for an edge-triggered one when it is accepted into IRR.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "apic_icr.hpp"

namespace hvkit::x86::apic {

/// 256 bits, one per vector (the layout of IRR/ISR/TMR: eight 32-bit registers).
class vector_set {
 public:
  [[nodiscard]] constexpr bool test(std::uint8_t v) const noexcept { return (w_[v >> 5] >> (v & 31u)) & 1u; }
  constexpr void set(std::uint8_t v) noexcept { w_[v >> 5] |= std::uint32_t{1} << (v & 31u); }
  constexpr void reset(std::uint8_t v) noexcept { w_[v >> 5] &= ~(std::uint32_t{1} << (v & 31u)); }
  [[nodiscard]] constexpr bool empty() const noexcept {
    for (std::uint32_t w : w_)
      if (w != 0) return false;
    return true;
  }
  /// The highest vector set, or -1 when empty.
  [[nodiscard]] constexpr int highest() const noexcept {
    for (int i = 7; i >= 0; --i)
      if (w_[static_cast<unsigned>(i)] != 0)
        return i * 32 + static_cast<int>(std::bit_width(w_[static_cast<unsigned>(i)])) - 1;
    return -1;
  }
  /// Register `i` (0..7): the 32-bit value of ISRi / TMRi / IRRi.
  [[nodiscard]] constexpr std::uint32_t word(unsigned i) const noexcept { return w_[i & 7u]; }
  friend constexpr bool operator==(const vector_set&, const vector_set&) noexcept = default;

 private:
  std::array<std::uint32_t, 8> w_{};
};

/// PPR from TPR and ISRV (SDM 11.8.3.1).
[[nodiscard]] constexpr std::uint8_t processor_priority(std::uint8_t tpr, std::uint8_t isrv) noexcept {
  if ((tpr >> 4) >= (isrv >> 4)) return tpr;
  return static_cast<std::uint8_t>(isrv & 0xf0u);
}

/// True if a pending vector `irrv` is offered to the processor at priority `ppr`.
[[nodiscard]] constexpr bool deliverable(std::uint8_t irrv, std::uint8_t ppr) noexcept { return (irrv >> 4) > (ppr >> 4); }

/// The outcome of offering a fixed interrupt to the APIC.
enum class accept_result : std::uint8_t {
  accepted,        ///< IRR bit was clear and is now set
  coalesced,       ///< IRR bit already set: collapsed into it (SDM 11.8.4)
  illegal_vector,  ///< vectors 0-15: not accepted, ESR "Received Illegal Vector" set (11.5.3)
};

/// ESR bits (SDM 11.5.3, Figure 11-9).
namespace esr {
inline constexpr std::uint32_t send_illegal_vector = 1u << 5;
inline constexpr std::uint32_t receive_illegal_vector = 1u << 6;
inline constexpr std::uint32_t illegal_register_address = 1u << 7;
}  // namespace esr

/// LVT timer mode (bits 18:17 of the LVT timer register, SDM 11.5.4, Figure 11-8).
enum class timer_mode : std::uint8_t { one_shot = 0, periodic = 1, tsc_deadline = 2, reserved = 3 };

/// The timer divisor of a divide-configuration value (bits 0, 1, 3; SDM Figure 11-10):
/// 000 -> 2, 001 -> 4, 010 -> 8, 011 -> 16, 100 -> 32, 101 -> 64, 110 -> 128, 111 -> 1.
[[nodiscard]] constexpr std::uint32_t timer_divisor(std::uint32_t dcr) noexcept {
  const std::uint32_t code = ((dcr >> 1) & 4u) | (dcr & 3u);
  return code == 7u ? 1u : (2u << code);
}

/// The result of EOI.
struct eoi_result {
  int vector = -1;            ///< the ISR vector cleared, -1 if ISR was empty
  bool level_triggered = false;  ///< its TMR bit: an EOI message goes to the I/O APICs (11.8.5)
};

/// A virtual local APIC. Time is given by the caller: `apic_clock` counts the timer's input
/// clock (before the divider), `tsc` the vCPU's TSC.
class local_apic {
 public:
  // -- interrupts ---------------------------------------------------------------------
  /// Offers a fixed (or lowest-priority, once chosen) interrupt to this APIC.
  constexpr accept_result accept_fixed(std::uint8_t vector, trigger_mode t) noexcept {
    if (vector < 16) {
      esr_ |= esr::receive_illegal_vector;
      return accept_result::illegal_vector;
    }
    if (irr_.test(vector)) {
      // SDM 11.8.4: collapsed; the TMR keeps describing the interrupt in IRR.
      return accept_result::coalesced;
    }
    irr_.set(vector);
    if (t == trigger_mode::level) tmr_.set(vector);
    else tmr_.reset(vector);
    return accept_result::accepted;
  }

  /// ISRV: the highest vector in service, 0 if none.
  [[nodiscard]] constexpr std::uint8_t isrv() const noexcept {
    const int h = isr_.highest();
    return h < 0 ? std::uint8_t{0} : static_cast<std::uint8_t>(h);
  }
  [[nodiscard]] constexpr std::uint8_t ppr() const noexcept { return processor_priority(tpr_, isrv()); }

  /// The vector the processor would be offered now, or -1 (IRR empty or masked by PPR).
  [[nodiscard]] constexpr int pending() const noexcept {
    const int h = irr_.highest();
    if (h < 0 || !deliverable(static_cast<std::uint8_t>(h), ppr())) return -1;
    return h;
  }

  /// The processor takes the interrupt pending() names (INTA): IRR bit to ISR. Returns the
  /// vector, or -1 if nothing is deliverable.
  constexpr int acknowledge() noexcept {
    const int v = pending();
    if (v < 0) return -1;
    irr_.reset(static_cast<std::uint8_t>(v));
    isr_.set(static_cast<std::uint8_t>(v));
    return v;
  }

  /// EOI: clears the highest-priority ISR bit (SDM 11.8.5).
  constexpr eoi_result eoi() noexcept {
    const int v = isr_.highest();
    if (v < 0) return {};
    isr_.reset(static_cast<std::uint8_t>(v));
    return {v, tmr_.test(static_cast<std::uint8_t>(v))};
  }

  constexpr void set_tpr(std::uint8_t v) noexcept { tpr_ = v; }
  [[nodiscard]] constexpr std::uint8_t tpr() const noexcept { return tpr_; }
  [[nodiscard]] constexpr const vector_set& irr() const noexcept { return irr_; }
  [[nodiscard]] constexpr const vector_set& isr() const noexcept { return isr_; }
  [[nodiscard]] constexpr const vector_set& tmr() const noexcept { return tmr_; }
  [[nodiscard]] constexpr std::uint32_t esr_pending() const noexcept { return esr_; }

  // -- timer ----------------------------------------------------------------------------
  /// A write of the LVT timer register. "Transitioning between TSC-deadline mode and other
  /// timer modes also disarms the timer" (SDM 11.5.4.1).
  constexpr void write_lvt_timer(std::uint32_t v) noexcept {
    const timer_mode old = mode();
    lvt_timer_ = v;
    const bool was_deadline = old == timer_mode::tsc_deadline;
    if (was_deadline != (mode() == timer_mode::tsc_deadline)) {
      deadline_ = 0;
      initial_ = 0;
      armed_ = false;
    }
  }
  [[nodiscard]] constexpr std::uint32_t lvt_timer() const noexcept { return lvt_timer_; }
  [[nodiscard]] constexpr timer_mode mode() const noexcept { return static_cast<timer_mode>((lvt_timer_ >> 17) & 3u); }
  [[nodiscard]] constexpr bool timer_masked() const noexcept { return (lvt_timer_ >> 16) & 1u; }
  [[nodiscard]] constexpr std::uint8_t timer_vector() const noexcept { return static_cast<std::uint8_t>(lvt_timer_); }

  constexpr void write_divide(std::uint32_t v) noexcept { dcr_ = v & 0xbu; }
  [[nodiscard]] constexpr std::uint32_t divisor() const noexcept { return timer_divisor(dcr_); }

  /// A write of the initial-count register: starts one-shot/periodic counting ("A write of 0
  /// to the initial-count register effectively stops the local APIC timer", SDM 11.5.4);
  /// ignored in TSC-deadline mode ("writes to the initial-count register are ignored", 11.5.4.1).
  constexpr void write_initial_count(std::uint32_t v, std::uint64_t apic_clock) noexcept {
    if (mode() == timer_mode::tsc_deadline) return;
    initial_ = v;
    start_ = apic_clock;
    armed_ = v != 0;
  }
  [[nodiscard]] constexpr std::uint32_t initial_count() const noexcept { return initial_; }

  /// The current-count register: counts down from the initial count at input clock / divisor;
  /// 0 after a one-shot expiry and always 0 in TSC-deadline mode (11.5.4.1).
  [[nodiscard]] constexpr std::uint32_t current_count(std::uint64_t apic_clock) const noexcept {
    if (mode() == timer_mode::tsc_deadline || initial_ == 0) return 0;
    const std::uint64_t ticks = (apic_clock - start_) / divisor();
    if (mode() == timer_mode::periodic) return static_cast<std::uint32_t>(initial_ - ticks % initial_);
    if (!armed_ || ticks >= initial_) return 0;
    return static_cast<std::uint32_t>(initial_ - ticks);
  }

  /// WRMSR IA32_TSC_DEADLINE: arms (non-zero) or disarms (0) the timer in TSC-deadline mode;
  /// in the other timer modes the MSR reads 0 and writes are ignored (SDM 11.5.4.1).
  constexpr void write_tsc_deadline(std::uint64_t v) noexcept {
    if (mode() != timer_mode::tsc_deadline) return;
    deadline_ = v;
    armed_ = v != 0;
  }
  /// RDMSR IA32_TSC_DEADLINE: 0 when not in TSC-deadline mode or after the timer fired.
  [[nodiscard]] constexpr std::uint64_t tsc_deadline() const noexcept {
    return mode() == timer_mode::tsc_deadline ? deadline_ : 0;
  }

  /// Advances the timer to (`apic_clock`, `tsc`): if it expired, the timer interrupt is
  /// accepted into IRR unless the LVT entry is masked (a masked timer still expires, SDM
  /// 11.5.1: the mask "inhibits reception of the interrupt"). Returns true on expiry. A
  /// periodic timer reloads; a one-shot timer stops; a TSC deadline is cleared ("the timer ...
  /// generates a timer interrupt ... and disarms itself and clears the IA32_TSC_DEADLINE MSR").
  constexpr bool poll(std::uint64_t apic_clock, std::uint64_t tsc) noexcept {
    if (!armed_) return false;
    switch (mode()) {
      case timer_mode::tsc_deadline:
        if (tsc < deadline_) return false;
        deadline_ = 0;
        armed_ = false;
        break;
      case timer_mode::one_shot:
        if ((apic_clock - start_) / divisor() < initial_) return false;
        armed_ = false;
        break;
      case timer_mode::periodic: {
        const std::uint64_t period = std::uint64_t{initial_} * divisor();
        if (apic_clock - start_ < period) return false;
        start_ += (apic_clock - start_) / period * period;
        break;
      }
      case timer_mode::reserved: return false;
    }
    if (!timer_masked()) accept_fixed(timer_vector(), trigger_mode::edge);
    return true;
  }
  [[nodiscard]] constexpr bool timer_armed() const noexcept { return armed_; }

 private:
  vector_set irr_{}, isr_{}, tmr_{};
  std::uint8_t tpr_ = 0;
  std::uint32_t esr_ = 0;
  std::uint32_t lvt_timer_ = 1u << 16;  // masked after reset (SDM 11.4.7.1: LVT mask bits set)
  std::uint32_t dcr_ = 0;
  std::uint32_t initial_ = 0;
  std::uint64_t start_ = 0;
  std::uint64_t deadline_ = 0;
  bool armed_ = false;
};

}  // namespace hvkit::x86::apic
