// SPDX-License-Identifier: MIT
// CR4.SMEP feeds the MMU role (SDM 4.6.1): a policy letting the guest own it would let SMEP
// toggle without an exit while refresh_passthrough_bits() only re-syncs CR0.WP, so the role
// would go stale. Such a policy must not compile, with GCC and with Clang.
#include <hvkit/paging/mmu.hpp>
#include <hvkit/x86/guest_owned.hpp>

namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using policy = x86::guest_owned_set<x86::cr0::wp, x86::cr4::smep | x86::cr4::pge>;
#else
using policy = x86::guest_owned_set<x86::cr0::wp, x86::cr4::pge>;
#endif
static_assert(policy::cr0_bits.test(x86::cr0::wp));
