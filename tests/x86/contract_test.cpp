// SPDX-License-Identifier: MIT
// HVKIT_CONTRACT_VIOLATION is the user's hook: this binary routes violations to its own
// handler, which prints the failed expression and aborts.
#include <cstdio>
#include <cstdlib>

[[noreturn]] void test_contract_handler(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "contract violated: %s at %s:%d\n", expr, file, line);
  std::abort();
}
#define HVKIT_CONTRACT_VIOLATION(expr, file, line) test_contract_handler(expr, file, line)

#include <gtest/gtest.h>

#include <hvkit/x86/bitfield.hpp>
#include <hvkit/x86/result.hpp>

#include "../support/profile_on_death.hpp"
#include "../support/runtime.hpp"

TEST(contract, error_of_a_value_calls_the_user_handler) {
  hvkit::result<int, int> r = 5;
  EXPECT_DEATH(static_cast<void>(r.error()), "contract violated: !has_");
}

TEST(contract, value_of_an_error_calls_the_user_handler) {
  hvkit::result<int, int> r = hvkit::unexpected(3);
  EXPECT_DEATH(static_cast<void>(r.value()), "contract violated: has_");
}

TEST(contract, too_wide_bitfield_value_calls_the_user_handler) {
  using f = hvkit::x86::bitfield<std::uint64_t, 0, 2, std::uint8_t>;
  EXPECT_DEATH(static_cast<void>(f::set(0, hvkit::test::rt<std::uint8_t>(4))), "contract violated: fits");
}
