// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's descriptor-table instructions: SLDT, STR, SMSW, SGDT, SIDT,
/// LGDT, LIDT, LLDT, LTR (busy bit as a compare-exchange), VERR and VERW.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "string.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_system : protected machine_strings<T, R, P> {
 protected:
  using base = machine_strings<T, R, P>;
  using base::base;
  using base::gp0;
  using base::ud;
  using base::read_mapped;
  using base::write_mapped;
  using base::map_logical;
  using base::gpr;
  using base::effective_address;
  using base::cpl0;
  using base::protected_mode;
  using base::umip_blocks;
  using base::done;
  using base::read_descriptor;
  using base::ctx_;
  using base::store_word;
  using base::set_descriptor_bit;
  using base::descriptor_retries;

  // ---------------------------------------------------------------- system instructions
  constexpr outcome store_system(const instruction& in) noexcept {
    if (in.op != mnemonic::smsw && !protected_mode()) return ud();  // SLDT/STR: #UD in real/VM86 mode
    if (umip_blocks()) return gp0();
    std::uint64_t v = in.op == mnemonic::sldt ? ctx_.ldtr.selector
                    : in.op == mnemonic::str  ? ctx_.tr.selector
                                              : ctx_.cr0.raw() & 0xffff'ffffu;
    return store_word(in, v);
  }

  constexpr outcome store_table(const instruction& in) noexcept {
    if (umip_blocks()) return gp0();
    const descriptor_table& t = in.op == mnemonic::sgdt ? ctx_.gdtr : ctx_.idtr;
    const unsigned base_bytes = ctx_.mode() == cpu_mode::long64 ? 8 : 4;
    auto m = map_logical(in.mem.segment, effective_address(in), 2 + base_bytes, true);
    if (!m) return m.error();
    byte_buffer b;
    b.set(t.limit, 2);
    // SDM SGDT: with a 16- or 32-bit operand size the full 32-bit base is stored.
    b.set(t.base, base_bytes, 2);
    if (auto r = write_mapped(*m, b); !r) return r.error();
    return done();
  }

  constexpr outcome load_table(const instruction& in) noexcept {
    if (!cpl0()) return gp0();
    const bool long_mode = ctx_.mode() == cpu_mode::long64;
    const unsigned base_bytes = long_mode ? 8 : 4;
    auto m = map_logical(in.mem.segment, effective_address(in), 2 + base_bytes, false);
    if (!m) return m.error();
    byte_buffer b;
    if (auto r = read_mapped(*m, b); !r) return r.error();
    descriptor_table t;
    t.limit = static_cast<std::uint16_t>(b.value(2));
    std::uint64_t table_base = 0;
    for (unsigned i = 0; i < base_bytes; ++i) table_base |= std::uint64_t{b.b[2 + i]} << (8 * i);
    // SDM LGDT/LIDT: a 16-bit operand size loads a 24-bit base.
    if (!long_mode && in.operand_size == 2) table_base &= 0x00ff'ffffu;
    t.base = table_base;
    (in.op == mnemonic::lgdt ? ctx_.gdtr : ctx_.idtr) = t;
    return done(event::descriptor_table_load);
  }

  constexpr result<selector, outcome> selector_operand(const instruction& in) noexcept {
    if (in.src.kind == operand_kind::mem) {
      auto m = map_logical(in.mem.segment, effective_address(in), 2, false);
      if (!m) return unexpected(m.error());
      byte_buffer b;
      if (auto r = read_mapped(*m, b); !r) return unexpected(r.error());
      return selector{static_cast<std::uint16_t>(b.value(2))};
    }
    return selector{static_cast<std::uint16_t>(gpr(in.src) & 0xffff)};
  }

  constexpr outcome lldt(const instruction& in) noexcept {
    if (!protected_mode()) return ud();
    if (!cpl0()) return gp0();
    auto s = selector_operand(in);
    if (!s) return s.error();
    const selector sel = *s;
    if (sel.null()) {
      // SDM LLDT: a null selector marks LDTR invalid.
      ctx_.ldtr.selector = sel.value;
      ctx_.ldtr.ar.set(segment_ar::unusable);
      return done(event::descriptor_table_load);
    }
    const std::uint16_t ec = sel.error_code();
    if (sel.ldt()) return outcome::make_exception(vector::gp, ec);
    // IA-32e mode (64-bit and compatibility mode) uses 16-byte system descriptors (SDM 8.2.3).
    const bool wide = ctx_.efer.test(x86::efer::lma);
    auto d = read_descriptor(sel, wide);
    if (!d) return d.error();
    if (!d->system() || d->type() != system_type::ldt) return outcome::make_exception(vector::gp, ec);
    if (wide && !d->high_type_valid()) return outcome::make_exception(vector::gp, ec);
    if (!d->present()) return outcome::make_exception(vector::np, ec);
    const segment loaded = d->to_segment(sel.value, wide);
    if (wide && !x86::is_canonical(gva{loaded.base}, linear_width_of(ctx_)))
      return outcome::make_exception(vector::gp, ec);
    ctx_.ldtr = loaded;
    return done(event::descriptor_table_load);
  }

  /// LTR (SDM Vol. 2 "LTR"): every check first, then the busy bit by compare-exchange as an
  /// implicit supervisor write: with a read-only GDT this faults exactly when CR0.WP = 1.
  constexpr outcome ltr(const instruction& in) noexcept {
    if (!protected_mode()) return ud();
    if (!cpl0()) return gp0();
    auto s = selector_operand(in);
    if (!s) return s.error();
    const selector sel = *s;
    if (sel.null()) return gp0();
    const std::uint16_t ec = sel.error_code();
    if (sel.ldt()) return outcome::make_exception(vector::gp, ec);
    // IA-32e mode (64-bit and compatibility mode) uses 16-byte system descriptors (SDM 8.2.3).
    const bool wide = ctx_.efer.test(x86::efer::lma);
    for (unsigned attempt = 0; attempt < descriptor_retries; ++attempt) {
      auto o = ltr_once(sel, wide);
      if (o) return *o;
      if (o.error() != ltr_raced) break;
    }
    return outcome::make_unsupported(unsupported_reason::instruction);
  }

  static constexpr int ltr_raced = 1;
  constexpr result<outcome, int> ltr_once(selector sel, bool wide) noexcept {
    const std::uint16_t ec = sel.error_code();
    auto d = read_descriptor(sel, wide);
    if (!d) return d.error();
    const std::uint8_t type = d->type();
    // Available TSS only; in IA-32e mode only the 64-bit TSS (type 9) (SDM 8.2.3, Table 3-2).
    const bool ok_type = type == system_type::tss_available || (!ctx_.efer.test(x86::efer::lma) && type == system_type::tss16_available);
    if (!d->system() || !ok_type) return outcome::make_exception(vector::gp, ec);
    if (wide && !d->high_type_valid()) return outcome::make_exception(vector::gp, ec);
    if (!d->present()) return outcome::make_exception(vector::np, ec);
    segment loaded = d->to_segment(sel.value, wide);
    if (wide && !x86::is_canonical(gva{loaded.base}, linear_width_of(ctx_)))
      return outcome::make_exception(vector::gp, ec);
    const auto r = set_descriptor_bit(sel, *d, system_type::busy_bit);
    if (!r) return r.error();
    if (!*r) return unexpected(ltr_raced);
    loaded.ar = loaded.ar.with_type(static_cast<std::uint8_t>(type | system_type::busy_bit));
    ctx_.tr = loaded;
    return done(event::descriptor_table_load);
  }

  /// VERR/VERW (SDM Vol. 2): ZF = 1 if the segment is readable/writable at the current
  /// privilege; an unusable selector only clears ZF (faults come from the table read).
  constexpr outcome verify(const instruction& in) noexcept {
    if (!protected_mode()) return ud();
    auto s = selector_operand(in);
    if (!s) return s.error();
    const selector sel = *s;
    bool ok = false;
    if (!sel.null()) {
      const bool ldt = sel.ldt();
      const std::uint64_t limit = ldt ? ctx_.ldtr.limit : ctx_.gdtr.limit;
      const bool usable = !(ldt && ctx_.ldtr.ar.test(segment_ar::unusable));
      if (usable && std::uint64_t{sel.index()} * 8 + 7 <= limit) {
        auto d = read_descriptor(sel, false);
        if (!d) return d.error();
        const segment_ar ar = d->access_rights();
        const bool conforming_code = ar.code() && ar.expand_down_or_conforming();
        const bool priv = conforming_code || (d->dpl() >= ctx_.effective_cpl() && d->dpl() >= sel.rpl());
        const bool kind_ok = in.op == mnemonic::verr ? (!ar.code() || ar.writable_or_readable())
                                                     : (!ar.code() && ar.writable_or_readable());
        ok = !d->system() && priv && kind_ok;
      }
    }
    ctx_.rflags.set(x86::rflags::zf, ok);
    return done();
  }

};

}  // namespace hvkit::emulate::detail
