// SPDX-License-Identifier: MIT
/// @file
/// @brief Every VMCS field of SDM Vol. 3D Appendix B as a typed constant
/// (`hvkit::vmx::fields::guest_rip`, ...), the field table, and the consteval pass that checks
/// every declared field against its encoding bits.
///
/// Each entry declares the width and group it is listed under in Appendix B; the check
/// compares them with what the encoding says (bits 14:13 and 11:10), that bit 0 (HIGH) is
/// clear, that the reserved bits are zero and that no encoding is listed twice. The value
/// type is never taken from the declaration: field<> derives it from the encoding.
/// Newer than the Appendix B revision the table was first typed from, and added from public
/// sources that agree: IA32_SPEC_CTRL mask/shadow (0x204A/0x204C, with the tertiary control
/// "virtualize IA32_SPEC_CTRL") and the FRED fields (injected/original event data, guest and
/// host IA32_FRED_* MSRs). Not listed: encodings no second source confirmed (see docs/vmx.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "field.hpp"

/// X-macro over every field: X(name, encoding, declared width, declared group).
/// Order: Appendix B sections B.1 to B.4 (16-bit, 64-bit, 32-bit, natural width).
#define HVKIT_VMX_FIELDS(X)                                        \
  /* B.1.1 16-bit control fields */                                \
  X(virtual_processor_id, 0x0000, w16, control)                    \
  X(posted_interrupt_notification_vector, 0x0002, w16, control)    \
  X(eptp_index, 0x0004, w16, control)                              \
  X(hlat_prefix_size, 0x0006, w16, control)                        \
  X(last_pid_pointer_index, 0x0008, w16, control)                  \
  /* B.1.2 16-bit guest-state fields */                            \
  X(guest_es_selector, 0x0800, w16, guest)                         \
  X(guest_cs_selector, 0x0802, w16, guest)                         \
  X(guest_ss_selector, 0x0804, w16, guest)                         \
  X(guest_ds_selector, 0x0806, w16, guest)                         \
  X(guest_fs_selector, 0x0808, w16, guest)                         \
  X(guest_gs_selector, 0x080a, w16, guest)                         \
  X(guest_ldtr_selector, 0x080c, w16, guest)                       \
  X(guest_tr_selector, 0x080e, w16, guest)                         \
  X(guest_interrupt_status, 0x0810, w16, guest)                    \
  X(guest_pml_index, 0x0812, w16, guest)                           \
  X(guest_uinv, 0x0814, w16, guest)                                \
  /* B.1.3 16-bit host-state fields */                             \
  X(host_es_selector, 0x0c00, w16, host)                           \
  X(host_cs_selector, 0x0c02, w16, host)                           \
  X(host_ss_selector, 0x0c04, w16, host)                           \
  X(host_ds_selector, 0x0c06, w16, host)                           \
  X(host_fs_selector, 0x0c08, w16, host)                           \
  X(host_gs_selector, 0x0c0a, w16, host)                           \
  X(host_tr_selector, 0x0c0c, w16, host)                           \
  /* B.2.1 64-bit control fields */                                \
  X(io_bitmap_a, 0x2000, w64, control)                             \
  X(io_bitmap_b, 0x2002, w64, control)                             \
  X(msr_bitmap, 0x2004, w64, control)                              \
  X(vm_exit_msr_store_address, 0x2006, w64, control)               \
  X(vm_exit_msr_load_address, 0x2008, w64, control)                \
  X(vm_entry_msr_load_address, 0x200a, w64, control)               \
  X(executive_vmcs_pointer, 0x200c, w64, control)                  \
  X(pml_address, 0x200e, w64, control)                             \
  X(tsc_offset, 0x2010, w64, control)                              \
  X(virtual_apic_page_address, 0x2012, w64, control)               \
  X(apic_access_address, 0x2014, w64, control)                     \
  X(posted_interrupt_descriptor_address, 0x2016, w64, control)     \
  X(vm_function_controls, 0x2018, w64, control)                    \
  X(ept_pointer, 0x201a, w64, control)                             \
  X(eoi_exit_bitmap_0, 0x201c, w64, control)                       \
  X(eoi_exit_bitmap_1, 0x201e, w64, control)                       \
  X(eoi_exit_bitmap_2, 0x2020, w64, control)                       \
  X(eoi_exit_bitmap_3, 0x2022, w64, control)                       \
  X(eptp_list_address, 0x2024, w64, control)                       \
  X(vmread_bitmap_address, 0x2026, w64, control)                   \
  X(vmwrite_bitmap_address, 0x2028, w64, control)                  \
  X(ve_information_address, 0x202a, w64, control)                  \
  X(xss_exiting_bitmap, 0x202c, w64, control)                      \
  X(encls_exiting_bitmap, 0x202e, w64, control)                    \
  X(sub_page_permission_table_pointer, 0x2030, w64, control)       \
  X(tsc_multiplier, 0x2032, w64, control)                          \
  X(tertiary_processor_based_controls, 0x2034, w64, control)       \
  X(enclv_exiting_bitmap, 0x2036, w64, control)                    \
  X(low_pasid_directory_address, 0x2038, w64, control)             \
  X(high_pasid_directory_address, 0x203a, w64, control)            \
  X(shared_eptp, 0x203c, w64, control)                             \
  X(pconfig_exiting_bitmap, 0x203e, w64, control)                  \
  X(hlat_pointer, 0x2040, w64, control)                            \
  X(pid_pointer_table_address, 0x2042, w64, control)               \
  X(secondary_vm_exit_controls, 0x2044, w64, control)              \
  X(ia32_spec_ctrl_mask, 0x204a, w64, control)                     \
  X(ia32_spec_ctrl_shadow, 0x204c, w64, control)                   \
  X(injected_event_data, 0x2052, w64, control)                     \
  /* B.2.2 64-bit read-only data field */                          \
  X(guest_physical_address, 0x2400, w64, exit_info)                \
  X(original_event_data, 0x2404, w64, exit_info)                   \
  /* B.2.3 64-bit guest-state fields */                            \
  X(vmcs_link_pointer, 0x2800, w64, guest)                         \
  X(guest_ia32_debugctl, 0x2802, w64, guest)                       \
  X(guest_ia32_pat, 0x2804, w64, guest)                            \
  X(guest_ia32_efer, 0x2806, w64, guest)                           \
  X(guest_ia32_perf_global_ctrl, 0x2808, w64, guest)               \
  X(guest_pdpte0, 0x280a, w64, guest)                              \
  X(guest_pdpte1, 0x280c, w64, guest)                              \
  X(guest_pdpte2, 0x280e, w64, guest)                              \
  X(guest_pdpte3, 0x2810, w64, guest)                              \
  X(guest_ia32_bndcfgs, 0x2812, w64, guest)                        \
  X(guest_ia32_rtit_ctl, 0x2814, w64, guest)                       \
  X(guest_ia32_lbr_ctl, 0x2816, w64, guest)                        \
  X(guest_ia32_pkrs, 0x2818, w64, guest)                           \
  X(guest_ia32_fred_config, 0x281a, w64, guest)                    \
  X(guest_ia32_fred_rsp1, 0x281c, w64, guest)                      \
  X(guest_ia32_fred_rsp2, 0x281e, w64, guest)                      \
  X(guest_ia32_fred_rsp3, 0x2820, w64, guest)                      \
  X(guest_ia32_fred_stklvls, 0x2822, w64, guest)                   \
  X(guest_ia32_fred_ssp1, 0x2824, w64, guest)                      \
  X(guest_ia32_fred_ssp2, 0x2826, w64, guest)                      \
  X(guest_ia32_fred_ssp3, 0x2828, w64, guest)                      \
  /* B.2.4 64-bit host-state fields */                             \
  X(host_ia32_pat, 0x2c00, w64, host)                              \
  X(host_ia32_efer, 0x2c02, w64, host)                             \
  X(host_ia32_perf_global_ctrl, 0x2c04, w64, host)                 \
  X(host_ia32_pkrs, 0x2c06, w64, host)                             \
  X(host_ia32_fred_config, 0x2c08, w64, host)                      \
  X(host_ia32_fred_rsp1, 0x2c0a, w64, host)                        \
  X(host_ia32_fred_rsp2, 0x2c0c, w64, host)                        \
  X(host_ia32_fred_rsp3, 0x2c0e, w64, host)                        \
  X(host_ia32_fred_stklvls, 0x2c10, w64, host)                     \
  X(host_ia32_fred_ssp1, 0x2c12, w64, host)                        \
  X(host_ia32_fred_ssp2, 0x2c14, w64, host)                        \
  X(host_ia32_fred_ssp3, 0x2c16, w64, host)                        \
  /* B.3.1 32-bit control fields */                                \
  X(pin_based_controls, 0x4000, w32, control)                      \
  X(primary_processor_based_controls, 0x4002, w32, control)        \
  X(exception_bitmap, 0x4004, w32, control)                        \
  X(page_fault_error_code_mask, 0x4006, w32, control)              \
  X(page_fault_error_code_match, 0x4008, w32, control)             \
  X(cr3_target_count, 0x400a, w32, control)                        \
  X(primary_vm_exit_controls, 0x400c, w32, control)                \
  X(vm_exit_msr_store_count, 0x400e, w32, control)                 \
  X(vm_exit_msr_load_count, 0x4010, w32, control)                  \
  X(vm_entry_controls, 0x4012, w32, control)                       \
  X(vm_entry_msr_load_count, 0x4014, w32, control)                 \
  X(vm_entry_interruption_info, 0x4016, w32, control)              \
  X(vm_entry_exception_error_code, 0x4018, w32, control)           \
  X(vm_entry_instruction_length, 0x401a, w32, control)             \
  X(tpr_threshold, 0x401c, w32, control)                           \
  X(secondary_processor_based_controls, 0x401e, w32, control)      \
  X(ple_gap, 0x4020, w32, control)                                 \
  X(ple_window, 0x4022, w32, control)                              \
  X(notify_window, 0x4024, w32, control)                           \
  /* B.3.2 32-bit read-only data fields */                         \
  X(vm_instruction_error, 0x4400, w32, exit_info)                  \
  X(exit_reason, 0x4402, w32, exit_info)                           \
  X(vm_exit_interruption_info, 0x4404, w32, exit_info)             \
  X(vm_exit_interruption_error_code, 0x4406, w32, exit_info)       \
  X(idt_vectoring_info, 0x4408, w32, exit_info)                    \
  X(idt_vectoring_error_code, 0x440a, w32, exit_info)              \
  X(vm_exit_instruction_length, 0x440c, w32, exit_info)            \
  X(vm_exit_instruction_info, 0x440e, w32, exit_info)              \
  /* B.3.3 32-bit guest-state fields */                            \
  X(guest_es_limit, 0x4800, w32, guest)                            \
  X(guest_cs_limit, 0x4802, w32, guest)                            \
  X(guest_ss_limit, 0x4804, w32, guest)                            \
  X(guest_ds_limit, 0x4806, w32, guest)                            \
  X(guest_fs_limit, 0x4808, w32, guest)                            \
  X(guest_gs_limit, 0x480a, w32, guest)                            \
  X(guest_ldtr_limit, 0x480c, w32, guest)                          \
  X(guest_tr_limit, 0x480e, w32, guest)                            \
  X(guest_gdtr_limit, 0x4810, w32, guest)                          \
  X(guest_idtr_limit, 0x4812, w32, guest)                          \
  X(guest_es_access_rights, 0x4814, w32, guest)                    \
  X(guest_cs_access_rights, 0x4816, w32, guest)                    \
  X(guest_ss_access_rights, 0x4818, w32, guest)                    \
  X(guest_ds_access_rights, 0x481a, w32, guest)                    \
  X(guest_fs_access_rights, 0x481c, w32, guest)                    \
  X(guest_gs_access_rights, 0x481e, w32, guest)                    \
  X(guest_ldtr_access_rights, 0x4820, w32, guest)                  \
  X(guest_tr_access_rights, 0x4822, w32, guest)                    \
  X(guest_interruptibility_state, 0x4824, w32, guest)              \
  X(guest_activity_state, 0x4826, w32, guest)                      \
  X(guest_smbase, 0x4828, w32, guest)                              \
  X(guest_ia32_sysenter_cs, 0x482a, w32, guest)                    \
  X(vmx_preemption_timer_value, 0x482e, w32, guest)                \
  /* B.3.4 32-bit host-state field */                              \
  X(host_ia32_sysenter_cs, 0x4c00, w32, host)                      \
  /* B.4.1 natural-width control fields */                         \
  X(cr0_guest_host_mask, 0x6000, natural, control)                 \
  X(cr4_guest_host_mask, 0x6002, natural, control)                 \
  X(cr0_read_shadow, 0x6004, natural, control)                     \
  X(cr4_read_shadow, 0x6006, natural, control)                     \
  X(cr3_target_value_0, 0x6008, natural, control)                  \
  X(cr3_target_value_1, 0x600a, natural, control)                  \
  X(cr3_target_value_2, 0x600c, natural, control)                  \
  X(cr3_target_value_3, 0x600e, natural, control)                  \
  /* B.4.2 natural-width read-only data fields */                  \
  X(exit_qualification, 0x6400, natural, exit_info)                \
  X(io_rcx, 0x6402, natural, exit_info)                            \
  X(io_rsi, 0x6404, natural, exit_info)                            \
  X(io_rdi, 0x6406, natural, exit_info)                            \
  X(io_rip, 0x6408, natural, exit_info)                            \
  X(guest_linear_address, 0x640a, natural, exit_info)              \
  /* B.4.3 natural-width guest-state fields */                     \
  X(guest_cr0, 0x6800, natural, guest)                             \
  X(guest_cr3, 0x6802, natural, guest)                             \
  X(guest_cr4, 0x6804, natural, guest)                             \
  X(guest_es_base, 0x6806, natural, guest)                         \
  X(guest_cs_base, 0x6808, natural, guest)                         \
  X(guest_ss_base, 0x680a, natural, guest)                         \
  X(guest_ds_base, 0x680c, natural, guest)                         \
  X(guest_fs_base, 0x680e, natural, guest)                         \
  X(guest_gs_base, 0x6810, natural, guest)                         \
  X(guest_ldtr_base, 0x6812, natural, guest)                       \
  X(guest_tr_base, 0x6814, natural, guest)                         \
  X(guest_gdtr_base, 0x6816, natural, guest)                       \
  X(guest_idtr_base, 0x6818, natural, guest)                       \
  X(guest_dr7, 0x681a, natural, guest)                             \
  X(guest_rsp, 0x681c, natural, guest)                             \
  X(guest_rip, 0x681e, natural, guest)                             \
  X(guest_rflags, 0x6820, natural, guest)                          \
  X(guest_pending_debug_exceptions, 0x6822, natural, guest)        \
  X(guest_ia32_sysenter_esp, 0x6824, natural, guest)               \
  X(guest_ia32_sysenter_eip, 0x6826, natural, guest)               \
  X(guest_ia32_s_cet, 0x6828, natural, guest)                      \
  X(guest_ssp, 0x682a, natural, guest)                             \
  X(guest_ia32_interrupt_ssp_table_addr, 0x682c, natural, guest)   \
  /* B.4.4 natural-width host-state fields */                      \
  X(host_cr0, 0x6c00, natural, host)                               \
  X(host_cr3, 0x6c02, natural, host)                               \
  X(host_cr4, 0x6c04, natural, host)                               \
  X(host_fs_base, 0x6c06, natural, host)                           \
  X(host_gs_base, 0x6c08, natural, host)                           \
  X(host_tr_base, 0x6c0a, natural, host)                           \
  X(host_gdtr_base, 0x6c0c, natural, host)                         \
  X(host_idtr_base, 0x6c0e, natural, host)                         \
  X(host_ia32_sysenter_esp, 0x6c10, natural, host)                 \
  X(host_ia32_sysenter_eip, 0x6c12, natural, host)                 \
  X(host_rsp, 0x6c14, natural, host)                               \
  X(host_rip, 0x6c16, natural, host)                               \
  X(host_ia32_s_cet, 0x6c18, natural, host)                        \
  X(host_ssp, 0x6c1a, natural, host)                               \
  X(host_ia32_interrupt_ssp_table_addr, 0x6c1c, natural, host)

namespace hvkit::vmx {

/// The typed constants: `vmx::fields::guest_rip` is a `field<0x681e>`.
namespace fields {
#define HVKIT_VMX_DETAIL_DECLARE(name, enc, w, g) inline constexpr field<enc> name{};
HVKIT_VMX_FIELDS(HVKIT_VMX_DETAIL_DECLARE)
#undef HVKIT_VMX_DETAIL_DECLARE
}  // namespace fields

namespace detail {
template <auto F, class T>
inline constexpr bool holds = std::is_same_v<typename std::remove_cvref_t<decltype(F)>::typed_type, T>;
}  // namespace detail
// The typed_type table of field.hpp (by encoding) against the names of Appendix B.
static_assert(detail::holds<fields::guest_cr0, x86::cr0> && detail::holds<fields::host_cr0, x86::cr0> &&
              detail::holds<fields::cr0_read_shadow, x86::cr0> && detail::holds<fields::cr0_guest_host_mask, x86::cr0>);
static_assert(detail::holds<fields::guest_cr4, x86::cr4> && detail::holds<fields::host_cr4, x86::cr4> &&
              detail::holds<fields::cr4_read_shadow, x86::cr4> && detail::holds<fields::cr4_guest_host_mask, x86::cr4>);
static_assert(detail::holds<fields::guest_cr3, x86::cr3> && detail::holds<fields::host_cr3, x86::cr3> &&
              detail::holds<fields::cr3_target_value_0, x86::cr3> && detail::holds<fields::cr3_target_value_3, x86::cr3>);
static_assert(detail::holds<fields::guest_ia32_efer, x86::efer> && detail::holds<fields::host_ia32_efer, x86::efer>);
static_assert(detail::holds<fields::guest_rflags, x86::rflags>);
static_assert(detail::holds<fields::ept_pointer, paging::ept_pointer>);
static_assert(detail::holds<fields::guest_es_selector, x86::selector> && detail::holds<fields::guest_tr_selector, x86::selector> &&
              detail::holds<fields::guest_ldtr_selector, x86::selector> && detail::holds<fields::host_es_selector, x86::selector> &&
              detail::holds<fields::host_tr_selector, x86::selector>);
// Neighbours that hold no register.
static_assert(detail::holds<fields::guest_interrupt_status, void> && detail::holds<fields::host_rip, void> &&
              detail::holds<fields::guest_rip, void> && detail::holds<fields::guest_pdpte0, void>);

/// One row of the field table.
struct field_info {
  const char* name;
  std::uint32_t encoding;
  field_width declared_width;
  field_type declared_type;
};

/// Every field, in Appendix B order.
inline constexpr field_info field_table[] = {
#define HVKIT_VMX_DETAIL_ROW(name, enc, w, g) field_info{#name, enc, field_width::w, field_type::g},
    HVKIT_VMX_FIELDS(HVKIT_VMX_DETAIL_ROW)
#undef HVKIT_VMX_DETAIL_ROW
};

/// How many fields the table holds.
inline constexpr std::size_t field_count = sizeof(field_table) / sizeof(field_table[0]);

namespace detail {
/// Largest index (bits 9:1) used by a listed field; sizes the encoding -> slot lookup.
inline constexpr unsigned slot_index_limit = 64;
}  // namespace detail

/// The consteval validation pass over a field table: every declared row against its encoding
/// bits. Returns the position of the first bad row, or N if all rows are good.
template <std::size_t N>
[[nodiscard]] consteval std::size_t first_invalid_field(const field_info (&table)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    const auto& f = table[i];
    if (!is_well_formed(f.encoding)) return i;
    if (is_high_access(f.encoding)) return i;  // HIGH halves are derived, never listed
    if (width_of(f.encoding) != f.declared_width) return i;
    if (type_of(f.encoding) != f.declared_type) return i;
    if (index_of(f.encoding) >= detail::slot_index_limit) return i;
    for (std::size_t j = 0; j < i; ++j)
      if (table[j].encoding == f.encoding) return i;
  }
  return N;
}
/// The pass over hvkit's own table.
[[nodiscard]] consteval std::size_t first_invalid_field() { return first_invalid_field(field_table); }
static_assert(first_invalid_field() == field_count,
              "a VMCS field's declared width or group disagrees with its encoding bits");

/// The table row for `encoding` (full or HIGH access), or nullptr if it is not a listed field.
[[nodiscard]] constexpr const field_info* find_field(std::uint32_t encoding) noexcept {
  const std::uint32_t full = encoding & ~1u;
  for (const auto& f : field_table)
    if (f.encoding == full && (encoding == full || f.declared_width == field_width::w64)) return &f;
  return nullptr;
}

namespace detail {
/// Dense lookup: [width][type][index] -> position in field_table, or -1.
struct slot_lookup {
  std::array<std::int16_t, 4 * 4 * slot_index_limit> slot{};
  [[nodiscard]] static constexpr std::size_t key(std::uint32_t enc) noexcept {
    return (static_cast<std::size_t>(width_of(enc)) * 4 + static_cast<std::size_t>(type_of(enc))) *
               slot_index_limit +
           index_of(enc);
  }
};
consteval slot_lookup make_slot_lookup() {
  slot_lookup t;
  for (auto& s : t.slot) s = -1;
  for (std::size_t i = 0; i < field_count; ++i)
    t.slot[slot_lookup::key(field_table[i].encoding)] = static_cast<std::int16_t>(i);
  return t;
}
inline constexpr slot_lookup slots = make_slot_lookup();
}  // namespace detail

/// Position of the field `encoding` names (full or HIGH access) in field_table, or -1 if the
/// encoding names no listed field (VMREAD/VMWRITE would fail with VM-instruction error 12).
[[nodiscard]] constexpr int slot_of(std::uint32_t encoding) noexcept {
  if (!is_well_formed(encoding) || index_of(encoding) >= detail::slot_index_limit) return -1;
  return detail::slots.slot[detail::slot_lookup::key(encoding)];
}

/// Position of a typed field in field_table (a compile-time constant).
template <std::uint32_t E>
inline constexpr std::size_t slot_v = [] {
  constexpr int s = slot_of(E);
  static_assert(s >= 0, "field<> not listed in the field table");
  return static_cast<std::size_t>(s);
}();

}  // namespace hvkit::vmx
