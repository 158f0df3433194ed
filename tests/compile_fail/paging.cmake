# SPDX-License-Identifier: MIT
# paging/ compile-fail tests (included by CMakeLists.txt in this folder).
hvkit_add_compile_fail(paging_rights_as_access paging_rights_as_access.cpp "pte_access|pfec")
hvkit_add_compile_fail(paging_role_swapped_crs paging_role_swapped_crs.cpp "cr4|cr0")
hvkit_add_compile_fail(paging_role_from_integer paging_role_from_integer.cpp "cpu_role|conversion")
hvkit_add_compile_fail(paging_guest_owned_pg paging_guest_owned_pg.cpp "CR0 bit that may never be guest-owned")
# CR4.SMEP handed to the guest: GCC reports every failed static_assert of guest_owned_set,
# Clang only the first ("may never be guest-owned"); either one proves the build breaks.
hvkit_add_compile_fail(paging_guest_owned_smep paging_guest_owned_smep.cpp
                       "guest-owned CR4 bit feeds the MMU role|CR4 bit that may never be guest-owned")
