// SPDX-License-Identifier: MIT
// The shadow MMU's #PF path, write protection, root cache and invalidation rules: golden
// cases typed from the SDM (quoted) and protection-key equivalence with the walker.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/shadow/invalidate.hpp>

#include "shadow_harness.hpp"

namespace {

using namespace shadow_harness;

constexpr std::uint64_t P = 1, RW = 2, US = 4, A = 32, D = 64;
constexpr std::uint64_t CR0_PE = 1, CR0_WP = 1ull << 16, CR0_PG = 1ull << 31;
constexpr std::uint64_t CR4_PAE = 1ull << 5, CR4_SMEP = 1ull << 20, CR4_PKE = 1ull << 22, CR4_PKS = 1ull << 24;
constexpr std::uint64_t EFER_LME = 1ull << 8, EFER_LMA = 1ull << 10, EFER_NXE = 1ull << 11;

// A 4-level guest: PML4 at frame 1, PDPT 2, PD 3, PT 4 (va 0x40_0000 + i*4096 -> PTE i).
// Data frames 8.. ; frame 5 a second PML4 sharing the PDPT.
constexpr std::uint64_t va0 = 0x0040'0000;
struct four_level {
  machine mc;
  x86::cr0 cr0{CR0_PE | CR0_PG | CR0_WP};
  x86::cr4 cr4{CR4_PAE};
  x86::efer efer{EFER_LME | EFER_LMA | EFER_NXE};
  four_level() {
    mc.write(0x1000, 8, P | RW | US | A | 0x2000);
    mc.write(0x5000, 8, P | RW | US | A | 0x2000);
    mc.write(0x2000, 8, P | RW | US | A | 0x3000);
    mc.write(0x3000 + 8 * 2, 8, P | RW | US | A | 0x4000);
  }
  void pte(unsigned i, std::uint64_t v) { mc.write(0x4000 + 8 * i, 8, v); }
  shadow::context_answer load(std::uint64_t cr3 = 0x1000) {
    return mc.load(paging::make_cpu_role(cr0, cr4, efer), x86::gpa{cr3});
  }
  static paging::walk_request req(std::uint64_t va, std::uint64_t pfec) {
    paging::walk_request r{};
    r.linear = x86::gva{va};
    r.access = x86::pfec{pfec};
    return r;
  }
  // Both sides, compared; returns the shadow side.
  outcome access(std::uint64_t va, std::uint64_t pfec) {
    const auto r = req(va, pfec);
    const outcome s = mc.via_shadow(r), o = mc.via_walker(r);
    EXPECT_TRUE(same(s, o)) << "shadow " << describe(s) << " walker " << describe(o);
    EXPECT_TRUE(mc.memories_equal());
    return s;
  }
};

TEST(shadow_mmu, not_present_injects_the_guest_pf) {
  // SDM 4.7: "P flag (bit 0). This flag is 0 if there is no translation for the linear
  // address because the P flag was 0 in one of the paging-structure entries"; W/R (bit 1)
  // "1 if ... a write"; U/S (bit 2) "1 if ... user-mode access". A user write: 0x6, CR2 = address.
  four_level g;
  g.load();
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  const auto a = g.mc.mmu.page_fault(m, four_level::req(va0 + 0x123, 6));
  EXPECT_EQ(a.action, shadow::fault_action::inject);
  EXPECT_EQ(a.fault.vector, x86::vector::pf);
  EXPECT_EQ(a.fault.error_code.hardware_bits().raw(), 0x6u);
  EXPECT_EQ(a.fault.linear.value(), va0 + 0x123);
}

TEST(shadow_mmu, mmio_is_emulated_with_its_gpa) {
  four_level g;
  g.pte(0, P | RW | US | (30ull << 12));  // frame 30 has no host memory
  g.load();
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  const auto a = g.mc.mmu.page_fault(m, four_level::req(va0 + 0x10, 2));
  EXPECT_EQ(a.action, shadow::fault_action::emulate_mmio);
  EXPECT_EQ(a.gpa.value(), (30ull << 12) + 0x10);
}

TEST(shadow_mmu, fixed_then_the_hardware_allows_and_ad_are_exact) {
  four_level g;
  g.pte(0, P | RW | (8ull << 12));
  g.load();
  EXPECT_TRUE(g.access(va0, 0).ok);  // read: A set, D clear (SDM 4.8)
  EXPECT_EQ(g.mc.read(g.mc.sut, 0x4000, 8) & (A | D), A);
  const unsigned faults = g.mc.faults_taken;
  EXPECT_TRUE(g.access(va0, 2).ok);  // the first write faults on the host (D clear) and sets D
  EXPECT_EQ(g.mc.faults_taken, faults + 1);
  EXPECT_EQ(g.mc.read(g.mc.sut, 0x4000, 8) & (A | D), A | D);
  EXPECT_TRUE(g.access(va0, 2).ok);  // the second does not fault
  EXPECT_EQ(g.mc.faults_taken, faults + 1);
}

TEST(shadow_mmu, guest_page_tables_are_write_protected) {
  four_level g;
  g.pte(0, P | RW | US | (8ull << 12));
  // va 0x60'0000 (PD entry 3 -> PT at frame 6) maps the page table of va0 (frame 4).
  constexpr std::uint64_t alias = 0x60'0000;
  g.mc.write(0x3000 + 8 * 3, 8, P | RW | US | A | 0x6000);
  g.mc.write(0x6000, 8, P | RW | (4ull << 12));
  g.load();
  // A write through the alias first: mapped writable (frame 4 is not mirrored yet).
  EXPECT_TRUE(g.access(alias, 2).ok);
  // va0's walk mirrors the page table (frame 4): the alias must lose R/W. (A user write:
  // va0's shadow leaf is writable from here on.)
  EXPECT_TRUE(g.access(va0, 6).ok);
  const auto hw = g.mc.hardware(four_level::req(alias, 2));
  EXPECT_FALSE(hw.has_value()) << "a mirrored page table is still writable through an alias";
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  const auto a = g.mc.mmu.page_fault(m, four_level::req(alias, 2));
  EXPECT_EQ(a.action, shadow::fault_action::emulate_protected);
  EXPECT_EQ(a.gpa.value(), 0x4000u);
  // The emulated write makes PTE 0 read-only; the next user write to va0 must #PF
  // (SDM 4.7: P=1 protection violation, W/R=1, U/S=1: 0x7).
  g.mc.guest_store(0x4000, 8, g.mc.read(g.mc.oracle, 0x4000, 8) & ~RW);
  const outcome o = g.access(va0, 6);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.fault.error_code.hardware_bits().raw(), 0x7u);
}

TEST(shadow_mmu, an_unprotected_table_frame_is_written_natively_and_mirrored_again) {
  // shadow_mmu::unprotect(): for a write the emulator cannot carry out, the frame stops being
  // mirrored and the CPU writes it itself. Nothing mirrors it then, so a native write needs
  // no report; the next walk through it mirrors the new entries and protects it again.
  four_level g;
  g.pte(0, P | RW | US | (8ull << 12));
  constexpr std::uint64_t alias = 0x60'0000;  // PD entry 3 -> PT at frame 6 -> frame 4 (va0's PT)
  g.mc.write(0x3000 + 8 * 3, 8, P | RW | US | A | 0x6000);
  g.mc.write(0x6000, 8, P | RW | (4ull << 12));
  g.load();
  EXPECT_TRUE(g.access(alias, 2).ok);                    // frame 4 not mirrored yet: writable
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x8000);  // mirrors frame 4: the alias loses R/W
  EXPECT_FALSE(g.mc.hardware(four_level::req(alias, 2)).has_value());
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  EXPECT_EQ(g.mc.mmu.page_fault(m, four_level::req(alias, 2)).action, shadow::fault_action::emulate_protected);
  EXPECT_EQ(g.mc.mmu.unprotect(x86::gfn{4}), shadow::host_flush::all);
  EXPECT_EQ(g.mc.mmu.unprotect(x86::gfn{4}), shadow::host_flush::none);  // nothing mirrors it now
  EXPECT_EQ(g.mc.mmu.page_fault(m, four_level::req(alias, 2)).action, shadow::fault_action::fixed);
  EXPECT_TRUE(g.mc.hardware(four_level::req(alias, 2)).has_value());  // the CPU writes it
  g.mc.write(0x4000, 8, P | RW | US | (9ull << 12));                 // natively: no report
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x9000);                // the new PTE, mirrored again
  EXPECT_FALSE(g.mc.hardware(four_level::req(alias, 2)).has_value()) << "frame 4 is a table again: protected";
}

TEST(shadow_mmu, unprotecting_the_root_frame_rebuilds_the_root) {
  four_level g;
  g.pte(0, P | RW | US | (8ull << 12));
  g.load();
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x8000);
  EXPECT_EQ(g.mc.mmu.unprotect(x86::gfn{1}), shadow::host_flush::all);  // the PML4's frame
  EXPECT_TRUE(g.mc.mmu.cache().page(g.mc.mmu.cache().index_of(g.mc.mmu.root())).used);
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x8000);
}

TEST(shadow_mmu, invlpg_after_a_pte_change_sees_the_new_entry) {
  // SDM 4.10.4.1: "INVLPG ... invalidates any TLB entries for the page number of the
  // source operand". After the guest rewrites a PTE and executes INVLPG, the next access
  // uses the new PTE.
  four_level g;
  g.pte(0, P | RW | US | (8ull << 12));
  g.load();
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x8000);
  g.mc.guest_store(0x4000, 8, P | RW | US | (9ull << 12));
  EXPECT_EQ(shadow::invlpg(x86::gva{va0}), shadow::host_flush::none);
  EXPECT_EQ(g.access(va0, 4).host, host_ram + 0x9000);
}

TEST(shadow_mmu, cr3_switch_back_to_a_known_address_space_rebuilds_nothing) {
  // SDM 4.10.4.1: "MOV to CR3 ... invalidates all TLB entries associated with PCID 000H
  // except those for global pages" — a shadow root per address space stays valid anyway.
  four_level g;
  g.pte(0, P | RW | US | A | D | (8ull << 12));
  const auto r1 = g.load(0x1000);
  EXPECT_TRUE(g.access(va0, 4).ok);
  const auto r2 = g.load(0x5000);
  EXPECT_NE(r1.root, r2.root);
  EXPECT_TRUE(g.access(va0, 4).ok);
  const unsigned pages = g.mc.cache.used(), faults = g.mc.faults_taken;
  x86::cr_context c{g.cr0, g.cr4, g.efer, 0x5000};
  c.maxphyaddr = 52;
  const auto o = paging::evaluate_cr_write({paging::cr_write_op::instruction::mov_to_cr, 3, 0x1000}, c,
                                           paging::paging_kind::shadow);
  ASSERT_EQ(o.fault, x86::cr_write_fault::none);
  const auto back = shadow::mov_to_cr3(g.mc.mmu, o, 52);
  g.mc.root = x86::gpa{0x1000};
  EXPECT_EQ(back.root, r1.root);
  EXPECT_EQ(g.mc.cache.used(), pages);
  EXPECT_TRUE(g.access(va0, 4).ok);
  EXPECT_EQ(g.mc.faults_taken, faults) << "the cached root was rebuilt";
}

TEST(shadow_mmu, cr0_wp_toggle_keeps_a_root_per_role) {
  // CR0.WP is part of the shadow role (the host runs with WP=1 and folds the guest's WP into
  // the entries): a toggle is reset_mmu for shadow paging, and with cached roots toggling
  // back finds the first root again. SDM 4.6.1: with WP=0 "supervisor-mode ... data may be
  // written to any linear address with a valid translation"; with WP=1 a supervisor write
  // to a read-only address faults (error code P|W = 0x3).
  four_level g;
  g.pte(0, P | US | A | D | (8ull << 12));
  const auto wp1 = g.load();
  EXPECT_EQ(g.access(va0, 2).fault.error_code.hardware_bits().raw(), 0x3u);
  x86::cr_context c{g.cr0, g.cr4, g.efer, 0x1000};
  auto o = paging::evaluate_cr_write({paging::cr_write_op::instruction::mov_to_cr, 0, (g.cr0.raw() & ~CR0_WP)}, c,
                                     paging::paging_kind::shadow);
  ASSERT_TRUE(o.actions.test(paging::mmu_actions::reset_mmu));
  auto wp0 = shadow::control_registers_written(g.mc.mmu, o, x86::cr3{0x1000}, 52);
  g.mc.role = g.mc.mmu.role();
  EXPECT_NE(wp0.root, wp1.root);
  EXPECT_FALSE(g.mc.role.cr0_wp());
  EXPECT_TRUE(g.access(va0, 2).ok);   // supervisor write to a read-only user page
  EXPECT_TRUE(g.access(va0, 4).ok);   // then a user read (the other host entry)
  EXPECT_FALSE(g.access(va0, 6).ok);  // a user write still faults
  const unsigned pages = g.mc.cache.used();
  c.cr0 = o.after.cr0;
  o = paging::evaluate_cr_write({paging::cr_write_op::instruction::mov_to_cr, 0, g.cr0.raw()}, c,
                                paging::paging_kind::shadow);
  const auto again = shadow::control_registers_written(g.mc.mmu, o, x86::cr3{0x1000}, 52);
  g.mc.role = g.mc.mmu.role();
  EXPECT_EQ(again.root, wp1.root);
  EXPECT_EQ(g.mc.cache.used(), pages);
  EXPECT_EQ(g.access(va0, 2).fault.error_code.hardware_bits().raw(), 0x3u);
}

TEST(shadow_mmu, smep_set_by_cr4_write_applies_at_once) {
  // SDM 4.10.4.1: "MOV to CR4 ... If CR4.SMEP is changed from 0 to 1, invalidates all TLB
  // entries ... for the current PCID"; SDM 4.6.1: with SMEP a supervisor fetch from a
  // user-mode address faults; SDM 4.7: I/D = 1 (with SMEP), so 0x11.
  four_level g;
  g.pte(0, P | RW | US | A | D | (8ull << 12));
  g.load();
  EXPECT_TRUE(g.access(va0, 16).ok);
  x86::cr_context c{g.cr0, g.cr4, g.efer, 0x1000};
  const auto o = paging::evaluate_cr_write({paging::cr_write_op::instruction::mov_to_cr, 4, CR4_PAE | CR4_SMEP}, c,
                                           paging::paging_kind::shadow);
  ASSERT_EQ(o.fault, x86::cr_write_fault::none);
  ASSERT_TRUE(o.actions.test(paging::mmu_actions::flush_tlb_current));
  shadow::control_registers_written(g.mc.mmu, o, x86::cr3{0x1000}, 52);
  g.mc.role = g.mc.mmu.role();
  EXPECT_EQ(g.access(va0, 16).fault.error_code.hardware_bits().raw(), 0x11u);
}

TEST(shadow_mmu, pae_pdptes_change_only_when_loaded) {
  // SDM 4.4.1: the PDPTEs are loaded by MOV to CR3 (and CR0/CR4 writes); the processor uses
  // the PDPTE registers, not the PDPT in memory. A PDPT written in memory takes effect at
  // the next MOV to CR3, not before.
  machine mc;
  mc.write(0x1000, 8, P | 0x3000);        // PDPTE 0 -> PD at frame 3
  mc.write(0x3000, 8, P | RW | US | 0x4000);
  mc.write(0x6000, 8, P | RW | US | 0x7000);
  mc.write(0x4000, 8, P | RW | US | (8ull << 12));
  mc.write(0x7000, 8, P | RW | US | (9ull << 12));
  const auto r = paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PAE}, x86::efer{});
  mc.load(r, x86::gpa{0x1000});
  paging::walk_request q{};
  q.linear = x86::gva{0x10};
  q.access = x86::pfec{4};
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x8010);
  mc.guest_store(0x1000, 8, P | 0x6000);  // PDPTE 0 -> PD at frame 6, in memory only
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x8010);
  EXPECT_TRUE(same(mc.via_shadow(q), mc.via_walker(q)));
  mc.load(r, x86::gpa{0x1000});  // MOV to CR3: the PDPTEs are loaded again
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x9010);
  EXPECT_TRUE(same(mc.via_shadow(q), mc.via_walker(q)));
}

TEST(shadow_mmu, protection_keys_equal_the_walker) {
  // 4-level guests with CR4.PKE/PKS: every PDE/PTE rights combination, WP, PKE, PKS, key 1
  // with AD or WD in PKRU or IA32_PKRS, every ordered pair of accesses.
  unsigned long n = 0;
  for (unsigned rb = 0; rb < 32; ++rb) {  // PDE RW, US; PTE RW, US, D
    for (unsigned roleb = 0; roleb < 8; ++roleb) {
      for (unsigned k = 0; k < 5; ++k) {
        four_level g;
        const std::uint64_t pde = P | A | ((rb & 1) ? RW : 0) | ((rb & 2) ? US : 0) | 0x4000;
        g.mc.write(0x3000 + 8 * 2, 8, pde);
        g.pte(0, P | ((rb & 4) ? RW : 0) | ((rb & 8) ? US : 0) | ((rb & 16) ? D : 0) | (8ull << 12) | (1ull << 59));
        g.cr0 = x86::cr0{CR0_PE | CR0_PG | ((roleb & 1) ? CR0_WP : 0)};
        g.cr4 = x86::cr4{CR4_PAE | ((roleb & 2) ? CR4_PKE : 0) | ((roleb & 4) ? CR4_PKS : 0)};
        g.load();
        const std::uint32_t pkru = k == 1 ? 0x4 : k == 2 ? 0x8 : 0, pkrs = k == 3 ? 0x4 : k == 4 ? 0x8 : 0;
        const std::uint64_t kinds[] = {0, 2, 16}, modes[] = {4, 0, 1ull << 48};
        for (auto k1 : kinds)
          for (auto m1 : modes)
            for (auto k2 : kinds)
              for (auto m2 : modes)
                for (std::uint64_t pf : {k1 | m1, k2 | m2}) {
                  auto q = four_level::req(va0, pf);
                  q.pkru = pkru;
                  q.pkrs = pkrs;
                  const outcome s = g.mc.via_shadow(q), o = g.mc.via_walker(q);
                  ++n;
                  ASSERT_TRUE(same(s, o) && g.mc.memories_equal())
                      << "rb=" << rb << " roleb=" << roleb << " k=" << k << " access=" << std::hex << pf
                      << "\n shadow " << describe(s) << "\n walker " << describe(o);
                }
      }
    }
  }
  std::printf("protection keys: %lu accesses\n", n);
}

TEST(shadow_mmu, a_full_cache_is_rebuilt_and_stays_exact) {
  // More page tables than the cache holds: the MMU zaps everything and rebuilds, and every
  // access still equals the walker.
  four_level g;
  // PD entries 0..63 each -> a distinct PT frame (frames 10..25 reused cyclically), each
  // PTE 0 -> data frame 8.
  for (unsigned i = 0; i < 64; ++i) {
    // 16 PT frames x 4 rights above them: 64 distinct (gfn, role) pages, more than 48.
    const std::uint64_t ptf = 10 + (i / 4) % 16;
    g.mc.write(0x3000 + 8 * i, 8, P | A | ((i & 1) ? RW : 0) | ((i & 2) ? US : 0) | (ptf << 12));
    g.mc.write((ptf << 12) + 8 * (i % 4), 8, P | RW | US | (8ull << 12));
  }
  g.load();
  for (int round = 0; round < 3; ++round)
    for (unsigned i = 0; i < 64; ++i) g.access((std::uint64_t{i} << 21) + ((i % 4) << 12), round == 1 ? 2 : 4);
  EXPECT_GT(g.mc.mmu.rebuilds(), 0u);
  EXPECT_LE(g.mc.cache.used(), cache_pages);
}

}  // namespace

namespace {

TEST(shadow_mmu, paging_off_is_the_identity_on_32_bits) {
  // SDM 4.1.1/2.5: with CR0.PG = 0 linear addresses are physical addresses (32 bits).
  machine mc;
  mc.load(paging::make_cpu_role(x86::cr0{CR0_PE}, x86::cr4{}, x86::efer{}), x86::gpa{0});
  paging::walk_request q{};
  q.linear = x86::gva{0x8123};
  q.access = x86::pfec::write;
  const outcome s = mc.via_shadow(q);
  EXPECT_TRUE(s.ok && !s.emulated);
  EXPECT_EQ(s.host, host_ram + 0x8123);
  EXPECT_TRUE(same(s, mc.via_walker(q)));
  q.linear = x86::gva{0x1e010};  // frame 30: MMIO
  const outcome m = mc.via_shadow(q);
  EXPECT_TRUE(m.ok && m.mmio && m.emulated);
  EXPECT_TRUE(same(m, mc.via_walker(q)));
}

}  // namespace

namespace {

constexpr std::uint64_t CR4_PSE = 1ull << 4;

TEST(shadow_mmu, a_32bit_guest_switches_back_to_its_cached_root) {
  // A 32-bit guest's shadow root is a pass-through page (no guest table behind it): only
  // the root cache finds it again after a MOV to CR3 and back.
  machine mc;
  for (std::uint64_t top : {0x1000u, 0x5000u}) mc.write(top, 4, P | RW | US | 0x4000);
  mc.write(0x4000, 4, P | RW | US | A | D | (8ull << 12));
  const auto r = paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{}, x86::efer{});
  const auto first = mc.load(r, x86::gpa{0x1000});
  paging::walk_request q{};
  q.access = x86::pfec::user;
  EXPECT_TRUE(mc.via_shadow(q).ok);
  mc.load(r, x86::gpa{0x5000});
  EXPECT_TRUE(mc.via_shadow(q).ok);
  const unsigned pages = mc.cache.used(), faults = mc.faults_taken;
  EXPECT_EQ(mc.load(r, x86::gpa{0x1000}).root, first.root);
  EXPECT_EQ(mc.cache.used(), pages);
  EXPECT_TRUE(mc.via_shadow(q).ok);
  EXPECT_EQ(mc.faults_taken, faults);
}

TEST(shadow_mmu, cr4_pse_toggle_reinterprets_a_32bit_pde) {
  // SDM 4.3: with CR4.PSE = 1 a PDE with PS = 1 maps a 4 MiB page; with CR4.PSE = 0 PS is
  // ignored and the PDE references a page table. CR4.PSE is not in page_role: the shadow
  // pages built under one value must not serve the other.
  machine mc;
  // PS=1: the 4 MiB page at 0; read with PS ignored: the page table at frame 0 (a frame
  // whose bits 20:13 are 0, so that the 4 MiB reading has no PSE-36 high bits).
  mc.write(0x1000, 4, P | RW | US | A | D | 0x80);
  mc.write(0x1004, 4, P | RW | US | A | D | 0x80);          // PDE 1: the same, for va 4 MiB up
  mc.write(0x0000 + 4 * 8, 4, P | RW | US | (9ull << 12));  // PTE 8 of the page-table reading
  const x86::cr0 cr0{CR0_PE | CR0_PG | CR0_WP};
  mc.load(paging::make_cpu_role(cr0, x86::cr4{CR4_PSE}, x86::efer{}), x86::gpa{0x1000});
  paging::walk_request q{};
  q.linear = x86::gva{0x8010};
  q.access = x86::pfec::user;
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x8010);  // 4 MiB page: frame 8
  paging::walk_request q2 = q;
  q2.linear = x86::gva{0x40'8010};  // through PDE 1 (its own host directory entries)
  EXPECT_EQ(mc.via_shadow(q2).host, host_ram + 0x8010);
  x86::cr_context c{cr0, x86::cr4{CR4_PSE}, x86::efer{}, 0x1000};
  const auto o = paging::evaluate_cr_write({paging::cr_write_op::instruction::mov_to_cr, 4, 0}, c,
                                           paging::paging_kind::shadow);
  ASSERT_TRUE(o.actions.test(paging::mmu_actions::reset_mmu));
  shadow::control_registers_written(mc.mmu, o, x86::cr3{0x1000}, 52);
  mc.role = mc.mmu.role();
  const outcome s = mc.via_shadow(q), w = mc.via_walker(q);
  EXPECT_EQ(w.host, host_ram + 0x9010);  // PT frame 0, PTE 8: frame 9
  EXPECT_TRUE(same(s, w)) << describe(s) << " vs " << describe(w);
  // PDE 1's shadow entries were built under CR4.PSE = 1 and are not on the path just fixed.
  const outcome s2 = mc.via_shadow(q2), w2 = mc.via_walker(q2);
  EXPECT_TRUE(same(s2, w2)) << describe(s2) << " vs " << describe(w2);
}

TEST(shadow_mmu, a_5level_guest_runs_on_a_5level_shadow) {
  // SDM 4.5.1: with CR4.LA57 = 1 "linear addresses are 57 bits wide", bits 56:48 select the
  // PML5 entry. SDM 4.6.1: a user-mode access needs "the U/S flag ... 1 in every
  // paging-structure entry controlling the translation"; SDM 4.7: a protection violation has
  // P = 1 in the error code (0x5: P, U/S for a user read). SDM 4.8: the accessed flag is set
  // "in any paging-structure entry that is used during linear-address translation".
  // PML5 at frame 6: entry 0 -> the PML4 at frame 1 (user), entry 1 -> the same PML4, U/S = 0.
  four_level g;
  g.cr4 = x86::cr4{CR4_PAE | (1ull << 12)};
  g.mc.write(0x6000, 8, P | RW | US | 0x1000);
  g.mc.write(0x6008, 8, P | RW | 0x1000);
  g.pte(0, P | RW | US | A | D | (9ull << 12));
  EXPECT_TRUE(g.load(0x6000).supported);
  EXPECT_EQ(shadow::host_role(g.mc.role).mode(), x86::paging_mode::five_level);  // the host runs with LA57
  const outcome low = g.access(va0 + 0x40, 4);  // user read through PML5 entry 0
  EXPECT_TRUE(low.ok);
  EXPECT_EQ(low.host, host_ram + 9 * 4096 + 0x40);
  EXPECT_NE(g.mc.read(g.mc.sut, 0x6000, 8) & A, 0u);  // the PML5E's A flag
  const outcome high = g.access((1ull << 48) + va0 + 0x40, 4);  // user read through PML5 entry 1
  EXPECT_FALSE(high.ok);
  EXPECT_EQ(high.fault.error_code.hardware_bits().raw(), 0x5u);
  EXPECT_EQ(high.fault.linear.value(), (1ull << 48) + va0 + 0x40);
  const outcome sup = g.access((1ull << 48) + va0 + 0x40, 0);  // the supervisor reads it
  EXPECT_TRUE(sup.ok);
  EXPECT_EQ(sup.host, host_ram + 9 * 4096 + 0x40);
  // The two PML5 entries lead to one guest PML4 with different rights above it: two
  // shadow PML4 pages (page_role::access), not one.
  const auto user_pml4 = g.mc.cache.lookup(x86::gfn{1}, paging::make_page_role(g.mc.role, {.level = 4}));
  const auto sup_pml4 = g.mc.cache.lookup(
      x86::gfn{1}, paging::make_page_role(g.mc.role, {.level = 4, .access = paging::pte_access::exec | paging::pte_access::write}));
  EXPECT_NE(user_pml4, shadow::page_cache::npos);
  EXPECT_NE(sup_pml4, shadow::page_cache::npos);
  EXPECT_NE(user_pml4, sup_pml4);
}


TEST(shadow_mmu, legacy_guests_run_on_a_pae_format_shadow) {
  // SDM 4.1.1: outside IA-32e mode "if CR4.PAE = 0, 32-bit paging is used"; "if CR4.PAE = 1
  // and IA32_EFER.LME = 0, PAE paging is used": the host format of a guest that runs outside
  // IA-32e mode is PAE (CR4.PAE = 1, EFER.LME = LMA = 0; NXE = 1 for the XD bits), of a
  // 4-level guest 4-level, of a 5-level guest 5-level; paging off keeps the 4-level format.
  using m = x86::paging_mode;
  const x86::cr0 pg{CR0_PE | CR0_PG | CR0_WP};
  const paging::cpu_role g32 = paging::make_cpu_role(pg, x86::cr4{CR4_SMEP}, x86::efer{});
  const paging::cpu_role gpae = paging::make_cpu_role(pg, x86::cr4{CR4_PAE}, x86::efer{EFER_NXE});
  const paging::cpu_role g4 = paging::make_cpu_role(pg, x86::cr4{CR4_PAE}, x86::efer{EFER_LME | EFER_LMA});
  const paging::cpu_role g5 = paging::make_cpu_role(pg, x86::cr4{CR4_PAE | (1ull << 12)}, x86::efer{EFER_LME | EFER_LMA});
  const paging::cpu_role off = paging::make_cpu_role(x86::cr0{CR0_PE}, x86::cr4{}, x86::efer{});
  EXPECT_EQ(shadow::host_mode(g32), m::pae);
  EXPECT_EQ(shadow::host_mode(gpae), m::pae);
  EXPECT_EQ(shadow::host_mode(g4), m::four_level);
  EXPECT_EQ(shadow::host_mode(g5), m::five_level);
  EXPECT_EQ(shadow::host_mode(off), m::four_level);
  EXPECT_EQ(shadow::host_levels(g32), 3u);
  EXPECT_EQ(shadow::host_levels(g4), 4u);
  EXPECT_EQ(shadow::host_levels(g5), 5u);
  const paging::cpu_role h = shadow::host_role(g32);
  EXPECT_EQ(h.mode(), m::pae);
  EXPECT_FALSE(h.lma());
  EXPECT_TRUE(h.efer_nx());
  EXPECT_TRUE(h.cr0_wp());
  EXPECT_TRUE(h.smep());  // the guest's SMEP
  EXPECT_EQ(shadow::host_role(g4).mode(), m::four_level);
}

TEST(shadow_mmu, a_32bit_guest_root_is_a_pdpt_of_four_valid_pdptes) {
  // A 32-bit guest (PD at frame 1, four PTs at frames 2-5 for the four 1 GiB quarters, both
  // 2 MiB halves of each 4 MiB PDE): a user read in each quarter and half. The host root is a
  // PDPT whose present entries hold P and the address only (SDM 4.4.1, Table 4-8: bits 2:1
  // and 8:5 reserved, checked by the PDPTE load of a VM entry or MOV to CR3; the harness's
  // "hardware" loads them before every access and aborts on a reserved bit), and the write of
  // a root PDPTE is answered with a full flush (the host reloads its PDPTE registers).
  machine mc;
  for (unsigned q = 0; q < 4; ++q) {
    const std::uint64_t pde = q * 256 + 3;  // PDE index: quarter q, 12-16 MiB of it
    mc.write(0x1000 + 4 * pde, 4, P | RW | US | ((2u + q) << 12));
    mc.write((2u + q) * 0x1000 + 4 * 1, 4, P | RW | US | ((8u + q) << 12));     // PTE 1: first 2 MiB half
    mc.write((2u + q) * 0x1000 + 4 * 513, 4, P | RW | US | ((12u + q) << 12));  // PTE 513: second half
  }
  const auto r = paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{}, x86::efer{});
  mc.load(r, x86::gpa{0x1000});
  const std::uint64_t* root = mc.cache.table(mc.cache.index_of(mc.mmu.root()));
  for (unsigned q = 0; q < 4; ++q) EXPECT_EQ(root[q], 0u) << "nothing mapped before the first fault";
  for (unsigned q = 0; q < 4; ++q) {
    for (unsigned half = 0; half < 2; ++half) {
      const std::uint64_t va = (std::uint64_t{q} << 30) + (3ull << 22) + (half ? (1ull << 21) : 0) + 0x1000 + 0x44;
      paging::walk_request req{};
      req.linear = x86::gva{va};
      req.access = x86::pfec{4};
      if (half == 0) {
        paging::flat_memory m(mc.sut.data(), mc.sut.size());
        const auto a = mc.mmu.page_fault(m, req);
        EXPECT_EQ(a.action, shadow::fault_action::fixed);
        EXPECT_EQ(a.flush, shadow::host_flush::all) << "a new root PDPTE: the PDPTE registers must be reloaded";
        EXPECT_NE(root[q] & P, 0u);
        EXPECT_EQ(root[q] & 0x1e6u, 0u) << "R/W, U/S, A and bits 8:5 are reserved in a PDPTE";
        EXPECT_EQ(root[q] >> 63, 0u);
      }
      const outcome s = mc.via_shadow(req), w = mc.via_walker(req);
      EXPECT_TRUE(same(s, w)) << describe(s) << " vs " << describe(w);
      EXPECT_EQ(s.host, host_ram + ((half ? 12u : 8u) + q) * 4096 + 0x44);
    }
  }
  EXPECT_EQ(mc.mmu.root().value() >> 32, 0u);
  for (unsigned i = 4; i < shadow::table_entries; ++i) EXPECT_EQ(root[i], 0u);
}


TEST(shadow_mmu, a_stale_non_leaf_entry_is_replaced_not_written_through) {
  // A guest PDE re-pointed from the page table at frame 4 to the one at frame 6 with the
  // write not reported (table_written() not called: a caller's bug, or memory written behind
  // the MMU's back). The next host fault under that PDE finds the host PD entry naming the
  // shadow page of frame 4 where the guest walk asks for frame 6: the MMU replaces the entry
  // (a new shadow page for frame 6) instead of writing frame 6's leaf into frame 4's shadow
  // page, so va0 (PTE 0: present in frame 4, absent in frame 6) faults as the guest's tables
  // say, and frame 4's shadow page keeps mirroring frame 4 only.
  four_level g;
  g.pte(0, P | RW | US | (8ull << 12));
  g.load();
  EXPECT_TRUE(g.access(va0, 4).ok);
  g.mc.write(0x6000 + 8 * 1, 8, P | RW | US | (9ull << 12));   // PT at frame 6: PTE 1 only
  g.mc.write(0x3000 + 8 * 2, 8, P | RW | US | A | 0x6000);     // PDE 2 -> frame 6, not reported
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  const auto a = g.mc.mmu.page_fault(m, four_level::req(va0 + 0x1000, 4));
  EXPECT_EQ(a.action, shadow::fault_action::fixed);
  EXPECT_EQ(a.flush, shadow::host_flush::all);  // a present non-leaf host entry changed
  EXPECT_EQ(g.access(va0 + 0x1000, 4).host, host_ram + 9 * 4096);
  const outcome s = g.access(va0, 4);  // compared with the walker: #PF, not frame 8
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.fault.error_code.hardware_bits().raw(), 0x4u);
  const auto old_pt = g.mc.cache.lookup(x86::gfn{4}, paging::make_page_role(g.mc.role, {.level = 1}));
  ASSERT_NE(old_pt, shadow::page_cache::npos);
  EXPECT_EQ(g.mc.cache.table(old_pt)[1], 0u) << "frame 6's leaf written into frame 4's shadow page";
}

}  // namespace
