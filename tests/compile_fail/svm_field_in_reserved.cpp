// SPDX-License-Identifier: MIT
// A field declared in a reserved area of Table B-1 (018h-03Bh) must not compile.
#include <cstdint>

#include <hvkit/svm/vmcb.hpp>

namespace svm = hvkit::svm;

#ifdef HVKIT_COMPILE_FAIL
inline constexpr svm::field<0x020, 8> bogus{};
#else
inline constexpr svm::field<0x050, 8> bogus{};  // TSC_OFFSET
#endif

std::uint64_t f(svm::soft_vmcb& v) { return svm::read(v, bogus); }
