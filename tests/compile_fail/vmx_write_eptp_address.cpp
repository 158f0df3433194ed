// SPDX-License-Identifier: MIT
// The EPT pointer field (0x201A) holds an EPTP (SDM 25.6.11: memory type, page-walk length,
// A/D and shadow-stack controls, and the PML4 address), typed paging::ept_pointer: vmwrite
// takes one (or the raw 64-bit value), but not a bare host-physical address, which is only
// the table's address without the walk length and memory type.
#include <hvkit/paging/ept_entry.hpp>
#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;

void f(vmx::soft_vmcs& v) {
  const x86::hpa pml4{0x10000};
#ifdef HVKIT_COMPILE_FAIL
  (void)vmx::vmwrite(v, vmx::fields::ept_pointer, pml4);
#else
  (void)vmx::vmwrite(v, vmx::fields::ept_pointer, paging::make_ept_pointer(pml4, 4, true));
  paging::ept_pointer back{};
  (void)vmx::vmread(v, vmx::fields::ept_pointer, back);
#endif
}
