// SPDX-License-Identifier: MIT
// link_order.sh: a set-up translation unit (as the reference hypervisor's vmx_setup.cpp) that
// answers a few leaves once, so that it also emits a copy of cpuid::policy::answer.
#include <hvkit/cpuid/policy.hpp>
namespace cpuid = hvkit::cpuid;
cpuid::regs setup_use(const cpuid::policy& p) {
  cpuid::vcpu_state all{};
  return cpuid::regs{p.answer(0xd, 0, all).ecx, p.answer(p.kvm_base(), 0, {}).eax, p.answer(p.kvm_base() + 1, 0, {}).eax, 0};
}
