// SPDX-License-Identifier: MIT
// The fixed-capacity CPUID table: ordering, indexed vs non-indexed leaves, full = error.
#include <gtest/gtest.h>

#include <hvkit/cpuid/table.hpp>

#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
using cpuid::regs;
using hvkit::test::rt;

namespace {
constexpr cpuid::table<8> small() {
  cpuid::table<8> t;
  (void)t.set(0x7, 1, {1, 2, 3, 4});
  (void)t.set(0x1, 5, {0x11, 0, 0, 0});  // leaf 1 is not indexed: stored as subleaf 0
  (void)t.set(0x7, 0, {2, 0, 0, 0});
  (void)t.set(0x80000000, 0, {0x80000008, 0, 0, 0});
  (void)t.set(0x0, 0, {0x1f, 0, 0, 0});
  return t;
}
}  // namespace

TEST(cpuid_table, sorted_and_found) {
  constexpr auto t = small();
  HVKIT_BOTH(t.size() == 5);
  HVKIT_BOTH(t[0].leaf == 0x0 && t[1].leaf == 0x1 && t[2].leaf == 0x7 && t[2].subleaf == 0);
  HVKIT_BOTH(t[3].leaf == 0x7 && t[3].subleaf == 1 && t[4].leaf == 0x80000000);
  HVKIT_BOTH(t.get(0x7, 1) == (regs{1, 2, 3, 4}));
  // ECX is ignored for leaf 1 (SDM: leaf 01H has no subleaves), significant for leaf 7.
  HVKIT_BOTH(t.get(0x1, 0).eax == 0x11 && t.get(0x1, 9).eax == 0x11);
  HVKIT_BOTH(t.find(0x7, 2) == nullptr && t.get(0x7, 2) == regs{});
  HVKIT_BOTH(t.has_leaf(0x7) && !t.has_leaf(0x6));
  HVKIT_BOTH(t.highest_subleaf(0x7) == 1);
  HVKIT_BOTH(t.highest_leaf(0, 0x3fffffff, 0) == 0x7);
  HVKIT_BOTH(t.highest_leaf(0x40000000, 0x4fffffff, 0xdead) == 0xdead);
  EXPECT_EQ(t.get(rt(0x7u), rt(1u)).edx, 4u);
}

TEST(cpuid_table, replace_and_erase) {
  constexpr auto t = [] {
    auto x = small();
    (void)x.set(0x7, 1, {9, 9, 9, 9});
    (void)x.erase(0x0);
    (void)x.erase_leaf(0x7);
    return x;
  }();
  HVKIT_BOTH(t.size() == 2 && t[0].leaf == 0x1 && t[1].leaf == 0x80000000);
  constexpr auto r = [] {
    auto x = small();
    return x.erase_range(0x1, 0x7);
  }();
  HVKIT_BOTH(r == 3);
}

TEST(cpuid_table, full_is_an_error) {
  constexpr auto outcome = [] {
    cpuid::table<2> t;
    const bool a = static_cast<bool>(t.set(1, 0, {}));
    const bool b = static_cast<bool>(t.set(2, 0, {}));
    const bool replace = static_cast<bool>(t.set(1, 0, {5, 0, 0, 0}));  // no new slot needed
    auto c = t.set(3, 0, {});
    return a && b && replace && !c && c.error() == cpuid::table_error::full && t.size() == 2 && t.get(1).eax == 5;
  }();
  HVKIT_BOTH(outcome);
  cpuid::table<1> t;
  ASSERT_TRUE(t.set(rt(1u), 0, {}));
  auto e = t.set(rt(2u), 0, {});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), cpuid::table_error::full);
}

namespace {
// erase(leaf, subleaf): removes exactly that entry (keys as the table stores them: the subleaf
// of a leaf that is not indexed is 0, SDM Vol. 2A CPUID: ECX is ignored for such a leaf).
TEST(cpuid_table, erase_one_entry) {
  cpuid::table<8> t;
  ASSERT_TRUE(t.set(0x7, 0, regs{1, 0, 0, 0}));
  ASSERT_TRUE(t.set(0x7, 1, regs{2, 0, 0, 0}));
  ASSERT_TRUE(t.set(0x1, 0, regs{3, 0, 0, 0}));
  EXPECT_FALSE(t.erase(0x7, 2));   // absent subleaf
  EXPECT_FALSE(t.erase(0x9));      // absent leaf
  EXPECT_FALSE(t.erase(0x8000'0000u));  // past the last entry
  EXPECT_EQ(t.size(), 3u);
  EXPECT_TRUE(t.erase(0x7, 0));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.find(0x7, 0), nullptr);
  ASSERT_NE(t.find(0x7, 1), nullptr);
  EXPECT_EQ(t.find(0x7, 1)->eax, 2u);
  EXPECT_TRUE(t.erase(0x1, 5));    // leaf 1 is not indexed: subleaf 5 names the one entry
  EXPECT_FALSE(t.has_leaf(0x1));
  EXPECT_FALSE(t.erase(0x7, 0));
  EXPECT_TRUE(t.erase(rt(0x7u), rt(1u)));
  EXPECT_TRUE(t.empty());
}
}  // namespace
