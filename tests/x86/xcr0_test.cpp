// SPDX-License-Identifier: MIT
// XSETBV validity rules (SDM Vol. 1 13.3).
#include <gtest/gtest.h>

#include <hvkit/x86/xcr0.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;
using x86::xfeatures;

TEST(xcr0, validity) {
  HVKIT_BOTH(x86::is_valid_xcr0(xfeatures{0x1}));
  HVKIT_BOTH(x86::is_valid_xcr0(xfeatures{0x7}));
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x6}));    // x87 missing
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x5}));    // AVX without SSE
  HVKIT_BOTH(x86::is_valid_xcr0(xfeatures{0xe7}));    // AVX-512 with AVX
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x67}));   // partial AVX-512
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x0b}));   // one MPX bit
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x103}));  // PT is an XSS component
  HVKIT_BOTH(x86::is_valid_xcr0(xfeatures{0x60207}));  // AMX pair + PKRU
  HVKIT_BOTH(!x86::is_valid_xcr0(xfeatures{0x20207})); // TILECFG without TILEDATA
  EXPECT_TRUE(x86::is_valid_xcr0(rt(xfeatures{0x207})));
  EXPECT_FALSE(x86::is_valid_xcr0(rt(xfeatures{0x1000 | 0x3})));
}
