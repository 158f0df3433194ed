// SPDX-License-Identifier: MIT
// Writing a run-time 64-bit value into a 16-bit field (guest CS selector) must not compile:
// the value type comes from encoding bits 14:13 and is never truncated silently. (An integer
// constant that fits is accepted; see vmx_write_constant_too_wide.cpp for one that does not.)
#include <cstdint>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v, std::uint64_t wide, std::uint16_t narrow) {
#ifdef HVKIT_COMPILE_FAIL
  (void)narrow;
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, wide);
#else
  (void)wide;
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, narrow);
#endif
}
