// SPDX-License-Identifier: MIT
// A run-time 64-bit value into the 32-bit guest ASID must not compile (no silent truncation).
#include <cstdint>

#include <hvkit/svm/vmcb.hpp>

namespace svm = hvkit::svm;

void f(svm::soft_vmcb& v, std::uint64_t x, std::uint32_t y) {
  static_cast<void>(x);
  static_cast<void>(y);
#ifdef HVKIT_COMPILE_FAIL
  svm::write(v, svm::fields::guest_asid, x);
#else
  svm::write(v, svm::fields::guest_asid, y);
#endif
}
