// SPDX-License-Identifier: MIT
/// @file
/// @brief The checks on the VM-execution, VM-exit and VM-entry control fields (SDM Vol. 3C
/// 27.2.1.1-27.2.1.3). Failing any of them: VMfailValid, VM-instruction error 7.
#pragma once

#include <array>
#include <cstdint>

#include "ept_entry.hpp"
#include "vm_entry_rule.hpp"

namespace hvkit::vmx {

namespace entry_rules {

inline constexpr const char* sec_exec = "27.2.1.1";
inline constexpr const char* sec_exit = "27.2.1.2";
inline constexpr const char* sec_entry = "27.2.1.3";
inline constexpr auto ctl = vm_entry_phase::controls;

/// Event injection in protected mode: "unrestricted guest" = 0 or CR0.PE = 1 (SDM 27.2.1.3).
[[nodiscard]] constexpr bool injection_in_protected_mode(const S& s) noexcept {
  return !s.unrestricted_guest() || s.guest_cr0.test(x86::cr0::pe);
}
/// The vector is an exception that pushes an error code: #DF, #TS, #NP, #SS, #GP, #PF, #AC,
/// and #CP on a processor with CET (the "load CET state" entry control may be 1).
[[nodiscard]] constexpr bool pushes_error_code(unsigned v, const E& e) noexcept {
  const bool cet = e.caps.entry_caps().may_be_one & entry_controls::load_cet_state.raw();
  return v == 8 || (v >= 10 && v <= 14) || v == 17 || (v == 21 && cet);
}
/// IA32_VMX_BASIC bit 56: hardware exceptions may be injected with or without an error code.
[[nodiscard]] constexpr bool any_exception_error_code(const E& e) noexcept { return (e.caps.basic >> 56) & 1u; }
[[nodiscard]] constexpr bool injection_requires_error_code(const S& s, const E& e) noexcept {
  const auto i = s.entry_interruption_info;
  return injection_in_protected_mode(s) && intr_type(i) == intr_type_hw_exception && !any_exception_error_code(e) &&
         pushes_error_code(intr_vector(i), e);
}
[[nodiscard]] constexpr bool injection_forbids_error_code(const S& s, const E& e) noexcept {
  const auto i = s.entry_interruption_info;
  if (!injection_in_protected_mode(s) || intr_type(i) != intr_type_hw_exception) return true;
  return !any_exception_error_code(e) && !pushes_error_code(intr_vector(i), e);
}

/// The rules of SDM 27.2.1, in the order the SDM lists them.
inline constexpr std::array control_rules{
    // ---- 27.2.1.1 VM-execution control fields ----
    vm_entry_rule{{"pin_based_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.pin.raw(), e.caps.pin_caps()) ? entry_fail(f::pin_based_controls, s.pin.raw()) : entry_pass();
    }},
    vm_entry_rule{{"primary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.proc.raw(), e.caps.primary_caps()) ? entry_fail(f::primary_processor_based_controls, s.proc.raw())
                                                           : entry_pass();
    }},
    vm_entry_rule{{"secondary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.proc.test(p1::activate_secondary_controls)) return entry_pass();
      return violates(s.proc2_raw.raw(), e.caps.secondary_caps())
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"tertiary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.proc.test(p1::activate_tertiary_controls)) return entry_pass();
      return (s.proc3_raw & ~e.caps.tertiary_allowed1()).none()
                 ? entry_pass()
                 : entry_fail(f::tertiary_processor_based_controls, s.proc3_raw.raw());
    }},
    // The CR3-target count is at most the number of CR3-target values the CPU supports
    // (IA32_VMX_MISC bits 24:16, SDM A.6).
    vm_entry_rule{{"cr3_target_count_too_large", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto max = static_cast<std::uint32_t>((e.caps.misc >> 16) & 0x1ffu);
      return s.cr3_target_count > max ? entry_fail(f::cr3_target_count, s.cr3_target_count) : entry_pass();
    }},
    vm_entry_rule{{"io_bitmap_a_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_io_bitmaps) && bad_page_address(s.io_bitmap_a, e) ? entry_fail(f::io_bitmap_a, s.io_bitmap_a)
                                                                                   : entry_pass();
    }},
    vm_entry_rule{{"io_bitmap_b_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_io_bitmaps) && bad_page_address(s.io_bitmap_b, e) ? entry_fail(f::io_bitmap_b, s.io_bitmap_b)
                                                                                   : entry_pass();
    }},
    vm_entry_rule{{"msr_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_msr_bitmaps) && bad_page_address(s.msr_bitmap, e) ? entry_fail(f::msr_bitmap, s.msr_bitmap)
                                                                                    : entry_pass();
    }},
    vm_entry_rule{{"virtual_apic_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_tpr_shadow) && bad_page_address(s.virtual_apic_address, e)
                 ? entry_fail(f::virtual_apic_page_address, s.virtual_apic_address)
                 : entry_pass();
    }},
    // With "use TPR shadow" and without "virtual-interrupt delivery": TPR threshold bits
    // 31:4 are 0 ...
    vm_entry_rule{{"tpr_threshold_reserved", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.proc.test(p1::use_tpr_shadow) && !s.secondary().test(p2::virtual_interrupt_delivery) &&
                     (s.tpr_threshold >> 4) != 0
                 ? entry_fail(f::tpr_threshold, s.tpr_threshold)
                 : entry_pass();
    }},
    // ... and, also without "virtualize APIC accesses", bits 3:0 are not greater than VTPR
    // bits 7:4 (byte 80H of the virtual-APIC page; needs the memory view).
    vm_entry_rule{{"tpr_threshold_above_vtpr", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      const auto p = s.secondary();
      return s.proc.test(p1::use_tpr_shadow) && s.vtpr_known && !p.test(p2::virtual_interrupt_delivery) &&
                     !p.test(p2::virtualize_apic_accesses) && (s.tpr_threshold & 0xfu) > (s.vtpr >> 4)
                 ? entry_fail(f::tpr_threshold, s.tpr_threshold)
                 : entry_pass();
    }},
    // Without "use TPR shadow": "virtualize x2APIC mode", "APIC-register virtualization" and
    // "virtual-interrupt delivery" are 0.
    vm_entry_rule{{"apic_virtualization_without_tpr_shadow", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return !s.proc.test(p1::use_tpr_shadow) &&
                     s.secondary().any(p2::virtualize_x2apic_mode | p2::apic_register_virtualization |
                                       p2::virtual_interrupt_delivery)
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"x2apic_mode_with_apic_access_virtualization", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::virtualize_x2apic_mode | p2::virtualize_apic_accesses)
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"virtual_interrupt_delivery_without_external_interrupt_exiting", sec_exec, ctl},
                  [](const S& s, const E&) noexcept -> H {
                    return s.secondary().test(p2::virtual_interrupt_delivery) &&
                                   !s.pin.test(pin_based::external_interrupt_exiting)
                               ? entry_fail(f::pin_based_controls, s.pin.raw())
                               : entry_pass();
                  }},
    vm_entry_rule{{"posted_interrupts_without_virtual_interrupt_delivery", sec_exec, ctl},
                  [](const S& s, const E&) noexcept -> H {
                    return s.pin.test(pin_based::process_posted_interrupts) &&
                                   !s.secondary().test(p2::virtual_interrupt_delivery)
                               ? entry_fail(f::pin_based_controls, s.pin.raw())
                               : entry_pass();
                  }},
    vm_entry_rule{{"posted_interrupts_without_acknowledge_on_exit", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) && !s.exit.test(exit_controls::acknowledge_interrupt_on_exit)
                 ? entry_fail(f::primary_vm_exit_controls, s.exit.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"posted_interrupt_vector_reserved", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) && (s.posted_interrupt_vector >> 8) != 0
                 ? entry_fail(f::posted_interrupt_notification_vector, s.posted_interrupt_vector)
                 : entry_pass();
    }},
    vm_entry_rule{{"posted_interrupt_descriptor_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) &&
                     ((s.posted_interrupt_descriptor & 0x3fu) != 0 || beyond_maxphyaddr(s.posted_interrupt_descriptor, e))
                 ? entry_fail(f::posted_interrupt_descriptor_address, s.posted_interrupt_descriptor)
                 : entry_pass();
    }},
    vm_entry_rule{{"virtual_nmis_without_nmi_exiting", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::virtual_nmis) && !s.pin.test(pin_based::nmi_exiting)
                 ? entry_fail(f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"nmi_window_exiting_without_virtual_nmis", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.proc.test(p1::nmi_window_exiting) && !s.pin.test(pin_based::virtual_nmis)
                 ? entry_fail(f::primary_processor_based_controls, s.proc.raw(), f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"apic_access_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::virtualize_apic_accesses) && bad_page_address(s.apic_access_address, e)
                 ? entry_fail(f::apic_access_address, s.apic_access_address)
                 : entry_pass();
    }},
    vm_entry_rule{{"vpid_zero", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_vpid) && s.vpid == 0 ? entry_fail(f::virtual_processor_id, s.vpid) : entry_pass();
    }},
    // The EPTP: vmx::check_eptp (memory type, page-walk length, A/D, reserved bits, width).
    vm_entry_rule{{"eptp_invalid", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.ept()) return entry_pass();
      return check_eptp(paging::ept_pointer{s.eptp}, ept_capabilities_from(e.caps.ept_vpid_cap, e.maxphyaddr)).has_value()
                 ? entry_pass()
                 : entry_fail(f::ept_pointer, s.eptp);
    }},
    vm_entry_rule{{"pml_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_pml) && !s.ept() ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                                                            : entry_pass();
    }},
    vm_entry_rule{{"pml_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_pml) && bad_page_address(s.pml_address, e) ? entry_fail(f::pml_address, s.pml_address)
                                                                                      : entry_pass();
    }},
    vm_entry_rule{{"unrestricted_guest_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.unrestricted_guest() && !s.ept() ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                                                : entry_pass();
    }},
    vm_entry_rule{{"mode_based_execute_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::mode_based_execute_control) && !s.ept()
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"sub_page_permissions_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::sub_page_write_permissions) && !s.ept()
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    // VM functions: only bits IA32_VMX_VMFUNC allows (SDM A.11); EPTP switching needs EPT
    // and a valid EPTP-list address.
    vm_entry_rule{{"vm_function_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & ~e.caps.vmfunc) != 0
                 ? entry_fail(f::vm_function_controls, s.vm_function_controls)
                 : entry_pass();
    }},
    vm_entry_rule{{"eptp_switching_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & 1u) && !s.ept()
                 ? entry_fail(f::vm_function_controls, s.vm_function_controls)
                 : entry_pass();
    }},
    vm_entry_rule{{"eptp_list_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & 1u) &&
                     bad_page_address(s.eptp_list_address, e)
                 ? entry_fail(f::eptp_list_address, s.eptp_list_address)
                 : entry_pass();
    }},
    vm_entry_rule{{"vmread_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::vmcs_shadowing) && bad_page_address(s.vmread_bitmap, e)
                 ? entry_fail(f::vmread_bitmap_address, s.vmread_bitmap)
                 : entry_pass();
    }},
    vm_entry_rule{{"vmwrite_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::vmcs_shadowing) && bad_page_address(s.vmwrite_bitmap, e)
                 ? entry_fail(f::vmwrite_bitmap_address, s.vmwrite_bitmap)
                 : entry_pass();
    }},
    vm_entry_rule{{"ve_information_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::ept_violation_ve) && bad_page_address(s.ve_information_address, e)
                 ? entry_fail(f::ve_information_address, s.ve_information_address)
                 : entry_pass();
    }},

    // ---- 27.2.1.2 VM-exit control fields ----
    vm_entry_rule{{"exit_controls_reserved", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.exit.raw(), e.caps.exit_caps()) ? entry_fail(f::primary_vm_exit_controls, s.exit.raw()) : entry_pass();
    }},
    vm_entry_rule{{"save_preemption_timer_without_activate", sec_exit, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.exit.test(exit_controls::save_preemption_timer) && !s.pin.test(pin_based::activate_preemption_timer)
                 ? entry_fail(f::primary_vm_exit_controls, s.exit.raw(), f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"exit_msr_store_area", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.exit_msr_store_address, s.exit_msr_store_count, e)
                 ? entry_fail(f::vm_exit_msr_store_address, s.exit_msr_store_address, f::vm_exit_msr_store_count,
                              s.exit_msr_store_count)
                 : entry_pass();
    }},
    vm_entry_rule{{"exit_msr_load_area", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.exit_msr_load_address, s.exit_msr_load_count, e)
                 ? entry_fail(f::vm_exit_msr_load_address, s.exit_msr_load_address, f::vm_exit_msr_load_count,
                              s.exit_msr_load_count)
                 : entry_pass();
    }},

    // ---- 27.2.1.3 VM-entry control fields ----
    vm_entry_rule{{"entry_controls_reserved", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.entry.raw(), e.caps.entry_caps()) ? entry_fail(f::vm_entry_controls, s.entry.raw()) : entry_pass();
    }},
    // Event injection (valid bit set): type 1 is reserved; type 7 (other event) only if
    // the monitor trap flag is supported (allowed-1 of primary control bit 27).
    vm_entry_rule{{"injection_type_reserved", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto i = s.entry_interruption_info;
      if (!intr_valid(i)) return entry_pass();
      const bool mtf = e.caps.primary_caps().may_be_one & p1::monitor_trap_flag.raw();
      return intr_type(i) == 1 || (intr_type(i) == intr_type_other && !mtf) ? entry_fail(f::vm_entry_interruption_info, i)
                                                                            : entry_pass();
    }},
    // NMI: vector 2; hardware exception: vector at most 31; other event: vector 0.
    vm_entry_rule{{"injection_vector", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      const auto i = s.entry_interruption_info;
      if (!intr_valid(i)) return entry_pass();
      const unsigned t = intr_type(i), v = intr_vector(i);
      const bool bad = (t == intr_type_nmi && v != 2) || (t == intr_type_hw_exception && v > 31) ||
                       (t == intr_type_other && v != 0);
      return bad ? entry_fail(f::vm_entry_interruption_info, i) : entry_pass();
    }},
    // Deliver-error-code (bit 11): 1 for a hardware exception that pushes an error code
    // (8, 10-14, 17; 21 with CET) delivered in protected mode (unrestricted guest with CR0.PE
    // = 0 is real mode: no error code); 0 for every other event. With IA32_VMX_BASIC bit 56
    // (SDM A.1) a hardware exception may be delivered with or without an error code,
    // whatever its vector.
    vm_entry_rule{{"injection_error_code_missing", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto i = s.entry_interruption_info;
      if (!intr_valid(i) || intr_deliver_error_code(i)) return entry_pass();
      return injection_requires_error_code(s, e) ? entry_fail(f::vm_entry_interruption_info, i, f::guest_cr0, s.guest_cr0.raw())
                                                 : entry_pass();
    }},
    vm_entry_rule{{"injection_error_code_unexpected", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto i = s.entry_interruption_info;
      if (!intr_valid(i) || !intr_deliver_error_code(i)) return entry_pass();
      return injection_forbids_error_code(s, e) ? entry_fail(f::vm_entry_interruption_info, i, f::guest_cr0, s.guest_cr0.raw())
                                                : entry_pass();
    }},
    vm_entry_rule{{"injection_info_reserved", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      const auto i = s.entry_interruption_info;
      return intr_valid(i) && (i & 0x7fff'f000u) != 0 ? entry_fail(f::vm_entry_interruption_info, i) : entry_pass();
    }},
    vm_entry_rule{{"injection_error_code_reserved", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      const auto i = s.entry_interruption_info;
      return intr_valid(i) && intr_deliver_error_code(i) && (s.entry_exception_error_code >> 16) != 0
                 ? entry_fail(f::vm_entry_exception_error_code, s.entry_exception_error_code)
                 : entry_pass();
    }},
    // Software interrupts and exceptions: instruction length 1-15 (0 allowed if
    // IA32_VMX_MISC bit 30).
    vm_entry_rule{{"injection_instruction_length", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto i = s.entry_interruption_info;
      if (!intr_valid(i)) return entry_pass();
      const unsigned t = intr_type(i);
      if (t != intr_type_sw_interrupt && t != intr_type_privileged_sw_exception && t != intr_type_sw_exception)
        return entry_pass();
      const bool zero_ok = (e.caps.misc >> 30) & 1u;
      const auto n = s.entry_instruction_length;
      return n > 15 || (n == 0 && !zero_ok) ? entry_fail(f::vm_entry_instruction_length, n) : entry_pass();
    }},
    vm_entry_rule{{"entry_msr_load_area", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.entry_msr_load_address, s.entry_msr_load_count, e)
                 ? entry_fail(f::vm_entry_msr_load_address, s.entry_msr_load_address, f::vm_entry_msr_load_count,
                              s.entry_msr_load_count)
                 : entry_pass();
    }},
    // Outside SMM, "entry to SMM" and "deactivate dual-monitor treatment" are 0.
    vm_entry_rule{{"smm_controls_outside_smm", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.entry.any(entry_controls::entry_to_smm | entry_controls::deactivate_dual_monitor)
                 ? entry_fail(f::vm_entry_controls, s.entry.raw())
                 : entry_pass();
    }},
};
}  // namespace entry_rules

}  // namespace hvkit::vmx
