// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's segment-register moves: MOV from and to a segment register
/// (real-mode and protected-mode loads with the descriptor checks of SDM Vol. 2 MOV, the
/// accessed bit set as an implicit supervisor write, SDM 3.4.5.1).
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "data.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_segments : protected machine_data<T, R, P> {
 protected:
  using base = machine_data<T, R, P>;
  using base::base;
  using base::gp0;
  using base::access_bits;
  using base::map;
  using base::read_mapped;
  using base::write_mapped;
  using base::map_logical;
  using base::gpr;
  using base::set_gpr;
  using base::effective_address;
  using base::protected_mode;
  using base::done;
  using base::read_descriptor;
  using base::descriptor_linear;
  using base::ctx_;
  using base::ram_;

  constexpr outcome mov_from_sreg(const instruction& in) noexcept {
    const std::uint64_t sel = ctx_.seg[in.src.reg].selector;
    return store_word(in, sel);
  }

  /// The store of MOV r/m16,Sreg, SLDT, STR and SMSW: a memory destination receives 16 bits
  /// whatever the operand size; a register destination of 32/64 bits gets `v` whole (the
  /// zero-extended selector; for SMSW CR0[31:0], upper bits undefined on older processors)
  /// (SDM Vol. 2 MOV, SLDT, STR, SMSW).
  constexpr outcome store_word(const instruction& in, std::uint64_t v) noexcept {
    if (in.dst.kind == operand_kind::mem) {
      auto m = map_logical(in.mem.segment, effective_address(in), 2, true);
      if (!m) return m.error();
      byte_buffer b;
      b.set(v, 2);
      if (auto r = write_mapped(*m, b); !r) return r.error();
    } else {
      set_gpr(in.dst.reg, in.dst.size, false, v);
    }
    return done();
  }

  constexpr outcome mov_to_sreg(const instruction& in) noexcept {
    std::uint64_t v = 0;
    if (in.src.kind == operand_kind::mem) {
      auto m = map_logical(in.mem.segment, effective_address(in), 2, false);
      if (!m) return m.error();
      byte_buffer b;
      if (auto r = read_mapped(*m, b); !r) return r.error();
      v = b.value(2);
    } else {
      v = gpr(in.src) & 0xffff;
    }
    const sreg target = static_cast<sreg>(in.dst.reg);
    segment& s = ctx_[target];
    const selector sel{static_cast<std::uint16_t>(v)};
    if (!protected_mode()) {
      // Real and virtual-8086 mode: base = selector * 16, limit and rights unchanged (SDM 20.1.1).
      s.selector = sel.value;
      s.base = std::uint64_t{sel.value} << 4;
      return done_sreg(target);
    }
    const std::uint8_t cpl = ctx_.effective_cpl();
    if (sel.null()) {
      // SDM MOV: a null selector may be loaded into DS/ES/FS/GS; into SS only in 64-bit mode
      // at CPL < 3 with RPL = CPL.
      if (target == sreg::ss &&
          !(ctx_.mode() == cpu_mode::long64 && cpl != 3 && sel.rpl() == cpl))
        return gp0();
      s.selector = sel.value;
      s.ar.set(segment_ar::unusable);
      return done_sreg(target);
    }
    auto d = read_descriptor(sel, false);
    if (!d) return d.error();
    const segment_ar ar = d->access_rights();
    const std::uint16_t ec = sel.error_code();
    if (target == sreg::ss) {
      if (sel.rpl() != cpl || d->system() || ar.code() || !ar.writable_or_readable() || d->dpl() != cpl)
        return outcome::make_exception(vector::gp, ec);
      if (!d->present()) return outcome::make_exception(vector::ss, ec);
    } else {
      if (d->system() || (ar.code() && !ar.writable_or_readable())) return outcome::make_exception(vector::gp, ec);
      const bool conforming_code = ar.code() && ar.expand_down_or_conforming();
      if (!conforming_code && (d->dpl() < cpl || d->dpl() < sel.rpl())) return outcome::make_exception(vector::gp, ec);
      if (!d->present()) return outcome::make_exception(vector::np, ec);
    }
    // Set the accessed bit in the descriptor (an implicit supervisor write, SDM 3.4.5.1).
    segment loaded = d->to_segment(sel.value, false);
    if (!ar.test(segment_ar::accessed)) {
      auto r = set_descriptor_bit(sel, *d, 1);
      if (!r) return r.error();
      if (!*r) return outcome::make_done();  // the descriptor changed: RIP stays, re-execute
      loaded.ar.set(segment_ar::accessed);
    }
    s = loaded;
    return done_sreg(target);
  }

  constexpr outcome done_sreg(sreg target) noexcept {
    outcome o = done();
    o.mov_ss_shadow = target == sreg::ss;
    return o;
  }

  /// Sets type bit `bit_value` (accessed = 1, busy = 2) in the descriptor with a 1-byte
  /// compare-exchange on its type byte: an implicit supervisor write (SDM 4.6.1). Returns
  /// false if the byte no longer holds what `d` says (another agent changed it): the caller
  /// re-reads and re-checks the descriptor.
  constexpr result<bool, outcome> set_descriptor_bit(selector sel, const descriptor& d, std::uint8_t bit_value) noexcept {
    const std::uint64_t at = sel.ldt() ? ctx_.ldtr.base + std::uint64_t{sel.index()} * 8 : descriptor_linear(sel);
    const std::uint64_t lin = (ctx_.efer.test(x86::efer::lma) ? at : at & 0xffff'ffffu) + 5;
    auto m = map(gva{ctx_.efer.test(x86::efer::lma) ? lin : lin & 0xffff'ffffu}, 1, access_bits(true, true), false);
    if (!m) return unexpected(m.error());
    const std::uint8_t old = static_cast<std::uint8_t>(d.raw >> 40);
    const auto r = ram_.cmpxchg(m->address[0], 1, old, static_cast<std::uint8_t>(old | bit_value));
    if (!r) return unexpected(outcome::make_unsupported(unsupported_reason::page_table_unbacked));
    return *r;
  }

  /// How often LTR / a segment load re-reads a descriptor that changed under its
  /// compare-exchange before giving up (the guest is rewriting its GDT concurrently).
  static constexpr unsigned descriptor_retries = 4;

};

}  // namespace hvkit::emulate::detail
