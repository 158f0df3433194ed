// SPDX-License-Identifier: MIT
// Issue 23.16: in a hosted build with no handler of the user's, a failed precondition prints
// "<file>:<line>: hvkit: precondition failed: HVKIT_EXPECTS(<condition>)" to stderr before it
// traps (it used to be a bare SIGILL). A separate binary: the handler must be the same in
// every translation unit of a program.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>

#include <hvkit/x86/bitfield.hpp>
#include <hvkit/x86/contract.hpp>
#include <hvkit/x86/result.hpp>

#include "../support/profile_on_death.hpp"
#include "../support/runtime.hpp"

namespace {
int checked_div(int a, int b) {
  HVKIT_EXPECTS(b != 0);
  return a / b;
}
}  // namespace

TEST(contract_print, own_expects_prints_file_line_condition_then_traps) {
  const int line = __LINE__ - 6;  // the HVKIT_EXPECTS line above
  const std::string expect =
      std::string("contract_print_test\\.cpp:") + std::to_string(line) + ": hvkit: precondition failed: HVKIT_EXPECTS\\(b != 0\\)";
  EXPECT_EXIT(static_cast<void>(checked_div(1, hvkit::test::rt(0))), testing::KilledBySignal(SIGILL), expect);
}

TEST(contract_print, library_precondition_names_the_header) {
  hvkit::result<int, int> r = 5;
  EXPECT_EXIT(static_cast<void>(r.error()), testing::KilledBySignal(SIGILL),
              "x86/result\\.hpp:[0-9]+: hvkit: precondition failed: HVKIT_EXPECTS\\(!has_\\)");
  using f = hvkit::x86::bitfield<std::uint64_t, 0, 2, std::uint8_t>;
  EXPECT_EXIT(static_cast<void>(f::set(0, hvkit::test::rt<std::uint8_t>(4))), testing::KilledBySignal(SIGILL),
              "x86/bitfield\\.hpp:[0-9]+: hvkit: precondition failed: HVKIT_EXPECTS\\(fits");
}
