// SPDX-License-Identifier: MIT
// A guest CPUID policy and the MSR policy derived from it (docs/background.md §2: a guest
// told IBPB exists writes IA32_PRED_CMD, and #GP there crashes its scheduler, so both come
// from one source). Built from the CPUID of the machine this runs on, as a hypervisor would.
#include <cassert>
#include <cstdint>

#include <hvkit/cpuid/all.hpp>

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace msr = hvkit::x86::msr;

// One VM's CPUID and MSR policies (static storage: the tables are a few KB).
struct vm_policy {
  cpuid::policy cpuid;
  cpuid::msr_policy msrs;
};

bool build(vm_policy& vm, const cpuid::table<>& host, const cpuid::feature_set& deny) {
  cpuid::hypervisor_caps caps;
  caps.passthrough = cpuid::presets::instruction_set_passthrough;
  // The virtual APIC does x2APIC and TSC-deadline; IBRS/IBPB (IA32_SPEC_CTRL, IA32_PRED_CMD)
  // are offered whether or not this host has them (the hypervisor handles the MSRs).
  caps.emulated = cpuid::presets::virtual_apic.with(feat::spec_ctrl);
  cpuid::policy_config cfg;
  cfg.deny = deny;
  if (!cpuid::build_policy_into(vm.cpuid, host, caps, cfg)) return false;
  vm.msrs = cpuid::derive_msr_policy(vm.cpuid.features(), vm.cpuid.xss_components());
  return static_cast<bool>(cpuid::check_consistency(vm.cpuid.features(), vm.msrs));
}

int main() {
  static cpuid::table<> host;
  if (!cpuid::read_all(cpuid::host_source{}, host)) return 1;
  static vm_policy vm, no_ibpb;
  if (!build(vm, host, {}) || !build(no_ibpb, host, {feat::spec_ctrl, feat::amd_ibpb})) return 1;

  // CPUID exit for leaf 1: the guest is told it runs under a hypervisor (ECX bit 31) and
  // sees CR4.OSXSAVE mirrored in ECX bit 27 (SDM Vol. 2A CPUID, Table 3-10).
  const cpuid::vcpu_state cpu{hvkit::x86::cr4::osxsave, hvkit::x86::xfeatures{1}, {}, 0};
  const cpuid::regs leaf1 = vm.cpuid.answer(1, 0, cpu);
  assert((leaf1.ecx >> 31) & 1);
  assert(((leaf1.ecx >> 27) & 1) == (vm.cpuid.has(feat::xsave) ? 1u : 0u));

  // WRMSR exits: IA32_PRED_CMD.IBPB (bit 0) is allowed exactly when CPUID enumerates IBPB.
  assert(vm.cpuid.has(feat::spec_ctrl) && !no_ibpb.cpuid.has(feat::spec_ctrl));
  assert(vm.msrs.write(msr::ia32_pred_cmd, 1) == cpuid::msr_verdict::allow);
  assert(no_ibpb.msrs.write(msr::ia32_pred_cmd, 1) == cpuid::msr_verdict::gp);
  assert(vm.msrs.read(msr::ia32_pred_cmd) == cpuid::msr_verdict::gp);  // write-only MSR
  return 0;
}
