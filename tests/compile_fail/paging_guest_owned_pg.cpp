// SPDX-License-Identifier: MIT
// CR0.PG feeds the MMU role (the paging mode) and always exits: a guest-owned policy that
// hands it to the guest must break the build, because refresh_passthrough_bits() only
// re-syncs CR0.WP (docs/background.md §1).
#include <hvkit/x86/guest_owned.hpp>

namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using bad = x86::guest_owned_set<x86::cr0::wp | x86::cr0::pg>;
static_assert(bad::cr0_bits.test(x86::cr0::pg));
#else
using good = x86::guest_owned_set<x86::cr0::wp>;
static_assert(good::cr0_bits.test(x86::cr0::wp));
#endif
