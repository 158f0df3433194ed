// SPDX-License-Identifier: MIT
/// @file
/// @brief A decoded instruction: mnemonic, operands, prefixes, length (the decoder's output).
///
/// Plain data, no behaviour: the decoder (emulate/decoder.hpp) fills it, the emulator
/// (emulate/emulator.hpp) executes it, and the Zydis differential test compares it field by
/// field. Registers are numbered as in the encoding (0 = rAX ... 15 = r15; segment registers
/// ES=0, CS, SS, DS, FS, GS=5; CRn/DRn by n).
#pragma once

#include <cstdint>

namespace hvkit::emulate {

/// The size of the code segment the instruction is decoded for (SDM 3.4.5: CS.D, CS.L).
enum class code_size : std::uint8_t { c16 = 2, c32 = 4, c64 = 8 };

/// The subset of instructions hvkit decodes: the ones that cause VM exits or touch MMIO.
enum class mnemonic : std::uint8_t {
  invalid = 0,
  // data movement
  mov, movzx, movsx, movsxd, mov_from_sreg, mov_to_sreg, xchg,
  // ALU group (order = the ModRM.reg / opcode-bits-5:3 encoding, SDM Table A-6 group 1)
  add, or_, adc, sbb, and_, sub, xor_, cmp,
  test, not_, neg, inc, dec,
  // bit tests (0F A3/AB/B3/BB, 0F BA /4-/7)
  bt, bts, btr, btc,
  // compare-exchange (0F B0/B1 CMPXCHG; 0F C7 /1 CMPXCHG8B, REX.W: CMPXCHG16B)
  cmpxchg, cmpxchg8b, cmpxchg16b,
  // string instructions (operands implicit: rSI/rDI/rCX/rAX)
  movs, cmps, stos, lods, ins, outs,
  // port I/O
  in, out,
  // system
  sldt, str, lldt, ltr, verr, verw,
  sgdt, sidt, lgdt, lidt, smsw, lmsw, invlpg,
  mov_from_cr, mov_to_cr, mov_from_dr, mov_to_dr,
  clts, cpuid, rdmsr, wrmsr, hlt, invd, wbinvd,
  // hypercalls: decoded (their length, for a hypervisor without the CPU's next-RIP), never
  // executed by the emulator (0F 01 C1 VMCALL, SDM Vol. 2B; 0F 01 D9 VMMCALL, APM Vol. 3)
  vmcall, vmmcall,
  // software interrupts (CC INT3, CD ib INT n, CE INTO, F1 INT1): decoded for their length
  // (an event re-injected past its instruction), never executed by the emulator
  int3, int_n, into, int1,
};

/// Number of mnemonics (for tables indexed by mnemonic).
inline constexpr unsigned mnemonic_count = static_cast<unsigned>(mnemonic::int1) + 1;

/// Segment registers in encoding order (SDM Table 3-?? "Sreg" field; ModRM.reg of 8C/8E).
enum class sreg : std::uint8_t { es = 0, cs = 1, ss = 2, ds = 3, fs = 4, gs = 5 };

/// What an operand is.
enum class operand_kind : std::uint8_t {
  none,
  gpr,  ///< general-purpose register `reg`, `size` bytes (high8: AH/CH/DH/BH)
  mem,  ///< the instruction's memory operand (instruction::mem), `size` bytes
  imm,  ///< the immediate (instruction::imm), already sign- or zero-extended to `size` bytes
  sreg, ///< segment register `reg`
  cr,   ///< control register `reg`
  dr,   ///< debug register `reg`
};

/// One explicit operand.
struct operand {
  operand_kind kind = operand_kind::none;
  std::uint8_t size = 0;  ///< bytes: 1, 2, 4, 8 (descriptor-table operands: 6 or 10; CMPXCHG16B: 16)
  std::uint8_t reg = 0;   ///< register number (gpr 0-15, sreg 0-5, cr/dr 0-15)
  bool high8 = false;     ///< gpr only: AH, CH, DH, BH (reg 4-7 with no REX prefix)
};

/// Marks a missing base or index register.
inline constexpr std::uint8_t no_register = 0xff;

/// The memory operand's effective-address components (SDM 3.7.5, 2.2.1.6).
struct memory_operand {
  sreg segment = sreg::ds;            ///< override or default (SS for rBP/rSP-based forms)
  std::uint8_t base = no_register;    ///< gpr number or no_register
  std::uint8_t index = no_register;   ///< gpr number or no_register
  std::uint8_t scale = 1;             ///< 1, 2, 4 or 8
  bool rip_relative = false;          ///< disp is relative to the next instruction's RIP
  std::int64_t disp = 0;              ///< sign-extended displacement (moffs: zero-extended)
};

/// Repeat prefix in effect (the last of F2/F3 wins).
enum class rep_prefix : std::uint8_t { none, rep_e, rep_ne };

/// A decoded instruction.
struct instruction {
  mnemonic op = mnemonic::invalid;
  std::uint8_t length = 0;        ///< bytes, 1..15
  code_size mode = code_size::c64;
  std::uint8_t operand_size = 0;  ///< the operation size in bytes (1, 2, 4, 8)
  std::uint8_t address_size = 0;  ///< the address size in bytes (2, 4, 8)
  operand dst{};                  ///< first explicit operand (Intel order)
  operand src{};                  ///< second explicit operand
  memory_operand mem{};           ///< valid when dst or src is operand_kind::mem
  std::uint64_t imm = 0;          ///< immediate, zero-extended from operand size (see operand)
  rep_prefix rep = rep_prefix::none;
  bool lock = false;
  bool segment_override = false;  ///< a segment prefix that is effective for this instruction
  std::uint8_t opcode = 0;        ///< the last opcode byte (after 0F)
  bool two_byte = false;          ///< opcode is in the 0F map
  std::uint8_t modrm = 0;         ///< raw ModRM byte (when present)
  bool has_modrm = false;

  /// True if an explicit operand is in memory.
  [[nodiscard]] constexpr bool has_memory_operand() const noexcept {
    return dst.kind == operand_kind::mem || src.kind == operand_kind::mem;
  }
};

}  // namespace hvkit::emulate
