// SPDX-License-Identifier: MIT
// vmx/ benchmarks, each side by side with its baseline in this binary:
//  BM_vmcs_read/cached_hit      vs BM_vmcs_read/soft_backend
//  BM_read_cr_bits/host_owned   vs BM_read_cr_bits/guest_owned
//  BM_exit_dispatch/switch      vs BM_exit_dispatch/function_pointer_table
//  BM_cpuid_exit/...: cpuid_exit_bench.cpp
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <random>

#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/guest_cr.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;

namespace {

// ---- VMCS reads -------------------------------------------------------------------------
// One exit handler's worth of reads: the exit information and the guest state a typical
// handler looks at. Both VMCS objects escape and memory is clobbered on every iteration, so
// the compiler can neither fold the reads to constants nor hoist them out of the loop (it
// did both when the objects stayed local: the two loops compiled to the same four stores).
template <class B>
std::uint64_t read_exit_fields(B& b) {
  std::uint64_t sum = vmx::vmread(b, vmx::fields::exit_reason).value();
  sum += vmx::vmread(b, vmx::fields::exit_qualification).value();
  sum += vmx::vmread(b, vmx::fields::vm_exit_instruction_length).value();
  sum += vmx::vmread(b, vmx::fields::guest_rip).value();
  sum += vmx::vmread(b, vmx::fields::guest_rsp).value();
  sum += vmx::vmread(b, vmx::fields::guest_rflags).value();
  sum += vmx::vmread(b, vmx::fields::guest_cr0).value();
  sum += vmx::vmread(b, vmx::fields::guest_physical_address).value();
  return sum;
}

void fill_exit_fields(vmx::soft_vmcs& soft) {
  soft.store(vmx::fields::exit_reason, std::uint32_t{48});
  soft.store(vmx::fields::exit_qualification, vmx::natural_t{0x181});
  soft.store(vmx::fields::vm_exit_instruction_length, std::uint32_t{3});
  soft.store(vmx::fields::guest_rip, vmx::natural_t{0xffff'ffff'8100'0000});
  soft.store(vmx::fields::guest_rsp, vmx::natural_t{0xffff'c900'0001'3f58});
  soft.store(vmx::fields::guest_rflags, vmx::natural_t{0x246});
  soft.store(vmx::fields::guest_cr0, vmx::natural_t{0x8005'0033});
  soft.store(vmx::fields::guest_physical_address, std::uint64_t{0xfee0'0300});
}

void BM_vmcs_read_cached_hit(benchmark::State& state) {
  vmx::soft_vmcs soft;
  fill_exit_fields(soft);
  vmx::cached_vmcs cache(soft);
  const auto expected = read_exit_fields(cache);  // every field now available
  benchmark::DoNotOptimize(&soft);
  benchmark::DoNotOptimize(&cache);
  for (auto _ : state) {
    benchmark::ClobberMemory();
    auto r = read_exit_fields(cache);
    benchmark::DoNotOptimize(r);
  }
  // Every timed read was a hit: the backend saw only the first pass.
  if (soft.reads() != 8 || read_exit_fields(soft) != expected) state.SkipWithError("a timed read missed the cache");
}
BENCHMARK(BM_vmcs_read_cached_hit)->Name("BM_vmcs_read/cached_hit");

void BM_vmcs_read_soft_backend(benchmark::State& state) {
  vmx::soft_vmcs soft;
  fill_exit_fields(soft);
  benchmark::DoNotOptimize(&soft);
  for (auto _ : state) {
    benchmark::ClobberMemory();
    auto r = read_exit_fields(soft);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_vmcs_read_soft_backend)->Name("BM_vmcs_read/soft_backend");

// ---- read_cr0_bits after an exit ------------------------------------------------------------
template <bool GuestOwnedBit>
void BM_read_cr_bits(benchmark::State& state) {
  vmx::soft_vmcs soft;
  soft.store(vmx::fields::guest_cr0, std::uint64_t{0x8000'0033});
  vmx::cached_vmcs cache(soft);
  vmx::guest_cr cr(x86::cr0{0x8001'0033}, x86::cr4{0x20}, vmx::make_guest_owned({true, x86::cr4::defined}));
  const x86::cr0 mask = GuestOwnedBit ? x86::cr0::wp : x86::cr0::pg;
  for (auto _ : state) {
    // Every iteration models one exit: the cache and the CR state are stale again.
    cache.on_vm_exit();
    cr.on_vm_exit();
    auto r = cr.read_cr0_bits(cache, mask);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.counters["vmreads_per_iter"] =
      static_cast<double>(soft.reads()) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_read_cr_bits<false>)->Name("BM_read_cr_bits/host_owned");
BENCHMARK(BM_read_cr_bits<true>)->Name("BM_read_cr_bits/guest_owned");

// ---- exit dispatch ----------------------------------------------------------------------
struct exit_ctx {
  std::uint64_t acc = 0;
};

template <unsigned N>
int handle(exit_ctx& c) {
  c.acc += N * 2654435761u;
  return static_cast<int>(N);
}

struct switch_handler {
  using result_type = int;
  exit_ctx* c;
  int operator()(vmx::cr_access_exit e, vmx::soft_vmcs&) {
    c->acc += e.qualification.raw();
    return 28;
  }
  template <vmx::exit_reason R>
  int operator()(vmx::exit_tag<R>, vmx::soft_vmcs&) {
    return handle<static_cast<unsigned>(R)>(*c);
  }
  int unhandled(vmx::exit_reason_field r, vmx::soft_vmcs&) { return -static_cast<int>(r.basic_raw()); }
};

// The baseline: a table of function pointers indexed by the basic exit reason.
using handler_fn = int (*)(exit_ctx&, vmx::soft_vmcs&);
template <unsigned N>
int table_entry(exit_ctx& c, vmx::soft_vmcs& v) {
  if constexpr (N == 28) {
    c.acc += vmx::vmread(v, vmx::fields::exit_qualification).value();
    return 28;
  } else if constexpr (vmx::is_defined_exit_reason(N)) {
    return handle<N>(c);
  } else {
    return -static_cast<int>(N);
  }
}
template <std::size_t... I>
constexpr std::array<handler_fn, sizeof...(I)> make_table(std::index_sequence<I...>) {
  return {&table_entry<I>...};
}
constexpr auto fn_table = make_table(std::make_index_sequence<vmx::exit_reason_limit>{});

// A fixed-seed mix of exit reasons: half CR accesses, the rest spread over every reason.
std::array<std::uint32_t, 4096> make_mix() {
  std::array<std::uint32_t, 4096> m{};
  std::mt19937 rng(42);
  for (auto& r : m) {
    r = rng() % 2 ? 28u : static_cast<std::uint32_t>(rng() % vmx::exit_reason_limit);
    if (!vmx::is_defined_exit_reason(r)) r = 10;
  }
  return m;
}
const auto mix = make_mix();

// Both dispatchers must compute the same thing over the whole mix before either is timed.
bool dispatchers_agree() {
  vmx::soft_vmcs v;
  v.store(vmx::fields::exit_qualification, std::uint64_t{0x304});
  exit_ctx a, b;
  switch_handler h{&a};
  for (std::uint32_t r : mix) {
    const int x = vmx::dispatch_exit(h, v, vmx::exit_reason_field{r});
    const int y = fn_table[r](b, v);
    if (x != y) return false;
  }
  return a.acc == b.acc;
}

void BM_exit_dispatch_switch(benchmark::State& state) {
  if (!dispatchers_agree()) {
    state.SkipWithError("switch and function-pointer dispatch disagree");
    return;
  }
  vmx::soft_vmcs v;
  v.store(vmx::fields::exit_qualification, std::uint64_t{0x304});
  exit_ctx c;
  switch_handler h{&c};
  std::size_t i = 0;
  for (auto _ : state) {
    const int r = vmx::dispatch_exit(h, v, vmx::exit_reason_field{mix[i++ & (mix.size() - 1)]});
    benchmark::DoNotOptimize(r);
  }
  benchmark::DoNotOptimize(c.acc);
}
BENCHMARK(BM_exit_dispatch_switch)->Name("BM_exit_dispatch/switch");

void BM_exit_dispatch_function_pointer_table(benchmark::State& state) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::exit_qualification, std::uint64_t{0x304});
  exit_ctx c;
  std::size_t i = 0;
  for (auto _ : state) {
    const vmx::exit_reason_field f{mix[i++ & (mix.size() - 1)]};
    const unsigned n = f.basic_raw();
    const int r = n < fn_table.size() ? fn_table[n](c, v) : -1;
    benchmark::DoNotOptimize(r);
  }
  benchmark::DoNotOptimize(c.acc);
}
BENCHMARK(BM_exit_dispatch_function_pointer_table)->Name("BM_exit_dispatch/function_pointer_table");

}  // namespace

BENCHMARK_MAIN();
