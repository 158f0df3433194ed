# SPDX-License-Identifier: MIT
# See CMakeLists.txt in this folder for what this proves.
file(GLOB_RECURSE headers RELATIVE ${INC} ${INC}/*.hpp)
list(FILTER headers EXCLUDE REGEX "(^|/)hosted/")
list(SORT headers)
list(LENGTH headers n)
if(n EQUAL 0)
  message(FATAL_ERROR "no public headers found under ${INC}")
endif()

# 0. Every public header (hosted ones too) documents itself for Doxygen.
file(GLOB_RECURSE all_headers RELATIVE ${INC} ${INC}/*.hpp)
set(undocumented "")
foreach(h ${all_headers})
  file(STRINGS ${INC}/${h} doc REGEX "^/// @file" LIMIT_COUNT 1)
  if(NOT doc)
    string(APPEND undocumented "  ${h}\n")
  endif()
endforeach()
if(undocumented)
  message(FATAL_ERROR "public headers without a '/// @file' comment:\n${undocumented}")
endif()

# 1. Direct-include allowlist.
set(allowed cstdint cstddef type_traits concepts bit limits utility array compare initializer_list new)
set(errors "")
foreach(h ${headers})
  file(STRINGS ${INC}/${h} lines REGEX "^[ \t]*#[ \t]*include")
  get_filename_component(hdir ${INC}/${h} DIRECTORY)
  foreach(l ${lines})
    if(l MATCHES "<([^>]+)>")
      set(inc ${CMAKE_MATCH_1})
      if(inc MATCHES "^(hvkit/)?(x86|paging|cpuid|vmx|svm|emulate)/")
        string(APPEND errors "  ${h}: includes <${inc}>; hvkit's own headers are included by relative quoted path\n")
        continue()
      endif()
      if(inc MATCHES "^boost/hana/" AND NOT inc STREQUAL "boost/hana.hpp")
        continue()  # granular Hana headers only, in opt-in headers (design decision 8)
      endif()
      list(FIND allowed ${inc} idx)
      if(idx EQUAL -1)
        string(APPEND errors "  ${h}: includes <${inc}>, which is not freestanding-safe\n")
      endif()
    elseif(l MATCHES "\"([^\"]+)\"")
      # A relative quoted include resolves next to the including file first: it must name a
      # header of ours inside include/, and never a hosted one.
      get_filename_component(target ${hdir}/${CMAKE_MATCH_1} ABSOLUTE)
      file(RELATIVE_PATH rel ${INC} ${target})
      if(rel MATCHES "^\\.\\." OR NOT EXISTS ${target})
        string(APPEND errors "  ${h}: quoted include '${l}' does not name a header inside include/\n")
      elseif(rel MATCHES "(^|/)hosted/" AND NOT (h STREQUAL "x86/contract.hpp" AND rel STREQUAL "x86/hosted/contract_print.hpp"))
        # (The one exception: x86/contract.hpp includes the contract printer only when
        # __STDC_HOSTED__ == 1, so the freestanding compile below never sees it.)
        string(APPEND errors "  ${h}: includes the hosted header ${rel}\n")
      endif()
    else()
      string(APPEND errors "  ${h}: unrecognised include '${l}'\n")
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "freestanding include check failed:\n${errors}")
endif()
message(STATUS "include allowlist: ${n} public headers clean")

# 2. All headers in one translation unit + the smoke object, compiled and linked freestanding.
file(MAKE_DIRECTORY ${WORK})
set(all "")
foreach(h ${headers})
  string(APPEND all "#include <hvkit/${h}>\n")
endforeach()
file(WRITE ${WORK}/all_headers.cpp "${all}")
set(base_cflags -std=c++20 -O2 -ffreestanding -fno-exceptions -fno-rtti -fno-asynchronous-unwind-tables
           -fno-stack-protector -fno-pic -fno-pie -mno-red-zone -nostdlib -Wall -Wextra -Werror -I${INCDIR})
foreach(cxx ${COMPILERS})
  get_filename_component(tag ${cxx} NAME)
  # Kernel code must not touch SIMD/FP state. GCC takes -mgeneral-regs-only; with Clang that
  # flag rejects libstdc++'s <limits> and <array> (long double), so kernels use -mno-sse.
  if(tag MATCHES "clang")
    set(kflags -mno-sse -mno-mmx)
  else()
    set(kflags -mgeneral-regs-only)
  endif()
  set(cflags ${base_cflags} ${kflags})
  execute_process(COMMAND ${cxx} ${cflags} -c ${WORK}/all_headers.cpp -o ${WORK}/all_${tag}.o
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: the public headers do not compile freestanding:\n${err}")
  endif()
  execute_process(COMMAND ${cxx} ${cflags} -c ${SMOKE} -o ${WORK}/smoke_${tag}.o
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: smoke object does not compile freestanding:\n${err}")
  endif()
  execute_process(COMMAND ${cxx} -nostdlib -static -no-pie -Wl,-e,hvkit_smoke_entry
                          ${WORK}/smoke_${tag}.o ${WORK}/all_${tag}.o -o ${WORK}/smoke_${tag}.elf
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: smoke object does not link without libc/libstdc++:\n${err}")
  endif()
  message(STATUS "${tag}: ${n} headers compile with -ffreestanding -fno-exceptions -fno-rtti ${kflags}; smoke links with -nostdlib")
endforeach()

# 3. Self-contained: each header alone (with the first compiler), with a hostile include tree
#    first on the path: a header of the same name as every hvkit header (x86/cr.hpp,
#    paging/walker.hpp, ...) that stops the compile. A consumer's own x86/, paging/ ...
#    headers therefore cannot hijack any of hvkit's internal includes.
list(GET COMPILERS 0 cxx)
set(hostile ${WORK}/hostile)
file(REMOVE_RECURSE ${hostile})
foreach(h ${all_headers})
  file(WRITE ${hostile}/${h} "#error \"hijacked: a consumer's ${h} was included instead of hvkit's\"\n")
endforeach()
set(bad "")
foreach(h ${headers})
  string(MAKE_C_IDENTIFIER ${h} id)
  file(WRITE ${WORK}/sc_${id}.cpp "#include <hvkit/${h}>\n#include <hvkit/${h}>\n")
  execute_process(COMMAND ${cxx} -std=c++20 -fsyntax-only -ffreestanding -fno-exceptions -fno-rtti
                          -Wall -Wextra -Werror -I${hostile} -I${INCDIR} ${WORK}/sc_${id}.cpp
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(APPEND bad "  ${h}:\n${err}\n")
  endif()
endforeach()
if(bad)
  message(FATAL_ERROR "headers that do not compile on their own (or whose includes a consumer's headers hijack):\n${bad}")
endif()
message(STATUS "self-contained: ${n} headers compile on their own, none hijacked by a consumer's same-named headers")
