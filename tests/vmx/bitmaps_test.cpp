// SPDX-License-Identifier: MIT
// MSR bitmap (SDM 25.6.9, 26.1.3), I/O bitmaps (25.6.4, 26.1.3) and the EPT entry builders
// (29.3.3.1, 25.6.11) against rule models written in this file.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <random>

#include <hvkit/vmx/ept_entry.hpp>
#include <hvkit/vmx/io_bitmap.hpp>
#include <hvkit/vmx/msr_bitmap.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
using mt_t = hvkit::paging::ept_memory_type;

TEST(vmx_msr_bitmap, quadrant_layout) {
  // Hand-computed: MSR 0x10 read -> byte 2 bit 0; write -> byte 2050 bit 0;
  // MSR 0xC0000082 read -> byte 1024 + 0x82/8 = 1040 bit 2; write -> 3088 bit 2.
  HVKIT_BOTH(vmx::msr_bitmap::bit_index(0x10, vmx::msr_access::read).value() == 2 * 8 + 0);
  HVKIT_BOTH(vmx::msr_bitmap::bit_index(0x10, vmx::msr_access::write).value() == 2050 * 8 + 0);
  HVKIT_BOTH(vmx::msr_bitmap::bit_index(0xc000'0082, vmx::msr_access::read).value() == 1040 * 8 + 2);
  HVKIT_BOTH(vmx::msr_bitmap::bit_index(0xc000'0082, vmx::msr_access::write).value() == 3088 * 8 + 2);
  HVKIT_BOTH(vmx::msr_bitmap::bit_index(0x1fff, vmx::msr_access::write).value() == 3071 * 8 + 7);
  HVKIT_BOTH(!vmx::msr_bitmap::bit_index(0x2000, vmx::msr_access::read).has_value());
  auto b = vmx::msr_bitmap::none_exit();
  ASSERT_TRUE(b.set_intercept(0xc000'0082, vmx::msr_access::write, true));
  EXPECT_EQ(b.bytes()[3088], 0x04);
  EXPECT_FALSE(b.set_intercept(0x4000'0000, vmx::msr_access::read, true));  // Hyper-V range: not describable
}

// pass_through(msr) clears both the read and the write bit (SDM 25.6.9: read bitmap for low
// MSRs at bytes 0-1023, for high MSRs at 1024-2047; write bitmaps at 2048-3071 and 3072-4095)
// and nothing else; an MSR outside both ranges is refused and changes nothing.
TEST(vmx_msr_bitmap, pass_through_clears_read_and_write) {
  auto b = vmx::msr_bitmap::all_exit();
  ASSERT_TRUE(b.pass_through(0x10));             // IA32_TIME_STAMP_COUNTER
  ASSERT_TRUE(b.pass_through(0xc000'0082));      // IA32_LSTAR
  EXPECT_EQ(b.bytes()[2], 0xfe);                 // read, low: 0x10 -> byte 2 bit 0
  EXPECT_EQ(b.bytes()[2050], 0xfe);              // write, low
  EXPECT_EQ(b.bytes()[1040], 0xfb);              // read, high: 0x82 -> byte 1024 + 16 bit 2
  EXPECT_EQ(b.bytes()[3088], 0xfb);              // write, high
  std::size_t cleared = 0;
  for (std::size_t i = 0; i < vmx::msr_bitmap::size; ++i) cleared += 8 - static_cast<unsigned>(std::popcount(unsigned{b.bytes()[i]}));
  EXPECT_EQ(cleared, 4u);
  EXPECT_FALSE(b.exits(0x10, vmx::msr_access::read));
  EXPECT_FALSE(b.exits(0xc000'0082, vmx::msr_access::write));
  const auto before = b;
  const auto r = b.pass_through(0x4000'0000);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().msr, 0x4000'0000u);
  EXPECT_TRUE(b.bytes() == before.bytes());
}

TEST(vmx_msr_bitmap, boundaries_against_rule_model) {
  auto in_range = [](std::uint32_t m) { return m <= 0x1fff || (m >= 0xc000'0000 && m <= 0xc000'1fff); };
  const std::uint32_t edges[] = {0x0, 0x1, 0x1ffe, 0x1fff, 0x2000, 0x2001, 0xbfff'ffff, 0xc000'0000, 0xc000'0001,
                                 0xc000'1ffe, 0xc000'1fff, 0xc000'2000, 0xffff'ffff, 0x4000'0000, 0xc001'0114};
  std::size_t n = 0;
  // none_exit: only out-of-range MSRs exit; all_exit: everything exits.
  const auto none = vmx::msr_bitmap::none_exit();
  const auto all = vmx::msr_bitmap::all_exit();
  for (auto m : edges)
    for (auto a : {vmx::msr_access::read, vmx::msr_access::write}) {
      EXPECT_EQ(none.exits(m, a), !in_range(m)) << std::hex << m;
      EXPECT_TRUE(all.exits(m, a));
      n += 2;
    }
  // Random interception sets against a model of (msr, access) pairs.
  std::mt19937 rng(5);
  for (int round = 0; round < 20; ++round) {
    auto b = vmx::msr_bitmap::none_exit();
    std::uint32_t chosen[32];
    bool chosen_write[32];
    for (int i = 0; i < 32; ++i) {
      chosen[i] = (rng() & 1 ? 0xc000'0000u : 0u) | (rng() & 0x1fffu);
      chosen_write[i] = rng() & 1;
      ASSERT_TRUE(b.set_intercept(chosen[i], chosen_write[i] ? vmx::msr_access::write : vmx::msr_access::read, true));
    }
    for (std::uint32_t base : {0u, 0xc000'0000u})
      for (std::uint32_t i = 0; i < 0x2000; ++i)
        for (bool w : {false, true}) {
          bool model = false;
          for (int k = 0; k < 32; ++k) model |= chosen[k] == base + i && chosen_write[k] == w;
          EXPECT_EQ(b.exits(base + i, w ? vmx::msr_access::write : vmx::msr_access::read), model);
          ++n;
        }
  }
  std::printf("compared %zu MSR-bitmap exit decisions with the rule model\n", n);
}

TEST(vmx_io_bitmap, every_port_and_size_against_rule_model) {
  std::mt19937 rng(7);
  auto b = vmx::io_bitmaps::none_exit();
  bool model[0x10000] = {};
  for (int i = 0; i < 300; ++i) {
    const auto p = static_cast<std::uint16_t>(rng());
    b.set_intercept(p, true);
    model[p] = true;
  }
  // The bitmap A/B boundary and the top port.
  for (unsigned p : {0x7fffu, 0x8000u, 0xfffeu}) {
    b.set_intercept(static_cast<std::uint16_t>(p), true);
    model[p] = true;
  }
  std::size_t n = 0;
  for (std::uint32_t p = 0; p <= 0xffff; ++p)
    for (unsigned size : {1u, 2u, 4u}) {
      bool expect = p + size - 1 > 0xffff;  // wraps around the port space: always exits
      for (unsigned i = 0; i < size && p + i <= 0xffff; ++i) expect |= model[p + i];
      EXPECT_EQ(b.exits(static_cast<std::uint16_t>(p), size), expect) << p << " " << size;
      ++n;
    }
  // Port 0x7fff is bit 0x7fff of A (byte 0xfff, bit 7); 0x8000 is bit 0 of B.
  EXPECT_EQ(b.a()[0xfff] & 0x80, 0x80);
  EXPECT_EQ(b.b()[0] & 0x01, 0x01);
  // Port 0xffff with size 1 does not wrap; with size 2 it does.
  auto clear = vmx::io_bitmaps::none_exit();
  EXPECT_FALSE(clear.exits(0xffff, 1));
  EXPECT_TRUE(clear.exits(0xffff, 2));
  EXPECT_TRUE(clear.exits(0xfffd, 4));
  EXPECT_FALSE(clear.exits(0xfffc, 4));
  std::printf("compared %zu I/O exit decisions (every port, sizes 1/2/4) with the rule model\n", n);
}

TEST(vmx_ept_entry, leaf_builder_against_misconfiguration_rules) {
  std::size_t n = 0, refused = 0;
  for (std::uint64_t cap_xo : {0ull, 1ull})
    for (std::uint64_t cap_large : {0ull, (1ull << 16) | (1ull << 17)})
      for (unsigned rwx = 0; rwx < 8; ++rwx)
        for (unsigned mt = 0; mt < 8; ++mt)
          for (unsigned lvl = 1; lvl <= 5; ++lvl) {
            const auto caps = vmx::ept_capabilities_from(cap_xo | cap_large);
            const vmx::ept_permissions p{(rwx & 1) != 0, (rwx & 2) != 0, (rwx & 4) != 0, false};
            auto r = vmx::make_ept_leaf(x86::hpa{0x4000'0000}, static_cast<vmx::ept_level>(lvl), p,
                                        static_cast<mt_t>(mt), caps);
            // The rules of SDM 29.3.3.1, written here.
            const bool w_no_r = (rwx & 3) == 2;
            const bool xo_bad = rwx == 4 && !cap_xo;
            const bool mt_bad = mt == 2 || mt == 3 || mt == 7;
            const bool level_bad = lvl >= 4 || (lvl >= 2 && !cap_large);
            const bool ok = !w_no_r && !xo_bad && !mt_bad && !level_bad;
            EXPECT_EQ(r.has_value(), ok) << rwx << " " << mt << " " << lvl;
            if (ok) {
              const std::uint64_t expect = 0x4000'0000ull | rwx | (std::uint64_t{mt} << 3) | (lvl > 1 ? 0x80 : 0);
              EXPECT_EQ(r.value().raw(), expect);
              EXPECT_TRUE(vmx::ept_leaf_memory_type_ok(r.value()));
            } else {
              ++refused;
            }
            ++n;
          }
  std::printf("compared %zu EPT leaf requests with the misconfiguration rules (%zu refused)\n", n, refused);
  // Specific errors.
  const auto bochs = vmx::ept_capabilities_from(0x00000f0106334141);  // Bochs skylake EPT_VPID_CAP: XO, 4-level, WB, 2M, 1G, A/D
  EXPECT_EQ(vmx::make_ept_leaf(x86::hpa{0}, vmx::ept_level::pte, {false, true, false}, mt_t::wb, bochs).error(),
            vmx::ept_error::write_without_read);
  EXPECT_EQ(vmx::make_ept_leaf(x86::hpa{0x1000}, vmx::ept_level::pde, {true, true, true}, mt_t::wb, bochs).error(),
            vmx::ept_error::misaligned_address);
  EXPECT_EQ(vmx::make_ept_leaf(x86::hpa{1ull << 40}, vmx::ept_level::pte, {true, true, true}, mt_t::wb,
                               vmx::ept_capabilities_from(0x00000f0106334141, 40)).error(),
            vmx::ept_error::address_too_wide);
  EXPECT_TRUE(vmx::make_ept_leaf(x86::hpa{0}, vmx::ept_level::pte, {false, false, true}, mt_t::wb, bochs));
  // A non-leaf entry: 0x5000 | RWX.
  EXPECT_EQ(vmx::make_ept_table_entry(x86::hpa{0x5000}, {true, true, true}, bochs).value().raw(), 0x5007u);
  // EPTP: WB (6), 4 levels (3 << 3), A/D (bit 6): 0x...05e.
  HVKIT_BOTH(vmx::make_eptp(x86::hpa{0x10'0000}, mt_t::wb, 4, true, vmx::ept_capabilities_from(0x00000f0106334141)).value().raw() ==
             0x10'005eu);
  HVKIT_BOTH(vmx::make_eptp(x86::hpa{0x10'0000}, mt_t::wb, 5, false, vmx::ept_capabilities_from(0x00000f0106334141)).error() ==
             vmx::ept_error::walk_length_unsupported);
  HVKIT_BOTH(vmx::make_eptp(x86::hpa{0x10'0000}, mt_t::wt, 4, false, vmx::ept_capabilities_from(0x00000f0106334141)).error() ==
             vmx::ept_error::eptp_memory_type_unsupported);
}

// The builders produce paging's typed values, readable with paging's accessors, and the
// decoded capabilities are the walker's (SDM A.10 bit positions typed here).
TEST(vmx_ept_entry, typed_values_and_walker_capabilities) {
  // XO(0), walk 4(6), UC(8), WB(14), 2M(16), 1G(17), A/D(21)
  const paging::ept_capabilities w = vmx::ept_capabilities_from(0x00000f0106334141, 40, true);
  EXPECT_EQ(w.maxphyaddr, 40u);
  EXPECT_TRUE(w.execute_only && w.walk4 && !w.walk5 && w.page_2m && w.page_1g && w.ad && w.mbec);
  EXPECT_TRUE(w.eptp_uc && w.eptp_wb && !w.supervisor_shadow_stack);
  const paging::ept_capabilities none = vmx::ept_capabilities_from(0, 36, false);
  EXPECT_FALSE(none.execute_only || none.walk4 || none.walk5 || none.page_2m || none.page_1g || none.ad || none.mbec);
  EXPECT_FALSE(none.eptp_uc || none.eptp_wb || none.supervisor_shadow_stack);
  const auto bochs = vmx::ept_capabilities_from(0x00000f0106334141);
  const auto bochs40 = vmx::ept_capabilities_from(0x00000f0106334141, 40);

  // A 2 MiB leaf, WT (4), ignore PAT, user-execute: 0x20'0000 | R | X | 4 << 3 | bit 6 | bit 7 | bit 10.
  auto leaf = vmx::make_ept_leaf(x86::hpa{0x20'0000}, vmx::ept_level::pde, {true, false, true, true}, mt_t::wt, bochs, true);
  ASSERT_TRUE(leaf);
  EXPECT_EQ(leaf.value().raw(), 0x20'0000u | 0x1u | 0x4u | 0x20u | 0x40u | 0x80u | 0x400u);
  EXPECT_TRUE(leaf.value().test(paging::ept_entry::page_size | paging::ept_entry::ignore_pat));
  EXPECT_EQ(leaf.value().memory_type(), 4u);
  EXPECT_FALSE(vmx::ept_leaf_memory_type_ok(paging::ept_entry{0x3u << 3}));  // type 3 reserved
  EXPECT_FALSE(vmx::ept_leaf_memory_type_ok(paging::ept_entry{0x7u << 3}));
  EXPECT_TRUE(vmx::ept_leaf_memory_type_ok(paging::ept_entry{0x6u << 3}));

  // The EPTP reads back through paging::ept_pointer.
  auto eptp = vmx::make_eptp(x86::hpa{0x7000}, mt_t::uc, 4, false, bochs40);
  ASSERT_TRUE(eptp);
  EXPECT_EQ(eptp.value().raw(), 0x7018u);  // UC (0), walk length 3 << 3
  EXPECT_EQ(eptp.value().levels(), 4u);
  EXPECT_EQ(eptp.value().root(40).value(), 0x7000u);
  // A/D requested without capability bit 21; UC without bit 8.
  EXPECT_EQ(vmx::make_eptp(x86::hpa{0x7000}, mt_t::wb, 4, true, vmx::ept_capabilities_from(0x4040)).error(),
            vmx::ept_error::accessed_dirty_unsupported);
  EXPECT_EQ(vmx::make_eptp(x86::hpa{0x7000}, mt_t::uc, 4, false, vmx::ept_capabilities_from(0x4040)).error(),
            vmx::ept_error::eptp_memory_type_unsupported);
  // 3 levels is not a page-walk length (SDM 25.6.11).
  EXPECT_EQ(vmx::make_eptp(x86::hpa{0x7000}, mt_t::wb, 3, false, bochs).error(), vmx::ept_error::walk_length_unsupported);

  // check_eptp on values built elsewhere (e.g. a vmcs12 EPTP): bits 11:8 reserved, bits
  // 63:MAXPHYADDR too.
  EXPECT_TRUE(vmx::check_eptp(paging::ept_pointer{0x7000 | 0x1e}, bochs40));
  EXPECT_EQ(vmx::check_eptp(paging::ept_pointer{0x7000 | 0x1e | 0x100}, bochs40).error(), vmx::ept_error::eptp_reserved_bits);
  EXPECT_EQ(vmx::check_eptp(paging::ept_pointer{(1ull << 40) | 0x1e}, bochs40).error(), vmx::ept_error::address_too_wide);
  EXPECT_EQ(vmx::check_eptp(paging::ept_pointer{0x7000 | 0x1d}, bochs40).error(),  // memory type 5 (WP)
            vmx::ept_error::eptp_memory_type_unsupported);
  // Bit 7 (supervisor shadow-stack control) only with IA32_VMX_EPT_VPID_CAP bit 23 (SDM
  // 27.2.1.1, A.10); Bochs' value above does not report it.
  const auto sss = vmx::check_eptp(paging::ept_pointer{0x7000 | 0x9e}, bochs40);
  ASSERT_FALSE(sss);
  EXPECT_EQ(sss.error(), vmx::ept_error::supervisor_shadow_stack_unsupported);
  const auto with_sss = vmx::ept_capabilities_from(0x00000f0106334141 | (1ull << 23), 40);
  EXPECT_TRUE(with_sss.supervisor_shadow_stack);
  EXPECT_TRUE(vmx::check_eptp(paging::ept_pointer{0x7000 | 0x9e}, with_sss));

  // Bad inputs are typed errors: a level that is not 1..5, a MAXPHYADDR outside 32..52.
  EXPECT_EQ(vmx::make_ept_leaf(x86::hpa{0}, static_cast<vmx::ept_level>(0), {true, true, true}, mt_t::wb, bochs).error(),
            vmx::ept_error::large_page_unsupported);
  EXPECT_EQ(vmx::make_ept_table_entry(x86::hpa{0x5000}, {true, true, true}, vmx::ept_capabilities_from(0x00000f0106334141, 53)).error(),
            vmx::ept_error::invalid_maxphyaddr);
  EXPECT_EQ(vmx::make_eptp(x86::hpa{0x7000}, mt_t::wb, 4, false, vmx::ept_capabilities_from(0x00000f0106334141, 31)).error(), vmx::ept_error::invalid_maxphyaddr);
  HVKIT_BOTH(vmx::make_ept_table_entry(x86::hpa{0x5000}, {true, true, false}, vmx::ept_capabilities_from(0)).value().raw() == 0x5003u);
}
