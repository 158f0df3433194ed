// SPDX-License-Identifier: MIT
// apic::classify, the ICR encoders and decoders and is_broadcast for every combination of
// the ICR's delivery mode, destination shorthand, trigger mode and level, in both APIC modes,
// against a table typed from the SDM (Vol. 3A 11.6.1, the table of valid ICR combinations for
// the Pentium 4 and Intel Xeon local xAPIC; Figures 11-12 and 11-28), not against the code.
#include <gtest/gtest.h>

#include <hvkit/x86/apic_icr.hpp>

#include <cstdint>

namespace a = hvkit::x86::apic;

namespace {

// The SDM's rows, one per (shorthand, delivery mode) with what the row says: "Valid" or
// "Invalid" (the level-trigger rows of that table are "Invalid" only in the sense of note 2,
// "the local xAPIC will override the bit setting and issue the interrupt as an edge triggered
// interrupt": the interrupt is still sent, so the trigger mode does not change the class).
//   No Shorthand        Valid    Edge  All Modes
//   Self                Valid    Edge  Fixed
//   Self                Invalid  X     Lowest Priority, NMI, INIT, SMI, Start-Up
//   All Including Self  Valid    Edge  Fixed
//   All Including Self  Invalid  X     Lowest Priority, NMI, INIT, SMI, Start-Up
//   All Excluding Self  Valid    Edge  Fixed, Lowest Priority, NMI, INIT, SMI, Start-Up
// Delivery modes 011 and 111 are "Reserved" (Figure 11-12); in x2APIC mode 001 as well
// (Figure 11-28: "001: Reserved").
constexpr bool sdm_row_valid[4][8] = {
    // fixed  lowest  smi    res3   nmi    init   startup res7
    {true, true, true, false, true, true, true, false},          // none
    {true, false, false, false, false, false, false, false},     // self
    {true, false, false, false, false, false, false, false},     // all including self
    {true, true, true, false, true, true, true, false},          // all excluding self
};

a::ipi_kind expected_kind(unsigned mode, unsigned shorthand, bool level_assert, bool level_trigger, a::apic_mode m) {
  if (!sdm_row_valid[shorthand][mode]) return a::ipi_kind::invalid;
  if (m == a::apic_mode::x2apic && mode == 1) return a::ipi_kind::invalid;
  switch (mode) {
    case 0: return a::ipi_kind::fixed;
    case 1: return a::ipi_kind::lowest_priority;
    case 2: return a::ipi_kind::smi;
    case 4: return a::ipi_kind::nmi;
    case 5:
      // SDM 11.6.1, "Level": "Only INIT level de-assert messages are allowed to have the
      // level bit set to 0"; INIT with level 0 and trigger level is that message.
      return !level_assert && level_trigger ? a::ipi_kind::init_level_deassert : a::ipi_kind::init;
    case 6: return a::ipi_kind::startup;
    default: return a::ipi_kind::invalid;
  }
}

}  // namespace

TEST(ApicIcrTable, EveryCombinationBothModes) {
  unsigned counted[8] = {};
  for (unsigned mode = 0; mode < 8; ++mode)
    for (unsigned sh = 0; sh < 4; ++sh)
      for (unsigned level = 0; level < 2; ++level)
        for (unsigned trig = 0; trig < 2; ++trig)
          for (unsigned dm = 0; dm < 2; ++dm)
            for (a::apic_mode m : {a::apic_mode::xapic, a::apic_mode::x2apic}) {
              // The ICR low word by Figure 11-12 / 11-28: vector 7:0, delivery mode 10:8,
              // destination mode 11, level 14, trigger 15, shorthand 19:18.
              const std::uint32_t low = 0x5au | (mode << 8) | (dm << 11) | (level << 14) | (trig << 15) | (sh << 18);
              a::ipi_request r;
              if (m == a::apic_mode::x2apic) {
                auto d = a::decode_x2apic_icr((std::uint64_t{0x89abcdefu} << 32) | low);
                ASSERT_TRUE(d.has_value()) << std::hex << low;
                r = *d;
                EXPECT_EQ(r.destination, 0x89abcdefu);
              } else {
                r = a::decode_xapic_icr(low, 0x8900'0000u);
                EXPECT_EQ(r.destination, 0x89u);
              }
              EXPECT_EQ(r.vector, 0x5a);
              EXPECT_EQ(static_cast<unsigned>(r.mode), mode);
              EXPECT_EQ(static_cast<unsigned>(r.dest_mode), dm);
              EXPECT_EQ(r.level_assert, level == 1);
              EXPECT_EQ(static_cast<unsigned>(r.trigger), trig);
              EXPECT_EQ(static_cast<unsigned>(r.shorthand), sh);
              // Back to the ICR: the same low word; the destination at 63:32 or 63:56.
              const std::uint64_t back = r.to_icr(m);
              EXPECT_EQ(static_cast<std::uint32_t>(back), low);
              EXPECT_EQ(back >> 32, m == a::apic_mode::x2apic ? 0x89abcdefu : 0x8900'0000u);
              const a::ipi_kind want = expected_kind(mode, sh, level == 1, trig == 1, m);
              EXPECT_EQ(a::classify(r, m), want)
                  << "mode " << mode << " shorthand " << sh << " level " << level << " trigger " << trig;
              ++counted[static_cast<unsigned>(want)];
            }
  // Every class occurs (the table is not vacuous), and as often as the SDM's table says:
  // fixed: 4 shorthands x 2 levels x 2 triggers x 2 destination modes x 2 APIC modes.
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::fixed)], 64u);
  // lowest priority: 2 shorthands, xAPIC only.
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::lowest_priority)], 16u);
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::smi)], 32u);
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::nmi)], 32u);
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::startup)], 32u);
  // INIT: 2 shorthands x 2 destination modes x 2 APIC modes x 3 of 4 (level, trigger).
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::init)], 24u);
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::init_level_deassert)], 8u);
  EXPECT_EQ(counted[static_cast<unsigned>(a::ipi_kind::invalid)], 512u - 64 - 16 - 32 - 32 - 32 - 24 - 8);
}

// A delivery mode that no 3-bit field can hold (a request built by hand, not decoded) is no
// IPI the SDM defines.
TEST(ApicIcrTable, DeliveryModeOutsideTheField) {
  a::ipi_request r;
  r.mode = static_cast<a::delivery_mode>(8);
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::invalid);
  EXPECT_EQ(a::classify(r, a::apic_mode::x2apic), a::ipi_kind::invalid);
}

// Broadcast: destination FFFF_FFFFH in x2APIC mode ("used for broadcast of interrupts in both
// logical destination and physical destination modes", SDM 11.12.9), FFH in xAPIC mode
// (11.6.2.1); only without a shorthand (the destination field "is only used when the
// destination shorthand field is set to 00B", 11.6.1).
TEST(ApicIcrTable, Broadcast) {
  for (unsigned sh = 0; sh < 4; ++sh)
    for (std::uint32_t dest : {0u, 0xfeu, 0xffu, 0x1ffu, 0xffff'fffeu, 0xffff'ffffu})
      for (a::apic_mode m : {a::apic_mode::xapic, a::apic_mode::x2apic}) {
        a::ipi_request r;
        r.shorthand = static_cast<a::destination_shorthand>(sh);
        r.destination = dest;
        const bool want = sh == 0 && dest == (m == a::apic_mode::x2apic ? 0xffff'ffffu : 0xffu);
        EXPECT_EQ(a::is_broadcast(r, m), want) << sh << " " << std::hex << dest;
      }
}
