// SPDX-License-Identifier: MIT
// Permission-map lookups and the IBPB decision, each beside a hand-written minimal version in
// this binary (same maps, same shuffled inputs; answers checked equal before timing):
//  BM_msr_bitmap/{hvkit,minimal}   vmx::msr_bitmap::exits (SDM 25.6.9, 26.1.3)
//  BM_msrpm/{hvkit,minimal}        svm::msr_permission_map::intercepts (APM 15.11)
//  BM_io_bitmap/{hvkit,minimal}    vmx::io_bitmaps::exits (SDM 25.6.4)
//  BM_iopm/{hvkit,minimal}         svm::io_permission_map::intercepts (APM 15.10.1)
//  BM_ibpb_switch/{hvkit,minimal}  x86::ibpb_tracker::on_switch, skip_same_guest policy
//  BM_ibpb_switch/hvkit_static     x86::static_ibpb_tracker<skip_same_guest>::on_switch
// The minimal lookups are what a hypervisor author would write for one map layout: a range
// check, one byte (or two adjacent bytes for a multi-byte port access) and a shift. A lookup
// here is a hypervisor's software question (e.g. "does L1 want this exit?" when reflecting an
// L2 exit), not the processor's.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "iterations.hpp"

#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/vmx/io_bitmap.hpp>
#include <hvkit/vmx/msr_bitmap.hpp>
#include <hvkit/x86/ibpb.hpp>

namespace vmx = hvkit::vmx;
namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;

namespace {

constexpr std::size_t n_inputs = 4096;

struct msr_query {
  std::uint32_t msr;
  x86::msr_access access;
};

// MSRs a guest kernel touches (low, 0xC000xxxx, 0xC001xxxx on AMD) and a few outside every range.
std::vector<msr_query> make_msrs() {
  static constexpr std::uint32_t msrs[] = {0x10,       0x1b,       0x3a,       0x48,       0x8b,       0xe7,
                                           0xe8,       0x174,      0x175,      0x176,      0x1a0,      0x277,
                                           0x6e0,      0x80b,      0x830,      0xc0000080, 0xc0000081, 0xc0000082,
                                           0xc0000100, 0xc0000101, 0xc0000102, 0xc0000103, 0xc0010015, 0xc0010117,
                                           0x40000000, 0x4b564d00, 0x2000,     0xc0002000};
  std::mt19937 rng(11);
  std::vector<msr_query> v;
  for (std::size_t i = 0; i < n_inputs; ++i)
    v.push_back({msrs[rng() % std::size(msrs)], (rng() & 1) ? x86::msr_access::write : x86::msr_access::read});
  return v;
}

struct port_query {
  std::uint16_t port;
  unsigned size;
};

std::vector<port_query> make_ports() {
  static constexpr std::uint16_t ports[] = {0x20,  0x21,  0x40,  0x43,  0x60,  0x64,   0x70,   0x71,   0x80,
                                            0xcf8, 0xcfc, 0xcfe, 0x3f8, 0x3fd, 0x7ffe, 0x7fff, 0x8000, 0xfffe,
                                            0xffff, 0xe9, 0xf4,  0x510, 0x511, 0xb000, 0xb004};
  static constexpr unsigned sizes[] = {1, 2, 4};
  std::mt19937 rng(12);
  std::vector<port_query> v;
  for (std::size_t i = 0; i < n_inputs; ++i) v.push_back({ports[rng() % std::size(ports)], sizes[rng() % 3]});
  return v;
}

// Every fourth MSR/port of the lists intercepted, in random patterns of bits around them too.
template <class Map, class Set>
void scatter(Map& m, Set set) {
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) set(m, rng());
}

vmx::msr_bitmap* vmx_msr_map() {
  static vmx::msr_bitmap m = [] {
    auto b = vmx::msr_bitmap::none_exit();
    scatter(b, [](vmx::msr_bitmap& x, std::uint32_t r) {
      const std::uint32_t msr = (r & 1 ? 0xc0000000u : 0u) | ((r >> 1) & 0x1fff);
      (void)x.set_intercept(msr, (r >> 20) & 1 ? x86::msr_access::write : x86::msr_access::read, true);
    });
    return b;
  }();
  return &m;
}
svm::msr_permission_map* svm_msr_map() {
  static svm::msr_permission_map m = [] {
    auto b = svm::msr_permission_map::intercept_none();
    scatter(b, [](svm::msr_permission_map& x, std::uint32_t r) {
      static constexpr std::uint32_t bases[] = {0, 0xc0000000u, 0xc0010000u, 0};
      const std::uint32_t msr = bases[r & 3] | ((r >> 2) & 0x1fff);
      (void)x.set_intercept(msr, (r >> 20) & 1 ? x86::msr_access::write : x86::msr_access::read, true);
    });
    return b;
  }();
  return &m;
}
vmx::io_bitmaps* vmx_io_map() {
  static vmx::io_bitmaps m = [] {
    auto b = vmx::io_bitmaps::none_exit();
    scatter(b, [](vmx::io_bitmaps& x, std::uint32_t r) { x.set_intercept(static_cast<std::uint16_t>(r), true); });
    for (std::uint16_t p : {0x3f8, 0xcf8, 0x8000, 0xe9}) b.set_intercept(p, true);
    return b;
  }();
  return &m;
}
svm::io_permission_map* svm_io_map() {
  static svm::io_permission_map m = [] {
    auto b = svm::io_permission_map::intercept_none();
    scatter(b, [](svm::io_permission_map& x, std::uint32_t r) { x.set_intercept(static_cast<std::uint16_t>(r), true); });
    for (std::uint16_t p : {0x3f8, 0xcf8, 0x8000, 0xe9}) b.set_intercept(p, true);
    return b;
  }();
  return &m;
}

// ---- the minimal lookups ----------------------------------------------------------------

[[gnu::always_inline]] inline bool msr_bitmap_minimal(const std::uint8_t* bm, std::uint32_t msr, x86::msr_access a) {
  std::uint32_t off;
  if (msr <= 0x1fffu) off = 0;
  else if (msr - 0xc0000000u <= 0x1fffu) off = 1024;
  else return true;
  off += a == x86::msr_access::write ? 2048 : 0;
  const std::uint32_t i = msr & 0x1fffu;
  return (bm[off + i / 8] >> (i % 8)) & 1u;
}

[[gnu::always_inline]] inline bool msrpm_minimal(const std::uint8_t* pm, std::uint32_t msr, x86::msr_access a) {
  std::uint32_t off;
  if (msr <= 0x1fffu) off = 0;
  else if (msr - 0xc0000000u <= 0x1fffu) off = 0x800;
  else if (msr - 0xc0010000u <= 0x1fffu) off = 0x1000;
  else return true;
  const std::uint32_t bit = (msr & 0x1fffu) * 2 + (a == x86::msr_access::write ? 1 : 0);
  return (pm[off + bit / 8] >> (bit % 8)) & 1u;
}

// Bits port .. port+size-1 lie in at most two adjacent bytes; bitmap B's byte 0 follows
// bitmap A's last byte (ports 7FFFh and 8000h).
[[gnu::always_inline]] inline bool io_bitmap_minimal(const std::uint8_t* a, const std::uint8_t* b, std::uint16_t port,
                                                     unsigned size) {
  const std::uint32_t last = std::uint32_t{port} + size - 1;
  if (last > 0xffffu) return true;
  const std::uint8_t lo = (port < 0x8000 ? a : b)[(port & 0x7fffu) / 8];
  const std::uint8_t hi = (last < 0x8000 ? a : b)[(last & 0x7fffu) / 8];
  const std::uint32_t two = lo | (std::uint32_t{hi} << 8);
  return ((two >> (port % 8)) & ((1u << size) - 1)) != 0;
}

[[gnu::always_inline]] inline bool iopm_minimal(const std::uint8_t* pm, std::uint16_t port, unsigned size) {
  const std::uint32_t two = pm[port / 8] | (std::uint32_t{pm[port / 8 + 1]} << 8);
  return ((two >> (port % 8)) & ((1u << size) - 1)) != 0;
}

// ---- benchmarks ----------------------------------------------------------------------------

template <class F>
void run_msr(benchmark::State& state, F lookup) {
  const auto q = make_msrs();
  std::size_t i = 0;
  unsigned hits = 0;
  for (auto _ : state) {
    hits += lookup(q[i].msr, q[i].access);
    i = (i + 1) % n_inputs;
  }
  benchmark::DoNotOptimize(hits);
}
template <class F>
void run_port(benchmark::State& state, F lookup) {
  const auto q = make_ports();
  std::size_t i = 0;
  unsigned hits = 0;
  for (auto _ : state) {
    hits += lookup(q[i].port, q[i].size);
    i = (i + 1) % n_inputs;
  }
  benchmark::DoNotOptimize(hits);
}

void BM_msr_bitmap_hvkit(benchmark::State& s) {
  const auto* m = vmx_msr_map();
  run_msr(s, [m](std::uint32_t msr, x86::msr_access a) { return m->exits(msr, a); });
}
void BM_msr_bitmap_minimal(benchmark::State& s) {
  const auto* m = vmx_msr_map()->bytes().data();
  run_msr(s, [m](std::uint32_t msr, x86::msr_access a) { return msr_bitmap_minimal(m, msr, a); });
}
void BM_msrpm_hvkit(benchmark::State& s) {
  const auto* m = svm_msr_map();
  run_msr(s, [m](std::uint32_t msr, x86::msr_access a) { return m->intercepts(msr, a); });
}
void BM_msrpm_minimal(benchmark::State& s) {
  const auto* m = svm_msr_map()->bytes().data();
  run_msr(s, [m](std::uint32_t msr, x86::msr_access a) { return msrpm_minimal(m, msr, a); });
}
void BM_io_bitmap_hvkit(benchmark::State& s) {
  const auto* m = vmx_io_map();
  run_port(s, [m](std::uint16_t p, unsigned n) { return m->exits(p, n); });
}
void BM_io_bitmap_minimal(benchmark::State& s) {
  const auto* a = vmx_io_map()->a().data();
  const auto* b = vmx_io_map()->b().data();
  run_port(s, [a, b](std::uint16_t p, unsigned n) { return io_bitmap_minimal(a, b, p, n); });
}
void BM_iopm_hvkit(benchmark::State& s) {
  const auto* m = svm_io_map();
  run_port(s, [m](std::uint16_t p, unsigned n) { return m->intercepts(p, n); });
}
void BM_iopm_minimal(benchmark::State& s) {
  const auto* m = svm_io_map()->bytes().data();
  run_port(s, [m](std::uint16_t p, unsigned n) { return iopm_minimal(m, p, n); });
}

// ---- IBPB decision ---------------------------------------------------------------------------
// A CPU switching between vmcs01/vmcs02 of two vCPUs of VM 1 and the VMCS of VM 2 (5
// control blocks), in a shuffled order; the barrier is counted, not issued (the decision is
// what is measured: an IBPB itself costs thousands of cycles on hardware).

struct counting_barrier {
  unsigned* count;
  void operator()() const noexcept { ++*count; }
};

std::vector<x86::ibpb_domain> make_switches() {
  static constexpr x86::ibpb_domain blocks[] = {
      {0x1000, 1, 0}, {0x2000, 1, 0}, {0x3000, 1, 1}, {0x4000, 1, 1}, {0x5000, 2, 0}};
  std::mt19937 rng(14);
  std::vector<x86::ibpb_domain> v;
  // Mostly the nested pair of one vCPU (what an L2 exit reflected to L1 does), now and then another.
  std::size_t cur = 0;
  for (std::size_t i = 0; i < n_inputs; ++i) {
    cur = rng() % 8 == 0 ? rng() % 5 : (cur ^ 1) % 5;
    v.push_back(blocks[cur]);
  }
  return v;
}

// skip_same_guest written out: barrier when another VM's control block comes in.
struct minimal_tracker {
  unsigned* count;
  std::uint32_t last_vm = 0;
  bool loaded = false;
  [[gnu::always_inline]] void on_switch(const x86::ibpb_domain& next) {
    if (!loaded || last_vm != next.vm) ++*count;
    last_vm = next.vm;
    loaded = true;
  }
};

void BM_ibpb_switch_hvkit(benchmark::State& state) {
  const auto sw = make_switches();
  unsigned count = 0;
  x86::ibpb_tracker<counting_barrier> t(x86::ibpb_policy::skip_same_guest, counting_barrier{&count});
  benchmark::DoNotOptimize(&t);
  std::size_t i = 0;
  for (auto _ : state) {
    t.on_switch(sw[i]);
    i = (i + 1) % n_inputs;
  }
  benchmark::DoNotOptimize(count);
}
// The same policy fixed at compile time (x86::static_ibpb_tracker): the ratio row.
void BM_ibpb_switch_hvkit_static(benchmark::State& state) {
  const auto sw = make_switches();
  unsigned count = 0;
  x86::static_ibpb_tracker<x86::ibpb_policy::skip_same_guest, counting_barrier> t(counting_barrier{&count});
  benchmark::DoNotOptimize(&t);
  std::size_t i = 0;
  for (auto _ : state) {
    t.on_switch(sw[i]);
    i = (i + 1) % n_inputs;
  }
  benchmark::DoNotOptimize(count);
}
void BM_ibpb_switch_minimal(benchmark::State& state) {
  const auto sw = make_switches();
  unsigned count = 0;
  minimal_tracker t{&count};
  benchmark::DoNotOptimize(&t);
  std::size_t i = 0;
  for (auto _ : state) {
    t.on_switch(sw[i]);
    i = (i + 1) % n_inputs;
  }
  benchmark::DoNotOptimize(count);
}

bool same_answers() {
  for (const auto& q : make_msrs()) {
    if (vmx_msr_map()->exits(q.msr, q.access) != msr_bitmap_minimal(vmx_msr_map()->bytes().data(), q.msr, q.access))
      return false;
    if (svm_msr_map()->intercepts(q.msr, q.access) != msrpm_minimal(svm_msr_map()->bytes().data(), q.msr, q.access))
      return false;
  }
  for (const auto& q : make_ports()) {
    if (vmx_io_map()->exits(q.port, q.size) !=
        io_bitmap_minimal(vmx_io_map()->a().data(), vmx_io_map()->b().data(), q.port, q.size))
      return false;
    if (svm_io_map()->intercepts(q.port, q.size) != iopm_minimal(svm_io_map()->bytes().data(), q.port, q.size))
      return false;
  }
  unsigned a = 0, b = 0;
  x86::ibpb_tracker<counting_barrier> t(x86::ibpb_policy::skip_same_guest, counting_barrier{&a});
  minimal_tracker m{&b};
  unsigned c = 0;
  x86::static_ibpb_tracker<x86::ibpb_policy::skip_same_guest, counting_barrier> s(counting_barrier{&c});
  for (const auto& d : make_switches()) {
    t.on_switch(d);
    m.on_switch(d);
    s.on_switch(d);
    if (a != b || c != b) return false;
  }
  return true;
}

const bool registered = [] {
  if (!same_answers()) {
    std::fprintf(stderr, "lookup_bench: hvkit and the minimal versions disagree\n");
    std::abort();
  }
  exit_paths::register_benchmark("BM_msr_bitmap/hvkit", BM_msr_bitmap_hvkit);
  exit_paths::register_benchmark("BM_msr_bitmap/minimal", BM_msr_bitmap_minimal);
  exit_paths::register_benchmark("BM_msrpm/hvkit", BM_msrpm_hvkit);
  exit_paths::register_benchmark("BM_msrpm/minimal", BM_msrpm_minimal);
  exit_paths::register_benchmark("BM_io_bitmap/hvkit", BM_io_bitmap_hvkit);
  exit_paths::register_benchmark("BM_io_bitmap/minimal", BM_io_bitmap_minimal);
  exit_paths::register_benchmark("BM_iopm/hvkit", BM_iopm_hvkit);
  exit_paths::register_benchmark("BM_iopm/minimal", BM_iopm_minimal);
  exit_paths::register_benchmark("BM_ibpb_switch/hvkit", BM_ibpb_switch_hvkit);
  exit_paths::register_benchmark("BM_ibpb_switch/hvkit_static", BM_ibpb_switch_hvkit_static);
  exit_paths::register_benchmark("BM_ibpb_switch/minimal", BM_ibpb_switch_minimal);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
