// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's moves and arithmetic/logic: MOV/MOVZX/MOVSX/MOVSXD, the ALU
/// group, TEST/NOT/NEG/INC/DEC, XCHG and BT/BTS/BTR/BTC, with LOCKed read-modify-writes on RAM
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

  /// MOV/ALU/TEST/NOT/NEG/INC/DEC/XCHG/BT*/MOVZX/MOVSX/MOVSXD.
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
    switch (op) {
      case mnemonic::mov: result_val = src_val; break;
      case mnemonic::movzx: result_val = src_val; break;
      case mnemonic::movsx:
      case mnemonic::movsxd: result_val = static_cast<std::uint64_t>(sign_extend(src_val, in.src.size)) & alu_mask(size); break;
      case mnemonic::not_: result_val = ~dst_val & alu_mask(size); break;
      case mnemonic::xchg: result_val = src_val; xchg_reg_val = dst_val; break;
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
            return done();
          }
        }
        byte_buffer b;
        b.set(result_val, size);
        if (auto r = write_mapped(m, b); !r) return r.error();
      } else {
        set_gpr(in.dst, result_val);
      }
      if (op == mnemonic::xchg) set_gpr(in.src, xchg_reg_val);
    }
    return done();
  }

};

}  // namespace hvkit::emulate::detail
