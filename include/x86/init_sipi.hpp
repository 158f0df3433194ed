// SPDX-License-Identifier: MIT
/// @file
/// @brief The architectural state a processor gets from RESET, from INIT and from a start-up
/// IPI (SIPI), and the multiple-processor start-up protocol as a small state machine
/// (SDM Vol. 3A 10.1 "Initialization Overview", 10.1.1 "Processor State After Reset",
/// Table 10-1; 10.4 "Multiple-Processor (MP) Initialization"; 11.6.1 INIT and start-up IPIs).
///
/// INIT versus RESET (SDM 10.1): "during an INIT, the internal caches, MSRs, MTRRs, and x87 FPU
/// state are left unchanged (although, the TLBs and BTB are invalidated as with a hardware
/// reset)"; "If the processor is reset by asserting the INIT# pin, the x87 FPU state is not
/// changed" (10.2). For CR0, Table 10-1's INIT column: "The CD and NW flags are unchanged,
/// bit 4 is set to 1, all other bits are cleared."
/// A SIPI makes a processor waiting for it execute at 000VV000H, VV the vector: CS.selector =
/// VV00H, CS.base = VV000H, IP = 0 (real mode, so base = selector * 16).
///
/// Segment access rights are in the VMX layout (VMCS access-rights fields, SDM Vol. 3C
/// 25.4.1: type 3:0, S 4, DPL 6:5, P 7, AVL 12, L 13, D/B 14, G 15); svm/segment.hpp converts.
#pragma once

#include <cstdint>

#include "cr.hpp"
#include "efer.hpp"

namespace hvkit::x86 {

/// One segment register, hidden part included.
struct segment_value {
  std::uint16_t selector = 0;
  std::uint64_t base = 0;
  std::uint32_t limit = 0;
  std::uint16_t access_rights = 0;  ///< VMX layout
  friend constexpr bool operator==(const segment_value&, const segment_value&) noexcept = default;
};

/// A descriptor-table register (GDTR/IDTR).
struct table_register {
  std::uint64_t base = 0;
  std::uint16_t limit = 0;
  friend constexpr bool operator==(const table_register&, const table_register&) noexcept = default;
};

/// Access rights of Table 10-1: "Present, R/W" (and "Accessed") for CS and the data segments:
/// type 3 (read/write, accessed), S = 1, P = 1. CS keeps this data type; VM entry accepts it
/// for CS only with "unrestricted guest" (SDM 27.3.1.2: CS type 3 allowed when unrestricted).
inline constexpr std::uint16_t reset_segment_ar = 0x93;
/// LDTR: "Present, R/W": a present LDT (system type 2).
inline constexpr std::uint16_t reset_ldtr_ar = 0x82;
/// TR: "Present, R/W": as a system segment, type 3 is a busy 16-bit TSS, the only reading VM
/// entry accepts for a non-IA-32e guest together with type 11 (SDM 27.3.1.2).
inline constexpr std::uint16_t reset_tr_ar = 0x83;

/// The register state after RESET or INIT (Table 10-1). General-purpose registers not listed
/// are 0 (EAX is 0 after a passed or skipped BIST, 10.1.2).
struct reset_state {
  std::uint64_t rip = 0xfff0;
  std::uint64_t rflags = 0x2;
  std::uint64_t rdx = 0;  ///< the processor signature (CPUID.1:EAX): "000n06xxH" in Table 10-1
  segment_value cs{0xf000, 0xffff'0000u, 0xffff, reset_segment_ar};
  segment_value ds{0, 0, 0xffff, reset_segment_ar};
  segment_value es{0, 0, 0xffff, reset_segment_ar};
  segment_value fs{0, 0, 0xffff, reset_segment_ar};
  segment_value gs{0, 0, 0xffff, reset_segment_ar};
  segment_value ss{0, 0, 0xffff, reset_segment_ar};
  segment_value ldtr{0, 0, 0xffff, reset_ldtr_ar};
  segment_value tr{0, 0, 0xffff, reset_tr_ar};
  table_register gdtr{0, 0xffff};
  table_register idtr{0, 0xffff};
  cr0 cr0_value{0x6000'0010};
  std::uint64_t cr2 = 0, cr3 = 0;
  cr4 cr4_value{};
  std::uint64_t dr0 = 0, dr1 = 0, dr2 = 0, dr3 = 0;
  std::uint64_t dr6 = 0xffff'0ff0u;
  std::uint64_t dr7 = 0x400;
  efer efer_value{};
  friend constexpr bool operator==(const reset_state&, const reset_state&) noexcept = default;
};

/// After power-up or RESET: CR0 = 60000010H; EFER 0 (Table 10-1 lists no value for it: hvkit
/// starts a vCPU with EFER 0).
[[nodiscard]] constexpr reset_state state_after_reset(std::uint32_t signature) noexcept {
  reset_state s;
  s.rdx = signature;
  return s;
}

/// After INIT, given CR0 and EFER before it. CR0: CD and NW unchanged, ET (bit 4) = 1, others
/// 0. EFER is an MSR and "MSRs ... are left unchanged", except LMA, which reports long mode
/// active (CR0.PG and EFER.LME) and is 0 once CR0.PG is 0 (SDM Vol. 3A 10.8.5).
[[nodiscard]] constexpr reset_state state_after_init(std::uint32_t signature, cr0 old_cr0, efer old_efer) noexcept {
  reset_state s;
  s.rdx = signature;
  s.cr0_value = cr0{(old_cr0.raw() & (cr0::cd | cr0::nw).raw()) | cr0::et.raw()};
  s.efer_value = old_efer.without(efer::lma);
  return s;
}

/// What INIT leaves as it was (SDM 10.1, Table 10-1 INIT column), as data a vCPU reset reads.
struct init_preserves {
  static constexpr bool x87_state = true;     ///< FPU registers, control/status/tag words
  static constexpr bool sse_state = true;     ///< XMM registers and MXCSR
  static constexpr bool msrs = true;          ///< including MTRRs, PAT, TSC, IA32_APIC_BASE
  static constexpr bool caches = true;        ///< data and code caches
  static constexpr bool tlbs = false;         ///< "the TLBs and BTB are invalidated"
};

/// Loads the SIPI start-up state: CS selector = vector << 8, base = vector << 12, IP = 0.
constexpr void apply_sipi(reset_state& s, std::uint8_t vector) noexcept {
  s.cs.selector = static_cast<std::uint16_t>(std::uint16_t{vector} << 8);
  s.cs.base = std::uint64_t{vector} << 12;
  s.rip = 0;
}

/// The start-up state of a processor in the MP protocol (SDM 10.4.2): after INIT the
/// bootstrap processor (IA32_APIC_BASE.BSP, bit 8) runs from the reset vector; every other
/// processor waits for a SIPI. A SIPI to a processor not waiting for one is discarded
/// (SDM Vol. 3C 26.2 lists the same for VMX: "If a logical processor is not in the
/// wait-for-SIPI state when a SIPI arrives, no VM exit occurs and the SIPI is discarded").
enum class mp_state : std::uint8_t { running, wait_for_sipi };

/// INIT received: the new start-up state.
[[nodiscard]] constexpr mp_state on_init(bool bsp) noexcept { return bsp ? mp_state::running : mp_state::wait_for_sipi; }

/// SIPI received in state `s`: true if it starts the processor (it leaves wait-for-SIPI).
[[nodiscard]] constexpr bool sipi_starts(mp_state s) noexcept { return s == mp_state::wait_for_sipi; }

}  // namespace hvkit::x86
