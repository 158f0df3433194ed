// SPDX-License-Identifier: MIT
// A CR4 value into the CR0 field must not compile.
#include <hvkit/svm/vmcb.hpp>
#include <hvkit/x86/cr.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;

void f(svm::soft_vmcb& v) {
#ifdef HVKIT_COMPILE_FAIL
  svm::write(v, svm::fields::cr0, x86::cr4::pae);
#else
  svm::write(v, svm::fields::cr0, x86::cr0::pe);
#endif
}
