// SPDX-License-Identifier: MIT
// BM_cpuid_policy_build: the whole composition (host table -> guest policy).
// BM_cpuid_lookup: answering a guest CPUID exit (policy::answer: direct index + dynamic
// rules) against a naive answer (linear scan of the same table + the same dynamic rules),
// the table's binary search alone, and CPUID executed on the host.
#include <benchmark/benchmark.h>

#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/kvm.hpp>
#include <hvkit/cpuid/policy.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

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

// 4096 queries drawn from the mix with a fixed seed: too long a sequence for a branch
// predictor to learn, the same for every variant.
const std::vector<query>& queries() {
  static const std::vector<query> q = [] {
    std::vector<query> v(4096);
    std::mt19937 g(42);
    for (auto& x : v) x = mix[g() % mix.size()];
    return v;
  }();
  return q;
}

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

cpuid::regs naive_answer(const cpuid::policy& p, std::uint32_t leaf, std::uint32_t subleaf, const cpuid::vcpu_state& v);

const cpuid::policy& guest() {
  static const cpuid::policy p = [] {
    auto b = cpuid::build_policy(host_table(), caps(), config());
    if (!b) std::abort();
    auto x = b.value();
    // Before timing: every variant gives the same answer for every query.
    const cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pae, x86::xfeatures{0x7}, {}, 3};
    for (const query& q : queries()) {
      const cpuid::regs* f = x.find(q.leaf, q.subleaf);
      const cpuid::regs* t = x.leaves().find(q.leaf, q.subleaf);
      if (f != t || t == nullptr || !(linear_scan(x.leaves(), q.leaf, q.subleaf) == *t)) std::abort();
      if (!(naive_answer(x, q.leaf, q.subleaf, v) == x.answer(q.leaf, q.subleaf, v))) std::abort();
    }
    return x;
  }();
  return p;
}

void BM_cpuid_lookup_hvkit(benchmark::State& state) {
  const auto& p = guest();
  const auto& qs = queries();
  cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pae, x86::xfeatures{0x7}, {}, 3};
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = qs[i++ & (qs.size() - 1)];
    benchmark::DoNotOptimize(p.answer(q.leaf, q.subleaf, v));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_hvkit)->Name("BM_cpuid_lookup/hvkit");

// The sorted table's binary search alone (what answer() did before the direct index).
void BM_cpuid_lookup_binary(benchmark::State& state) {
  const auto& p = guest();
  const auto& qs = queries();
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = qs[i++ & (qs.size() - 1)];
    benchmark::DoNotOptimize(p.leaves().get(q.leaf, q.subleaf));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_binary)->Name("BM_cpuid_lookup/binary_search");

// The naive answer: a linear scan, then the same dynamic rules as policy::answer, written
// out here from the SDM (OSXSAVE/OSPKE from CR4, APIC IDs, XSAVE sizes).
cpuid::regs naive_answer(const cpuid::policy& p, std::uint32_t leaf, std::uint32_t subleaf, const cpuid::vcpu_state& v) {
  cpuid::regs r = linear_scan(p.leaves(), leaf, subleaf);
  if (leaf == 1) {
    if (p.has(feat::xsave) && v.cr4.test(x86::cr4::osxsave)) r.ecx |= 1u << 27;
    r.ebx = (r.ebx & 0x00ffffffu) | ((v.x2apic_id & 0xffu) << 24);
  } else if (leaf == 7 && subleaf == 0) {
    if (p.has(feat::pku) && v.cr4.test(x86::cr4::pke)) r.ecx |= 1u << 4;
  } else if (leaf == 0xb || leaf == 0x1f) {
    r.edx = v.x2apic_id;
  } else if (leaf == 0xd && subleaf == 0) {
    r.ebx = p.xsave().standard_size(v.xcr0 & p.xcr0_components()).value_or(576);
  } else if (leaf == 0xd && subleaf == 1) {
    r.ebx = p.xsave().compacted_size((v.xcr0 & p.xcr0_components()) | (v.xss & p.xss_components())).value_or(576);
  }
  return r;
}

void BM_cpuid_lookup_linear(benchmark::State& state) {
  const auto& p = guest();
  const auto& qs = queries();
  cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pae, x86::xfeatures{0x7}, {}, 3};
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = qs[i++ & (qs.size() - 1)];
    benchmark::DoNotOptimize(naive_answer(p, q.leaf, q.subleaf, v));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_linear)->Name("BM_cpuid_lookup/linear_scan");

void BM_cpuid_lookup_native(benchmark::State& state) {
  const auto& qs = queries();
  std::size_t i = 0;
  for (auto _ : state) {
    const query q = qs[i++ & (qs.size() - 1)];
    benchmark::DoNotOptimize(cpuid::execute(q.leaf, q.subleaf));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_cpuid_lookup_native)->Name("BM_cpuid_lookup/native_cpuid");

}  // namespace

BENCHMARK_MAIN();
