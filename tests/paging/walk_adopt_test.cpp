// SPDX-License-Identifier: MIT
// Golden cases for the walker API's misuse guards and the nested-paging questions of
// issues 23 and 25: typed walkers over the wrong paging mode, cpu_properties by name, the
// architectural fault level, self-contradicting requests, host-physical outputs, the
// paging-off guest and PAE guest under NPT, the checked host-format selection and the
// record of a walk's A/D writes. Expectations typed by hand from the SDM and the APM.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <hvkit/paging/ad_record.hpp>
#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>
#include "memory_image.hpp"
#include "racing_memory.hpp"

namespace {

using namespace hvkit;
using paging::fault_kind;
using std::uint64_t;

struct image : test_support::memory_image {
  explicit image(std::size_t n = 0x40000) : memory_image(n) {}
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
  const paging::npt_walker_4level npt(x86::hpa{0x1000}, {}, {});
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

namespace {

// ---- 25.10: a second-stage fault during the guest walk names the guest level --------------

// NPT tables at 0x10000 (PML4) -> 0x11000 -> 0x12000 -> PT 0x13000 mapping L2 gpa p * 4 KiB to
// L1 0x20000 + p * 4 KiB (user, writable, APM 15.25.5); guest 4-level tables at L2 gpa
// 0x1000 (PML4) -> 0x2000 -> 0x3000 -> 0x4000 -> page 0x7000, linear address 0.
struct npt_setup {
  image m{0x40000};
  npt_setup() {
    m.put64(0x10000, 0x11000 | P | RW | US);
    m.put64(0x11000, 0x12000 | P | RW | US);
    m.put64(0x12000, 0x13000 | P | RW | US);
    for (uint64_t p = 0; p < 16; ++p) m.put64(0x13000 + 8 * p, (0x20000 + p * 0x1000) | P | RW | US | A | D);
    m.put64(0x21000, 0x2000 | P | RW | US | A);
    m.put64(0x22000, 0x3000 | P | RW | US | A);
    m.put64(0x23000, 0x4000 | P | RW | US | A);
    m.put64(0x24000, 0x7000 | P | RW | US | A | D);
  }
  paging::nested_result walk() {
    const auto mmu = mmu_4level(0x1000);
    const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(
        paging::walker_4level(mmu, {}), paging::npt_walker_4level(x86::hpa{0x10000}, {}, {}));
    auto mem = m.mem();
    return n.walk(mem, mmu, {x86::gva{0x123}, {}});
  }
};

// APM 15.25.6: EXITINFO1 bit 33 is "set if the #NPF occurred while translating the guest's
// page tables" and bit 32 "if ... the final guest physical address"; which guest table the
// walk was reading is what walk_fault::guest_level adds (1-4), 0 for the final access.
TEST(NestedFault, SecondStageFaultNamesTheGuestLevel) {
  npt_setup ok;
  const auto r = ok.walk();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l1_address().value(), 0x27123u);
  for (unsigned level = 4; level >= 1; --level) {
    npt_setup s;
    const uint64_t table = 0x1000 * (5 - level);  // L2 gpa of the guest table read at `level`
    s.m.put64(0x13000 + 8 * (table >> 12), 0);   // its NPT PTE not present
    const auto f = s.walk();
    ASSERT_FALSE(f) << level;
    EXPECT_EQ(f.error().stage, paging::walk_stage::npt) << level;
    EXPECT_EQ(f.error().kind, fault_kind::not_present) << level;
    EXPECT_EQ(f.error().guest_level, level) << level;
    EXPECT_EQ(f.error().guest_physical.value(), table) << level;
    EXPECT_FALSE(f.error().qualification.test(paging::ept_qualification::final_translation)) << level;
  }
  npt_setup fin;
  fin.m.put64(0x13000 + 8 * 7, 0);  // the final page
  const auto f = fin.walk();
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().stage, paging::walk_stage::npt);
  EXPECT_EQ(f.error().guest_level, 0);
  EXPECT_TRUE(f.error().qualification.test(paging::ept_qualification::final_translation));
}

}  // namespace

namespace {

// ---- 25.9: a paging-off guest under a second stage ----------------------------------------

// SDM 4.1.1: with CR0.PG = 0 "linear addresses are used directly as physical addresses";
// the final access has a guest-linear address (SDM 28.2.1, bit 7; bit 8 = the translation
// of that address).
TEST(NestedPagingOff, LinearIsGuestPhysicalThroughTheSecondStage) {
  image m;
  ept_tables(m, R | W | WB);  // L2 gpa 0x4020'1000 -> 0x18000, not executable
  const auto ept = make_ept(true);
  const auto mmu = paging::mmu_context::make(x86::cr0::pe, {}, {}, x86::gpa{0});
  const paging::nested_walker<paging::format::paging_off> n(ept);
  auto mem = m.mem();
  const auto r = n.walk(mem, mmu, {x86::gva{gpa4}, x86::pfec::write});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l2_gpa().value(), gpa4);
  EXPECT_EQ(r->l1_address().value(), 0x18abcu);
  EXPECT_EQ(m.get64(0x13008) & (EA | ED), EA | ED);  // EPT A/D of a write
  // Bits 63:32 of the linear address play no part (32-bit linear addresses).
  EXPECT_EQ(n.check(m.view(), mmu, {x86::gva{(uint64_t{1} << 32) | gpa4}, {}})->l1_address().value(), 0x18abcu);
  // A fetch from a non-executable page: an EPT violation for the final translation.
  const auto f = n.check(m.view(), mmu, {x86::gva{gpa4}, x86::pfec::fetch});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().stage, paging::walk_stage::ept);
  EXPECT_EQ(f.error().qualification.raw(), 0x180u | 0x18u | 0x4u);  // bits 8, 7; R, W; fetch
  EXPECT_EQ(n.translate(m.view(), x86::gva{gpa4})->l1_address().value(), 0x18abcu);
  // An mmu_context with paging on is a mode mismatch.
  EXPECT_EQ(n.check(m.view(), mmu_4level(0x1000), {x86::gva{gpa4}, {}}).error().kind, fault_kind::mode_mismatch);
}

// ---- 25.11: a PAE guest under NPT, and a checked PDPTE snapshot ---------------------------

// SDM 4.4.1, Table 4-8: a present PDPTE with a reserved bit (2:1, 8:5, 63:MAXPHYADDR) makes the
// load fail with #GP(0).
TEST(PaeGuest, CheckedSnapshotFromRegisterValues) {
  const auto ok = paging::make_pdpte_snapshot({0x2000 | P, 0, 0x5000 | P | 0x18, 2 /* not present */}, x86::gpa{0x1000}, 40);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->loaded);
  EXPECT_EQ(ok->entries[2], 0x5000u | P | 0x18u);
  for (const uint64_t bad : {uint64_t{2}, uint64_t{4}, uint64_t{0x20}, uint64_t{0x100}, uint64_t{1} << 40, uint64_t{1} << 63}) {
    const auto e = paging::make_pdpte_snapshot({0, 0x3000 | P | bad, 0, 0}, x86::gpa{0x1000}, 40);
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().kind, paging::pdptr_error::kind_type::reserved_bit);
    EXPECT_EQ(e.error().index, 1);
    EXPECT_EQ(e.error().address.value(), 0x1008u);
    EXPECT_EQ(e.error().vector, x86::vector::gp);
  }
  EXPECT_TRUE(paging::make_pdpte_snapshot({0, 0x3000 | P | (uint64_t{1} << 39), 0, 0}, x86::gpa{0x1000}, 40));
}

// A PAE guest under NPT set up with hvkit alone: load_pdptrs through the NPT stage, then a
// nested walk of walker_pae over npt_walker_4level.
TEST(PaeGuest, UnderNpt) {
  npt_setup s;  // NPT maps L2 gpa p * 4 KiB -> L1 0x20000 + p * 4 KiB
  s.m.put64(0x21000, 0x2000 | P);  // PDPTE 0 -> PD at L2 0x2000
  s.m.put64(0x22000, 0x3000 | P | RW | US | A);
  s.m.put64(0x23000 + 8 * 1, 0x7000 | P | RW | US | A | D);  // PTE 1
  const paging::npt_walker_4level npt(x86::hpa{0x10000}, {}, {});
  auto mem = s.m.mem();
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, mem, 52, npt);
  ASSERT_TRUE(pd);
  EXPECT_EQ(pd->entries[0], 0x2000u | P);
  const auto mmu = paging::mmu_context::make(cr0_pg, x86::cr4::pae, {}, x86::gpa{0x1000});
  const paging::nested_walker<paging::format::pae, paging::npt_walker_4level> n(
      paging::walker_pae(mmu, {}, *pd), npt);
  const auto r = n.walk(mem, mmu, {x86::gva{0x1234}, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->l2_gpa().value(), 0x7234u);
  EXPECT_EQ(r->l1_address().value(), 0x27234u);
  // The PDPT's page not mapped by NPT: the #NPF in pdptr_error::ept.
  s.m.put64(0x13000 + 8, 0);
  const auto f = paging::load_pdptrs(x86::cr3{0x1000}, mem, 52, npt);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, paging::pdptr_error::kind_type::ept);
  EXPECT_EQ(f.error().ept.stage, paging::walk_stage::npt);
  EXPECT_EQ(f.error().ept.kind, fault_kind::not_present);
}

// ---- 25.12: the host format from the host's CR0/CR4/EFER, checked -------------------------

// APM 15.25.3: the nested tables have the host's paging format at VMRUN (CR4 and EFER are
// not switched); with CR4.LA57 in long mode that is five levels.
TEST(NptHost, FormatFromHostRegistersIsChecked) {
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::pe;
  const x86::cr4 la57 = x86::cr4::pae | x86::cr4::la57;
  EXPECT_EQ(*paging::npt_host_mode(cr0, x86::cr4::pae, efer_lma), x86::paging_mode::four_level);
  EXPECT_EQ(*paging::npt_host_mode(cr0, la57, efer_lma), x86::paging_mode::five_level);
  EXPECT_EQ(*paging::npt_host_mode(cr0, x86::cr4::pae, {}), x86::paging_mode::pae);
  EXPECT_EQ(*paging::npt_host_mode(cr0, {}, {}), x86::paging_mode::two_level);
  EXPECT_EQ(paging::npt_host_mode(x86::cr0::pe, {}, {}).error(), paging::npt_host_error::host_paging_off);
  // A 4-level walker for a 5-level host is refused; the right one is built.
  EXPECT_EQ(paging::make_npt_walker<paging::format::ia32e<4>>(x86::hpa{0x10000}, cr0, la57, efer_lma, {}).error(),
            paging::npt_host_error::format_mismatch);
  EXPECT_TRUE(paging::make_npt_walker<paging::format::ia32e<5>>(x86::hpa{0x10000}, cr0, la57, efer_lma, {}));
  // Runtime selection: the walker handed to the callback has the host's format.
  const auto levels = paging::with_npt_walker(x86::hpa{0x10000}, cr0, la57, efer_lma | x86::efer::nxe, {},
                                              [](const auto& w) { return unsigned{std::decay_t<decltype(w)>::format_type::levels} + (w.nx() ? 10u : 0u); });
  ASSERT_TRUE(levels);
  EXPECT_EQ(*levels, 15u);
  EXPECT_EQ(*paging::with_npt_walker(x86::hpa{0x10000}, cr0, {}, {}, {},
                                     [](const auto& w) { return unsigned{std::decay_t<decltype(w)>::format_type::levels}; }),
            2u);
}

// Every consistent host register set: the format chosen at run time (with_npt_walker) and the
// checked construction (make_npt_walker) against the paging modes of SDM 4.1.1 (CR0.PG = 0: no
// paging; CR4.PAE = 0: 32-bit; EFER.LMA = 0: PAE; CR4.LA57 = 0: 4-level, else 5-level), XD
// only under EFER.NXE and never for a 32-bit host (32-bit paging has no XD bit), and the root
// taken from nCR3 as the host's CR3 would give it (32-bit: bits 31:12; PAE: 31:5; long mode:
// MAXPHYADDR-1:12, SDM 4.3, 4.4, 4.5).
TEST(NptHost, EveryHostModeSelectsItsFormat) {
  const x86::hpa ncr3{0x00ff'ffff'ffff'ffffu};
  const paging::cpu_properties props{.maxphyaddr = 40};
  unsigned seen[5] = {};
  for (unsigned c = 0; c < 64; ++c) {
    const bool pg = c & 1, pae = c & 2, lma = c & 4, la57 = c & 8, nxe = c & 16, pse = c & 32;
    if (lma && (!pg || !pae)) continue;  // EFER.LMA = 1 only with CR0.PG = 1 and CR4.PAE = 1
    const x86::cr0 cr0{x86::cr0::pe.raw() | (pg ? x86::cr0::pg.raw() : 0)};
    const x86::cr4 cr4{(pae ? x86::cr4::pae.raw() : 0) | (la57 ? x86::cr4::la57.raw() : 0) | (pse ? x86::cr4::pse.raw() : 0)};
    const x86::efer efer{(lma ? (x86::efer::lme | x86::efer::lma).raw() : 0) | (nxe ? x86::efer::nxe.raw() : 0)};
    const unsigned want = !pg ? 0 : !pae ? 2 : !lma ? 3 : !la57 ? 4 : 5;  // 0: paging off, 3: PAE
    ++seen[want == 0 ? 0 : want - 1];
    const auto got = paging::with_npt_walker(ncr3, cr0, cr4, efer, props, [](const auto& w) {
      using F = typename std::decay_t<decltype(w)>::format_type;
      const unsigned kind = F::mode == x86::paging_mode::pae ? 3u : unsigned{F::levels};
      return std::array<std::uint64_t, 3>{kind, w.nx() ? 1u : 0u, w.root().value()};
    });
    if (want == 0) {
      ASSERT_FALSE(got) << c;
      EXPECT_EQ(got.error(), paging::npt_host_error::host_paging_off);
      EXPECT_EQ(paging::make_npt_walker<paging::format::ia32>(ncr3, cr0, cr4, efer, props).error(),
                paging::npt_host_error::host_paging_off);
      continue;
    }
    ASSERT_TRUE(got) << c;
    EXPECT_EQ((*got)[0], want) << c;
    EXPECT_EQ((*got)[1], nxe && want != 2 ? 1u : 0u) << c;
    const std::uint64_t root = want == 2 ? 0xffff'f000u : want == 3 ? 0xffff'ffe0u : 0xff'ffff'f000u;
    EXPECT_EQ((*got)[2], root) << c;
    EXPECT_EQ(paging::make_npt_walker<paging::format::ia32>(ncr3, cr0, cr4, efer, props).has_value(), want == 2);
    EXPECT_EQ(paging::make_npt_walker<paging::format::pae>(ncr3, cr0, cr4, efer, props).has_value(), want == 3);
    EXPECT_EQ(paging::make_npt_walker<paging::format::ia32e<4>>(ncr3, cr0, cr4, efer, props).has_value(), want == 4);
    EXPECT_EQ(paging::make_npt_walker<paging::format::ia32e<5>>(ncr3, cr0, cr4, efer, props).has_value(), want == 5);
    if (want == 3) {
      EXPECT_EQ(paging::make_npt_walker<paging::format::ia32e<4>>(ncr3, cr0, cr4, efer, props).error(),
                paging::npt_host_error::format_mismatch);
    }
  }
  // Paging off with PAE, LA57, NXE and PSE free; 32-bit and PAE with LA57, NXE, PSE free;
  // 4- and 5-level with NXE and PSE free.
  EXPECT_EQ(seen[0], 16u);
  EXPECT_EQ(seen[1], 8u);
  EXPECT_EQ(seen[2], 8u);
  EXPECT_EQ(seen[3], 4u);
  EXPECT_EQ(seen[4], 4u);
}

}  // namespace

namespace {

// ---- 25.14: the default ept_capabilities is one documented thing --------------------------

// Every IA32_VMX_EPT_VPID_CAP bit the struct describes (SDM A.10: bit 0 execute-only, 6 and 7
// the walk lengths, 8 and 14 the EPTP memory types, 16 and 17 the page sizes, 21 A/D, 23
// supervisor shadow-stack control) is 1 by default; the VM-execution control (MBEC) is 0.
TEST(EptCapabilities, DefaultIsEveryCapabilityAndNoControl) {
  constexpr paging::ept_capabilities c{};
  static_assert(c.maxphyaddr == 52 && c.execute_only && c.walk4 && c.walk5 && c.eptp_uc && c.eptp_wb && c.page_2m &&
                c.page_1g && c.ad && c.supervisor_shadow_stack);
  static_assert(!c.mbec);
  // The same as decoding an MSR with every one of those bits set.
  constexpr std::uint64_t all_bits = 1u | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 14) | (1u << 16) | (1u << 17) |
                                     (1u << 21) | (1u << 23);
  static_assert(all_bits == 0xa3'41c1u);
  // An execute-only leaf and EPTP bit 7 are accepted without setting anything.
  image m;
  ept_tables(m, X | WB);
  const auto w = paging::ept_walker::make(
      paging::ept_pointer{paging::make_ept_pointer(x86::hpa{0x10000}, 4, false).raw() | 0x80u}, {});
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->check(m.view(), {x86::gpa{gpa4}, paging::ept_access::fetch}));
}

}  // namespace

namespace {

// ---- 25.13: an optional record of a walk's A/D writes ------------------------------------

// SDM 4.8: the processor sets A in every paging-structure entry used and D in the entry that
// maps the page of a write; SDM 29.3.5: with EPT A/D, the EPT entries used get A, and the
// leaf of a write (guest paging-structure accesses are writes) gets D.
TEST(AdRecord, NestedWalkRecordsEveryAdWrite) {
  npt_setup s;  // guest entries lack A except where set; NPT entries have no A at the upper levels
  s.m.put64(0x21000, 0x2000 | P | RW | US);      // guest PML4E: A clear
  s.m.put64(0x24000, 0x7000 | P | RW | US | A);  // guest PTE: D clear
  const auto mmu = mmu_4level(0x1000);
  const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(
      paging::walker_4level(mmu, {}), paging::npt_walker_4level(x86::hpa{0x10000}, {}, {}));
  auto mem = s.m.mem();
  paging::ad_recorder rec(mem);
  const auto r = n.walk(rec, mmu, {x86::gva{0x123}, x86::pfec::write});
  ASSERT_TRUE(r);
  const auto& log = rec.log();
  // Guest: A on the PML4E (at L1 0x21000) and D on the PTE (L1 0x24000).
  bool pml4e = false, pte = false, npt_root = false;
  for (unsigned i = 0; i < log.count; ++i) {
    const auto& w = log.items[i];
    EXPECT_EQ(w.width, 8);
    EXPECT_EQ(w.new_value & ~w.old_value & ~(A | D), 0u);  // only A/D bits are ever set
    if (w.address.value() == 0x21000) pml4e = w.old_value == (0x2000 | P | RW | US) && w.new_value == (w.old_value | A);
    if (w.address.value() == 0x24000) pte = w.old_value == (0x7000 | P | RW | US | A) && w.new_value == (w.old_value | D);
    if (w.address.value() == 0x10000) npt_root = w.new_value == (w.old_value | A);
  }
  EXPECT_TRUE(pml4e);
  EXPECT_TRUE(pte);
  EXPECT_TRUE(npt_root);  // the NPT PML4E gets A (APM 15.25.5: A/D in the nested tables)
  EXPECT_FALSE(log.overflow);
  // A second walk writes nothing.
  rec.clear();
  ASSERT_TRUE(n.walk(rec, mmu, {x86::gva{0x123}, x86::pfec::write}));
  EXPECT_EQ(rec.log().count, 0u);
}

// 32-bit paging (SDM 4.3): 4-byte entries, so each A/D write is a 4-byte compare-exchange;
// A in the PDE and the PTE, D in the PTE for a write (SDM 4.8).
TEST(AdRecord, ThirtyTwoBitWalkRecordsFourByteWrites) {
  image m;
  m.put32(0x1000 + 1 * 4, 0x2000 | P | RW);  // PDE 1: A clear
  m.put32(0x2000 + 1 * 4, 0x9000 | P | RW);  // PTE 1: A and D clear
  auto mem = m.mem();
  paging::ad_recorder rec(mem);
  const auto mmu = mmu_32bit(0x1000);
  const auto r = paging::walker_32bit(mmu, {}).walk(rec, mmu, {x86::gva{0x0040'1abc}, x86::pfec::write});
  ASSERT_TRUE(r);
  const auto& log = rec.log();
  ASSERT_EQ(log.count, 2u);
  EXPECT_FALSE(log.overflow);
  EXPECT_EQ(log.items[0].address.value(), 0x1004u);
  EXPECT_EQ(log.items[0].width, 4);
  EXPECT_EQ(log.items[0].old_value, 0x2000 | P | RW);
  EXPECT_EQ(log.items[0].new_value, 0x2000 | P | RW | A);
  EXPECT_EQ(log.items[1].address.value(), 0x2004u);
  EXPECT_EQ(log.items[1].width, 4);
  EXPECT_EQ(log.items[1].old_value, 0x9000 | P | RW);
  EXPECT_EQ(log.items[1].new_value, 0x9000 | P | RW | A | D);
  EXPECT_EQ(m.view().read32(x86::gpa{0x2004}).value(), 0x9000 | P | RW | A | D);
  // A compare-exchange that loses (the entry is not what the caller expected) is not recorded.
  rec.clear();
  const auto lost = rec.cmpxchg32(x86::gpa{0x2004}, 0x9000 | P | RW, 0x9000 | P | RW | A);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(*lost);
  EXPECT_EQ(rec.log().count, 0u);
}

// The log holds 40 writes (a walk makes at most 5 guest + 5 x 6 second-stage ones); more are
// dropped and flagged, the first 40 kept.
TEST(AdRecord, LogOverflowKeepsTheFirstWrites) {
  paging::ad_log log;
  for (unsigned i = 0; i < 41; ++i) log.add({x86::gpa{0x1000u + 8 * i}, 8, i, i | A});
  EXPECT_EQ(log.count, 40u);
  EXPECT_TRUE(log.overflow);
  EXPECT_EQ(log.items[39].address.value(), 0x1000u + 8 * 39);
  log.clear();
  EXPECT_EQ(log.count, 0u);
  EXPECT_FALSE(log.overflow);
}

}  // namespace

namespace {

// ---- A/D updates of the nested tables and of the guest's tables through NPT, when the
// compare-exchange does not succeed ---------------------------------------------------------
// APM 15.25.5: the processor sets A in the nested entries used and D in the nested leaf of a
// write; SDM 4.8 / APM 5.4.2 the same for the guest's own entries. The walkers' contract
// (paging/walker.hpp): the A/D writes are compare-exchanges; when an entry changed in between
// the walk is redone, at most max_ad_retries times, then retry_exhausted; memory that refuses
// the write is an unbacked fault; nothing is written by a walk that faults.
using test_support::racing_memory;  // racing_memory.hpp

// What a walk over racing_memory that refuses or loses every compare-exchange returns: an
// unbacked fault at the first one, which names the second stage (the memory of the NPT
// tables; a nested walk's unbacked faults of its own, paging/nested.hpp), or
// retry_exhausted after max_ad_retries attempts.
template <class Result>
void expect_refused_or_exhausted(const Result& r, const racing_memory& mem) {
  ASSERT_FALSE(r);
  const bool refused = mem.mode == racing_memory::how::refuse;
  EXPECT_EQ(r.error().kind, refused ? fault_kind::unbacked : fault_kind::retry_exhausted);
  if (refused) {
    EXPECT_EQ(r.error().stage, paging::walk_stage::npt);
  }
  EXPECT_EQ(mem.cas, refused ? 1u : paging::max_ad_retries);
}

// npt_setup's nested walk of gva 0x123 (a read) over `mem`.
paging::nested_result nested_npt_walk(racing_memory& mem) {
  const auto mmu = mmu_4level(0x1000);
  const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(
      paging::walker_4level(mmu, {}), paging::npt_walker_4level(x86::hpa{0x10000}, {}, {}));
  return n.walk(mem, mmu, {x86::gva{0x123}, {}});
}

// NPT 4-level at 0x10000 (PML4) .. 0x13000 (PT): gpa 0x5000 -> 0x25000, no A/D anywhere.
void npt_tables(image& m) {
  m.put64(0x10000, 0x11000 | P | RW | US);
  m.put64(0x11000, 0x12000 | P | RW | US);
  m.put64(0x12000, 0x13000 | P | RW | US);
  m.put64(0x13000 + 8 * 5, 0x25000 | P | RW | US);
}

TEST(NptAdUpdate, RefusedRacedExhaustedOrVanished) {
  const paging::npt_walker_4level npt(x86::hpa{0x10000}, {}, {});
  for (auto mode : {racing_memory::how::refuse, racing_memory::how::lose, racing_memory::how::other_agent,
                    racing_memory::how::vanish}) {
    image m;
    npt_tables(m);
    racing_memory mem{m.mem(), mode};
    paging::ept_request req{};
    req.address = x86::gpa{0x5abc};
    req.access = paging::ept_access::write;
    const auto r = npt.walk(mem, req);
    switch (mode) {
      case racing_memory::how::refuse:
      case racing_memory::how::lose:
        expect_refused_or_exhausted(r, mem);
        if (!r) {
          EXPECT_EQ(r.error().stage, paging::walk_stage::npt);  // the NPT walk's own
        }
        break;
      case racing_memory::how::other_agent:
        ASSERT_TRUE(r);
        EXPECT_EQ(r->address.value(), 0x25abcu);
        EXPECT_EQ(m.get64(0x10000) & (A | D), A);
        EXPECT_EQ(m.get64(0x13000 + 8 * 5) & (A | D), A | D);
        break;
      case racing_memory::how::vanish:
        // The re-walk finds the PML4E not present: a #NPF on it (APM 15.25.6: P = 0).
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error().kind, fault_kind::not_present);
        EXPECT_EQ(r.error().level, 4);
        EXPECT_EQ(mem.cas, 1u);
        break;
    }
    if (mode != racing_memory::how::other_agent && mode != racing_memory::how::vanish) {
      for (uint64_t at : {0x10000u, 0x11000u, 0x12000u, 0x13000u + 8 * 5})
        EXPECT_EQ(m.get64(at) & (A | D), 0u) << std::hex << at;
    }
  }
}

// A nested walk's A/D updates over racing_memory, in the guest's entries or in the nested
// ones: the same three answers as above, and nothing written unless the walk succeeds.
// `guest`: the guest PML4E (0x21000) lacks A and the nested entries all have A and D (SDM
// 4.8 / APM 5.4.2: the guest's own A/D through NPT). Otherwise npt_setup as it is: its NPT
// PML4E, PDPTE and PDE (0x10000, 0x11000, 0x12000) lack A and translate every guest table
// and the final address (APM 15.25.5: the nested entries' A), the guest's entries have it.
void nested_ad_case(bool guest) {
  const std::vector<uint64_t> without_a = guest ? std::vector<uint64_t>{0x21000} : std::vector<uint64_t>{0x10000, 0x11000, 0x12000};
  for (auto mode : {racing_memory::how::refuse, racing_memory::how::lose, racing_memory::how::other_agent}) {
    npt_setup s;
    if (guest) {
      for (uint64_t at : {0x10000u, 0x11000u, 0x12000u}) s.m.put64(at, s.m.get64(at) | A | D);
      s.m.put64(0x21000, 0x2000 | P | RW | US);
    }
    racing_memory mem{s.m.mem(), mode};
    const auto r = nested_npt_walk(mem);
    const bool ok = mode == racing_memory::how::other_agent;
    if (ok) {
      ASSERT_TRUE(r);
      EXPECT_EQ(r->l1_address().value(), 0x27123u);
    } else {
      expect_refused_or_exhausted(r, mem);
    }
    for (uint64_t at : without_a) EXPECT_EQ(s.m.get64(at) & A, ok ? A : 0u) << std::hex << at;
  }
}

TEST(NestedAdUpdate, GuestEntriesRefusedRacedOrExhausted) { nested_ad_case(true); }
TEST(NestedAdUpdate, NestedEntriesRefusedRacedOrExhausted) { nested_ad_case(false); }

// ---- 23.13: the guest walker's A/D path returns the re-walk's translation --------------------
// SDM 4.8: the A and D flags are set by a locked read-modify-write; hvkit's walker does it by
// compare-exchange and, when an entry changed in between, walks again (paging/walker.hpp).
// The walk keeps its output address in a register up to one store after the A/D path joins,
// so the address must be the one of the re-walk: here another agent remaps the PTE (to a new
// page, A and D set) between the first walk and its A update of the PML4E.
struct remapping_memory {
  paging::flat_memory inner;
  x86::gpa pte_at{};
  uint64_t new_pte = 0;
  unsigned cas = 0;
  [[nodiscard]] hvkit::result<std::uint32_t, paging::memory_error> read32(x86::gpa a) const { return inner.read32(a); }
  [[nodiscard]] hvkit::result<std::uint64_t, paging::memory_error> read64(x86::gpa a) const { return inner.read64(a); }
  hvkit::result<bool, paging::memory_error> cmpxchg32(x86::gpa a, std::uint32_t e, std::uint32_t d) {
    return cmpxchg64(a, e, d);
  }
  hvkit::result<bool, paging::memory_error> cmpxchg64(x86::gpa a, std::uint64_t e, std::uint64_t d) {
    if (++cas == 1) {  // the first A update loses: the PTE was rewritten by another CPU
      static_cast<void>(inner.cmpxchg64(pte_at, inner.read64(pte_at).value(), new_pte));
      return false;
    }
    return inner.cmpxchg64(a, e, d);
  }
};
static_assert(paging::writable_guest_memory<remapping_memory>);

TEST(GuestAdUpdate, ARewalkAfterARemapReturnsTheNewPage) {
  image m;
  m.put64(0x1000, 0x2000 | P | RW | US);      // PML4E without A: the walk must set it
  m.put64(0x2000, 0x3000 | P | RW | US | A);  // PDPTE
  m.put64(0x3000, 0x4000 | P | RW | US | A);  // PDE
  m.put64(0x4000, 0x9000 | P | RW | US | A);  // PTE: linear 0x123 -> 0x9123 at first
  const auto mmu = mmu_4level(0x1000);
  const paging::walker_4level w(mmu, {});
  remapping_memory mem{m.mem(), x86::gpa{0x4000}, 0xa000 | P | RW | US | A | D};
  const auto r = w.walk(mem, mmu, {x86::gva{0x123}, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->address.value(), 0xa123u);  // the re-walk's page, not 0x9123
  EXPECT_EQ(r->path.values[3], 0xa000 | P | RW | US | A | D);
  EXPECT_EQ(mem.cas, 2u);
  EXPECT_EQ(m.get64(0x1000) & (A | D), A);  // A set on the second try (no D: a read)
  // Without the race the same walk returns the first page.
  image m2;
  m2.put64(0x1000, 0x2000 | P | RW | US);
  m2.put64(0x2000, 0x3000 | P | RW | US | A);
  m2.put64(0x3000, 0x4000 | P | RW | US | A);
  m2.put64(0x4000, 0x9000 | P | RW | US | A);
  auto mem2 = m2.mem();
  const auto r2 = w.walk(mem2, mmu, {x86::gva{0x123}, {}});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->address.value(), 0x9123u);
}

}  // namespace
