// SPDX-License-Identifier: MIT
/// @file
/// @brief Local APIC registers: the x2APIC MSR map (SDM Vol. 3A 11.12.1.2, Table 11-6), the
/// xAPIC MMIO offsets (11.4.1, Table 11-1), and the architectural fault of an x2APIC RDMSR or
/// WRMSR (read-only, write-only, absent registers, reserved bits).
///
/// An x2APIC MSR is 800H + (xAPIC offset >> 4) for every register both modes have. Registers
/// only xAPIC has: APR (090H), RRD (0C0H), DFR (0E0H), ICR high (310H; x2APIC's ICR is one
/// 64-bit MSR). Only x2APIC has SELF IPI (83FH; offset 3F0H is reserved in xAPIC mode).
#pragma once

#include <cstdint>

#include "apic_icr.hpp"
#include "msr.hpp"
#include "result.hpp"

namespace hvkit::x86::apic {

/// A local APIC register (xAPIC MMIO offset / 16, which is also x2APIC MSR - 800H).
enum class reg : std::uint8_t {
  id = 0x02, version = 0x03, tpr = 0x08, apr = 0x09, ppr = 0x0a, eoi = 0x0b, rrd = 0x0c, ldr = 0x0d,
  dfr = 0x0e, svr = 0x0f,
  isr0 = 0x10, isr7 = 0x17, tmr0 = 0x18, tmr7 = 0x1f, irr0 = 0x20, irr7 = 0x27,
  esr = 0x28, lvt_cmci = 0x2f, icr_low = 0x30, icr_high = 0x31,
  lvt_timer = 0x32, lvt_thermal = 0x33, lvt_pmi = 0x34, lvt_lint0 = 0x35, lvt_lint1 = 0x36, lvt_error = 0x37,
  timer_initial_count = 0x38, timer_current_count = 0x39, timer_divide = 0x3e, self_ipi = 0x3f,
};

/// The xAPIC MMIO offset of `r` (from the APIC base, SDM Table 11-1).
[[nodiscard]] constexpr std::uint32_t xapic_offset(reg r) noexcept { return std::uint32_t{static_cast<std::uint8_t>(r)} << 4; }
/// The x2APIC MSR of `r` (SDM Table 11-6).
[[nodiscard]] constexpr std::uint32_t x2apic_msr(reg r) noexcept { return msr::x2apic_first + static_cast<std::uint8_t>(r); }

/// How software may access a register.
enum class access : std::uint8_t { none, read_only, write_only, read_write };

/// The access a register has in x2APIC mode (SDM Table 11-6), by index (MSR - 800H) in
/// 00H..FFH; `none` for every index the table does not list (RDMSR/WRMSR #GP).
[[nodiscard]] constexpr access x2apic_access(std::uint32_t index) noexcept {
  switch (index) {
    case 0x02: case 0x03: case 0x0a: case 0x0d: case 0x39: return access::read_only;
    case 0x0b: case 0x3f: return access::write_only;
    case 0x08: case 0x0f: case 0x28: case 0x2f: case 0x30:
    case 0x32: case 0x33: case 0x34: case 0x35: case 0x36: case 0x37: case 0x38: case 0x3e:
      return access::read_write;
    default: break;
  }
  if (index >= 0x10 && index <= 0x27) return access::read_only;  // ISR, TMR, IRR
  return access::none;
}

/// The access a register has in xAPIC mode (SDM Table 11-1), by MMIO offset >> 4 (00H..3FH).
/// RO registers ignore writes, WO registers read as 0 in xAPIC MMIO (no fault).
[[nodiscard]] constexpr access xapic_access(std::uint32_t index) noexcept {
  switch (index) {
    case 0x09: case 0x0c: return access::read_only;    // APR, RRD
    case 0x0d: case 0x0e: case 0x31: return access::read_write;  // LDR, DFR, ICR high
    case 0x3f: return access::none;                    // SELF IPI: x2APIC only
    case 0x02: return access::read_write;              // APIC ID: read/write in xAPIC (Table 11-1)
    default: return x2apic_access(index);
  }
}

/// Why an x2APIC RDMSR/WRMSR faults. Every error is a #GP(0) (SDM 11.12.1.2, 11.12.1.3).
enum class x2apic_fault : std::uint8_t {
  none,
  not_a_register,     ///< an index of 800H-8FFH Table 11-6 does not list (or above 8FFH)
  write_to_read_only, ///< WRMSR of a read-only register
  read_of_write_only, ///< RDMSR of EOI or SELF IPI
  reserved_bits,      ///< WRMSR with a reserved bit set
};

/// The bits of a WRMSR value that must be 0 for register `index`: every register is 32 bits
/// except the ICR, so bits 63:32 are reserved except for 830H; TPR bits 31:8 (Figure 11-18);
/// EOI and ESR: "WRMSR of a non-zero value causes #GP(0)" (Table 11-6); SELF IPI bits 31:8
/// (Figure 11-30); ICR bits 31:20, 17:16, 13 (Figure 11-28); the LVT entries as Figure 11-8
/// draws them (read-only bits such as delivery status 12 and remote IRR 14 are not reserved);
/// SVR bits 31:13, 11:10 (Figure 11-23: vector, APIC enable 8, focus checking 9, EOI-broadcast
/// suppression 12); divide configuration bits 31:4 and 2 (Figure 11-10).
[[nodiscard]] constexpr std::uint64_t x2apic_reserved_mask(std::uint32_t index) noexcept {
  constexpr std::uint64_t high = 0xffff'ffff'0000'0000ull;
  switch (index) {
    case 0x30: return icr::x2apic_reserved;
    case 0x08: case 0x3f: return high | 0xffff'ff00ull;
    case 0x0b: case 0x28: return ~std::uint64_t{0};
    case 0x0f: return high | bit_range(31, 13) | bit_range(11, 10);
    // Timer: vector 7:0, delivery status 12, mask 16, timer mode 18:17.
    case 0x32: return high | bit_range(31, 19) | bit_range(15, 13) | bit_range(11, 8);
    // CMCI, thermal, performance counters: vector, delivery mode 10:8, status 12, mask 16.
    case 0x2f: case 0x33: case 0x34: return high | bit_range(31, 17) | bit_range(15, 13) | (std::uint64_t{1} << 11);
    // LINT0/LINT1: also polarity 13, remote IRR 14, trigger mode 15.
    case 0x35: case 0x36: return high | bit_range(31, 17) | (std::uint64_t{1} << 11);
    // Error: vector, delivery status 12, mask 16.
    case 0x37: return high | bit_range(31, 17) | bit_range(15, 13) | bit_range(11, 8);
    case 0x3e: return high | bit_range(31, 4) | (std::uint64_t{1} << 2);
    default: return high;
  }
}

/// The architectural outcome of RDMSR of x2APIC MSR `msr` (800H..BFFH) in x2APIC mode.
[[nodiscard]] constexpr result<void, x2apic_fault> check_x2apic_rdmsr(std::uint32_t msr_index) noexcept {
  if (msr_index < msr::x2apic_first || msr_index > msr::x2apic_virtualized_last) return unexpected(x2apic_fault::not_a_register);
  switch (x2apic_access(msr_index - msr::x2apic_first)) {
    case access::none: return unexpected(x2apic_fault::not_a_register);
    case access::write_only: return unexpected(x2apic_fault::read_of_write_only);
    default: return {};
  }
}

/// The architectural outcome of WRMSR of `value` to x2APIC MSR `msr` in x2APIC mode.
[[nodiscard]] constexpr result<void, x2apic_fault> check_x2apic_wrmsr(std::uint32_t msr_index, std::uint64_t value) noexcept {
  if (msr_index < msr::x2apic_first || msr_index > msr::x2apic_virtualized_last) return unexpected(x2apic_fault::not_a_register);
  const std::uint32_t index = msr_index - msr::x2apic_first;
  switch (x2apic_access(index)) {
    case access::none: return unexpected(x2apic_fault::not_a_register);
    case access::read_only: return unexpected(x2apic_fault::write_to_read_only);
    default: break;
  }
  if ((value & x2apic_reserved_mask(index)) != 0) return unexpected(x2apic_fault::reserved_bits);
  return {};
}

/// An xAPIC MMIO access decoded: "All 32-bit registers should be accessed using 128-bit
/// aligned 32-bit loads or stores" (SDM 11.4.1); other accesses are not architecturally defined.
struct xapic_mmio_access {
  std::uint32_t index = 0;  ///< offset >> 4
  access allowed = access::none;
};
enum class xapic_mmio_error : std::uint8_t { none, not_aligned_dword, outside_page };

/// Decodes an access of `size` bytes at `offset` from the APIC base.
[[nodiscard]] constexpr result<xapic_mmio_access, xapic_mmio_error> decode_xapic_mmio(std::uint32_t offset,
                                                                                      unsigned size) noexcept {
  if (offset >= 0x1000) return unexpected(xapic_mmio_error::outside_page);
  if (size != 4 || (offset & 0xfu) != 0) return unexpected(xapic_mmio_error::not_aligned_dword);
  const std::uint32_t index = offset >> 4;
  return xapic_mmio_access{index, index < 0x40 ? xapic_access(index) : access::none};
}

}  // namespace hvkit::x86::apic
