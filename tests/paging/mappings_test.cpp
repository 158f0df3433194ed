// SPDX-License-Identifier: MIT
// paging/mappings.hpp: the enumeration of every mapping of an address space.
//  - hand-built tables in every mode (4-level, 5-level, PAE, 32-bit with PSE-36, EPT,
//    nested), the enumeration compared with a list of mappings typed by hand from the
//    entries (SDM 4.3-4.6, 29.3.2);
//  - random tables: every enumerated page translates to the same address, rights, key and
//    memory type with the walker, the pages come in address order without overlap, and
//    every sampled address outside them faults in the walker;
//  - hostile tables (entries pointing back at their own table) end, and max_reads bounds them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mappings.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;
using paging::fault_kind;
using paging::pte_access;
using std::uint64_t;

struct image {
  std::vector<std::uint8_t> bytes;
  explicit image(std::size_t n) : bytes(n) {}
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put32(uint64_t a, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  paging::flat_view view() const { return paging::flat_view(bytes.data(), bytes.size()); }
};

constexpr uint64_t P = 1, RW = 2, US = 4, PWT = 8, PCD = 0x10, A = 0x20, D = 0x40, PS = 0x80, G = 0x100;
constexpr uint64_t PAT_L = 0x1000, XD = uint64_t{1} << 63;
constexpr std::uint8_t X = 1, W = 2, U = 4, R = 8;  // pte_access bits

// What the hand lists give per mapping.
struct expect_map {
  uint64_t input, size, output;
  std::uint8_t rights, pkey, memory_type, level;
};
struct expect_fault {
  uint64_t linear;
  fault_kind kind;
  unsigned level;
  uint64_t entry_address;
};

template <class Range>
void check_list(Range& r, const std::vector<expect_map>& maps, const std::vector<expect_fault>& faults) {
  // paging::mapping for guest tables, paging::host_mapping for EPT.
  std::vector<std::remove_cvref_t<decltype(r.current())>> got;
  std::vector<paging::walk_fault> bad;
  for (const auto& m : r) {
    if (m) got.push_back(*m);
    else bad.push_back(m.error());
  }
  EXPECT_FALSE(r.truncated());
  ASSERT_EQ(got.size(), maps.size());
  for (std::size_t i = 0; i < maps.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].input, maps[i].input);
    EXPECT_EQ(got[i].size, maps[i].size);
    EXPECT_EQ(got[i].output.value(), maps[i].output);
    EXPECT_EQ(got[i].rights.raw(), maps[i].rights);
    EXPECT_EQ(got[i].pkey, maps[i].pkey);
    EXPECT_EQ(got[i].memory_type, maps[i].memory_type);
    EXPECT_EQ(got[i].level, maps[i].level);
    EXPECT_EQ(uint64_t{1} << got[i].page_shift, maps[i].size);
  }
  ASSERT_EQ(bad.size(), faults.size());
  for (std::size_t i = 0; i < faults.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(bad[i].linear.value(), faults[i].linear);
    EXPECT_EQ(bad[i].kind, faults[i].kind);
    EXPECT_EQ(bad[i].level, faults[i].level);
    // Typed by stage: a guest table entry is guest-physical, an EPT entry host-physical.
    EXPECT_EQ(bad[i].stage == paging::walk_stage::guest ? bad[i].guest_entry_address().value()
                                                        : bad[i].host_entry_address().value(),
              faults[i].entry_address);
  }
}

paging::walker_state guest_state(x86::cr0 cr0, x86::cr4 cr4, x86::efer efer, uint64_t root, unsigned maxphyaddr,
                                 paging::pdpte_snapshot pdptes = {}) {
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, x86::gpa{root});
  paging::cpu_properties props{};
  props.maxphyaddr = maxphyaddr;
  return paging::make_walker_state(mmu.role(), mmu.root(), props, pdptes);
}

const x86::cr0 pg = x86::cr0::pg | x86::cr0::pe;
const x86::efer lma_nx = x86::efer::lme | x86::efer::lma | x86::efer::nxe;

// 4-level paging, tables typed from SDM Tables 4-14..4-20 (MAXPHYADDR 46, NXE=1).
image four_level_image() {
  image m(0x20000);
  m.put64(0x1000 + 0 * 8, 0x2000 | P | RW | US);    // PML4[0]
  m.put64(0x2000 + 0 * 8, 0x3000 | P | RW | US);    //  PDPT[0]
  m.put64(0x3000 + 0 * 8, 0x5000 | P | RW | US);    //   PD[0] -> PT
  m.put64(0x5000 + 1 * 8, 0x12345000 | P);          //    PT[1]: read-only supervisor
  m.put64(0x5000 + 511 * 8, 0xabc000 | P | RW | US | A | D | (uint64_t{5} << 59) | XD);  // key 5, XD
  m.put64(0x3000 + 1 * 8, 0xa00000 | PAT_L | P | RW | US | PWT | PS);  //   PD[1]: 2 MiB, PAT index 5
  m.put64(0x2000 + 1 * 8, 0x40000000 | P | RW | PS);                   //  PDPT[1]: 1 GiB
  m.put64(0x2000 + 2 * 8, 0x4000 | P | RW | US | (uint64_t{1} << 50)); //  PDPT[2]: bit 50 reserved
  m.put64(0x2000 + 3 * 8, 0x7000000 | P | RW | US);                    //  PDPT[3]: table not in memory
  m.put64(0x1000 + 256 * 8, 0x9000 | P | RW);       // PML4[256]: the upper half's first entry
  m.put64(0x9000, 0xa000 | P | RW);
  m.put64(0xa000, 0xb000 | P | RW);
  m.put64(0xb000, 0xcafe000 | P | RW);
  m.put64(0x1000 + 511 * 8, 0x6000 | P | RW);       // PML4[511]
  m.put64(0x6000 + 510 * 8, 0x8000 | P | RW);       //  PDPT[510]
  m.put64(0x8000, 0x200000 | P | RW | PS | G);      //   PD[0]: 2 MiB at 0xffffffff80000000
  return m;
}

const std::vector<expect_map> four_level_maps = {
    {0x1000, 0x1000, 0x12345000, X, 0, 0, 1},
    {0x1ff000, 0x1000, 0xabc000, W | U, 5, 0, 1},
    {0x200000, 0x200000, 0xa00000, X | W | U, 0, 5, 2},
    {0x40000000, 0x40000000, 0x40000000, X | W, 0, 0, 3},
    {0xffff800000000000, 0x1000, 0xcafe000, X | W, 0, 0, 1},
    {0xffffffff80000000, 0x200000, 0x200000, X | W, 0, 0, 2},
};
const std::vector<expect_fault> four_level_faults = {
    {0x80000000, fault_kind::reserved_bit, 3, 0x2010},
    {0xc0000000, fault_kind::unbacked, 2, 0x7000000},
};

TEST(Mappings, FourLevelHandList) {
  const image m = four_level_image();
  const auto mem = m.view();
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  paging::guest_mappings pages(s, mem);
  check_list(pages, four_level_maps, four_level_faults);
}

TEST(Mappings, FourLevelRanges) {
  const image m = four_level_image();
  const auto mem = m.view();
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  {
    // Pages overlapping the range come whole: 0x1ff800 lies in the second page.
    paging::guest_mappings pages(s, mem, {0x1ff800, 0x40000000});
    check_list(pages, {four_level_maps[1], four_level_maps[2], four_level_maps[3]}, {});
  }
  {
    // A range starting inside the non-canonical hole starts at the upper half.
    paging::guest_mappings pages(s, mem, {0x0000800000000000, ~uint64_t{0}});
    check_list(pages, {four_level_maps[4], four_level_maps[5]}, {});
  }
  {
    // Ending inside the hole ends with the lower half.
    paging::guest_mappings pages(s, mem, {0x40000000, 0xfff0000000000000});
    check_list(pages, {four_level_maps[3]}, four_level_faults);
  }
  {
    paging::guest_mappings pages(s, mem, {0x0000800000000000, 0x0000900000000000});  // all in the hole
    check_list(pages, {}, {});
  }
}

TEST(Mappings, FiveLevelHandList) {
  image m(0x10000);
  m.put64(0x1000 + 511 * 8, 0x2000 | P | RW);  // PML5[511]
  m.put64(0x2000 + 511 * 8, 0x3000 | P | RW);  //  PML4[511]
  m.put64(0x3000 + 511 * 8, 0x40000000 | P | RW | PS);  // PDPT[511]: 1 GiB
  m.put64(0x1000, 0x4000 | P | RW | US);
  m.put64(0x4000, 0x5000 | P | RW | US);
  m.put64(0x5000, 0x6000 | P | RW | US);
  m.put64(0x6000, 0x7000 | P | RW | US);
  m.put64(0x7000, 0x1000 | P | US);
  const auto s = guest_state(pg, x86::cr4::pae | x86::cr4::la57, lma_nx, 0x1000, 46);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  check_list(pages,
             {{0, 0x1000, 0x1000, X | U, 0, 0, 1}, {0xffffffffc0000000, 0x40000000, 0x40000000, X | W, 0, 0, 3}}, {});
}

TEST(Mappings, PaeHandList) {
  image m(0x10000);
  m.put64(0x2000 + 1 * 8, 0xe00000 | P | RW | PS | XD);  // PD 0, entry 1: 2 MiB, no execute
  m.put64(0x3000 + 511 * 8, 0x4000 | P | RW | US);
  m.put64(0x4000 + 511 * 8, 0xfee00000 | P | RW | PWT | PCD);
  paging::pdpte_snapshot pd{};
  pd.pdpt = x86::gpa{0x1000};
  pd.entries = {0x2000 | P, 0, 0, 0x3000 | P};
  pd.loaded = true;  // the registers as a MOV to CR3 would load them
  const auto s = guest_state(pg, x86::cr4::pae, x86::efer::nxe, 0x1000, 36, pd);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  check_list(pages, {{0x200000, 0x200000, 0xe00000, W, 0, 0, 2}, {0xfffff000, 0x1000, 0xfee00000, X | W, 0, 3, 1}},
             {});
}

// PAE without a PDPTE snapshot: an error, not an empty address space.
TEST(Mappings, PaeWithoutSnapshotIsAnError) {
  image m(0x10000);
  m.put64(0x1000, 0x2000 | P);
  m.put64(0x2000 + 1 * 8, 0xe00000 | P | RW | PS);
  const auto s = guest_state(pg, x86::cr4::pae, {}, 0x1000, 36);  // no snapshot
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  std::size_t maps = 0, faults = 0;
  for (const auto& r : pages) {
    if (r) {
      ++maps;
    } else {
      ++faults;
      EXPECT_EQ(r.error().kind, paging::fault_kind::pdptes_not_loaded);
      EXPECT_EQ(r.error().level, 3);
    }
  }
  EXPECT_EQ(maps, 0u);
  EXPECT_EQ(faults, 1u);  // reported once: the PDPTE "table" is skipped whole, as an unreadable table is
}

TEST(Mappings, ThirtyTwoBitHandList) {
  image m(0x10000);
  m.put32(0x1000 + 0 * 4, 0x2000 | P | RW | US);
  m.put32(0x2000 + 5 * 4, 0x9000 | P | US);
  m.put32(0x1000 + 1 * 4, 0xc00000 | (1u << 13) | P | RW | US | PS);  // 4 MiB, PSE-36: PA bit 32
  m.put32(0x1000 + 1023 * 4, 0xffc00000u | P | RW | PS);
  const auto s = guest_state(pg, x86::cr4::pse, {}, 0x1000, 40);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  check_list(pages,
             {{0x5000, 0x1000, 0x9000, X | U, 0, 0, 1},
              {0x400000, 0x400000, 0x100c00000, X | W | U, 0, 0, 2},
              {0xffc00000, 0x400000, 0xffc00000, X | W, 0, 0, 2}},
             {});
  // Without CR4.PSE the PS bit is ignored and the PDE references a page table (SDM 4.3):
  // the "table" at 0xc00000 (+ ignored bits) is not in memory.
  const auto s2 = guest_state(pg, {}, {}, 0x1000, 40);
  paging::guest_mappings pages2(s2, mem);
  check_list(pages2, {{0x5000, 0x1000, 0x9000, X | U, 0, 0, 1}},
             {{0x400000, fault_kind::unbacked, 1, 0xc02000}, {0xffc00000, fault_kind::unbacked, 1, 0xffc00000}});
}

TEST(Mappings, PagingOffIsOneIdentityRange) {
  image m(0x1000);
  const auto s = guest_state(x86::cr0::pe, {}, {}, 0, 52);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  std::vector<paging::mapping> got;
  for (const auto& r : pages) got.push_back(*r);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].input, 0u);
  EXPECT_EQ(got[0].size, uint64_t{1} << 32);
  EXPECT_EQ(got[0].output.value(), 0u);
}

// EPT: SDM 29.3.2, Tables 29-1..29-7.
TEST(Mappings, EptHandList) {
  image m(0x10000);
  constexpr uint64_t ER = 1, EW = 2, EX = 4, EPS = 0x80, IPAT = 0x40, WB = 6 << 3;
  m.put64(0x1000, 0x2000 | ER | EW | EX);        // PML4[0]
  m.put64(0x1000 + 8, 0x9000000 | ER | EW | EX); // PML4[1]: table not in memory
  m.put64(0x2000, 0x3000 | ER | EW | EX);        //  PDPT[0]
  m.put64(0x2000 + 8, 0x80000000 | ER | EPS);    //  PDPT[1]: 1 GiB read-only, UC
  m.put64(0x3000, 0x4000 | ER | EW | EX);        //   PD[0]
  m.put64(0x3000 + 8, 0x600000 | ER | EW | EX | EPS | IPAT | WB);  // PD[1]: 2 MiB
  m.put64(0x4000 + 8, 0x55000 | ER | EW | WB);   //    PT[1]
  m.put64(0x4000 + 16, 0x66000 | EW);            //    PT[2]: write without read
  const paging::ept_capabilities caps{};
  const auto mem = m.view();
  auto e = paging::ept_mappings<paging::flat_view>::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false), caps,
                                                           mem);
  ASSERT_TRUE(e);
  check_list(*e,
             {{0x1000, 0x1000, 0x55000, R | W, 0, 6, 1},
              {0x200000, 0x200000, 0x600000, R | W | X, 0, 6 | 8, 2},
              {0x40000000, 0x40000000, 0x80000000, R, 0, 0, 3}},
             {{0x2000, fault_kind::ept_misconfig, 1, 0x4010}, {0x8000000000, fault_kind::unbacked, 3, 0x9000000}});
  // The unbacked EPT table's fault names the guest-physical input it could not map (as
  // ept_walker::translate does), never the table's host-physical address.
  auto again = paging::ept_mappings<paging::flat_view>::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false),
                                                               caps, mem);
  ASSERT_TRUE(again);
  std::vector<paging::walk_fault> bad;
  for (const auto& r : *again)
    if (!r) bad.push_back(r.error());
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[1].guest_physical, x86::gpa{0x8000000000});
  EXPECT_EQ(bad[1].host_entry_address(), x86::hpa{0x9000000});
  const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false), caps);
  ASSERT_TRUE(w);
  const auto t = w->translate(mem, x86::gpa{0x8000000000});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, fault_kind::unbacked);
  EXPECT_EQ(t.error().host_entry_address(), x86::hpa{0x9000000});
  // A bad EPTP is a typed error.
  EXPECT_FALSE((paging::ept_mappings<paging::flat_view>::make(paging::ept_pointer{0x1000 | (2u << 3) | 6}, caps, mem)));
}

// Nested: guest 4-level tables in guest-physical memory that EPT maps elsewhere.
TEST(Mappings, NestedHandList) {
  image m(0x300000);
  constexpr uint64_t ERWX = 7, EPS = 0x80, WB = 6 << 3;
  // EPT at host 0x1000: gpa [0, 2 MiB) -> host 0x100000 + gpa in 4 KiB pages (gpa 0x5000
  // unmapped); gpa [2 MiB, 4 MiB) -> host 0x400000 as one 2 MiB page.
  m.put64(0x1000, 0x2000 | ERWX);
  m.put64(0x2000, 0x3000 | ERWX);
  m.put64(0x3000, 0x4000 | ERWX);
  m.put64(0x3000 + 8, 0x400000 | ERWX | EPS | WB);
  for (uint64_t i = 0; i < 512; ++i)
    if (i != 5) m.put64(0x4000 + 8 * i, (0x100000 + i * 0x1000) | ERWX | WB);
  // Guest tables at gpa 0x1000.. (host 0x101000..).
  const uint64_t h = 0x100000;
  m.put64(h + 0x1000, 0x2000 | P | RW | US);
  m.put64(h + 0x2000, 0x3000 | P | RW | US);
  m.put64(h + 0x3000 + 0 * 8, 0x4000 | P | RW | US);
  m.put64(h + 0x4000 + 0 * 8, 0x1000 | P | RW | US);   // VA 0 -> gpa 0x1000
  m.put64(h + 0x4000 + 1 * 8, 0x5000 | P | RW | US);   // VA 0x1000 -> gpa 0x5000: EPT not present
  m.put64(h + 0x3000 + 1 * 8, 0x200000 | P | RW | PS); // VA 2 MiB -> gpa 2 MiB (one EPT page)
  m.put64(h + 0x3000 + 2 * 8, 0x000000 | P | RW | PS); // VA 4 MiB -> gpa 0: 511 EPT pages
  m.put64(h + 0x3000 + 3 * 8, 0x800000 | P | RW | US); // a page table at gpa 8 MiB: EPT not present
  const paging::ept_capabilities caps{};
  const auto ept = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false), caps);
  ASSERT_TRUE(ept);
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  const auto mem = m.view();
  paging::nested_mappings<paging::ept_walker, paging::flat_view> pages(s, *ept, mem);
  std::vector<paging::nested_mapping> got;
  std::vector<paging::walk_fault> bad;
  for (const auto& r : pages) {
    if (r) got.push_back(*r);
    else bad.push_back(r.error());
  }
  ASSERT_EQ(got.size(), 1u + 1u + 511u);
  EXPECT_EQ(got[0].linear, 0u);
  EXPECT_EQ(got[0].size, 0x1000u);
  EXPECT_EQ(got[0].guest_physical.value(), 0x1000u);
  EXPECT_EQ(got[0].output.value(), 0x101000u);
  EXPECT_EQ(got[0].guest.rights.raw(), X | W | U);
  EXPECT_EQ(got[0].second_rights.raw(), R | W | X);
  EXPECT_EQ(got[0].second_memory_type, 6);
  EXPECT_EQ(got[1].linear, 0x200000u);
  EXPECT_EQ(got[1].size, 0x200000u);
  EXPECT_EQ(got[1].output.value(), 0x400000u);
  EXPECT_EQ(got[1].second_page_shift, 21);
  // The 2 MiB guest page at 4 MiB in 4 KiB pieces, without gpa 0x5000.
  for (uint64_t i = 0; i < 511; ++i) {
    const uint64_t page = i < 5 ? i : i + 1;
    EXPECT_EQ(got[2 + i].linear, 0x400000 + page * 0x1000);
    EXPECT_EQ(got[2 + i].size, 0x1000u);
    EXPECT_EQ(got[2 + i].output.value(), 0x100000 + page * 0x1000);
    EXPECT_EQ(got[2 + i].guest.input, 0x400000u);
    EXPECT_EQ(got[2 + i].guest.size, 0x200000u);
  }
  // The guest page table at gpa 8 MiB: the second stage faults (not present).
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].stage, paging::walk_stage::ept);
  EXPECT_EQ(bad[0].kind, fault_kind::not_present);
  EXPECT_EQ(bad[0].linear.value(), 0x600000u);
  EXPECT_EQ(bad[0].guest_physical.value(), 0x800000u);
}

// With the identity second stage, the nested enumeration is the guest's, cut into 4 KiB
// pieces (the identity stage translates 4 KiB at a time), and the same faults.
TEST(Mappings, NestedIdentityIsTheGuestInPieces) {
  const image m = four_level_image();
  const auto mem = m.view();
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  const paging::identity_stage id{};
  paging::nested_mappings<paging::identity_stage, paging::flat_view> pieces(s, id, mem);
  std::vector<paging::mapping> pages;
  std::vector<paging::walk_fault> faults;
  uint64_t n = 0;
  for (const auto& r : pieces) {
    if (!r) {
      faults.push_back(r.error());
      continue;
    }
    if (pages.empty() || pages.back() != r->guest) pages.push_back(r->guest);
    const auto& g = pages.back();
    EXPECT_EQ(r->size, 0x1000u);
    EXPECT_EQ(r->linear, g.input + n * 0x1000) << std::hex << r->linear;
    EXPECT_EQ(r->output.value(), g.output.value() + n * 0x1000);
    EXPECT_EQ(r->guest_physical.value(), r->output.value());  // the identity stage
    n = r->linear + r->size == g.input + g.size ? 0 : n + 1;
  }
  ASSERT_EQ(pages.size(), four_level_maps.size());
  for (std::size_t i = 0; i < pages.size(); ++i) EXPECT_EQ(pages[i].input, four_level_maps[i].input);
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].kind, fault_kind::reserved_bit);
  EXPECT_EQ(faults[1].kind, fault_kind::unbacked);
  EXPECT_EQ(faults[1].stage, paging::walk_stage::guest);
  EXPECT_EQ(faults[1].level, 2);
  EXPECT_EQ(faults[1].guest_entry_address(), x86::gpa{0x7000000});
}

// A PML4 whose entry 0 points at the PML4 itself: read as PDPT, PD and PT, the chain maps
// linear 0 to the PML4's own page and nothing else (the self-map a kernel uses).
TEST(Mappings, SelfReferencingEntryEnds) {
  image m(0x3000);
  m.put64(0x1000, 0x1000 | P | RW);
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  check_list(pages, {{0, 0x1000, 0x1000, X | W, 0, 0, 1}}, {});
  // Nested, with a bound below the 2048 entries the guest tables hold: the one second-stage
  // translation counts against the same bound as the guest entries.
  const paging::identity_stage id{};
  paging::nested_mappings<paging::identity_stage, paging::flat_view> nested(s, id, mem, {},
                                                                           paging::mapping_limits{1000});
  uint64_t n = 0;
  for (const auto& r : nested) n += r ? 1 : 0;
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(nested.truncated());
  EXPECT_EQ(nested.reads(), 1000u);
}

// Every entry of a 32-bit page directory points at the directory itself: 1024 x 1024
// pages, every linear address mapped; the enumeration ends after exactly that many.
TEST(Mappings, HostileThirtyTwoBitTableEnds) {
  image m(0x2000);
  for (unsigned i = 0; i < 1024; ++i) m.put32(0x1000 + 4 * i, 0x1000 | P | RW);
  const auto s = guest_state(pg, {}, {}, 0x1000, 32);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem);
  uint64_t n = 0, next = 0;
  bool ordered = true;
  for (const auto& r : pages) {
    ASSERT_TRUE(r);
    ordered = ordered && r->input == next && r->output.value() == 0x1000;
    next = r->input + r->size;
    ++n;
  }
  EXPECT_TRUE(ordered);
  EXPECT_EQ(n, 1024u * 1024u);
  EXPECT_EQ(pages.reads(), 1024u + 1024u * 1024u);
  EXPECT_FALSE(pages.truncated());
}

// Every entry of a PML4 points at the PML4 itself: 512^4 pages. max_reads stops it.
TEST(Mappings, HostileFourLevelTableIsBounded) {
  image m(0x2000);
  for (unsigned i = 0; i < 512; ++i) m.put64(0x1000 + 8 * i, 0x1000 | P | RW);
  const auto s = guest_state(pg, x86::cr4::pae, lma_nx, 0x1000, 46);
  const auto mem = m.view();
  paging::guest_mappings pages(s, mem, {}, paging::mapping_limits{100000});
  uint64_t n = 0;
  for (const auto& r : pages) n += r ? 1 : 0;
  EXPECT_TRUE(pages.truncated());
  EXPECT_EQ(pages.reads(), 100000u);
  EXPECT_GT(n, 90000u);
  // Nested: one bound for the guest entries and the second-stage translations together.
  const paging::identity_stage id{};
  paging::nested_mappings<paging::identity_stage, paging::flat_view> nested(s, id, mem, {},
                                                                           paging::mapping_limits{3000});
  n = 0;
  for (const auto& r : nested) n += r ? 1 : 0;
  EXPECT_TRUE(nested.truncated());
  EXPECT_EQ(nested.reads(), 3000u);
  EXPECT_GT(n, 0u);
  // The same for EPT.
  for (unsigned i = 0; i < 512; ++i) m.put64(0x1000 + 8 * i, 0x1000 | 7);
  const auto mem2 = m.view();
  auto e = paging::ept_mappings<paging::flat_view>::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false),
                                                           paging::ept_capabilities{}, mem2, {},
                                                           paging::mapping_limits{5000});
  ASSERT_TRUE(e);
  n = 0;
  for (const auto& r : *e) n += r ? 1 : 0;
  EXPECT_TRUE(e->truncated());
  EXPECT_EQ(e->reads(), 5000u);
}

// Random tables: the enumeration agrees with the walker (an independent implementation of
// the same rules) on every page it yields and on sampled addresses it does not yield.
struct random_tables {
  image m;
  std::mt19937_64 rng;
  unsigned pages;
  random_tables(unsigned n, std::uint64_t seed) : m(std::size_t{n} * 0x1000), rng(seed), pages(n) {}
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); }
  bool coin(unsigned percent) { return pick(100) < percent; }
};

template <class Mapping, class Walk>
void compare_with_walker(const std::vector<Mapping>& got, std::mt19937_64& rng, uint64_t space_lo,
                         uint64_t space_hi, Walk walk) {
  // Address order, no overlap.
  for (std::size_t i = 1; i < got.size(); ++i) ASSERT_GT(got[i].input, got[i - 1].last()) << i;
  for (const auto& g : got) {
    for (uint64_t off : {uint64_t{0}, g.size - 1, std::uniform_int_distribution<uint64_t>(0, g.size - 1)(rng)}) {
      const auto t = walk(g.input + off);
      ASSERT_TRUE(t) << std::hex << g.input + off;
      // The enumeration's output is in the walker's output space (gpa, or hpa for EPT).
      static_assert(std::is_same_v<decltype(t->address), decltype(g.output)>);
      EXPECT_EQ(t->address.value(), g.output.value() + off);
      EXPECT_EQ(t->rights, g.rights);
      EXPECT_EQ(t->pkey, g.pkey);
      EXPECT_EQ(t->memory_type, g.memory_type);
      EXPECT_EQ(t->page_shift, g.page_shift);
    }
  }
  // Sampled addresses: near the pages found, and anywhere.
  std::uniform_int_distribution<uint64_t> any(space_lo, space_hi);
  for (unsigned i = 0; i < 4000; ++i) {
    uint64_t a = any(rng);
    if (!got.empty() && (i & 1)) {
      const auto& g = got[std::uniform_int_distribution<std::size_t>(0, got.size() - 1)(rng)];
      a = g.input + std::uniform_int_distribution<uint64_t>(0, 4 * g.size)(rng) - 2 * g.size;
    }
    const auto it = std::upper_bound(got.begin(), got.end(), a,
                                     [](uint64_t x, const Mapping& g) { return x < g.input; });
    const bool inside = it != got.begin() && a <= std::prev(it)->last();
    const auto t = walk(a);
    EXPECT_EQ(bool(t), inside) << std::hex << a;
  }
}

// Returns the number of mappings found (the caller checks the tables were not all empty).
std::size_t random_guest(x86::cr4 cr4, x86::efer efer, unsigned seed) {
  random_tables r(48, seed);
  const x86::paging_mode mode = x86::paging_mode_of(pg, cr4, efer);
  const unsigned bytes = mode == x86::paging_mode::two_level ? 4 : 8;
  const unsigned entries = 4096 / bytes;
  // Each table page gets a few random entries pointing at random pages (some outside memory).
  for (unsigned p = 1; p < r.pages; ++p) {
    for (unsigned k = 0; k < (p == 1 ? 24u : 6u); ++k) {
      const uint64_t index = r.coin(30) ? entries - 1 - r.pick(3) : r.pick(entries);
      uint64_t e = (r.coin(95) ? r.pick(r.pages) : r.pick(1u << 20)) << 12;
      e |= r.pick(0x200);  // P RW US PWT PCD A D PS G
      if (r.coin(60)) e |= P;
      if (bytes == 8) {
        if (r.coin(10)) e |= XD;
        if (r.coin(10)) e |= r.pick(16) << 59;
        if (r.coin(3)) e |= uint64_t{1} << (36 + r.pick(16));  // maybe reserved
        if (r.coin(10)) e |= r.pick(0x200) << 12;  // large-page PAT / reserved bits
      } else if (r.coin(10)) {
        e |= r.pick(0x200) << 12;
      }
      if (bytes == 4) r.m.put32(p * 0x1000 + index * 4, static_cast<std::uint32_t>(e));
      else r.m.put64(p * 0x1000 + index * 8, e);
    }
  }
  paging::pdpte_snapshot pd{};
  if (mode == x86::paging_mode::pae) {
    pd.pdpt = x86::gpa{0x1000};
    for (unsigned i = 0; i < 4; ++i) pd.entries[i] = r.coin(75) ? ((1 + r.pick(r.pages - 1)) << 12) | P : 0;
    pd.loaded = true;
  }
  const auto mmu = paging::mmu_context::make(pg, cr4, efer, x86::gpa{0x1000});
  paging::cpu_properties props{};
  props.maxphyaddr = 40;
  const paging::guest_walker w(mmu, props, pd);
  const auto mem = r.m.view();
  paging::guest_mappings pages(w.state(), mem);
  std::vector<paging::mapping> got;
  unsigned faults = 0;
  for (const auto& m : pages) {
    if (m) {
      got.push_back(*m);
    } else {
      ++faults;
      const auto t = w.translate(mem, m.error().linear);  // the walker faults there too
      EXPECT_FALSE(t);
      if (t) continue;
      EXPECT_EQ(t.error().kind, m.error().kind);
      EXPECT_EQ(t.error().level, m.error().level);
    }
  }
  EXPECT_FALSE(pages.truncated());
  const bool ia32e = mode == x86::paging_mode::four_level || mode == x86::paging_mode::five_level;
  const unsigned width = mode == x86::paging_mode::five_level ? 57 : 48;
  const x86::linear_width lw = width == 57 ? x86::linear_width::la57 : x86::linear_width::la48;
  // Linear addresses are compared in enumeration (offset) order: map the upper half below
  // zero by comparing canonical addresses as the enumeration orders them.
  std::vector<paging::mapping> ordered = got;
  auto key = [&](uint64_t a) { return ia32e ? a & ((uint64_t{1} << width) - 1) : a; };
  for (auto& g : ordered) g.input = key(g.input);
  compare_with_walker(ordered, r.rng, 0, ia32e ? (uint64_t{1} << width) - 1 : 0xffffffffu, [&](uint64_t off) {
    const uint64_t a = ia32e ? x86::canonicalize(x86::gva{off}, lw).value() : off;
    return w.translate(mem, x86::gva{a});
  });
  return got.size() + faults;
}

TEST(Mappings, RandomFourLevelAgreesWithWalker) {
  std::size_t found = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    found += random_guest(x86::cr4::pae, lma_nx, seed);
  }
  EXPECT_GT(found, 400u);  // the random tables map something
}
TEST(Mappings, RandomFiveLevelAgreesWithWalker) {
  std::size_t found = 0;
  for (unsigned seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    found += random_guest(x86::cr4::pae | x86::cr4::la57 | x86::cr4::pke, lma_nx, seed);
  }
  EXPECT_GT(found, 200u);  // the random tables map something
}
TEST(Mappings, RandomPaeAgreesWithWalker) {
  std::size_t found = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    found += random_guest(x86::cr4::pae, x86::efer::nxe, seed);
  }
  EXPECT_GT(found, 400u);  // the random tables map something
}
TEST(Mappings, RandomThirtyTwoBitAgreesWithWalker) {
  std::size_t found = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    found += random_guest(x86::cr4::pse, {}, seed);
  }
  EXPECT_GT(found, 400u);  // the random tables map something
}

TEST(Mappings, RandomEptAgreesWithWalker) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    random_tables r(48, seed);
    for (unsigned p = 1; p < r.pages; ++p) {
      for (unsigned k = 0; k < 6; ++k) {
        uint64_t e = (r.coin(95) ? r.pick(r.pages) : r.pick(1u << 20)) << 12;
        e |= r.coin(80) ? 7 : r.pick(8);   // R W X (sometimes W without R: misconfigured)
        e |= r.pick(0x10) << 3;            // memory type, IPAT
        if (r.coin(30)) e |= 0x80;         // PS
        if (r.coin(10)) e |= r.pick(0x200) << 12;
        r.m.put64(p * 0x1000 + r.pick(512) * 8, e);
      }
    }
    paging::ept_capabilities caps{};
    caps.maxphyaddr = 40;
    caps.execute_only = seed & 1;
    const auto eptp = paging::make_ept_pointer(x86::hpa{0x1000}, 4, false);
    const auto w = paging::ept_walker::make(eptp, caps);
    ASSERT_TRUE(w);
    const auto mem = r.m.view();
    auto e = paging::ept_mappings<paging::flat_view>::make(eptp, caps, mem);
    ASSERT_TRUE(e);
    std::vector<paging::host_mapping> got;
    for (const auto& m : *e) {
      if (m) {
        got.push_back(*m);
      } else {
        const auto t = w->translate(mem, x86::gpa{m.error().linear.value()});
        ASSERT_FALSE(t);
        EXPECT_EQ(t.error().kind, m.error().kind);
      }
    }
    compare_with_walker(got, r.rng, 0, (uint64_t{1} << 48) - 1,
                        [&](uint64_t a) { return w->translate(mem, x86::gpa{a}); });
  }
}

// Random guest tables behind random EPT: every piece translates with the nested walker
// (guest and second stage) to the same addresses, and sampled addresses outside the
// pieces fault in it.
TEST(Mappings, RandomNestedAgreesWithNestedWalker) {
  std::size_t found = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    random_tables r(64, seed);
    constexpr uint64_t ERWX = 7, EPS = 0x80, WB = 6 << 3;
    // EPT at host pages 1-4; guest-physical pages 0..58 on a permutation of host pages 5..63
    // (some left unmapped), gpa [2 MiB, 4 MiB) as one page outside memory.
    r.m.put64(0x1000, 0x2000 | ERWX);
    r.m.put64(0x2000, 0x3000 | ERWX);
    r.m.put64(0x3000, 0x4000 | ERWX);
    r.m.put64(0x3008, 0x200000 | ERWX | EPS | WB);
    std::vector<uint64_t> host(59);
    for (uint64_t i = 0; i < host.size(); ++i) host[i] = 5 + i;
    std::shuffle(host.begin(), host.end(), r.rng);
    std::vector<bool> mapped(64, false);
    for (uint64_t g = 0; g < host.size(); ++g) {
      if (g != 1 && r.coin(12)) continue;  // the root stays mapped
      r.m.put64(0x4000 + 8 * g, (host[g] << 12) | ERWX | WB);
      mapped[g] = true;
    }
    // Guest tables in guest-physical pages 1..58, written where EPT puts them.
    for (unsigned p = 1; p < host.size(); ++p) {
      for (unsigned k = 0; k < (p == 1 ? 24u : 6u); ++k) {
        const uint64_t index = r.coin(30) ? 511 - r.pick(3) : r.pick(512);
        uint64_t e = (r.coin(90) ? r.pick(70) : r.pick(1u << 20)) << 12;
        e |= r.pick(0x200);
        if (r.coin(60)) e |= P;
        if (r.coin(10)) e |= XD;
        if (r.coin(10)) e |= r.pick(0x200) << 12;
        r.m.put64((host[p] << 12) + index * 8, e);
      }
    }
    const paging::ept_capabilities caps{};
    const auto ept = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false), caps);
    ASSERT_TRUE(ept);
    const auto mmu = paging::mmu_context::make(pg, x86::cr4::pae, lma_nx, x86::gpa{0x1000});
    paging::cpu_properties props{};
    props.maxphyaddr = 46;
    const paging::walker_4level guest(mmu, props);
    const paging::nested_walker<paging::format::ia32e<4>, paging::ept_walker> walker(guest, *ept);
    const auto mem = r.m.view();
    paging::nested_mappings<paging::ept_walker, paging::flat_view> pieces(guest.state(), *ept, mem);
    std::vector<paging::nested_mapping> got;
    for (const auto& m : pieces) {
      if (m) got.push_back(*m);
      else EXPECT_FALSE(walker.translate(mem, m.error().linear)) << std::hex << m.error().linear.value();
    }
    EXPECT_FALSE(pieces.truncated());
    found += got.size();
    constexpr uint64_t mask48 = (uint64_t{1} << 48) - 1;
    for (std::size_t i = 1; i < got.size(); ++i)
      ASSERT_GT(got[i].linear & mask48, got[i - 1].last() & mask48) << i;
    for (const auto& g : got) {
      for (uint64_t off : {uint64_t{0}, g.size - 1, r.pick(g.size)}) {
        const auto t = walker.translate(mem, x86::gva{g.linear + off});
        ASSERT_TRUE(t) << std::hex << g.linear + off;
        EXPECT_EQ(t->guest.address.value(), g.guest_physical.value() + off);
        EXPECT_EQ(t->second.address.value(), g.output.value() + off);
        EXPECT_EQ(t->guest.rights, g.guest.rights);
        EXPECT_EQ(t->second.rights, g.second_rights);
      }
    }
    for (unsigned i = 0; i < 3000; ++i) {
      uint64_t a = r.pick(uint64_t{1} << 48);
      if (!got.empty() && (i & 1)) {
        const auto& g = got[r.pick(got.size())];
        a = ((g.linear & mask48) + r.pick(4 * g.size) - 2 * g.size) & mask48;
      }
      const auto it = std::upper_bound(got.begin(), got.end(), a, [](uint64_t x, const paging::nested_mapping& g) {
        return x < (g.linear & mask48);
      });
      const bool inside = it != got.begin() && a <= (std::prev(it)->last() & mask48);
      const auto t = walker.translate(mem, x86::canonicalize(x86::gva{a}, x86::linear_width::la48));
      EXPECT_EQ(bool(t), inside) << std::hex << a;
    }
  }
  EXPECT_GT(found, 200u);
}

}  // namespace

// Paging off under a second stage: SDM 4.1.1, "If CR0.PG = 0, paging is not used. The logical
// processor treats all linear addresses as if they were physical addresses"; the
// guest-physical address then goes through the second stage (SDM 29.3: with EPT, "guest-
// physical addresses are translated by traversing a set of EPT paging structures"). With the
// identity stage the range comes back in 4 KiB pieces, linear = guest-physical = output; with
// an EPT that maps nothing, the first piece is the second stage's fault.
TEST(Mappings, NestedPagingOff) {
  image m(0x10000);
  const auto s = guest_state(x86::cr0::pe, {}, {}, 0, 52);
  const auto mem = m.view();
  const paging::identity_stage id{};
  paging::nested_mappings<paging::identity_stage, paging::flat_view> pieces(s, id, mem, {0x1000, 0x4fff});
  std::vector<paging::nested_mapping> got;
  for (const auto& r : pieces) {
    ASSERT_TRUE(r.has_value());
    got.push_back(*r);
  }
  ASSERT_EQ(got.size(), 4u);
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].linear, 0x1000u + 0x1000u * i);
    EXPECT_EQ(got[i].size, 0x1000u);
    EXPECT_EQ(got[i].guest_physical.value(), got[i].linear);
    EXPECT_EQ(got[i].output.value(), got[i].linear);
    EXPECT_EQ(got[i].guest.page_shift, 32);
    EXPECT_EQ(got[i].guest.level, 0);
  }
  // An EPT whose PML4 (at 0x8000, all zero) maps nothing: every piece is skipped ("Pieces
  // the second stage does not map are skipped").
  const auto empty = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x8000}, 4, false), paging::ept_capabilities{});
  ASSERT_TRUE(empty);
  paging::nested_mappings<paging::ept_walker, paging::flat_view> skipped(s, *empty, mem, {0x1000, 0x4fff});
  unsigned n = 0;
  for (const auto& r : skipped) {
    static_cast<void>(r);
    ++n;
  }
  EXPECT_EQ(n, 0u);
  // An EPT whose PML4 lies outside memory: the second stage cannot read it, reported as its
  // fault (unbacked) at the first address.
  const auto far = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x100000}, 4, false), paging::ept_capabilities{});
  ASSERT_TRUE(far);
  paging::nested_mappings<paging::ept_walker, paging::flat_view> none(s, *far, mem, {0x1000, 0x4fff});
  unsigned faults = 0, mapped = 0;
  for (const auto& r : none) {
    if (r) {
      ++mapped;
      continue;
    }
    if (faults++ == 0) {
      EXPECT_EQ(r.error().stage, paging::walk_stage::ept);
      EXPECT_EQ(r.error().kind, fault_kind::unbacked);
      EXPECT_EQ(r.error().linear.value(), 0x1000u);
      EXPECT_EQ(r.error().guest_physical.value(), 0x1000u);
    }
  }
  EXPECT_EQ(mapped, 0u);
  EXPECT_GE(faults, 1u);
}
