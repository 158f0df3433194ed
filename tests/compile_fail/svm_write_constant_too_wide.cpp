// SPDX-License-Identifier: MIT
// An integer constant wider than TLB_CONTROL (8 bits) must not compile.
#include <hvkit/svm/vmcb.hpp>

namespace svm = hvkit::svm;

void f(svm::soft_vmcb& v) {
#ifdef HVKIT_COMPILE_FAIL
  svm::write(v, svm::fields::tlb_control, 0x100);
#else
  svm::write(v, svm::fields::tlb_control, 0xff);
#endif
}
