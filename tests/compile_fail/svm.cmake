# SPDX-License-Identifier: MIT
# svm/: what must not compile (tests/compile_fail/CMakeLists.txt includes this file).
hvkit_add_compile_fail(svm_write_read_only svm_write_read_only.cpp "read-only VMCB field")
# The message names the field (GCC: field_name{"guest_asid"}; Clang: character codes, 103 117 101 = "gue") and its width in bits.
hvkit_add_compile_fail(svm_write_wrong_width svm_write_wrong_width.cpp "run_time_integer_is_not_the_vmcb_field_type__narrow_it_with_svm_narrow_or_svm_truncate.*(field_name..guest_asid|103, 117, 101, 115, 116, 95, 97, 115, 105, 100).*32")
hvkit_add_compile_fail(svm_write_constant_too_wide svm_write_constant_too_wide.cpp "integer_constant_does_not_fit_the_vmcb_field_width")
hvkit_add_compile_fail(svm_write_cr4_as_cr0 svm_write_cr4_as_cr0.cpp "VMCB field value type mismatch")
hvkit_add_compile_fail(svm_field_in_reserved svm_field_in_reserved.cpp "VMCB field in a reserved area")
hvkit_add_compile_fail(svm_field_misaligned svm_field_misaligned.cpp "naturally aligned")
hvkit_add_compile_fail(svm_guest_owned_pg svm_guest_owned_pg.cpp "CR0 bit that may never be guest-owned|feeds the MMU role")
