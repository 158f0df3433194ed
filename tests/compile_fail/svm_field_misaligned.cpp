// SPDX-License-Identifier: MIT
// A 4-byte field at an offset that is not a multiple of 4 must not compile.
#include <cstdint>

#include <hvkit/svm/vmcb.hpp>

namespace svm = hvkit::svm;

#ifdef HVKIT_COMPILE_FAIL
inline constexpr svm::field<0x05a, 4> bogus{};
#else
inline constexpr svm::field<0x058, 4> bogus{};  // guest ASID
#endif

std::uint32_t f(svm::soft_vmcb& v) { return svm::read(v, bogus); }
