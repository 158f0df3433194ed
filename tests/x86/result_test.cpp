// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <hvkit/x86/result.hpp>

#include "runtime.hpp"

using hvkit::result;
using hvkit::unexpected;
using hvkit::test::rt;

namespace {
enum class err { bad, worse };
constexpr result<int, err> half(int v) {
  if (v % 2) return unexpected(err::bad);
  return v / 2;
}
constexpr result<void, err> check(bool ok) {
  if (!ok) return unexpected(err::worse);
  return {};
}
}  // namespace

TEST(result, value_and_error) {
  HVKIT_BOTH(half(8).has_value() && half(8).value() == 4 && *half(8) == 4);
  HVKIT_BOTH(!half(7).has_value() && half(7).error() == err::bad);
  HVKIT_BOTH(half(7).value_or(-1) == -1);
  HVKIT_BOTH(check(true).has_value() && check(false).error() == err::worse);
  const auto r = half(rt(10));
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value(), 5);
  EXPECT_EQ(half(rt(3)).error(), err::bad);
  EXPECT_FALSE(static_cast<bool>(check(rt(false))));
}

TEST(result, arrow_reaches_members) {
  struct pair {
    int a = 0;
    int b = 0;
  };
  result<pair, err> r = pair{1, 2};
  EXPECT_EQ(r->b, 2);
  r->b = 3;
  EXPECT_EQ(r.value().b, 3);
}
