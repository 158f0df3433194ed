// SPDX-License-Identifier: MIT
// Test support: check constexpr logic twice, in a static_assert and at run time.
#pragma once

namespace hvkit::test {
// The compiler cannot fold a read of this, so rt(v) is a run-time value.
inline volatile bool runtime_true = true;
template <class T>
T rt(T v) {
  return runtime_true ? v : T{};
}
}  // namespace hvkit::test

/// Asserts `expr` at compile time and (with run-time operands via rt()) at run time.
#define HVKIT_BOTH(expr) \
  static_assert(expr);   \
  EXPECT_TRUE(expr)
