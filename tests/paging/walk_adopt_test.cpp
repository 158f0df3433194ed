// SPDX-License-Identifier: MIT
// Golden cases for the walker API's misuse guards and the nested-paging questions of
// issues 23 and 25: typed walkers over the wrong paging mode, cpu_properties by name, the
// architectural fault level, self-contradicting requests, host-physical outputs, the
// paging-off guest and PAE guest under NPT, the checked host-format selection and the
// record of a walk's A/D writes. Expectations typed by hand from the SDM and the APM.
#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;
using paging::fault_kind;
using std::uint64_t;

struct image {
  std::vector<std::uint8_t> bytes;
  explicit image(std::size_t n = 0x40000) : bytes(n) {}
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put32(uint64_t a, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  uint64_t get64(uint64_t a) const {
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= uint64_t{bytes[a + i]} << (8 * i);
    return v;
  }
  paging::flat_memory mem() { return paging::flat_memory(bytes.data(), bytes.size()); }
  paging::flat_view view() const { return paging::flat_view(bytes.data(), bytes.size()); }
};

// Guest entry bits (SDM Tables 4-14..4-20) and EPT entry bits (SDM Tables 29-1..29-6).
constexpr uint64_t P = 1, RW = 2, US = 4, A = 0x20, D = 0x40, PS = 0x80;
constexpr uint64_t R = 1, W = 2, X = 4, EA = 0x100, ED = 0x200, WB = 6u << 3;

const x86::cr0 cr0_pg = x86::cr0::pg | x86::cr0::pe;
const x86::efer efer_lma = x86::efer::lme | x86::efer::lma;

paging::mmu_context mmu_32bit(uint64_t cr3) { return paging::mmu_context::make(cr0_pg, {}, {}, x86::gpa{cr3}); }
paging::mmu_context mmu_4level(uint64_t cr3) {
  return paging::mmu_context::make(cr0_pg, x86::cr4::pae, efer_lma, x86::gpa{cr3});
}
paging::mmu_context mmu_5level(uint64_t cr3) {
  return paging::mmu_context::make(cr0_pg, x86::cr4::pae | x86::cr4::la57, efer_lma, x86::gpa{cr3});
}

// ---- 23.4: a typed walker checks the paging mode -------------------------------------------

// 32-bit paging tables for linear 0x0040'1abc (PDE 1 -> PT at 0x2000, PTE 1 -> 0x9000): a
// walker_4level over this context used to walk them as 4-level tables and return 0x9000-ish
// nonsense; a walker_5level over a 4-level context returned a wrong fault.
TEST(WalkerMode, TypedWalkerOverAnotherModeIsATypedError) {
  image m;
  m.put32(0x1000 + 1 * 4, 0x2000 | P | RW);
  m.put32(0x2000 + 1 * 4, 0x9000 | P | RW);
  auto mem = m.mem();
  const auto mmu32 = mmu_32bit(0x1000);
  const paging::walk_request req{x86::gva{0x0040'1abc}, {}};
  const auto good = paging::walker_32bit(mmu32, {}).walk(mem, mmu32, req);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->address.value(), 0x9abcu);
  const paging::walker_4level w4(mmu32, {});
  const auto bad = w4.walk(mem, mmu32, req);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, fault_kind::mode_mismatch);
  EXPECT_EQ(bad.error().level, 0);
  EXPECT_EQ(w4.translate(m.view(), x86::gva{0x0040'1abc}).error().kind, fault_kind::mode_mismatch);
  EXPECT_EQ(w4.check(m.view(), mmu32, req).error().kind, fault_kind::mode_mismatch);
  // walker_5level over a 4-level context.
  const auto mmu4 = mmu_4level(0x1000);
  EXPECT_EQ(paging::walker_5level(mmu4, {}).walk(mem, mmu4, req).error().kind, fault_kind::mode_mismatch);
  // A walker of the right mode walked with the mmu_context of another mode.
  const auto mmu5 = mmu_5level(0x1000);
  EXPECT_EQ(paging::walker_4level(mmu4, {}).walk(mem, mmu5, req).error().kind, fault_kind::mode_mismatch);
  // Nothing was written (the 4-level reading of the tables would have set A bits).
  EXPECT_EQ(m.get64(0x1000) & A, 0u);
  // The nested walker checks its guest walker the same way.
  const auto ept = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x30000}, 4, false), {});
  ASSERT_TRUE(ept);
  const paging::nested_walker<paging::format::ia32e<4>> n(w4, *ept);
  EXPECT_EQ(n.walk(mem, mmu32, req).error().kind, fault_kind::mode_mismatch);
  EXPECT_EQ(n.translate(m.view(), req.linear).error().kind, fault_kind::mode_mismatch);
}

// ---- 23.5: cpu_properties by name only ----------------------------------------------------

TEST(WalkerApi, CpuPropertiesByNameOnly) {
  // The positional form of older callers (maxphyaddr, gbpages, amd_nonleaf_bit8) does not
  // compile (tests/compile_fail/paging_cpu_properties_positional.cpp); designated does.
  static_assert(!std::is_constructible_v<paging::cpu_properties, unsigned, bool, bool>);
  static_assert(!std::is_constructible_v<paging::cpu_properties, unsigned>);
  constexpr paging::cpu_properties p{.maxphyaddr = 40, .gbpages = false};
  static_assert(p.maxphyaddr == 40 && !p.gbpages && !p.amd_nonleaf_bit8 && p.pse36);
  constexpr paging::cpu_properties d{};
  static_assert(d.maxphyaddr == 52 && d.gbpages && !d.amd_nonleaf_bit8 && d.pse36);
}

// ---- 23.6: one accessor for the architectural level ---------------------------------------

// SDM 4.7 gives no level at all; the architectural report (and KVM's) names the entry that
// maps the page for a protection fault, the entry where the walk stopped otherwise.
TEST(WalkerApi, ArchitecturalLevel) {
  image m;
  m.put64(0x1000, 0x2000 | P | RW);  // PML4E: U/S = 0
  m.put64(0x2000, 0x3000 | P | RW | US);
  m.put64(0x3000, 0x0060'0000 | P | RW | US | PS);  // a 2 MiB page
  auto mem = m.mem();
  const auto mmu = mmu_4level(0x1000);
  const paging::walker_4level w(mmu, {});
  const auto r = w.walk(mem, mmu, {x86::gva{0x1234}, x86::pfec::user});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::permission);
  EXPECT_EQ(r.error().level, 4);
  EXPECT_EQ(r.error().architectural_level(), 2u);
  m.put64(0x2000, 0);  // not present at the PDPTE
  const auto np = w.walk(mem, mmu, {x86::gva{0x1234}, x86::pfec::user});
  EXPECT_EQ(np.error().kind, fault_kind::not_present);
  EXPECT_EQ(np.error().architectural_level(), 3u);
}

}  // namespace

namespace {

// ---- 23.7: self-contradicting requests -----------------------------------------------------

// EPT tables for GPA 0x4020'1abc: PML4 0x10000 -> PDPT 0x11000[1] -> PD 0x12000[1] -> PT 0x13000[1] -> 0x18000.
constexpr uint64_t gpa4 = (uint64_t{1} << 30) | (uint64_t{1} << 21) | (uint64_t{1} << 12) | 0xabc;
void ept_tables(image& m, uint64_t l1) {
  m.put64(0x10000, 0x11000 | R | W | X);
  m.put64(0x11000 + 8, 0x12000 | R | W | X);
  m.put64(0x12000 + 8, 0x13000 | R | W | X);
  m.put64(0x13000 + 8, 0x18000 | l1);
}
paging::ept_walker make_ept(bool ad, uint64_t root = 0x10000) {
  const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{root}, 4, ad), {});
  EXPECT_TRUE(w);
  return *w;
}

// SDM 29.3.5: "the loads of the PDPTE registers ... are treated as reads"; SDM 28.2.1
// (bit 7): "cleared to 0 if the EPT violation was caused by an attempt to load a PDPTE".
// A guest paging-structure access is a data access, never an instruction fetch (bit 2 is
// "set if the access causing the EPT violation was an instruction fetch"). A request that
// says otherwise is refused, not silently rewritten.
TEST(EptRequest, SelfContradictingRequestsAreTypedErrors) {
  image m;
  ept_tables(m, R | W | X | WB);
  auto mem = m.mem();
  const auto w = make_ept(true);
  auto walk = [&](paging::ept_access acc, paging::ept_origin o, bool linear_valid) {
    paging::ept_request req{};
    req.address = x86::gpa{gpa4};
    req.access = acc;
    req.origin = o;
    req.linear_valid = linear_valid;
    req.linear = x86::gva{0x1234};
    return w.walk(mem, req);
  };
  using acc = paging::ept_access;
  using org = paging::ept_origin;
  EXPECT_EQ(walk(acc::fetch, org::paging_structure, true).error().kind, fault_kind::invalid_request);
  EXPECT_EQ(walk(acc::write, org::pdpte_load, false).error().kind, fault_kind::invalid_request);
  EXPECT_EQ(walk(acc::fetch, org::pdpte_load, false).error().kind, fault_kind::invalid_request);
  EXPECT_EQ(walk(acc::read, org::pdpte_load, true).error().kind, fault_kind::invalid_request);
  EXPECT_EQ(walk(acc::read, org::pdpte_load, true).error().qualification.raw(), 0u);
  EXPECT_EQ(m.get64(0x10000) & EA, 0u);  // nothing read, nothing written
  EXPECT_TRUE(walk(acc::read, org::pdpte_load, false));
  EXPECT_TRUE(walk(acc::read, org::paging_structure, true));
  EXPECT_TRUE(walk(acc::write, org::paging_structure, true));
  EXPECT_TRUE(walk(acc::fetch, org::final_access, true));
  // The same rules for the NPT stage.
  image n;
  n.put64(0x1000, 0x2000 | P | RW | US);
  n.put64(0x2000, 0x3000 | P | RW | US);
  n.put64(0x3000, 0x4000 | P | RW | US);
  n.put64(0x4000, 0x5000 | P | RW | US);
  const paging::npt_walker_4level npt(0x1000, {}, {});
  paging::ept_request bad{};
  bad.address = x86::gpa{0x10};
  bad.access = acc::fetch;
  bad.origin = org::paging_structure;
  EXPECT_EQ(npt.check(n.view(), bad).error().kind, fault_kind::invalid_request);
  bad.access = acc::read;
  EXPECT_TRUE(npt.check(n.view(), bad));
}

// SDM 28.2.1: bits 2:0 of the qualification say which access caused the violation ("bit 0
// is set if the access causing the EPT violation was a data read"). A raw translation
// (translate(mem, gpa): no rights checked) is no access at all: a not-present entry reports
// bits 2:0 = 0 (it used to report bit 0, as if a read had been attempted).
TEST(EptRequest, RawTranslateNotPresentHasNoAccessBits) {
  image m;
  ept_tables(m, 0);  // the EPT PTE is not present
  const auto r = make_ept(false).translate(m.view(), x86::gpa{gpa4});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, fault_kind::not_present);
  EXPECT_EQ(r.error().level, 1);
  EXPECT_EQ(r.error().qualification.raw(), 0u);
  // The checked walk of a read still reports bit 0.
  EXPECT_EQ(make_ept(false).check(m.view(), {x86::gpa{gpa4}, paging::ept_access::read}).error().qualification.raw(), 1u);
}

}  // namespace
