// SPDX-License-Identifier: MIT
// Writing EXITINFO1 (written by the processor on #VMEXIT, APM 15.6) must not compile.
#include <cstdint>

#include <hvkit/svm/vmcb.hpp>

namespace svm = hvkit::svm;

void f(svm::soft_vmcb& v) {
#ifdef HVKIT_COMPILE_FAIL
  svm::write(v, svm::fields::exit_info_1, std::uint64_t{0});
#else
  svm::write(v, svm::fields::rip, std::uint64_t{0});
#endif
}
