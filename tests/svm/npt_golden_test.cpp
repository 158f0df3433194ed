// SPDX-License-Identifier: MIT
// Golden cases for nested paging (paging/npt.hpp) as the second stage of the nested walker
// and the #NPF exit information (svm/npf.hpp). Expectations typed by hand from the AMD APM
// Vol. 2, 15.25.5 (every nested access is a user access, guest page-table accesses are user
// writes, hCR0.WP ignored) and 15.25.6 (EXITINFO1: bit 0 P, 1 RW, 2 US, 3 RSV, 4 ID, bit 32
// final guest-physical access, bit 33 guest page-table access; EXITINFO2 the guest-physical
// address), and Vol. 2 5.3-5.4 for the host formats (legacy, PAE, long mode).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/svm/npf.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "memory_image.hpp"

namespace {

using namespace hvkit;
using paging::fault_kind;
using std::uint64_t;

struct image : test_support::memory_image {
  explicit image(std::size_t n) : memory_image(n) {}
};

// Entry bits (APM Vol. 2, 5.4): P, R/W, U/S, A, D, PS, NX.
constexpr uint64_t P = 1, RW = 2, US = 4, A = 0x20, D = 0x40, PS = 0x80, NX = uint64_t{1} << 63;
// EXITINFO1 (APM 15.25.6).
constexpr uint64_t E_P = 1, E_RW = 2, E_US = 4, E_RSV = 8, E_ID = 0x10;
constexpr uint64_t E_FINAL = uint64_t{1} << 32, E_TABLE = uint64_t{1} << 33;

const x86::efer efer_lma = x86::efer::lme | x86::efer::lma;
const x86::cr0 cr0_pg_wp = x86::cr0::pg | x86::cr0::pe | x86::cr0::wp;
constexpr uint64_t va4 = (uint64_t{1} << 30) | (uint64_t{1} << 21) | (uint64_t{1} << 12) | 0xabc;

// Long-mode host, 4-level NPT at nCR3 0x10000 mapping guest-physical pages 0-7 to host
// 0x20000 + gpa with `npt_pte` flags (the three upper levels P RW US). The L2 guest's 4-level
// tables at gpa 0x1000-0x4000 map va4 to gpa 0x7abc.
struct npt_setup {
  image m{0x40000};
  explicit npt_setup(uint64_t npt_pte, uint64_t guest = P | RW | US | A) {
    m.put64(0x10000, 0x11000 | P | RW | US);
    m.put64(0x11000, 0x12000 | P | RW | US);
    m.put64(0x12000, 0x13000 | P | RW | US);
    for (uint64_t p = 0; p < 8; ++p) m.put64(0x13000 + 8 * p, (0x20000 + p * 0x1000) | npt_pte);
    m.put64(0x21000, 0x2000 | guest);
    m.put64(0x22000 + 8, 0x3000 | guest);
    m.put64(0x23000 + 8, 0x4000 | guest);
    m.put64(0x24000 + 8, 0x7000 | guest);
  }
  void npt_pte(unsigned page, uint64_t flags) { m.put64(0x13000 + 8 * page, (0x20000 + page * 0x1000) | flags); }
  paging::nested_result walk(x86::pfec access, bool host_nxe = true, unsigned maxphyaddr = 48) {
    const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4::pae, efer_lma | x86::efer::nxe, x86::gpa{0x1000});
    const paging::walker_4level g(mmu, {});
    paging::cpu_properties props{};
    props.maxphyaddr = maxphyaddr;
    const paging::npt_walker_4level npt(x86::hpa{0x10000}, paging::npt_host{host_nxe, false}, props);
    const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(g, npt);
    auto mem = m.mem();
    return n.walk(mem, mmu, {x86::gva{va4}, access});
  }
};

svm::npf_info npf(const paging::nested_result& r) {
  EXPECT_FALSE(r);
  if (r) return {};
  const auto i = svm::npf_from_fault(r.error());
  EXPECT_TRUE(i);
  return i ? *i : svm::npf_info{svm::npf_error_code{0}, x86::gpa{}};
}

TEST(NptGolden, SuccessSetsNestedAccessedAndDirtyOnGuestTables) {
  npt_setup s(P | RW | US);
  const auto r = s.walk({});  // a supervisor read by the guest
  ASSERT_TRUE(r) << static_cast<int>(r.error().kind);
  EXPECT_EQ(r->l2_gpa().value(), 0x7abcu);
  EXPECT_EQ(r->l1_address().value(), 0x27abcu);
  EXPECT_EQ(r->second.path.count, 4);
  // Guest page-table accesses are writes at the nested level: A and D on the NPT PTEs of
  // gpa pages 1-4 (the guest tables); the final read sets A only on page 7's PTE.
  for (unsigned p = 1; p <= 4; ++p) EXPECT_EQ(s.m.get64(0x13000 + 8 * p), (0x20000 + p * 0x1000) | P | RW | US | A | D);
  EXPECT_EQ(s.m.get64(0x13000 + 8 * 7), 0x27000u | P | RW | US | A);
  EXPECT_EQ(s.m.get64(0x13000 + 8 * 0), 0x20000u | P | RW | US);  // unused
  EXPECT_EQ(s.m.get64(0x10000), 0x11000u | P | RW | US | A);  // upper levels: A, never D
  EXPECT_EQ(s.m.get64(0x12000), 0x13000u | P | RW | US | A);
}

TEST(NptGolden, FinalWriteSetsDirtyOnTheDataPage) {
  npt_setup s(P | RW | US);
  ASSERT_TRUE(s.walk(x86::pfec::write));
  EXPECT_EQ(s.m.get64(0x13000 + 8 * 7), 0x27000u | P | RW | US | A | D);
  EXPECT_EQ(s.m.get64(0x24008), 0x7000u | P | RW | US | A | D);  // the guest's own D
}

TEST(NptGolden, ReadOnlyGuestTableIsAWriteFault) {
  // The guest only reads, but its PML4 (gpa 0x1000) is read-only in the NPT: #NPF with RW,
  // US, P and bit 33, EXITINFO2 = the gpa of the guest table entry.
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(1, P | US | A);
  const auto i = npf(s.walk({}));
  EXPECT_EQ(i.error.raw(), E_P | E_RW | E_US | E_TABLE);
  EXPECT_EQ(i.address.value(), 0x1000u);
  EXPECT_TRUE(i.error.is_guest_page_table_walk());
  // Nothing was written by the faulting walk.
  EXPECT_EQ(s.m.get64(0x13000 + 8 * 2), 0x22000u | P | RW | US | A | D);
}

TEST(NptGolden, GuestTableFetchIsADataWrite) {
  // A guest fetch: its table accesses are writes, never fetches (no ID) even with NX set on
  // the guest table's nested page.
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(3, P | US | A | NX);
  const auto i = npf(s.walk(x86::pfec::fetch));
  EXPECT_EQ(i.error.raw(), E_P | E_RW | E_US | E_TABLE);
  EXPECT_EQ(i.address.value(), 0x3008u);
}

TEST(NptGolden, SupervisorNestedPageIsAUserFault) {
  // The final data page is a supervisor page in the NPT: every nested access is a user
  // access, so a guest read of it faults with P and US (bit 32).
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(7, P | RW | A);
  const auto i = npf(s.walk({}));
  EXPECT_EQ(i.error.raw(), E_P | E_US | E_FINAL);
  EXPECT_EQ(i.address.value(), 0x7abcu);
  EXPECT_TRUE(i.error.is_final_translation());
  // Also for a guest table page (bit 33, and RW since the access is a write).
  npt_setup t(P | RW | US | A | D);
  t.npt_pte(4, P | RW | A);
  EXPECT_EQ(npf(t.walk({})).error.raw(), E_P | E_RW | E_US | E_TABLE);
}

TEST(NptGolden, NotPresent) {
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(7, 0);
  EXPECT_EQ(npf(s.walk({})).error.raw(), E_US | E_FINAL);
  EXPECT_EQ(npf(s.walk(x86::pfec::write)).error.raw(), E_RW | E_US | E_FINAL);
  npt_setup t(P | RW | US | A | D);
  t.npt_pte(2, 0);
  const auto i = npf(t.walk({}));
  EXPECT_EQ(i.error.raw(), E_RW | E_US | E_TABLE);
  EXPECT_EQ(i.address.value(), 0x2008u);
}

TEST(NptGolden, ExecuteDisableUnderHostNxe) {
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(7, P | RW | US | A | D | NX);
  // Host EFER.NXE = 1: a fetch faults with ID; a read passes.
  EXPECT_EQ(npf(s.walk(x86::pfec::fetch)).error.raw(), E_P | E_US | E_ID | E_FINAL);
  EXPECT_TRUE(s.walk({}));
  // Host EFER.NXE = 0: bit 63 is reserved, any access faults with RSV; a fetch reports ID
  // (APM 15.25.6 names no NXE condition; cpu_properties::npf_fetch_id_without_nxe, default).
  EXPECT_EQ(npf(s.walk(x86::pfec::fetch, false)).error.raw(), E_P | E_RSV | E_US | E_ID | E_FINAL);
  EXPECT_EQ(npf(s.walk({}, false)).error.raw(), E_P | E_RSV | E_US | E_FINAL);
}

TEST(NptGolden, ReservedBitsOfTheHostFormat) {
  // MAXPHYADDR 40: bit 45 of a nested PDE is reserved (long mode, APM 5.4.1).
  npt_setup s(P | RW | US | A | D);
  s.m.put64(0x12000, 0x13000 | P | RW | US | (uint64_t{1} << 45));
  const auto i = npf(s.walk({}, true, 40));
  EXPECT_EQ(i.error.raw(), E_P | E_RW | E_US | E_RSV | E_TABLE);
  EXPECT_EQ(i.address.value(), 0x1000u);
  const auto rs = s.walk({}, true, 40);
  ASSERT_FALSE(rs);
  EXPECT_EQ(rs.error().level, 2);
  // With MAXPHYADDR 48 bit 45 is address: the walk goes to a page table outside memory.
  const auto ub = s.walk({}, true, 48);
  ASSERT_FALSE(ub);
  EXPECT_EQ(ub.error().kind, fault_kind::unbacked);
  const auto no = svm::npf_from_fault(ub.error());
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error(), svm::not_npf::host_side);
}

TEST(NptGolden, GuestFaultIsNoNpf) {
  npt_setup s(P | RW | US | A | D, P | RW | A);  // guest supervisor pages
  const auto r = s.walk(x86::pfec::user);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().stage, paging::walk_stage::guest);
  const auto no = svm::npf_from_fault(r.error());
  ASSERT_FALSE(no);
  EXPECT_EQ(no.error(), svm::not_npf::guest_stage);
}

TEST(NptGolden, WriteNpfExitIntoVmcb) {
  npt_setup s(P | RW | US | A | D);
  s.npt_pte(7, P | US | A);
  const auto i = npf(s.walk(x86::pfec::write));
  svm::soft_vmcb v{};
  svm::write_npf_exit(v, i);
  EXPECT_EQ(svm::read(v, svm::fields::exit_code), 0x400u);
  EXPECT_EQ(svm::read(v, svm::fields::exit_info_1), E_P | E_RW | E_US | E_FINAL);
  EXPECT_EQ(svm::read(v, svm::fields::exit_info_2), 0x7abcu);
  const auto d = svm::decode_npf(svm::read(v, svm::fields::exit_info_1), svm::read(v, svm::fields::exit_info_2));
  EXPECT_TRUE(d.error.is_write());
  EXPECT_TRUE(d.error.is_user());
}

// PAE host: nCR3 bits 31:5 locate the nested PDPT; the PDPTE is read from memory at every
// nested walk, and a reserved bit in it is an #NPF with RSV (no #GP, no PDPTE registers).
TEST(NptGolden, PaeHostReadsThePdpteAtEveryWalk) {
  image m(0x40000);
  m.put64(0x10020 + 0 * 8, 0x12000 | P);  // PDPT at 0x10020 (32-byte aligned)
  m.put64(0x12000, 0x13000 | P | RW | US);
  m.put64(0x13000 + 8 * 5, 0x25000 | P | RW | US);
  paging::cpu_properties props{};
  props.maxphyaddr = 40;
  const paging::npt_walker_pae npt(x86::hpa{0x10020}, paging::npt_host{true, false}, props);
  auto mem = m.mem();
  paging::ept_request req{};
  req.address = x86::gpa{0x5123};
  const auto r = npt.walk(mem, req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x25123u);
  EXPECT_EQ(r->path.count, 3);
  EXPECT_EQ(m.get64(0x10020), 0x12000u | P);  // the PDPTE has no A flag: untouched
  EXPECT_EQ(m.get64(0x12000), 0x13000u | P | RW | US | A);
  // Change the PDPTE in memory: the next walk sees it.
  m.put64(0x10020, 0x12000 | P | (uint64_t{1} << 5));  // bit 5: reserved in a PAE PDPTE
  const auto f = npt.check(mem, req);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, fault_kind::reserved_bit);
  EXPECT_EQ(f.error().level, 3);
  ASSERT_TRUE(svm::npf_from_fault(f.error()));
  EXPECT_EQ(svm::npf_from_fault(f.error())->error.raw(), E_P | E_US | E_RSV | E_FINAL);
  m.put64(0x10020, 0x12000);
  const auto np = npt.check(mem, req);
  ASSERT_FALSE(np);
  ASSERT_TRUE(svm::npf_from_fault(np.error()));
  EXPECT_EQ(svm::npf_from_fault(np.error())->error.raw(), E_US | E_FINAL);
}

// A 32-bit guest over a PAE host's nested tables: the nested walker sets A/D in the nested
// PDE and PTEs, never in the PDPTE (bits 8:5 of a PAE PDPTE are reserved: it has no A flag).
TEST(NptGolden, PaeHostNestedWalkLeavesThePdpteAlone) {
  image m(0x40000);
  m.put64(0x10020, 0x12000 | P);
  m.put64(0x12000, 0x13000 | P | RW | US);
  for (uint64_t p = 0; p < 8; ++p) m.put64(0x13000 + 8 * p, (0x20000 + p * 0x1000) | P | RW | US);
  m.put32(0x21000, 0x2000 | P | RW | US);      // guest PD at gpa 1000h
  m.put32(0x22000 + 4 * 3, 0x5000 | P | RW | US);  // guest PT at gpa 2000h: va 3000h -> gpa 5000h
  paging::cpu_properties props{};
  props.maxphyaddr = 40;
  const paging::npt_walker_pae npt(x86::hpa{0x10020}, paging::npt_host{true, false}, props);
  const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4{}, x86::efer{}, x86::gpa{0x1000});
  const paging::nested_walker<paging::format::ia32, paging::npt_walker_pae> n(paging::walker_32bit(mmu, props), npt);
  auto mem = m.mem();
  const auto r = n.walk(mem, mmu, {x86::gva{0x3010}, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l1_address().value(), 0x25010u);
  EXPECT_EQ(r->second.path.count, 3);
  EXPECT_EQ(m.get64(0x10020), 0x12000u | P);  // the nested PDPTE: untouched
  EXPECT_EQ(m.get64(0x12000), 0x13000u | P | RW | US | A);
  EXPECT_EQ(m.get64(0x13000 + 8), 0x21000u | P | RW | US | A | D);  // guest tables: written-to
  EXPECT_EQ(m.get64(0x13000 + 16), 0x22000u | P | RW | US | A | D);
  EXPECT_EQ(m.get64(0x13000 + 40), 0x25000u | P | RW | US | A);     // the data page: read
  EXPECT_EQ(m.get32(0x22000 + 12), 0x5000u | P | RW | US | A);
}

// Legacy 32-bit host: 4-byte nested entries, 4 MiB pages with host CR4.PSE, A/D updates of
// 4 bytes that leave the neighbouring entry alone, under a PAE guest behind it.
TEST(NptGolden, LegacyHostFourByteEntries) {
  image m(0x80000);
  // Nested PD at 0x10000: PDE 0 -> PT 0x11000; PT maps gpa pages 0-15 to 0x40000 + gpa.
  m.put32(0x10000, 0x11000 | P | RW | US);
  for (std::uint32_t p = 0; p < 16; ++p) m.put32(0x11000 + 4 * p, (0x40000 + p * 0x1000) | P | RW | US);
  // A 4 MiB nested page at PDE 1 (gpa 0x400000-0x7fffff) -> host 0x0 (with PSE).
  m.put32(0x10004, 0x0 | P | RW | US | PS);
  paging::cpu_properties props{};
  props.maxphyaddr = 36;
  const paging::npt_walker_32bit npt(x86::hpa{0x10000}, paging::npt_host{false, true}, props);
  auto mem = m.mem();
  paging::ept_request req{};
  req.address = x86::gpa{0x3456};
  req.access = paging::ept_access::write;
  const auto r = npt.walk(mem, req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0x43456u);
  EXPECT_EQ(m.get32(0x11000 + 12), 0x43000u | P | RW | US | A | D);
  EXPECT_EQ(m.get32(0x11000 + 16), 0x44000u | P | RW | US);  // the neighbour is untouched
  req.address = x86::gpa{0x400010};
  req.access = paging::ept_access::read;
  const auto big = npt.check(mem, req);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->address.value(), 0x10u);
  EXPECT_EQ(big->page_shift, 22);
  // Without host CR4.PSE the PS bit is ignored: PDE 1 references a page table at 0.
  const paging::npt_walker_32bit nopse(x86::hpa{0x10000}, paging::npt_host{false, false}, props);
  const auto np = nopse.check(mem, req);
  ASSERT_FALSE(np);
  EXPECT_EQ(np.error().kind, fault_kind::not_present);

  // A 32-bit guest behind the legacy NPT: its A/D through the nested walker's pending
  // updates, 4 bytes each.
  m.put32(0x41000, 0x2000 | P | RW | US);  // guest PD at gpa 0x1000 (host 0x41000)
  m.put32(0x42000 + 4 * 3, 0x5000 | P | RW | US);  // guest PT: va 0x3000 -> gpa 0x5000
  const auto mmu = paging::mmu_context::make(cr0_pg_wp, x86::cr4{}, x86::efer{}, x86::gpa{0x1000});
  const paging::walker_32bit g(mmu, {});
  const paging::nested_walker<paging::format::ia32, paging::npt_walker_32bit> n(g, npt);
  const auto nr = n.walk(mem, mmu, {x86::gva{0x3010}, x86::pfec::write});
  ASSERT_TRUE(nr);
  EXPECT_EQ(nr->l1_address().value(), 0x45010u);
  EXPECT_EQ(m.get32(0x11000 + 4), 0x41000u | P | RW | US | A | D);  // guest PD page: a table write
  EXPECT_EQ(m.get32(0x11000 + 8), 0x42000u | P | RW | US | A | D);
  EXPECT_EQ(m.get32(0x11000 + 20), 0x45000u | P | RW | US | A | D);
  EXPECT_EQ(m.get32(0x11000 + 24), 0x46000u | P | RW | US);  // untouched neighbour
  EXPECT_EQ(m.get32(0x42000 + 12), 0x5000u | P | RW | US | A | D);
}

}  // namespace
