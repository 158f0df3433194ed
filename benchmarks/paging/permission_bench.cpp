// SPDX-License-Identifier: MIT
// paging/ benchmarks, each side by side with its baseline in this binary:
//  BM_permission_fault/hvkit            mmu_context::permission_fault (precomputed table, branch-free)
//  BM_permission_fault/kvm_style_table  a 16-entry permission bitmap indexed by error-code bits
//                                       plus a separate PK mask, the classic hypervisor layout
//                                       (written here from the idea, as a baseline)
//  BM_permission_fault/rule_by_rule     the test oracle (tests/paging/permission_model.hpp)
//  BM_wp_refresh/hvkit                  refresh_passthrough_bits on a CR0.WP toggle
//  BM_wp_refresh/recompute_tables       recomputing the permission metadata on each toggle
// All permission_fault variants run over the same pre-generated random mix and must agree
// on its checksum (checked before timing).
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/pkru.hpp>

#include "permission_model.hpp"

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
namespace model = hvkit::test::model;

constexpr std::uint64_t PE = 1, PG = 1ull << 31, WP = 1ull << 16;
constexpr std::uint64_t PAE = 1ull << 5, SMEP = 1ull << 20, SMAP = 1ull << 21, PKE = 1ull << 22, PKS = 1ull << 24;
constexpr std::uint64_t LME = 1ull << 8, LMA = 1ull << 10, NXE = 1ull << 11, AC = 1ull << 18;

// The heaviest role: 4-level paging with every modifier on.
constexpr std::uint64_t bench_cr0 = PE | PG | WP, bench_cr4 = PAE | SMEP | SMAP | PKE | PKS,
                        bench_efer = LME | LMA | NXE;

struct input {
  std::uint8_t rights;  // pte_access exec|write|user
  std::uint8_t pkey;
  std::uint64_t access;  // pfec bits W, U, I/D and the implicit flag (bit 48)
  std::uint64_t rflags;
  std::uint32_t pkru, pkrs;
};

// Large enough that a branch predictor cannot learn the sequence (with 4096 inputs the
// branchy baselines ran 2.5x faster on an EPYC host: the predictor had memorised the
// repeating mix), small enough (512 KiB) to stay in L2/L3 rather than measure DRAM.
constexpr std::size_t mix_size = 16384;

std::vector<input> make_mix() {
  std::mt19937_64 rng(0x6876'6b69'74ull);  // fixed seed
  constexpr std::uint64_t kinds[] = {0, 2, 16};                       // read, write, fetch
  constexpr std::uint64_t modes[] = {4, 0, std::uint64_t{1} << 48};  // user, explicit, implicit
  std::vector<input> mix(mix_size);
  for (auto& in : mix) {
    const auto v = rng();
    in.rights = static_cast<std::uint8_t>(v & 7);
    in.pkey = static_cast<std::uint8_t>((v >> 3) & 15);
    in.access = kinds[(v >> 7) % 3] | modes[(v >> 9) % 3];
    in.rflags = 2 | (((v >> 11) & 1) ? AC : 0);
    in.pkru = static_cast<std::uint32_t>(rng()) & static_cast<std::uint32_t>(rng());  // ~1/4 of bits set
    in.pkrs = static_cast<std::uint32_t>(rng()) & static_cast<std::uint32_t>(rng());
  }
  return mix;
}
const std::vector<input>& mix() {
  static const std::vector<input> m = make_mix();
  return m;
}

// ---------------------------------------------------------------------------------------
// Baseline 1: the classic layout. Per role, a 16-entry byte table indexed by the #PF error
// code shifted right by one (bit 0 W, bit 1 U, bit 2 = the RSVD position, reused for the
// SMAP override, bit 3 I/D), each byte a bitmap over the 8 (exec, write, user) rights; and a
// 32-bit PK mask, two bits (AD, WD) per (W, U, user-address, I/D) combination, checked only
// when keys are enabled.
struct kvm_style_mmu {
  std::array<std::uint8_t, 16> perms{};
  std::uint32_t pk_mask = 0;
};

// Filled by evaluating the rules for every index, as a hypervisor does on every role change.
kvm_style_mmu build_kvm_style(bool wp, bool smep, bool smap, bool nx, bool pke, bool pks) {
  kvm_style_mmu m;
  for (unsigned i = 0; i < 16; ++i) {
    const bool w = i & 1, u = i & 2, smap_override = i & 4, f = i & 8;
    std::uint8_t bits = 0;
    for (unsigned r = 0; r < 8; ++r) {
      const bool x = r & 1, rw = r & 2, ua = r & 4;
      const bool deny = (u && !ua) || (w && !rw && (u || wp)) || (f && nx && !x) || (f && !u && ua && smep) ||
                        (!f && !u && ua && smap && !smap_override);
      bits = static_cast<std::uint8_t>(bits | (deny ? 1u << r : 0u));
    }
    m.perms[i] = bits;
  }
  for (unsigned i = 0; i < 16; ++i) {  // i: bit 0 W, bit 1 U, bit 2 user-mode address, bit 3 I/D
    const bool w = i & 1, u = i & 2, ua = i & 4, f = i & 8;
    const bool keyed = !f && (ua ? pke : pks);
    const unsigned bits = keyed ? (1u | ((w && (u || wp)) ? 2u : 0u)) : 0u;
    m.pk_mask |= bits << (2 * i);
  }
  return m;
}

inline std::uint32_t kvm_style_fault(const kvm_style_mmu& m, const input& in) {
  const std::uint32_t pfec = static_cast<std::uint32_t>(in.access);
  const bool user = in.access & 4, implicit = in.access >> 48;
  const std::uint32_t smap_override = (!user && !implicit && (in.rflags & AC)) ? 1u : 0u;
  const unsigned index = ((pfec | (smap_override << 3)) >> 1) & 15;
  std::uint32_t fault = (m.perms[index] >> in.rights) & 1;
  std::uint32_t errcode = 1;  // P
  if (m.pk_mask != 0) {
    const std::uint32_t ua = (in.rights >> 2) & 1;
    const std::uint32_t reg = ua ? in.pkru : in.pkrs;
    const unsigned pk_index = ((pfec >> 1) & 3) | (ua << 2) | (((pfec >> 4) & 1) << 3);
    const std::uint32_t pk = (reg >> (2 * in.pkey)) & (m.pk_mask >> (2 * pk_index)) & 3;
    if (pk != 0) {
      errcode |= 0x20;
      fault = 1;
    }
  }
  return fault ? errcode : 0;
}

// Baseline 2: the rule-by-rule oracle of the tests, on the same inputs.
struct model_input {
  model::access acc;
  model::page page;
  std::uint64_t rflags;
  std::uint32_t pkru, pkrs;
};
// Decoding the raw input is part of every variant's timed work: hvkit and the KVM-style
// table take the same raw `input` and decode its bits inside the loop.
inline model_input to_model_one(const input& i) {
  const auto k = (i.access & 2) ? model::kind::write : (i.access & 16) ? model::kind::fetch : model::kind::read;
  const auto m = (i.access & 4)    ? model::mode::user
                 : (i.access >> 48) ? model::mode::supervisor_implicit
                                    : model::mode::supervisor_explicit;
  return {{k, m}, {(i.rights & 2) != 0, (i.rights & 4) != 0, (i.rights & 1) != 0, i.pkey}, i.rflags, i.pkru, i.pkrs};
}
std::vector<model_input> to_model(const std::vector<input>& in) {
  std::vector<model_input> out;
  out.reserve(in.size());
  for (const auto& i : in) out.push_back(to_model_one(i));
  return out;
}
inline std::uint32_t model_fault(const model::regs& regs, const model_input& in) {
  const auto v = model::check(regs, in.acc, in.page, in.rflags, in.pkru, in.pkrs);
  return (v.fault ? 1u : 0u) | (v.pk ? 0x20u : 0u);
}

inline std::uint32_t hvkit_fault(const paging::mmu_context& ctx, const input& in) {
  const paging::pte_access rights{in.rights};
  return static_cast<std::uint32_t>(
      ctx.permission_fault(rights, in.pkey, x86::pfec{in.access}, x86::rflags{in.rflags},
                           paging::pk_register_for(rights, in.pkru, in.pkrs))
          .raw());
}

// Checksum: position-weighted, so that two implementations agreeing on it agree per input.
template <class F>
std::uint64_t checksum(F&& f) {
  std::uint64_t sum = 0, n = 0;
  for (const auto& in : mix()) sum += ++n * f(in);
  return sum;
}

paging::mmu_context bench_context() {
  return paging::mmu_context::make(x86::cr0{bench_cr0}, x86::cr4{bench_cr4}, x86::efer{bench_efer}, x86::gpa{0});
}

bool all_agree() {
  static const bool ok = [] {
    const auto ctx = bench_context();
    const auto kvm = build_kvm_style(true, true, true, true, true, true);
    const model::regs regs{bench_cr0, bench_cr4, bench_efer};
    const auto mi = to_model(mix());
    std::size_t j = 0;
    const auto a = checksum([&](const input& in) { return hvkit_fault(ctx, in); });
    const auto b = checksum([&](const input& in) { return kvm_style_fault(kvm, in); });
    const auto c = checksum([&](const input&) { return model_fault(regs, mi[j++]); });
    return a == b && b == c && a != 0;
  }();
  return ok;
}

void BM_permission_fault(benchmark::State& state, int variant) {
  if (!all_agree()) {
    state.SkipWithError("implementations disagree on the mix");
    return;
  }
  const auto& m = mix();
  auto ctx = bench_context();
  auto kvm = build_kvm_style(true, true, true, true, true, true);
  model::regs regs{bench_cr0, bench_cr4, bench_efer};
  benchmark::DoNotOptimize(ctx);  // the role is run-time data, as in a hypervisor
  benchmark::DoNotOptimize(kvm);
  benchmark::DoNotOptimize(regs);
  std::uint32_t acc = 0;
  for (auto _ : state) {
    switch (variant) {
      case 0:
        for (const auto& in : m) acc += hvkit_fault(ctx, in);
        break;
      case 1:
        for (const auto& in : m) acc += kvm_style_fault(kvm, in);
        break;
      default:
        for (const auto& in : m) acc += model_fault(regs, to_model_one(in));  // the same mix
        break;
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(m.size()));
}
BENCHMARK_CAPTURE(BM_permission_fault, hvkit, 0);
BENCHMARK_CAPTURE(BM_permission_fault, kvm_style_table, 1);
BENCHMARK_CAPTURE(BM_permission_fault, rule_by_rule, 2);

// A guest that toggles CR0.WP (kernel W^X): each emulated access sees a new live CR0.
void BM_wp_refresh_hvkit(benchmark::State& state) {
  auto ctx = bench_context();
  std::uint64_t live = bench_cr0;
  for (auto _ : state) {
    live ^= WP;
    benchmark::DoNotOptimize(live);
    const bool changed = ctx.refresh_passthrough_bits(x86::cr0{live});
    benchmark::DoNotOptimize(changed);
    benchmark::DoNotOptimize(ctx);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_wp_refresh_hvkit)->Name("BM_wp_refresh/hvkit");

void BM_wp_refresh_recompute(benchmark::State& state) {
  // The role bits as run-time data (WP, SMEP, SMAP, NX, PKE, PKS in bits 0-5), re-read on
  // every iteration so that the compiler cannot precompute both tables and select one.
  unsigned role_bits = 0x3f;
  kvm_style_mmu m{};
  for (auto _ : state) {
    role_bits ^= 1u;  // the guest toggles CR0.WP
    benchmark::DoNotOptimize(role_bits);
    // What a hypervisor without precomputed tables does on a role change: rebuild the
    // permission bitmap and PK mask for the new role.
    m = build_kvm_style(role_bits & 1u, role_bits & 2u, role_bits & 4u, role_bits & 8u, role_bits & 16u,
                        role_bits & 32u);
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_wp_refresh_recompute)->Name("BM_wp_refresh/recompute_tables");

}  // namespace

BENCHMARK_MAIN();
