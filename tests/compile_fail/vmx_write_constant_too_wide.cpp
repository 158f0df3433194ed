// SPDX-License-Identifier: MIT
// An integer constant is accepted by vmwrite() only if it fits the field: 0x10000 does not
// fit the 16-bit guest CS selector (SDM 25.11.2: bits 14:13 = 0, a 16-bit field), and a
// negative constant fits no field. Control: 0xffff, the widest value that fits.
#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, 0x1'0000);
#else
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, 0xffff);
#endif
}
