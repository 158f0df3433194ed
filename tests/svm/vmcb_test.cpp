// SPDX-License-Identifier: MIT
// VMCB fields against a table typed by hand from AMD APM Vol. 2 Appendix B (Table B-1,
// control area, offsets from the VMCB start; Table B-2, state-save area, offsets as printed
// there, i.e. relative to 400h), and the byte-level behaviour of the typed accessors.
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include <hvkit/svm/vmcb.hpp>
#include <hvkit/svm/vmcb_fields.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace f = hvkit::svm::fields;

namespace {

struct row {
  const char* name;
  unsigned offset;
  unsigned bytes;
};

// Table B-1 as printed (offset, size in bytes of the named item).
constexpr row control_rows[] = {
    {"intercept_cr", 0x000, 4},         {"intercept_dr", 0x004, 4},     {"intercept_exceptions", 0x008, 4},
    {"intercept_misc1", 0x00c, 4},      {"intercept_misc2", 0x010, 4},  {"intercept_misc3", 0x014, 4},
    {"pause_filter_threshold", 0x03c, 2}, {"pause_filter_count", 0x03e, 2}, {"iopm_base_pa", 0x040, 8},
    {"msrpm_base_pa", 0x048, 8},        {"tsc_offset", 0x050, 8},       {"guest_asid", 0x058, 4},
    {"tlb_control", 0x05c, 1},          {"interrupt_control", 0x060, 8}, {"interrupt_state", 0x068, 8},
    {"exit_code", 0x070, 8},            {"exit_info_1", 0x078, 8},      {"exit_info_2", 0x080, 8},
    {"exit_int_info", 0x088, 8},        {"nested_control", 0x090, 8},   {"avic_apic_bar", 0x098, 8},
    {"ghcb_gpa", 0x0a0, 8},             {"event_injection", 0x0a8, 8},  {"n_cr3", 0x0b0, 8},
    {"virtualization_ext", 0x0b8, 8},   {"vmcb_clean", 0x0c0, 4},       {"next_rip", 0x0c8, 8},
    {"guest_instruction_bytes_fetched", 0x0d0, 1}, {"avic_backing_page", 0x0e0, 8},
    {"avic_logical_table", 0x0f0, 8},   {"avic_physical_table", 0x0f8, 8}, {"vmsa_pa", 0x108, 8},
};

// Table B-2 as printed: offsets relative to the state-save area.
constexpr row save_rows[] = {
    {"es_selector", 0x000, 2}, {"es_attrib", 0x002, 2}, {"es_limit", 0x004, 4}, {"es_base", 0x008, 8},
    {"cs_selector", 0x010, 2}, {"cs_base", 0x018, 8},   {"ss_selector", 0x020, 2}, {"ds_selector", 0x030, 2},
    {"fs_selector", 0x040, 2}, {"gs_base", 0x058, 8},   {"gdtr_limit", 0x064, 4}, {"gdtr_base", 0x068, 8},
    {"ldtr_selector", 0x070, 2}, {"idtr_limit", 0x084, 4}, {"idtr_base", 0x088, 8}, {"tr_selector", 0x090, 2},
    {"tr_attrib", 0x092, 2}, {"tr_limit", 0x094, 4},   {"tr_base", 0x098, 8},    {"cpl", 0x0cb, 1},
    {"efer", 0x0d0, 8},        {"cr4", 0x148, 8},        {"cr3", 0x150, 8},        {"cr0", 0x158, 8},
    {"dr7", 0x160, 8},         {"dr6", 0x168, 8},        {"rflags", 0x170, 8},     {"rip", 0x178, 8},
    {"rsp", 0x1d8, 8},         {"s_cet", 0x1e0, 8},      {"ssp", 0x1e8, 8},        {"isst_addr", 0x1f0, 8},
    {"rax", 0x1f8, 8},         {"star", 0x200, 8},       {"lstar", 0x208, 8},      {"cstar", 0x210, 8},
    {"sfmask", 0x218, 8},      {"kernel_gs_base", 0x220, 8}, {"sysenter_cs", 0x228, 8}, {"sysenter_esp", 0x230, 8},
    {"sysenter_eip", 0x238, 8}, {"cr2", 0x240, 8},       {"g_pat", 0x268, 8},      {"dbgctl", 0x270, 8},
    {"br_from", 0x278, 8},     {"br_to", 0x280, 8},      {"last_excp_from", 0x288, 8}, {"last_excp_to", 0x290, 8},
    {"spec_ctrl", 0x2e0, 8},
};

const svm::field_info* by_name(const char* n) {
  for (const auto& fi : svm::field_table)
    if (std::strcmp(fi.name, n) == 0) return &fi;
  return nullptr;
}

TEST(VmcbFields, ControlAreaMatchesTableB1) {
  for (const auto& r : control_rows) {
    const auto* fi = by_name(r.name);
    ASSERT_NE(fi, nullptr) << r.name;
    EXPECT_EQ(fi->offset, r.offset) << r.name;
    EXPECT_EQ(fi->bytes, r.bytes) << r.name;
  }
}

TEST(VmcbFields, StateSaveAreaMatchesTableB2) {
  for (const auto& r : save_rows) {
    const auto* fi = by_name(r.name);
    ASSERT_NE(fi, nullptr) << r.name;
    EXPECT_EQ(fi->offset, 0x400u + r.offset) << r.name;
    EXPECT_EQ(fi->bytes, r.bytes) << r.name;
  }
}

TEST(VmcbFields, TypedConstantsAgreeWithTheTable) {
  // The typed constants and the table come from one X-macro; check a sample directly too.
  static_assert(f::cr0.offset == 0x558 && f::cr0.bytes == 8 && f::cr0.area == svm::vmcb_area::state_save);
  static_assert(f::exit_code.read_only && f::exit_info_1.read_only && f::exit_info_2.read_only &&
                f::exit_int_info.read_only && f::next_rip.read_only);
  static_assert(!f::event_injection.read_only && !f::rip.read_only && !f::intercept_cr.read_only);
  static_assert(std::is_same_v<decltype(f::cr0)::typed_type, x86::cr0>);
  static_assert(std::is_same_v<decltype(f::cr4)::typed_type, x86::cr4>);
  static_assert(std::is_same_v<decltype(f::efer)::typed_type, x86::efer>);
  static_assert(std::is_same_v<decltype(f::cs_selector)::typed_type, x86::selector>);
  static_assert(std::is_same_v<decltype(f::cpl)::value_type, std::uint8_t>);
  static_assert(std::is_same_v<decltype(f::guest_asid)::value_type, std::uint32_t>);
}

TEST(VmcbFields, EveryFieldIsCheckedAndReservedAreasRefused) {
  EXPECT_EQ(svm::first_invalid_field(svm::field_table), svm::field_count);
  // The checker itself: overlapping, misaligned and reserved rows are found.
  constexpr svm::field_info overlap[] = {{"a", 0x070, 8, svm::field_access::read_only}, {"b", 0x074, 4, svm::field_access::read_only}};
  static_assert(svm::first_invalid_field(overlap) == 1);
  constexpr svm::field_info misaligned[] = {{"a", 0x072, 4, svm::field_access::read_write}};
  static_assert(svm::first_invalid_field(misaligned) == 0);
  constexpr svm::field_info reserved[] = {{"a", 0x020, 8, svm::field_access::read_write}};
  static_assert(svm::first_invalid_field(reserved) == 0);
  EXPECT_TRUE(svm::overlaps_reserved(0x018, 1));
  EXPECT_TRUE(svm::overlaps_reserved(0x03b, 1));
  EXPECT_FALSE(svm::overlaps_reserved(0x03c, 2));
  EXPECT_TRUE(svm::overlaps_reserved(0x05d, 1));
  EXPECT_FALSE(svm::overlaps_reserved(0x05c, 1));
  EXPECT_TRUE(svm::overlaps_reserved(0x058, 8));  // ASID + TLB_CONTROL as one quadword touches 63:40
}

TEST(Vmcb, StoresAreLittleEndianAtTheFieldOffset) {
  svm::soft_vmcb v;
  svm::write(v, f::rip, std::uint64_t{0x1122'3344'5566'7788});
  const auto& b = v.page().bytes;
  EXPECT_EQ(b[0x578], 0x88);
  EXPECT_EQ(b[0x579], 0x77);
  EXPECT_EQ(b[0x57f], 0x11);
  EXPECT_EQ(b[0x577], 0);
  EXPECT_EQ(b[0x580], 0);
  svm::write(v, f::cs_selector, x86::selector::make(1));
  EXPECT_EQ(b[0x410], 0x08);
  EXPECT_EQ(b[0x411], 0x00);
  svm::write(v, f::tlb_control, 3);
  EXPECT_EQ(b[0x05c], 3);
  EXPECT_EQ(svm::read(v, f::rip), 0x1122'3344'5566'7788u);
  EXPECT_EQ(svm::read_typed(v, f::cs_selector), x86::selector::make(1));
  // A 4-byte field beside a 1-byte one: each run-time store writes its own width only.
  svm::write(v, f::guest_asid, std::uint32_t{0x0a0b'0c0d});
  EXPECT_EQ(b[0x058], 0x0d);
  EXPECT_EQ(b[0x05b], 0x0a);
  EXPECT_EQ(b[0x05c], 3);
  EXPECT_EQ(svm::read(v, f::guest_asid), 0x0a0b'0c0du);
  EXPECT_EQ(svm::read(v, f::tlb_control), 3u);
  svm::write(v, f::tlb_control, 0);
  EXPECT_EQ(svm::read(v, f::guest_asid), 0x0a0b'0c0du);
}

// The same stores in constant evaluation (the byte-loop path) leave the same bytes.
constexpr bool constant_evaluated_stores() {
  svm::soft_vmcb v;
  svm::write(v, f::rip, std::uint64_t{0x1122'3344'5566'7788});
  svm::write(v, f::guest_asid, std::uint32_t{0x0a0b'0c0d});
  svm::write(v, f::tlb_control, 3);
  const auto& b = v.page().bytes;
  return b[0x578] == 0x88 && b[0x57f] == 0x11 && b[0x058] == 0x0d && b[0x05b] == 0x0a && b[0x05c] == 3 &&
         svm::read(v, f::rip) == 0x1122'3344'5566'7788u && svm::read(v, f::guest_asid) == 0x0a0b'0c0du;
}
static_assert(constant_evaluated_stores());

TEST(Vmcb, TypedRegistersRoundTrip) {
  svm::soft_vmcb v;
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::wp);
  svm::write(v, f::efer, x86::efer::lme | x86::efer::lma | x86::efer::svme);
  EXPECT_EQ(svm::read_typed(v, f::cr0), x86::cr0::pe | x86::cr0::pg | x86::cr0::wp);
  EXPECT_EQ(svm::read(v, f::cr0), 0x8001'0001u);
  EXPECT_EQ(svm::read(v, f::efer), (1u << 8) | (1u << 10) | (1u << 12));
}

TEST(Vmcb, ProcessorWriteAndViewShareThePage) {
  svm::vmcb_page page{};
  svm::vmcb_view view{page};
  svm::processor_write(view, f::exit_code, std::uint64_t{0x7b});
  svm::processor_write(view, f::exit_info_2, std::uint64_t{0xfff0});
  EXPECT_EQ(page.bytes[0x070], 0x7b);
  EXPECT_EQ(svm::read(view, f::exit_info_2), 0xfff0u);
  svm::vmcb_view raw{static_cast<void*>(&page)};
  EXPECT_EQ(svm::read(raw, f::exit_code), 0x7bu);
}

TEST(Vmcb, InstructionBytes) {
  svm::soft_vmcb v;
  svm::processor_write(v, f::guest_instruction_bytes_fetched, 3);
  v.page().bytes[0x0d1] = 0x0f;
  v.page().bytes[0x0d2] = 0x22;
  v.page().bytes[0x0d3] = 0xc0;
  v.page().bytes[0x0d4] = 0xff;  // beyond the count
  const auto ib = svm::guest_instruction_bytes(v);
  EXPECT_EQ(ib.count, 3);
  EXPECT_EQ(ib.bytes[0], 0x0f);
  EXPECT_EQ(ib.bytes[2], 0xc0);
  EXPECT_EQ(ib.bytes[3], 0);
  svm::processor_write(v, f::guest_instruction_bytes_fetched, 200);  // a bad count is clamped
  EXPECT_EQ(svm::guest_instruction_bytes(v).count, 15);
}

consteval bool constexpr_round_trip() {
  svm::soft_vmcb v;
  svm::write(v, f::n_cr3, std::uint64_t{0xabc000});
  svm::write(v, f::guest_asid, std::uint32_t{7});
  return svm::read(v, f::n_cr3) == 0xabc000 && svm::read(v, f::guest_asid) == 7 && v.page().bytes[0x0b1] == 0xc0;
}
static_assert(constexpr_round_trip());

TEST(Vmcb, CountsStores) {
  svm::soft_vmcb v;
  svm::write(v, f::rax, std::uint64_t{1});
  (void)svm::read(v, f::rax);
  (void)svm::read(v, f::rsp);
  EXPECT_EQ(v.stores(), 1u);
}

}  // namespace

// Issue 23.9 (the SVM side): explicit narrowing of run-time values into VMCB fields. Widths
// from APM Vol. 2 Appendix B: guest ASID (058h) is 32 bits, the CS selector (410h) 16 bits.
namespace {
// A value the compiler cannot fold (a run-time value).
template <class T>
T narrow_rt(T v) {
  volatile T x = v;
  return x;
}
}  // namespace

TEST(vmcb_narrow, narrow_and_truncate) {
  const auto a = hvkit::svm::narrow(f::guest_asid, narrow_rt(std::uint64_t{0xffff'ffff}));
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 0xffff'ffffu);
  const auto b = hvkit::svm::narrow(f::guest_asid, narrow_rt(std::uint64_t{0x1'0000'0000}));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error(), (hvkit::svm::field_overflow{0x058, 32, 0x1'0000'0000}));
  EXPECT_FALSE(hvkit::svm::narrow(f::guest_asid, narrow_rt(-1)));
  EXPECT_EQ(hvkit::svm::truncate(f::guest_asid, narrow_rt(std::uint64_t{0x1'2345'6789})), 0x2345'6789u);
}

namespace {

// find_field against APM Vol. 2 Appendix B, Table B-1 (control area) and B-2 (state-save
// area at 400h): the row that starts at an offset, none in the middle of a field or in a
// reserved range.
TEST(VmcbFieldTable, FindFieldByOffset) {
  struct want {
    std::uint16_t offset;
    const char* name;
    unsigned bytes;
  };
  const want rows[] = {{0x058, "guest_asid", 4}, {0x05c, "tlb_control", 1}, {0x070, "exit_code", 8},
                       {0x090, "nested_control", 8}, {0x0b0, "n_cr3", 8}, {0x410, "cs_selector", 2},
                       {0x412, "cs_attrib", 2}, {0x418, "cs_base", 8}};
  for (const auto& w : rows) {
    const auto* r = svm::find_field(w.offset);
    ASSERT_NE(r, nullptr) << std::hex << w.offset;
    EXPECT_STREQ(r->name, w.name);
    EXPECT_EQ(r->bytes, w.bytes);
    EXPECT_EQ(r->offset, w.offset);
  }
  EXPECT_EQ(svm::find_field(0x05a), nullptr);  // inside guest_asid
  EXPECT_EQ(svm::find_field(0x018), nullptr);  // reserved (Table B-1: 018h-03Bh)
  EXPECT_EQ(svm::find_field(0xfff), nullptr);
  // Every row is found at its own offset.
  for (const auto& r : svm::field_table) EXPECT_EQ(svm::find_field(r.offset), &r) << r.name;
}

}  // namespace
