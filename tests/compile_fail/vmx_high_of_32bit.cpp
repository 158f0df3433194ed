// SPDX-License-Identifier: MIT
// Only 64-bit fields have a HIGH half (SDM 25.11.2): high_half() of a 32-bit field must not compile.
#include <hvkit/vmx/fields.hpp>

namespace vmx = hvkit::vmx;

#ifdef HVKIT_COMPILE_FAIL
constexpr auto h = vmx::high_half(vmx::fields::exit_reason);
#else
constexpr auto h = vmx::high_half(vmx::fields::tsc_offset);
#endif
static_assert(decltype(h)::encoding != 0);
