# SPDX-License-Identifier: MIT
# vmx/: what must not compile (tests/compile_fail/CMakeLists.txt includes this file).
hvkit_add_compile_fail(vmx_write_read_only vmx_write_read_only.cpp "read-only VMCS field")
# The message names the field (GCC: field_name{"guest_cs_selector"}; Clang: its character
# codes, 103 117 101 = "gue") and its width, and says how to narrow.
hvkit_add_compile_fail(vmx_write_wrong_width vmx_write_wrong_width.cpp "run_time_integer_is_not_the_vmcs_field_type__narrow_it_with_vmx_narrow_or_vmx_truncate.*(field_name..guest_cs_selector|103, 117, 101, 115, 116, 95, 99, 115, 95, 115).*field_width::w16")
hvkit_add_compile_fail(vmx_write_int_into_32bit vmx_write_int_into_32bit.cpp "run_time_integer_is_not_the_vmcs_field_type__narrow_it_with_vmx_narrow_or_vmx_truncate.*(field_name..exception_bitmap|101, 120, 99, 101, 112, 116, 105, 111, 110).*field_width::w32")
hvkit_add_compile_fail(vmx_write_constant_too_wide vmx_write_constant_too_wide.cpp "integer_constant_does_not_fit_the_vmcs_field_width.*field_width::w")
hvkit_add_compile_fail(vmx_write_negative_constant vmx_write_negative_constant.cpp "integer_constant_does_not_fit_the_vmcs_field_width")
hvkit_add_compile_fail(vmx_write_cr4_as_cr0 vmx_write_cr4_as_cr0.cpp "VMCS field value type mismatch")
hvkit_add_compile_fail(vmx_read_wrong_width vmx_read_wrong_width.cpp "width mismatch")
hvkit_add_compile_fail(vmx_high_of_32bit vmx_high_of_32bit.cpp "high_half|constraints|no matching")
hvkit_add_compile_fail(vmx_malformed_field vmx_malformed_field.cpp "malformed VMCS field encoding")
hvkit_add_compile_fail(vmx_guest_owned_cr4_pae vmx_guest_owned_cr4_pae.cpp "CR4 bit that may never be guest-owned")
hvkit_add_compile_fail(vmx_dispatch_wrong_backend vmx_dispatch_wrong_backend.cpp "handler has an overload for this exit, but it cannot be called with the VMCS backend")
hvkit_add_compile_fail(vmx_dispatch_entry_failed_wrong_backend vmx_dispatch_entry_failed_wrong_backend.cpp "entry_failed cannot be called with the VMCS backend")
hvkit_add_compile_fail(vmx_write_eptp_address vmx_write_eptp_address.cpp "VMCS field value type mismatch")
