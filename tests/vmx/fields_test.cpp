// SPDX-License-Identifier: MIT
// VMCS field encodings against a table typed by hand from SDM Vol. 3D Appendix B
// (Tables B-1 .. B-14), independently of include/vmx/fields.hpp, and the derived properties
// (value type, read-only, HIGH half) against the encoding rules of SDM 25.11.2.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <type_traits>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace f = hvkit::vmx::fields;

namespace {
struct sdm_row {
  std::uint32_t encoding;
  std::uint32_t from_header;
  const char* name;
};
#define ROW(name, enc) sdm_row{enc, f::name.encoding, #name}
// Typed from the SDM tables, one row per field.
const sdm_row sdm_table[] = {
    // B-1 16-bit control
    ROW(virtual_processor_id, 0x00000000), ROW(posted_interrupt_notification_vector, 0x00000002),
    ROW(eptp_index, 0x00000004), ROW(hlat_prefix_size, 0x00000006), ROW(last_pid_pointer_index, 0x00000008),
    // B-2 16-bit guest state
    ROW(guest_es_selector, 0x00000800), ROW(guest_cs_selector, 0x00000802), ROW(guest_ss_selector, 0x00000804),
    ROW(guest_ds_selector, 0x00000806), ROW(guest_fs_selector, 0x00000808), ROW(guest_gs_selector, 0x0000080A),
    ROW(guest_ldtr_selector, 0x0000080C), ROW(guest_tr_selector, 0x0000080E),
    ROW(guest_interrupt_status, 0x00000810), ROW(guest_pml_index, 0x00000812), ROW(guest_uinv, 0x00000814),
    // B-3 16-bit host state
    ROW(host_es_selector, 0x00000C00), ROW(host_cs_selector, 0x00000C02), ROW(host_ss_selector, 0x00000C04),
    ROW(host_ds_selector, 0x00000C06), ROW(host_fs_selector, 0x00000C08), ROW(host_gs_selector, 0x00000C0A),
    ROW(host_tr_selector, 0x00000C0C),
    // B-4 64-bit control
    ROW(io_bitmap_a, 0x00002000), ROW(io_bitmap_b, 0x00002002), ROW(msr_bitmap, 0x00002004),
    ROW(vm_exit_msr_store_address, 0x00002006), ROW(vm_exit_msr_load_address, 0x00002008),
    ROW(vm_entry_msr_load_address, 0x0000200A), ROW(executive_vmcs_pointer, 0x0000200C),
    ROW(pml_address, 0x0000200E), ROW(tsc_offset, 0x00002010), ROW(virtual_apic_page_address, 0x00002012),
    ROW(apic_access_address, 0x00002014), ROW(posted_interrupt_descriptor_address, 0x00002016),
    ROW(vm_function_controls, 0x00002018), ROW(ept_pointer, 0x0000201A), ROW(eoi_exit_bitmap_0, 0x0000201C),
    ROW(eoi_exit_bitmap_1, 0x0000201E), ROW(eoi_exit_bitmap_2, 0x00002020), ROW(eoi_exit_bitmap_3, 0x00002022),
    ROW(eptp_list_address, 0x00002024), ROW(vmread_bitmap_address, 0x00002026),
    ROW(vmwrite_bitmap_address, 0x00002028), ROW(ve_information_address, 0x0000202A),
    ROW(xss_exiting_bitmap, 0x0000202C), ROW(encls_exiting_bitmap, 0x0000202E),
    ROW(sub_page_permission_table_pointer, 0x00002030), ROW(tsc_multiplier, 0x00002032),
    ROW(tertiary_processor_based_controls, 0x00002034), ROW(enclv_exiting_bitmap, 0x00002036),
    ROW(low_pasid_directory_address, 0x00002038), ROW(high_pasid_directory_address, 0x0000203A),
    ROW(shared_eptp, 0x0000203C), ROW(pconfig_exiting_bitmap, 0x0000203E), ROW(hlat_pointer, 0x00002040),
    ROW(pid_pointer_table_address, 0x00002042), ROW(secondary_vm_exit_controls, 0x00002044),
    // newer 64-bit control (IA32_SPEC_CTRL virtualization; FRED)
    ROW(ia32_spec_ctrl_mask, 0x0000204A), ROW(ia32_spec_ctrl_shadow, 0x0000204C),
    ROW(injected_event_data, 0x00002052),
    // B-5 64-bit read-only data
    ROW(guest_physical_address, 0x00002400), ROW(original_event_data, 0x00002404),
    // B-6 64-bit guest state
    ROW(vmcs_link_pointer, 0x00002800), ROW(guest_ia32_debugctl, 0x00002802), ROW(guest_ia32_pat, 0x00002804),
    ROW(guest_ia32_efer, 0x00002806), ROW(guest_ia32_perf_global_ctrl, 0x00002808),
    ROW(guest_pdpte0, 0x0000280A), ROW(guest_pdpte1, 0x0000280C), ROW(guest_pdpte2, 0x0000280E),
    ROW(guest_pdpte3, 0x00002810), ROW(guest_ia32_bndcfgs, 0x00002812), ROW(guest_ia32_rtit_ctl, 0x00002814),
    ROW(guest_ia32_lbr_ctl, 0x00002816), ROW(guest_ia32_pkrs, 0x00002818),
    ROW(guest_ia32_fred_config, 0x0000281A), ROW(guest_ia32_fred_rsp1, 0x0000281C),
    ROW(guest_ia32_fred_rsp2, 0x0000281E), ROW(guest_ia32_fred_rsp3, 0x00002820),
    ROW(guest_ia32_fred_stklvls, 0x00002822), ROW(guest_ia32_fred_ssp1, 0x00002824),
    ROW(guest_ia32_fred_ssp2, 0x00002826), ROW(guest_ia32_fred_ssp3, 0x00002828),
    // B-7 64-bit host state
    ROW(host_ia32_pat, 0x00002C00), ROW(host_ia32_efer, 0x00002C02), ROW(host_ia32_perf_global_ctrl, 0x00002C04),
    ROW(host_ia32_pkrs, 0x00002C06),
    ROW(host_ia32_fred_config, 0x00002C08), ROW(host_ia32_fred_rsp1, 0x00002C0A),
    ROW(host_ia32_fred_rsp2, 0x00002C0C), ROW(host_ia32_fred_rsp3, 0x00002C0E),
    ROW(host_ia32_fred_stklvls, 0x00002C10), ROW(host_ia32_fred_ssp1, 0x00002C12),
    ROW(host_ia32_fred_ssp2, 0x00002C14), ROW(host_ia32_fred_ssp3, 0x00002C16),
    // B-8 32-bit control
    ROW(pin_based_controls, 0x00004000), ROW(primary_processor_based_controls, 0x00004002),
    ROW(exception_bitmap, 0x00004004), ROW(page_fault_error_code_mask, 0x00004006),
    ROW(page_fault_error_code_match, 0x00004008), ROW(cr3_target_count, 0x0000400A),
    ROW(primary_vm_exit_controls, 0x0000400C), ROW(vm_exit_msr_store_count, 0x0000400E),
    ROW(vm_exit_msr_load_count, 0x00004010), ROW(vm_entry_controls, 0x00004012),
    ROW(vm_entry_msr_load_count, 0x00004014), ROW(vm_entry_interruption_info, 0x00004016),
    ROW(vm_entry_exception_error_code, 0x00004018), ROW(vm_entry_instruction_length, 0x0000401A),
    ROW(tpr_threshold, 0x0000401C), ROW(secondary_processor_based_controls, 0x0000401E),
    ROW(ple_gap, 0x00004020), ROW(ple_window, 0x00004022), ROW(notify_window, 0x00004024),
    // B-9 32-bit read-only data
    ROW(vm_instruction_error, 0x00004400), ROW(exit_reason, 0x00004402), ROW(vm_exit_interruption_info, 0x00004404),
    ROW(vm_exit_interruption_error_code, 0x00004406), ROW(idt_vectoring_info, 0x00004408),
    ROW(idt_vectoring_error_code, 0x0000440A), ROW(vm_exit_instruction_length, 0x0000440C),
    ROW(vm_exit_instruction_info, 0x0000440E),
    // B-10 32-bit guest state
    ROW(guest_es_limit, 0x00004800), ROW(guest_cs_limit, 0x00004802), ROW(guest_ss_limit, 0x00004804),
    ROW(guest_ds_limit, 0x00004806), ROW(guest_fs_limit, 0x00004808), ROW(guest_gs_limit, 0x0000480A),
    ROW(guest_ldtr_limit, 0x0000480C), ROW(guest_tr_limit, 0x0000480E), ROW(guest_gdtr_limit, 0x00004810),
    ROW(guest_idtr_limit, 0x00004812), ROW(guest_es_access_rights, 0x00004814),
    ROW(guest_cs_access_rights, 0x00004816), ROW(guest_ss_access_rights, 0x00004818),
    ROW(guest_ds_access_rights, 0x0000481A), ROW(guest_fs_access_rights, 0x0000481C),
    ROW(guest_gs_access_rights, 0x0000481E), ROW(guest_ldtr_access_rights, 0x00004820),
    ROW(guest_tr_access_rights, 0x00004822), ROW(guest_interruptibility_state, 0x00004824),
    ROW(guest_activity_state, 0x00004826), ROW(guest_smbase, 0x00004828), ROW(guest_ia32_sysenter_cs, 0x0000482A),
    ROW(vmx_preemption_timer_value, 0x0000482E),
    // B-11 32-bit host state
    ROW(host_ia32_sysenter_cs, 0x00004C00),
    // B-12 natural-width control
    ROW(cr0_guest_host_mask, 0x00006000), ROW(cr4_guest_host_mask, 0x00006002), ROW(cr0_read_shadow, 0x00006004),
    ROW(cr4_read_shadow, 0x00006006), ROW(cr3_target_value_0, 0x00006008), ROW(cr3_target_value_1, 0x0000600A),
    ROW(cr3_target_value_2, 0x0000600C), ROW(cr3_target_value_3, 0x0000600E),
    // B-13 natural-width read-only data
    ROW(exit_qualification, 0x00006400), ROW(io_rcx, 0x00006402), ROW(io_rsi, 0x00006404), ROW(io_rdi, 0x00006406),
    ROW(io_rip, 0x00006408), ROW(guest_linear_address, 0x0000640A),
    // B-14 natural-width guest state
    ROW(guest_cr0, 0x00006800), ROW(guest_cr3, 0x00006802), ROW(guest_cr4, 0x00006804),
    ROW(guest_es_base, 0x00006806), ROW(guest_cs_base, 0x00006808), ROW(guest_ss_base, 0x0000680A),
    ROW(guest_ds_base, 0x0000680C), ROW(guest_fs_base, 0x0000680E), ROW(guest_gs_base, 0x00006810),
    ROW(guest_ldtr_base, 0x00006812), ROW(guest_tr_base, 0x00006814), ROW(guest_gdtr_base, 0x00006816),
    ROW(guest_idtr_base, 0x00006818), ROW(guest_dr7, 0x0000681A), ROW(guest_rsp, 0x0000681C),
    ROW(guest_rip, 0x0000681E), ROW(guest_rflags, 0x00006820), ROW(guest_pending_debug_exceptions, 0x00006822),
    ROW(guest_ia32_sysenter_esp, 0x00006824), ROW(guest_ia32_sysenter_eip, 0x00006826),
    ROW(guest_ia32_s_cet, 0x00006828), ROW(guest_ssp, 0x0000682A),
    ROW(guest_ia32_interrupt_ssp_table_addr, 0x0000682C),
    // B-15 natural-width host state
    ROW(host_cr0, 0x00006C00), ROW(host_cr3, 0x00006C02), ROW(host_cr4, 0x00006C04), ROW(host_fs_base, 0x00006C06),
    ROW(host_gs_base, 0x00006C08), ROW(host_tr_base, 0x00006C0A), ROW(host_gdtr_base, 0x00006C0C),
    ROW(host_idtr_base, 0x00006C0E), ROW(host_ia32_sysenter_esp, 0x00006C10),
    ROW(host_ia32_sysenter_eip, 0x00006C12), ROW(host_rsp, 0x00006C14), ROW(host_rip, 0x00006C16),
    ROW(host_ia32_s_cet, 0x00006C18), ROW(host_ssp, 0x00006C1A), ROW(host_ia32_interrupt_ssp_table_addr, 0x00006C1C),
};
#undef ROW
}  // namespace

TEST(vmx_fields, encodings_match_the_sdm_table) {
  std::set<std::uint32_t> typed;
  for (const auto& r : sdm_table) {
    EXPECT_EQ(r.from_header, r.encoding) << r.name;
    typed.insert(r.encoding);
  }
  // The header lists exactly the typed fields, no more, no fewer.
  EXPECT_EQ(typed.size(), std::size(sdm_table));
  EXPECT_EQ(vmx::field_count, std::size(sdm_table));
  std::size_t in_typed = 0;
  for (const auto& row : vmx::field_table) in_typed += typed.count(row.encoding);
  EXPECT_EQ(in_typed, vmx::field_count);
  std::printf("compared %zu VMCS field encodings with the hand-typed SDM table\n", std::size(sdm_table));
}

// Value types from bits 14:13 (SDM 25.11.2): 0 = 16-bit, 1 = 64-bit, 2 = 32-bit, 3 = natural.
static_assert(std::is_same_v<decltype(f::guest_es_selector)::value_type, std::uint16_t>);
static_assert(std::is_same_v<decltype(f::ept_pointer)::value_type, std::uint64_t>);
static_assert(std::is_same_v<decltype(f::exit_reason)::value_type, std::uint32_t>);
static_assert(std::is_same_v<decltype(f::guest_rip)::value_type, std::uint64_t>);
static_assert(std::is_same_v<decltype(vmx::high_half(f::tsc_offset))::value_type, std::uint32_t>);
static_assert(decltype(vmx::high_half(f::tsc_offset))::encoding == 0x2011);

TEST(vmx_fields, derived_properties) {
  HVKIT_BOTH(vmx::width_of(0x681eu) == vmx::field_width::natural);
  HVKIT_BOTH(vmx::width_of(0x4402u) == vmx::field_width::w32);
  HVKIT_BOTH(vmx::width_of(0x2800u) == vmx::field_width::w64);
  HVKIT_BOTH(vmx::width_of(0x0c0cu) == vmx::field_width::w16);
  HVKIT_BOTH(vmx::type_of(0x6400u) == vmx::field_type::exit_info);
  HVKIT_BOTH(vmx::type_of(0x6c16u) == vmx::field_type::host);
  HVKIT_BOTH(decltype(f::exit_qualification)::read_only);
  HVKIT_BOTH(!decltype(f::guest_cr0)::read_only);
  // HIGH access only on 64-bit fields; bit 12 and bits 31:15 reserved.
  HVKIT_BOTH(vmx::is_well_formed(0x2001u));
  HVKIT_BOTH(!vmx::is_well_formed(0x4001u));
  HVKIT_BOTH(!vmx::is_well_formed(0x681fu));
  HVKIT_BOTH(!vmx::is_well_formed(0x1000u));
  HVKIT_BOTH(!vmx::is_well_formed(0x8000u));
  // Every listed row: read-only exactly when bits 11:10 = 1, by a rule written here; the
  // read-only rows are the VM-exit information fields of Tables B-5 (2), B-9 (8), B-13 (6).
  std::size_t n = 0, read_only = 0;
  for (const auto& row : vmx::field_table) {
    EXPECT_EQ(((row.encoding >> 10) & 3u) == 1u, row.declared_type == vmx::field_type::exit_info) << row.name;
    read_only += vmx::find_field(row.encoding) == &row && ((row.encoding >> 10) & 3u) == 1u;
    EXPECT_EQ(row.encoding & 1u, 0u) << row.name;
    EXPECT_EQ(vmx::slot_of(row.encoding), static_cast<int>(n)) << row.name;
    ++n;
  }
  EXPECT_EQ(read_only, 2u + 8u + 6u);
  EXPECT_EQ(vmx::slot_of(0x2001), vmx::slot_of(0x2000));  // HIGH half shares the full field's slot
  EXPECT_EQ(vmx::slot_of(0x6830), -1);                     // not a field
  EXPECT_EQ(vmx::slot_of(0x4001), -1);                     // HIGH of a 32-bit field
}

// The consteval pass catches each kind of bad row (tables typed here, not the header's).
namespace {
using fw = vmx::field_width;
using ft = vmx::field_type;
constexpr vmx::field_info good[] = {{"a", 0x681e, fw::natural, ft::guest}, {"b", 0x4402, fw::w32, ft::exit_info}};
constexpr vmx::field_info wrong_width[] = {{"a", 0x681e, fw::natural, ft::guest}, {"b", 0x6800, fw::w32, ft::guest}};
constexpr vmx::field_info wrong_group[] = {{"a", 0x6c16, fw::natural, ft::guest}};
constexpr vmx::field_info high_listed[] = {{"a", 0x2000, fw::w64, ft::control}, {"b", 0x2001, fw::w64, ft::control}};
constexpr vmx::field_info reserved_bit[] = {{"a", 0x1000, fw::w16, ft::control}};
constexpr vmx::field_info duplicate[] = {{"a", 0x0800, fw::w16, ft::guest}, {"b", 0x0802, fw::w16, ft::guest},
                                         {"c", 0x0800, fw::w16, ft::guest}};
}  // namespace
TEST(vmx_fields, consteval_pass_detects_bad_rows) {
  HVKIT_BOTH(vmx::first_invalid_field(good) == 2);
  HVKIT_BOTH(vmx::first_invalid_field(wrong_width) == 1);
  HVKIT_BOTH(vmx::first_invalid_field(wrong_group) == 0);
  HVKIT_BOTH(vmx::first_invalid_field(high_listed) == 1);
  HVKIT_BOTH(vmx::first_invalid_field(reserved_bit) == 0);
  HVKIT_BOTH(vmx::first_invalid_field(duplicate) == 2);
  HVKIT_BOTH(vmx::first_invalid_field() == vmx::field_count);
}

// Issue 23.9: explicit narrowing of run-time values. Widths from encoding bits 14:13 (SDM Vol.
// 3C 25.11.2): guest CS selector 0x0802 is 16 bits, the exception bitmap 0x4004 32 bits, the
// HIGH half of the EPT pointer 0x201b 32 bits, guest RIP 0x681e natural (64 bits on x86-64).
TEST(vmx_fields, narrow_truncate_fits) {
  namespace vmx = hvkit::vmx;
  namespace f = vmx::fields;
  using hvkit::test::rt;
  // Fits: the value, in the field's type.
  const auto a = vmx::narrow(f::guest_cs_selector, rt(std::uint64_t{0xffff}));
  ASSERT_TRUE(a);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(*a)>, std::uint16_t>);
  EXPECT_EQ(*a, 0xffffu);
  // One bit too many: a typed error naming the field, its width and the value.
  const auto b = vmx::narrow(f::guest_cs_selector, rt(std::uint64_t{0x1'0000}));
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error(), (vmx::field_overflow{0x0802, 0x1'0000}));
  EXPECT_EQ(b.error().bits(), 16u);
  // A negative int never fits, even a 64-bit field.
  const auto c = vmx::narrow(f::exception_bitmap, rt(-1));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().value, 0xffff'ffff'ffff'ffffu);
  EXPECT_EQ(c.error().bits(), 32u);
  EXPECT_FALSE(vmx::narrow(f::guest_rip, rt(-1)));
  EXPECT_EQ(vmx::narrow(f::exception_bitmap, rt(0x4'0000)).value(), 0x4'0000u);
  EXPECT_EQ(vmx::narrow(f::guest_rip, rt(std::uint64_t{~0ull})).value(), ~0ull);
  // HIGH access: 32 bits.
  EXPECT_FALSE(vmx::narrow(vmx::high_half(f::ept_pointer), rt(std::uint64_t{0x1'0000'0000})));
  EXPECT_EQ(vmx::narrow(vmx::high_half(f::ept_pointer), rt(std::uint64_t{0xffff'ffff})).value(), 0xffff'ffffu);
  // truncate: the low bits, as VMWRITE keeps them.
  EXPECT_EQ(vmx::truncate(f::guest_cs_selector, rt(std::uint64_t{0x12'3456})), 0x3456u);
  EXPECT_EQ(vmx::truncate(f::exception_bitmap, rt(-1)), 0xffff'ffffu);
  // fits(encoding, value) for raw writes.
  EXPECT_TRUE(vmx::fits(0x0802, rt(std::uint64_t{0xffff})));
  EXPECT_FALSE(vmx::fits(0x0802, rt(std::uint64_t{0x1'0000})));
  EXPECT_TRUE(vmx::fits(0x201b, rt(std::uint64_t{0xffff'ffff})));
  EXPECT_FALSE(vmx::fits(0x201b, rt(std::uint64_t{0x1'0000'0000})));
  EXPECT_TRUE(vmx::fits(0x681e, rt(~std::uint64_t{0})));
}
