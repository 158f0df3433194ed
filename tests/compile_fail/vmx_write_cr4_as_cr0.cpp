// SPDX-License-Identifier: MIT
// A GUEST_CR0 field takes an x86::cr0 (or its raw natural-width value), never a CR4 bit set:
// writing CR4.PAE where CR0 belongs must not compile. Control: CR0.PE | CR0.PG.
#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/x86/cr.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::guest_cr0, x86::cr4::pae);
#else
  (void)vmx::vmwrite(v, vmx::fields::guest_cr0, x86::cr0::pe | x86::cr0::pg);
#endif
}
