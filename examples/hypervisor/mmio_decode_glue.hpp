/// @file
/// @brief STAND-IN until include/emulate/ lands: decodes the MOV forms that may touch MMIO
/// in 64-bit mode, enough to emulate an EPT-violation access (the exit reports the
/// guest-physical address, so only the direction, width, register/immediate operand and
/// instruction length are needed). Anything else is "not emulable": the hypervisor then
/// injects #UD. Swap for hvkit::emulate's decoder and emulator.
///
/// Forms (SDM Vol. 2B "MOV", Vol. 2B "MOVZX"; ModRM/SIB: Vol. 2A 2.1.5, REX: 2.2.1):
///   88 /r  MOV r/m8, r8        89 /r  MOV r/m16/32/64, r
///   8A /r  MOV r8, r/m8        8B /r  MOV r16/32/64, r/m
///   C6 /0  MOV r/m8, imm8      C7 /0  MOV r/m16/32/64, imm16/32 (sign-extended to 64)
///   0F B6  MOVZX r, r/m8       0F B7  MOVZX r, r/m16
/// with prefixes 66, 67, segment overrides and REX.
#pragma once

#include <cstdint>

namespace hv::glue {

struct mmio_insn {
  bool ok;
  unsigned length;
  bool is_store;       ///< memory is the destination
  bool has_imm;        ///< store of an immediate
  unsigned mem_size;   ///< bytes accessed in memory: 1, 2, 4 or 8
  unsigned reg_size;   ///< width of the register operand (MOVZX: destination width)
  unsigned reg;        ///< 0 = RAX ... 15 = R15
  bool high_byte;      ///< AH/CH/DH/BH (8-bit operand, no REX, reg 4-7)
  std::uint64_t imm;
};

inline mmio_insn decode_mmio_mov(const std::uint8_t* b, unsigned avail) {
  mmio_insn in{};
  unsigned i = 0;
  bool opsize16 = false;
  for (; i < avail && i < 14; ++i) {
    std::uint8_t p = b[i];
    if (p == 0x66) opsize16 = true;
    else if (p == 0x67 || p == 0x2E || p == 0x36 || p == 0x3E || p == 0x26 || p == 0x64 || p == 0x65) continue;
    else break;
  }
  std::uint8_t rex = 0;
  if (i < avail && (b[i] & 0xF0) == 0x40) rex = b[i++];
  if (i >= avail) return in;
  const bool rex_w = rex & 8;
  const unsigned full = rex_w ? 8 : (opsize16 ? 2 : 4);
  std::uint8_t op = b[i++];
  bool two_byte = false;
  if (op == 0x0F) {
    if (i >= avail) return in;
    op = b[i++];
    two_byte = true;
  }
  if (!two_byte) {
    switch (op) {
      case 0x88: in.is_store = true; in.mem_size = in.reg_size = 1; break;
      case 0x89: in.is_store = true; in.mem_size = in.reg_size = full; break;
      case 0x8A: in.mem_size = in.reg_size = 1; break;
      case 0x8B: in.mem_size = in.reg_size = full; break;
      case 0xC6: in.is_store = in.has_imm = true; in.mem_size = 1; break;
      case 0xC7: in.is_store = in.has_imm = true; in.mem_size = full; break;
      default: return in;
    }
  } else {
    if (op == 0xB6) in.mem_size = 1;
    else if (op == 0xB7) in.mem_size = 2;
    else return in;
    in.reg_size = full;
  }
  if (i >= avail) return in;
  std::uint8_t modrm = b[i++];
  unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
  if (mod == 3) return in;                    // register operand: not a memory access
  if (in.has_imm && reg != 0) return in;      // C6/C7 with /r != 0 is not MOV
  in.reg = reg | ((rex & 4) ? 8 : 0);
  in.high_byte = !in.has_imm && in.reg_size == 1 && rex == 0 && reg >= 4;
  if (in.high_byte) in.reg = reg - 4;
  unsigned disp = 0;
  if (rm == 4) {  // SIB
    if (i >= avail) return in;
    std::uint8_t sib = b[i++];
    if (mod == 0 && (sib & 7) == 5) disp = 4;
  }
  if (mod == 0 && rm == 5) disp = 4;  // RIP-relative
  if (mod == 1) disp = 1;
  if (mod == 2) disp = 4;
  i += disp;
  if (in.has_imm) {
    unsigned isz = in.mem_size == 1 ? 1 : (in.mem_size == 2 ? 2 : 4);
    if (i + isz > avail) return in;
    std::uint64_t v = 0;
    for (unsigned k = 0; k < isz; ++k) v |= std::uint64_t{b[i + k]} << (8 * k);
    if (isz == 4 && (v & 0x80000000u) && in.mem_size == 8) v |= 0xFFFFFFFF00000000ull;
    in.imm = v;
    i += isz;
  }
  if (i > avail || i > 15) return in;
  in.length = i;
  in.ok = true;
  return in;
}

}  // namespace hv::glue
