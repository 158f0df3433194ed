// SPDX-License-Identifier: MIT
// A negative integer constant fits no VMCS field, not even a 64-bit one (write ~0ull when
// all ones is meant). Control: the same field with 0.
#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::tsc_offset, -1);
#else
  (void)vmx::vmwrite(v, vmx::fields::tsc_offset, 0);
#endif
}
