// SPDX-License-Identifier: MIT
// VMWRITE to a VM-exit information field (read-only, SDM 25.9) must not compile.
#include <cstdint>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::exit_qualification, std::uint64_t{0});
#else
  (void)vmx::vmwrite(v, vmx::fields::guest_rip, std::uint64_t{0});
#endif
}
