// SPDX-License-Identifier: MIT
/// @file
/// @brief The x86 decoder for the instructions that exit: 16-, 32- and 64-bit code.
///
/// `decode(bytes, n, mode)` reads legacy prefixes, REX, the opcode, ModRM/SIB/displacement
/// and immediates (SDM Vol. 2, chapter 2) and returns an emulate::instruction, or a
/// decode_error: `truncated` (more bytes are needed than were given; fetch more and call
/// again), `too_long` (the instruction would exceed 15 bytes: #GP(0), SDM 2.3.11),
/// `invalid` (an encoding the CPU rejects: #UD) or `unsupported` (a valid instruction
/// outside hvkit's subset). The decoder is constexpr, reads no byte at or after `n`, and
/// never reads past byte 15.
#pragma once

#include <cstddef>
#include <cstdint>

#include "instruction.hpp"
#include "../x86/result.hpp"

namespace hvkit::emulate {

/// Why an instruction could not be decoded.
enum class decode_error : std::uint8_t {
  truncated,    ///< the bytes ran out before the instruction ended (and before 15 bytes)
  too_long,     ///< the instruction exceeds 15 bytes: #GP(0) (SDM 2.3.11)
  invalid,      ///< an invalid encoding: #UD
  unsupported,  ///< a valid instruction that hvkit does not emulate
};

/// The architectural limit on instruction length (SDM 2.3.11).
inline constexpr std::size_t max_instruction_length = 15;

namespace detail {

class byte_reader {
 public:
  constexpr byte_reader(const std::uint8_t* p, std::size_t n) noexcept : p_(p), n_(n) {}
  /// Reads one byte; on failure records why and returns 0.
  constexpr std::uint8_t next() noexcept {
    if (failed_) return 0;
    if (pos_ >= max_instruction_length) return fail(decode_error::too_long);
    if (pos_ >= n_) return fail(decode_error::truncated);
    return p_[pos_++];
  }
  [[nodiscard]] constexpr bool can_peek() const noexcept {
    return !failed_ && pos_ < n_ && pos_ < max_instruction_length;
  }
  [[nodiscard]] constexpr std::uint8_t peek() const noexcept { return p_[pos_]; }
  /// Little-endian unsigned value of `size` bytes.
  constexpr std::uint64_t next_le(unsigned size) noexcept {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < size; ++i) v |= std::uint64_t{next()} << (8 * i);
    return v;
  }
  [[nodiscard]] constexpr bool failed() const noexcept { return failed_; }
  [[nodiscard]] constexpr decode_error error() const noexcept { return error_; }
  [[nodiscard]] constexpr std::size_t position() const noexcept { return pos_; }
  /// Called when the next byte is needed but the reader ended: classifies why.
  constexpr void require_one_more() noexcept {
    if (failed_) return;
    if (pos_ >= max_instruction_length)
      fail(decode_error::too_long);
    else if (pos_ >= n_)
      fail(decode_error::truncated);
  }

 private:
  constexpr std::uint8_t fail(decode_error e) noexcept {
    failed_ = true;
    error_ = e;
    return 0;
  }
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
  bool failed_ = false;
  decode_error error_ = decode_error::truncated;
};

[[nodiscard]] constexpr std::int64_t sign_extend(std::uint64_t v, unsigned bytes) noexcept {
  if (bytes >= 8) return static_cast<std::int64_t>(v);
  const unsigned shift = 64 - 8 * bytes;
  return static_cast<std::int64_t>(v << shift) >> shift;
}

[[nodiscard]] constexpr std::uint64_t size_mask(unsigned bytes) noexcept {
  return bytes >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
}

/// Decoding state shared by the helpers.
struct decode_state {
  byte_reader rd;
  code_size mode;
  std::uint8_t rex = 0;  // 0 if no (effective) REX prefix
  bool opsize_prefix = false;
  bool adsize_prefix = false;
  bool has_segment = false;
  sreg segment = sreg::ds;
  std::uint8_t modrm = 0;

  [[nodiscard]] constexpr bool rex_w() const noexcept { return (rex & 8) != 0; }
  [[nodiscard]] constexpr unsigned rex_r() const noexcept { return (rex & 4) ? 8u : 0u; }
  [[nodiscard]] constexpr unsigned rex_x() const noexcept { return (rex & 2) ? 8u : 0u; }
  [[nodiscard]] constexpr unsigned rex_b() const noexcept { return (rex & 1) ? 8u : 0u; }
  [[nodiscard]] constexpr unsigned mod() const noexcept { return modrm >> 6; }
  [[nodiscard]] constexpr unsigned reg() const noexcept { return (modrm >> 3) & 7; }
  [[nodiscard]] constexpr unsigned rm() const noexcept { return modrm & 7; }
};

/// A general-purpose register operand from a 3-bit field plus its REX extension bit.
[[nodiscard]] constexpr operand gpr_operand(const decode_state& s, unsigned field, unsigned ext,
                                            unsigned size) noexcept {
  operand o;
  o.kind = operand_kind::gpr;
  o.size = static_cast<std::uint8_t>(size);
  // SDM 3.4.1.1 / 2.2.1.2: without REX, byte registers 4-7 are AH, CH, DH, BH; with any REX
  // prefix they are SPL, BPL, SIL, DIL.
  if (size == 1 && s.rex == 0 && field >= 4) {
    o.reg = static_cast<std::uint8_t>(field - 4);
    o.high8 = true;
  } else {
    o.reg = static_cast<std::uint8_t>(field | ext);
  }
  return o;
}

/// Reads the memory-operand part of ModRM (mod != 3): SIB, displacement (SDM 2.1.5,
/// Tables 2-1, 2-2, 2-3; 2.2.1.6 RIP-relative addressing).
constexpr void decode_memory(decode_state& s, instruction& in) noexcept {
  auto& m = in.mem;
  const unsigned mod = s.mod();
  const unsigned rm = s.rm();
  bool stack_default = false;
  if (in.address_size == 2) {
    // Table 2-1: 16-bit addressing forms.
    constexpr std::uint8_t bases[8] = {3, 3, 5, 5, 6, 7, 5, 3};  // BX BX BP BP SI DI BP BX
    constexpr std::uint8_t indexes[8] = {6, 7, 6, 7, no_register, no_register, no_register, no_register};
    if (mod == 0 && rm == 6) {
      m.disp = sign_extend(s.rd.next_le(2), 2);
    } else {
      m.base = bases[rm];
      m.index = indexes[rm];
      stack_default = m.base == 5;  // BP-based forms default to SS
      if (mod == 1) m.disp = sign_extend(s.rd.next_le(1), 1);
      if (mod == 2) m.disp = sign_extend(s.rd.next_le(2), 2);
    }
  } else {
    if (rm == 4) {
      const std::uint8_t sib = s.rd.next();
      const unsigned ss = sib >> 6;
      const unsigned index = ((sib >> 3) & 7) | s.rex_x();
      const unsigned base = sib & 7;
      if (index != 4) {  // index 100b without REX.X means "no index" (Table 2-3)
        m.index = static_cast<std::uint8_t>(index);
        m.scale = static_cast<std::uint8_t>(1u << ss);
      }
      if (base == 5 && mod == 0) {  // [scaled index] + disp32, no base
        m.disp = sign_extend(s.rd.next_le(4), 4);
      } else {
        m.base = static_cast<std::uint8_t>(base | s.rex_b());
      }
    } else if (rm == 5 && mod == 0) {
      m.disp = sign_extend(s.rd.next_le(4), 4);
      // SDM 2.2.1.6: in 64-bit mode this form is RIP-relative (REX.B does not change it).
      m.rip_relative = s.mode == code_size::c64;
    } else {
      m.base = static_cast<std::uint8_t>(rm | s.rex_b());
    }
    // SS is the default segment for rSP- and rBP-based addressing (SDM 3.7.5, Table 3-5).
    stack_default = m.base == 4 || m.base == 5;
    if (mod == 1) m.disp = sign_extend(s.rd.next_le(1), 1);
    if (mod == 2) m.disp = sign_extend(s.rd.next_le(4), 4);
  }
  m.segment = s.has_segment ? s.segment : (stack_default ? sreg::ss : sreg::ds);
  in.segment_override = s.has_segment;
}

/// Reads ModRM and returns the r/m operand of `size` bytes (register or memory).
constexpr operand decode_rm(decode_state& s, instruction& in, unsigned size) noexcept {
  if (s.mod() == 3) return gpr_operand(s, s.rm(), s.rex_b(), size);
  decode_memory(s, in);
  operand o;
  o.kind = operand_kind::mem;
  o.size = static_cast<std::uint8_t>(size);
  return o;
}

[[nodiscard]] constexpr operand reg_operand(const decode_state& s, unsigned size) noexcept {
  return gpr_operand(s, s.reg(), s.rex_r(), size);
}

[[nodiscard]] constexpr operand accumulator(unsigned size) noexcept {
  operand o;
  o.kind = operand_kind::gpr;
  o.size = static_cast<std::uint8_t>(size);
  o.reg = 0;
  return o;
}

/// Reads an immediate of `bytes` bytes, sign-extends it to `size` bytes when `sign` is set.
constexpr operand immediate(decode_state& s, instruction& in, unsigned bytes, unsigned size, bool sign) noexcept {
  const std::uint64_t raw = s.rd.next_le(bytes);
  in.imm = (sign ? static_cast<std::uint64_t>(sign_extend(raw, bytes)) : raw) & size_mask(size);
  operand o;
  o.kind = operand_kind::imm;
  o.size = static_cast<std::uint8_t>(size);
  return o;
}

constexpr mnemonic alu_ops[8] = {mnemonic::add, mnemonic::or_,  mnemonic::adc, mnemonic::sbb,
                                 mnemonic::and_, mnemonic::sub, mnemonic::xor_, mnemonic::cmp};

/// SDM Vol. 2 "LOCK": the prefix is allowed only on these read-modify-write instructions
/// with a memory destination; elsewhere it raises #UD.
[[nodiscard]] constexpr bool lock_allowed(const instruction& in) noexcept {
  if (in.dst.kind != operand_kind::mem) return false;
  switch (in.op) {
    case mnemonic::add: case mnemonic::or_: case mnemonic::adc: case mnemonic::sbb:
    case mnemonic::and_: case mnemonic::sub: case mnemonic::xor_:
    case mnemonic::not_: case mnemonic::neg: case mnemonic::inc: case mnemonic::dec:
    case mnemonic::xchg: case mnemonic::bts: case mnemonic::btr: case mnemonic::btc:
    case mnemonic::cmpxchg: case mnemonic::cmpxchg8b: case mnemonic::cmpxchg16b:
      return true;
    default: return false;
  }
}

/// Decodes the opcode and operands after the prefixes. Returns false if the instruction is
/// invalid (#UD) or unsupported; `why` says which.
constexpr bool decode_opcode(decode_state& s, instruction& in, decode_error& why) noexcept {
  const unsigned osz = in.operand_size;
  const unsigned iz = osz == 2 ? 2 : 4;  // Iz: 16 or 32 bits, sign-extended to 64
  auto modrm = [&] {
    s.modrm = s.rd.next();
    in.modrm = s.modrm;
    in.has_modrm = true;
  };
  // Before rejecting an instruction whose ModRM was read, consume its SIB and displacement,
  // so that the 15-byte limit (#GP, which takes priority over #UD: SDM 6.9, Table 6-2) is
  // still detected.
  auto reject = [&](decode_error e) {
    if (in.has_modrm && s.mod() != 3) decode_memory(s, in);
    why = e;
    return false;
  };
  auto unsupported = [&] { return reject(decode_error::unsupported); };
  auto invalid = [&] { return reject(decode_error::invalid); };
  auto ev_gv = [&](mnemonic op, unsigned size) {
    modrm();
    in.op = op;
    in.operand_size = static_cast<std::uint8_t>(size);
    in.src = reg_operand(s, size);
    in.dst = decode_rm(s, in, size);
    return true;
  };
  auto gv_ev = [&](mnemonic op, unsigned size) {
    modrm();
    in.op = op;
    in.operand_size = static_cast<std::uint8_t>(size);
    in.dst = reg_operand(s, size);
    in.src = decode_rm(s, in, size);
    return true;
  };

  std::uint8_t op = s.rd.next();
  if (s.rd.failed()) return false;
  if (op != 0x0f) {
    in.opcode = op;
    if (op < 0x40 && (op & 7) < 6) {  // ALU group, SDM Table A-2 rows 0-3
      const mnemonic m = alu_ops[op >> 3];
      switch (op & 7) {
        case 0: return ev_gv(m, 1);
        case 1: return ev_gv(m, osz);
        case 2: return gv_ev(m, 1);
        case 3: return gv_ev(m, osz);
        case 4:
          in.op = m;
          in.operand_size = 1;
          in.dst = accumulator(1);
          in.src = immediate(s, in, 1, 1, false);
          return true;
        default:
          in.op = m;
          in.dst = accumulator(osz);
          in.src = immediate(s, in, iz, osz, true);
          return true;
      }
    }
    switch (op) {
      case 0x63:
        modrm();
        if (s.mode != code_size::c64) return unsupported();  // ARPL
        in.op = mnemonic::movsxd;
        in.dst = reg_operand(s, osz);
        in.src = decode_rm(s, in, osz == 2 ? 2 : 4);
        return true;
      case 0x6c: case 0x6d:
        in.op = mnemonic::ins;
        in.operand_size = static_cast<std::uint8_t>(op == 0x6c ? 1 : (osz == 2 ? 2 : 4));
        return true;
      case 0x6e: case 0x6f:
        in.op = mnemonic::outs;
        in.operand_size = static_cast<std::uint8_t>(op == 0x6e ? 1 : (osz == 2 ? 2 : 4));
        return true;
      case 0x82:
        // SDM Vol. 2 Table A-2: 82 is Grp 1 Eb,Ib, an alias of 80, marked i64 (invalid in
        // 64-bit mode, #UD). Outside 64-bit mode it decodes exactly like 80.
        if (s.mode == code_size::c64) {
          modrm();  // ModRM, SIB and displacement still count toward the 15-byte limit
          return invalid();
        }
        [[fallthrough]];
      case 0x80: case 0x81: case 0x83: {
        modrm();
        const unsigned size = (op == 0x80 || op == 0x82) ? 1 : osz;
        in.op = alu_ops[s.reg()];
        in.operand_size = static_cast<std::uint8_t>(size);
        in.dst = decode_rm(s, in, size);
        in.src = op == 0x81 ? immediate(s, in, iz, size, true) : immediate(s, in, 1, size, true);
        return true;
      }
      case 0x84: return ev_gv(mnemonic::test, 1);
      case 0x85: return ev_gv(mnemonic::test, osz);
      case 0x86: return ev_gv(mnemonic::xchg, 1);
      case 0x87: return ev_gv(mnemonic::xchg, osz);
      case 0x88: return ev_gv(mnemonic::mov, 1);
      case 0x89: return ev_gv(mnemonic::mov, osz);
      case 0x8a: return gv_ev(mnemonic::mov, 1);
      case 0x8b: return gv_ev(mnemonic::mov, osz);
      case 0x8c: {
        modrm();
        if (s.reg() > 5) return invalid();  // SDM MOV: Sreg 6, 7 are reserved (#UD)
        in.op = mnemonic::mov_from_sreg;
        // A memory destination is always 16 bits; a register gets the operand size.
        in.dst = decode_rm(s, in, s.mod() == 3 ? osz : 2);
        in.operand_size = in.dst.size;
        in.src.kind = operand_kind::sreg;
        in.src.size = 2;
        in.src.reg = static_cast<std::uint8_t>(s.reg());
        return true;
      }
      case 0x8e:
        modrm();
        // Loading CS with MOV, or a reserved Sreg, is #UD (SDM MOV).
        if (s.reg() > 5 || s.reg() == static_cast<unsigned>(sreg::cs)) return invalid();
        in.op = mnemonic::mov_to_sreg;
        in.operand_size = 2;
        in.dst.kind = operand_kind::sreg;
        in.dst.size = 2;
        in.dst.reg = static_cast<std::uint8_t>(s.reg());
        in.src = decode_rm(s, in, 2);
        return true;
      case 0xa0: case 0xa1: case 0xa2: case 0xa3: {
        // moffs: an address-size offset, no ModRM (SDM MOV, "moffs").
        const unsigned size = (op & 1) ? osz : 1;
        in.op = mnemonic::mov;
        in.operand_size = static_cast<std::uint8_t>(size);
        in.mem.disp = static_cast<std::int64_t>(s.rd.next_le(in.address_size));
        in.mem.segment = s.has_segment ? s.segment : sreg::ds;
        in.segment_override = s.has_segment;
        operand m;
        m.kind = operand_kind::mem;
        m.size = static_cast<std::uint8_t>(size);
        if (op < 0xa2) {
          in.dst = accumulator(size);
          in.src = m;
        } else {
          in.dst = m;
          in.src = accumulator(size);
        }
        return true;
      }
      case 0xa4: case 0xa5: in.op = mnemonic::movs; break;
      case 0xa6: case 0xa7: in.op = mnemonic::cmps; break;
      case 0xaa: case 0xab: in.op = mnemonic::stos; break;
      case 0xac: case 0xad: in.op = mnemonic::lods; break;
      case 0xa8:
        in.op = mnemonic::test;
        in.operand_size = 1;
        in.dst = accumulator(1);
        in.src = immediate(s, in, 1, 1, false);
        return true;
      case 0xa9:
        in.op = mnemonic::test;
        in.dst = accumulator(osz);
        in.src = immediate(s, in, iz, osz, true);
        return true;
      case 0xc6: case 0xc7: {
        modrm();
        if (s.reg() != 0) {
          // C6 F8 / C7 F8 are XABORT / XBEGIN (RTM); the rest of the group is #UD.
          // Their rel16/rel32 / imm8 is consumed first, so that the 15-byte limit is still seen.
          if (s.reg() == 7 && s.mod() == 3 && (op == 0xc7 || s.rm() == 0)) {
            static_cast<void>(s.rd.next_le(op == 0xc6 ? 1 : iz));
            return unsupported();
          }
          return invalid();
        }
        const unsigned size = op == 0xc6 ? 1 : osz;
        in.op = mnemonic::mov;
        in.operand_size = static_cast<std::uint8_t>(size);
        in.dst = decode_rm(s, in, size);
        in.src = op == 0xc6 ? immediate(s, in, 1, 1, false) : immediate(s, in, iz, size, true);
        return true;
      }
      case 0xe4: case 0xe5: case 0xe6: case 0xe7: case 0xec: case 0xed: case 0xee: case 0xef: {
        // IN/OUT: AL or eAX (16 or 32 bits; REX.W does not make it 64), port imm8 or DX.
        const unsigned size = (op & 1) ? (osz == 2 ? 2 : 4) : 1;
        in.op = (op & 2) ? mnemonic::out : mnemonic::in;
        in.operand_size = static_cast<std::uint8_t>(size);
        operand port;
        if (op < 0xe8) {
          port = immediate(s, in, 1, 1, false);
        } else {
          port.kind = operand_kind::gpr;
          port.size = 2;
          port.reg = 2;  // DX
        }
        if (in.op == mnemonic::in) {
          in.dst = accumulator(size);
          in.src = port;
        } else {
          in.dst = port;
          in.src = accumulator(size);
        }
        return true;
      }
      case 0xf4: in.op = mnemonic::hlt; in.operand_size = 0; return true;
      case 0xcc: in.op = mnemonic::int3; in.operand_size = 0; return true;
      case 0xcd: in.op = mnemonic::int_n; in.operand_size = 0; in.src = immediate(s, in, 1, 1, false); return true;
      case 0xce:  // INTO is invalid in 64-bit mode (SDM Vol. 2A INT n/INTO/INT3/INT1)
        if (s.mode == code_size::c64) return invalid();
        in.op = mnemonic::into; in.operand_size = 0; return true;
      case 0xf1: in.op = mnemonic::int1; in.operand_size = 0; return true;
      case 0xf6: case 0xf7: {
        modrm();
        const unsigned size = op == 0xf6 ? 1 : osz;
        in.operand_size = static_cast<std::uint8_t>(size);
        switch (s.reg()) {
          case 0: case 1:  // /1 is an undocumented alias of TEST that CPUs execute
            in.op = mnemonic::test;
            in.dst = decode_rm(s, in, size);
            in.src = op == 0xf6 ? immediate(s, in, 1, 1, false) : immediate(s, in, iz, size, true);
            return true;
          case 2: in.op = mnemonic::not_; in.dst = decode_rm(s, in, size); return true;
          case 3: in.op = mnemonic::neg; in.dst = decode_rm(s, in, size); return true;
          default: return unsupported();  // MUL, IMUL, DIV, IDIV
        }
      }
      case 0xfe: case 0xff: {
        modrm();
        const unsigned size = op == 0xfe ? 1 : osz;
        in.operand_size = static_cast<std::uint8_t>(size);
        if (s.reg() > 1) {
          if (op == 0xfe || s.reg() == 7) return invalid();
          return unsupported();  // CALL, JMP, PUSH
        }
        in.op = s.reg() == 0 ? mnemonic::inc : mnemonic::dec;
        in.dst = decode_rm(s, in, size);
        return true;
      }
      default: return unsupported();
    }
    // String instructions (operands implicit).
    if ((op & 1) == 0) in.operand_size = 1;
    return true;
  }

  // Two-byte opcodes (0F xx), SDM Table A-3.
  op = s.rd.next();
  if (s.rd.failed()) return false;
  in.two_byte = true;
  in.opcode = op;
  switch (op) {
    case 0x00: {
      modrm();
      static_assert(static_cast<unsigned>(mnemonic::verw) - static_cast<unsigned>(mnemonic::sldt) == 5);
      if (s.reg() > 5) return invalid();
      in.op = static_cast<mnemonic>(static_cast<unsigned>(mnemonic::sldt) + s.reg());
      // SLDT/STR to a register use the operand size; every memory form is 16 bits.
      const bool store = s.reg() < 2;
      const unsigned size = store && s.mod() == 3 ? osz : 2;
      in.operand_size = static_cast<std::uint8_t>(size);
      if (store)
        in.dst = decode_rm(s, in, size);
      else
        in.src = decode_rm(s, in, size);
      return true;
    }
    case 0x01: {
      modrm();
      const unsigned reg = s.reg();
      if (s.mod() == 3) {
        // Register forms of group 7 are other instructions (VMCALL, MONITOR, SWAPGS, ...),
        // except SMSW and LMSW.
        if (reg == 4) {
          in.op = mnemonic::smsw;
          in.operand_size = static_cast<std::uint8_t>(osz);
          in.dst = decode_rm(s, in, osz);
          return true;
        }
        if (reg == 6) {
          in.op = mnemonic::lmsw;
          in.operand_size = 2;
          in.src = decode_rm(s, in, 2);
          return true;
        }
        // 0F 01 C1 VMCALL, 0F 01 D9 VMMCALL (no operands; only their length matters here).
        if (reg == 0 && s.rm() == 1) { in.op = mnemonic::vmcall; in.operand_size = 0; return true; }
        if (reg == 3 && s.rm() == 1) { in.op = mnemonic::vmmcall; in.operand_size = 0; return true; }
        return unsupported();
      }
      // Pseudo-descriptor operands: 2-byte limit + 4-byte base, or 8-byte base in 64-bit mode.
      const unsigned table = s.mode == code_size::c64 ? 10 : 6;
      switch (reg) {
        case 0: in.op = mnemonic::sgdt; in.dst = decode_rm(s, in, table); break;
        case 1: in.op = mnemonic::sidt; in.dst = decode_rm(s, in, table); break;
        case 2: in.op = mnemonic::lgdt; in.src = decode_rm(s, in, table); break;
        case 3: in.op = mnemonic::lidt; in.src = decode_rm(s, in, table); break;
        case 4: in.op = mnemonic::smsw; in.dst = decode_rm(s, in, 2); in.operand_size = 2; return true;
        case 6: in.op = mnemonic::lmsw; in.src = decode_rm(s, in, 2); in.operand_size = 2; return true;
        case 7: in.op = mnemonic::invlpg; in.src = decode_rm(s, in, 1); in.operand_size = 0; return true;
        default: return unsupported();  // /5: RSTORSSP and friends
      }
      // The operand size selects a 24- or 32-bit base outside 64-bit mode (SDM LGDT/LIDT).
      in.operand_size = static_cast<std::uint8_t>(s.mode == code_size::c64 ? 8 : osz);
      return true;
    }
    case 0x06: in.op = mnemonic::clts; in.operand_size = 0; return true;
    case 0x08: in.op = mnemonic::invd; in.operand_size = 0; return true;
    case 0x09: in.op = mnemonic::wbinvd; in.operand_size = 0; return true;
    case 0x20: case 0x21: case 0x22: case 0x23: {
      // MOV to/from CR/DR: ModRM.mod is ignored, the r/m field is always a register; the
      // operand size is 32 bits outside 64-bit mode and 64 bits in it (SDM MOV CR, MOV DR).
      modrm();
      const unsigned size = s.mode == code_size::c64 ? 8 : 4;
      const bool is_cr = op == 0x20 || op == 0x22;
      const unsigned n = s.reg() | s.rex_r();
      if (is_cr) {
        if (!(n == 0 || n == 2 || n == 3 || n == 4 || n == 8)) return invalid();
      } else if (s.rex_r() != 0) {
        return invalid();  // SDM MOV DR: REX.R is #UD
      }
      in.operand_size = static_cast<std::uint8_t>(size);
      operand ctl;
      ctl.kind = is_cr ? operand_kind::cr : operand_kind::dr;
      ctl.size = static_cast<std::uint8_t>(size);
      ctl.reg = static_cast<std::uint8_t>(n);
      operand g = gpr_operand(s, s.rm(), s.rex_b(), size);
      g.high8 = false;
      if (op < 0x22) {
        in.op = is_cr ? mnemonic::mov_from_cr : mnemonic::mov_from_dr;
        in.dst = g;
        in.src = ctl;
      } else {
        in.op = is_cr ? mnemonic::mov_to_cr : mnemonic::mov_to_dr;
        in.dst = ctl;
        in.src = g;
      }
      return true;
    }
    case 0x30: in.op = mnemonic::wrmsr; in.operand_size = 0; return true;
    case 0x32: in.op = mnemonic::rdmsr; in.operand_size = 0; return true;
    case 0xa2: in.op = mnemonic::cpuid; in.operand_size = 0; return true;
    case 0xa3: return ev_gv(mnemonic::bt, osz);
    case 0xab: return ev_gv(mnemonic::bts, osz);
    case 0xb3: return ev_gv(mnemonic::btr, osz);
    case 0xbb: return ev_gv(mnemonic::btc, osz);
    case 0xba: {
      modrm();
      if (s.reg() < 4) return invalid();
      constexpr mnemonic bit_ops[4] = {mnemonic::bt, mnemonic::bts, mnemonic::btr, mnemonic::btc};
      in.op = bit_ops[s.reg() - 4];
      in.operand_size = static_cast<std::uint8_t>(osz);
      in.dst = decode_rm(s, in, osz);
      in.src = immediate(s, in, 1, 1, false);
      return true;
    }
    case 0xb0: return ev_gv(mnemonic::cmpxchg, 1);
    case 0xb1: return ev_gv(mnemonic::cmpxchg, osz);
    case 0xc7: {
      // Group 9 (SDM Table A-6): /1 with a memory operand is CMPXCHG8B m64, or CMPXCHG16B
      // m128 with REX.W. SDM Vol. 2A CMPXCHG8B/CMPXCHG16B: "#UD If the destination operand
      // is not a memory location." Other members (RDRAND, RDSEED, VMPTRLD, ...) are outside
      // the subset.
      modrm();
      if (s.reg() != 1) return unsupported();
      if (s.mod() == 3) return invalid();
      const bool wide = s.rex_w();
      in.op = wide ? mnemonic::cmpxchg16b : mnemonic::cmpxchg8b;
      in.operand_size = 8;
      in.dst = decode_rm(s, in, wide ? 16 : 8);
      return true;
    }
    case 0xb6: case 0xb7: case 0xbe: case 0xbf: {
      modrm();
      in.op = op < 0xb8 ? mnemonic::movzx : mnemonic::movsx;
      in.dst = reg_operand(s, osz);
      in.src = decode_rm(s, in, (op & 1) ? 2 : 1);
      return true;
    }
    default: return unsupported();
  }
}

}  // namespace detail

/// Decodes one instruction from `bytes[0, n)` for code of size `mode` (SDM Vol. 2 ch. 2).
[[nodiscard]] constexpr result<instruction, decode_error> decode(const std::uint8_t* bytes, std::size_t n,
                                                                 code_size mode) noexcept {
  detail::decode_state s{detail::byte_reader{bytes, n}, mode};
  instruction in;
  in.mode = mode;
  bool lock = false;
  rep_prefix rep = rep_prefix::none;

  // Legacy prefixes in any order, then (64-bit mode) REX, which only counts if it comes
  // immediately before the opcode (SDM 2.1.1, 2.2.1).
  for (;;) {
    if (!s.rd.can_peek()) {
      s.rd.require_one_more();
      return unexpected(s.rd.error());
    }
    const std::uint8_t b = s.rd.peek();
    bool prefix = true;
    switch (b) {
      case 0xf0: lock = true; break;
      case 0xf2: rep = rep_prefix::rep_ne; break;
      case 0xf3: rep = rep_prefix::rep_e; break;
      case 0x66: s.opsize_prefix = true; break;
      case 0x67: s.adsize_prefix = true; break;
      case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65: {
        const sreg seg = b == 0x26 ? sreg::es : b == 0x2e ? sreg::cs : b == 0x36 ? sreg::ss
                       : b == 0x3e ? sreg::ds : b == 0x64 ? sreg::fs : sreg::gs;
        // SDM 3.3.7.2 / 2.2.1: in 64-bit mode the CS, DS, ES and SS prefixes are ignored.
        if (mode != code_size::c64 || seg == sreg::fs || seg == sreg::gs) {
          s.segment = seg;
          s.has_segment = true;
        }
        break;
      }
      default:
        if (mode == code_size::c64 && (b & 0xf0) == 0x40) {
          s.rd.next();
          s.rex = b;
          continue;  // skip the "REX is cancelled" step below
        }
        prefix = false;
    }
    if (!prefix) break;
    s.rd.next();
    s.rex = 0;  // a legacy prefix after REX makes the REX prefix ineffective
  }

  // Operand and address size (SDM 3.6, Table 3-4; 2.2.1.2 REX.W takes precedence over 66).
  const unsigned def = static_cast<unsigned>(mode);
  unsigned osz = mode == code_size::c16 ? 2 : 4;
  if (s.opsize_prefix) osz = osz == 2 ? 4 : 2;
  if (s.rex_w()) osz = 8;
  unsigned asz = def;
  if (s.adsize_prefix) asz = mode == code_size::c32 ? 2 : 4;
  in.operand_size = static_cast<std::uint8_t>(osz);
  in.address_size = static_cast<std::uint8_t>(asz);

  decode_error why = decode_error::invalid;
  const bool ok = detail::decode_opcode(s, in, why);
  if (s.rd.failed()) return unexpected(s.rd.error());
  if (!ok) return unexpected(why);
  in.length = static_cast<std::uint8_t>(s.rd.position());

  // F3 0F 09 is WBNOINVD; it exits like WBINVD (one basic exit reason, SDM Appendix C) and is
  // reported as wbinvd with rep == rep_e, so a caller can tell them apart.
  if (lock && !detail::lock_allowed(in)) return unexpected(decode_error::invalid);
  in.lock = lock;
  in.rep = rep;
  if (!in.has_memory_operand() && in.op != mnemonic::movs && in.op != mnemonic::cmps &&
      in.op != mnemonic::lods && in.op != mnemonic::outs)
    in.segment_override = false;
  else if (in.op == mnemonic::movs || in.op == mnemonic::cmps || in.op == mnemonic::lods ||
           in.op == mnemonic::outs) {
    // The source of these string instructions is DS:rSI, overridable (SDM MOVS/LODS/OUTS).
    in.mem.segment = s.has_segment ? s.segment : sreg::ds;
    in.segment_override = s.has_segment;
  }
  return in;
}

}  // namespace hvkit::emulate
