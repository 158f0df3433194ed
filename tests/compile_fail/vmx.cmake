# SPDX-License-Identifier: MIT
# vmx/: what must not compile (tests/compile_fail/CMakeLists.txt includes this file).
hvkit_add_compile_fail(vmx_write_read_only vmx_write_read_only.cpp "read-only VMCS field")
hvkit_add_compile_fail(vmx_write_wrong_width vmx_write_wrong_width.cpp "not usable in a constant expression|is not a constant expression")
hvkit_add_compile_fail(vmx_write_constant_too_wide vmx_write_constant_too_wide.cpp "integer_constant_does_not_fit_the_vmcs_field_width")
hvkit_add_compile_fail(vmx_write_negative_constant vmx_write_negative_constant.cpp "integer_constant_does_not_fit_the_vmcs_field_width")
hvkit_add_compile_fail(vmx_write_cr4_as_cr0 vmx_write_cr4_as_cr0.cpp "VMCS field value type mismatch")
hvkit_add_compile_fail(vmx_read_wrong_width vmx_read_wrong_width.cpp "width mismatch")
hvkit_add_compile_fail(vmx_high_of_32bit vmx_high_of_32bit.cpp "high_half|constraints|no matching")
hvkit_add_compile_fail(vmx_malformed_field vmx_malformed_field.cpp "malformed VMCS field encoding")
hvkit_add_compile_fail(vmx_guest_owned_cr4_pae vmx_guest_owned_cr4_pae.cpp "CR4 bit that may never be guest-owned")
hvkit_add_compile_fail(vmx_dispatch_wrong_backend vmx_dispatch_wrong_backend.cpp "handler has an overload for this exit, but it cannot be called with the VMCS backend")
hvkit_add_compile_fail(vmx_dispatch_entry_failed_wrong_backend vmx_dispatch_entry_failed_wrong_backend.cpp "entry_failed cannot be called with the VMCS backend")
