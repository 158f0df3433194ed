// Writing a 64-bit value into a 16-bit field (guest CS selector) must not compile: the value
// type comes from encoding bits 14:13 and is never truncated silently.
#include <cstdint>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

void f(vmx::soft_vmcs& v) {
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, std::uint64_t{0x10});
#else
  (void)vmx::vmwrite(v, vmx::fields::guest_cs_selector, std::uint16_t{0x10});
#endif
}
