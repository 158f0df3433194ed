// SPDX-License-Identifier: MIT
// Issue 23.3: the same for entry_failed: one taking soft_vmcs& while dispatching over
// cached_vmcs<soft_vmcs> would send every VM-entry failure to `unhandled`.
#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

struct handler {
  using result_type = int;
#ifdef HVKIT_COMPILE_FAIL
  int entry_failed(vmx::exit_reason_field, vmx::soft_vmcs&) { return -2; }
#else
  int entry_failed(vmx::exit_reason_field, vmx::cached_vmcs<vmx::soft_vmcs>&) { return -2; }
#endif
  int unhandled(vmx::exit_reason_field, auto&) { return -1; }
};

int f(vmx::soft_vmcs& v) {
  vmx::cached_vmcs<vmx::soft_vmcs> c{v};
  handler h;
  return vmx::dispatch_exit(h, c);
}
