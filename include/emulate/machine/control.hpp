// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's control and debug registers: LMSW, INVLPG, MOV from/to
/// CR0/CR2/CR3/CR4/CR8 and CLTS (the write as a paging::cr_write_op checked by
/// x86::evaluate_cr_write), MOV from/to DR0-DR7.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "system.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_control : protected machine_system<T, R, P> {
 protected:
  using base = machine_system<T, R, P>;
  using base::base;
  using base::gp0;
  using base::ud;
  using base::gpr;
  using base::set_gpr;
  using base::effective_address;
  using base::cpl0;
  using base::done;
  using base::done_reg;
  using base::ctx_;
  using base::selector_operand;

  constexpr outcome lmsw(const instruction& in) noexcept {
    if (!cpl0()) return gp0();
    auto s = selector_operand(in);  // a 16-bit source, register or memory
    if (!s) return s.error();
    return write_cr({paging::cr_write_op::instruction::lmsw, 0, s->value});
  }

  constexpr outcome invlpg(const instruction& in) noexcept {
    if (!cpl0()) return gp0();
    const std::uint64_t ea = effective_address(in);
    std::uint64_t lin = 0;
    if (ctx_.mode() == cpu_mode::long64) {
      const segment& s = ctx_[in.mem.segment];
      lin = (in.mem.segment == sreg::fs || in.mem.segment == sreg::gs ? s.base : 0) + ea;
    } else {
      lin = (ctx_[in.mem.segment].base + ea) & 0xffff'ffffu;
    }
    outcome o = done(event::invlpg);
    o.address = lin;
    return o;
  }

  constexpr outcome mov_from_cr(const instruction& in) noexcept {
    if (!cpl0()) return gp0();
    std::uint64_t v = 0;
    switch (in.src.reg) {
      case 0: v = ctx_.cr0.raw(); break;
      case 2: v = ctx_.cr2; break;
      case 3: v = ctx_.cr3.raw(); break;
      case 4: v = ctx_.cr4.raw(); break;
      case 8: v = ctx_.cr8 & 0xf; break;
      default: return ud();
    }
    set_gpr(in.dst.reg, in.dst.size, false, v);
    return done();
  }

  /// The CR state the rules check a write against (one definition of the MOV CR, CLTS and
  /// LMSW semantics: x86/cr_rules.hpp through paging::evaluate_cr_write).
  [[nodiscard]] constexpr x86::cr_context cr_rules_context() const noexcept {
    x86::cr_context c;
    c.cr0 = ctx_.cr0;
    c.cr4 = ctx_.cr4;
    c.efer = ctx_.efer;
    c.cr3 = ctx_.cr3.raw();
    c.cr4_allowed = ctx_.cr4_allowed;
    c.cs_l = ctx_[sreg::cs].ar.test(segment_ar::l);
    c.maxphyaddr = ctx_.maxphyaddr;
    c.lam = ctx_.lam;
    return c;
  }

  /// A write to CR0/CR3/CR4/CR8 (MOV to CR, CLTS, LMSW) as a paging::cr_write_op, evaluated
  /// by paging::evaluate_cr_write: the #GP(0) conditions of SDM Vol. 2B "MOV—Move to/from
  /// Control Registers", "CLTS", "LMSW", the CR0 value (cr0_after_mov/clts/lmsw), CR3 bit 63
  /// with PCIDE, and EFER.LMA = LME && PG (SDM 10.8.5). The MMU actions (two-dimensional
  /// paging: the guest's own tables) are returned in the outcome for the hypervisor to carry
  /// out; with shadow paging it computes its own.
  constexpr outcome write_cr(paging::cr_write_op op) noexcept {
    const x86::cr_context c = cr_rules_context();
    const unsigned cr = op.cr;
    // MOV to CR3 in IA-32e mode checks bits 63:MAXPHYADDR; a MAXPHYADDR outside 32..52 is a
    // context the caller filled wrongly, not a guest fault.
    if (cr == 3 && c.efer.test(x86::efer::lma) && (c.maxphyaddr < 32 || c.maxphyaddr > 52))
      return outcome::make_unsupported(unsupported_reason::invalid_context);
    const paging::cr_write_outcome w = paging::evaluate_cr_write(op, c, paging::paging_kind::two_dimensional);
    if (w.fault != x86::cr_write_fault::none) return gp0();
    switch (w.cr) {
      case 0: {
        ctx_.cr0 = w.after.cr0;
        ctx_.efer = w.after.efer;
        break;
      }
      case 3: ctx_.cr3 = x86::cr3{w.value}; break;
      case 4: ctx_.cr4 = w.after.cr4; break;
      case 8: ctx_.cr8 = w.value; break;
      default: return ud();
    }
    outcome o = done_reg(event::cr_write, w.cr);
    o.cr3_noflush = w.cr3_noflush;
    o.mmu = w.actions;
    return o;
  }

  /// MOV to CR0/CR2/CR3/CR4/CR8 (SDM Vol. 2B "MOV—Move to/from Control Registers"); CR2 has
  /// no conditions, the others go through write_cr().
  constexpr outcome mov_to_cr(const instruction& in) noexcept {
    if (!cpl0()) return gp0();
    const std::uint64_t v = gpr(in.src);  // the low 32 bits outside 64-bit mode (the operand size)
    switch (in.dst.reg) {
      case 2:
        ctx_.cr2 = v;
        return done_reg(event::cr_write, 2);
      case 0: case 3: case 4: case 8:
        return write_cr({paging::cr_write_op::instruction::mov_to_cr, in.dst.reg, v});
      default: return ud();
    }
  }

  /// MOV to/from DR0-DR7 (SDM Vol. 2 "MOV—Move to/from Debug Registers", 18.2).
  constexpr outcome mov_dr(const instruction& in) noexcept {
    const bool to = in.op == mnemonic::mov_to_dr;
    unsigned n = to ? in.dst.reg : in.src.reg;
    if (!cpl0()) return gp0();
    if (n == 4 || n == 5) {
      if (ctx_.cr4.test(x86::cr4::de)) return ud();
      n += 2;  // DR4/DR5 alias DR6/DR7 when CR4.DE = 0
    }
    // DR7.GD: any DR access raises #DB (DR6.BD is set by the handler's delivery, SDM 18.2.4).
    if (ctx_.dr[7] & (std::uint64_t{1} << 13)) {
      outcome o = outcome::make_exception(vector::db);
      o.value = std::uint64_t{1} << 13;  // DR6.BD, for the caller to merge into DR6
      return o;
    }
    if (to) {
      std::uint64_t v = gpr(in.src);
      if ((n == 6 || n == 7) && ctx_.mode() == cpu_mode::long64 && (v >> 32) != 0) return gp0();
      if (n == 6) v = (v & 0xffff'ffffu) | 0xffff'0ff0u;
      if (n == 7) v = (v & 0xffff'ffffu) | 0x400u;
      ctx_.dr[n] = v;
      return done_reg(event::dr_write, n);
    }
    set_gpr(in.dst.reg, in.dst.size, false, ctx_.dr[n]);
    return done();
  }

};

}  // namespace hvkit::emulate::detail
