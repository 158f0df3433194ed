// SPDX-License-Identifier: MIT
// A guest-physical address must not be accepted where a host-physical one is expected.
#include <hvkit/x86/address.hpp>

namespace x86 = hvkit::x86;

constexpr std::uint64_t host_frame(x86::hpa a) { return a.value() >> 12; }

#ifdef HVKIT_COMPILE_FAIL
constexpr auto bad = host_frame(x86::gpa{0x1000});
#else
constexpr auto good = host_frame(x86::hpa{0x1000});
static_assert(good == 1);
#endif
