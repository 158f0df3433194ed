// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's string instructions: MOVS, CMPS, STOS, LODS, INS, OUTS with
/// REP/REPE/REPNE, each iteration committed as the processor does (an interrupted REP resumes),
/// at most max_rep_iterations per call.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "io.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_strings : protected machine_io<T, R, P> {
 protected:
  using base = machine_io<T, R, P>;
  using base::base;
  using base::reset_device_log;
  using base::read_mapped;
  using base::write_mapped;
  using base::map_logical;
  using base::gpr;
  using base::set_gpr;
  using base::alu_mask;
  using base::areg;
  using base::set_areg;
  using base::done;
  using base::live_;
  using base::ctx_;
  using base::io_permitted;
  using base::port_in;
  using base::port_out;

  constexpr outcome string_op(const instruction& in) noexcept {
    const unsigned size = in.operand_size;
    const unsigned asz = in.address_size;
    const bool rep = in.rep != rep_prefix::none;
    const mnemonic op = in.op;
    const std::int64_t step = ctx_.rflags.test(x86::rflags::df) ? -static_cast<std::int64_t>(size)
                                                                 : static_cast<std::int64_t>(size);
    const bool reads_src = op == mnemonic::movs || op == mnemonic::cmps || op == mnemonic::lods || op == mnemonic::outs;
    const bool uses_dst = op == mnemonic::movs || op == mnemonic::cmps || op == mnemonic::stos || op == mnemonic::ins;
    const bool dst_write = op != mnemonic::cmps;
    const std::uint16_t port = static_cast<std::uint16_t>(ctx_.gpr[2]);
    if (op == mnemonic::ins || op == mnemonic::outs)
      if (auto r = io_permitted(port, size); !r) return r.error();

    for (unsigned iter = 0;; ++iter) {
      if (rep && areg(1, asz) == 0) return done();
      if (iter == max_rep_iterations) return outcome::make_done();  // RIP stays: re-executes
      mapped_range src_m, dst_m;
      if (reads_src) {
        auto r = map_logical(in.mem.segment, areg(6, asz), size, false);
        if (!r) return r.error();
        src_m = *r;
      }
      if (uses_dst) {
        // The destination is always ES:rDI, no override (SDM MOVS/STOS/INS).
        auto r = map_logical(sreg::es, areg(7, asz), size, dst_write);
        if (!r) return r.error();
        dst_m = *r;
      }
      std::uint64_t v = 0;
      if (reads_src) {
        byte_buffer b;
        if (auto r = read_mapped(src_m, b); !r) return r.error();
        v = b.value(size);
      } else if (op == mnemonic::ins) {
        auto r = port_in(port, size);
        if (!r) return r.error();
        v = *r;
      } else {
        v = ctx_.gpr[0] & alu_mask(size);
      }
      switch (op) {
        case mnemonic::movs: case mnemonic::stos: case mnemonic::ins: {
          byte_buffer b;
          b.set(v, size);
          if (auto r = write_mapped(dst_m, b); !r) return r.error();
          break;
        }
        case mnemonic::cmps: {
          byte_buffer b;
          if (auto r = read_mapped(dst_m, b); !r) return r.error();
          ctx_.rflags = alu(mnemonic::cmp, v, b.value(size), size, ctx_.rflags).flags;
          break;
        }
        case mnemonic::lods: set_gpr(0, size, false, v); break;
        case mnemonic::outs:
          if (auto r = port_out(port, size, v); !r) return r.error();
          break;
        default: break;
      }
      if (reads_src) set_areg(6, asz, areg(6, asz) + static_cast<std::uint64_t>(step));
      if (uses_dst) set_areg(7, asz, areg(7, asz) + static_cast<std::uint64_t>(step));
      if (!rep) return done();
      set_areg(1, asz, areg(1, asz) - 1);
      reset_device_log();  // completions and the device log cover one iteration
      live_ = ctx_;        // a completed iteration stays, whatever follows
      if (op == mnemonic::cmps) {
        // REPE stops when ZF = 0, REPNE when ZF = 1 (SDM REP/REPE/REPNE).
        const bool zf = ctx_.rflags.test(x86::rflags::zf);
        if ((in.rep == rep_prefix::rep_e && !zf) || (in.rep == rep_prefix::rep_ne && zf)) return done();
      }
    }
  }

};

}  // namespace hvkit::emulate::detail
