# SPDX-License-Identifier: MIT
# emulate/'s vendor-neutral core includes no vmx/ or svm/ header (design rule 6: x86 <- paging,
# cpuid <- vmx, svm and emulate's core side by side <- thin adapters). The adapters that sit on
# a vendor's state, emulate/vmcs_context.hpp and emulate/vmcb_context.hpp, are the exceptions.
# Every #include line of every other header under include/emulate (hosted/ too) is checked;
# the transitive closure follows, since the headers it may name are x86/, paging/ and emulate's own.
file(GLOB_RECURSE headers RELATIVE ${INC}/emulate ${INC}/emulate/*.hpp)
set(errors "")
foreach(h ${headers})
  if(h MATCHES "^(vmcs|vmcb)_context\\.hpp$")
    continue()
  endif()
  file(STRINGS ${INC}/emulate/${h} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(l ${lines})
    if(l MATCHES "(vmx|svm)/")
      string(APPEND errors "  emulate/${h}: ${l}\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "emulate/'s vendor-neutral core includes vendor headers:\n${errors}")
endif()
list(LENGTH headers n)
message(STATUS "emulate layering: ${n} headers, none of the core includes vmx/ or svm/")
