// SPDX-License-Identifier: MIT
// A CR mask policy that lets the guest own CR4.PAE (an MMU-role bit) must not compile.
#include <hvkit/vmx/cr_mask.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using policy = x86::guest_owned_set<x86::cr0::ts, x86::cr4::pge | x86::cr4::pae>;
#else
using policy = x86::guest_owned_set<x86::cr0::ts, x86::cr4::pge>;
#endif
constexpr auto owned = vmx::make_guest_owned<policy>({true, x86::cr4::defined});
static_assert(owned.cr0.raw() == 0x8);
