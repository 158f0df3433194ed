# SPDX-License-Identifier: MIT
# Doxygen input filter for the Markdown pages (Doxyfile FILTER_PATTERNS; Doxygen runs
# "cmake -P doxygen_md_filter.cmake <page>" and reads the page from standard output).
# A page links an API entry for GitHub readers to its header,
#   [`paging::mmu_context`](../include/paging/mmu.hpp),
# and in the generated documentation the same link goes to the entry itself
# (@ref hvkit::paging::mmu_context). A name written without its namespace,
# [`mmu_context`](../include/paging/mmu.hpp), takes it from the header's directory. A name that does not resolve is a Doxygen warning, and
# the docs target treats warnings as errors: a page cannot name an entry that does not exist.
file(READ "${CMAKE_ARGV3}" text)
string(REGEX REPLACE
       "\\[`((x86|paging|cpuid|vmx|emulate)::[A-Za-z0-9_:]+)(\\(?\\)?)`\\]\\(\\.\\./include/[A-Za-z0-9_./-]*\\)"
       "[`\\1\\3`](@ref hvkit::\\1)" text "${text}")
string(REGEX REPLACE
       "\\[`([A-Za-z0-9_:]+)(\\(?\\)?)`\\]\\(\\.\\./include/([a-z0-9]+)/[A-Za-z0-9_./-]*\\)"
       "[`\\1\\2`](@ref hvkit::\\3::\\1)" text "${text}")
file(WRITE /dev/stdout "${text}")
