// SPDX-License-Identifier: MIT
// emulate/ benchmarks, side by side with Zydis in this binary:
//  BM_decode/hvkit               hvkit's decoder over a mix of MMIO moves and descriptor-table
//                                instructions (64-bit code, 4096 instructions, fixed seed)
//  BM_decode/zydis               ZydisDecoderDecodeFull over the same stream (operands too)
//  BM_decode/zydis_no_operands   ZydisDecoderDecodeInstruction (no operand decoding)
//  BM_emulate/mmio_mov           fetch (through the walker) + decode + emulate of
//                                `mov [rax], ebx` to an MMIO page with a device callback
//  BM_decode_one/zydis           Zydis decoding that one instruction (the scale for the row)
// Before timing, both decoders must agree on every length of the stream.
#include <Zydis/Zydis.h>
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <hvkit/emulate/decoder.hpp>
#include <hvkit/emulate/emulator.hpp>

#include "guest.hpp"

namespace {
using namespace hvkit;

struct stream {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint32_t> offsets;
};

const stream& mix() {
  static const stream s = [] {
    // MMIO moves (the common MMIO exits) and descriptor-table instructions.
    const std::vector<std::vector<std::uint8_t>> forms = {
        {0x89, 0x18},                          // mov [rax], ebx
        {0x8b, 0x48, 0x08},                    // mov ecx, [rax+8]
        {0x48, 0x89, 0x84, 0x24, 0x10, 0x01, 0x00, 0x00},  // mov [rsp+0x110], rax
        {0x44, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00},        // mov r8d, [rip+0x1000]
        {0xc7, 0x40, 0x30, 0x01, 0x00, 0x00, 0x00},        // mov dword [rax+0x30], 1
        {0x0f, 0xb6, 0x46, 0x04},              // movzx eax, byte [rsi+4]
        {0x66, 0x89, 0x07},                    // mov [rdi], ax
        {0x88, 0x0c, 0x8a},                    // mov [rdx+rcx*4], cl
        {0x0f, 0x00, 0xd8},                    // ltr ax
        {0x0f, 0x01, 0x10},                    // lgdt [rax]
        {0x0f, 0x01, 0x1b},                    // lidt [rbx]
        {0x0f, 0x01, 0x00},                    // sgdt [rax]
        {0x0f, 0x00, 0xd0},                    // lldt ax
        {0x0f, 0x22, 0xc0},                    // mov cr0, rax
    };
    stream out;
    std::mt19937 rng(42);
    for (int i = 0; i < 4096; ++i) {
      const auto& f = forms[rng() % forms.size()];
      out.offsets.push_back(static_cast<std::uint32_t>(out.bytes.size()));
      out.bytes.insert(out.bytes.end(), f.begin(), f.end());
    }
    for (int i = 0; i < 16; ++i) out.bytes.push_back(0x90);
    return out;
  }();
  return s;
}

ZydisDecoder make_zydis() {
  ZydisDecoder d;
  ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  return d;
}

// Both decoders agree on the stream before anything is timed.
void check_mix() {
  static const bool ok = [] {
    const auto& s = mix();
    const ZydisDecoder z = make_zydis();
    for (auto off : s.offsets) {
      const auto h = emulate::decode(s.bytes.data() + off, s.bytes.size() - off, emulate::code_size::c64);
      ZydisDecodedInstruction zi;
      ZydisDecodedOperand zo[ZYDIS_MAX_OPERAND_COUNT];
      if (!h || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&z, s.bytes.data() + off, s.bytes.size() - off, &zi, zo)) ||
          zi.length != h->length) {
        std::fprintf(stderr, "bench_emulate: decoders disagree at offset %u\n", off);
        std::abort();
      }
    }
    return true;
  }();
  static_cast<void>(ok);
}

void BM_decode_hvkit(benchmark::State& st) {
  check_mix();
  const auto& s = mix();
  for (auto _ : st) {
    unsigned total = 0;
    for (auto off : s.offsets) {
      const auto r = emulate::decode(s.bytes.data() + off, s.bytes.size() - off, emulate::code_size::c64);
      total += r.has_value() ? r->length + static_cast<unsigned>(r->mem.disp) : 0;
    }
    benchmark::DoNotOptimize(total);
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * s.offsets.size()));
}

void BM_decode_zydis(benchmark::State& st) {
  check_mix();
  const auto& s = mix();
  const ZydisDecoder z = make_zydis();
  for (auto _ : st) {
    unsigned total = 0;
    for (auto off : s.offsets) {
      ZydisDecodedInstruction zi;
      ZydisDecodedOperand zo[ZYDIS_MAX_OPERAND_COUNT];
      if (ZYAN_SUCCESS(ZydisDecoderDecodeFull(&z, s.bytes.data() + off, s.bytes.size() - off, &zi, zo)))
        total += zi.length + static_cast<unsigned>(zo[0].mem.disp.value);
    }
    benchmark::DoNotOptimize(total);
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * s.offsets.size()));
}

void BM_decode_zydis_no_operands(benchmark::State& st) {
  check_mix();
  const auto& s = mix();
  const ZydisDecoder z = make_zydis();
  for (auto _ : st) {
    unsigned total = 0;
    for (auto off : s.offsets) {
      ZydisDecoderContext ctx;
      ZydisDecodedInstruction zi;
      if (ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&z, &ctx, s.bytes.data() + off, s.bytes.size() - off, &zi)))
        total += zi.length;
    }
    benchmark::DoNotOptimize(total);
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * s.offsets.size()));
}

// A device that takes every MMIO write (no recording: the fixture's vector would grow).
struct sink_platform : emulate::null_platform {
  std::uint64_t last = 0;
  bool mmio_write(x86::gpa a, unsigned, std::uint64_t v) {
    last = a.value() ^ v;
    return true;
  }
};

void BM_emulate_mmio_mov(benchmark::State& st) {
  test::guest g;
  g.long_mode();
  g.map(0x70'0000, test::mmio_base);
  g.code_bytes({0x89, 0x18});  // mov [rax], ebx
  g.ctx.gpr[0] = 0x70'0030;
  g.ctx.gpr[3] = 0x1234;
  auto mmu = g.make_mmu(g.ctx.cr0);
  emulate::walker_translator tr{mmu, g.ram};
  sink_platform dev;
  const emulate::context start = g.ctx;
  {
    emulate::context c = start;
    const auto o = emulate::emulate(c, tr, g.ram, dev);
    if (!o.is_done() || dev.last != ((test::mmio_base + 0x30) ^ 0x1234)) {
      std::fprintf(stderr, "bench_emulate: mmio_mov did not reach the device\n");
      std::abort();
    }
  }
  for (auto _ : st) {
    emulate::context c = start;
    const auto o = emulate::emulate(c, tr, g.ram, dev);
    benchmark::DoNotOptimize(o.kind);
    benchmark::DoNotOptimize(c.rip);
  }
}

void BM_decode_one_zydis(benchmark::State& st) {
  const std::uint8_t insn[15] = {0x89, 0x18};
  const ZydisDecoder z = make_zydis();
  for (auto _ : st) {
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand zo[ZYDIS_MAX_OPERAND_COUNT];
    benchmark::DoNotOptimize(ZydisDecoderDecodeFull(&z, insn, sizeof insn, &zi, zo));
    benchmark::DoNotOptimize(zi.length);
  }
}

}  // namespace

BENCHMARK(BM_decode_hvkit)->Name("BM_decode/hvkit");
BENCHMARK(BM_decode_zydis)->Name("BM_decode/zydis");
BENCHMARK(BM_decode_zydis_no_operands)->Name("BM_decode/zydis_no_operands");
BENCHMARK(BM_emulate_mmio_mov)->Name("BM_emulate/mmio_mov");
BENCHMARK(BM_decode_one_zydis)->Name("BM_decode_one/zydis");
BENCHMARK_MAIN();
