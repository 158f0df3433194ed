// SPDX-License-Identifier: MIT
// Issue 23.3: a handler overload taking soft_vmcs& while dispatching over
// cached_vmcs<soft_vmcs> used to send the exit to `unhandled` without a word. It must not
// compile. The control takes the backend as auto&.
#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;

struct handler {
  using result_type = int;
#ifdef HVKIT_COMPILE_FAIL
  int operator()(vmx::exit_tag<vmx::exit_reason::cpuid>, vmx::soft_vmcs&) { return 10; }
#else
  int operator()(vmx::exit_tag<vmx::exit_reason::cpuid>, auto&) { return 10; }
#endif
  int unhandled(vmx::exit_reason_field, auto&) { return -1; }
};

int f(vmx::soft_vmcs& v) {
  vmx::cached_vmcs<vmx::soft_vmcs> c{v};
  handler h;
  return vmx::dispatch_exit(h, c);
}
