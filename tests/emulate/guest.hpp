// SPDX-License-Identifier: MIT
// Test support for the emulator: a small guest with 4-level (or no) paging over a flat RAM
// buffer, page tables built by hand (SDM 4.5, Table 4-14 ... 4-20 bit layouts), and a
// recording platform. Test-only; not part of the library.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include <hvkit/emulate/emulator.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/x86/cr3.hpp>

namespace hvkit::test {

// Page-table entry bits, typed from SDM Table 4-19/4-20.
inline constexpr std::uint64_t pte_p = 1, pte_rw = 2, pte_us = 4, pte_a = 0x20, pte_d = 0x40;
inline constexpr std::uint64_t pte_xd = std::uint64_t{1} << 63;

// Guest-physical memory: 2 MiB of RAM at 0; everything above is MMIO.
inline constexpr std::uint64_t ram_size = 2 << 20;
inline constexpr std::uint64_t mmio_base = 0xfeb0'0000;

struct access_record {
  std::uint64_t gpa;
  unsigned size;
  bool write;
  std::uint64_t value;
};

// A platform that records every MMIO and port access. MMIO reads return the low bytes of
// `mmio_read_value` shifted by the offset, so split reads are checkable byte by byte.
struct recording_platform : emulate::null_platform {
  std::vector<access_record> mmio, pio;
  bool claim_mmio = true, claim_pio = true;
  std::uint64_t pio_value = 0;
  std::uint64_t msr_value = 0;
  std::uint32_t last_msr = 0;
  std::uint64_t last_msr_write = 0;

  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    if (!claim_mmio) return false;
    // byte i of the device register space at gpa g reads as (g & 0xff) + 0x11
    out = 0;
    for (unsigned i = 0; i < size; ++i) out |= ((a.value() + i + 0x11) & 0xff) << (8 * i);
    mmio.push_back({a.value(), size, false, out});
    return true;
  }
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    if (!claim_mmio) return false;
    mmio.push_back({a.value(), size, true, v});
    return true;
  }
  bool pio_in(std::uint16_t port, unsigned size, std::uint64_t& out) {
    if (!claim_pio) return false;
    out = pio_value;
    pio.push_back({port, size, false, out});
    return true;
  }
  bool pio_out(std::uint16_t port, unsigned size, std::uint64_t v) {
    if (!claim_pio) return false;
    pio.push_back({port, size, true, v});
    return true;
  }
  bool cpuid(std::uint32_t leaf, std::uint32_t sub, emulate::cpuid_regs& r) {
    r = {leaf + 1, sub + 2, 0x6c65746e, 0x49656e69};
    return true;
  }
  bool rdmsr(std::uint32_t n, std::uint64_t& v) {
    last_msr = n;
    v = msr_value;
    return n == 0x10;
  }
  bool wrmsr(std::uint32_t n, std::uint64_t v) {
    last_msr = n;
    last_msr_write = v;
    return n == 0x10;
  }
};

struct guest {
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(ram_size);
  emulate::flat_ram ram{mem.data(), mem.size()};
  emulate::context ctx{};
  std::uint64_t next_table = 0x2000;  // PML4 at 0x1000
  static constexpr std::uint64_t pml4 = 0x1000;
  static constexpr std::uint64_t code = 0x40'0000;  // linear address of the code page
  static constexpr std::uint64_t code_phys = 0x10'0000;
  recording_platform plat;

  std::uint64_t rd64(std::uint64_t a) const {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= std::uint64_t{mem[a + i]} << (8 * i);
    return v;
  }
  void wr64(std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) mem[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put(std::uint64_t a, std::initializer_list<std::uint8_t> bytes) {
    for (auto b : bytes) mem[a++] = b;
  }
  // The tests' RAM data page (guest-physical).
  static constexpr std::uint64_t data_page = 0x12'0000;
  void put_data(std::initializer_list<std::uint8_t> bytes) { put(data_page, bytes); }
  void wr_data32(std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) mem[data_page + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  std::uint32_t rd_data32() const {
    std::uint32_t v = 0;
    for (unsigned i = 0; i < 4; ++i) v |= std::uint32_t{mem[data_page + i]} << (8 * i);
    return v;
  }

  // Maps the 4 KiB page at `lin` to `phys` (4-level paging); non-leaf entries are P|RW|US.
  void map(std::uint64_t lin, std::uint64_t phys, std::uint64_t flags = pte_p | pte_rw) {
    std::uint64_t table = pml4;
    for (int level = 4; level > 1; --level) {
      const std::uint64_t idx = (lin >> (12 + 9 * (level - 1))) & 0x1ff;
      std::uint64_t e = rd64(table + idx * 8);
      if (!(e & pte_p)) {
        e = next_table | pte_p | pte_rw | pte_us;
        next_table += 0x1000;
        wr64(table + idx * 8, e);
      }
      table = e & 0x000f'ffff'ffff'f000;
    }
    wr64(table + ((lin >> 12) & 0x1ff) * 8, phys | flags);
  }

  // 64-bit mode, CPL 0, flat segments, paging with CR0.WP=1; code page mapped.
  void long_mode() {
    ctx.cr0 = x86::cr0{0x8001'0033};  // PG WP NE ET MP PE
    ctx.cr4 = x86::cr4::pae;
    ctx.efer = x86::efer::lme | x86::efer::lma | x86::efer::nxe;
    ctx.cr3 = x86::cr3{pml4};
    for (auto& s : ctx.seg) s = emulate::segment{0x10, 0, 0xffff'ffff, emulate::segment_ar{0xc093}};
    ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff, emulate::segment_ar{0xa09b}};  // L=1
    ctx.rip = code;
    map(code, code_phys, pte_p | pte_rw);
  }

  // 32-bit protected mode without paging, CPL 0, flat 4 GiB segments.
  void protected32() {
    ctx.cr0 = x86::cr0{0x11};
    ctx.cr4 = x86::cr4{};
    ctx.efer = x86::efer{};
    for (auto& s : ctx.seg) s = emulate::segment{0x10, 0, 0xffff'ffff, emulate::segment_ar{0xc093}};
    ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff, emulate::segment_ar{0xc09b}};
    ctx.rip = code_phys;
  }

  // The hypervisor's MMU context, built from the given CR0 (possibly stale later).
  paging::mmu_context make_mmu(x86::cr0 cr0) const {
    const auto mode = x86::paging_mode_of(cr0, ctx.cr4, ctx.efer);
    return paging::mmu_context::make(cr0, ctx.cr4, ctx.efer, x86::cr3_root(ctx.cr3, mode, 52));
  }

  // Code bytes at CS:RIP (64-bit: the mapped code page; otherwise physical = linear).
  void code_bytes(std::initializer_list<std::uint8_t> bytes) {
    const std::uint64_t at = ctx.efer.test(x86::efer::lma) ? code_phys + (ctx.rip - code) : ctx.rip;
    put(at, bytes);
  }

  emulate::outcome run_with(paging::mmu_context& mmu) {
    emulate::walker_translator tr{mmu, ram};
    return emulate::emulate(ctx, tr, ram, plat);
  }
  emulate::outcome run() {
    auto mmu = make_mmu(ctx.cr0);
    return run_with(mmu);
  }
  emulate::outcome exec(std::initializer_list<std::uint8_t> bytes) {
    code_bytes(bytes);
    return run();
  }
};

}  // namespace hvkit::test
