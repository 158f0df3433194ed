// SPDX-License-Identifier: MIT
// The two processor properties of AMD nested paging that the manual leaves open (issue 25,
// items 7 and 8), each with its default and with the other value, golden EXITINFO1 values
// typed by hand from APM Vol. 2 15.25.6 ("bit 0 (P) ... bit 1 (RW) ... bit 2 (US) ... bit 3
// (RSV) ... bit 4 (ID)"; "bit 32 ... while translating the guest's final physical address";
// "bit 33 ... while translating the guest page tables"):
//  - cpu_properties::npf_fetch_id_without_nxe: does a fetch #NPF report ID when the host's
//    EFER.NXE is 0? (15.25.6 names no NXE condition; the #PF error code sets I/D only with
//    NXE, 8.4.2.)
//  - cpu_properties::amd_nonleaf_bit8: is bit 8 of a (nested) PML4E reserved? (5.3.3 marks
//    PML4E bits 8:7 MBZ.)
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/svm/npf.hpp>

namespace {

using namespace hvkit;
using std::uint64_t;

constexpr uint64_t P = 1, RW = 2, US = 4, A = 0x20, D = 0x40;
constexpr uint64_t E_P = 1, E_RW = 2, E_US = 4, E_RSV = 8, E_ID = 0x10;
constexpr uint64_t E_FINAL = uint64_t{1} << 32, E_TABLE = uint64_t{1} << 33;
// 1 GiB + 2 MiB + 4 KiB + 0xabc: PML4 index 0, PDPT 1, PD 1, PT 1.
constexpr uint64_t va = (uint64_t{1} << 30) | (uint64_t{1} << 21) | (uint64_t{1} << 12) | 0xabc;

// Host memory: 4-level NPT at 0x10000 (PML4 0x10000, PDPT 0x11000, PD 0x12000, PT 0x13000)
// mapping guest-physical pages 0-7 to host 0x20000 + gpa; the guest's 4-level tables at
// gpa 0x1000 (PML4), 0x2000, 0x3000, 0x4000 map va to gpa 0x7abc.
struct setup {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x40000);
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  setup() {
    put64(0x10000, 0x11000 | P | RW | US);
    put64(0x11000, 0x12000 | P | RW | US);
    put64(0x12000, 0x13000 | P | RW | US);
    for (uint64_t p = 0; p < 8; ++p) put64(0x13000 + 8 * p, (0x20000 + p * 0x1000) | P | RW | US | A | D);
    put64(0x21000, 0x2000 | P | RW | US | A);
    put64(0x22000 + 8, 0x3000 | P | RW | US | A);
    put64(0x23000 + 8, 0x4000 | P | RW | US | A);
    put64(0x24000 + 8, 0x7000 | P | RW | US | A);
  }
  paging::nested_result walk(x86::pfec access, bool host_nxe, paging::cpu_properties props) {
    const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp, x86::cr4::pae,
                                               x86::efer::lme | x86::efer::lma | x86::efer::nxe, x86::gpa{0x1000});
    const paging::walker_4level g(mmu, {});
    props.maxphyaddr = 48;
    const paging::npt_walker_4level npt(x86::hpa{0x10000}, paging::npt_host{host_nxe, false}, props);
    const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(g, npt);
    paging::flat_memory mem(bytes.data(), bytes.size());
    return n.check(mem, mmu, {x86::gva{va}, access});
  }
};

uint64_t exit_info_1(const paging::nested_result& r) {
  if (r) return ~uint64_t{0};
  const auto npf = svm::npf_from_fault(r.error());
  return npf ? npf.value().error.raw() : ~uint64_t{1};
}

TEST(NptProperties, DefaultsAreTheDocumentedOnes) {
  const paging::cpu_properties d{};
  // ID without host NXE: the APM's description of bit 4 and the Bochs AMD models (issue 25).
  EXPECT_TRUE(d.npf_fetch_id_without_nxe);
  // Nested PML4E bit 8 ignored: the Bochs AMD models (684 of 684 cases, issue 25).
  EXPECT_FALSE(d.amd_nonleaf_bit8);
}

// A fetch from a guest-physical page whose nested PTE is not present: P = 0, US (every nested
// access is a user access, 15.25.5), bit 32 (the final access); ID as the property says when
// the host's NXE is 0, always with NXE.
TEST(NptProperties, FetchIdWithoutHostNxe) {
  setup s;
  s.put64(0x13000 + 8 * 7, 0);  // gpa 0x7000 not present in the nested tables
  paging::cpu_properties pcs{};
  pcs.npf_fetch_id_without_nxe = false;
  paging::cpu_properties apm{};
  EXPECT_EQ(exit_info_1(s.walk(x86::pfec::fetch, false, pcs)), E_US | E_FINAL);
  EXPECT_EQ(exit_info_1(s.walk(x86::pfec::fetch, false, apm)), E_US | E_ID | E_FINAL);
  EXPECT_EQ(exit_info_1(s.walk(x86::pfec::fetch, true, pcs)), E_US | E_ID | E_FINAL);
  EXPECT_EQ(exit_info_1(s.walk(x86::pfec::fetch, true, apm)), E_US | E_ID | E_FINAL);
  // A read never reports ID.
  EXPECT_EQ(exit_info_1(s.walk({}, false, apm)), E_US | E_FINAL);
  // A guest page-table access is a write, never a fetch (15.25.5): no ID either way.
  s.put64(0x13000 + 8 * 7, 0x27000 | P | RW | US | A | D);
  s.put64(0x13000 + 8 * 2, 0);
  EXPECT_EQ(exit_info_1(s.walk(x86::pfec::fetch, false, apm)), E_RW | E_US | E_TABLE);
}

// Bit 8 of the nested PML4E: reserved (P, RSV, and RW/US of the first nested access, the
// guest's PML4 read, a guest page-table access: bit 33) or ignored (the walk succeeds).
TEST(NptProperties, NestedPml4eBit8) {
  setup s;
  s.put64(0x10000, 0x11000 | P | RW | US | (uint64_t{1} << 8));
  paging::cpu_properties ignored{};
  paging::cpu_properties reserved{};
  reserved.amd_nonleaf_bit8 = true;
  EXPECT_TRUE(s.walk({}, true, ignored));
  EXPECT_EQ(exit_info_1(s.walk({}, true, reserved)), E_P | E_RW | E_US | E_RSV | E_TABLE);
  // Bit 8 of the nested PDPTE is not concerned.
  setup t;
  t.put64(0x11000, 0x12000 | P | RW | US | (uint64_t{1} << 8));
  EXPECT_TRUE(t.walk({}, true, reserved));
}

}  // namespace
