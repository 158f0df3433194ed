// SDM Table 6-1 (error codes) and Table 6-5 (double-fault conditions), typed by hand.
#include <gtest/gtest.h>

#include <x86/vector.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;
using x86::vector;

TEST(vector, numbers) {
  HVKIT_BOTH(static_cast<int>(vector::ud) == 6 && static_cast<int>(vector::df) == 8);
  HVKIT_BOTH(static_cast<int>(vector::gp) == 13 && static_cast<int>(vector::pf) == 14);
  HVKIT_BOTH(static_cast<int>(vector::mf) == 16 && static_cast<int>(vector::ve) == 20 && static_cast<int>(vector::cp) == 21);
}

TEST(vector, error_codes_match_table_6_1) {
  int with = 0;
  for (int v = 0; v < 32; ++v) {
    const bool expected = v == 8 || v == 10 || v == 11 || v == 12 || v == 13 || v == 14 || v == 17 ||
                          v == 21 || v == 29 || v == 30;
    EXPECT_EQ(x86::has_error_code(rt(static_cast<vector>(v))), expected) << "vector " << v;
    with += expected;
  }
  EXPECT_EQ(with, 10);
  static_assert(x86::has_error_code(vector::pf) && !x86::has_error_code(vector::ud));
}

TEST(vector, double_fault_table_6_5) {
  using o = x86::delivery_outcome;
  HVKIT_BOTH(x86::combine_exceptions(vector::gp, vector::np) == o::double_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::gp, vector::pf) == o::deliver_second);
  HVKIT_BOTH(x86::combine_exceptions(vector::pf, vector::pf) == o::double_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::pf, vector::gp) == o::double_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::db, vector::gp) == o::deliver_second);
  HVKIT_BOTH(x86::combine_exceptions(vector::df, vector::gp) == o::triple_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::df, vector::nmi) == o::deliver_second);
  EXPECT_EQ(x86::combine_exceptions(rt(vector::pf), rt(vector::de)), o::double_fault);
}
