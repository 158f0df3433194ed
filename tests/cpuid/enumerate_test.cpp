// SPDX-License-Identifier: MIT
// cpuid::read_all over synthetic processors whose every answer is known: the leaves and
// subleaves it must read are listed by hand from the SDM's description of each leaf (Vol. 2A,
// CPUID): leaf 04H and 8000001DH "until cache type (EAX[4:0]) is 0" ("0 = Null - No more
// caches"); leaves 07H, 14H, 17H, 18H, 1DH and 20H report their highest subleaf in EAX of
// subleaf 0; leaves 0BH and 1FH end at the first level type (ECX[15:8]) 0 ("invalid");
// leaf 0DH has subleaf 1 and one subleaf per component set in XCR0's (EDX:EAX of subleaf 0)
// or IA32_XSS's (EDX:ECX of subleaf 1) supported bits (Vol. 1, 13.2). The tests compare the
// whole table with the list, and with every capacity that fills up at a different place,
// the table with the list's prefix and the error `full`.
#include <gtest/gtest.h>

#include <hvkit/cpuid/host.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cpuid = hvkit::cpuid;
using cpuid::regs;

namespace {

struct key {
  std::uint32_t leaf, subleaf;
  friend bool operator==(const key&, const key&) = default;
};

// Every answer not listed below: EAX 0 (no further subleaf, cache type null) and a value that
// names the query, so a table entry can be checked against the query that produced it.
constexpr regs named(std::uint32_t leaf, std::uint32_t subleaf) { return {0, 0x5a000000u ^ leaf, subleaf, 0x1234u}; }

// Processor A: basic leaves up to 20H, a hypervisor at 40000000H (the base at 40000100H
// answers a signature outside its range), extended leaves up to 8000001DH.
struct processor_a {
  mutable std::uint32_t highest_subleaf_asked = 0;
  regs operator()(std::uint32_t leaf, std::uint32_t subleaf) const noexcept {
    if (subleaf > highest_subleaf_asked) highest_subleaf_asked = subleaf;
    switch (leaf) {
      case 0x0: return {0x20, 0, 0, 0};
      case 0x1: return {0x000906ea, 0, 0x80000000u, 0};  // ECX[31]: hypervisor present
      case 0x4: return {subleaf < 3 ? 0x121u + subleaf : 0u, subleaf, 0, 0};  // 3 caches, then type 0
      case 0x7: return {subleaf == 0 ? 2u : 0x77u, subleaf, 0, 0};             // highest subleaf 2
      case 0xb: return {0, 0, subleaf, 0};                    // level type 0 already at subleaf 0
      case 0xd:
        if (subleaf == 0) return {0xe7u, 0x340, 0, 0};       // XCR0: 0-2, 5-7 (x87..AVX-512)
        if (subleaf == 1) return {0xf, 0, (1u << 8) | (1u << 12), 0};  // IA32_XSS: 8 (PT), 12 (CET_S)
        return named(leaf, subleaf);
      case 0x14: return {subleaf == 0 ? 0xffffffffu : 0u, subleaf, 0, 0};  // a bogus highest subleaf
      case 0x1d: return {subleaf == 0 ? 1u : 0u, subleaf, 0, 0};
      case 0x1f: return {0, 0, subleaf < 3 ? ((subleaf + 1) << 8) | subleaf : subleaf, 0};  // 3 levels
      case 0x40000000: return {0x40000001u, 0x4b4d564b, 0, 0};
      case 0x40000100: return {0x40000000u, 0, 0, 0};  // below its base: not a signature
      case 0x80000000: return {0x8000001du, 0, 0, 0};
      case 0x8000001d: return {0x21u, subleaf, 0, 0};  // never reports cache type 0
      default: return named(leaf, subleaf);
    }
  }
};

// The (leaf, subleaf) list of processor A, in the SDM's terms (see the file comment).
std::vector<key> list_a() {
  std::vector<key> k;
  for (std::uint32_t leaf = 0; leaf <= 0x20; ++leaf) {
    k.push_back({leaf, 0});
    if (leaf == 0x4) k.insert(k.end(), {{4, 1}, {4, 2}});
    if (leaf == 0x7) k.insert(k.end(), {{7, 1}, {7, 2}});
    if (leaf == 0xd) k.insert(k.end(), {{0xd, 1}, {0xd, 2}, {0xd, 5}, {0xd, 6}, {0xd, 7}, {0xd, 8}, {0xd, 12}});
    if (leaf == 0x14)  // EAX = FFFFFFFFH: read up to the enumeration guard of 64 subleaves
      for (std::uint32_t s = 1; s < 64; ++s) k.push_back({0x14, s});
    if (leaf == 0x1d) k.push_back({0x1d, 1});
    if (leaf == 0x1f) k.insert(k.end(), {{0x1f, 1}, {0x1f, 2}});
  }
  k.insert(k.end(), {{0x40000000, 0}, {0x40000001, 0}});
  for (std::uint32_t leaf = 0x80000000; leaf <= 0x8000001d; ++leaf) k.push_back({leaf, 0});
  for (std::uint32_t s = 1; s < 64; ++s) k.push_back({0x8000001d, s});  // never type 0: the guard
  return k;
}

template <std::size_t N, class Source>
void expect_table_is(const cpuid::table<N>& t, const Source& src, const std::vector<key>& want) {
  ASSERT_EQ(t.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(t[i].leaf, want[i].leaf) << i;
    EXPECT_EQ(t[i].subleaf, want[i].subleaf) << i;
    const regs r = src(want[i].leaf, want[i].subleaf);
    EXPECT_TRUE(t[i].value.eax == r.eax && t[i].value.ebx == r.ebx && t[i].value.ecx == r.ecx &&
                t[i].value.edx == r.edx)
        << std::hex << want[i].leaf << "." << want[i].subleaf;
  }
}

// The index in `want` of (leaf, subleaf).
std::size_t index_of(const std::vector<key>& want, key k) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] == k) return i;
  ADD_FAILURE() << "not in the list";
  return 0;
}

// With capacity N the table fills up: read_all reports `full` and holds the first N entries
// of the list (the enumeration goes in (leaf, subleaf) order, the table's sort order).
template <std::size_t N, class Source>
void expect_full_at(const Source& src, const std::vector<key>& want) {
  cpuid::table<N> t;
  const auto r = cpuid::read_all(src, t);
  ASSERT_FALSE(r) << N;
  EXPECT_EQ(r.error(), cpuid::table_error::full);
  expect_table_is(t, src, std::vector<key>(want.begin(), want.begin() + N));
}

}  // namespace

TEST(cpuid_enumerate, processor_a_every_leaf_and_subleaf) {
  const processor_a src;
  cpuid::table<256> t;
  ASSERT_TRUE(cpuid::read_all(src, t));
  expect_table_is(t, src, list_a());
  EXPECT_EQ(src.highest_subleaf_asked, 63u);  // the guard: subleaf 64 is never asked
  // A second read starts from an empty table.
  ASSERT_TRUE(cpuid::read_all(src, t));
  EXPECT_EQ(t.size(), list_a().size());
}

TEST(cpuid_enumerate, processor_a_table_full_at_every_kind_of_leaf) {
  const processor_a src;
  const std::vector<key> want = list_a();
  // The places where the list moves to another rule of the enumeration: each capacity below
  // fills the table at the first entry of one rule.
  EXPECT_EQ(index_of(want, {0x2, 0}), 2u);
  EXPECT_EQ(index_of(want, {0x4, 1}), 5u);
  EXPECT_EQ(index_of(want, {0x7, 1}), 10u);
  EXPECT_EQ(index_of(want, {0xd, 1}), 18u);
  EXPECT_EQ(index_of(want, {0xd, 2}), 19u);
  EXPECT_EQ(index_of(want, {0x14, 1}), 32u);
  EXPECT_EQ(index_of(want, {0x1f, 1}), 107u);
  EXPECT_EQ(index_of(want, {0x40000000, 0}), 110u);
  EXPECT_EQ(index_of(want, {0x80000000, 0}), 112u);
  EXPECT_EQ(index_of(want, {0x8000001d, 1}), 142u);
  expect_full_at<2>(src, want);    // leaf 2, subleaf 0
  expect_full_at<5>(src, want);    // leaf 4's cache list
  expect_full_at<10>(src, want);   // leaf 7's subleaves
  expect_full_at<18>(src, want);   // leaf 0DH subleaf 1
  expect_full_at<19>(src, want);   // leaf 0DH's components
  expect_full_at<32>(src, want);   // leaf 14H's subleaves
  expect_full_at<107>(src, want);  // leaf 1FH's levels
  expect_full_at<110>(src, want);  // the hypervisor leaves
  expect_full_at<112>(src, want);  // the extended leaves
  expect_full_at<142>(src, want);  // leaf 8000001DH's cache list
}

// Processor B: a bogus maximum basic leaf (above the basic range) read as FFH, no hypervisor,
// and a maximum extended leaf outside 80000000H-800000FFH: no extended leaf is read.
TEST(cpuid_enumerate, processor_b_clamped_basic_range_no_extended) {
  for (const std::uint32_t max_ext : {0x90000000u, 0x7fffffffu}) {
    std::uint32_t highest_leaf_asked = 0;
    const auto src = [&](std::uint32_t leaf, std::uint32_t subleaf) -> regs {
      if (leaf < 0x40000000u && leaf > highest_leaf_asked) highest_leaf_asked = leaf;
      if (leaf == 0) return {0x1234u, 0, 0, 0};
      if (leaf == 0x80000000u) return {max_ext, 0, 0, 0};
      if (leaf == 0x40000000u) return {0x40000001u, 0, 0, 0};  // never read: CPUID.1:ECX[31] = 0
      if (leaf == 0x4 || leaf == 0x7 || leaf == 0xb || leaf == 0xd) return {0, 0, 0, 0};
      return named(leaf, subleaf);
    };
    std::vector<key> want;
    for (std::uint32_t leaf = 0; leaf <= 0xff; ++leaf) {
      want.push_back({leaf, 0});
      if (leaf == 0xd) want.push_back({0xd, 1});  // subleaf 1 even with no component
    }
    cpuid::table<320> t;
    ASSERT_TRUE(cpuid::read_all(src, t));
    expect_table_is(t, src, want);
    EXPECT_EQ(highest_leaf_asked, 0xffu);
  }
}

// Maximum basic leaf 0: leaf 1 is not read, so CPUID.1:ECX[31] cannot announce a hypervisor.
TEST(cpuid_enumerate, leaf_1_absent_no_hypervisor_leaves) {
  const auto src = [](std::uint32_t leaf, std::uint32_t subleaf) -> regs {
    if (leaf == 0) return {0, 0, 0, 0};
    if (leaf == 1) return {0, 0, 0x80000000u, 0};
    if (leaf == 0x40000000u) return {0x40000000u, 0, 0, 0};
    if (leaf == 0x40000100u) return {0x40000100u, 0, 0, 0};
    if (leaf == 0x80000000u) return {0x80000000u, 0, 0, 0};
    return named(leaf, subleaf);
  };
  cpuid::table<8> t;
  ASSERT_TRUE(cpuid::read_all(src, t));
  expect_table_is(t, src, {{0, 0}, {0x80000000u, 0}});
}

// Both hypervisor bases, one above its range (base + FFH is the last leaf of a base).
TEST(cpuid_enumerate, hypervisor_bases) {
  const auto src = [](std::uint32_t leaf, std::uint32_t subleaf) -> regs {
    if (leaf == 0) return {1, 0, 0, 0};
    if (leaf == 1) return {0, 0, 0x80000000u, 0};
    if (leaf == 0x40000000u) return {0x40000100u, 0, 0, 0};  // above 400000FFH: not a signature
    if (leaf == 0x40000100u) return {0x40000102u, 0, 0, 0};
    if (leaf == 0x80000000u) return {0, 0, 0, 0};
    return named(leaf, subleaf);
  };
  cpuid::table<16> t;
  ASSERT_TRUE(cpuid::read_all(src, t));
  expect_table_is(t, src, {{0, 0}, {1, 0}, {0x40000100u, 0}, {0x40000101u, 0}, {0x40000102u, 0}});
}
