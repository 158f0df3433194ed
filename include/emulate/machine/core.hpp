// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's state and its memory-access helpers: faults as outcomes, the
/// access bits of a data access, translation of a linear range (split at the page boundary),
/// RAM and device access pieces with the device-access log, segment-relative (logical) mapping,
/// implicit supervisor (system) reads, general registers, effective addresses, completion (RIP
/// advance, RF, single step) and GDT/LDT descriptor reads. Every instruction group of the
/// machine is a layer above this one.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "../alu.hpp"
#include "../context.hpp"
#include "../decoder.hpp"
#include "../instruction.hpp"
#include "../linearize.hpp"
#include "../outcome.hpp"
#include "../platform.hpp"
#include "../segment.hpp"
#include "../../paging/walk_result.hpp"
#include "../../paging/walker.hpp"
#include "../../paging/cr_write.hpp"
#include "../../x86/cr_rules.hpp"
#include "../../x86/address.hpp"
#include "../../x86/cr.hpp"
#include "../../x86/efer.hpp"
#include "../../x86/pfec.hpp"
#include "../../x86/result.hpp"
#include "../../x86/rflags.hpp"
#include "../../x86/vector.hpp"

namespace hvkit::emulate {

/// Maximum iterations of a REP string instruction per emulate() call; the rest re-executes
/// (RIP stays on the instruction until rCX reaches 0, as after an interrupted iteration).
inline constexpr unsigned max_rep_iterations = 4096;

namespace detail {

using x86::gva;
using x86::gpa;
using x86::pfec;
using x86::vector;

/// A linear range translated for one access: at most two pieces (a page split).
struct mapped_range {
  gva linear{};
  std::array<gpa, 2> address{};
  std::array<std::uint16_t, 2> length{};
  std::uint8_t count = 0;
  std::uint8_t size = 0;
};

/// Bytes in flight, little-endian.
struct byte_buffer {
  std::array<std::uint8_t, 16> b{};
  [[nodiscard]] constexpr std::uint64_t value(unsigned size) const noexcept {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < size && i < 8; ++i) v |= std::uint64_t{b[i]} << (8 * i);
    return v;
  }
  constexpr void set(std::uint64_t v, unsigned size, unsigned at = 0) noexcept {
    for (unsigned i = 0; i < size && i < 8 && at + i < b.size(); ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

using step_result = result<std::uint64_t, outcome>;

template <translator T, guest_ram R, platform P>
class machine_core {
 protected:
  constexpr machine_core(context& ctx, T& tr, R& ram, P& plat) noexcept
      : live_(ctx), ctx_(ctx), tr_(tr), ram_(ram), plat_(plat) {}

  // ---------------------------------------------------------------- faults
  static constexpr outcome gp0() noexcept { return outcome::make_exception(vector::gp, 0); }
  static constexpr outcome ud() noexcept { return outcome::make_exception(vector::ud); }
  static constexpr outcome from_segment_fault(const segment_fault& f) noexcept {
    return outcome::make_exception(f.vector, f.error_code);
  }
  static constexpr outcome from_walk_fault(const paging::walk_fault& f) noexcept {
    if (f.stage == paging::walk_stage::ept) return outcome::make_unsupported(unsupported_reason::second_stage_fault);
    switch (f.kind) {
      case paging::fault_kind::unbacked:
      case paging::fault_kind::retry_exhausted:
      case paging::fault_kind::ept_misconfig:
      case paging::fault_kind::pdptes_not_loaded:  // the translator has no PAE PDPTEs: a host-side problem
        return outcome::make_unsupported(unsupported_reason::page_table_unbacked);
      case paging::fault_kind::non_canonical:
      case paging::fault_kind::invalid_pdpte: return outcome::make_exception(f.vector, 0);
      default: break;
    }
    return outcome::make_page_fault(f.error_code, f.linear);
  }

  // ---------------------------------------------------------------- translation
  /// The access bits for a data access at the current CPL (SDM 4.6: CPL 3 is user mode,
  /// unless the access is implicit supervisor).
  [[nodiscard]] constexpr pfec access_bits(bool write, bool implicit) const noexcept {
    pfec a{};
    if (write) a.set(pfec::write);
    if (implicit)
      a.set(pfec::implicit_access);
    else if (ctx_.effective_cpl() == 3)
      a.set(pfec::user);
    return a;
  }

  /// Translates `size` bytes at `linear`, split at the page boundary; both pieces are
  /// checked before the caller touches either.
  constexpr result<mapped_range, outcome> map(gva linear, unsigned size, pfec access, bool stack) noexcept {
    mapped_range m;
    m.linear = linear;
    m.size = static_cast<std::uint8_t>(size);
    // Outside IA-32e mode linear addresses are 32 bits and wrap (SDM 3.3.2).
    const bool wide = ctx_.efer.test(x86::efer::lma);
    std::uint64_t at = linear.value();
    unsigned left = size;
    while (left != 0 && m.count < 2) {
      const unsigned chunk = static_cast<unsigned>(
          left < x86::page_size_4k - (at & 0xfff) ? left : x86::page_size_4k - (at & 0xfff));
      paging::walk_request req;
      req.linear = gva{at};
      req.access = access;
      req.rflags = ctx_.rflags;
      req.pkru = ctx_.pkru;
      req.pkrs = ctx_.pkrs;
      req.stack = stack;
      // THE RULE (docs/background.md §1): the live CR0.WP, not the one the context was built with.
      static_cast<void>(tr_.refresh_passthrough_bits(ctx_.cr0));
      const paging::walk_result w = tr_.walk(req);
      if (!w) return unexpected(from_walk_fault(w.error()));
      m.address[m.count] = w->address;
      m.length[m.count] = static_cast<std::uint16_t>(chunk);
      ++m.count;
      left -= chunk;
      at += chunk;
      if (!wide) at &= 0xffff'ffffu;
    }
    return m;
  }

  // ---------------------------------------------------------------- physical access
  /// One device access (MMIO piece or port) of the instruction, in program order: replayed
  /// from ctx.completed (performed before an earlier needs_* of this instruction), else taken
  /// from ctx.pending (the caller's answer to the last needs_*), else performed by the
  /// platform. Every access performed is logged, so that a later needs_* can hand the log
  /// back in ctx.completed and a re-run repeats no device side effect. Returns false when
  /// nobody performs it (the caller returns needs_*). A read returns its value in `v`.
  constexpr bool device_access(completion::kind k, std::uint64_t address, unsigned size, bool write,
                               std::uint64_t& v) noexcept {
    auto matches = [&](const completion& c) {
      return c.what == k && c.address == address && c.size == size && c.write == write;
    };
    const completion* c = nullptr;
    if (replayed_ < ctx_.completed.size() && matches(ctx_.completed[replayed_])) {
      c = &ctx_.completed[replayed_++];
    } else {
      replayed_ = static_cast<std::uint8_t>(ctx_.completed.size());  // out of step: replay no more
      if (!pending_used_ && matches(ctx_.pending)) {
        c = &ctx_.pending;
        pending_used_ = true;
      }
    }
    if (c != nullptr) {
      if (!write) v = c->value;
    } else {
      const bool handled = k == completion::kind::mmio
                               ? (write ? plat_.mmio_write(x86::gpa{address}, size, v) : plat_.mmio_read(x86::gpa{address}, size, v))
                               : (write ? plat_.pio_out(static_cast<std::uint16_t>(address), size, v)
                                        : plat_.pio_in(static_cast<std::uint16_t>(address), size, v));
      if (!handled) return false;
    }
    // Logged in place: while replaying, entry `logged_` is the one just replayed.
    if (logged_ < ctx_.completed.size())
      ctx_.completed[logged_] = completion{k, address, static_cast<std::uint8_t>(size), write, v};
    if (logged_ != 0xff) ++logged_;
    return true;
  }

  /// A needs_io / needs_mmio outcome: the device accesses performed so far go to
  /// ctx.completed, so the re-run replays them (see context::completed).
  constexpr outcome needs(const outcome& o) noexcept {
    if (logged_ > ctx_.completed.size()) return outcome::make_unsupported(unsupported_reason::too_many_device_accesses);
    for (unsigned i = 0; i < ctx_.completed.size(); ++i) live_.completed[i] = i < logged_ ? ctx_.completed[i] : completion{};
    return o;
  }

  /// Empties ctx_.completed and ctx_.pending (on `done`, and per REP iteration).
  constexpr void clear_completions() noexcept {
    ctx_.pending = completion{};
    for (auto& c : ctx_.completed) {
      if (c.what == completion::kind::none) break;  // filled from the front
      c = completion{};
    }
  }

  /// Starts a new device-access log (each REP iteration is its own instruction execution).
  constexpr void reset_device_log() noexcept {
    clear_completions();
    replayed_ = 0;
    logged_ = 0;
    pending_used_ = false;
  }

  /// Reads or writes one piece (within a page), RAM first, then MMIO in 8/4/2/1-byte chunks.
  constexpr result<void, outcome> access_piece(gpa a, std::uint8_t* p, unsigned n, bool write) noexcept {
    if (write ? ram_.write(a, p, n) : ram_.read(a, p, n)) return {};
    unsigned done = 0;
    while (done < n) {
      const gpa at = a + done;
      unsigned rest = n - done;
      // Optional platform hook: bytes left in the device region at `at`; accesses are split
      // there as well as at page boundaries.
      if constexpr (requires { { plat_.mmio_region_bytes(at) } -> std::convertible_to<std::uint64_t>; }) {
        const std::uint64_t left = plat_.mmio_region_bytes(at);
        if (left != 0 && left < rest) rest = static_cast<unsigned>(left);
      }
      const unsigned chunk = rest >= 8 ? 8 : rest >= 4 ? 4 : rest >= 2 ? 2 : 1;
      std::uint64_t v = 0;
      for (unsigned i = 0; i < chunk; ++i) v |= std::uint64_t{p[done + i]} << (8 * i);
      if (!device_access(completion::kind::mmio, at.value(), chunk, write, v)) {
        outcome o;
        o.kind = outcome_kind::needs_mmio;
        o.address = at.value();
        o.size = static_cast<std::uint8_t>(chunk);
        o.write = write;
        o.value = write ? v : 0;
        return unexpected(needs(o));
      }
      if (!write)
        for (unsigned i = 0; i < chunk; ++i) p[done + i] = static_cast<std::uint8_t>(v >> (8 * i));
      done += chunk;
    }
    return {};
  }

  constexpr result<void, outcome> read_mapped(const mapped_range& m, byte_buffer& buf) noexcept {
    unsigned off = 0;
    for (unsigned i = 0; i < m.count; ++i) {
      if (auto r = access_piece(m.address[i], buf.b.data() + off, m.length[i], false); !r) return r;
      off += m.length[i];
    }
    return {};
  }
  constexpr result<void, outcome> write_mapped(const mapped_range& m, byte_buffer& buf) noexcept {
    unsigned off = 0;
    for (unsigned i = 0; i < m.count; ++i) {
      if (auto r = access_piece(m.address[i], buf.b.data() + off, m.length[i], true); !r) return r;
      off += m.length[i];
    }
    return {};
  }

  /// Segment check + translation of a logical data access.
  constexpr result<mapped_range, outcome> map_logical(sreg s, std::uint64_t offset, unsigned size, bool write) noexcept {
    const auto lin = linearize(ctx_, s, offset, size, write ? segment_access::write : segment_access::read);
    if (!lin) return unexpected(from_segment_fault(lin.error()));
    return map(*lin, size, access_bits(write, false), s == sreg::ss);
  }

  /// Implicit supervisor read of `size` bytes at a linear address (GDT/LDT/IDT/TSS).
  constexpr result<std::uint64_t, outcome> read_system(std::uint64_t linear, unsigned size) noexcept {
    auto m = map(gva{linear}, size, access_bits(false, true), false);
    if (!m) return unexpected(m.error());
    byte_buffer b;
    if (auto r = read_mapped(*m, b); !r) return unexpected(r.error());
    return b.value(size);
  }

  // ---------------------------------------------------------------- registers
  [[nodiscard]] constexpr std::uint64_t gpr(const operand& o) const noexcept {
    if (o.high8) return (ctx_.gpr[o.reg] >> 8) & 0xff;
    return ctx_.gpr[o.reg & 15] & alu_mask(o.size);
  }
  /// Register write with the architectural width rules: 32-bit writes zero-extend to 64
  /// bits, 8- and 16-bit writes keep the other bits (SDM 3.4.1.1).
  constexpr void set_gpr(unsigned reg, unsigned size, bool high8, std::uint64_t v) noexcept {
    std::uint64_t& r = ctx_.gpr[reg & 15];
    if (high8) {
      r = (r & ~std::uint64_t{0xff00}) | ((v & 0xff) << 8);
    } else if (size >= 8) {
      r = v;
    } else if (size == 4) {
      r = v & 0xffff'ffffu;
    } else {
      const std::uint64_t m = alu_mask(size);
      r = (r & ~m) | (v & m);
    }
  }
  constexpr void set_gpr(const operand& o, std::uint64_t v) noexcept { set_gpr(o.reg, o.size, o.high8, v); }
  static constexpr std::uint64_t alu_mask(unsigned size) noexcept { return detail::mask_of(size); }

  /// Register rSI/rDI/rCX as an address-size quantity.
  [[nodiscard]] constexpr std::uint64_t areg(unsigned reg, unsigned asz) const noexcept {
    return ctx_.gpr[reg] & alu_mask(asz);
  }
  constexpr void set_areg(unsigned reg, unsigned asz, std::uint64_t v) noexcept { set_gpr(reg, asz, false, v); }

  /// Effective address of the memory operand (SDM 3.7.5), truncated to the address size.
  [[nodiscard]] constexpr std::uint64_t effective_address(const instruction& in) const noexcept {
    const memory_operand& m = in.mem;
    std::uint64_t ea = static_cast<std::uint64_t>(m.disp);
    if (m.rip_relative) ea += next_rip_;
    if (m.base != no_register) ea += ctx_.gpr[m.base];
    if (m.index != no_register) ea += ctx_.gpr[m.index] * m.scale;
    return ea & alu_mask(in.address_size);
  }
  // ---------------------------------------------------------------- helpers
  [[nodiscard]] constexpr bool cpl0() const noexcept { return ctx_.effective_cpl() == 0; }
  [[nodiscard]] constexpr bool protected_mode() const noexcept {
    return ctx_.mode() == cpu_mode::protected_ || ctx_.mode() == cpu_mode::long64;
  }
  [[nodiscard]] constexpr bool umip_blocks() const noexcept {
    // SDM 2.5 (CR4.UMIP): SGDT, SIDT, SLDT, SMSW, STR at CPL > 0 raise #GP(0).
    return ctx_.cr4.test(x86::cr4::umip) && ctx_.effective_cpl() > 0;
  }
  constexpr void advance() noexcept {
    ctx_.rip = next_rip_;
    // Every instruction that completes clears RF (SDM 18.3.1.1).
    ctx_.rflags.reset(x86::rflags::rf);
  }
  constexpr outcome done(event e = event::none) noexcept {
    const bool trap = ctx_.rflags.test(x86::rflags::tf);
    advance();
    outcome o = outcome::make_done(e);
    o.single_step = trap;
    return o;
  }

  /// Reads an 8- (or 16-byte, IA-32e system) descriptor for `sel` from the GDT or LDT.
  /// Returns #GP(selector) if it lies beyond the table limit.
  constexpr result<descriptor, outcome> read_descriptor(selector sel, bool system16) noexcept {
    const bool ldt = sel.ldt();
    if (ldt && ctx_.ldtr.ar.test(segment_ar::unusable))
      return unexpected(outcome::make_exception(vector::gp, sel.error_code()));
    const std::uint64_t base = ldt ? ctx_.ldtr.base : ctx_.gdtr.base;
    const std::uint64_t limit = ldt ? ctx_.ldtr.limit : ctx_.gdtr.limit;
    const std::uint64_t off = std::uint64_t{sel.index()} * 8;
    const unsigned bytes = system16 ? 16 : 8;
    if (off + bytes - 1 > limit) return unexpected(outcome::make_exception(vector::gp, sel.error_code()));
    const bool wide = ctx_.efer.test(x86::efer::lma);
    const std::uint64_t lin = wide ? base + off : (base + off) & 0xffff'ffffu;
    descriptor d;
    auto lo = read_system(lin, 8);
    if (!lo) return unexpected(lo.error());
    d.raw = *lo;
    if (system16) {
      auto hi = read_system(wide ? lin + 8 : (lin + 8) & 0xffff'ffffu, 8);
      if (!hi) return unexpected(hi.error());
      d.high = *hi;
    }
    return d;
  }
  [[nodiscard]] constexpr std::uint64_t descriptor_linear(selector sel) const noexcept {
    const std::uint64_t a = ctx_.gdtr.base + std::uint64_t{sel.index()} * 8;
    return ctx_.efer.test(x86::efer::lma) ? a : a & 0xffff'ffffu;
  }

  constexpr outcome done_reg(event e, unsigned reg) noexcept {
    outcome o = done(e);
    o.reg = static_cast<std::uint8_t>(reg);
    return o;
  }


  context& live_;
  context ctx_;  // working copy: committed to live_ only on `done`
  T& tr_;
  R& ram_;
  P& plat_;
  std::uint64_t next_rip_ = 0;
  // Device accesses of the current execution, logged in ctx_.completed (see device_access()).
  std::uint8_t logged_ = 0;
  bool raced_ = false;  // data_op_once(): a LOCKed compare-exchange lost
  std::uint8_t replayed_ = 0;
  bool pending_used_ = false;
};

}  // namespace detail
}  // namespace hvkit::emulate
