// BM_cpuid_policy_build: the whole composition (host table -> guest policy).
// BM_cpuid_lookup: answering a guest CPUID exit (policy::answer, binary search + dynamic
// bits) against a naive linear scan of the same table (which does less: no dynamic bits,
// no out-of-range semantics), and against executing CPUID on the host.
#include <benchmark/benchmark.h>

#include <cpuid/host.hpp>
#include <cpuid/kvm.hpp>
#include <cpuid/policy.hpp>

#include <array>
#include <cstdint>

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;

namespace {

cpuid::table<> host_table() {
  cpuid::table<> t;
  if (!cpuid::read_all(cpuid::host_source{}, t)) std::abort();
  return t;
}

cpuid::hypervisor_caps caps() {
  cpuid::hypervisor_caps hv;
  hv.passthrough = cpuid::feature_set::all();
  hv.emulated = cpuid::feature_set{feat::x2apic, feat::tsc_deadline, feat::arat, cpuid::kvm::features::pv_send_ipi,
                                   cpuid::kvm::features::clocksource2, cpuid::kvm::features::pv_eoi};
  return hv;
}

cpuid::policy_config config() {
  cpuid::policy_config c;
  c.topo = {2, 4};
  c.hints.set(cpuid::kvm::hints::hvkit_apic_accelerated_ipi);
  return c;
}

struct query {
  std::uint32_t leaf, subleaf;
};
// A guest's CPUID mix: boot-time enumeration plus the leaves kernels re-read at run time.
constexpr std::array<query, 16> mix{{{0x0, 0},
                                     {0x1, 0},
                                     {0x7, 0},
                                     {0x7, 1},
                                     {0xb, 0},
                                     {0xb, 1},
                                     {0xd, 0},
                                     {0xd, 1},
                                     {0xd, 2},
                                     {0x40000000, 0},
                                     {0x40000001, 0},
                                     {0x80000000, 0},
                                     {0x80000001, 0},
                                     {0x80000008, 0},
                                     {0x6, 0},
                                     {0x80000007, 0}}};

cpuid::regs linear_scan(const cpuid::policy::table_type& t, std::uint32_t leaf, std::uint32_t subleaf) {
  for (const cpuid::entry& e : t)
    if (e.leaf == leaf && (!cpuid::is_indexed(leaf) || e.subleaf == subleaf)) return e.value;
  return {};
}

void BM_cpuid_policy_build(benchmark::State& state) {
  const auto host = host_table();
  const auto hv = caps();
  const auto cfg = config();
  for (auto _ : state) {
    auto p = cpuid::build_policy(host, hv, cfg);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_cpuid_policy_build)->Name("BM_cpuid_policy_build/hvkit");

// Baseline for the build: reading the host's CPUID leaves into a table (what any
// hypervisor does once before building a policy; under a hypervisor each CPUID exits).
void BM_cpuid_host_read(benchmark::State& state) {
  for (auto _ : state) {
    cpuid::table<> t;
    auto r = cpuid::read_all(cpuid::host_source{}, t);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_cpuid_host_read)->Name("BM_cpuid_policy_build/host_read");

void BM_cpuid_lookup_hvkit(benchmark::State& state) {
  const auto p = cpuid::build_policy(host_table(), caps(), config()).value();
  cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pae, x86::xfeatures{0x7}, {}, 3};
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = mix[i++ & (mix.size() - 1)];
    benchmark::DoNotOptimize(p.answer(q.leaf, q.subleaf, v));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_hvkit)->Name("BM_cpuid_lookup/hvkit");

void BM_cpuid_lookup_linear(benchmark::State& state) {
  const auto p = cpuid::build_policy(host_table(), caps(), config()).value();
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = mix[i++ & (mix.size() - 1)];
    benchmark::DoNotOptimize(linear_scan(p.leaves(), q.leaf, q.subleaf));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_linear)->Name("BM_cpuid_lookup/linear_scan");

void BM_cpuid_lookup_native(benchmark::State& state) {
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = mix[i++ & (mix.size() - 1)];
    benchmark::DoNotOptimize(cpuid::execute(q.leaf, q.subleaf));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_native)->Name("BM_cpuid_lookup/native_cpuid");

}  // namespace

BENCHMARK_MAIN();
