// SPDX-License-Identifier: MIT
// Emulating two instructions that exit: a store to an MMIO register and LTR with the GDT in
// a read-only page. The guest owns CR0.WP and cleared it without a VM exit; the hypervisor's
// MMU context still says WP=1. The emulator re-syncs WP from the live CR0 before every
// access (docs/background.md §1), so LTR may set the TSS busy bit in the read-only GDT.
#include <cassert>
#include <cstdint>
#include <vector>

#include <hvkit/emulate/emulator.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/pte.hpp>

namespace em = hvkit::emulate;
namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;
using paging::pte;

// A device with one 32-bit register at guest-physical 0xfeb00000.
struct device : em::null_platform {
  std::uint64_t reg = 0;
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    if (a != x86::gpa{0xfeb0'0000} || size != 4) return false;
    reg = v;
    return true;
  }
};

int main() {
  std::vector<std::uint8_t> mem(1 << 20);  // 1 MiB of guest RAM at gpa 0
  em::flat_ram ram{mem.data(), mem.size()};
  auto put64 = [&](std::uint64_t a, std::uint64_t v) { for (int i = 0; i < 8; ++i) mem[a + i] = std::uint8_t(v >> 8 * i); };
  auto get64 = [&](std::uint64_t a) { std::uint64_t v = 0; for (int i = 7; i >= 0; --i) v = v << 8 | mem[a + i]; return v; };

  // 4-level paging (SDM 4.5): PML4 0x1000 -> PDPT 0x2000 -> PD 0x3000 -> PT 0x4000.
  const pte table = pte::present | pte::writable;
  put64(0x1000, pte::make(x86::gpa{0x2000}, table).raw());
  put64(0x2000, pte::make(x86::gpa{0x3000}, table).raw());
  put64(0x3000, pte::make(x86::gpa{0x4000}, table).raw());
  put64(0x3008, pte::make_large(x86::gpa{0xfea0'0000}, x86::page_size_2m, table | pte::pcd).raw());  // MMIO at 2 MiB
  put64(0x4000 + 0x10 * 8, pte::make(x86::gpa{0x10000}, table).raw());         // code, linear 0x10000
  put64(0x4000 + 0x20 * 8, pte::make(x86::gpa{0x20000}, pte::present).raw());  // GDT, read-only
  put64(0x20028, 0x0000'8900'3000'0067);  // GDT[5]: available 64-bit TSS at 0x3000 (SDM 8.2.3)
  put64(0x20030, 0);

  em::context ctx{};  // 64-bit mode, CPL 0, flat segments; the guest has cleared CR0.WP
  ctx.cr0 = x86::cr0::pg | x86::cr0::ne | x86::cr0::et | x86::cr0::mp | x86::cr0::pe;
  ctx.cr4 = x86::cr4::pae;
  ctx.efer = x86::efer::lme | x86::efer::lma;
  ctx.cr3 = x86::cr3{0x1000};
  for (auto& s : ctx.seg) s = em::segment{0x10, 0, 0xffff'ffff, em::segment_ar{0xc093}};
  ctx[em::sreg::cs] = em::segment{0x08, 0, 0xffff'ffff, em::segment_ar{0xa09b}};
  ctx.gdtr = em::descriptor_table{0x20000, 0x3f};
  ctx.rip = 0x10000;

  // The hypervisor's MMU context, built while WP was still 1 (stale now).
  auto mmu = paging::mmu_context::make(ctx.cr0.with(x86::cr0::wp), ctx.cr4, ctx.efer, x86::gpa{0x1000});
  em::walker_translator tr{mmu, ram};
  device dev;

  // mov [rax], ebx: the store reaches the device.
  const std::uint8_t code[] = {0x89, 0x18, 0x0f, 0x00, 0xd8};  // mov [rax], ebx; ltr ax
  for (unsigned i = 0; i < sizeof code; ++i) mem[0x10000 + i] = code[i];
  ctx.gpr[0] = 0x30'0000;  // linear 3 MiB = gpa 0xfeb00000
  ctx.gpr[3] = 0xcafe'f00d;
  em::outcome o = em::emulate(ctx, tr, ram, dev);
  assert(o.is_done() && dev.reg == 0xcafe'f00d && ctx.rip == 0x10002);

  // ltr ax: an implicit supervisor write to the read-only GDT, legal because WP is 0.
  ctx.gpr[0] = 0x28;
  o = em::emulate(ctx, tr, ram, dev);
  assert(o.is_done() && o.what == em::event::descriptor_table_load);
  assert(get64(0x20028) == 0x0000'8b00'3000'0067);  // type 9 -> 11: busy (SDM 8.2.3)
  assert(ctx.tr.selector == 0x28 && ctx.tr.base == 0x3000);

  // With WP set again the same LTR is a #PF, error code P | W (SDM 4.7), nothing written.
  put64(0x20028, 0x0000'8900'3000'0067);
  ctx.cr0.set(x86::cr0::wp);
  ctx.rip = 0x10002;
  o = em::emulate(ctx, tr, ram, dev);
  assert(o.is_page_fault() && o.page_fault_error_code() == (x86::pfec::present | x86::pfec::write));
  assert(get64(0x20028) == 0x0000'8900'3000'0067);
  return 0;
}
