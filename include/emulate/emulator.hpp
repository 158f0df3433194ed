// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator: fetch (through the walker, with execute access), decode, execute
/// one instruction of the subset over an emulation context, with every memory access
/// translated by the walker and permission-checked with the live CR0.WP.
///
/// @code
///   hvkit::paging::mmu_context mmu = ...;            // the hypervisor's, possibly stale
///   hvkit::emulate::flat_ram ram{guest_mem, size};
///   hvkit::emulate::walker_translator tr{mmu, ram};
///   my_platform devices;                              // models emulate::platform
///   hvkit::emulate::outcome o = hvkit::emulate::emulate(ctx, tr, ram, devices);
/// @endcode
///
/// Guarantees:
///  - the passthrough bits (CR0.WP) are refreshed from `ctx.cr0` before every translation;
///  - every fault of an instruction (segmentation, paging, privilege, descriptor checks) is
///    found before anything is written: a non-`done` outcome leaves `ctx` and guest memory
///    unchanged (except the completed iterations of a REP string instruction, as on the
///    processor, and the device-access log in `ctx.completed` on needs_io / needs_mmio);
///  - GDT/LDT/IDT/TSS accesses are implicit supervisor accesses (SDM 4.6.1), even at CPL 3;
///  - accesses are split at 4 KiB page boundaries; MMIO pieces reach the platform at their
///    byte-exact guest-physical address in 1-, 2-, 4- or 8-byte chunks;
///  - LOCKed read-modify-writes (and XCHG with memory) on RAM are compare-exchanges, atomic
///    against other vCPUs; device accesses are performed once each, also across the re-runs
///    of needs_io / needs_mmio (context::completed).
///
/// Limitations (documented in docs/emulate.md): split locks and LOCKed RMW on MMIO are a
/// read then a write; task switches, call gates and far transfers are outside the subset.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "alu.hpp"
#include "context.hpp"
#include "decoder.hpp"
#include "instruction.hpp"
#include "linearize.hpp"
#include "outcome.hpp"
#include "platform.hpp"
#include "segment.hpp"
#include "../paging/cr_write.hpp"
#include "../paging/walk_result.hpp"
#include "../paging/walker.hpp"
#include "../paging/cr_write.hpp"
#include "../x86/cr_rules.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/pfec.hpp"
#include "../x86/result.hpp"
#include "../x86/rflags.hpp"
#include "../x86/vector.hpp"

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
class machine {
 public:
  constexpr machine(context& ctx, T& tr, R& ram, P& plat) noexcept
      : live_(ctx), ctx_(ctx), tr_(tr), ram_(ram), plat_(plat) {}

  /// Fetches, decodes and executes one instruction at CS:RIP.
  constexpr outcome step() noexcept {
    instruction in;
    if (auto f = fetch_decode(in); !f.is_done()) return f;
    return run(in);
  }

  /// Fetches and decodes the instruction at CS:RIP without executing it (its length, for a
  /// hypervisor whose CPU does not report one): done with `in` filled, or the fault.
  constexpr outcome fetch(instruction& in) noexcept { return fetch_decode(in); }

  /// Executes an instruction that was already decoded (its bytes at CS:RIP).
  constexpr outcome run(const instruction& in) noexcept {
    outcome o = execute(in);
    if (o.kind == outcome_kind::unsupported) o.op = in.op;
    if (o.is_done()) {
      clear_completions();
      live_ = ctx_;
    }
    // Otherwise live_ is untouched, except for the completed iterations of a REP string
    // instruction, which string_op() committed one by one.
    return o;
  }

 private:
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

  // ---------------------------------------------------------------- fetch
  constexpr outcome fetch_decode(instruction& in) noexcept {
    const code_size cs = ctx_.code();
    const bool long_mode = ctx_.mode() == cpu_mode::long64;
    std::uint64_t avail = max_instruction_length;
    if (!long_mode) {
      const segment& c = ctx_[sreg::cs];
      if (ctx_.rip > c.limit) return gp0();
      const std::uint64_t room = std::uint64_t{c.limit} - ctx_.rip + 1;
      if (room < avail) avail = room;
    }
    const auto lin = linearize(ctx_, sreg::cs, ctx_.rip, 1, segment_access::execute);
    if (!lin) return gp0();
    std::array<std::uint8_t, max_instruction_length> bytes{};
    std::uint64_t have = 0;
    pfec access = pfec::fetch;
    if (ctx_.effective_cpl() == 3) access.set(pfec::user);
    while (true) {
      // Fetch up to the page end (or the limit), decode; fetch the next page only if the
      // instruction needs it, so a fault on it is reported only then (SDM 6.15 #PF).
      const std::uint64_t at = lin->value() + have;
      const std::uint64_t to_page_end = x86::page_size_4k - (at & 0xfff);
      std::uint64_t n = avail - have;
      if (n > to_page_end) n = to_page_end;
      auto m = map(gva{long_mode ? at : (at & 0xffff'ffffu)}, static_cast<unsigned>(n), access, false);
      if (!m) return m.error();
      if (!ram_.read(m->address[0], bytes.data() + have, static_cast<std::size_t>(n)))
        return outcome::make_unsupported(unsupported_reason::fetch_not_ram);
      have += n;
      const auto d = decode(bytes.data(), static_cast<std::size_t>(have), cs);
      if (d) {
        in = *d;
        break;
      }
      switch (d.error()) {
        case decode_error::truncated:
          if (have < avail) continue;
          return gp0();  // the instruction runs past the CS limit (SDM 6.15, #GP)
        case decode_error::too_long: return gp0();  // SDM 2.3.11
        case decode_error::invalid: return ud();
        case decode_error::unsupported: return outcome::make_unsupported(unsupported_reason::instruction);
      }
    }
    return outcome::make_done();
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

  // ---------------------------------------------------------------- execute
  constexpr outcome execute(const instruction& in) noexcept {
    next_rip_ = ctx_.rip + in.length;
    if (ctx_.code() != code_size::c64) next_rip_ &= ctx_.code() == code_size::c16 ? 0xffffu : 0xffff'ffffu;
    switch (in.op) {
      case mnemonic::mov: case mnemonic::movzx: case mnemonic::movsx: case mnemonic::movsxd:
      case mnemonic::add: case mnemonic::or_: case mnemonic::adc: case mnemonic::sbb: case mnemonic::and_:
      case mnemonic::sub: case mnemonic::xor_: case mnemonic::cmp: case mnemonic::test:
      case mnemonic::not_: case mnemonic::neg: case mnemonic::inc: case mnemonic::dec: case mnemonic::xchg:
      case mnemonic::bt: case mnemonic::bts: case mnemonic::btr: case mnemonic::btc:
        return data_op(in);
      case mnemonic::mov_from_sreg: return mov_from_sreg(in);
      case mnemonic::mov_to_sreg: return mov_to_sreg(in);
      case mnemonic::movs: case mnemonic::cmps: case mnemonic::stos: case mnemonic::lods:
      case mnemonic::ins: case mnemonic::outs:
        return string_op(in);
      case mnemonic::in: case mnemonic::out: return port_op(in);
      case mnemonic::sldt: case mnemonic::str: case mnemonic::smsw: return store_system(in);
      case mnemonic::sgdt: case mnemonic::sidt: return store_table(in);
      case mnemonic::lgdt: case mnemonic::lidt: return load_table(in);
      case mnemonic::lldt: return lldt(in);
      case mnemonic::ltr: return ltr(in);
      case mnemonic::verr: case mnemonic::verw: return verify(in);
      case mnemonic::lmsw: return lmsw(in);
      case mnemonic::invlpg: return invlpg(in);
      case mnemonic::mov_from_cr: return mov_from_cr(in);
      case mnemonic::mov_to_cr: return mov_to_cr(in);
      case mnemonic::mov_from_dr: case mnemonic::mov_to_dr: return mov_dr(in);
      case mnemonic::clts:
        if (!cpl0()) return gp0();
        return write_cr({paging::cr_write_op::instruction::clts, 0, 0});
      case mnemonic::cpuid: {
        cpuid_regs r;
        if (!plat_.cpuid(static_cast<std::uint32_t>(ctx_.gpr[0]), static_cast<std::uint32_t>(ctx_.gpr[1]), r))
          return outcome::make_unsupported(unsupported_reason::instruction);
        set_gpr(0, 4, false, r.eax);
        set_gpr(3, 4, false, r.ebx);
        set_gpr(1, 4, false, r.ecx);
        set_gpr(2, 4, false, r.edx);
        return done();
      }
      case mnemonic::rdmsr: {
        if (!cpl0()) return gp0();
        std::uint64_t v = 0;
        if (!plat_.rdmsr(static_cast<std::uint32_t>(ctx_.gpr[1]), v)) return gp0();
        set_gpr(0, 4, false, v & 0xffff'ffffu);
        set_gpr(2, 4, false, v >> 32);
        return done();
      }
      case mnemonic::wrmsr: {
        if (!cpl0()) return gp0();
        const std::uint64_t v = (ctx_.gpr[0] & 0xffff'ffffu) | (ctx_.gpr[2] << 32);
        if (!plat_.wrmsr(static_cast<std::uint32_t>(ctx_.gpr[1]), v)) return gp0();
        return done(event::msr_write);
      }
      case mnemonic::hlt:
        if (!cpl0()) return gp0();
        return done(event::halt);
      case mnemonic::invd: case mnemonic::wbinvd:
        if (!cpl0()) return gp0();
        return done(event::cache_flush);
      case mnemonic::vmcall: case mnemonic::vmmcall:  // the hypervisor's own: never emulated
      case mnemonic::int3: case mnemonic::int_n: case mnemonic::into: case mnemonic::int1:
      case mnemonic::invalid: break;
    }
    return outcome::make_unsupported(unsupported_reason::instruction);
  }

  constexpr outcome done_reg(event e, unsigned reg) noexcept {
    outcome o = done(e);
    o.reg = static_cast<std::uint8_t>(reg);
    return o;
  }

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
    const std::uint64_t base = sel.ldt() ? ctx_.ldtr.base + std::uint64_t{sel.index()} * 8 : descriptor_linear(sel);
    const std::uint64_t lin = (ctx_.efer.test(x86::efer::lma) ? base : base & 0xffff'ffffu) + 5;
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

  // ---------------------------------------------------------------- string and port I/O
  /// The I/O permission check (SDM Vol. 1 19.5 (I/O privilege level), 19.5.2 (I/O
  /// permission bit map)): needed in protected mode when CPL > IOPL, and always in
  /// virtual-8086 mode. The TSS reads are implicit supervisor reads.
  constexpr result<void, outcome> io_permitted(std::uint16_t port, unsigned size) noexcept {
    if (ctx_.mode() == cpu_mode::real) return {};
    if (ctx_.mode() != cpu_mode::vm86 && ctx_.effective_cpl() <= ctx_.rflags.iopl_value()) return {};
    const segment& tr = ctx_.tr;
    const std::uint8_t type = tr.ar.type();
    if ((type != system_type::tss_available && type != system_type::tss_busy) || tr.limit < 0x67)
      return unexpected(gp0());
    auto base = read_system(tr.base + 0x66, 2);
    if (!base) return unexpected(base.error());
    const std::uint64_t off = *base + port / 8;
    if (off + 1 > tr.limit) return unexpected(gp0());
    auto bits = read_system(tr.base + off, 2);
    if (!bits) return unexpected(bits.error());
    const std::uint64_t want = ((std::uint64_t{1} << size) - 1) << (port & 7);
    if ((*bits & want) != 0) return unexpected(gp0());
    return {};
  }

  constexpr result<std::uint64_t, outcome> port_in(std::uint16_t port, unsigned size) noexcept {
    std::uint64_t v = 0;
    if (device_access(completion::kind::pio, port, size, false, v)) return v & alu_mask(size);
    outcome o;
    o.kind = outcome_kind::needs_io;
    o.address = port;
    o.size = static_cast<std::uint8_t>(size);
    return unexpected(needs(o));
  }
  constexpr result<void, outcome> port_out(std::uint16_t port, unsigned size, std::uint64_t v) noexcept {
    std::uint64_t out = v & alu_mask(size);
    if (device_access(completion::kind::pio, port, size, true, out)) return {};
    outcome o;
    o.kind = outcome_kind::needs_io;
    o.address = port;
    o.size = static_cast<std::uint8_t>(size);
    o.write = true;
    o.value = v & alu_mask(size);
    return unexpected(needs(o));
  }

  constexpr outcome port_op(const instruction& in) noexcept {
    const bool is_in = in.op == mnemonic::in;
    const operand& port_operand = is_in ? in.src : in.dst;
    const std::uint16_t port = port_operand.kind == operand_kind::imm ? static_cast<std::uint16_t>(in.imm & 0xff)
                                                                      : static_cast<std::uint16_t>(ctx_.gpr[2]);
    const unsigned size = in.operand_size;
    if (auto r = io_permitted(port, size); !r) return r.error();
    if (is_in) {
      auto v = port_in(port, size);
      if (!v) return v.error();
      set_gpr(0, size, false, *v);
    } else {
      if (auto r = port_out(port, size, ctx_.gpr[0]); !r) return r.error();
    }
    return done();
  }

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
    std::uint64_t base = 0;
    for (unsigned i = 0; i < base_bytes; ++i) base |= std::uint64_t{b.b[2 + i]} << (8 * i);
    // SDM LGDT/LIDT: a 16-bit operand size loads a 24-bit base.
    if (!long_mode && in.operand_size == 2) base &= 0x00ff'ffffu;
    t.base = base;
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

/// Fetches, decodes and emulates the instruction at CS:RIP (see the file comment).
template <translator T, guest_ram R, platform P>
[[nodiscard]] constexpr outcome emulate(context& ctx, T& tr, R& ram, P& plat) noexcept {
  detail::machine<T, R, P> m{ctx, tr, ram, plat};
  return m.step();
}

/// Fetches and decodes the instruction at CS:RIP through the guest's paging, as emulate()
/// would, without executing it: the instruction (with its length), or the outcome that
/// stopped the fetch (a fault, or unsupported).
template <translator T, guest_ram R>
[[nodiscard]] constexpr result<instruction, outcome> fetch_instruction(context& ctx, T& tr, R& ram) noexcept {
  null_platform plat;
  detail::machine<T, R, null_platform> m{ctx, tr, ram, plat};
  instruction in;
  if (outcome o = m.fetch(in); !o.is_done()) return unexpected(o);
  return in;
}

/// Emulates an instruction the caller already decoded (e.g. from bytes it fetched itself);
/// `in` must be the instruction at CS:RIP.
template <translator T, guest_ram R, platform P>
[[nodiscard]] constexpr outcome emulate(context& ctx, const instruction& in, T& tr, R& ram, P& plat) noexcept {
  detail::machine<T, R, P> m{ctx, tr, ram, plat};
  return m.run(in);
}

}  // namespace hvkit::emulate
