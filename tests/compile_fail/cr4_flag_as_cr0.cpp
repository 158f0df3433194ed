// SPDX-License-Identifier: MIT
// A CR4 bit cannot be tested against a CR0 value.
#include <hvkit/x86/cr.hpp>

namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
constexpr bool bad = x86::cr0{0x80000011}.test(x86::cr4::pae);
#else
constexpr bool good = x86::cr0{0x80000011}.test(x86::cr0::pg);
static_assert(good);
#endif
