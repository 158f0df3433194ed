// Page-walk benchmarks: BM_walk/<mode> for every walker beside BM_pointer_chase/<n>, n
// dependent loads over the same page-table memory (the floor a walk cannot beat).
// Tables are in cache and A/D flags are already set (the steady state: no writes).
// Each iteration's address depends on the previous result (through a zero the compiler
// cannot see), so both sides measure latency, not overlapped throughput.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;
using std::uint64_t;

volatile uint64_t zero_source = 0;

struct arena {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x80000);
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put32(uint64_t a, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

constexpr uint64_t P = 1, RW = 2, A = 0x20, D = 0x40;
constexpr uint64_t ad = P | RW | A | D;

// VA with index 1 at every 9-bit level (and LA57 level 5 index 1).
constexpr uint64_t va_ia32e = (uint64_t{1} << 48) | (uint64_t{1} << 39) | (uint64_t{1} << 30) | (uint64_t{1} << 21) |
                              (uint64_t{1} << 12) | 0x123;

// Tables at 0x1000, 0x2000, ... each pointing at the next with index 1.
void chain(arena& m, uint64_t first, unsigned levels, uint64_t leaf) {
  for (unsigned i = 0; i < levels; ++i) {
    const uint64_t table = first + 0x1000 * i;
    const uint64_t next = i + 1 == levels ? leaf : table + 0x1000;
    m.put64(table + 8, next | ad);
  }
}

template <class Walker>
void run_walk(benchmark::State& state, arena& m, const Walker& walker, const paging::mmu_context& context,
              uint64_t va) {
  // The walker and the context are per-vCPU state a caller keeps at hand: local copies.
  const Walker w = walker;
  const paging::mmu_context mmu = context;
  paging::flat_memory mem(m.bytes.data(), m.bytes.size());
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  req.linear = x86::gva{va};
  uint64_t acc = 0;
  for (auto _ : state) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = w.walk(mem, mmu, req);
    acc = r ? r->address.value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}

void walk_32bit(benchmark::State& state) {
  arena m;
  m.put32(0x1000 + 4, 0x2000 | 0x63);
  m.put32(0x2000 + 4, 0x9000 | 0x63);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, {}, {}, x86::gpa{0x1000});
  run_walk(state, m, paging::walker_32bit(mmu, {}), mmu, (1u << 22) | (1u << 12) | 0x123);
}
void walk_pae(benchmark::State& state) {
  arena m;
  m.put64(0x1000 + 8, 0x2000 | P);
  m.put64(0x2000 + 8, 0x3000 | ad);
  m.put64(0x3000 + 8, 0x9000 | ad);
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, paging::flat_view(m.bytes.data(), m.bytes.size()), 52);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae, {}, x86::gpa{0x1000});
  run_walk(state, m, paging::walker_pae(mmu, {}, *pd), mmu, (1u << 30) | (1u << 21) | (1u << 12) | 0x123);
}
void walk_4level(benchmark::State& state) {
  arena m;
  chain(m, 0x1000, 4, 0x9000);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp, x86::cr4::pae,
                                             x86::efer::lme | x86::efer::lma, x86::gpa{0x1000});
  run_walk(state, m, paging::walker_4level(mmu, {}), mmu, va_ia32e & ((uint64_t{1} << 48) - 1));
}
void walk_5level(benchmark::State& state) {
  arena m;
  chain(m, 0x1000, 5, 0x9000);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp,
                                             x86::cr4::pae | x86::cr4::la57, x86::efer::lme | x86::efer::lma,
                                             x86::gpa{0x1000});
  run_walk(state, m, paging::walker_5level(mmu, {}), mmu, va_ia32e);
}
void walk_ept4(benchmark::State& state) {
  arena m;
  for (unsigned i = 0; i < 4; ++i) m.put64(0x10000 + 0x1000 * i + 8, i == 3 ? (0x9000 | 7 | (6u << 3) | 0x300) : ((0x11000 + 0x1000 * i) | 7 | 0x100));
  const auto w = *paging::ept_walker::make(paging::make_ept_pointer(x86::gpa{0x10000}, 4, true), {});
  paging::flat_memory mem(m.bytes.data(), m.bytes.size());
  const uint64_t zero = zero_source;
  const uint64_t gpa = va_ia32e & ((uint64_t{1} << 48) - 1);
  paging::ept_request req{};
  req.access = paging::ept_access::read;
  uint64_t acc = 0;
  for (auto _ : state) {
    req.address = x86::gpa{gpa + (acc & zero)};
    const auto r = w.translate(mem, req);
    acc = r ? r->address.value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}
void walk_nested(benchmark::State& state) {
  arena m;
  // EPT: identity map of gpa 0..2 MiB with 4 KiB pages: PML4 0x40000 -> PDPT 0x41000 -> PD
  // 0x42000 -> PT 0x43000 (index 0 at every level above the PT).
  const uint64_t e = 7 | (6u << 3) | 0x300, upper = 7 | 0x100;  // leaf: WB, A, D; non-leaf: A
  m.put64(0x40000, 0x41000 | upper);
  m.put64(0x41000, 0x42000 | upper);
  m.put64(0x42000, 0x43000 | upper);
  for (uint64_t p = 0; p < 0x40; ++p) m.put64(0x43000 + 8 * p, (p << 12) | e);
  // Guest 4-level tables at gpa 0x1000.. (mapped by the identity EPT), leaf at 0x9000.
  chain(m, 0x1000, 4, 0x9000);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp, x86::cr4::pae,
                                             x86::efer::lme | x86::efer::lma, x86::gpa{0x1000});
  const auto ept = *paging::ept_walker::make(paging::make_ept_pointer(x86::gpa{0x40000}, 4, true), {});
  const paging::nested_walker<paging::format::ia32e<4>> n(paging::walker_4level(mmu, {}), ept);
  paging::flat_memory mem(m.bytes.data(), m.bytes.size());
  const uint64_t zero = zero_source;
  const uint64_t va = va_ia32e & ((uint64_t{1} << 48) - 1);
  paging::walk_request req{};
  uint64_t acc = 0;
  for (auto _ : state) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = n.walk(mem, mmu, req);
    acc = r ? r->l1_address().value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}

// n dependent loads over page-table memory: the entry at each step gives the next table,
// plus a fixed index offset (what a walk must do at the least). For n = 24 the chain runs
// through the nested benchmark's tables (6 rounds of 4).
void pointer_chase(benchmark::State& state) {
  const unsigned n = static_cast<unsigned>(state.range(0));
  arena m;
  chain(m, 0x1000, 5, 0x1000);  // a cycle of 5 tables, entry 1 of each points to the next
  const std::uint8_t* base = m.bytes.data();
  const uint64_t zero = zero_source;
  uint64_t acc = 0;
  for (auto _ : state) {
    uint64_t table = 0x1000 + (acc & zero);
    for (unsigned i = 0; i < n; ++i) {
      uint64_t v;
      __builtin_memcpy(&v, base + (table & 0x000f'ffff'ffff'f000u) + 8, 8);
      table = v;
    }
    acc = table;
    benchmark::DoNotOptimize(acc);
  }
}

// Registered by name so that the rows read BM_walk/<mode> and BM_pointer_chase/<n>.
const bool registered = [] {
  benchmark::RegisterBenchmark("BM_walk/32-bit", walk_32bit);
  benchmark::RegisterBenchmark("BM_walk/PAE", walk_pae);
  benchmark::RegisterBenchmark("BM_walk/4-level", walk_4level);
  benchmark::RegisterBenchmark("BM_walk/5-level", walk_5level);
  benchmark::RegisterBenchmark("BM_walk/EPT-4-level", walk_ept4);
  benchmark::RegisterBenchmark("BM_walk/nested-4x4", walk_nested);
  for (int n : {2, 3, 4, 5, 24}) benchmark::RegisterBenchmark("BM_pointer_chase", pointer_chase)->Arg(n);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
