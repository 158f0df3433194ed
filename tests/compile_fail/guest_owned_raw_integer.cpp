// SPDX-License-Identifier: MIT
// A guest-owned policy is spelled with flag values, never raw integers: 0x8 could be any
// register's bit 3. Control: the same policy as x86::cr0::ts.
#include <hvkit/x86/guest_owned.hpp>

namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using policy = x86::guest_owned_set<0x8>;
#else
using policy = x86::guest_owned_set<x86::cr0::ts>;
#endif
static_assert(policy::cr0_bits.raw() == 0x8 && policy::cr4_bits.none());
