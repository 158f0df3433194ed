// SPDX-License-Identifier: MIT
// SDM Table 6-1 (error codes) and Table 6-5 (double-fault conditions), typed by hand.
#include <gtest/gtest.h>

#include <hvkit/x86/vector.hpp>

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
  // Intel (SDM Table 6-1): 8, 10-14, 17, 21; 22-31 are reserved. AMD (APM Table 8-1): the
  // same, plus #VC (29) and #SX (30).
  int with_intel = 0, with_amd = 0;
  for (int v = 0; v < 32; ++v) {
    const bool intel = v == 8 || v == 10 || v == 11 || v == 12 || v == 13 || v == 14 || v == 17 || v == 21;
    const bool amd = intel || v == 29 || v == 30;
    EXPECT_EQ(x86::has_error_code(rt(static_cast<vector>(v)), x86::vendor::intel), intel) << "vector " << v;
    EXPECT_EQ(x86::has_error_code(rt(static_cast<vector>(v)), x86::vendor::amd), amd) << "vector " << v;
    with_intel += intel;
    with_amd += amd;
  }
  EXPECT_EQ(with_intel, 8);
  EXPECT_EQ(with_amd, 10);
  static_assert(x86::has_error_code(vector::pf, x86::vendor::intel) && !x86::has_error_code(vector::ud, x86::vendor::amd));
  static_assert(!x86::has_error_code(vector::vc, x86::vendor::intel) && x86::has_error_code(vector::sx, x86::vendor::amd));
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

// Every pair of vectors 0..31 against Table 6-5, with the classes of Table 6-4 typed here
// (SDM Vol. 3A 6.15): contributory #DE #TS #NP #SS #GP #CP; page faults #PF #VE; the rest
// benign. #DF as the second event is not an input (only the processor raises it).
TEST(vector, double_fault_every_pair_against_tables_6_4_and_6_5) {
  using o = x86::delivery_outcome;
  enum cls { benign, contributory, page_fault, double_fault };
  auto class_of = [](int v) {
    if (v == 0 || v == 10 || v == 11 || v == 12 || v == 13 || v == 21) return contributory;
    if (v == 14 || v == 20) return page_fault;
    if (v == 8) return double_fault;
    return benign;
  };
  // Rows: first event's class; columns: second event's class (benign, contributory, page fault).
  static constexpr o table_6_5[4][3] = {
      {o::deliver_second, o::deliver_second, o::deliver_second},
      {o::deliver_second, o::double_fault, o::deliver_second},
      {o::deliver_second, o::double_fault, o::double_fault},
      {o::deliver_second, o::triple_fault, o::triple_fault},
  };
  int doubles = 0, triples = 0;
  for (int first = 0; first < 32; ++first)
    for (int second = 0; second < 32; ++second) {
      // #DF (vector 8) is never a second event: the only class without a column. Testing the
      // class rather than the vector keeps the column index provably in range (GCC -O3
      // otherwise warns that the table may be read past a row).
      const cls column = class_of(second);
      if (column == double_fault) continue;
      const o expect = table_6_5[class_of(first)][column];
      const o got = x86::combine_exceptions(rt(static_cast<vector>(first)), rt(static_cast<vector>(second)));
      EXPECT_EQ(got, expect) << "first " << first << " second " << second;
      doubles += got == o::double_fault;
      triples += got == o::triple_fault;
    }
  // 6 x 6 contributory pairs + 2 page-fault-class firsts x 8 (contributory or page fault).
  EXPECT_EQ(doubles, 36 + 16);
  EXPECT_EQ(triples, 8);  // #DF followed by any of the 8 contributory or page-fault events
  HVKIT_BOTH(x86::combine_exceptions(vector::ve, vector::gp) == o::double_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::cp, vector::ts) == o::double_fault);
  HVKIT_BOTH(x86::combine_exceptions(vector::mc, vector::gp) == o::deliver_second);
}
