// SPDX-License-Identifier: MIT
// The pending-exception merge against a hand-typed copy of SDM Vol. 3A 6.15, Tables 6-4
// (exception classes) and 6-5 (conditions for generating a double fault), for every pair of
// the architecturally defined vectors, and the interrupt rows of Table 6-4.
#include <gtest/gtest.h>

#include <hvkit/x86/exception_merge.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;
using x86::merge_verdict;
using x86::vector;

namespace {

// Table 6-4, typed from the SDM's lists (not from x86::class_of).
// B = benign: 1 #DB, 2 NMI, 3 #BP, 4 #OF, 5 #BR, 6 #UD, 7 #NM, 9 CSO, 16 #MF, 17 #AC, 18 #MC, 19 #XM.
// C = contributory: 0 #DE, 10 #TS, 11 #NP, 12 #SS, 13 #GP, 21 #CP.
// P = page faults: 14 #PF, 20 #VE.   D = 8 #DF (the first-event row "Double Fault" of 6-5).
// Vector 15 is reserved and not in the table.
constexpr char table_6_4[22 + 1] = "CBBBBBBBDBCCCCP-BBBBPC";

// Table 6-5: rows = first exception class, columns = second exception class (B, C, P);
// S = serial (deliver the second), F = generate #DF, T = shutdown (SDM interrupt 8: a
// contributory or page fault while calling the #DF handler; a benign one is delivered).
//                          second: B    C    P
constexpr const char* table_6_5[4] = {"SSS",   // first benign
                                      "SFS",   // first contributory
                                      "SFF",   // first page fault
                                      "STT"};  // first double fault

int col(char c) { return c == 'B' ? 0 : c == 'C' ? 1 : 2; }
int row(char c) { return c == 'B' ? 0 : c == 'C' ? 1 : c == 'P' ? 2 : 3; }

}  // namespace

TEST(exception_merge, every_pair_of_vectors_matches_tables_6_4_and_6_5) {
  int pairs = 0, doubles = 0, shutdowns = 0;
  for (int a = 0; a < 22; ++a) {
    if (table_6_4[a] == '-') continue;
    for (int b = 0; b < 22; ++b) {
      if (table_6_4[b] == '-' || table_6_4[b] == 'D') continue;  // #DF is never the "second" fault of a pair
      const char expect = table_6_5[row(table_6_4[a])][col(table_6_4[b])];
      const x86::exception_event second{static_cast<vector>(b), 0x1234};
      const auto m = x86::merge_exception(rt(x86::first_event::exception), static_cast<vector>(a), second);
      ++pairs;
      switch (expect) {
        case 'S':
          EXPECT_EQ(m.verdict, merge_verdict::deliver_second) << a << " then " << b;
          EXPECT_EQ(m.event, second) << a << " then " << b;
          break;
        case 'F':
          ++doubles;
          EXPECT_EQ(m.verdict, merge_verdict::double_fault) << a << " then " << b;
          EXPECT_EQ(m.event.v, vector::df);
          EXPECT_EQ(m.event.error_code, 0u);  // #DF pushes an error code of 0 (SDM 6.15)
          break;
        default:
          ++shutdowns;
          EXPECT_EQ(m.verdict, merge_verdict::shutdown) << a << " then " << b;
      }
    }
  }
  EXPECT_EQ(pairs, 21 * 20);
  // contributory x contributory (6*6) + page fault x (contributory + page fault) (2*8)
  EXPECT_EQ(doubles, 36 + 16);
  EXPECT_EQ(shutdowns, 8);  // #DF then the 6 contributory and 2 page-fault vectors
}

TEST(exception_merge, named_cases) {
  using x86::first_event;
  constexpr x86::exception_event pf{vector::pf, 0x2};
  constexpr x86::exception_event gp{vector::gp, 0};
  // #PF during #PF: #DF.
  static_assert(x86::merge_exception(first_event::exception, vector::pf, pf).verdict == merge_verdict::double_fault);
  // Contributory after #PF: #DF; #PF after contributory: serial.
  static_assert(x86::merge_exception(first_event::exception, vector::pf, gp).verdict == merge_verdict::double_fault);
  static_assert(x86::merge_exception(first_event::exception, vector::gp, pf).event == pf);
  // Anything contributory or page-fault class after #DF: shutdown; a benign one is delivered.
  static_assert(x86::merge_exception(first_event::exception, vector::df, pf).verdict == merge_verdict::shutdown);
  static_assert(x86::merge_exception(first_event::exception, vector::df, {vector::nmi, 0}).verdict ==
                merge_verdict::deliver_second);
}

TEST(exception_merge, interrupts_are_benign_whatever_their_vector) {
  // Table 6-4: "All INT n" and "All INTR" are benign: INT 13 or an external interrupt on
  // vector 14 followed by #GP is handled serially, not a double fault.
  for (int v = 0; v < 256; ++v)
    for (int b : {0, 13, 14, 8}) {
      const x86::exception_event second{static_cast<vector>(b), 0};
      const auto m = x86::merge_exception(rt(x86::first_event::interrupt), static_cast<vector>(v), second);
      EXPECT_EQ(m.verdict, merge_verdict::deliver_second) << v << " then " << b;
      EXPECT_EQ(m.event, second);
    }
}
