// SPDX-License-Identifier: MIT
// Bit positions typed by hand from SDM Vol. 3 2.5 (Figure 2-7), 2.2.1 (EFER), Vol. 1 3.4.3
// (EFLAGS), 4.7 (Figure 4-12, #PF error code).
#include <gtest/gtest.h>

#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/paging_mode.hpp>
#include <hvkit/x86/pfec.hpp>
#include <hvkit/x86/rflags.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;

TEST(cr0, bit_positions) {
  HVKIT_BOTH(x86::cr0::pe.raw() == 0x1 && x86::cr0::mp.raw() == 0x2 && x86::cr0::em.raw() == 0x4);
  HVKIT_BOTH(x86::cr0::ts.raw() == 0x8 && x86::cr0::et.raw() == 0x10 && x86::cr0::ne.raw() == 0x20);
  HVKIT_BOTH(x86::cr0::wp.raw() == 0x10000 && x86::cr0::am.raw() == 0x40000);
  HVKIT_BOTH(x86::cr0::nw.raw() == 0x2000'0000 && x86::cr0::cd.raw() == 0x4000'0000);
  HVKIT_BOTH(x86::cr0::pg.raw() == 0x8000'0000);
  HVKIT_BOTH(x86::cr0::defined.raw() == 0xe005'003f);
}

TEST(cr0, test_with_without) {
  // CR0 of the nested case in docs/background.md §1: actual value 0x80040033 (PG, AM, NE, ET, MP, PE).
  constexpr x86::cr0 v{0x8004'0033};
  HVKIT_BOTH(v.test(x86::cr0::pg) && !v.test(x86::cr0::wp) && v.test(x86::cr0::am));
  HVKIT_BOTH(v.with(x86::cr0::wp).raw() == 0x8005'0033);
  HVKIT_BOTH(v.without(x86::cr0::pg | x86::cr0::pe).raw() == 0x0004'0032);
  HVKIT_BOTH(!v.test(x86::cr0::pg | x86::cr0::wp) && v.any(x86::cr0::pg | x86::cr0::wp));
  HVKIT_BOTH(v.with(x86::cr0::wp, true) == x86::cr0{0x8005'0033});
  HVKIT_BOTH(v.with(x86::cr0::pg, false) == x86::cr0{0x0004'0033});
  const auto r = rt(v);
  EXPECT_EQ(r.with(rt(x86::cr0::wp)).raw(), 0x8005'0033u);
  EXPECT_EQ(r.raw(), 0x8004'0033u);  // with() left the original alone
  EXPECT_FALSE(r.test(rt(x86::cr0{})));  // the empty set is never "all set"
}

// The std::bitset convention: set/reset/flip and the compound operators change the object and
// return it; with/without (above) return copies.
TEST(cr0, set_reset_flip_and_compound_operators_mutate) {
  constexpr auto mutated = [] {
    x86::cr0 v{0x8004'0033};
    v.set(x86::cr0::wp);                                      // 0x8005'0033
    v.reset(x86::cr0::pg);                                    // 0x0005'0033
    v.flip(x86::cr0::pe | x86::cr0::ts);                      // 0x0005'003a
    v.set(x86::cr0::cd, true).set(x86::cr0::am, false);       // 0x4001'003a
    return v;
  }();
  HVKIT_BOTH(mutated.raw() == 0x4001'003a);
  constexpr auto compound = [] {
    x86::cr0 v{0x11};
    v |= x86::cr0::pg;                      // 0x8000'0011
    v &= x86::cr0::pg | x86::cr0::pe;       // 0x8000'0001
    v ^= x86::cr0::pe | x86::cr0::wp;       // 0x8001'0000
    return v;
  }();
  HVKIT_BOTH(compound.raw() == 0x8001'0000);
  x86::cr0 w = rt(x86::cr0{0x31});
  x86::cr0& ref = w.set(x86::cr0::pg);
  EXPECT_EQ(&ref, &w);
  EXPECT_EQ(w.raw(), 0x8000'0031u);
  (w |= x86::cr0::wp) ^= x86::cr0::et;
  EXPECT_EQ(w.raw(), 0x8001'0021u);
}

TEST(cr4, bit_positions) {
  HVKIT_BOTH(x86::cr4::vme.raw() == 1u << 0 && x86::cr4::pvi.raw() == 1u << 1 && x86::cr4::tsd.raw() == 1u << 2);
  HVKIT_BOTH(x86::cr4::de.raw() == 1u << 3 && x86::cr4::pse.raw() == 1u << 4 && x86::cr4::pae.raw() == 1u << 5);
  HVKIT_BOTH(x86::cr4::mce.raw() == 1u << 6 && x86::cr4::pge.raw() == 1u << 7 && x86::cr4::pce.raw() == 1u << 8);
  HVKIT_BOTH(x86::cr4::osfxsr.raw() == 1u << 9 && x86::cr4::osxmmexcpt.raw() == 1u << 10);
  HVKIT_BOTH(x86::cr4::umip.raw() == 1u << 11 && x86::cr4::la57.raw() == 1u << 12);
  HVKIT_BOTH(x86::cr4::vmxe.raw() == 0x2000 && x86::cr4::smxe.raw() == 0x4000);
  HVKIT_BOTH(x86::cr4::fsgsbase.raw() == 0x10000 && x86::cr4::pcide.raw() == 0x20000);
  HVKIT_BOTH(x86::cr4::osxsave.raw() == 0x40000 && x86::cr4::kl.raw() == 0x80000);
  HVKIT_BOTH(x86::cr4::smep.raw() == 0x100000 && x86::cr4::smap.raw() == 0x200000);
  HVKIT_BOTH(x86::cr4::pke.raw() == 0x400000 && x86::cr4::cet.raw() == 0x800000);
  HVKIT_BOTH(x86::cr4::pks.raw() == 0x1000000 && x86::cr4::uintr.raw() == 0x2000000);
  HVKIT_BOTH(x86::cr4::lass.raw() == 0x8000000 && x86::cr4::lam_sup.raw() == 0x10000000);
  HVKIT_BOTH(x86::cr4::fred.raw() == 0x1'0000'0000ull);
  // Bochs corei7_skylake_x IA32_VMX_CR4_FIXED1 = 0x003727ff: every bit it allows is defined.
  HVKIT_BOTH((x86::cr4{0x0037'27ff} & ~x86::cr4::defined).none());
}

TEST(efer, bit_positions) {
  HVKIT_BOTH(x86::efer::sce.raw() == 0x1 && x86::efer::lme.raw() == 0x100 && x86::efer::lma.raw() == 0x400);
  HVKIT_BOTH(x86::efer::nxe.raw() == 0x800 && x86::efer::svme.raw() == 0x1000);
  HVKIT_BOTH(x86::efer::lmsle.raw() == 0x2000 && x86::efer::ffxsr.raw() == 0x4000 && x86::efer::tce.raw() == 0x8000);
  HVKIT_BOTH(x86::efer::autoibrs.raw() == 0x20'0000);
}

TEST(rflags, bit_positions_and_iopl) {
  HVKIT_BOTH(x86::rflags::cf.raw() == 0x1 && x86::rflags::fixed1.raw() == 0x2 && x86::rflags::pf.raw() == 0x4);
  HVKIT_BOTH(x86::rflags::af.raw() == 0x10 && x86::rflags::zf.raw() == 0x40 && x86::rflags::sf.raw() == 0x80);
  HVKIT_BOTH(x86::rflags::tf.raw() == 0x100 && x86::rflags::if_.raw() == 0x200 && x86::rflags::df.raw() == 0x400);
  HVKIT_BOTH(x86::rflags::of.raw() == 0x800 && x86::rflags::iopl.raw() == 0x3000 && x86::rflags::nt.raw() == 0x4000);
  HVKIT_BOTH(x86::rflags::rf.raw() == 0x10000 && x86::rflags::vm.raw() == 0x20000 && x86::rflags::ac.raw() == 0x40000);
  HVKIT_BOTH(x86::rflags::vif.raw() == 0x80000 && x86::rflags::vip.raw() == 0x100000 && x86::rflags::id.raw() == 0x200000);
  HVKIT_BOTH(x86::rflags{0x3202}.iopl_value() == 3);
  HVKIT_BOTH(x86::rflags::status.raw() == 0x8d5);
  EXPECT_EQ(rt(x86::rflags{0x1202}).iopl_value(), 1);
}

TEST(pfec, hardware_bits_and_software_flags) {
  HVKIT_BOTH(x86::pfec::present.raw() == 0x1 && x86::pfec::write.raw() == 0x2 && x86::pfec::user.raw() == 0x4);
  HVKIT_BOTH(x86::pfec::rsvd.raw() == 0x8 && x86::pfec::fetch.raw() == 0x10 && x86::pfec::pk.raw() == 0x20);
  HVKIT_BOTH(x86::pfec::ss.raw() == 0x40 && x86::pfec::hlat.raw() == 0x80 && x86::pfec::sgx.raw() == 0x8000);
  // The LTR bug of docs/background.md §1: a supervisor write denied by WP is reported as 0x3.
  HVKIT_BOTH((x86::pfec::present | x86::pfec::write).raw() == 0x3);
  // An implicit supervisor write carries a software flag that is never pushed.
  constexpr auto implicit_write = x86::pfec::present | x86::pfec::write | x86::pfec::implicit_access;
  HVKIT_BOTH(implicit_write.hardware_bits().raw() == 0x3);
  HVKIT_BOTH(x86::pfec::implicit_access.raw() >= (1ull << 32));
  EXPECT_EQ(rt(implicit_write).hardware_bits().raw(), 0x3u);
}

TEST(paging_mode, sdm_table_4_1) {
  using x86::cr0, x86::cr4, x86::efer, x86::paging_mode;
  // SDM Table 4-1: PG=0 -> none; PG=1,PAE=0 -> 32-bit; PAE=1,LMA=0 -> PAE;
  // LMA=1,LA57=0 -> 4-level; LA57=1 -> 5-level.
  HVKIT_BOTH(x86::paging_mode_of(cr0{0x11}, cr4{0x20}, efer{0x500}) == paging_mode::none);
  HVKIT_BOTH(x86::paging_mode_of(cr0{0x8000'0011}, cr4{0x10}, efer{0}) == paging_mode::two_level);
  HVKIT_BOTH(x86::paging_mode_of(cr0{0x8000'0011}, cr4{0x20}, efer{0x100}) == paging_mode::pae);
  HVKIT_BOTH(x86::paging_mode_of(cr0{0x8000'0011}, cr4{0x20}, efer{0x500}) == paging_mode::four_level);
  HVKIT_BOTH(x86::paging_mode_of(cr0{0x8000'0011}, cr4{0x1020}, efer{0x500}) == paging_mode::five_level);
  EXPECT_EQ(x86::paging_mode_of(rt(cr0{0x8000'0011}), rt(cr4{0x1020}), rt(efer{0x500})), paging_mode::five_level);
  EXPECT_EQ(x86::paging_levels(paging_mode::pae), 3u);
}
