// SPDX-License-Identifier: MIT
// CR guest/host masks and guest-owned bits (docs/background.md §1, SDM 25.6.6, 26.3), the
// guest-visible value, read_cr0_bits() VMCS-read counting, CR4.CET/CR0.WP, and CR-access
// exits (SDM Table 28-3; MOV CR, CLTS, LMSW) feeding paging::cr_write_actions.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include <hvkit/vmx/cr_access.hpp>
#include <hvkit/vmx/cr_mask.hpp>
#include <hvkit/vmx/guest_cr.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;

TEST(vmx_cr_mask, policy_by_features) {
  // Everything allowed to the guest: TS, WP (with EPT); PVI DE PCE OSFXSR OSXMMEXCPT PGE TSD FSGSBASE CET.
  constexpr vmx::cr_mask_features ept_all{true, x86::cr4::defined};
  constexpr auto o = vmx::make_guest_owned(ept_all);
  HVKIT_BOTH(o.cr0.raw() == 0x1'0008u);
  HVKIT_BOTH(o.cr4.raw() == 0x81'078eu);
  HVKIT_BOTH(o.cr0_mask() == 0xffff'ffff'fffe'fff7u);  // the mask of the nested case
  // Shadow paging: WP stays intercepted.
  constexpr auto s = vmx::make_guest_owned(vmx::cr_mask_features{false, x86::cr4::defined});
  HVKIT_BOTH(s.cr0.raw() == 0x8u);
  HVKIT_BOTH(s.cr0_mask() == 0xffff'ffff'ffff'fff7u);
  // A guest without FSGSBASE and CET in its CPUID: those bits stay host-owned.
  constexpr auto n = vmx::make_guest_owned(vmx::cr_mask_features{true, x86::cr4::defined.without(x86::cr4::fsgsbase | x86::cr4::cet)});
  HVKIT_BOTH(n.cr4.raw() == 0x78eu);
  // A narrower compile-time policy: TS only, no CR4 bits.
  using ts_only = x86::guest_owned_set<x86::cr0::ts>;
  constexpr auto t = vmx::make_guest_owned<ts_only>(ept_all);
  HVKIT_BOTH(t.cr0.raw() == 0x8u && t.cr4.none());
}

TEST(vmx_cr_mask, guest_visible_value_nested_case) {
  // docs/background.md §1: actual 0x80040033, shadow 0x80050033, mask 0xfffffffffffefff7.
  constexpr auto v = vmx::guest_visible_cr0(x86::cr0{0x8004'0033}, x86::cr0{0x8005'0033}, 0xffff'ffff'fffe'fff7);
  HVKIT_BOTH(!v.test(x86::cr0::wp));
  HVKIT_BOTH(v.raw() == 0x8004'0033u);
  // Host owns WP instead: the shadow's WP=1 is what the guest sees.
  HVKIT_BOTH(vmx::guest_visible(0x8004'0033, 0x8005'0033, 0xffff'ffff'ffff'fff7) == 0x8005'0033u);
  // Exhaustive over 4 bits of actual/shadow/mask against the per-bit rule written here.
  std::size_t n = 0;
  for (unsigned a = 0; a < 16; ++a)
    for (unsigned s = 0; s < 16; ++s)
      for (unsigned m = 0; m < 16; ++m, ++n) {
        unsigned expect = 0;
        for (unsigned b = 0; b < 4; ++b) {
          const unsigned bit = (m >> b) & 1 ? (s >> b) & 1 : (a >> b) & 1;
          expect |= bit << b;
        }
        EXPECT_EQ(vmx::guest_visible(hvkit::test::rt(a), s, m), expect);
      }
  std::printf("compared %zu actual/shadow/mask combinations with the per-bit rule\n", n);
}

TEST(vmx_cr_mask, mov_to_cr_exit_rule) {
  // Toggling a guest-owned WP does not exit; toggling a host-owned bit does (SDM 26.1.3).
  const std::uint64_t mask = 0xffff'ffff'fffe'fff7;
  EXPECT_FALSE(vmx::mov_to_cr_exits(0x8004'0033, 0x8005'0033 & ~0x1'0000ull, mask));
  EXPECT_FALSE(vmx::mov_to_cr_exits(0x8005'0033, 0x8004'0033, mask));
  EXPECT_TRUE(vmx::mov_to_cr_exits(0x8005'0033, 0x8005'0033 & ~0x8000'0000ull, mask));
  // The bochs measurement: mask 0x80010021 (WP host-owned) exits on a WP toggle; 0x80000021 does not.
  EXPECT_TRUE(vmx::mov_to_cr_exits(0x8001'0033, 0x8000'0033, 0x8001'0021));
  EXPECT_FALSE(vmx::mov_to_cr_exits(0x8001'0033, 0x8000'0033, 0x8000'0021));
}

TEST(vmx_cr_mask, cet_requires_wp) {
  HVKIT_BOTH(!vmx::cet_wp_consistent(x86::cr0{0x8000'0033}, x86::cr4{x86::cr4::cet.raw()}));
  HVKIT_BOTH(vmx::cet_wp_consistent(x86::cr0{0x8001'0033}, x86::cr4{x86::cr4::cet.raw()}));
  HVKIT_BOTH(vmx::cet_wp_consistent(x86::cr0{0x8000'0033}, x86::cr4{0x20}));
}

TEST(vmx_guest_cr, reads_vmcs_only_for_guest_owned_bits) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::guest_cr0, std::uint64_t{0x8000'0033});  // the guest cleared WP without an exit
  v.store(vmx::fields::guest_cr4, std::uint64_t{0x20a0});
  const auto owned = vmx::make_guest_owned({true, x86::cr4::defined});
  vmx::guest_cr cr(x86::cr0{0x8001'0033}, x86::cr4{0x20a0}, owned);
  cr.on_vm_exit();
  // Host-owned bits: answered from the cache, no VMREAD.
  EXPECT_EQ(cr.read_cr0_bits(v, x86::cr0::pg | x86::cr0::pe).value().raw(), 0x8000'0001u);
  EXPECT_EQ(cr.read_cr4_bits(v, x86::cr4::pae | x86::cr4::smep).value().raw(), 0x20u);
  EXPECT_EQ(v.reads(), 0u);
  // WP is guest-owned: one VMREAD, and it sees the guest's WP=0 (the stale-role bug's cure).
  EXPECT_FALSE(cr.read_cr0_bits(v, x86::cr0::wp).value().test(x86::cr0::wp));
  EXPECT_EQ(v.reads(), 1u);
  EXPECT_FALSE(cr.read_cr0_bits(v, x86::cr0::wp | x86::cr0::pg).value().test(x86::cr0::wp));
  EXPECT_EQ(v.reads(), 1u);  // not again before the next exit
  cr.on_vm_exit();
  v.store(vmx::fields::guest_cr0, std::uint64_t{0x8001'0033});
  EXPECT_TRUE(cr.read_cr0_bits(v, x86::cr0::wp).value().test(x86::cr0::wp));
  EXPECT_EQ(v.reads(), 2u);
  // PGE is guest-owned in CR4 (read_cr_bits picks CR4 from the mask's type).
  EXPECT_TRUE(cr.read_cr_bits(v, x86::cr4::pge).value().test(x86::cr4::pge));
  EXPECT_EQ(v.reads(), 3u);
  // Shadow paging policy: WP is host-owned, asking for it never reads.
  vmx::guest_cr sh(x86::cr0{0x8001'0033}, x86::cr4{0x20}, vmx::make_guest_owned({false, x86::cr4::defined}));
  v.reset_counts();
  sh.on_vm_exit();
  EXPECT_TRUE(sh.read_cr0_bits(v, x86::cr0::wp).value().test(x86::cr0::wp));
  EXPECT_EQ(v.reads(), 0u);
}

namespace {
constexpr vmx::cr_access_qualification mov_to_cr(unsigned cr, unsigned gpr) {
  return vmx::cr_access_qualification{cr | (0u << 4) | (gpr << 8)};
}
}  // namespace

TEST(vmx_cr_access, qualification_decoding) {
  // MOV to CR4 from RBX (gpr 3): 0x304.
  constexpr vmx::cr_access_qualification q{0x304};
  HVKIT_BOTH(q.cr() == 4 && q.gpr() == 3 && q.type() == vmx::cr_access_qualification::access::mov_to_cr);
  // MOV from CR3 to R15: 0xf13.
  constexpr vmx::cr_access_qualification r{0xf13};
  HVKIT_BOTH(r.cr() == 3 && r.gpr() == 15 && r.type() == vmx::cr_access_qualification::access::mov_from_cr);
  // CLTS: type 2.
  HVKIT_BOTH(vmx::cr_access_qualification{0x20}.type() == vmx::cr_access_qualification::access::clts);
  // LMSW from memory with source 0x000b: type 3, bit 6, data in 31:16.
  constexpr vmx::cr_access_qualification l{0x000b'0070};
  HVKIT_BOTH(l.type() == vmx::cr_access_qualification::access::lmsw && l.lmsw_memory_operand() && l.lmsw_source() == 0xb);
}

TEST(vmx_cr_access, clts_and_lmsw) {
  HVKIT_BOTH(vmx::cr0_after_clts(x86::cr0{0x8000'003b}).raw() == 0x8000'0033u);
  // LMSW loads PE MP EM TS but cannot clear PE.
  HVKIT_BOTH(vmx::cr0_after_lmsw(x86::cr0{0x8000'0031}, 0x000e).raw() == 0x8000'003fu);
  HVKIT_BOTH(vmx::cr0_after_lmsw(x86::cr0{0x0000'0010}, 0x0001).raw() == 0x11u);
  HVKIT_BOTH(vmx::cr0_after_lmsw(x86::cr0{0x8000'003f}, 0xfff0).raw() == 0x8000'0031u);
}

TEST(vmx_cr_access, mov_to_cr0_wp_toggle_feeds_paging) {
  const vmx::cr_context ctx{x86::cr0{0x8001'0033}, x86::cr4{0x20a0}, x86::efer{0xd01}, 0x1000, x86::cr4::defined};
  // WP 1 -> 0 under EPT: refresh permissions only, never reset the MMU.
  auto o = vmx::evaluate_cr_write(mov_to_cr(0, 0), ctx, 0x8000'0033, paging::paging_kind::two_dimensional);
  ASSERT_EQ(o.fault, vmx::cr_write_fault::none);
  EXPECT_EQ(o.cr, 0u);
  EXPECT_EQ(o.after.cr0.raw(), 0x8000'0033u);
  EXPECT_EQ(o.actions, paging::mmu_actions::refresh_permissions);
  // Same toggle with shadow paging: reset.
  auto s = vmx::evaluate_cr_write(mov_to_cr(0, 0), ctx, 0x8000'0033, paging::paging_kind::shadow);
  EXPECT_TRUE(s.actions.test(paging::mmu_actions::reset_mmu));
  // WP toggle with paging off: nothing to do.
  const vmx::cr_context off{x86::cr0{0x1'0011}, x86::cr4{}, x86::efer{}, 0, x86::cr4::defined};
  auto p = vmx::evaluate_cr_write(mov_to_cr(0, 2), off, 0x11, paging::paging_kind::two_dimensional);
  EXPECT_EQ(p.fault, vmx::cr_write_fault::none);
  EXPECT_TRUE(p.actions.none());
}

TEST(vmx_cr_access, illegal_writes_fault) {
  const vmx::cr_context cet{x86::cr0{0x8001'0033}, x86::cr4{0x80'20a0}, x86::efer{0xd01}, 0x1000, x86::cr4::defined};
  // Clearing WP with CR4.CET=1: #GP.
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(0, 0), cet, 0x8000'0033, paging::paging_kind::two_dimensional).fault,
            vmx::cr_write_fault::clear_wp_with_cet);
  // Setting CET with WP=0: #GP.
  const vmx::cr_context nowp{x86::cr0{0x8000'0033}, x86::cr4{0x20a0}, x86::efer{0xd01}, 0x1000, x86::cr4::defined};
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(4, 1), nowp, 0x80'20a0, paging::paging_kind::two_dimensional).fault,
            vmx::cr_write_fault::cet_without_wp);
  // CR0: PG without PE, NW without CD, bits 63:32.
  const vmx::cr_context real{x86::cr0{0x10}, x86::cr4{}, x86::efer{}, 0, x86::cr4::defined};
  EXPECT_EQ(vmx::check_cr0_write(real, x86::cr0{0x8000'0010}), vmx::cr_write_fault::pg_without_pe);
  EXPECT_EQ(vmx::check_cr0_write(real, x86::cr0{0x2000'0010}), vmx::cr_write_fault::nw_without_cd);
  EXPECT_EQ(vmx::check_cr0_write(real, x86::cr0{0x1'0000'0010}), vmx::cr_write_fault::reserved_bit);
  // Long mode: PG with LME and no PAE; clearing PAE with LMA; PCIDE with CR3[11:0] != 0.
  const vmx::cr_context lme{x86::cr0{0x11}, x86::cr4{}, x86::efer{0x100}, 0, x86::cr4::defined};
  EXPECT_EQ(vmx::check_cr0_write(lme, x86::cr0{0x8000'0011}), vmx::cr_write_fault::long_mode_without_pae);
  const vmx::cr_context lma{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1005, x86::cr4::defined};
  EXPECT_EQ(vmx::check_cr4_write(lma, x86::cr4{0x0}), vmx::cr_write_fault::clear_pae_in_long_mode);
  EXPECT_EQ(vmx::check_cr4_write(lma, x86::cr4{0x1020}), vmx::cr_write_fault::change_la57_in_long_mode);
  EXPECT_EQ(vmx::check_cr4_write(lma, x86::cr4{0x2'0020}), vmx::cr_write_fault::pcide_bad_state);
  // A CR4 bit the guest's CPUID does not allow is reserved for it.
  const vmx::cr_context nofsgs{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000,
                               x86::cr4::defined.without(x86::cr4::fsgsbase)};
  EXPECT_EQ(vmx::check_cr4_write(nofsgs, x86::cr4{0x1'0020}), vmx::cr_write_fault::reserved_bit);
  // MOV from CR is not a write; MOV to CR3 returns the value; CR8 bits 63:4 are reserved.
  EXPECT_EQ(vmx::evaluate_cr_write(vmx::cr_access_qualification{0x13}, lma, 0, paging::paging_kind::shadow).cr, ~0u);
  vmx::cr_context lma36 = lma;
  lma36.maxphyaddr = 36;
  auto c3 = vmx::evaluate_cr_write(mov_to_cr(3, 0), lma36, 0x5000, paging::paging_kind::shadow);
  EXPECT_EQ(c3.cr, 3u);
  EXPECT_EQ(c3.value, 0x5000u);
  EXPECT_EQ(c3.fault, vmx::cr_write_fault::none);
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(8, 0), lma, 0xf, paging::paging_kind::shadow).fault, vmx::cr_write_fault::none);
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(8, 0), lma, 0x10, paging::paging_kind::shadow).fault,
            vmx::cr_write_fault::reserved_bit);
}

TEST(vmx_cr_access, mov_from_cr3_and_cr8) {
  const vmx::cr_context ctx{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x7000, x86::cr4::defined};
  // MOV from CR3 to RDI (gpr 7): qualification 0x713.
  const auto r = vmx::evaluate_cr_read(vmx::cr_access_qualification{0x713}, ctx, 0);
  EXPECT_TRUE(r.valid);
  EXPECT_EQ(r.gpr, 7u);
  EXPECT_EQ(r.value, 0x7000u);
  // MOV from CR8 to RAX: 0x18.
  const auto t = vmx::evaluate_cr_read(vmx::cr_access_qualification{0x18}, ctx, 0x9);
  EXPECT_TRUE(t.valid && t.gpr == 0 && t.value == 9);
  // A MOV to CR is not a read.
  EXPECT_FALSE(vmx::evaluate_cr_read(vmx::cr_access_qualification{0x3}, ctx, 0).valid);
}

TEST(vmx_cr_access, clts_and_lmsw_exits) {
  const vmx::cr_context ctx{x86::cr0{0x8001'003b}, x86::cr4{0x20}, x86::efer{0x500}, 0, x86::cr4::defined};
  auto c = vmx::evaluate_cr_write(vmx::cr_access_qualification{0x20}, ctx, 0, paging::paging_kind::two_dimensional);
  EXPECT_EQ(c.after.cr0.raw(), 0x8001'0033u);
  EXPECT_TRUE(c.actions.none());  // TS does not feed the MMU
  auto l = vmx::evaluate_cr_write(vmx::cr_access_qualification{0x0000'0030}, ctx, 0, paging::paging_kind::two_dimensional);
  EXPECT_EQ(l.after.cr0.raw(), 0x8001'0031u);  // LMSW 0: MP EM TS cleared, PE kept
}

TEST(vmx_cr_access, vmcs_values_with_fixed_bits) {
  // Bochs FIXED0/FIXED1 (docs/bochs-and-qemu-facts.md): CR0 0x80000021/0xffffffff, CR4 0x2000/0x003727ff.
  constexpr vmx::cr_fixed f0{0x8000'0021, 0xffff'ffff}, f4{0x2000, 0x0037'27ff};
  // A real-mode guest value 0x10 under unrestricted guest: only NE forced; the shadow keeps 0x10.
  constexpr auto u = vmx::cr0_values_for(x86::cr0{0x10}, f0, true);
  HVKIT_BOTH(u.actual == 0x30u && u.read_shadow == 0x10u);
  constexpr auto r = vmx::cr0_values_for(x86::cr0{0x10}, f0, false);
  HVKIT_BOTH(r.actual == 0x8000'0031u && r.read_shadow == 0x10u);
  // CR4: VMXE forced in the real value, hidden from the guest by the shadow.
  constexpr auto c4 = vmx::cr4_values_for(x86::cr4{0x20}, f4);
  HVKIT_BOTH(c4.actual == 0x2020u && c4.read_shadow == 0x20u);
}

// MOV to CR3 in IA-32e mode (SDM Vol. 2B MOV CR, 64-bit mode exceptions; 4.10.4.1; Tables
// 4-12/4-13): bits 63:MAXPHYADDR reserved, bit 63 the no-flush hint with CR4.PCIDE=1 (not
// stored), bits 61/62 LAM_U57/LAM_U48 only with LAM. Masks typed by hand.
TEST(vmx_cr_access, mov_to_cr3_reserved_bits_and_noflush) {
  using F = vmx::cr_write_fault;
  vmx::cr_context c{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000, x86::cr4::defined};
  c.maxphyaddr = 36;
  c.cs_l = true;  // 64-bit mode: the whole register is the operand
  const auto mov3 = [&](std::uint64_t v) {
    return vmx::evaluate_cr_write(mov_to_cr(3, 1), c, v, paging::paging_kind::two_dimensional);
  };
  EXPECT_EQ(mov3(0x8'ffff'f018).fault, F::none);        // bits 35:12 and PWT/PCD
  EXPECT_EQ(mov3(0x10'0000'0000).fault, F::cr3_reserved_bit);  // bit 36
  EXPECT_EQ(mov3(0x8000'0000'0000'5000).fault, F::cr3_reserved_bit);  // bit 63 with PCIDE=0
  EXPECT_EQ(mov3(0x4000'0000'0000'5000).fault, F::cr3_reserved_bit);  // LAM_U48 without LAM
  HVKIT_BOTH(vmx::check_cr3_write(vmx::cr_context{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0,
                                                  x86::cr4::defined, true, 52},
                                  std::uint64_t{1} << 52)
                 .fault == vmx::cr_write_fault::cr3_reserved_bit);
  HVKIT_BOTH(vmx::check_cr3_write(vmx::cr_context{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0,
                                                  x86::cr4::defined, true, 52},
                                  std::uint64_t{1} << 51)
                 .fault == vmx::cr_write_fault::none);
  // With LAM: 61 and 62 may be set, 60 may not.
  c.lam = true;
  EXPECT_EQ(mov3(0x6000'0000'0000'5000).fault, F::none);
  EXPECT_EQ(mov3(0x6000'0000'0000'5000).value, 0x6000'0000'0000'5000u);
  EXPECT_EQ(mov3(0x1000'0000'0000'5000).fault, F::cr3_reserved_bit);
  c.lam = false;
  // CR4.PCIDE=1: bit 63 is the no-flush hint, stripped from the value; PCID bits 11:0 kept.
  c.cr4 = x86::cr4{0x2'0020};
  const auto nf = mov3(0x8000'0000'0000'5001);
  EXPECT_EQ(nf.fault, F::none);
  EXPECT_TRUE(nf.cr3_noflush);
  EXPECT_EQ(nf.value, 0x5001u);
  const auto fl = mov3(0x5002);
  EXPECT_FALSE(fl.cr3_noflush);
  EXPECT_EQ(fl.value, 0x5002u);
  EXPECT_EQ(mov3(0xc000'0000'0000'5001).fault, F::cr3_reserved_bit);  // 63 stripped, 62 reserved
  // Outside IA-32e mode (32-bit source): no reserved-bit check of CR3 itself, bit 63 is not special.
  const vmx::cr_context pae{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{}, 0x1000, x86::cr4::defined};
  const auto p = vmx::check_cr3_write(pae, 0xffff'ffe0);
  EXPECT_EQ(p.fault, F::none);
  EXPECT_EQ(p.value, 0xffff'ffe0u);
  EXPECT_FALSE(p.noflush);
}

// Clearing CR0.PG: #GP in 64-bit mode (EFER.LMA=1, CS.L=1) and while CR4.PCIDE=1; allowed
// in compatibility mode with PCIDE=0, which is how IA-32e mode is left (SDM Vol. 2B MOV CR;
// Vol. 3A 10.8.5.4).
TEST(vmx_cr_access, clearing_pg_in_64bit_mode_faults) {
  using F = vmx::cr_write_fault;
  vmx::cr_context c{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000, x86::cr4::defined};
  c.cs_l = true;
  HVKIT_BOTH(vmx::check_cr0_write(vmx::cr_context{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000,
                                                  x86::cr4::defined, true},
                                  x86::cr0{0x0001'0033}) == vmx::cr_write_fault::clear_pg_in_64bit_mode);
  const auto o = vmx::evaluate_cr_write(mov_to_cr(0, 0), c, 0x0001'0033, paging::paging_kind::two_dimensional);
  EXPECT_EQ(o.fault, F::clear_pg_in_64bit_mode);
  EXPECT_TRUE(o.actions.none());
  EXPECT_EQ(vmx::check_cr0_write(c, x86::cr0{0x8000'0033}), F::none);  // PG kept, WP cleared: fine
  c.cs_l = false;                                                        // compatibility mode
  EXPECT_EQ(vmx::check_cr0_write(c, x86::cr0{0x0001'0033}), F::none);
  c.cr4 = x86::cr4{0x2'0020};                                            // ... with PCIDE=1
  EXPECT_EQ(vmx::check_cr0_write(c, x86::cr0{0x0001'0033}), F::clear_pg_with_pcide);
  // Legacy protected mode with paging: clearing PG is fine.
  const vmx::cr_context legacy{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{}, 0x1000, x86::cr4::defined};
  EXPECT_EQ(vmx::check_cr0_write(legacy, x86::cr0{0x0001'0033}), F::none);
}

// Activating IA-32e mode (CR0.PG 0->1 with EFER.LME=1) is #GP(0) without CR4.PAE and with
// CS.L=1 (SDM 10.8.5; AMD APM Vol. 2 "Enabling and Activating Long Mode"); with PAE and
// CS.L=0 it goes through.
TEST(vmx_cr_access, activating_ia32e_mode_needs_pae_and_cs_l_clear) {
  using F = vmx::cr_write_fault;
  // Protected mode, paging off, LME=1, PAE=1: CR0 = PE|ET|NE, the write sets PG (0x80000031).
  vmx::cr_context c{x86::cr0{0x31}, x86::cr4{0x20}, x86::efer{0x100}, 0x1000, x86::cr4::defined};
  HVKIT_BOTH(vmx::check_cr0_write(vmx::cr_context{x86::cr0{0x31}, x86::cr4{0x20}, x86::efer{0x100}, 0x1000,
                                                  x86::cr4::defined, true},
                                  x86::cr0{0x8000'0031}) == vmx::cr_write_fault::activate_ia32e_with_cs_l);
  EXPECT_EQ(vmx::check_cr0_write(c, x86::cr0{0x8000'0031}), F::none);
  const auto ok = vmx::evaluate_cr_write(mov_to_cr(0, 0), c, 0x8000'0031, paging::paging_kind::two_dimensional);
  EXPECT_EQ(ok.fault, F::none);
  EXPECT_TRUE(ok.after.efer.test(x86::efer::lma));  // LMA = LME && PG
  c.cs_l = true;
  const auto bad = vmx::evaluate_cr_write(mov_to_cr(0, 0), c, 0x8000'0031, paging::paging_kind::two_dimensional);
  EXPECT_EQ(bad.fault, F::activate_ia32e_with_cs_l);
  EXPECT_TRUE(bad.actions.none());
  // PAE missing is reported first (both are #GP(0)).
  c.cr4 = x86::cr4{};
  EXPECT_EQ(vmx::check_cr0_write(c, x86::cr0{0x8000'0031}), F::long_mode_without_pae);
  // Without LME, setting PG enters legacy paging: CS.L plays no part.
  const vmx::cr_context legacy{x86::cr0{0x31}, x86::cr4{0x20}, x86::efer{}, 0x1000, x86::cr4::defined, true};
  EXPECT_EQ(vmx::check_cr0_write(legacy, x86::cr0{0x8000'0031}), F::none);
  // PG already set (LMA=1): rewriting CR0 with PG=1 activates nothing.
  const vmx::cr_context lma{x86::cr0{0x8000'0031}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000, x86::cr4::defined, true};
  EXPECT_EQ(vmx::check_cr0_write(lma, x86::cr0{0x8001'0031}), F::none);
}

// CR0[31:0]'s undefined bits are ignored on MOV to CR0 (no #GP; SDM 2.5 only faults bits
// 63:32), and EFER.LMA follows LME && PG after the write (SDM 2.2.1, 10.8.5).
TEST(vmx_cr_access, cr0_undefined_low_bits_ignored_and_lma_follows_pg) {
  using F = vmx::cr_write_fault;
  constexpr vmx::cr_context prot{x86::cr0{0x11}, x86::cr4{0x20}, x86::efer{0x100}, 0x1000, x86::cr4::defined};
  // 0x0000'0051: PE, ET and bit 6 (undefined).
  HVKIT_BOTH(vmx::check_cr0_write(prot, x86::cr0{0x51}) == vmx::cr_write_fault::none);
  // 0x0ffe_ffe1 sets PE, NE, AM and undefined bits 6-15, 17, 19-27: PE, ET, NE and AM stay.
  HVKIT_BOTH(vmx::cr0_after_mov(x86::cr0{0x0ffe'ffe1}) == x86::cr0{0x0004'0031});
  const auto o = vmx::evaluate_cr_write(mov_to_cr(0, 0), prot, 0x51, paging::paging_kind::two_dimensional);
  EXPECT_EQ(o.fault, F::none);
  EXPECT_EQ(o.after.cr0, x86::cr0{0x11});
  EXPECT_EQ(o.after.efer, x86::efer{0x100});
  // PG 0->1 with LME=1 and PAE=1 activates IA-32e mode: LMA (bit 10) set in `after`.
  const auto on = vmx::evaluate_cr_write(mov_to_cr(0, 0), prot, 0x8000'0011, paging::paging_kind::two_dimensional);
  EXPECT_EQ(on.fault, F::none);
  EXPECT_EQ(on.after.efer, x86::efer{0x500});
  // Leaving IA-32e mode from compatibility mode (CS.L=0, PCIDE=0) clears LMA.
  const vmx::cr_context compat{x86::cr0{0x8000'0011}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000, x86::cr4::defined};
  const auto off = vmx::evaluate_cr_write(mov_to_cr(0, 0), compat, 0x11, paging::paging_kind::two_dimensional);
  EXPECT_EQ(off.fault, F::none);
  EXPECT_EQ(off.after.efer, x86::efer{0x100});
}

// SDM Vol. 2B "MOV—Move to/from Control Registers": the operand size is 64 bits in 64-bit
// mode and 32 bits anywhere else, so outside 64-bit mode the upper half of the source
// register is not part of the value written. evaluate_cr_write gets the whole register as
// saved at the exit and must drop that half itself: in compatibility mode (EFER.LMA=1,
// CS.L=0) and in protected mode a write with stale upper bits is legal; in 64-bit mode
// (CS.L=1) the same register value sets CR0[63:32] and is #GP(0) (SDM 2.5).
TEST(vmx_cr_access, mov_to_cr_outside_64bit_mode_uses_the_low_32_bits) {
  using F = vmx::cr_write_fault;
  constexpr std::uint64_t rax = 0xdead'beef'8001'0033;  // stale upper half, low half: PG WP NE ET MP PE
  constexpr vmx::cr_context compat{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000,
                                   x86::cr4::defined, /*cs_l=*/false, /*maxphyaddr=*/36};
  constexpr vmx::cr_context mode64{x86::cr0{0x8001'0033}, x86::cr4{0x20}, x86::efer{0x500}, 0x1000,
                                   x86::cr4::defined, /*cs_l=*/true, /*maxphyaddr=*/36};
  constexpr vmx::cr_context prot{x86::cr0{0x11}, x86::cr4{0x0}, x86::efer{0x0}, 0x1000,
                                 x86::cr4::defined, /*cs_l=*/false, /*maxphyaddr=*/36};
  HVKIT_BOTH(!vmx::in_64bit_mode(compat) && vmx::in_64bit_mode(mode64) && !vmx::in_64bit_mode(prot));
  HVKIT_BOTH(vmx::mov_to_cr_source(compat, rax) == 0x8001'0033u);
  HVKIT_BOTH(vmx::mov_to_cr_source(mode64, rax) == rax);
  // CR0.
  const auto c0 = vmx::evaluate_cr_write(mov_to_cr(0, 0), compat, rax, paging::paging_kind::two_dimensional);
  EXPECT_EQ(c0.fault, F::none);
  EXPECT_EQ(c0.after.cr0, x86::cr0{0x8001'0033});
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(0, 0), mode64, rax, paging::paging_kind::two_dimensional).fault,
            F::reserved_bit);
  const auto p0 = vmx::evaluate_cr_write(mov_to_cr(0, 0), prot, 0xffff'ffff'0000'0031, paging::paging_kind::two_dimensional);
  EXPECT_EQ(p0.fault, F::none);
  EXPECT_EQ(p0.after.cr0, x86::cr0{0x31});
  // CR4: bit 40 is reserved; only in 64-bit mode is it part of the operand.
  constexpr std::uint64_t r4 = (std::uint64_t{1} << 40) | 0x20;
  const auto c4 = vmx::evaluate_cr_write(mov_to_cr(4, 0), compat, r4, paging::paging_kind::two_dimensional);
  EXPECT_EQ(c4.fault, F::none);
  EXPECT_EQ(c4.after.cr4, x86::cr4{0x20});
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(4, 0), mode64, r4, paging::paging_kind::two_dimensional).fault,
            F::reserved_bit);
  // CR3 in IA-32e mode with MAXPHYADDR 36: bits 63:36 reserved, but in compatibility mode the
  // operand is 32 bits wide and cannot reach them.
  constexpr std::uint64_t r3 = 0xffff'ffff'0000'5000;
  const auto c3 = vmx::evaluate_cr_write(mov_to_cr(3, 0), compat, r3, paging::paging_kind::two_dimensional);
  EXPECT_EQ(c3.fault, F::none);
  EXPECT_EQ(c3.value, 0x5000u);
  EXPECT_EQ(vmx::check_cr3_write(compat, r3).value, 0x5000u);
  EXPECT_EQ(vmx::evaluate_cr_write(mov_to_cr(3, 0), mode64, r3, paging::paging_kind::two_dimensional).fault,
            F::cr3_reserved_bit);
  // CR8: bits 63:4 reserved.
  const auto c8 = vmx::evaluate_cr_write(mov_to_cr(8, 0), compat, 0x1'0000'0005, paging::paging_kind::two_dimensional);
  EXPECT_EQ(c8.fault, F::none);
  EXPECT_EQ(c8.value, 5u);
}
