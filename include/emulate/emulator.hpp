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

#include "context.hpp"
#include "instruction.hpp"
#include "machine/control.hpp"
#include "outcome.hpp"
#include "platform.hpp"
#include "../x86/result.hpp"

namespace hvkit::emulate {

namespace detail {

/// The emulator: a thin dispatcher over the instruction-group layers of emulate/machine/
/// (core -> fetch -> data -> segment_load -> io -> string -> system -> control), each one
/// header of one concept.
template <translator T, guest_ram R, platform P>
class machine : machine_control<T, R, P> {
  using base = machine_control<T, R, P>;
  using base::gp0;
  using base::clear_completions;
  using base::gpr;
  using base::set_gpr;
  using base::cpl0;
  using base::done;
  using base::live_;
  using base::ctx_;
  using base::tr_;
  using base::ram_;
  using base::plat_;
  using base::next_rip_;
  using base::fetch_decode;
  using base::data_op;
  using base::mov_from_sreg;
  using base::mov_to_sreg;
  using base::port_op;
  using base::string_op;
  using base::store_system;
  using base::store_table;
  using base::load_table;
  using base::lldt;
  using base::ltr;
  using base::verify;
  using base::lmsw;
  using base::invlpg;
  using base::mov_from_cr;
  using base::write_cr;
  using base::mov_to_cr;
  using base::mov_dr;

 public:
  constexpr machine(context& ctx, T& tr, R& ram, P& plat) noexcept : base(ctx, tr, ram, plat) {}

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
      case mnemonic::cmpxchg: case mnemonic::cmpxchg8b: case mnemonic::cmpxchg16b:
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
