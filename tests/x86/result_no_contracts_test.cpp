// SPDX-License-Identifier: MIT
// hvkit::result with contracts compiled out (HVKIT_DISABLE_CONTRACTS, the documented opt-in of
// x86/contract.hpp): value() of an error result and error() of a value result must still not
// read the union's inactive member (undefined behaviour). They trap instead (SIGILL, no
// message: the violation handler is compiled out with the contracts). A separate binary: the
// contract configuration must be the same in every translation unit of a program.
#define HVKIT_DISABLE_CONTRACTS 1

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>

#include <hvkit/paging/walk_result.hpp>
#include <hvkit/x86/contract.hpp>
#include <hvkit/x86/result.hpp>

#include "../support/profile_on_death.hpp"
#include "../support/runtime.hpp"

using hvkit::result;
using hvkit::unexpected;
using hvkit::test::rt;

namespace {
enum class err : std::uint8_t { bad = 7 };
constexpr result<std::uint64_t, err> half(std::uint64_t v) {
  if (v % 2) return unexpected(err::bad);
  return v / 2;
}
constexpr result<void, err> check(bool ok) {
  if (!ok) return unexpected(err::bad);
  return {};
}
// An own precondition, to show that this translation unit really has contracts disabled.
int checked_div(int a, int b) {
  HVKIT_EXPECTS(b != 0);
  return b == 0 ? -1 : a / b;
}
}  // namespace

TEST(result_no_contracts, contracts_are_really_disabled_here) {
  // With contracts enabled this would trap (and the test die).
  EXPECT_EQ(checked_div(1, rt(0)), -1);
}

TEST(result_no_contracts, right_member_reads_as_with_contracts) {
  HVKIT_BOTH(half(8).has_value() && half(8).value() == 4 && *half(8) == 4);
  HVKIT_BOTH(!half(7).has_value() && half(7).error() == err::bad);
  HVKIT_BOTH(half(7).value_or(99) == 99);
  HVKIT_BOTH(check(true).has_value() && check(false).error() == err::bad);
  const auto r = half(rt<std::uint64_t>(10));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 5u);
  EXPECT_EQ(half(rt<std::uint64_t>(3)).error(), err::bad);
}

TEST(result_no_contracts, value_of_an_error_traps) {
  const auto r = half(rt<std::uint64_t>(3));
  const auto sig = testing::KilledBySignal(SIGILL);
  EXPECT_EXIT(static_cast<void>(r.value()), sig, "");
  EXPECT_EXIT(static_cast<void>(*r), sig, "");
  // A walk fault read as a translation: the union's two members have different layouts.
  hvkit::paging::walk_fault f{};
  f.kind = hvkit::paging::fault_kind::not_present;
  hvkit::paging::walk_result w = unexpected(f);
  if (rt(false)) w = hvkit::paging::translation{};
  EXPECT_EXIT(static_cast<void>(w->address), sig, "");
  EXPECT_EXIT(static_cast<void>(w.value().path.count), sig, "");
}

TEST(result_no_contracts, error_of_a_value_traps) {
  const auto r = half(rt<std::uint64_t>(4));
  const auto sig = testing::KilledBySignal(SIGILL);
  EXPECT_EXIT(static_cast<void>(r.error()), sig, "");
  const result<void, err> v = check(rt(true));
  EXPECT_EXIT(static_cast<void>(v.error()), sig, "");
  hvkit::paging::walk_result w = hvkit::paging::translation{};
  EXPECT_EXIT(static_cast<void>(w.error().kind), sig, "");
}
