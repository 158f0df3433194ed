// SPDX-License-Identifier: MIT
// libFuzzer target: decode + emulate. The input is decoded in all three code sizes, then
// drives one emulated instruction in a small guest (real, 16/32-bit protected or 64-bit
// mode; paging on or off with fuzzed page rights; fuzzed registers, segments, CPL, CR0.WP,
// GDT contents, MAXPHYADDR, LAM, allowed CR4 bits) over 64 KiB of RAM and an MMIO page;
// needs_io / needs_mmio outcomes are completed and re-run. Every outcome is acceptable; a crash,
// an out-of-range access or UB (ASan + UBSan) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <hvkit/emulate/decoder.hpp>
#include <hvkit/emulate/emulator.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/x86/cr3.hpp>

namespace {
using namespace hvkit;

struct fuzz_platform : emulate::null_platform {
  std::uint64_t seed = 0;
  bool claim = true;
  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    out = (a.value() * 0x9e37'79b9'7f4a'7c15ull) ^ seed;
    if (size < 8) out &= (std::uint64_t{1} << (8 * size)) - 1;
    return claim;
  }
  bool mmio_write(x86::gpa, unsigned, std::uint64_t) { return claim; }
  bool pio_in(std::uint16_t, unsigned, std::uint64_t& out) {
    out = seed;
    return claim;
  }
  bool pio_out(std::uint16_t, unsigned, std::uint64_t) { return claim; }
  bool cpuid(std::uint32_t, std::uint32_t, emulate::cpuid_regs& r) {
    r = {1, 2, 3, 4};
    return true;
  }
  bool rdmsr(std::uint32_t n, std::uint64_t& v) {
    v = seed;
    return (n & 1) != 0;
  }
  bool wrmsr(std::uint32_t n, std::uint64_t) { return (n & 1) != 0; }
};

struct reader {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{u8()} << (8 * i);
    return v;
  }
};

constexpr std::size_t ram_bytes = 64 * 1024;
alignas(4096) std::uint8_t ram_buf[ram_bytes];

void wr64(std::uint64_t a, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) ram_buf[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // 1. The decoder alone, in every code size.
  for (auto m : {emulate::code_size::c16, emulate::code_size::c32, emulate::code_size::c64}) {
    const auto d = emulate::decode(data, size, m);
    if (d && (d->length == 0 || d->length > 15 || d->length > size)) __builtin_trap();
  }
  if (size < 48) return 0;

  reader r{data, size};
  const std::uint8_t cfg = r.u8();
  const std::uint8_t cfg2 = r.u8();
  std::memset(ram_buf, 0, sizeof ram_buf);

  emulate::context ctx{};
  for (auto& g : ctx.gpr) {
    // Small values mostly (addresses inside RAM / the MMIO page), sometimes anything.
    const std::uint8_t sel = r.u8();
    const std::uint16_t lo = static_cast<std::uint16_t>(r.u8() | (r.u8() << 8));
    g = (sel & 0xc0) == 0xc0 ? (std::uint64_t{lo} << 48) | (std::uint64_t{sel} << 20) | lo
        : (sel & 1)          ? 0x1'0000u + (lo & 0xfff)  // the MMIO page
                             : lo;
  }
  const unsigned mode = cfg & 3;  // 0 real, 1 prot16, 2 prot32, 3 long64
  const bool paging = (cfg & 4) != 0 || mode == 3;
  const bool wp = (cfg & 8) != 0;
  ctx.cpl = (cfg & 0x10) ? 3 : 0;
  ctx.rflags = x86::rflags{0x2 | (std::uint64_t{cfg2} << 8 & 0x7f00)};  // TF..NT incl. DF, IOPL
  const std::uint64_t code_at = 0x8000;

  // Page tables at 0x1000 (4-level) or 0x1000 (32-bit paging): identity map of the RAM
  // pages with fuzzed rights, one MMIO page at linear 0x10000 -> gpa 0xfee00000.
  const std::uint8_t rights_seed = cfg2;
  if (mode == 3) {
    wr64(0x1000, 0x2000 | 7);
    wr64(0x2000, 0x3000 | 7);
    wr64(0x3000, 0x4000 | 7);
    for (std::uint64_t p = 0; p < 16; ++p) {
      const std::uint64_t rights = ((rights_seed >> (p & 7)) & 1) ? 7 : 5;
      wr64(0x4000 + p * 8, (p << 12) | (p == 8 ? 7 : rights));
    }
    wr64(0x4000 + 16 * 8, 0xfee0'0000 | 7);
  } else if (paging) {
    wr64(0x1000, 0x2000 | 7);  // PDE 0 (4-byte entries: the upper half is PDE 1 = 0)
    ram_buf[0x1004] = 0;
    for (std::uint32_t p = 0; p < 16; ++p) {
      const std::uint32_t rights = ((rights_seed >> (p & 7)) & 1) ? 7 : 5;
      const std::uint32_t e = (p << 12) | (p == 8 ? 7 : rights);
      for (int i = 0; i < 4; ++i) ram_buf[0x2000 + p * 4 + i] = static_cast<std::uint8_t>(e >> (8 * i));
    }
    const std::uint32_t mm = 0xfee0'0000u | 7;
    for (int i = 0; i < 4; ++i) ram_buf[0x2000 + 16 * 4 + i] = static_cast<std::uint8_t>(mm >> (8 * i));
  }

  // A GDT at 0x6000 from fuzz bytes (16 bytes of it), the rest of the input after the code
  // goes to 0x9000 (data the instruction may address).
  const emulate::segment_ar data_ar{static_cast<std::uint32_t>(0xc093 | ((ctx.cpl == 3) ? 0x60 : 0))};
  for (auto& s : ctx.seg) s = emulate::segment{0x10, 0, 0xffff'ffff, data_ar};
  ctx.gdtr = emulate::descriptor_table{0x6000, static_cast<std::uint16_t>(r.u8())};
  for (int i = 0; i < 16; ++i) ram_buf[0x6028 + i] = r.u8();
  ctx.tr = emulate::segment{0x28, 0x9000, 0x2067, emulate::segment_ar{0x8b}};

  switch (mode) {
    case 0:
      ctx.cr0 = x86::cr0{0x10};
      for (auto& s : ctx.seg) s = emulate::segment{0, 0, 0xffff, emulate::segment_ar{0x93}};
      ctx[emulate::sreg::cs].ar = emulate::segment_ar{0x9b};
      break;
    case 1:
    case 2:
      ctx.cr0 = x86::cr0{0x11 | (paging ? 0x8000'0000u : 0) | (wp ? 0x1'0000u : 0)};
      ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff,
                                                emulate::segment_ar{mode == 2 ? 0xc09bu : 0x809bu}};
      ctx.cr3 = x86::cr3{0x1000};
      break;
    default:
      ctx.cr0 = x86::cr0{0x8000'0011u | (wp ? 0x1'0000u : 0)};
      ctx.cr4 = x86::cr4::pae;
      ctx.efer = x86::efer::lme | x86::efer::lma | x86::efer::nxe;
      ctx.cr3 = x86::cr3{0x1000};
      ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff, emulate::segment_ar{0xa09b}};
      break;
  }
  if (ctx.cpl == 3 && mode != 0) {
    auto& cs = ctx[emulate::sreg::cs];
    cs.ar = cs.ar.with_type(cs.ar.type());
    cs.ar = emulate::segment_ar{cs.ar.raw() | 0x60};
  }
  ctx.rip = code_at + (cfg >> 5) * 0x1ff;  // sometimes near the end of the code page
  for (int i = 0; i < 15; ++i) ram_buf[ctx.rip + i] = r.u8();
  std::size_t rest = r.n < 0x4000 ? r.n : 0x4000;
  std::memcpy(ram_buf + 0x9000, r.p, rest);

  // What the CR rules read from the context: MAXPHYADDR (sometimes outside 32..52: a typed
  // `invalid_context`, never a contract violation), LAM, the CR4 bits the caller allows.
  const std::uint8_t crcfg = data[size - 3];
  ctx.maxphyaddr = static_cast<std::uint8_t>((crcfg & 0x80) ? crcfg & 0x3f : 32 + (crcfg % 21));
  ctx.lam = (crcfg & 0x40) != 0;
  if (crcfg & 0x20) ctx.cr4_allowed = x86::cr4{r.u64()} | ctx.cr4;

  emulate::flat_ram ram{ram_buf, sizeof ram_buf};
  // The MMU context is built with the opposite WP half of the time: the emulator must
  // refresh it from the live CR0.
  x86::cr0 built = (cfg2 & 0x80) ? ctx.cr0 ^ x86::cr0::wp : ctx.cr0;
  const auto pm = x86::paging_mode_of(built, ctx.cr4, ctx.efer);
  auto mmu = paging::mmu_context::make(built, ctx.cr4, ctx.efer, x86::cr3_root(ctx.cr3, pm, 52));
  emulate::walker_translator tr{mmu, ram};
  fuzz_platform plat;
  plat.seed = data[size - 1];
  plat.claim = (data[size - 2] & 3) != 0;
  const emulate::context before = ctx;
  auto o = emulate::emulate(ctx, tr, ram, plat);
  // Only `done` moves RIP; every other outcome leaves the instruction to be re-executed.
  if (!o.is_done() && ctx.rip != before.rip) __builtin_trap();
  if (o.kind == emulate::outcome_kind::exception && o.vector != x86::vector::pf && o.cr2 != 0) __builtin_trap();
  // Complete every needs_io / needs_mmio as a caller would and re-run: an instruction makes a
  // bounded number of device accesses, so without REP progress (rCX, rSI, rDI) it must
  // leave the needs_* loop within a few rounds (a read-modify-write of MMIO takes two).
  unsigned rounds_without_progress = 0;
  for (unsigned round = 0; round < 64; ++round) {
    if (o.kind != emulate::outcome_kind::needs_io && o.kind != emulate::outcome_kind::needs_mmio) break;
    const std::uint64_t rcx = ctx.gpr[1], rsi = ctx.gpr[6], rdi = ctx.gpr[7];
    ctx.pending = emulate::completion{o.kind == emulate::outcome_kind::needs_io ? emulate::completion::kind::pio
                                                                                  : emulate::completion::kind::mmio,
                                      o.address, o.size, o.write, o.write ? o.value : plat.seed * 0x0101'0101u};
    const std::uint64_t rip = ctx.rip;
    o = emulate::emulate(ctx, tr, ram, plat);
    if (!o.is_done() && ctx.rip != rip) __builtin_trap();
    const bool progress = ctx.gpr[1] != rcx || ctx.gpr[6] != rsi || ctx.gpr[7] != rdi;
    rounds_without_progress = progress ? 0 : rounds_without_progress + 1;
    if (rounds_without_progress > 6) __builtin_trap();
  }
  if (o.is_done() && (ctx.pending.what != emulate::completion::kind::none ||
                      ctx.completed[0].what != emulate::completion::kind::none))
    __builtin_trap();
  return 0;
}
