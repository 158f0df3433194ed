// SPDX-License-Identifier: MIT
// A field encoding with a reserved bit (bit 12) or HIGH access on a natural-width field
// must not compile (SDM 25.11.2).
#include <hvkit/vmx/field.hpp>

namespace vmx = hvkit::vmx;

#ifdef HVKIT_COMPILE_FAIL
using bad = vmx::field<0x681f>;  // HIGH access of natural-width GUEST_RIP
static_assert(bad::encoding == 0x681f);
#else
using good = vmx::field<0x681e>;
static_assert(good::encoding == 0x681e);
#endif
