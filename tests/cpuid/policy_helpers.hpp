// SPDX-License-Identifier: MIT
// Shared set-up for the policy tests: hosts read from the recorded fixtures, and a
// hypervisor that passes everything through and emulates the APIC features and some KVM
// paravirtual features.
#pragma once

#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/kvm.hpp>
#include <hvkit/cpuid/policy.hpp>

#include "fixtures.hpp"

namespace helpers {
namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;

template <class Source>
constexpr cpuid::table<> host_of(const Source& s) {
  cpuid::table<> t;
  (void)cpuid::read_all(s, t);
  return t;
}
inline constexpr auto amd_host = host_of(fixtures::amd_epyc_kvm);
inline constexpr auto intel_host = host_of(fixtures::intel_spr_like);

constexpr cpuid::hypervisor_caps everything() {
  cpuid::hypervisor_caps hv;
  hv.passthrough = cpuid::feature_set::all();
  hv.emulated = cpuid::feature_set{feat::x2apic, feat::tsc_deadline, feat::arat, cpuid::kvm::features::clocksource2,
                                   cpuid::kvm::features::pv_send_ipi, cpuid::kvm::features::pv_eoi};
  hv.nested_virtualization = true;
  return hv;
}

constexpr cpuid::policy_config config(std::uint32_t threads, std::uint32_t cores) {
  cpuid::policy_config c;
  c.topo = {threads, cores};
  return c;
}

constexpr cpuid::policy build(const cpuid::table<>& host, const cpuid::hypervisor_caps& hv,
                              const cpuid::policy_config& c) {
  return cpuid::build_policy(host, hv, c).value();
}
}  // namespace helpers
