// SPDX-License-Identifier: MIT
// link_order.sh: the exit loop's translation unit (as vmx.cpp): answers argv[1] CPUID exits.
#include <cstdio>
#include <cstdlib>
#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/policy.hpp>
namespace cpuid = hvkit::cpuid;
cpuid::regs setup_use(const cpuid::policy& p);
[[gnu::noinline]] cpuid::regs on_cpuid_exit(const cpuid::policy& p, std::uint32_t leaf, std::uint32_t sub) {
  cpuid::vcpu_state vs{};
  return p.answer(leaf, sub, vs);
}
int main(int argc, char** argv) {
  static cpuid::table<> host;
  if (!cpuid::read_all(cpuid::host_source{}, host)) return 1;
  cpuid::hypervisor_caps hv;
  hv.passthrough = cpuid::feature_set::all();
  static auto b = cpuid::build_policy(host, hv, cpuid::policy_config{});
  if (!b) return 2;
  const auto& p = b.value();
  std::uint32_t acc = setup_use(p).eax;
  const long n = std::atol(argv[1]);
  static constexpr std::uint32_t leaves[8] = {0x0, 0x1, 0x7, 0xd, 0x80000000, 0x80000001, 0x80000008, 0x6};
  for (long i = 0; i < n; ++i) acc += on_cpuid_exit(p, leaves[i & 7], 0).eax;
  std::printf("%u\n", acc);
}
