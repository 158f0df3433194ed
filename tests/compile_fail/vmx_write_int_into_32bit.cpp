// SPDX-License-Identifier: MIT
// Issue 23.9: a run-time int into a 32-bit field (the exception bitmap) must not compile, and
// the error must name the field, its width and the explicit narrowing helpers. The control
// narrows with vmx::narrow (checked) and vmx::truncate (explicit low bits).
#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v, int bits) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::exception_bitmap, bits);
#else
  if (auto n = vmx::narrow(vmx::fields::exception_bitmap, bits)) (void)vmx::vmwrite(v, vmx::fields::exception_bitmap, *n);
  (void)vmx::vmwrite(v, vmx::fields::exception_bitmap, vmx::truncate(vmx::fields::exception_bitmap, bits));
#endif
}
