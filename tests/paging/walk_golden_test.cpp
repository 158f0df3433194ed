// SPDX-License-Identifier: MIT
// Golden cases for the walkers, expectations typed by hand from the SDM: the classic bugs
// named in the issue (XSA-176, PSE-36, 4 MiB PDE without PSE, SMEP with NX off, WP=0 sets
// D, P bit on an upper-level permission fault, non-canonical #GP/#SS, EPT write-only
// misconfiguration, EPT A/D paging-structure writes) and the guest_memory implementations.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/x86/cr3.hpp>

#include "runtime.hpp"
#include "memory_image.hpp"
#include "racing_memory.hpp"

namespace {

using namespace hvkit;
using paging::fault_kind;
using std::uint64_t;

struct image : test_support::memory_image {
  explicit image(std::size_t n = 0x20000) : memory_image(n) {}
};

// Entry bits, typed from SDM Tables 4-14..4-20.
constexpr uint64_t P = 1, RW = 2, US = 4, A = 0x20, D = 0x40, PS = 0x80, XD = uint64_t{1} << 63;

const x86::cr0 cr0_pg = x86::cr0::pg | x86::cr0::pe;
const x86::cr0 cr0_pg_wp = cr0_pg | x86::cr0::wp;
const x86::efer efer_lma = x86::efer::lme | x86::efer::lma;

// 4-level tables for VA 0x0000'0040'0020'1abc: PML4[0] -> PDPT[1] -> PD[1] -> PT[1].
constexpr uint64_t va4 = (uint64_t{1} << 30) | (uint64_t{1} << 21) | (uint64_t{1} << 12) | 0xabc;
void four_level(image& m, uint64_t pml4e, uint64_t pdpte, uint64_t pde, uint64_t pte) {
  m.put64(0x1000 + 0 * 8, 0x2000 | pml4e);
  m.put64(0x2000 + 1 * 8, 0x3000 | pdpte);
  m.put64(0x3000 + 1 * 8, 0x4000 | pde);
  m.put64(0x4000 + 1 * 8, 0x7000 | pte);
}

paging::walk_result walk4(image& m, x86::cr0 cr0, x86::cr4 cr4, x86::efer efer, x86::pfec access,
                          uint64_t va = va4, paging::cpu_properties props = {}, bool stack = false) {
  const auto mmu = paging::mmu_context::make(cr0, cr4 | x86::cr4::pae, efer | efer_lma, x86::gpa{0x1000});
  const paging::walker_4level w(mmu, props);
  auto mem = m.mem();
  paging::walk_request req{};
  req.linear = x86::gva{va};
  req.access = access;
  req.stack = stack;
  return w.walk(mem, mmu, req);
}

TEST(WalkGolden, Xsa176PsInPml4eIsReserved) {
  image m;
  four_level(m, P | RW | PS, P | RW, P | RW, P | RW);
  const auto r = walk4(m, cr0_pg, {}, {}, x86::pfec::write);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r.error().level, 4);
  EXPECT_EQ(r.error().guest_entry_address(), x86::gpa{0x1000});
  EXPECT_EQ(r.error().error_code.raw(), 0xbu);  // P | W | RSVD
  EXPECT_EQ(r.error().vector, x86::vector::pf);
}

TEST(WalkGolden, Xsa176PdptePsWithoutGbpagesIsReserved) {
  image m;
  // PDPTE maps a 1 GiB page at 0x4000'0000 when 1 GiB pages exist.
  m.put64(0x1000, 0x2000 | P | RW);
  m.put64(0x2000 + 8, 0x4000'0000 | P | RW | PS);
  paging::cpu_properties no1g{};
  no1g.gbpages = false;
  const auto r = walk4(m, cr0_pg, {}, {}, {}, va4, no1g);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r.error().level, 3);
  EXPECT_EQ(r.error().error_code.raw(), 0x9u);  // P | RSVD
  const auto ok = walk4(m, cr0_pg, {}, {}, {});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->address.value(), 0x4000'0000u + 0x20'1abcu);
  EXPECT_EQ(ok->page_size(), uint64_t{1} << 30);
}

TEST(WalkGolden, LargePagePatBitIsNotAddress) {
  image m;
  m.put64(0x1000, 0x2000 | P | RW);
  m.put64(0x2000 + 8, 0x3000 | P | RW);
  m.put64(0x3000 + 8, 0x0060'0000 | 0x1000 /*PAT*/ | P | RW | PS);
  const auto r = walk4(m, cr0_pg, {}, {}, {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x0060'0000u + 0x1abcu);
  EXPECT_EQ(r->page_size(), uint64_t{2} << 20);
  EXPECT_EQ(r->memory_type, 4);  // PAT=1, PCD=0, PWT=0
  // Bit 13 of a 2 MiB PDE is reserved.
  m.put64(0x3000 + 8, 0x0060'0000 | 0x2000 | P | RW | PS);
  const auto bad = walk4(m, cr0_pg, {}, {}, {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(bad.error().level, 2);
}

paging::walk_result walk32(image& m, x86::cr4 cr4, uint64_t va, unsigned maxphy = 40, x86::pfec access = {}) {
  const auto mmu = paging::mmu_context::make(cr0_pg, cr4, {}, x86::gpa{0x1000});
  paging::cpu_properties props{};
  props.maxphyaddr = maxphy;
  const paging::walker_32bit w(mmu, props);
  auto mem = m.mem();
  paging::walk_request req{};
  req.linear = x86::gva{va};
  req.access = access;
  return w.walk(mem, mmu, req);
}

TEST(WalkGolden, Pse36Address) {
  image m;
  // PDE 3 (VA 0x00c0'0000..): 4 MiB page, PA bits 31:22 = 0x00c0'0000, PA bits 39:32 = 0x12.
  m.put32(0x1000 + 3 * 4, 0x00c0'0000u | (0x12u << 13) | 0x83u);
  const auto r = walk32(m, x86::cr4::pse, 0x00c1'2345);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x12'00c1'2345u);
  EXPECT_EQ(r->page_size(), uint64_t{4} << 20);
  // MAXPHYADDR 36: PDE bit 17 (PA bit 36) is reserved (bits 21:17), so is 0x12 << 13.
  const auto r36 = walk32(m, x86::cr4::pse, 0x00c1'2345, 36);
  ASSERT_FALSE(r36);
  EXPECT_EQ(r36.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r36.error().error_code.raw(), 0x9u);
  // Bit 21 is always reserved.
  m.put32(0x1000 + 3 * 4, 0x00c0'0000u | (1u << 21) | 0x83u);
  EXPECT_EQ(walk32(m, x86::cr4::pse, 0x00c1'2345).error().kind, fault_kind::reserved_bit);
}

TEST(WalkGolden, FourMegPdeWithoutPseWalksPageTable) {
  image m;
  // PDE 3 has PS=1 and address 0x5000; without CR4.PSE it references the page table at 0x5000.
  m.put32(0x1000 + 3 * 4, 0x5000u | 0x83u);
  m.put32(0x5000 + 0x12 * 4, 0x9000u | 0x3u);  // PTE for VA 0x00c1'2345 (PT index 0x12)
  const auto r = walk32(m, {}, 0x00c1'2345);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x9345u);
  EXPECT_EQ(r->page_size(), 4096u);
  EXPECT_EQ(r->path.count, 2);
  EXPECT_EQ(m.get32(0x1000 + 3 * 4) & 0x20u, 0x20u);  // A set on the PDE
  EXPECT_EQ(m.get32(0x5000 + 0x12 * 4) & 0x60u, 0x20u);  // A, no D (read)
}

TEST(WalkGolden, SmepFetchFromUserPageWithNxOff) {
  image m;
  four_level(m, P | RW | US, P | RW | US, P | RW | US, P | RW | US);
  const auto r = walk4(m, cr0_pg_wp, x86::cr4::smep, {}, x86::pfec::fetch);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::permission);
  EXPECT_EQ(r.error().error_code.raw(), 0x11u);  // P | I/D (I/D is reported because SMEP=1)
  // Without SMEP the fetch is allowed (no NX).
  EXPECT_TRUE(walk4(m, cr0_pg_wp, {}, {}, x86::pfec::fetch));
  // Nothing written by the faulting walk: A is still clear everywhere.
  image fresh;
  four_level(fresh, P | RW | US, P | RW | US, P | RW | US, P | RW | US);
  EXPECT_FALSE(walk4(fresh, cr0_pg_wp, x86::cr4::smep, {}, x86::pfec::fetch));
  EXPECT_EQ(fresh.get64(0x1000) & A, 0u);
  EXPECT_EQ(fresh.get64(0x4000 + 8) & A, 0u);
}

TEST(WalkGolden, SupervisorWriteWpZeroToReadOnlyPageSetsDirty) {
  image m;
  four_level(m, P, P, P, P);  // read-only everywhere, supervisor
  const auto r = walk4(m, cr0_pg, {}, {}, x86::pfec::write);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x7abcu);
  EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | A | D);  // leaf: A and D
  EXPECT_EQ(m.get64(0x3000 + 8), 0x4000u | P | A);      // non-leaf: A only
  EXPECT_EQ(m.get64(0x1000), 0x2000u | P | A);
  // With WP=1 the same write faults: P | W.
  image m2;
  four_level(m2, P, P, P, P);
  const auto f = walk4(m2, cr0_pg_wp, {}, {}, x86::pfec::write);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().error_code.raw(), 0x3u);
  EXPECT_EQ(m2.get64(0x4000 + 8), 0x7000u | P);  // nothing written
}

TEST(WalkGolden, PresentBitOnUpperLevelPermissionFault) {
  image m;
  four_level(m, P | RW /* U/S=0 at the PML4E */, P | RW | US, P | RW | US, P | RW | US);
  const auto r = walk4(m, cr0_pg_wp, {}, {}, x86::pfec::user);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::permission);
  EXPECT_EQ(r.error().error_code.raw(), 0x5u);  // P | U
  EXPECT_EQ(r.error().level, 4);
  EXPECT_EQ(r.error().guest_entry_address(), x86::gpa{0x1000});
  // A user write to a page read-only at the PDPTE: P | W | U, blamed on level 3.
  image m2;
  four_level(m2, P | RW | US, P | US, P | RW | US, P | RW | US);
  const auto w = walk4(m2, cr0_pg_wp, {}, {}, x86::pfec::user | x86::pfec::write);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().error_code.raw(), 0x7u);
  EXPECT_EQ(w.error().level, 3);
}

// CET shadow stacks (SDM 4.6.1): a shadow-stack page has R/W=1 above the leaf, R/W=0 and
// D=1 in the leaf; SS is error-code bit 6 (SDM 4.7).
TEST(WalkGolden, ShadowStackPages) {
  const auto ss = x86::pfec::ss, w = x86::pfec::write, u = x86::pfec::user;
  {  // Supervisor shadow-stack write (CALL) to a supervisor shadow-stack page: allowed, A set.
    image m;
    four_level(m, P | RW, P | RW, P | RW, P | D);
    const auto r = walk4(m, cr0_pg_wp, {}, {}, ss | w);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->address.value(), 0x7abcu);
    EXPECT_TRUE(r->rights.test(paging::pte_access::shadow_stack));
    EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | A | D);
    // An ordinary write to it faults (leaf R/W=0, WP=1): P | W = 0x3; a read is fine.
    EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, w).error().error_code.raw(), 0x3u);
    EXPECT_TRUE(walk4(m, cr0_pg_wp, {}, {}, x86::pfec{}));
  }
  {  // Leaf D=0: not a shadow-stack page; P | W | SS = 0x43 blamed on the leaf, nothing written.
    image m;
    four_level(m, P | RW, P | RW, P | RW, P);
    const auto r = walk4(m, cr0_pg_wp, {}, {}, ss | w);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, fault_kind::permission);
    EXPECT_EQ(r.error().error_code.raw(), 0x43u);
    EXPECT_EQ(r.error().level, 1);
    EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P);
  }
  {  // R/W=0 in the PDE: not a shadow-stack page; a shadow-stack read: P | SS = 0x41.
    image m;
    four_level(m, P | RW, P | RW, P, P | D);
    EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, ss).error().error_code.raw(), 0x41u);
  }
  {  // A writable leaf is not a shadow-stack page either: 0x43.
    image m;
    four_level(m, P | RW, P | RW, P | RW, P | RW | D);
    EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, ss | w).error().error_code.raw(), 0x43u);
  }
  {  // A 2 MiB shadow-stack page (PDE leaf R/W=0, D=1): user shadow-stack write from CPL 3 OK;
     // a supervisor one faults on the user page (P | W | SS = 0x43) even with SMAP off.
    image m;
    m.put64(0x1000, 0x2000 | P | RW | US);
    m.put64(0x2000 + 8, 0x3000 | P | RW | US);
    m.put64(0x3000 + 8, 0x20'0000 | P | US | D | PS);
    const auto r = walk4(m, cr0_pg_wp, {}, {}, ss | w | u);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->address.value(), 0x20'0000u + (va4 & 0x1f'ffffu));
    EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, ss | w).error().error_code.raw(), 0x43u);
    // A user-mode shadow-stack access (or WRUSS) to a supervisor shadow-stack page: 0x47,
    // blamed on the first entry with U/S=0.
    image m2;
    four_level(m2, P | RW | US, P | RW, P | RW | US, P | US | D);
    const auto f = walk4(m2, cr0_pg_wp, {}, {}, ss | w | u);
    ASSERT_FALSE(f);
    EXPECT_EQ(f.error().error_code.raw(), 0x47u);
    EXPECT_EQ(f.error().level, 3);
  }
  {  // Not present: SS is reported with P = 0 too (0x42).
    image m;
    four_level(m, P | RW, P | RW, P | RW, 0);
    EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, ss | w).error().error_code.raw(), 0x42u);
  }
}

TEST(WalkGolden, NonCanonicalIsGpOrSsNotPf) {
  image m;
  four_level(m, P | RW, P | RW, P | RW, P | RW);
  const uint64_t bad = 0x0000'8000'0000'0000;  // bit 47 set, 63:48 clear
  const auto r = walk4(m, cr0_pg, {}, {}, {}, bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::non_canonical);
  EXPECT_EQ(r.error().vector, x86::vector::gp);
  EXPECT_EQ(r.error().error_code.raw(), 0u);
  EXPECT_EQ(r.error().level, 0);  // no walk took place
  const auto s = walk4(m, cr0_pg, {}, {}, {}, bad, {}, true);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().vector, x86::vector::ss);
  // 0xffff'8000'0000'0000 is canonical (and not mapped here: a #PF).
  const auto c = walk4(m, cr0_pg, {}, {}, {}, 0xffff'8000'0000'0000);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, fault_kind::not_present);
  EXPECT_EQ(c.error().vector, x86::vector::pf);
  // With LA57 the same address is canonical and walks 5 levels.
  const auto mmu5 = paging::mmu_context::make(cr0_pg, x86::cr4::pae | x86::cr4::la57, efer_lma, x86::gpa{0x1000});
  const paging::walker_5level w5(mmu5, {});
  auto mem = m.mem();
  const auto r5 = w5.walk(mem, mmu5, {x86::gva{bad}});
  ASSERT_FALSE(r5);
  EXPECT_EQ(r5.error().kind, fault_kind::not_present);
  EXPECT_EQ(r5.error().level, 4);  // PML5[0] -> 0x2000; PML4 index 256 there is empty
}

TEST(WalkGolden, Cr3ControlAndPcidBitsStripped) {
  image m;
  four_level(m, P | RW, P | RW, P | RW, P | RW);
  // CR3 = 0x1000 | PCID 0x123 | no-flush bit 63 | LAM bit 61.
  const x86::cr3 cr3{0x1000 | 0x123 | (uint64_t{1} << 63) | (uint64_t{1} << 61)};
  const auto root = x86::cr3_root(cr3, x86::paging_mode::four_level, 52);
  EXPECT_EQ(root.value(), 0x1000u);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae | x86::cr4::pcide, efer_lma, root);
  const paging::walker_4level w(mmu, {});
  auto mem = m.mem();
  const auto r = w.walk(mem, mmu, {x86::gva{va4}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x7abcu);
}

TEST(WalkGolden, ReadOnlyMemoryAndSwitchedOffAdWriteNothing) {
  image m;
  four_level(m, P | RW, P | RW, P | RW, P | RW);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
  const paging::walker_4level w(mmu, {});
  const auto view = m.view();
  paging::walk_request req{};
  req.linear = x86::gva{va4};
  req.access = x86::pfec::write;
  auto v = view;
  ASSERT_TRUE(w.walk(v, mmu, req));
  EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | RW);
  auto mem = m.mem();
  req.update_ad = false;
  ASSERT_TRUE(w.walk(mem, mmu, req));
  EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | RW);
  req.update_ad = true;
  ASSERT_TRUE(w.walk(mem, mmu, req));
  EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | RW | A | D);
}

TEST(WalkGolden, UnbackedTableIsATypedError) {
  image m(0x5000);
  m.put64(0x1000, 0x2000 | P | RW);
  m.put64(0x2000 + 8, 0x3000 | P | RW);
  m.put64(0x3000 + 8, 0x10'0000 | P | RW);  // page table outside the image
  const auto r = walk4(m, cr0_pg, {}, {}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::unbacked);
  EXPECT_EQ(r.error().level, 1);
  EXPECT_EQ(r.error().guest_entry_address(), x86::gpa{0x10'0000 + 8});
}

TEST(WalkGolden, AmdNonLeafBit8) {
  image m;
  four_level(m, P | RW | 0x100, P | RW | 0x100, P | RW, P | RW | 0x100);
  EXPECT_TRUE(walk4(m, cr0_pg, {}, {}, {}));  // Intel: ignored (and G in the PTE)
  paging::cpu_properties amd{};
  amd.amd_nonleaf_bit8 = true;
  const auto r = walk4(m, cr0_pg, {}, {}, {}, va4, amd);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r.error().level, 4);
  image m2;
  four_level(m2, P | RW, P | RW | 0x100, P | RW, P | RW);  // PDPTE bit 8 stays ignored on AMD
  EXPECT_TRUE(walk4(m2, cr0_pg, {}, {}, {}, va4, amd));
}

TEST(WalkGolden, NxBitReservedWithoutNxeAndProtectionKey) {
  image m;
  four_level(m, P | RW | US, P | RW | US, P | RW | US, P | RW | US | XD | (uint64_t{5} << 59));
  const auto r = walk4(m, cr0_pg, {}, {}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r.error().level, 1);
  const auto ok = walk4(m, cr0_pg, {}, x86::efer::nxe, x86::pfec::user);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->pkey, 5);
  EXPECT_EQ(ok->address.value(), 0x7abcu);  // bits 62:59 are not address
  EXPECT_FALSE(ok->rights.test(paging::pte_access::exec));
  EXPECT_TRUE(ok->rights.test(paging::pte_access::user | paging::pte_access::write));
  // PKRU.AD for key 5 with CR4.PKE: a user read faults with P | U | PK.
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae | x86::cr4::pke, efer_lma | x86::efer::nxe,
                                             x86::gpa{0x1000});
  const paging::walker_4level w(mmu, {});
  auto mem = m.mem();
  paging::walk_request req{};
  req.linear = x86::gva{va4};
  req.access = x86::pfec::user;
  req.pkru = 1u << 10;
  const auto pk = w.walk(mem, mmu, req);
  ASSERT_FALSE(pk);
  EXPECT_EQ(pk.error().kind, fault_kind::protection_key);
  EXPECT_EQ(pk.error().error_code.raw(), 0x25u);
}

TEST(WalkGolden, PaePdptesComeFromTheSnapshot) {
  image m;
  // PDPT at 0x1020 (32-byte aligned); PDPTE 1 -> PD 0x3000 -> PT 0x4000 -> 0x7000.
  m.put64(0x1020 + 8, 0x3000 | P);
  m.put64(0x3000 + 8, 0x4000 | P | RW);
  m.put64(0x4000 + 8, 0x7000 | P | RW);
  const x86::cr3 cr3{0x1020 | 0x18 /* PWT, PCD */};
  const auto pd = paging::load_pdptrs(cr3, m.view(), 36);
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->pdpt.value(), 0x1020u);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, {}, pd->pdpt);
  paging::cpu_properties props{};
  props.maxphyaddr = 36;
  const paging::walker_pae w(mmu, props, *pd);
  const uint64_t va = (1u << 30) | (1u << 21) | (1u << 12) | 0x123;
  // Later writes to the PDPT have no effect: the walker uses the registers.
  m.put64(0x1020 + 8, 0);
  auto mem = m.mem();
  const auto r = w.walk(mem, mmu, {x86::gva{va}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x7123u);
  EXPECT_EQ(r->path.count, 3);
  EXPECT_EQ(r->path[0].address.value(), 0x1028u);
  EXPECT_EQ(m.get64(0x1020 + 8), 0u);  // no A bit in PDPTEs
  // A PDPTE with a reserved bit (bit 1, or bit 36 with MAXPHYADDR 36) is #GP at load time.
  m.put64(0x1020 + 16, 0x5000 | P | 2);
  const auto bad = paging::load_pdptrs(cr3, m.view(), 36);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, paging::pdptr_error::kind_type::reserved_bit);
  EXPECT_EQ(bad.error().index, 2);
  EXPECT_EQ(bad.error().vector, x86::vector::gp);
  m.put64(0x1020 + 16, (uint64_t{1} << 36) | P);
  EXPECT_FALSE(paging::load_pdptrs(cr3, m.view(), 36));
  EXPECT_TRUE(paging::load_pdptrs(cr3, m.view(), 40));
  // Not present PDPTE: loads fine; the walk takes a not-present #PF at level 3.
  m.put64(0x1020 + 16, 0xfff0);
  const auto np = paging::load_pdptrs(cr3, m.view(), 36);
  ASSERT_TRUE(np);
  const paging::walker_pae w2(mmu, props, *np);
  const auto f = w2.walk(mem, mmu, {x86::gva{2u << 30}, x86::pfec::write});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, fault_kind::not_present);
  EXPECT_EQ(f.error().level, 3);
  EXPECT_EQ(f.error().error_code.raw(), 0x2u);
}

// PAE without the PDPTE registers: never a silent "not present" for a mapped address. The
// same tables as PaePdptesComeFromTheSnapshot (PDPTE 1 -> PD 0x3000 -> PT 0x4000 -> 0x7000).
TEST(WalkGolden, PaeWithoutSnapshotIsATypedError) {
  image m;
  m.put64(0x1020 + 8, 0x3000 | P);
  m.put64(0x3000 + 8, 0x4000 | P | RW);
  m.put64(0x4000 + 8, 0x7000 | P | RW);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, {}, x86::gpa{0x1020});
  paging::cpu_properties props{};
  props.maxphyaddr = 36;
  const uint64_t va = (1u << 30) | (1u << 21) | (1u << 12) | 0x123;
  // A guest_walker for a PAE role built without a snapshot (the mode is only known at run
  // time, so this compiles; walker_pae(mmu, props) does not, see compile_fail).
  const paging::guest_walker forgot(mmu, props);
  auto mem = m.mem();
  for (const auto& r : {forgot.walk(mem, mmu, {x86::gva{va}}), forgot.check(m.view(), mmu, {x86::gva{va}}),
                        forgot.translate(m.view(), x86::gva{va})}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, fault_kind::pdptes_not_loaded);
    EXPECT_EQ(r.error().level, 3);
    EXPECT_EQ(r.error().error_code.raw(), 0u);  // not a #PF: no error-code bits
  }
  EXPECT_EQ(m.get64(0x3000 + 8) & A, 0u);  // nothing written
  // The convenience for dump tools: the PDPTEs loaded from memory as MOV to CR3 loads them.
  const auto w = paging::guest_walker::with_pdptes_from(m.view(), mmu, props);
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->state().pdptes.loaded);
  EXPECT_EQ(w->state().pdptes.pdpt.value(), 0x1020u);
  EXPECT_EQ(w->state().pdptes.entries[1], 0x3000u | P);
  const auto t = w->translate(m.view(), x86::gva{va});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->address.value(), 0x7123u);
  // A not-present PDPTE of a loaded snapshot is still the architectural not-present #PF.
  const auto np = w->translate(m.view(), x86::gva{2u << 30});
  ASSERT_FALSE(np);
  EXPECT_EQ(np.error().kind, fault_kind::not_present);
  // A reserved bit in a present PDPTE: the load's #GP, as from load_pdptrs.
  m.put64(0x1020 + 16, 0x5000 | P | 2);
  const auto bad = paging::guest_walker::with_pdptes_from(m.view(), mmu, props);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, paging::pdptr_error::kind_type::reserved_bit);
  EXPECT_EQ(bad.error().index, 2);
  // Outside PAE nothing is read: an empty memory is fine.
  image empty(0);  // any read fails
  const auto mmu4 = paging::mmu_context::make(cr0_pg, x86::cr4::pae, x86::efer::lme | x86::efer::lma, x86::gpa{0x1000});
  const auto w4 = paging::guest_walker::with_pdptes_from(empty.view(), mmu4, props);
  ASSERT_TRUE(w4);
  EXPECT_FALSE(w4->state().pdptes.loaded);
}

TEST(WalkGolden, PaeReservedBitsAndNx) {
  image m;
  m.put64(0x1000, 0x3000 | P);
  m.put64(0x3000, 0x4000 | P | RW | (uint64_t{1} << 52));  // bit 52: reserved in PAE (62:M)
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, m.view(), 52);
  ASSERT_TRUE(pd);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, x86::efer::nxe, x86::gpa{0x1000});
  const paging::walker_pae w(mmu, {}, *pd);
  auto mem = m.mem();
  const auto r = w.walk(mem, mmu, {x86::gva{0x123}, x86::pfec::fetch});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(r.error().error_code.raw(), 0x19u);  // P | RSVD | I/D (PAE with NXE)
}

// A memory whose compare-exchange reports a concurrent change `fail_times` times.
struct flaky {
  image* img;
  int* fail_times;
  bool operator()(x86::gpa a, unsigned n, uint64_t& out) const {
    if (a.value() + n > img->bytes.size()) return false;
    out = n == 8 ? img->get64(a.value()) : img->get32(a.value());
    return true;
  }
};
struct flaky_cas {
  image* img;
  int* fail_times;
  result<bool, paging::memory_error> operator()(x86::gpa a, unsigned n, uint64_t expected, uint64_t desired) const {
    if (a.value() + n > img->bytes.size()) return unexpected(paging::memory_error::unbacked);
    if (*fail_times > 0) {
      --*fail_times;
      return false;
    }
    const uint64_t cur = n == 8 ? img->get64(a.value()) : img->get32(a.value());
    if (cur != expected) return false;
    if (n == 8) img->put64(a.value(), desired);
    else img->put32(a.value(), static_cast<std::uint32_t>(desired));
    return true;
  }
};

TEST(WalkGolden, AdUpdateRewalksWhenAnEntryChanges) {
  image m;
  four_level(m, P | RW, P | RW, P | RW, P | RW);
  int fails = 3;
  auto mem = paging::make_callback_memory(flaky{&m, &fails}, flaky_cas{&m, &fails});
  static_assert(paging::writable_guest_memory<decltype(mem)>);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
  const paging::walker_4level w(mmu, {});
  const auto r = w.walk(mem, mmu, {x86::gva{va4}, x86::pfec::write});
  ASSERT_TRUE(r);
  EXPECT_EQ(fails, 0);
  EXPECT_EQ(m.get64(0x4000 + 8), 0x7000u | P | RW | A | D);
  fails = 1000;
  image m2;
  four_level(m2, P | RW, P | RW, P | RW, P | RW);
  auto mem2 = paging::make_callback_memory(flaky{&m2, &fails}, flaky_cas{&m2, &fails});
  const auto e = w.walk(mem2, mmu, {x86::gva{va4}, x86::pfec::write});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, fault_kind::retry_exhausted);
  EXPECT_EQ(fails, 1000 - static_cast<int>(paging::max_ad_retries));
  // Read-only callback memory: no A/D.
  auto ro = paging::make_callback_memory(flaky{&m2, &fails});
  static_assert(paging::guest_memory<decltype(ro)> && !paging::writable_guest_memory<decltype(ro)>);
  EXPECT_TRUE(w.walk(ro, mmu, {x86::gva{va4}, x86::pfec::write}));
}

TEST(WalkGolden, FlatMemoryBounds) {
  std::array<std::uint8_t, 16> b{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  paging::flat_memory m(b.data(), b.size(), x86::gpa{0x1000});
  EXPECT_EQ(*m.read64(x86::gpa{0x1008}), 0x100f0e0d0c0b0a09u);
  EXPECT_EQ(*m.read32(x86::gpa{0x100c}), 0x100f0e0du);
  EXPECT_FALSE(m.read64(x86::gpa{0x1009}));   // crosses the end
  EXPECT_FALSE(m.read32(x86::gpa{0xffc}));    // below the base
  EXPECT_FALSE(m.read64(x86::gpa{~uint64_t{0} - 3}));  // no wrap-around
  EXPECT_EQ(m.read64(x86::gpa{0x1010}).error(), paging::memory_error::unbacked);
  EXPECT_TRUE(*m.cmpxchg64(x86::gpa{0x1000}, 0x0807060504030201u, 42));
  EXPECT_FALSE(*m.cmpxchg64(x86::gpa{0x1000}, 0x0807060504030201u, 43));
  EXPECT_EQ(*m.read64(x86::gpa{0x1000}), 42u);
  EXPECT_FALSE(m.cmpxchg32(x86::gpa{0x100e}, 0, 1));
}

// read32/read64 succeed exactly when every byte lies in the buffer, for every buffer size
// 0-12 and every address from 8 below the base to 8 past the end (plus the top of the
// address space): the rule written here with signed arithmetic, not the library's offsets.
TEST(WalkGolden, FlatMemoryBoundsEveryOffset) {
  std::array<std::uint8_t, 12> b{};
  const std::int64_t base = 0x1000;
  unsigned n = 0;
  for (std::size_t size = 0; size <= b.size(); ++size) {
    const paging::flat_view m(b.data(), size, x86::gpa{static_cast<uint64_t>(base)});
    for (std::int64_t a = base - 8; a <= base + static_cast<std::int64_t>(size) + 8; ++a) {
      const bool fits4 = a >= base && a + 4 <= base + static_cast<std::int64_t>(size);
      const bool fits8 = a >= base && a + 8 <= base + static_cast<std::int64_t>(size);
      EXPECT_EQ(m.read32(x86::gpa{static_cast<uint64_t>(a)}).has_value(), fits4) << size << " " << a;
      EXPECT_EQ(m.read64(x86::gpa{static_cast<uint64_t>(a)}).has_value(), fits8) << size << " " << a;
      EXPECT_EQ(m.contains(x86::gpa{static_cast<uint64_t>(a)}, 8), fits8);
      n += 3;
    }
    for (uint64_t top = 0; top < 8; ++top) {
      EXPECT_FALSE(m.read64(x86::gpa{~uint64_t{0} - top}));
      EXPECT_FALSE(m.read32(x86::gpa{~uint64_t{0} - top}));
    }
  }
  EXPECT_EQ(n, 3u * (13u * 17u + 78u));
}

// A constant-evaluated walk: 4-level, 4 KiB page, through a flat_view over a constexpr image.
constexpr std::array<std::uint8_t, 0x5000> const_image() {
  std::array<std::uint8_t, 0x5000> b{};
  auto put = [&b](uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) b[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(0x1000, 0x2000 | P | RW);
  put(0x2000 + 8, 0x3000 | P | RW);
  put(0x3000 + 8, 0x4000 | P | RW);
  put(0x4000 + 8, 0x7000 | P);
  return b;
}
constexpr auto cimg = const_image();
constexpr paging::walk_result const_walk(uint64_t va, x86::pfec access) {
  const auto mmu = paging::mmu_context::make(x86::cr0{0x80010001}, x86::cr4{0x20}, x86::efer{0x500}, x86::gpa{0x1000});
  const paging::walker_4level w(mmu, {});
  paging::flat_view v(cimg.data(), cimg.size());
  return w.walk(v, mmu, {x86::gva{va}, access});
}

TEST(WalkGolden, ConstexprWalk) {
  using hvkit::test::rt;
  HVKIT_BOTH(const_walk(va4, {})->address.value() == 0x7abc);
  HVKIT_BOTH(const_walk(va4, x86::pfec::write).error().error_code.raw() == 0x3);  // WP=1, read-only
  HVKIT_BOTH(const_walk(va4 + 0x1000, {}).error().kind == fault_kind::not_present);
  EXPECT_EQ(const_walk(rt(va4), {})->address.value(), 0x7abcu);
}

// ---- EPT ----

constexpr uint64_t R = 1, W = 2, X = 4, EPT_PS = 0x80, EA = 0x100, ED = 0x200, XU = 0x400, WB = 6u << 3;

// EPT tables for GPA 0x4020'1abc: PML4 0x10000 -> PDPT 0x11000[1] -> PD 0x12000[1] -> PT 0x13000[1].
constexpr uint64_t gpa4 = (uint64_t{1} << 30) | (uint64_t{1} << 21) | (uint64_t{1} << 12) | 0xabc;
void ept_tables(image& m, uint64_t l4, uint64_t l3, uint64_t l2, uint64_t l1) {
  m.put64(0x10000, 0x11000 | l4);
  m.put64(0x11000 + 8, 0x12000 | l3);
  m.put64(0x12000 + 8, 0x13000 | l2);
  m.put64(0x13000 + 8, 0x18000 | l1);
}
paging::ept_walker make_ept(bool ad, paging::ept_capabilities caps = {}) {
  const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x10000}, 4, ad), caps);
  EXPECT_TRUE(w);
  return *w;
}

TEST(EptGolden, WriteOnlyEntryIsMisconfiguration) {
  image m;
  ept_tables(m, R | W | X, R | W | X, W /* write-only */, R | W | X | WB);
  auto mem = m.mem();
  const auto r = make_ept(false).walk(mem, {x86::gpa{gpa4}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(r.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(r.error().level, 2);
  EXPECT_EQ(r.error().host_entry_address(), x86::hpa{0x12008});  // EPT tables are host-physical
  EXPECT_EQ(r.error().qualification.raw(), 0u);
  EXPECT_EQ(r.error().guest_physical.value(), gpa4);
}

TEST(EptGolden, ExecuteOnlyAndMemoryTypes) {
  image m;
  ept_tables(m, R | W | X, R | W | X, R | W | X, X | WB);
  auto mem = m.mem();
  paging::ept_capabilities no_xo{};
  no_xo.execute_only = false;
  const auto mis = make_ept(false, no_xo).walk(mem, {x86::gpa{gpa4}, paging::ept_access::fetch});
  ASSERT_FALSE(mis);
  EXPECT_EQ(mis.error().kind, fault_kind::ept_misconfig);
  const paging::ept_capabilities xo{};  // the default: every capability, execute-only included
  const auto w = make_ept(false, xo);
  const auto f = w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::fetch});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->address.value(), 0x18abcu);
  EXPECT_EQ(f->memory_type, 6);
  const auto rd = w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::read});
  ASSERT_FALSE(rd);
  EXPECT_EQ(rd.error().kind, fault_kind::permission);
  EXPECT_EQ(rd.error().qualification.raw(), 0x21u);  // read; executable
  EXPECT_EQ(rd.error().level, 1);
  // Memory type 2, 3 or 7 in the leaf: misconfiguration.
  for (uint64_t mt : {2u, 3u, 7u}) {
    m.put64(0x13000 + 8, 0x18000 | R | W | X | (mt << 3));
    EXPECT_EQ(w.walk(mem, {x86::gpa{gpa4}}).error().kind, fault_kind::ept_misconfig) << mt;
  }
  // Memory type bits in a non-leaf entry (bits 7:3 reserved): misconfiguration.
  ept_tables(m, R | W | X | WB, R | W | X, R | W | X, R | W | X | WB);
  EXPECT_EQ(w.walk(mem, {x86::gpa{gpa4}}).error().level, 4);
}

TEST(EptGolden, LargePagesAndNotPresentQualification) {
  image m;
  m.put64(0x10000, 0x11000 | R | W | X);
  m.put64(0x11000 + 8, 0x8000'0000 | R | W | X | EPT_PS | WB | 0x40 /* ignore PAT */);  // 1 GiB
  auto mem = m.mem();
  const auto w = make_ept(false);
  const auto r = w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::write});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x8000'0000u + 0x20'1abcu);
  EXPECT_EQ(r->page_size(), uint64_t{1} << 30);
  EXPECT_EQ(r->memory_type, 6 | 8);
  paging::ept_capabilities no1g{};
  no1g.page_1g = false;
  EXPECT_EQ(make_ept(false, no1g).walk(mem, {x86::gpa{gpa4}}).error().kind, fault_kind::ept_misconfig);
  // Not present at the PDPTE: qualification = access bits only, plus 7/8 for the linear address.
  m.put64(0x11000 + 8, 0);
  paging::ept_request req{x86::gpa{gpa4}, paging::ept_access::write};
  req.linear_valid = true;
  req.linear = x86::gva{0x1234};
  const auto np = w.walk(mem, req);
  ASSERT_FALSE(np);
  EXPECT_EQ(np.error().kind, fault_kind::not_present);
  EXPECT_EQ(np.error().qualification.raw(), 0x182u);  // write, linear valid, final translation
  EXPECT_EQ(np.error().level, 3);
  req.origin = paging::ept_origin::paging_structure;
  EXPECT_EQ(w.walk(mem, req).error().qualification.raw(), 0x82u);
}

TEST(EptGolden, PermissionQualificationAndMbec) {
  image m;
  ept_tables(m, R | W | X | XU, R | X | XU, R | W | X | XU, R | W | XU | WB);  // W=0 at PDPTE, XS=0 at PTE
  auto mem = m.mem();
  const auto w = make_ept(false);
  const auto wr = w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::write});
  ASSERT_FALSE(wr);
  EXPECT_EQ(wr.error().qualification.raw(), 0x0au);  // write; readable; not writable, not executable
  EXPECT_EQ(wr.error().level, 3);
  paging::ept_capabilities mb{};
  mb.mbec = true;
  const auto wm = make_ept(false, mb);
  // Supervisor-mode linear address: XS (bit 2) = 0 at the PTE.
  const auto fs = wm.walk(mem, {x86::gpa{gpa4}, paging::ept_access::fetch});
  ASSERT_FALSE(fs);
  EXPECT_EQ(fs.error().qualification.raw(), 0x4cu);  // fetch; readable; user-executable
  // User-mode linear address: XU = 1 everywhere.
  EXPECT_TRUE(wm.walk(mem, {x86::gpa{gpa4}, paging::ept_access::fetch | paging::ept_access::user_address}));
}

TEST(EptGolden, AccessedDirtyAndEptp) {
  image m;
  ept_tables(m, R | W | X, R | W | X, R | W | X, R | W | X | WB);
  auto mem = m.mem();
  const auto w = make_ept(true);
  ASSERT_TRUE(w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::read}));
  EXPECT_EQ(m.get64(0x10000) & (EA | ED), EA);
  EXPECT_EQ(m.get64(0x13008) & (EA | ED), EA);
  ASSERT_TRUE(w.walk(mem, {x86::gpa{gpa4}, paging::ept_access::write}));
  EXPECT_EQ(m.get64(0x13008) & (EA | ED), EA | ED);
  EXPECT_EQ(m.get64(0x12008) & (EA | ED), EA);
  // Without A/D in the EPTP nothing is written.
  image m2;
  ept_tables(m2, R | W | X, R | W | X, R | W | X, R | W | X | WB);
  auto mem2 = m2.mem();
  ASSERT_TRUE(make_ept(false).walk(mem2, {x86::gpa{gpa4}, paging::ept_access::write}));
  EXPECT_EQ(m2.get64(0x13008) & (EA | ED), 0u);
  // EPTP checks.
  paging::ept_capabilities caps{};
  EXPECT_EQ(paging::ept_walker::make(paging::ept_pointer{0x10000 | (2u << 3) | 6}, caps).error(),
            paging::eptp_error::walk_length);
  EXPECT_EQ(paging::ept_walker::make(paging::ept_pointer{0x10000 | (3u << 3) | 1}, caps).error(),
            paging::eptp_error::memory_type);
  EXPECT_EQ(paging::ept_walker::make(paging::ept_pointer{0x10000 | (3u << 3) | 6 | 0x100}, caps).error(),
            paging::eptp_error::reserved_bits);
  caps.ad = false;
  EXPECT_EQ(paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x10000}, 4, true), caps).error(),
            paging::eptp_error::ad_unsupported);
}

// The EPT walk builds its translation in place: every member is written on success, none is
// left from what the storage held before (walk_checked() into a translation filled with a
// byte pattern), and walk(), whose output address travels in a register up to its one store
// (also after the A/D slow path), agrees member by member. Golden values from the tables
// below (SDM 29.3.2: the entry addresses of a 4- and a 5-level walk, the page sizes).
struct ept_golden {
  const char* what;
  unsigned levels;          // EPTP page-walk length
  unsigned leaf;            // level of the mapping entry
  uint64_t first;           // address of the top-level entry
  std::array<uint64_t, 5> values;
  uint64_t address;
};
// The top entry's address for `gpa` (SDM 29.3.2: bits 47:39 index the EPT PML4 table, bits
// 56:48 the EPT PML5 table; the tables of `g` map PML4 entries 0 and 1 alike).
uint64_t top_entry(const ept_golden& g, uint64_t gpa) {
  return g.first + ((gpa >> (g.levels == 5 ? 48 : 39)) & 511u) * 8u;
}
void expect_translation(const paging::host_translation& t, const ept_golden& g, uint64_t gpa) {
  SCOPED_TRACE(g.what);
  EXPECT_EQ(t.address.value(), g.address);
  for (unsigned i = 0; i < 5; ++i) EXPECT_EQ(t.path.values[i], g.values[i]) << "entry " << i;
  EXPECT_EQ(t.path.first, top_entry(g, gpa));
  EXPECT_EQ(t.path.input, gpa);
  EXPECT_EQ(t.path.count, g.levels - g.leaf + 1);
  EXPECT_EQ(t.path.top, g.levels);
  EXPECT_EQ(t.path.index_bits, 9);
  EXPECT_EQ(t.path.entry_bytes, 8);
  EXPECT_EQ(t.rights.raw(), (paging::pte_access::read | paging::pte_access::write | paging::pte_access::exec).raw());
  EXPECT_EQ(t.pkey, 0);
  EXPECT_EQ(t.memory_type, 6);  // WB, ignore-PAT clear
  EXPECT_EQ(t.page_shift, 12 + 9 * (g.leaf - 1));
}
TEST(EptGolden, TranslationWrittenInPlace) {
  constexpr uint64_t rwx = R | W | X, pml5 = 0x14000;
  constexpr uint64_t l4 = 0x11000 | rwx, l3 = 0x12000 | rwx, l2 = 0x13000 | rwx, l1 = 0x18000 | rwx | WB;
  constexpr uint64_t l3_1g = 0x8000'0000 | rwx | EPT_PS | WB, l2_2m = 0x4000'0000 | rwx | EPT_PS | WB;
  constexpr uint64_t l5 = 0x10000 | rwx;
  const ept_golden cases[] = {
      {"4-level, 4 KiB", 4, 1, 0x10000, {l4, l3, l2, l1, 0}, 0x18abc},
      {"4-level, 2 MiB", 4, 2, 0x10000, {l4, l3, l2_2m, 0, 0}, 0x4000'0000 + 0x1abc},
      {"4-level, 1 GiB", 4, 3, 0x10000, {l4, l3_1g, 0, 0, 0}, 0x8000'0000 + 0x20'1abc},
      {"5-level, 4 KiB", 5, 1, pml5, {l5, l4, l3, l2, l1}, 0x18abc},
      {"5-level, 2 MiB", 5, 2, pml5, {l5, l4, l3, l2_2m, 0}, 0x4000'0000 + 0x1abc},
      {"5-level, 1 GiB", 5, 3, pml5, {l5, l4, l3_1g, 0, 0}, 0x8000'0000 + 0x20'1abc},
  };
  // gpa4 at PML4 index 0, and with bit 39 set at PML4 index 1 (the same tables below).
  for (const ept_golden& g : cases) {
    for (const uint64_t gpa : {gpa4, gpa4 | (uint64_t{1} << 39)}) {
      for (const bool ad : {false, true}) {
        SCOPED_TRACE(ad ? "EPT A/D" : "no EPT A/D");
        SCOPED_TRACE(gpa);
        image m;
        ept_tables(m, rwx, rwx, rwx, rwx | WB);
        m.put64(0x10000 + 8, 0x11000 | rwx);  // PML4 entry 1 as entry 0
        if (g.leaf == 3) m.put64(0x11000 + 8, l3_1g);
        if (g.leaf == 2) m.put64(0x12000 + 8, l2_2m);
        m.put64(pml5, l5);
        const x86::hpa root{g.levels == 5 ? pml5 : 0x10000};
        const auto w = paging::ept_walker::make(paging::make_ept_pointer(root, g.levels, ad), {});
        ASSERT_TRUE(w);
        auto mem = m.mem();
        const paging::ept_request req{x86::gpa{gpa}, paging::ept_access::read};
        // walk_checked(): the walk and its checks, nothing written to memory.
        paging::host_translation t;
        std::memset(static_cast<void*>(&t), 0xa5, sizeof t);
        paging::walk_fault f = w->fault_for(req);
        uint64_t all = 0;
        ASSERT_TRUE(w->walk_checked(std::as_const(mem), req, t, f, all));
        expect_translation(t, g, gpa);
        // walk(): with EPT A/D the A flags are clear, so the slow path fills the result (the
        // entries as read before it set them).
        const auto r = w->walk(mem, req);
        ASSERT_TRUE(r);
        expect_translation(*r, g, gpa);
        if (ad) {
          EXPECT_EQ(m.get64(0x10000 + ((gpa >> 39) & 511u) * 8u) & EA, EA);
        }
        const auto again = w->walk(mem, req);  // the flags are set now: the fast path
        ASSERT_TRUE(again);
        EXPECT_EQ(again->address.value(), g.address);
        EXPECT_EQ(again->path.first, top_entry(g, gpa));
        EXPECT_EQ(again->path.count, g.levels - g.leaf + 1);
        EXPECT_EQ(again->page_shift, 12 + 9 * (g.leaf - 1));
      }
    }
  }
}

// ---- nested ----

// L2 guest: 4-level tables at L2 gpa 0x1000..0x4000 mapping va4 -> L2 gpa 0x7abc.
// EPT: identity-ish map of L2 gpa 0x0000-0x7fff to L1 0x20000 + gpa, 4 KiB pages, in PT 0x13000.
struct nested_setup {
  image m{0x40000};
  nested_setup(uint64_t ept_pte_flags, uint64_t guest_flags) {
    m.put64(0x10000, 0x11000 | R | W | X);
    m.put64(0x11000, 0x12000 | R | W | X);
    m.put64(0x12000, 0x13000 | R | W | X);
    for (uint64_t p = 0; p < 8; ++p) m.put64(0x13000 + 8 * p, (0x20000 + p * 0x1000) | ept_pte_flags | WB);
    // Guest tables live at L1 0x20000 + L2 gpa.
    m.put64(0x21000, 0x2000 | guest_flags);
    m.put64(0x22000 + 8, 0x3000 | guest_flags);
    m.put64(0x23000 + 8, 0x4000 | guest_flags);
    m.put64(0x24000 + 8, 0x7000 | guest_flags);
  }
};

paging::nested_result nested_walk(nested_setup& s, bool ept_ad, x86::pfec access, paging::ept_capabilities caps = {}) {
  const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
  const paging::walker_4level g(mmu, {});
  const paging::nested_walker<paging::format::ia32e<4>> n(g, make_ept(ept_ad, caps));
  auto mem = s.m.mem();
  return n.walk(mem, mmu, {x86::gva{va4}, access});
}

TEST(EptGolden, MisconfigurationReasons) {
  using M = paging::ept_misconfig;
  const paging::ept_capabilities none{46, false, true, true, false, false, true, false};
  const paging::ept_capabilities all{46, true, true, true, true, true, true, true};
  constexpr auto why = [](uint64_t e, unsigned level, const paging::ept_capabilities& c) {
    return paging::ept_misconfiguration(paging::ept_entry{e}, level, c);
  };
  // Bits 2:0 = 010b and 110b: write without read, capabilities or not.
  EXPECT_EQ(why(0x2, 1, all), M::write_without_read);
  EXPECT_EQ(why(0x6 | (6 << 3), 1, all), M::write_without_read);
  // 100b: execute-only needs capability bit 0; XU alone (bit 10) counts only under MBEC.
  EXPECT_EQ(why(0x4 | (6 << 3), 1, none), M::execute_only_unsupported);
  EXPECT_EQ(why(0x4 | (6 << 3), 1, all), M::none);
  EXPECT_EQ(why(0x400 | 0x1 | (6 << 3), 1, none), M::none);
  // Leaf memory types 2, 3, 7 are reserved; in a non-leaf bits 5:3 are plain reserved bits.
  EXPECT_EQ(why(0x7 | (2 << 3), 1, all), M::reserved_memory_type);
  EXPECT_EQ(why(0x87 | (7 << 3), 2, all), M::reserved_memory_type);
  EXPECT_EQ(why(0x7 | (6 << 3), 4, all), M::reserved_bits);
  EXPECT_EQ(why(0x7, 4, all), M::none);
  // PS=1: a 2 MiB page needs capability bit 16, never at PML4E level.
  EXPECT_EQ(why(0x87 | (6 << 3), 2, all), M::none);
  EXPECT_EQ(why(0x87 | (6 << 3), 2, none), M::large_page_unsupported);
  EXPECT_EQ(why(0x87 | (6 << 3), 4, all), M::large_page_unsupported);
  // Reserved bits: bit 12 of a 2 MiB leaf; bit 46 with MAXPHYADDR 46 (bit 45 is address).
  EXPECT_EQ(why(0x87 | (6 << 3) | 0x1000, 2, all), M::reserved_bits);
  EXPECT_EQ(why(0x7 | (6 << 3) | (uint64_t{1} << 46), 1, all), M::reserved_bits);
  EXPECT_EQ(why(0x7 | (6 << 3) | (uint64_t{1} << 45), 1, all), M::none);
  static_assert(paging::ept_misconfiguration(paging::ept_entry{0x2}, 1, paging::ept_capabilities{}) ==
                M::write_without_read);
}

TEST(NestedGolden, FourByFourSuccessGivesL2AndL1Addresses) {
  nested_setup s(R | W | X, P | RW);
  const auto r = nested_walk(s, false, x86::pfec::write);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l2_gpa().value(), 0x7abcu);
  EXPECT_EQ(r->l1_address().value(), 0x27abcu);
  EXPECT_EQ(r->guest.path.count, 4);
  EXPECT_EQ(r->guest.path[0].address.value(), 0x1000u);  // L2 gpa of the PML4E
  EXPECT_EQ(r->second.path.count, 4);
  // Guest A/D written at the L1 address of each guest entry.
  EXPECT_EQ(s.m.get64(0x24008), 0x7000u | P | RW | A | D);
  EXPECT_EQ(s.m.get64(0x21000), 0x2000u | P | RW | A);
  // No EPT A/D without EPTP bit 6.
  EXPECT_EQ(s.m.get64(0x13000 + 8) & (EA | ED), 0u);
}

TEST(NestedGolden, EptAdMarksPagingStructureReadsAsWrites) {
  nested_setup s(R | W | X, P | RW | A);
  const auto r = nested_walk(s, true, {});
  ASSERT_TRUE(r);
  // The EPT PTEs of the guest tables (L2 gpa 0x1000..0x4000) are dirty: their accesses were
  // writes. The final page (L2 gpa 0x7000, a read) is accessed, not dirty.
  for (uint64_t p = 1; p <= 4; ++p) EXPECT_EQ(s.m.get64(0x13000 + 8 * p) & (EA | ED), EA | ED) << p;
  EXPECT_EQ(s.m.get64(0x13000 + 8 * 7) & (EA | ED), EA);
  EXPECT_EQ(s.m.get64(0x10000) & (EA | ED), EA);
  // Guest tables read-only in EPT: with EPT A/D the first table read is an EPT violation
  // with a write access, linear address valid, paging-structure access (bit 8 clear).
  nested_setup ro(R | X, P | RW | A);
  const auto v = nested_walk(ro, true, {});
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(v.error().kind, fault_kind::permission);
  EXPECT_EQ(v.error().qualification.raw(), 0x80u | 0x20u | 0x08u | 0x03u);  // read+write; R, X; bit 7
  EXPECT_EQ(v.error().guest_physical.value(), 0x1000u);
  EXPECT_EQ(v.error().linear.value(), va4);
  // Without EPT A/D the same reads are fine, and the walk succeeds when A/D are already set.
  nested_setup ro2(R | X, P | RW | A);
  ro2.m.put64(0x24008, 0x7000 | P | RW | A);
  EXPECT_TRUE(nested_walk(ro2, false, {}));
}

TEST(NestedGolden, GuestAdUpdateNeedsEptWrite) {
  // EPT read-only guest tables, no EPT A/D, guest A clear: setting A is a write that EPT refuses.
  nested_setup s(R | X, P | RW);
  const auto v = nested_walk(s, false, {});
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(v.error().qualification.raw(), 0x80u | 0x20u | 0x08u | 0x02u);  // write; R, X; bit 7
  EXPECT_EQ(s.m.get64(0x21000), 0x2000u | P | RW);  // nothing written
}

TEST(NestedGolden, WhichStageFailed) {
  // Guest not-present PTE: a guest #PF.
  nested_setup s(R | W | X, P | RW);
  s.m.put64(0x24008, 0);
  const auto g = nested_walk(s, false, x86::pfec::write);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().stage, paging::walk_stage::guest);
  EXPECT_EQ(g.error().kind, fault_kind::not_present);
  EXPECT_EQ(g.error().error_code.raw(), 0x2u);
  EXPECT_EQ(g.error().level, 1);
  // Final page not present in EPT: EPT violation with bit 8 set.
  nested_setup f(R | W | X, P | RW);
  f.m.put64(0x13000 + 8 * 7, 0);
  const auto e = nested_walk(f, false, x86::pfec::write);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(e.error().kind, fault_kind::not_present);
  EXPECT_EQ(e.error().qualification.raw(), 0x182u);
  EXPECT_EQ(e.error().guest_physical.value(), 0x7abcu);
  EXPECT_EQ(f.m.get64(0x21000), 0x2000u | P | RW);  // no guest A/D on a faulting walk
  // EPT misconfiguration on a guest-table translation.
  nested_setup mc(R | W | X, P | RW);
  mc.m.put64(0x13000 + 8 * 3, 0x23000 | W | WB);
  const auto c = nested_walk(mc, false, {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(c.error().guest_physical.value(), 0x3008u);
}

// The guest tables at L2 0x1000..0x4000 share one 2 MiB EPT region, so the EPT upper
// entries read for the PML4 are reused for the later table reads (ept_walker::
// table_read); a fault in a later table's EPT PTE must still be found and reported as by
// an uncached walk.
TEST(NestedGolden, CachedEptUpperEntriesStillCheckThePte) {
  // The PD's page (L2 0x3000) not present in EPT: violation on the read of 0x3008, level 1,
  // qualification R | linear valid = 0x81.
  nested_setup np(R | W | X, P | RW);
  np.m.put64(0x13000 + 8 * 3, 0);
  const auto a = nested_walk(np, false, {});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(a.error().kind, fault_kind::not_present);
  EXPECT_EQ(a.error().guest_physical.value(), 0x3008u);
  EXPECT_EQ(a.error().level, 1);
  EXPECT_EQ(a.error().qualification.raw(), 0x81u);
  // The PT's page (L2 0x4000) read-only with EPT A/D on: the table read counts as a write
  // (SDM 29.3.3.2): R | W | readable | linear valid = 0x8b.
  // Guest A flags already set: no guest A/D write, so the fast (cached) path runs.
  nested_setup ro(R | W | X, P | RW | A);
  ro.m.put64(0x13000 + 8 * 4, 0x24000 | R | WB);
  const auto b = nested_walk(ro, true, {});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().kind, fault_kind::permission);
  EXPECT_EQ(b.error().guest_physical.value(), 0x4008u);
  EXPECT_EQ(b.error().qualification.raw(), 0x8bu);
  // Without EPT A/D the same read goes through, at the right L1 address.
  const auto c = nested_walk(ro, false, {});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->l1_address().value(), 0x27abcu);
  // The PDPT's page (L2 0x2000) mapped elsewhere: the cached walk must use its own PTE.
  nested_setup moved(R | W | X, P | RW | A);
  moved.m.put64(0x13000 + 8 * 2, 0x26000 | R | W | X | WB);
  moved.m.put64(0x26000 + 8, 0x3000 | P | RW | A);  // the moved PDPT points at the same PD
  moved.m.put64(0x22000 + 8, 0);                // the old one would fault
  const auto d = nested_walk(moved, false, {});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->l1_address().value(), 0x27abcu);
}

// The checks a cached EPT PTE still gets (ept_walker::table_read: one mask test for R, W
// with EPT A/D and the reserved bits, then the memory type), each against the rule of SDM
// 29.3.3.1 (misconfigurations) or 29.3.3.2 / 29.3.5 (EPT A/D), typed from the SDM: the
// guest tables at L2 0x1000..0x4000 share one EPT page table, so the reads of 0x2000,
// 0x3000 and 0x4000 hit the cache filled by the read of 0x1000.
TEST(NestedGolden, CachedEptPteMisconfigurationsAndDirtyFlag) {
  // Memory type 7 in the PTE of the PD's page (a leaf: reserved type): EPT misconfiguration
  // on the read of 0x3008, which has no qualification.
  nested_setup mt(R | W | X, P | RW | A);
  mt.m.put64(0x13000 + 8 * 3, 0x23000 | R | W | X | (7u << 3));
  const auto a = nested_walk(mt, false, {});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(a.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(a.error().guest_physical.value(), 0x3008u);
  EXPECT_EQ(a.error().level, 1);
  EXPECT_EQ(a.error().qualification.raw(), 0u);
  // Write without read (bits 2:0 = 010b) in the PTE of the PDPT's page: a misconfiguration,
  // not a violation, though R is missing.
  nested_setup wr(R | W | X, P | RW | A);
  wr.m.put64(0x13000 + 8 * 2, 0x22000 | W | WB);
  const auto b = nested_walk(wr, false, {});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(b.error().guest_physical.value(), 0x2008u);
  // Bit 51 (above MAXPHYADDR 46, reserved) in the PTE of the PT's page.
  nested_setup rb(R | W | X, P | RW | A);
  rb.m.put64(0x13000 + 8 * 4, 0x24000 | R | W | X | WB | (uint64_t{1} << 51));
  paging::ept_capabilities caps46{};
  caps46.maxphyaddr = 46;
  const auto c = nested_walk(rb, false, {}, caps46);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(c.error().guest_physical.value(), 0x4008u);
  // EPT A/D on, every flag set but D in the cached PTE of the PD's page: the read is a
  // write (SDM 29.3.3.2), so the walk sets D there (SDM 29.3.5) and leaves the rest alone.
  nested_setup d(R | W | X | EA | ED, P | RW | A | D);
  d.m.put64(0x10000, 0x11000 | R | W | X | EA);
  d.m.put64(0x11000, 0x12000 | R | W | X | EA);
  d.m.put64(0x12000, 0x13000 | R | W | X | EA);
  d.m.put64(0x13000 + 8 * 3, 0x23000 | R | W | X | WB | EA);
  const auto e = nested_walk(d, true, {});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->l1_address().value(), 0x27abcu);
  EXPECT_EQ(d.m.get64(0x13000 + 8 * 3), 0x23000u | R | W | X | WB | EA | ED);
  EXPECT_EQ(d.m.get64(0x13000 + 8 * 2), 0x22000u | R | W | X | WB | EA | ED);
  // The guest tables in one 2 MiB EPT page (PDE with PS=1, mapping L2 0 -> L1 0): no PTE
  // and no cache; each table read takes the large-page leaf, whose reserved bits (20:12 of
  // a 2 MiB leaf, SDM Table 29-4) are checked.
  nested_setup big(R | W | X, P | RW | A);
  big.m.put64(0x12000, 0x0 | EPT_PS | R | W | X | WB);
  big.m.put64(0x1000, 0x2000 | P | RW | A);
  big.m.put64(0x2008, 0x3000 | P | RW | A);
  big.m.put64(0x3008, 0x4000 | P | RW | A);
  big.m.put64(0x4008, 0x7000 | P | RW | A | D);
  const auto f = nested_walk(big, false, {});
  ASSERT_TRUE(f);
  EXPECT_EQ(f->l1_address().value(), 0x7abcu);
  EXPECT_EQ(f->second.page_shift, 21);
  big.m.put64(0x12000, 0x0 | EPT_PS | R | W | X | WB | 0x1000);
  const auto g = nested_walk(big, false, {});
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().kind, fault_kind::ept_misconfig);
  EXPECT_EQ(g.error().guest_physical.value(), 0x1000u);
  EXPECT_EQ(g.error().level, 2);
  // The PDPT moved to L2 0x201000, in a 2 MiB EPT page (PDE 1: L2 0x200000 -> L1 0): the
  // tables' EPT walks go 4 KiB, 2 MiB, 4 KiB, 4 KiB, and the final translation's path (SDM
  // 29.3.2: PML4E, PDPTE, PDE, PTE of L2 0x7abc) holds the 4 KiB region's own entries.
  nested_setup mix(R | W | X, P | RW | A);
  mix.m.put64(0x12000 + 8, 0x0 | EPT_PS | R | W | X | WB);
  mix.m.put64(0x21000, 0x201000 | P | RW | A);
  mix.m.put64(0x1000 + 8, 0x3000 | P | RW | A);
  const auto h = nested_walk(mix, false, {});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->l1_address().value(), 0x27abcu);
  ASSERT_EQ(h->second.path.count, 4);
  EXPECT_EQ(h->second.path.values[0], 0x11000u | R | W | X);
  EXPECT_EQ(h->second.path.values[1], 0x12000u | R | W | X);
  EXPECT_EQ(h->second.path.values[2], 0x13000u | R | W | X);
  EXPECT_EQ(h->second.path.values[3], 0x27000u | R | W | X | WB);
}

// A 5-level EPT whose PML5E[0] points at the 4-level EPT's PML4 translates every address
// below 2^48 as the 4-level one does (SDM 29.3.2: the PML5 entry is one more level above
// the PML4 entry). The nested walk's per-walk EPT cache and its out-of-line misses handle
// both lengths with one copy of levels 4-1 (ept_walker::table_walk): every outcome, guest A/D
// write and EPT path must be the 4-level walk's, the path one entry longer at the top.
TEST(NestedGolden, FiveLevelEptMatchesFourLevelEpt) {
  constexpr uint64_t pml5 = 0x1f000;
  struct variant {
    const char* what;
    uint64_t ept_pte, guest;
    void (*edit)(image&);
  };
  const variant variants[] = {
      {"all rights", R | W | X, P | RW, nullptr},
      {"guest A/D set", R | W | X, P | RW | A | D, nullptr},
      {"read-only tables", R | X, P | RW | A | D, nullptr},
      {"PD page not present", R | W | X, P | RW | A, [](image& m) { m.put64(0x13000 + 8 * 3, 0); }},
      {"PT page read-only", R | W | X, P | RW | A, [](image& m) { m.put64(0x13000 + 8 * 4, 0x24000 | R | WB); }},
      {"PT page type 7", R | W | X, P | RW | A, [](image& m) { m.put64(0x13000 + 8 * 4, 0x24000 | R | W | (7u << 3)); }},
      {"PDPT page in another region", R | W | X, P | RW | A,
       [](image& m) {  // a second EPT page table (region 2 MiB) for L2 0x200000 -> L1 0x26000
         m.put64(0x12008, 0x14000 | R | W | X);
         m.put64(0x14000, 0x26000 | R | W | X | WB);
         m.put64(0x26008, 0x3000 | P | RW | A);
         m.put64(0x21000, 0x200000 | P | RW | A);
       }},
      {"data page 2 MiB EPT page", R | W | X, P | RW | A,
       [](image& m) {  // the guest's data page at L2 0x400000, an EPT 2 MiB page at L1 0
         m.put64(0x24008, 0x400000 | P | RW | A);
         m.put64(0x12010, 0x0 | R | W | X | EPT_PS | WB);
       }},
  };
  int compared = 0;
  for (const auto& v : variants)
    for (bool ad : {false, true})
      for (x86::pfec access : {x86::pfec{}, x86::pfec::write, x86::pfec::fetch}) {
        SCOPED_TRACE(testing::Message() << v.what << " ept_ad " << ad << " access " << access.raw());
        nested_setup four(v.ept_pte, v.guest), five(v.ept_pte, v.guest);
        if (v.edit) v.edit(four.m), v.edit(five.m);
        five.m.put64(pml5, 0x10000 | R | W | X);
        const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
        const paging::walker_4level g(mmu, {});
        const auto e5 = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{pml5}, 5, ad), {});
        ASSERT_TRUE(e5);
        const paging::nested_walker<paging::format::ia32e<4>> n4(g, make_ept(ad)), n5(g, *e5);
        auto mem4 = four.m.mem();
        auto mem5 = five.m.mem();
        const auto a = n4.walk(mem4, mmu, {x86::gva{va4}, access});
        const auto b = n5.walk(mem5, mmu, {x86::gva{va4}, access});
        ASSERT_EQ(a.has_value(), b.has_value());
        if (a) {
          EXPECT_EQ(a->guest.address, b->guest.address);
          EXPECT_EQ(a->guest.rights, b->guest.rights);
          EXPECT_EQ(a->guest.path.count, b->guest.path.count);
          for (unsigned i = 0; i < a->guest.path.count; ++i)
            EXPECT_EQ(a->guest.path.values[i], b->guest.path.values[i]) << i;
          EXPECT_EQ(a->second.address, b->second.address);
          EXPECT_EQ(a->second.page_shift, b->second.page_shift);
          EXPECT_EQ(a->second.rights, b->second.rights);
          EXPECT_EQ(a->second.memory_type, b->second.memory_type);
          ASSERT_EQ(a->second.path.count + 1, b->second.path.count);
          EXPECT_EQ(b->second.path.top, 5);
          EXPECT_EQ(b->second.path.first, pml5);
          EXPECT_EQ(b->second.path.values[0], 0x10000 | R | W | X);  // as read (before any A/D write)
          for (unsigned i = 0; i < a->second.path.count; ++i)
            EXPECT_EQ(a->second.path.values[i], b->second.path.values[i + 1]) << i;
        } else {
          const auto& x = a.error();
          const auto& y = b.error();
          EXPECT_EQ(x.kind, y.kind);
          EXPECT_EQ(x.stage, y.stage);
          EXPECT_EQ(x.level, y.level);
          EXPECT_EQ(x.guest_level, y.guest_level);
          EXPECT_EQ(x.guest_physical, y.guest_physical);
          EXPECT_EQ(x.qualification.raw(), y.qualification.raw());
          EXPECT_EQ(x.entry_address.value(), y.entry_address.value());
          EXPECT_EQ(x.entry_value, y.entry_value);
        }
        // The same memory writes (guest A/D, EPT A/D), the PML5 entry's own A flag aside.
        five.m.put64(pml5, 0);
        EXPECT_TRUE(four.m.bytes == five.m.bytes);
        ++compared;
      }
  EXPECT_EQ(compared, 8 * 2 * 3);
  // The PML5 entry itself is checked as a non-leaf entry (SDM 29.3.2, 29.3.3.1): not present
  // (R = W = X = 0) is an EPT violation at level 5 on the first guest table read (the PML4E
  // at L2 0x1000, qualification R | linear valid); bit 7 (reserved in a PML5E) a
  // misconfiguration at level 5.
  for (uint64_t pml5e : {uint64_t{0x10000}, uint64_t{0x10000 | R | W | X | EPT_PS}}) {
    nested_setup s(R | W | X, P | RW | A | D);
    s.m.put64(pml5, pml5e);
    const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
    const auto e5 = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{pml5}, 5, false), {});
    ASSERT_TRUE(e5);
    const paging::nested_walker<paging::format::ia32e<4>> n5(paging::walker_4level(mmu, {}), *e5);
    auto mem = s.m.mem();
    const auto r = n5.walk(mem, mmu, {x86::gva{va4}, {}});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().stage, paging::walk_stage::ept);
    EXPECT_EQ(r.error().kind, (pml5e & R) ? fault_kind::ept_misconfig : fault_kind::not_present);
    EXPECT_EQ(r.error().level, 5);
    EXPECT_EQ(r.error().guest_physical.value(), 0x1000u);
    EXPECT_EQ(r.error().qualification.raw(), (pml5e & R) ? 0u : 0x81u);
  }
}

TEST(NestedGolden, IdentityStageAndRawTranslate) {
  nested_setup s(R | W | X, P | RW);
  const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x21000});
  // With the identity second stage the guest tables are at their L1 addresses directly.
  image m;
  four_level(m, P | RW, P | RW, P | RW, P | RW);
  const auto mmu1 = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
  const paging::walker_4level g1(mmu1, {});
  const paging::nested_walker<paging::format::ia32e<4>, paging::identity_stage> id(g1, {});
  auto mem = m.mem();
  const auto r = id.walk(mem, mmu1, {x86::gva{va4}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l2_gpa().value(), 0x7abcu);
  EXPECT_EQ(r->l1_address().value(), 0x7abcu);
  // Raw nested translate (no permission checks): a supervisor-only read-only page.
  const paging::walker_4level g(mmu, {});
  static_cast<void>(g);
  const auto mmu2 = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma, x86::gpa{0x1000});
  const paging::nested_walker<paging::format::ia32e<4>> n(paging::walker_4level(mmu2, {}), make_ept(true));
  const auto t = n.translate(s.m.view(), x86::gva{va4});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->l1_address().value(), 0x27abcu);
  EXPECT_EQ(s.m.get64(0x13000 + 8) & EA, 0u);  // raw translate writes nothing
}

// ---- Four SDM rules found missing by an independent check (EPT A/D qualification, the
// PDPTE-load access class, EPTP bit 7, PSE-36) and the leaf level of protection faults ----

// SDM Vol. 3C 28.2.1, Table 28-7, the note on bits 0 and 1: "If accessed and dirty flags for
// EPT are enabled, processor accesses to guest paging-structure entries are treated as
// writes with regard to EPT violations. If such an access causes an EPT violation, the
// processor sets both bit 0 and bit 1 of the exit qualification." Whatever the access the
// caller names (the read of the entry, or the write of a guest A/D update).
TEST(EptGolden, PagingStructureViolationUnderEptAdSetsBits0And1) {
  image m;
  ept_tables(m, R | W | X, R | W | X, R | W | X, R | X | WB);  // the page is not writable
  auto mem = m.mem();
  paging::ept_request req{x86::gpa{gpa4}, paging::ept_access::read, paging::ept_origin::paging_structure, true,
                          x86::gva{0x1234}};
  for (const auto acc : {paging::ept_access::read, paging::ept_access::write}) {
    req.access = acc;
    const auto v = make_ept(true).walk(mem, req);
    ASSERT_FALSE(v);
    EXPECT_EQ(v.error().kind, fault_kind::permission);
    EXPECT_EQ(v.error().qualification.raw(), 0x80u | 0x20u | 0x08u | 0x03u);  // R+W; readable, executable; bit 7
  }
  // Without EPT A/D: the read is allowed; the write of a guest A/D update reports bit 1 only.
  req.access = paging::ept_access::read;
  EXPECT_TRUE(make_ept(false).walk(mem, req));
  req.access = paging::ept_access::write;
  EXPECT_EQ(make_ept(false).walk(mem, req).error().qualification.raw(), 0x80u | 0x20u | 0x08u | 0x02u);
  // Not present under EPT A/D: bits 0 and 1, no rights, bit 7.
  m.put64(0x13000 + 8, 0);
  EXPECT_EQ(make_ept(true).walk(mem, req).error().qualification.raw(), 0x83u);
}

// SDM Vol. 3C 29.3.3.2 and 29.3.5: loads of the PAE PDPTE registers by MOV to CR "are
// treated as reads and do not cause EPT violations due to a guest-physical address not
// being writable", and set no dirty flag; they have no guest-linear address (28.2.1: bit 7
// is 0 for such accesses, and then bit 8 is 0 too).
TEST(EptGolden, PdpteLoadIsAReadWithoutLinearAddress) {
  image m;
  ept_tables(m, R | W | X, R | W | X, R | W | X, R | X | WB);  // the PDPT's page is not writable
  auto mem = m.mem();
  const auto w = make_ept(true);
  paging::ept_request req{x86::gpa{gpa4}, paging::ept_access::read, paging::ept_origin::pdpte_load, false,
                          x86::gva{}};
  const auto r = w.walk(mem, req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x18abcu);
  EXPECT_EQ(m.get64(0x13008) & (EA | ED), EA);  // accessed, not dirty
  EXPECT_EQ(m.get64(0x10000) & (EA | ED), EA);
  // The same address as a guest paging-structure access is a write under EPT A/D.
  req.origin = paging::ept_origin::paging_structure;
  req.linear_valid = true;
  req.linear = x86::gva{0x1234};
  EXPECT_EQ(w.walk(mem, req).error().kind, fault_kind::permission);
  req.linear_valid = false;
  req.linear = x86::gva{};
  // A violation on a PDPTE load: bit 0 (a read), the rights, and neither bit 7 nor bit 8.
  req.origin = paging::ept_origin::pdpte_load;
  m.put64(0x13008, 0);
  const auto np = w.walk(mem, req);
  ASSERT_FALSE(np);
  EXPECT_EQ(np.error().kind, fault_kind::not_present);
  EXPECT_EQ(np.error().qualification.raw(), 0x01u);
  EXPECT_EQ(np.error().linear.value(), 0u);
  EXPECT_EQ(np.error().guest_physical.value(), gpa4);
}

// SDM Vol. 3C 27.2.1.1 (checks on VM-execution control fields, the EPTP): "Bit 7 (enable
// supervisor shadow-stack control) is 0 if bit 23 of the IA32_VMX_EPT_VPID_CAP MSR is read
// as 0" (Vol. 3D A.10: bit 23 reports supervisor shadow-stack control).
TEST(EptGolden, EptpBit7NeedsSupervisorShadowStackControl) {
  const paging::ept_pointer eptp{paging::make_ept_pointer(x86::hpa{0x10000}, 4, false).raw() | 0x80u};
  paging::ept_capabilities caps{};
  caps.supervisor_shadow_stack = false;
  const auto refused = paging::ept_walker::make(eptp, caps);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), paging::eptp_error::supervisor_shadow_stack_unsupported);
  caps.supervisor_shadow_stack = true;
  EXPECT_TRUE(paging::ept_walker::make(eptp, caps));
}

// SDM 4.3, Table 4-4 and its notes: a 4 MiB PDE holds physical-address bits M-1:32 in bits
// 20:13 only with PSE-36 (CPUID.01H:EDX[17]); without it M is 32 and bits 21:13 are
// reserved: a #PF with P and RSVD (SDM 4.7).
TEST(WalkGolden, WithoutPse36Bits21To13OfA4MiBPdeAreReserved) {
  auto walk = [](image& m, bool pse36, x86::pfec access) {
    const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pse, {}, x86::gpa{0x1000});
    paging::cpu_properties props{};
    props.maxphyaddr = 40;
    props.pse36 = pse36;
    auto mem = m.mem();
    return paging::walker_32bit(mmu, props).walk(mem, mmu, {x86::gva{0x00c1'2345}, access});
  };
  EXPECT_TRUE(paging::cpu_properties{}.pse36);  // the default: supported
  for (unsigned b = 13; b <= 21; ++b) {
    image m;
    m.put32(0x1000 + 3 * 4, 0x00c0'0000u | (1u << b) | 0x83u);
    const auto with = walk(m, true, {});
    if (b < 21) {
      ASSERT_TRUE(with) << b;
      EXPECT_EQ(with->address.value(), (uint64_t{1} << (b - 13 + 32)) | 0x00c1'2345u) << b;
    } else {
      EXPECT_EQ(with.error().kind, fault_kind::reserved_bit);  // bit 21: reserved either way
    }
    const auto without = walk(m, false, x86::pfec::write);
    ASSERT_FALSE(without) << b;
    EXPECT_EQ(without.error().kind, fault_kind::reserved_bit) << b;
    EXPECT_EQ(without.error().level, 2) << b;
    EXPECT_EQ(without.error().error_code.raw(), 0xbu) << b;  // P | W | RSVD
  }
  image m;
  m.put32(0x1000 + 3 * 4, 0x00c0'0000u | 0x83u);  // no high bits: fine without PSE-36
  const auto low = walk(m, false, {});
  ASSERT_TRUE(low);
  EXPECT_EQ(low->address.value(), 0x00c1'2345u);
}

// walk_fault::level names the first entry (top-down) lacking a needed right;
// walk_fault::leaf_level the entry that maps the page (docs/paging-walkers.md).
TEST(WalkGolden, ProtectionFaultLevelAndLeafLevel) {
  image m;
  m.put64(0x1000, 0x2000 | P | RW);                       // PML4E: U/S = 0
  m.put64(0x2000 + 8, 0x3000 | P | RW | US);
  m.put64(0x3000 + 8, 0x0060'0000 | P | RW | US | PS);    // 2 MiB page
  const auto r = walk4(m, cr0_pg_wp, {}, {}, x86::pfec::user);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::permission);
  EXPECT_EQ(r.error().level, 4);
  EXPECT_EQ(r.error().leaf_level, 2);
  // A fault before the leaf has no leaf level.
  m.put64(0x3000 + 8, 0);
  EXPECT_EQ(walk4(m, cr0_pg_wp, {}, {}, x86::pfec::user).error().leaf_level, 0);
  // EPT: W = 0 at the PDPTE, 4 KiB page.
  image e;
  ept_tables(e, R | W | X, R | X, R | W | X, R | W | X | WB);
  auto mem = e.mem();
  const auto v = make_ept(false).walk(mem, {x86::gpa{gpa4}, paging::ept_access::write});
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().level, 3);
  EXPECT_EQ(v.error().leaf_level, 1);
}

// load_pdptrs through EPT (paging/nested.hpp): the PDPT of an L2 PAE guest at L2 gpa 0x1000
// (L1 0x21000), its EPT page read-only, EPT A/D on: the load is a read (no violation, A but
// not D on the EPT entries), and the entries are checked as by MOV to CR3 (SDM 4.4.1).
TEST(NestedGolden, PdpteLoadThroughEpt) {
  nested_setup s(R | X, 0);
  s.m.put64(0x21000, 0x2000 | P);
  s.m.put64(0x21008, 0);
  s.m.put64(0x21010, 0x5000 | P | 0x18 /* PWT, PCD */);
  s.m.put64(0x21018, 0);
  auto mem = s.m.mem();
  const auto ept = make_ept(true);
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, mem, 52, ept);
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->pdpt.value(), 0x1000u);
  EXPECT_EQ(pd->entries[0], 0x2000u | P);
  EXPECT_EQ(pd->entries[2], 0x5000u | P | 0x18u);
  EXPECT_EQ(s.m.get64(0x13000 + 8) & (EA | ED), EA);  // the EPT PTE of L2 gpa 0x1000
  // A reserved bit (bit 1) in PDPTE 1: #GP, reported at its guest-physical address.
  s.m.put64(0x21008, 0x3000 | P | 2);
  const auto bad = paging::load_pdptrs(x86::cr3{0x1000}, mem, 52, ept);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, paging::pdptr_error::kind_type::reserved_bit);
  EXPECT_EQ(bad.error().index, 1);
  EXPECT_EQ(bad.error().address.value(), 0x1008u);
  // The PDPT's page not present in EPT: an EPT violation, a read without a linear address.
  s.m.put64(0x13000 + 8, 0);
  const auto v = paging::load_pdptrs(x86::cr3{0x1000}, s.m.view(), 52, ept);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().kind, paging::pdptr_error::kind_type::ept);
  EXPECT_EQ(v.error().ept.stage, paging::walk_stage::ept);
  EXPECT_EQ(v.error().ept.kind, fault_kind::not_present);
  EXPECT_EQ(v.error().ept.qualification.raw(), 0x01u);
  EXPECT_EQ(v.error().ept.guest_physical.value(), 0x1000u);
}

}  // namespace

// Paging off: "If CR0.PG = 0, paging is not used. The logical processor treats all linear
// addresses as if they were physical addresses" (SDM Vol. 3A 4.1.1), and outside IA-32e mode
// linear addresses are 32 bits wide. guest_walker's walk, check and translate for a role with
// CR0.PG = 0 give the identity on the low 32 bits and every right.
TEST(WalkGolden, PagingOffIsTheIdentity) {
  image m;
  const auto mmu = paging::mmu_context::make(x86::cr0::pe, {}, {}, x86::gpa{0});
  const paging::guest_walker w(mmu, paging::cpu_properties{});
  auto mem = m.mem();
  for (const std::uint64_t va : {std::uint64_t{0}, std::uint64_t{0x1234'5678}, std::uint64_t{0xffff'ffff}}) {
    paging::walk_request req{x86::gva{va}};
    req.access = x86::pfec::write | x86::pfec::user | x86::pfec::fetch;
    for (const auto& r : {w.walk(mem, mmu, req), w.check(m.view(), mmu, req), w.translate(m.view(), x86::gva{va})}) {
      ASSERT_TRUE(r) << va;
      EXPECT_EQ(r->address.value(), va);
      EXPECT_EQ(r->page_size(), 4096u);
      EXPECT_EQ(r->rights, paging::pte_access::paging_rights);
    }
  }
}

// EPT A/D updates when the compare-exchange does not succeed (the walker's contract, file
// comment of paging/walker.hpp: "if an entry changed in between the walk is redone (at most
// max_ad_retries times)"; memory that refuses the write is an unbacked fault at that entry).
// SDM Vol. 3C 29.3.5: with EPT A/D enabled, the processor sets the accessed flag of every
// EPT entry used and the dirty flag of the leaf on a write.
using racing = test_support::racing_memory;  // racing_memory.hpp

TEST(EptGolden, AccessedDirtyUpdateRefusedRacedOrExhausted) {
  for (auto mode : {racing::how::refuse, racing::how::lose, racing::how::other_agent}) {
    image m;
    ept_tables(m, R | W | X, R | W | X, R | W | X, R | W | X | WB);
    racing mem{m.mem(), mode};
    const auto r = make_ept(true).walk(mem, {x86::gpa{gpa4}, paging::ept_access::write});
    switch (mode) {
      case racing::how::refuse:
        // The first entry to update (the PML4E) is where the memory refused.
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().kind, fault_kind::unbacked);
        EXPECT_EQ(r.error().level, 4);
        EXPECT_EQ(r.error().entry_address.value(), 0x10000u);
        EXPECT_EQ(mem.cas, 1u);
        break;
      case racing::how::lose:
        // Eight attempts, each walking again and losing its compare-exchange, then given up.
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().kind, fault_kind::retry_exhausted);
        EXPECT_EQ(mem.cas, 8u);
        EXPECT_EQ(m.get64(0x10000) & (EA | ED), 0u);
        break;
      case racing::how::other_agent:
        // Each lost race is another CPU setting the same flag: the walk succeeds with all
        // flags set, one compare-exchange per entry.
        ASSERT_TRUE(r);
        EXPECT_EQ(r->address.value(), 0x18000u | 0xabc);
        EXPECT_EQ(m.get64(0x10000) & (EA | ED), EA);
        EXPECT_EQ(m.get64(0x13008) & (EA | ED), EA | ED);
        EXPECT_EQ(mem.cas, 4u);
        break;
      case racing::how::vanish:  // (the NPT tests of walk_adopt_test.cpp)
        FAIL() << "not a mode of this loop";
    }
  }
}
