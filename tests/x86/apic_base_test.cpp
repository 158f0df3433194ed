// SPDX-License-Identifier: MIT
// IA32_APIC_BASE writes (SDM Vol. 3A 11.4.4, 11.12.1, 11.12.5): the x2APIC state-transition
// diagram as a literal table of the SDM's sentences, and every bit of the register against a
// per-bit description of Figure 11-5 written separately from the library's masks.
#include <gtest/gtest.h>

#include <hvkit/x86/apic_base.hpp>

#include <cstdint>

namespace x86 = hvkit::x86;
using x86::apic_base;
using x86::apic_base_fault;
using x86::apic_mode;

namespace {

constexpr std::uint64_t page = 0xfee0'0000ull;
constexpr std::uint64_t en = 1ull << 11, extd = 1ull << 10, bsp = 1ull << 8;

apic_base value_in(apic_mode m) {
  switch (m) {
    case apic_mode::disabled: return apic_base{page | bsp};
    case apic_mode::invalid: return apic_base{page | bsp | extd};
    case apic_mode::xapic: return apic_base{page | bsp | en};
    case apic_mode::x2apic: return apic_base{page | bsp | en | extd};
  }
  return apic_base{};
}

// One row per (from, to) of SDM 11.12.5, with the sentence that decides it.
struct transition {
  apic_mode from, to;
  bool valid;
  apic_base_fault fault;  // when not valid
  const char* sdm;
};
constexpr transition transitions[] = {
    {apic_mode::xapic, apic_mode::xapic, true, {}, "no change of mode"},
    {apic_mode::xapic, apic_mode::x2apic, true, {}, "from xAPIC mode: to x2APIC by setting EXTD"},
    {apic_mode::xapic, apic_mode::disabled, true, {}, "from xAPIC mode: to disabled by clearing EN"},
    {apic_mode::xapic, apic_mode::invalid, false, apic_base_fault::invalid_state,
     "EN=0 EXTD=1 is not valid; a WRMSR that attempts it causes #GP"},
    {apic_mode::x2apic, apic_mode::x2apic, true, {}, "no change of mode"},
    {apic_mode::x2apic, apic_mode::disabled, true, {},
     "from x2APIC mode the only valid transition is to disabled (EN=0, EXTD=0)"},
    {apic_mode::x2apic, apic_mode::xapic, false, apic_base_fault::x2apic_to_xapic,
     "x2APIC to xAPIC is not valid and the WRMSR causes #GP"},
    {apic_mode::x2apic, apic_mode::invalid, false, apic_base_fault::invalid_state, "EN=0 EXTD=1 is not valid"},
    {apic_mode::disabled, apic_mode::disabled, true, {}, "no change of mode"},
    {apic_mode::disabled, apic_mode::xapic, true, {}, "from disabled: to xAPIC by setting EN"},
    {apic_mode::disabled, apic_mode::x2apic, false, apic_base_fault::disabled_to_x2apic,
     "from disabled, x2APIC is reached only through xAPIC"},
    {apic_mode::disabled, apic_mode::invalid, false, apic_base_fault::invalid_state, "EN=0 EXTD=1 is not valid"},
};

}  // namespace

TEST(apic_base, mode_of_golden) {
  EXPECT_EQ(x86::mode_of(apic_base{0xfee0'0900}), apic_mode::xapic);   // BSP's power-up value
  EXPECT_EQ(x86::mode_of(apic_base{0xfee0'0800}), apic_mode::xapic);   // an AP's
  EXPECT_EQ(x86::mode_of(apic_base{0xfee0'0d00}), apic_mode::x2apic);
  EXPECT_EQ(x86::mode_of(apic_base{0xfee0'0100}), apic_mode::disabled);
  EXPECT_EQ(x86::mode_of(apic_base{0xfee0'0500}), apic_mode::invalid);
  static_assert(x86::mode_of(apic_base{0xfee0'0c00}) == apic_mode::x2apic);
}

TEST(apic_base, every_transition_of_sdm_11_12_5) {
  for (const transition& t : transitions) {
    SCOPED_TRACE(t.sdm);
    const auto r = x86::check_apic_base_write(value_in(t.from), value_in(t.to), 46, true);
    ASSERT_EQ(r.has_value(), t.valid);
    if (t.valid) {
      EXPECT_EQ(*r, t.to);
    } else {
      EXPECT_EQ(r.error(), t.fault);
    }
  }
  // The page and BSP may change within a mode (no transition rule applies to them).
  EXPECT_TRUE(x86::check_apic_base_write(apic_base{page | en}, apic_base{0xfed0'0000 | en}, 46, true).has_value());
  EXPECT_TRUE(x86::check_apic_base_write(apic_base{page | bsp | en}, apic_base{page | en}, 46, true).has_value());
}

TEST(apic_base, linux_sequences) {
  // Linux switching a processor to x2APIC (xAPIC -> x2APIC in one WRMSR), and a KVM selftest's
  // way back to xAPIC (x2APIC -> disabled -> xAPIC), on a BSP at the default page.
  constexpr apic_base xapic{0xfee0'0900}, x2apic{0xfee0'0d00}, off{0xfee0'0100};
  static_assert(x86::check_apic_base_write(xapic, x2apic, 39, true).value() == apic_mode::x2apic);
  static_assert(x86::check_apic_base_write(x2apic, off, 39, true).value() == apic_mode::disabled);
  static_assert(x86::check_apic_base_write(off, xapic, 39, true).value() == apic_mode::xapic);
  static_assert(x86::check_apic_base_write(x2apic, xapic, 39, true).error() == apic_base_fault::x2apic_to_xapic);
  // Without x2APIC (CPUID.1:ECX[21] = 0) EXTD is reserved: the same switch #GPs.
  static_assert(x86::check_apic_base_write(xapic, x2apic, 39, false).error() == apic_base_fault::reserved_bit);
}

// Figure 11-5 / Table 2-2, one bit at a time, from an xAPIC-mode value with BSP clear (so
// setting bit 8, 10 or 11 is the only change).
TEST(apic_base, every_bit_against_figure_11_5) {
  for (unsigned maxphyaddr : {32u, 36u, 39u, 40u, 46u, 48u, 52u})
    for (bool has_x2apic : {false, true})
      for (unsigned bit = 0; bit < 64; ++bit) {
        SCOPED_TRACE(testing::Message() << "MAXPHYADDR " << maxphyaddr << " x2APIC " << has_x2apic << " bit " << bit);
        const std::uint64_t from = (maxphyaddr > 32 ? 0xf'fee0'0000ull : 0xfee0'0000ull) & ((1ull << maxphyaddr) - 1);
        const std::uint64_t start = from | en;
        const std::uint64_t to = start | (1ull << bit);
        bool writable;
        if (bit <= 7 || bit == 9) writable = false;      // reserved
        else if (bit == 8) writable = true;              // BSP, R/W
        else if (bit == 10) writable = has_x2apic;       // EXTD: xAPIC -> x2APIC
        else if (bit == 11) writable = true;             // EN, already set
        else writable = bit < maxphyaddr;                // the page, then reserved
        const auto r = x86::check_apic_base_write(apic_base{start}, apic_base{to}, maxphyaddr, has_x2apic);
        EXPECT_EQ(r.has_value(), writable);
        if (!writable && !r.has_value()) {
          EXPECT_EQ(r.error(), apic_base_fault::reserved_bit);
        }
        EXPECT_EQ((x86::apic_base_reserved_bits(maxphyaddr, has_x2apic) >> bit) & 1, writable ? 0u : 1u);
      }
}

TEST(apic_base, maxphyaddr_above_52_is_52) {
  EXPECT_EQ(x86::apic_base_reserved_bits(64, true), x86::apic_base_reserved_bits(52, true));
  EXPECT_FALSE(x86::check_apic_base_write(apic_base{page | en}, apic_base{(1ull << 52) | en}, 60, true).has_value());
  EXPECT_TRUE(x86::check_apic_base_write(apic_base{page | en}, apic_base{(1ull << 51) | en}, 60, true).has_value());
}

TEST(apic_base, accessors) {
  constexpr apic_base v{0xfee0'0d00};
  static_assert(v.bsp() && v.extd() && v.enabled() && v.page() == 0xfee0'0000ull);
  static_assert(apic_base{}.raw() == 0 && !apic_base{}.enabled());
  EXPECT_EQ(apic_base{0x1234'5fff}.page(), 0x1234'5000ull);
}
