// SPDX-License-Identifier: MIT
// svm::intercept numbering against the VMCB control area's intercept vectors (AMD APM Vol. 2,
// Appendix B, Table B-1 "VMCB Layout, Control Area"), typed by hand:
//   000h bits 15:0 "Intercept reads of CR0–15", bits 31:16 "Intercept writes of CR0–15";
//   004h bits 15:0 "Intercept reads of DR0–15", bits 31:16 "Intercept writes of DR0–15";
//   008h bits 31:0 "Intercept exception vectors 0–31".
// intercept_set::word(n) is the 32-bit vector at VMCB offset 4 * n.
// Also the software-exception event for INTO: SDM Vol. 2A, INTO: "generates an overflow trap
// (#OF)", vector 4, delivered as a software exception (SDM Vol. 3C Table 25-17, type 6 "Software
// exception", used "for INT3 or INTO").
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/svm/intercepts.hpp>
#include <hvkit/x86/event.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;

namespace {

unsigned rt(unsigned v) {
  volatile unsigned x = v;
  return x;
}

// The only bit set in `s`: (word, bit), or (~0u, ~0u) if not exactly one.
std::pair<unsigned, unsigned> only_bit(const svm::intercept_set& s) {
  std::pair<unsigned, unsigned> at{~0u, ~0u};
  unsigned n = 0;
  for (unsigned w = 0; w < svm::intercept_words; ++w)
    for (unsigned b = 0; b < 32; ++b)
      if ((s.words()[w] >> b) & 1u) {
        at = {w, b};
        ++n;
      }
  return n == 1 ? at : std::pair<unsigned, unsigned>{~0u, ~0u};
}

TEST(svm_intercept_words_golden, cr_dr_exception_positions) {
  for (unsigned n = 0; n < 16; ++n) {
    svm::intercept_set s;
    s.set(svm::cr_read(rt(n)));
    EXPECT_EQ(only_bit(s), (std::pair<unsigned, unsigned>{0, n})) << "CR" << n << " read";
    s = {};
    s.set(svm::cr_write(rt(n)));
    EXPECT_EQ(only_bit(s), (std::pair<unsigned, unsigned>{0, 16 + n})) << "CR" << n << " write";
    s = {};
    s.set(svm::dr_read(rt(n)));
    EXPECT_EQ(only_bit(s), (std::pair<unsigned, unsigned>{1, n})) << "DR" << n << " read";
    s = {};
    s.set(svm::dr_write(rt(n)));
    EXPECT_EQ(only_bit(s), (std::pair<unsigned, unsigned>{1, 16 + n})) << "DR" << n << " write";
    EXPECT_TRUE(s.test(svm::dr_write(n)));
    s.clear(svm::dr_write(rt(n)));
    EXPECT_FALSE(s.test(svm::dr_write(n)));
    EXPECT_EQ(s.words(), (std::array<std::uint32_t, svm::intercept_words>{}));
  }
  for (unsigned v = 0; v < 32; ++v) {
    svm::intercept_set s;
    s.set(svm::exception(static_cast<x86::vector>(rt(v))));
    EXPECT_EQ(only_bit(s), (std::pair<unsigned, unsigned>{2, v})) << "vector " << v;
    EXPECT_EQ(s.word(2), 1u << v);
  }
  // #PF (14) at bit 14 of the exception vector; #GP (13) at bit 13.
  EXPECT_EQ(svm::intercept_set{}.set(svm::exception(x86::vector::pf)).word(2), 0x4000u);
  EXPECT_EQ(svm::intercept_set{}.set(svm::exception(x86::vector::gp)).word(2), 0x2000u);
}

TEST(svm_intercept_words_golden, into_is_a_software_exception_4) {
  for (unsigned len : {1u, 2u, 15u}) {
    const auto e = x86::event::into(static_cast<std::uint8_t>(rt(len)));
    EXPECT_EQ(e.kind, x86::event_kind::software_exception);
    EXPECT_EQ(e.vector, 4u);
    EXPECT_FALSE(e.has_error_code);
    EXPECT_EQ(e.instruction_length, len);
  }
}

}  // namespace
