// SPDX-License-Identifier: MIT
// The Hana field lists: group sizes counted by hand from SDM Appendix B, copy and diff
// between two software VMCSes, the compile-time VMCS-shadowing bitmaps (SDM 25.6.15:
// bit n <-> encoding bits 14:0 = n, 1 = exit), and the hosted dump.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <hvkit/vmx/field_lists.hpp>
#include <hvkit/vmx/hosted/dump.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "probe_vmcs.hpp"
#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace lists = hvkit::vmx::lists;
namespace f = hvkit::vmx::fields;

// Counted by hand from Appendix B: guest 11 + 13 + 23 + 23; host 7 + 4 + 1 + 15;
// exit information 1 + 8 + 6; controls 5 + 35 + 19 + 8; plus the newer fields: guest 8
// (IA32_FRED_*), host 8 (IA32_FRED_*), exit information 1 (original event data), controls 3
// (IA32_SPEC_CTRL mask and shadow, injected event data).
static_assert(lists::size_v<decltype(lists::guest_state)> == 70 + 8);
static_assert(lists::size_v<decltype(lists::host_state)> == 27 + 8);
static_assert(lists::size_v<decltype(lists::exit_info)> == 15 + 1);
static_assert(lists::size_v<decltype(lists::controls)> == 67 + 3);
static_assert(lists::size_v<decltype(lists::all)> == 179 + 20);

namespace {
constexpr auto guest_read_bitmap = lists::make_vmread_bitmap(lists::guest_state);
constexpr auto exit_write_bitmap = lists::make_vmwrite_bitmap(lists::exit_info);
constexpr auto exit_read_bitmap = lists::make_vmread_bitmap(lists::exit_info);
constexpr bool bit(const lists::shadow_bitmap& b, std::uint32_t n) { return (b[n / 8] >> (n % 8)) & 1; }
std::size_t clear_bits(const lists::shadow_bitmap& b) {
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < 4096 * 8; ++i) n += !bit(b, i);
  return n;
}
}  // namespace

TEST(vmx_field_lists, shadow_bitmaps) {
  // GUEST_RIP 0x681e: byte 0xd03, bit 6 -> clear (read from the shadow VMCS).
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x681e) && (guest_read_bitmap[0xd03] & 0x40) == 0);
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x2800) && !bit(guest_read_bitmap, 0x2801));  // link pointer, full and HIGH
  HVKIT_BOTH(bit(guest_read_bitmap, 0x6c16));  // HOST_RIP still exits
  HVKIT_BOTH(bit(guest_read_bitmap, 0x6801));  // not an encoding
  // 78 guest fields + 21 HIGH halves of the 64-bit ones (13 of Appendix B + 8 IA32_FRED_*).
  EXPECT_EQ(clear_bits(guest_read_bitmap), 78u + 21u);
  // Exit information: readable from the shadow (16 + 2 HIGH: guest-physical address and
  // original event data), never writable.
  EXPECT_EQ(clear_bits(exit_read_bitmap), 16u + 2u);
  EXPECT_EQ(clear_bits(exit_write_bitmap), 0u);
  const auto guest_write = lists::make_vmwrite_bitmap(lists::guest_state);
  EXPECT_EQ(clear_bits(guest_write), 78u + 21u);
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x281a) && !bit(guest_read_bitmap, 0x281b));  // IA32_FRED_CONFIG, full and HIGH
}

TEST(vmx_field_lists, copy_and_diff) {
  vmx::soft_vmcs a, b;
  std::size_t i = 0;
  lists::for_each_field(lists::all, [&](auto fld) {
    using F = decltype(fld);
    a.store(F::encoding, 0x0101'0101'0101'0101ull * (++i));
  });
  ASSERT_TRUE(lists::copy(lists::guest_state, a, b));
  // Guest fields equal, host fields untouched.
  EXPECT_EQ(b.peek(f::guest_rip), a.peek(f::guest_rip));
  EXPECT_EQ(b.peek(f::guest_cs_selector), a.peek(f::guest_cs_selector));
  EXPECT_EQ(b.peek(f::host_rip), 0u);
  auto d = lists::diff(lists::all, a, b, [](auto, auto, auto) {});
  ASSERT_TRUE(d);
  EXPECT_EQ(d.value(), 199u - 78u);
  // Exit information goes through store() on a software destination.
  ASSERT_TRUE(lists::copy(lists::exit_info, a, b));
  EXPECT_EQ(b.peek(f::exit_qualification), a.peek(f::exit_qualification));
  std::size_t host_diffs = 0;
  auto d2 = lists::diff(lists::host_state, a, b, [&](auto fld, auto va, auto vb) {
    ++host_diffs;
    EXPECT_NE(va, vb);
    EXPECT_EQ(decltype(fld)::type, vmx::field_type::host);
  });
  EXPECT_EQ(d2.value(), 35u);
  EXPECT_EQ(host_diffs, 35u);
}

TEST(vmx_field_lists, hosted_dump) {
  vmx::soft_vmcs v;
  v.store(f::guest_rip, std::uint64_t{0xfff0});
  v.store(f::guest_cs_selector, std::uint16_t{0xf000});
  std::FILE* tmp = std::tmpfile();
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(vmx::hosted::dump(tmp, lists::guest_state, v), 78u);
  std::rewind(tmp);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, tmp)) text += buf;
  std::fclose(tmp);
  EXPECT_NE(text.find("guest_rip"), std::string::npos);
  EXPECT_NE(text.find("(0x681e) = 0x000000000000fff0"), std::string::npos);
  EXPECT_NE(text.find("(0x0802) = 0xf000"), std::string::npos);
}

// ---- the shadowing bitmaps built at run time, against the encodings (SDM 25.11.2) ----------

namespace {
// SDM 25.11.2 "VMCS field encoding": bit 0 access type (1 = HIGH), bits 11:10 type
// (0 control, 1 VM-exit information, 2 guest state, 3 host state), bits 14:13 width
// (1 = 64-bit); SDM 25.6.15: bit n of a bitmap is the field whose encoding bits 14:0 are n.
// VM-exit information fields are read-only (a VMWRITE to one fails with error 13, SDM 31.4,
// without IA32_VMX_MISC bit 29), so the VMWRITE bitmap keeps them exiting. The expected
// bitmap from the field table's encodings alone, for the fields of type `type` (4: all).
lists::shadow_bitmap model(unsigned type, bool for_vmwrite) {
  lists::shadow_bitmap b;
  b.fill(0xff);
  auto clear = [&](std::uint32_t enc) { b[(enc & 0x7fff) / 8] &= static_cast<std::uint8_t>(~(1u << (enc & 7))); };
  for (const auto& row : vmx::field_table) {
    const unsigned t = (row.encoding >> 10) & 3;
    if (type != 4 && t != type) continue;
    if (for_vmwrite && t == 1) continue;
    clear(row.encoding);
    if (((row.encoding >> 13) & 3) == 1) clear(row.encoding | 1);
  }
  return b;
}
// A call the compiler cannot fold: the list is a run-time copy.
template <class List>
std::pair<lists::shadow_bitmap, lists::shadow_bitmap> at_run_time(const List& constant) {
  List list = constant;
  return {lists::make_vmread_bitmap(list), lists::make_vmwrite_bitmap(list)};
}
}  // namespace

TEST(vmx_field_lists, shadow_bitmaps_at_run_time_against_the_encodings) {
  const auto all = at_run_time(lists::all);
  EXPECT_TRUE(all.first == model(4, false));
  EXPECT_TRUE(all.second == model(4, true));
  const auto controls = at_run_time(lists::controls);
  EXPECT_TRUE(controls.first == model(0, false));
  EXPECT_TRUE(controls.second == model(0, true));
  const auto exit = at_run_time(lists::exit_info);
  EXPECT_TRUE(exit.first == model(1, false));
  EXPECT_TRUE(exit.second == model(1, true));
  EXPECT_TRUE(exit.second == model(5, false)) << "no field of the VMWRITE bitmap: all ones";
  const auto guest = at_run_time(lists::guest_state);
  EXPECT_TRUE(guest.first == model(2, false));
  EXPECT_TRUE(guest.second == model(2, true));
  const auto host = at_run_time(lists::host_state);
  EXPECT_TRUE(host.first == model(3, false));
  EXPECT_TRUE(host.second == model(3, true));
  // The compile-time bitmaps are the same.
  EXPECT_TRUE(guest_read_bitmap == guest.first);
  EXPECT_TRUE(exit_write_bitmap == exit.second);
}

// ---- copy and diff stop at the first failing VMREAD or VMWRITE -------------------------------

namespace {
// A software VMCS whose VMWRITE of one encoding fails (VMfailValid, error 12: "VMREAD/VMWRITE
// from/to unsupported VMCS component", SDM 31.4).
struct failing_write_vmcs {
  vmx::soft_vmcs inner;
  std::uint32_t failing = ~0u;
  unsigned writes = 0;
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t enc) { return inner.read(enc); }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t enc, std::uint64_t v) {
    ++writes;
    if (enc == failing)
      return hvkit::unexpected(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmwrite,
                                                        vmx::vm_instruction_error::unsupported_vmcs_component, enc));
    return inner.write(enc, v);
  }
};
static_assert(vmx::vmcs_backend<failing_write_vmcs>);

// The position of `enc` among the guest-state fields, in table order.
std::size_t guest_position(std::uint32_t enc) {
  std::size_t i = 0, at = ~std::size_t{0};
  lists::for_each_field(lists::guest_state, [&](auto fld) {
    if (decltype(fld)::encoding == enc) at = i;
    ++i;
  });
  return at;
}
}  // namespace

TEST(vmx_field_lists, copy_and_diff_stop_at_the_first_failure) {
  constexpr std::uint32_t rip = decltype(f::guest_rip)::encoding;
  const std::size_t at = guest_position(rip);
  ASSERT_LT(at, 78u);
  ASSERT_GT(at, 0u);
  // A failing VMREAD in the source: copy returns it; the fields before it are copied, it and
  // the fields after it are not.
  hvkit::test::probe_vmcs src;
  std::size_t i = 0;
  lists::for_each_field(lists::guest_state, [&](auto fld) { src.inner.store(decltype(fld)::encoding, 0x100 + i++); });
  src.failing = rip;
  vmx::soft_vmcs dst;
  const auto c = lists::copy(lists::guest_state, src, dst);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, rip));
  EXPECT_EQ(src.reads.size(), at + 1) << "no VMREAD after the failing one";
  i = 0;
  lists::for_each_field(lists::guest_state, [&](auto fld) {
    const std::uint64_t want = i < at ? 0x100 + i : 0;
    EXPECT_EQ(dst.read(decltype(fld)::encoding).value(), want) << i;
    ++i;
  });
  // diff: a failing read on either side is the result; differences before it were reported.
  for (const bool fail_in_a : {true, false}) {
    hvkit::test::probe_vmcs a, b;
    lists::for_each_field(lists::guest_state, [&](auto fld) { a.inner.store(decltype(fld)::encoding, 1); });
    (fail_in_a ? a : b).failing = rip;
    std::size_t reported = 0;
    const auto d = lists::diff(lists::guest_state, a, b, [&](auto, auto, auto) { ++reported; });
    ASSERT_FALSE(d);
    EXPECT_EQ(d.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, rip));
    EXPECT_EQ(reported, at);
    EXPECT_EQ(a.reads.size(), at + 1);
  }
  // A failing VMWRITE in the destination: the same, from the VMWRITE.
  failing_write_vmcs wdst;
  wdst.failing = rip;
  vmx::soft_vmcs good;
  const auto w = lists::copy(lists::guest_state, good, wdst);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().instruction, vmx::vmx_instruction::vmwrite);
  EXPECT_EQ(w.error().field_encoding, rip);
  EXPECT_EQ(wdst.writes, at + 1);
}

namespace {
std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  return text;
}
}  // namespace

// A failed VMREAD is printed as such (SDM 31.2: VMfailInvalid carries no error number, it is
// 0 here); the other fields are printed as before. print(vm_fail) names both kinds.
TEST(vmx_field_lists, hosted_dump_of_a_failed_vmread_and_print) {
  hvkit::test::probe_vmcs v;
  v.inner.store(f::guest_rip, std::uint64_t{0xfff0});
  v.failing = decltype(f::guest_rip)::encoding;
  std::FILE* tmp = std::tmpfile();
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(vmx::hosted::dump(tmp, lists::guest_state, v), 78u);
  const std::string text = read_all(tmp);
  EXPECT_NE(text.find("(0x681e) : VMREAD failed (VMfailInvalid, error 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("(0x0802) = 0x0000"), std::string::npos);
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  vmx::hosted::print(out, vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmwrite,
                                                   vmx::vm_instruction_error::unsupported_vmcs_component, 0x681e));
  vmx::hosted::print(out, vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, 0x4402));
  EXPECT_EQ(read_all(out),
            "VMfailValid, VM-instruction error 12, field 0x681e\n"
            "VMfailInvalid, VM-instruction error 0, field 0x4402\n");
}
