# SPDX-License-Identifier: MIT
# Compile-fail tests of the page walkers (paging/walker.hpp, paging/guest_memory.hpp).
hvkit_add_compile_fail(paging_walk_dump_cmpxchg paging_walk_dump_cmpxchg.cpp "cmpxchg64|constraints|satisf")
hvkit_add_compile_fail(paging_walk_gpa_as_gva paging_walk_gpa_as_gva.cpp "gva|address|no match|no viable")
hvkit_add_compile_fail(paging_ept_translate_request paging_ept_translate_request.cpp "deleted")
hvkit_add_compile_fail(paging_pae_without_pdptes paging_pae_without_pdptes.cpp "no matching|constraints|satisf")
hvkit_add_compile_fail(paging_ept_root_gpa paging_ept_root_gpa.cpp "gpa_tag[^ ]* to [^ ]*hpa_tag|could not convert|no matching")
hvkit_add_compile_fail(paging_cpu_properties_positional paging_cpu_properties_positional.cpp "by_name_only|could not convert|no viable|cannot convert|no matching")
hvkit_add_compile_fail(paging_npt_ncr3_gpa paging_npt_ncr3_gpa.cpp "gpa_tag[^ ]* to [^ ]*hpa_tag|could not convert|no matching|no viable")
hvkit_add_compile_fail(paging_npt_ncr3_integer paging_npt_ncr3_integer.cpp "could not convert|no matching|no viable|cannot convert")
hvkit_add_compile_fail(paging_ept_output_as_gpa paging_ept_output_as_gpa.cpp "hpa_tag[^ ]* to [^ ]*gpa_tag|conversion from|no viable|cannot convert")
hvkit_add_compile_fail(paging_nested_l1_as_gpa paging_nested_l1_as_gpa.cpp "no match for .operator=|no viable overloaded|hpa_tag")
hvkit_add_compile_fail(paging_guest_output_as_hpa paging_guest_output_as_hpa.cpp "gpa_tag[^ ]* to [^ ]*hpa_tag|could not convert|no matching|no viable")
# Second-stage outputs and tables are host-physical in every result type: an EPT
# enumeration's pages (output and leaf entry) and a second-stage fault's entry address.
hvkit_add_compile_fail(paging_ept_mapping_output_as_gpa paging_ept_mapping_output_as_gpa.cpp "hpa_tag[^ ]* to [^ ]*gpa_tag|conversion from|no viable|cannot convert")
hvkit_add_compile_fail(paging_ept_mapping_entry_as_gpa paging_ept_mapping_entry_as_gpa.cpp "hpa_tag[^ ]* to [^ ]*gpa_tag|conversion from|no viable|cannot convert")
hvkit_add_compile_fail(paging_ept_fault_entry_as_gpa paging_ept_fault_entry_as_gpa.cpp "conversion from .*fault_entry_address.* to .*gpa")
