// SPDX-License-Identifier: MIT
// KVM_HC_SEND_IPI decoding (Linux Documentation/virt/kvm/x86/hypercalls.rst: "a0: lower part of
// the bitmap of destination APIC IDs; a1: higher part of the bitmap; a2: the lowest APIC ID in
// bitmap; a3: APIC ICR"; "Bit 0 of a0 corresponds to the APIC ID in the third argument (a2),
// bit 1 corresponds to the APIC ID a2+1, and so on"; at most 128 destinations per call in
// 64-bit mode and 64 in 32-bit mode), golden values typed from that text.
#include <gtest/gtest.h>

#include <hvkit/x86/apic_destination.hpp>
#include <hvkit/x86/pv_send_ipi.hpp>

#include <cstdint>
#include <vector>

namespace a = hvkit::x86::apic;
namespace pv = hvkit::x86::pv_ipi;

namespace {

std::vector<std::uint32_t> ids(const pv::send_ipi& s) {
  std::vector<std::uint32_t> v;
  s.for_each_destination([&](const a::ipi_request& r) { v.push_back(r.destination); });
  return v;
}

TEST(PvSendIpi, Number) { EXPECT_EQ(pv::kvm_hc_send_ipi, 10u); }

TEST(PvSendIpi, BitmapToApicIds64) {
  // a0 bits 0, 3; a1 bit 0 and 63; a2 = 8: IDs 8, 11, 8+64, 8+127.
  auto s = pv::decode_send_ipi(0x9, 0x8000'0000'0000'0001ull, 8, 0x00f3, true);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(ids(*s), (std::vector<std::uint32_t>{8, 11, 72, 135}));
  // The same IPI as an ICR write of physical, no-shorthand fixed vector F3H to that ID.
  a::ipi_request want = a::decode_x2apic_icr(0x0000'000b'0000'00f3ull).value();
  bool seen = false;
  s->for_each_destination([&](const a::ipi_request& r) {
    if (r.destination == 11) {
      EXPECT_EQ(r, want);
      seen = true;
    }
  });
  EXPECT_TRUE(seen);
}

TEST(PvSendIpi, BitmapToApicIds32) {
  // A 32-bit caller: each half is 32 bits; a1 bit 0 is a2 + 32. Upper register halves ignored.
  auto s = pv::decode_send_ipi(0xffff'ffff'0000'0002ull, 0x1, 0, 0x00ec, false);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(ids(*s), (std::vector<std::uint32_t>{1, 32}));
}

TEST(PvSendIpi, NmiAndIcrFields) {
  auto s = pv::decode_send_ipi(1, 0, 3, 0x0400 | (1u << 14), true);  // NMI, assert
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ipi.mode, a::delivery_mode::nmi);
  EXPECT_TRUE(s->ipi.level_assert);
}

TEST(PvSendIpi, RefusedIcrs) {
  // Logical destination mode (bit 11) and any shorthand (19:18) are -KVM_EINVAL.
  EXPECT_EQ(pv::decode_send_ipi(1, 0, 0, 0x0800 | 0xec, true).error(), pv::send_ipi_error::logical_destination);
  EXPECT_EQ(pv::decode_send_ipi(1, 0, 0, (3u << 18) | 0xec, true).error(), pv::send_ipi_error::shorthand);
  hvkit::result<unsigned, pv::send_ipi_error> bad{hvkit::unexpected(pv::send_ipi_error::shorthand)};
  EXPECT_EQ(pv::return_value(bad), static_cast<std::uint64_t>(-22));
  EXPECT_EQ(pv::return_value(hvkit::result<unsigned, pv::send_ipi_error>{3u}), 3u);
}

TEST(PvSendIpi, SameDestinationPathAsIcr) {
  // Every request the hypercall yields reaches exactly the APIC it names, through the same
  // destination predicate as an ICR write.
  auto s = pv::decode_send_ipi(0x5, 0, 2, 0xec, true);  // IDs 2 and 4
  ASSERT_TRUE(s.has_value());
  unsigned hits[8] = {};
  s->for_each_destination([&](const a::ipi_request& r) {
    for (std::uint32_t id = 0; id < 8; ++id)
      if (a::is_destination(r, a::apic_mode::x2apic, 0, {id, a::x2apic_logical_id(id), a::xapic_model::flat})) ++hits[id];
  });
  const unsigned want[8] = {0, 0, 1, 0, 1, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(hits[i], want[i]) << i;
}

TEST(PvSendIpi, IdOverflowSkipped) {
  auto s = pv::decode_send_ipi(0x3, 0, 0xffff'ffffu, 0xec, true);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(ids(*s), (std::vector<std::uint32_t>{0xffff'ffffu}));
}

}  // namespace
