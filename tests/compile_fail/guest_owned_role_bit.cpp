// SPDX-License-Identifier: MIT
// Letting the guest own CR4.SMEP (a bit that feeds the MMU role) must break the build:
// the role would go stale on a guest write that does not exit (docs/background.md §1).
#include <hvkit/x86/guest_owned.hpp>

namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using bad = x86::guest_owned_set<x86::cr0_possible_guest_owned,
                                 x86::cr4_possible_guest_owned | x86::cr4::smep>;
static_assert(bad::cr4_bits.test(x86::cr4::smep));
#else
using good = x86::guest_owned_set<x86::cr0_possible_guest_owned, x86::cr4_possible_guest_owned>;
static_assert(good::cr0_bits.test(x86::cr0::wp));
#endif
