// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's moves and arithmetic/logic: MOV/MOVZX/MOVSX/MOVSXD, the ALU
/// group, TEST/NOT/NEG/INC/DEC, XCHG, BT/BTS/BTR/BTC and CMPXCHG/CMPXCHG8B/CMPXCHG16B, with LOCKed read-modify-writes on RAM
/// as compare-exchanges (retried when another agent wins).
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "fetch.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_data : protected machine_fetch<T, R, P> {
 protected:
  using base = machine_fetch<T, R, P>;
  using base::base;
  using base::read_mapped;
  using base::write_mapped;
  using base::map_logical;
  using base::map;
  using base::access_bits;
  using base::from_segment_fault;
  using base::gp0;
  using base::ud;
  using base::gpr;
  using base::set_gpr;
  using base::alu_mask;
  using base::effective_address;
  using base::done;
  using base::live_;
  using base::ctx_;
  using base::ram_;
  using base::raced_;

  /// How often a LOCKed read-modify-write retries when its compare-exchange loses to another
  /// agent before it gives up for this call (RIP stays: the guest re-executes it).
  static constexpr unsigned lock_retries = 16;

  /// MOV/ALU/TEST/NOT/NEG/INC/DEC/XCHG/BT*/MOVZX/MOVSX/MOVSXD/CMPXCHG*.
  constexpr outcome data_op(const instruction& in) noexcept {
    outcome o = data_op_once(in);
    if (!raced_) [[likely]] return o;
    const x86::rflags flags = live_.rflags;  // nothing but the flags changed before the race
    for (unsigned attempt = 1; attempt < lock_retries; ++attempt) {
      raced_ = false;
      ctx_.rflags = flags;  // the raced attempt computed flags from a stale value
      o = data_op_once(in);
      if (!raced_) return o;
    }
    ctx_.rflags = flags;
    return outcome::make_done();  // nothing written, RIP unchanged: the guest re-executes it
  }

  /// One attempt of data_op(); sets raced_ (and returns a placeholder) when a LOCKed
  /// compare-exchange lost to another agent.
  constexpr outcome data_op_once(const instruction& in) noexcept {
    const mnemonic op = in.op;
    if (op == mnemonic::cmpxchg8b || op == mnemonic::cmpxchg16b) return cmpxchg_pair_once(in);
    const bool dst_mem = in.dst.kind == operand_kind::mem;
    const bool src_mem = in.src.kind == operand_kind::mem;
    const bool reads_dst = op != mnemonic::mov && op != mnemonic::movzx && op != mnemonic::movsx &&
                           op != mnemonic::movsxd;
    const bool writes_dst = op != mnemonic::cmp && op != mnemonic::test && op != mnemonic::bt;
    const bool bit_op = op == mnemonic::bt || op == mnemonic::bts || op == mnemonic::btr || op == mnemonic::btc;
    const unsigned size = in.dst.size;

    // BT* with a register bit offset address a bit string: the offset is signed and may
    // reach outside the operand (SDM BT: "bit base" addressing).
    std::uint64_t bit_offset = 0;
    std::int64_t byte_adjust = 0;
    if (bit_op) {
      const unsigned bits = 8u * size;
      if (in.src.kind == operand_kind::imm) {
        bit_offset = in.imm & (bits - 1);
      } else {
        const std::uint64_t raw = gpr(in.src);
        if (dst_mem) {
          const std::int64_t sraw = sign_extend(raw, size);
          // floor division by the operand width, in units of the operand size
          const std::int64_t words = sraw >= 0 ? sraw / bits : -((-(sraw + 1)) / bits) - 1;
          byte_adjust = words * static_cast<std::int64_t>(size);
          bit_offset = static_cast<std::uint64_t>(sraw - words * static_cast<std::int64_t>(bits));
        } else {
          bit_offset = raw & (bits - 1);
        }
      }
    }

    mapped_range m;
    if (dst_mem || src_mem) {
      const unsigned msize = dst_mem ? in.dst.size : in.src.size;
      const std::uint64_t ea = (effective_address(in) + static_cast<std::uint64_t>(byte_adjust)) & alu_mask(in.address_size);
      auto r = map_logical(in.mem.segment, ea, msize, dst_mem && writes_dst);
      if (!r) return r.error();
      m = *r;
    }
    auto read_op = [&](const operand& o) -> step_result {
      switch (o.kind) {
        case operand_kind::gpr: return gpr(o);
        case operand_kind::imm: return in.imm & alu_mask(o.size);
        case operand_kind::mem: {
          byte_buffer b;
          if (auto r = read_mapped(m, b); !r) return unexpected(r.error());
          return b.value(o.size);
        }
        default: return std::uint64_t{0};
      }
    };

    std::uint64_t dst_val = 0;
    if (reads_dst) {
      auto v = read_op(in.dst);
      if (!v) return v.error();
      dst_val = *v;
    }
    std::uint64_t src_val = 0;
    if (in.src.kind != operand_kind::none && !(bit_op && in.src.kind == operand_kind::gpr)) {
      auto v = read_op(in.src);
      if (!v) return v.error();
      src_val = *v;
    }

    std::uint64_t result_val = 0;
    std::uint64_t xchg_reg_val = 0;
    bool cmpxchg_equal = false;
    switch (op) {
      case mnemonic::mov: result_val = src_val; break;
      case mnemonic::movzx: result_val = src_val; break;
      case mnemonic::movsx:
      case mnemonic::movsxd: result_val = static_cast<std::uint64_t>(sign_extend(src_val, in.src.size)) & alu_mask(size); break;
      case mnemonic::not_: result_val = ~dst_val & alu_mask(size); break;
      case mnemonic::xchg: result_val = src_val; xchg_reg_val = dst_val; break;
      case mnemonic::cmpxchg: {
        // SDM Vol. 2A CMPXCHG: "Compares the value in the AL, AX, EAX, or RAX register with
        // the first operand (destination operand). If the two values are equal, the second
        // operand (source operand) is loaded into the destination operand. Otherwise, the
        // destination operand is loaded into the AL, AX, EAX or RAX register." Flags: as CMP
        // of the accumulator with the destination. The memory destination is written either
        // way ("the destination operand is written back if the comparison fails").
        const std::uint64_t acc = ctx_.gpr[0] & alu_mask(size);
        ctx_.rflags = alu(mnemonic::cmp, acc, dst_val, size, ctx_.rflags).flags;
        cmpxchg_equal = acc == dst_val;
        result_val = cmpxchg_equal ? src_val : dst_val;
        break;
      }
      case mnemonic::bt: case mnemonic::bts: case mnemonic::btr: case mnemonic::btc: {
        const std::uint64_t bit = std::uint64_t{1} << bit_offset;
        // SDM BT*: CF = the selected bit; OF, SF, AF, PF undefined (left unchanged here), ZF unchanged.
        ctx_.rflags.set(x86::rflags::cf, (dst_val & bit) != 0);
        result_val = op == mnemonic::bts ? dst_val | bit : op == mnemonic::btr ? dst_val & ~bit
                   : op == mnemonic::btc ? dst_val ^ bit : dst_val;
        break;
      }
      default: {
        const alu_result a = alu(op, dst_val, src_val, size, ctx_.rflags);
        result_val = a.value;
        ctx_.rflags = a.flags;
        break;
      }
    }

    if (writes_dst) {
      if (dst_mem) {
        // A LOCKed read-modify-write, and XCHG with a memory operand (locked whether or not
        // LOCK is given: SDM Vol. 2 XCHG), is atomic against other processors (SDM 9.1.2.2):
        // on RAM within one page it is a compare-exchange against the value read, retried
        // from the read if another agent changed the location in between. A device (the
        // compare-exchange reports it is not RAM) sees the read, then the write.
        const bool locked = reads_dst && (in.lock || op == mnemonic::xchg);
        if (locked && m.count == 1) {
          const auto r = ram_.cmpxchg(m.address[0], size, dst_val, result_val & alu_mask(size));
          if (r && !*r) {
            raced_ = true;
            return outcome::make_done();
          }
          if (r) {
            if (op == mnemonic::xchg) set_gpr(in.src, xchg_reg_val);
            if (op == mnemonic::cmpxchg && !cmpxchg_equal) set_gpr(0, size, false, dst_val);
            return done();
          }
        }
        byte_buffer b;
        b.set(result_val, size);
        if (auto r = write_mapped(m, b); !r) return r.error();
      } else if (op != mnemonic::cmpxchg || cmpxchg_equal) {
        // A register destination of a failed CMPXCHG is not written: a 32-bit one keeps
        // bits 63:32 in 64-bit mode (checked against the host CPU in cmpxchg_host_test).
        set_gpr(in.dst, result_val);
      }
      if (op == mnemonic::xchg) set_gpr(in.src, xchg_reg_val);
      // The failed compare loads the accumulator (EAX zero-extends into RAX, SDM 3.4.1.1).
      if (op == mnemonic::cmpxchg && !cmpxchg_equal) set_gpr(0, size, false, dst_val);
    }
    return done();
  }

  /// One attempt of CMPXCHG8B m64 / CMPXCHG16B m128 (SDM Vol. 2A CMPXCHG8B/CMPXCHG16B):
  /// compares EDX:EAX (RDX:RAX) with the operand; equal: ZF := 1 and the operand :=
  /// ECX:EBX (RCX:RBX); otherwise ZF := 0 and EDX:EAX (RDX:RAX) := the operand, which is
  /// written back with its own value ("The destination operand is written back if the
  /// comparison fails"). Only ZF changes. A LOCKed CMPXCHG8B on RAM within one page is one
  /// 8-byte compare-exchange; a LOCKed CMPXCHG16B on RAM (aligned: never across a page) is
  /// one 16-byte compare-exchange when the guest RAM offers it (guest_ram_cmpxchg16), else
  /// a read then a write. Either compare-exchange, lost to another agent, retries as the
  /// other LOCKed read-modify-writes do (data_op()).
  constexpr outcome cmpxchg_pair_once(const instruction& in) noexcept {
    const bool wide = in.op == mnemonic::cmpxchg16b;
    // SDM Vol. 2A CMPXCHG8B/CMPXCHG16B, "Protected Mode Exceptions": "#UD If CPUID.01H:EDX.CX8[bit 8] = 0"
    // (CMPXCHG8B); "#UD If CPUID.01H:ECX.CMPXCHG16B[bit 13] = 0" (CMPXCHG16B).
    if (!(wide ? ctx_.cx16 : ctx_.cx8)) return ud();
    const unsigned size = wide ? 16 : 8, half = size / 2;
    const std::uint64_t ea = effective_address(in) & alu_mask(in.address_size);
    const auto lin = linearize(ctx_, in.mem.segment, ea, size, segment_access::write);
    if (!lin) return from_segment_fault(lin.error());
    // SDM Vol. 2A CMPXCHG16B, "64-Bit Mode Exceptions": "#GP(0) If the memory address is
    // in a non-canonical form. If memory operand for CMPXCHG16B is not aligned on a 16-byte
    // boundary." (before any page walk: nothing is translated for it)
    if (wide && (lin->value() & 15) != 0) return gp0();
    auto mr = map(*lin, size, access_bits(true, false), in.mem.segment == sreg::ss);
    if (!mr) return mr.error();
    const mapped_range m = *mr;
    byte_buffer b;
    if (auto r = read_mapped(m, b); !r) return r.error();
    auto part = [&](unsigned at) {
      std::uint64_t v = 0;
      for (unsigned i = 0; i < half; ++i) v |= std::uint64_t{b.b[at + i]} << (8 * i);
      return v;
    };
    const std::uint64_t old_lo = part(0), old_hi = part(half);
    const std::uint64_t mask = alu_mask(half);
    const bool equal = old_lo == (ctx_.gpr[0] & mask) && old_hi == (ctx_.gpr[2] & mask);
    const std::uint64_t new_lo = equal ? ctx_.gpr[3] & mask : old_lo;
    const std::uint64_t new_hi = equal ? ctx_.gpr[1] & mask : old_hi;
    ctx_.rflags.set(x86::rflags::zf, equal);
    auto finish = [&] {
      if (!equal) {  // 32-bit writes: zero-extend RAX/RDX in 64-bit mode (SDM 3.4.1.1)
        set_gpr(0, half, false, old_lo);
        set_gpr(2, half, false, old_hi);
      }
      return done();
    };
    if (in.lock && !wide && m.count == 1) {
      const auto r = ram_.cmpxchg(m.address[0], 8, old_lo | (old_hi << 32), new_lo | (new_hi << 32));
      if (r && !*r) {
        raced_ = true;
        return outcome::make_done();
      }
      if (r) return finish();
    }
    if constexpr (guest_ram_cmpxchg16<R>) {
      if (in.lock && wide && m.count == 1) {
        const auto r = ram_.cmpxchg16(m.address[0], u128{old_lo, old_hi}, u128{new_lo, new_hi});
        if (r && !*r) {
          raced_ = true;
          return outcome::make_done();
        }
        if (r) return finish();
      }
    }
    b.set(new_lo, half);
    b.set(new_hi, half, half);
    if (auto r = write_mapped(m, b); !r) return r.error();
    return finish();
  }

};

}  // namespace hvkit::emulate::detail
