// SPDX-License-Identifier: MIT
// The guest-owned sets and MMU-role sets, typed by hand from docs/background.md §1 and
// SDM 4.1.3 / 4.6 (which CR bits change translation and access rights).
#include <gtest/gtest.h>

#include <hvkit/x86/guest_owned.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;

TEST(guest_owned, sets_match_the_policy) {
  // CR0: TS (bit 3) and WP (bit 16).
  HVKIT_BOTH(x86::cr0_possible_guest_owned.raw() == 0x1'0008);
  // CR4: PVI(1) DE(3) PCE(8) OSFXSR(9) OSXMMEXCPT(10) PGE(7) TSD(2) FSGSBASE(16) CET(23).
  HVKIT_BOTH(x86::cr4_possible_guest_owned.raw() == 0x81'078e);
  // Role bits: CR0.PG, CR0.WP; CR4.PSE, PAE, LA57, SMEP, SMAP, PKE, PKS.
  HVKIT_BOTH(x86::cr0_mmu_role_bits.raw() == 0x8001'0000);
  HVKIT_BOTH(x86::cr4_mmu_role_bits.raw() == 0x170'1030);
}

TEST(guest_owned, invariant) {
  // Role bits & possibly guest-owned bits: exactly CR0.WP (bit 16), nothing in CR4.
  EXPECT_EQ((hvkit::test::rt(x86::cr0_mmu_role_bits) & x86::cr0_possible_guest_owned).raw(), 0x1'0000u);
  EXPECT_TRUE((hvkit::test::rt(x86::cr4_mmu_role_bits) & x86::cr4_possible_guest_owned).none());
  // The widest policy is every possibly guest-owned bit, typed by hand.
  HVKIT_BOTH(x86::max_guest_owned::cr0_bits.raw() == 0x1'0008 && x86::max_guest_owned::cr4_bits.raw() == 0x81'078e);
}
