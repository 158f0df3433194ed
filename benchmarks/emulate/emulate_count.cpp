// SPDX-License-Identifier: MIT
// Instruction counts per emulated instruction, for callgrind (deterministic, unlike timings):
//   emulate_count <kind> <runs>
// emulates one instruction `runs` times from the same start state (fetch through the
// walker, decode, execute): mmio_mov is BM_emulate/mmio_mov's `mov [rax], ebx` to an MMIO
// page; the other kinds cover the emulator's other instruction groups. count_instructions.sh
// runs it under `valgrind --tool=callgrind` for two counts and prints the difference per
// run, which leaves out start-up and set-up. Each kind has its own function.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include <hvkit/emulate/emulator.hpp>

#include "guest.hpp"

using namespace hvkit;

namespace {

// Takes every device access (no recording: the fixture's vector would grow).
struct sink_platform : emulate::null_platform {
  std::uint64_t last = 0;
  bool mmio_write(x86::gpa a, unsigned, std::uint64_t v) {
    last ^= a.value() ^ v;
    return true;
  }
  bool mmio_read(x86::gpa a, unsigned, std::uint64_t& v) {
    v = a.value();
    return true;
  }
  bool pio_out(std::uint16_t port, unsigned, std::uint64_t v) {
    last ^= port ^ v;
    return true;
  }
};

volatile std::uint64_t sink = 0;

[[gnu::noinline]] std::uint64_t run_kind(test::guest& g, unsigned long runs) {
  auto mmu = g.make_mmu(g.ctx.cr0);
  emulate::walker_translator tr{mmu, g.ram};
  sink_platform dev;
  const emulate::context start = g.ctx;
  std::uint64_t acc = 0;
  for (unsigned long i = 0; i < runs; ++i) {
    emulate::context c = start;
    const auto o = emulate::emulate(c, tr, g.ram, dev);
    if (!o.is_done()) {
      std::fprintf(stderr, "emulate_count: outcome %u\n", static_cast<unsigned>(o.kind));
      std::exit(1);
    }
    acc += c.rip + static_cast<unsigned>(o.kind);
  }
  return acc + dev.last;
}

bool setup(test::guest& g, const char* kind) {
  g.long_mode();
  g.map(0x70'0000, test::mmio_base);
  g.map(0x60'0000, test::guest::data_page);
  g.ctx.gpr[0] = 0x70'0030;
  g.ctx.gpr[3] = 0x1234;
  auto code = [&](std::initializer_list<std::uint8_t> b) { g.code_bytes(b); };
  if (!std::strcmp(kind, "mmio_mov")) {
    code({0x89, 0x18});  // mov [rax], ebx
  } else if (!std::strcmp(kind, "ram_lock_add")) {
    g.ctx.gpr[0] = 0x60'0010;
    code({0xf0, 0x01, 0x18});  // lock add [rax], ebx
  } else if (!std::strcmp(kind, "out_dx")) {
    g.ctx.gpr[2] = 0x3f8;
    code({0xee});  // out dx, al
  } else if (!std::strcmp(kind, "rep_movsb")) {
    g.ctx.gpr[6] = 0x60'0000;  // rsi
    g.ctx.gpr[7] = 0x60'0800;  // rdi
    g.ctx.gpr[1] = 64;         // rcx
    code({0xf3, 0xa4});  // rep movsb
  } else if (!std::strcmp(kind, "mov_cr3")) {
    g.ctx.gpr[0] = test::guest::pml4;
    code({0x0f, 0x22, 0xd8});  // mov cr3, rax
  } else if (!std::strcmp(kind, "lgdt")) {
    g.ctx.gpr[0] = 0x60'0100;
    code({0x0f, 0x01, 0x10});  // lgdt [rax]
  } else {
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: emulate_count <mmio_mov|ram_lock_add|out_dx|rep_movsb|mov_cr3|lgdt> <runs>\n");
    return 2;
  }
  test::guest g;
  if (!setup(g, argv[1])) {
    std::fprintf(stderr, "emulate_count: unknown kind %s\n", argv[1]);
    return 2;
  }
  sink = run_kind(g, std::strtoul(argv[2], nullptr, 10));
  return 0;
}
