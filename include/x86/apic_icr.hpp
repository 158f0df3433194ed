// SPDX-License-Identifier: MIT
/// @file
/// @brief The local APIC's Interrupt Command Register (ICR) and the IPI it requests, in xAPIC
/// and x2APIC mode (SDM Vol. 3A 11.6.1 "Interrupt Command Register (ICR)", Figure 11-12;
/// 11.12.9 "ICR Operation in x2APIC Mode", Figure 11-28), and the SELF IPI register (11.12.11).
///
/// `ipi_request` is the one type every IPI source decodes into: an x2APIC WRMSR of MSR 830H,
/// an xAPIC MMIO write of ICR low (300H, with the destination from ICR high, 310H), a WRMSR of
/// SELF IPI (83FH) and the KVM PV_SEND_IPI hypercall (x86/pv_send_ipi.hpp).
#pragma once

#include <cstdint>

#include "bitfield.hpp"
#include "result.hpp"

namespace hvkit::x86::apic {

/// ICR bits 10:8.
enum class delivery_mode : std::uint8_t {
  fixed = 0,
  lowest_priority = 1,  ///< xAPIC only: Figure 11-28 marks 001 "Reserved" in x2APIC mode
  smi = 2,
  reserved_3 = 3,
  nmi = 4,
  init = 5,
  startup = 6,
  reserved_7 = 7,
};
/// ICR bit 11.
enum class destination_mode : std::uint8_t { physical = 0, logical = 1 };
/// ICR bit 15.
enum class trigger_mode : std::uint8_t { edge = 0, level = 1 };
/// ICR bits 19:18.
enum class destination_shorthand : std::uint8_t { none = 0, self = 1, all_including_self = 2, all_excluding_self = 3 };
/// How the APIC is addressed (IA32_APIC_BASE.EXTD, SDM 11.12.1).
enum class apic_mode : std::uint8_t { xapic, x2apic };

/// The ICR as one 64-bit value (x2APIC: MSR 830H; xAPIC: ICR high in bits 63:32).
namespace icr {
using vector = bitfield<std::uint64_t, 0, 8, std::uint8_t>;
using mode = bitfield<std::uint64_t, 8, 3, delivery_mode>;
using dest_mode = bitfield<std::uint64_t, 11, 1, destination_mode>;
/// xAPIC: delivery status (read-only). x2APIC: "WRMSR to the ICR MSR ignores bit 12 of its
/// source operand" (SDM 11.12.9).
using delivery_status = bitflag<std::uint64_t, 12>;
using level = bitflag<std::uint64_t, 14>;  ///< 1 = assert, 0 = de-assert
using trigger = bitfield<std::uint64_t, 15, 1, trigger_mode>;
using shorthand = bitfield<std::uint64_t, 18, 2, destination_shorthand>;
using x2apic_destination = bitfield<std::uint64_t, 32, 32, std::uint32_t>;  ///< 63:32
using xapic_destination = bitfield<std::uint64_t, 56, 8, std::uint8_t>;      ///< 63:56
/// Bits an x2APIC WRMSR of the ICR must leave 0: 13, 17:16 and 31:20 (Figure 11-28). "Non-zero
/// writes (by WRMSR instruction) to reserved bits to these registers will raise a general
/// protection fault exception" (SDM 11.12.1.3).
inline constexpr std::uint64_t x2apic_reserved = (std::uint64_t{1} << 13) | bit_range(17, 16) | bit_range(31, 20);
static_assert(fields_disjoint<vector, mode, dest_mode, delivery_status, level, trigger, shorthand, x2apic_destination>());
}  // namespace icr

/// x2APIC broadcast destination: "A destination ID value of FFFF_FFFFH is used for broadcast of
/// interrupts in both logical destination and physical destination modes" (SDM 11.12.9).
inline constexpr std::uint32_t x2apic_broadcast = 0xffff'ffffu;
/// xAPIC broadcast destination (8-bit destination all ones, SDM 11.6.2.1).
inline constexpr std::uint32_t xapic_broadcast = 0xffu;

/// One interprocessor interrupt as the sending APIC issues it.
struct ipi_request {
  std::uint8_t vector = 0;
  delivery_mode mode = delivery_mode::fixed;
  destination_mode dest_mode = destination_mode::physical;
  bool level_assert = true;
  trigger_mode trigger = trigger_mode::edge;
  destination_shorthand shorthand = destination_shorthand::none;
  /// 32-bit x2APIC ID / logical ID, or the 8-bit xAPIC destination (bits 63:56 of the ICR).
  std::uint32_t destination = 0;
  friend constexpr bool operator==(const ipi_request&, const ipi_request&) noexcept = default;

  /// The ICR value that requests this IPI in `m` (bit 12 and reserved bits 0).
  [[nodiscard]] constexpr std::uint64_t to_icr(apic_mode m) const noexcept {
    std::uint64_t v = icr::vector::set(0, vector);
    v = icr::mode::set(v, mode);
    v = icr::dest_mode::set(v, dest_mode);
    v = icr::level::set(v, level_assert);
    v = icr::trigger::set(v, trigger);
    v = icr::shorthand::set(v, shorthand);
    if (m == apic_mode::x2apic) return icr::x2apic_destination::set(v, destination);
    return icr::xapic_destination::set(v, static_cast<std::uint8_t>(destination));
  }
};

/// Why an ICR write is refused.
enum class icr_error : std::uint8_t {
  none,
  reserved_bits,  ///< x2APIC: a reserved bit set, the WRMSR raises #GP(0) (SDM 11.12.1.3)
};

namespace detail {
[[nodiscard]] constexpr ipi_request decode_common(std::uint64_t v) noexcept {
  ipi_request r;
  r.vector = icr::vector::get(v);
  r.mode = icr::mode::get(v);
  r.dest_mode = icr::dest_mode::get(v);
  r.level_assert = icr::level::get(v);
  r.trigger = icr::trigger::get(v);
  r.shorthand = icr::shorthand::get(v);
  return r;
}
}  // namespace detail

/// An x2APIC WRMSR of the ICR (MSR 830H, EDX:EAX = `value`): "A single MSR write to the
/// Interrupt Command Register is required for dispatching an interrupt in x2APIC mode"
/// (SDM 11.12.9). Reserved bits set: #GP(0), nothing is sent.
[[nodiscard]] constexpr result<ipi_request, icr_error> decode_x2apic_icr(std::uint64_t value) noexcept {
  if ((value & icr::x2apic_reserved) != 0) return unexpected(icr_error::reserved_bits);
  ipi_request r = detail::decode_common(value);
  r.destination = icr::x2apic_destination::get(value);
  return r;
}

/// An xAPIC write of ICR low (offset 300H; the write sends the IPI, SDM 11.6.1) with `high`
/// the current ICR high (offset 310H: destination in bits 31:24). MMIO writes do not fault on
/// reserved bits.
[[nodiscard]] constexpr ipi_request decode_xapic_icr(std::uint32_t low, std::uint32_t high) noexcept {
  const std::uint64_t v = (std::uint64_t{high} << 32) | low;
  ipi_request r = detail::decode_common(v);
  r.destination = icr::xapic_destination::get(v);
  return r;
}

/// A WRMSR of SELF IPI (MSR 83FH, x2APIC only): bits 7:0 the vector, 31:8 (and 63:32)
/// reserved (#GP(0) if set). "The semantics of sending a self-IPI via the SELF IPI register are
/// identical to sending a self targeted edge triggered fixed interrupt with the specified
/// vector" (SDM 11.12.11).
[[nodiscard]] constexpr result<ipi_request, icr_error> decode_self_ipi(std::uint64_t value) noexcept {
  if ((value & ~std::uint64_t{0xff}) != 0) return unexpected(icr_error::reserved_bits);
  ipi_request r;
  r.vector = static_cast<std::uint8_t>(value);
  r.shorthand = destination_shorthand::self;
  return r;
}

/// What an IPI asks the receivers to do, where the ICR's combination is architecturally
/// meaningful.
enum class ipi_kind : std::uint8_t {
  fixed,
  lowest_priority,
  smi,
  nmi,
  init,
  /// INIT with level 0 and trigger level: the legacy "INIT level de-assert" message, which
  /// synchronizes arbitration IDs and does not reset anything; "not supported in the
  /// Pentium 4 and Intel Xeon processors" (SDM 11.6.1): a virtual APIC ignores it.
  init_level_deassert,
  startup,
  invalid,              ///< reserved delivery mode, or a mode the mode/shorthand forbid
};

/// Classifies `r` as sent in APIC mode `m`.
///  - 011 and 111 are reserved delivery modes (Figure 11-12); in x2APIC mode so is 001
///    (Figure 11-28 lists "001: Reserved").
///  - INIT with the level flag 0 and trigger level is the INIT level de-assert message
///    (SDM 11.6.1, "Level" and "Trigger Mode").
///  - The shorthands "self" and "all including self" carry fixed interrupts only (SDM
///    11.6.1, the table of valid ICR combinations for the Pentium 4 and Intel Xeon local
///    xAPIC: lowest priority, NMI, INIT, SMI and start-up are invalid with them).
[[nodiscard]] constexpr ipi_kind classify(const ipi_request& r, apic_mode m) noexcept {
  const bool to_self = r.shorthand == destination_shorthand::self || r.shorthand == destination_shorthand::all_including_self;
  switch (r.mode) {
    case delivery_mode::fixed: return ipi_kind::fixed;
    case delivery_mode::lowest_priority:
      return m == apic_mode::x2apic || to_self ? ipi_kind::invalid : ipi_kind::lowest_priority;
    case delivery_mode::smi: return to_self ? ipi_kind::invalid : ipi_kind::smi;
    case delivery_mode::nmi: return to_self ? ipi_kind::invalid : ipi_kind::nmi;
    case delivery_mode::init:
      if (to_self) return ipi_kind::invalid;
      if (!r.level_assert && r.trigger == trigger_mode::level) return ipi_kind::init_level_deassert;
      return ipi_kind::init;
    case delivery_mode::startup: return to_self ? ipi_kind::invalid : ipi_kind::startup;
    case delivery_mode::reserved_3:
    case delivery_mode::reserved_7: return ipi_kind::invalid;
  }
  return ipi_kind::invalid;
}

/// True if the destination field addresses every APIC (broadcast) in mode `m`.
[[nodiscard]] constexpr bool is_broadcast(const ipi_request& r, apic_mode m) noexcept {
  return r.shorthand == destination_shorthand::none &&
         r.destination == (m == apic_mode::x2apic ? x2apic_broadcast : xapic_broadcast);
}

}  // namespace hvkit::x86::apic
