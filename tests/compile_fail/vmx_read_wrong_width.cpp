// SPDX-License-Identifier: MIT
// Reading a natural-width field (guest RIP) into a 32-bit variable must not compile.
#include <cstdint>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  std::uint32_t rip = 0;
#else
  std::uint64_t rip = 0;
#endif
  (void)vmx::vmread(v, vmx::fields::guest_rip, rip);
}
