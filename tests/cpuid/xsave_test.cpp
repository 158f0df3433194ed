// SPDX-License-Identifier: MIT
// XSAVE area sizes (SDM Vol. 1 13.4): standard format = end of the highest component,
// compacted = packed in bit order from 576 with 64-byte alignment where ECX[1] says so.
#include <gtest/gtest.h>

#include <hvkit/cpuid/xsave.hpp>

#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
using hvkit::x86::xfeatures;
using hvkit::test::rt;

namespace {
// AMD EPYC (Zen 4) layout as its CPUID.0xD.i reported it.
constexpr cpuid::xsave_layout amd_zen4 = [] {
  cpuid::xsave_layout l;
  l.components[2] = {0x100, 0x240, false, false};
  l.components[5] = {0x40, 0x340, false, false};
  l.components[6] = {0x200, 0x380, false, false};
  l.components[7] = {0x400, 0x580, false, false};
  l.components[11] = {0x10, 0, true, false};
  l.components[12] = {0x18, 0, true, false};
  return l;
}();
// Intel Sapphire Rapids layout (AMX components 64-byte aligned in the compacted format).
constexpr cpuid::xsave_layout intel_spr = [] {
  cpuid::xsave_layout l;
  l.components[2] = {256, 576, false, false};
  l.components[5] = {64, 1088, false, false};
  l.components[6] = {512, 1152, false, false};
  l.components[7] = {1024, 1664, false, false};
  l.components[8] = {128, 0, true, false};
  l.components[9] = {8, 2688, false, false};
  l.components[17] = {64, 2752, false, true};
  l.components[18] = {8192, 2816, false, true};
  return l;
}();
}  // namespace

TEST(cpuid_xsave, standard_size) {
  // The AMD host itself reported 0xD.0 EBX = 0x980 with XCR0 = 0xe7.
  HVKIT_BOTH(amd_zen4.standard_size(xfeatures{0xe7}).value() == 0x980);
  HVKIT_BOTH(amd_zen4.standard_size(xfeatures{0x7}).value() == 832);
  HVKIT_BOTH(amd_zen4.standard_size(xfeatures{0x3}).value() == 576);
  HVKIT_BOTH(intel_spr.standard_size(xfeatures{0x602e7}).value() == 11008);
  HVKIT_BOTH(intel_spr.standard_size(xfeatures{0x207}).value() == 2696);
  EXPECT_EQ(intel_spr.standard_size(rt(xfeatures{0x2e7})).value(), 2696u);
}

TEST(cpuid_xsave, compacted_size) {
  // The AMD host reported 0xD.1 EBX = 0x9a8 with XCR0 | XSS = 0x18e7.
  HVKIT_BOTH(amd_zen4.compacted_size(xfeatures{0x18e7}).value() == 0x9a8);
  // SPR: 576 + 256 + 64 + 512 + 1024 + 8 = 2440, aligned to 2496, + 64 = 2560, + 8192.
  HVKIT_BOTH(intel_spr.compacted_size(xfeatures{0x602e7}).value() == 10752);
  HVKIT_BOTH(intel_spr.compacted_size(xfeatures{0x20207}).value() == 960);
  HVKIT_BOTH(intel_spr.compacted_size(xfeatures{0x107}).value() == 960);
  EXPECT_EQ(amd_zen4.compacted_size(rt(xfeatures{0x7})).value(), 832u);
}

TEST(cpuid_xsave, errors) {
  HVKIT_BOTH(amd_zen4.standard_size(xfeatures{0x207}).error() == cpuid::xsave_error::unknown_component);
  HVKIT_BOTH(amd_zen4.compacted_size(xfeatures{1ull << 40}).error() == cpuid::xsave_error::out_of_range);
  HVKIT_BOTH((cpuid::xsave_component::from({0x40, 0xac0, 2, 0}) == cpuid::xsave_component{0x40, 0xac0, false, true}));
}

TEST(cpuid_xsave, corrupt_sizes_do_not_wrap) {
  constexpr auto l = [] {
    cpuid::xsave_layout x;
    x.components[2] = {0xffffff00u, 0x200u, false, false};  // offset + size > 4 GiB
    x.components[3] = {0x80000000u, 0, false, true};
    x.components[4] = {0x80000000u, 0, false, true};
    return x;
  }();
  HVKIT_BOTH(l.standard_size(xfeatures{0x7}).error() == cpuid::xsave_error::too_large);
  HVKIT_BOTH(l.compacted_size(xfeatures{0x1b}).error() == cpuid::xsave_error::too_large);
  HVKIT_BOTH(l.compacted_size(xfeatures{0x3}).value() == 576);
}
