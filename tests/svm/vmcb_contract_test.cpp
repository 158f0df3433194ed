// SPDX-License-Identifier: MIT
// svm::vmcb_view and svm::soft_vmcb: "The VMCB is 4 Kbytes" (AMD APM Vol. 2 15.5.1), so an
// access must lie inside the page and be 1, 2, 4 or 8 bytes (the widths of the VMCB's
// fields, Appendix B). Accesses up to the last byte work, little-endian; one byte further, an
// odd width or a null page is a contract violation: the hosted default handler prints the
// condition and traps (death tests; their profile is written, tests/support).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>

#include <hvkit/svm/vmcb.hpp>

#include "../support/profile_on_death.hpp"
#include "../support/runtime.hpp"

namespace svm = hvkit::svm;

TEST(vmcb_contract, edges_of_the_page) {
  svm::vmcb_page page{};
  svm::vmcb_view v(page);
  svm::soft_vmcb s;
  v.store(4088, 8, 0x1122'3344'5566'7788);
  EXPECT_EQ(page.bytes[4088], 0x88);  // little-endian
  EXPECT_EQ(page.bytes[4095], 0x11);
  EXPECT_EQ(v.load(4094, 2), 0x1122u);
  s.store(4095, 1, 0xab);
  EXPECT_EQ(s.load(4095, 1), 0xabu);
  EXPECT_EQ(s.load(4092, 4), 0xab00'0000u);
  svm::vmcb_view raw(static_cast<void*>(page.bytes.data()));
  EXPECT_EQ(raw.load(4088, 4), 0x5566'7788u);
}

TEST(vmcb_contract, outside_the_page_odd_width_or_null_traps) {
  const char* in_page = "precondition failed: HVKIT_EXPECTS\\(detail::access_in_page\\(offset, bytes\\)\\)";
  svm::vmcb_page page{};
  svm::vmcb_view v(page);
  svm::soft_vmcb s;
  const auto sig = testing::KilledBySignal(SIGILL);
  EXPECT_EXIT(static_cast<void>(v.load(hvkit::test::rt<std::uint16_t>(4093), 4)), sig, in_page);
  EXPECT_EXIT(v.store(hvkit::test::rt<std::uint16_t>(4096), 1, 0), sig, in_page);
  EXPECT_EXIT(static_cast<void>(v.load(0, hvkit::test::rt(3u))), sig, in_page);
  EXPECT_EXIT(static_cast<void>(s.load(hvkit::test::rt<std::uint16_t>(4089), 8)), sig, in_page);
  EXPECT_EXIT(s.store(0, hvkit::test::rt(16u), 0), sig, in_page);
  EXPECT_EXIT(svm::vmcb_view(hvkit::test::rt<void*>(nullptr)), sig, "HVKIT_EXPECTS\\(page != nullptr\\)");
}
