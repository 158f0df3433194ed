# SPDX-License-Identifier: MIT
# Every source, header, script and CMake file of the repository carries an
# "SPDX-License-Identifier: MIT" line in its first five lines. Run as
#   cmake -DROOT=<source dir> -P check_spdx.cmake
# It lists the files itself (no git needed), skipping build trees and data files.
if(NOT ROOT)
  message(FATAL_ERROR "check_spdx: ROOT not set")
endif()
file(GLOB_RECURSE candidates RELATIVE ${ROOT} LIST_DIRECTORIES false
     ${ROOT}/*.hpp ${ROOT}/*.cpp ${ROOT}/*.h ${ROOT}/*.c ${ROOT}/*.cmake ${ROOT}/*.sh
     ${ROOT}/*.py ${ROOT}/*.ld ${ROOT}/*.in ${ROOT}/CMakeLists.txt ${ROOT}/Kbuild
     ${ROOT}/.ci/run ${ROOT}/examples/hypervisor/run ${ROOT}/examples/hypervisor/nested-kvm/init)
set(missing "")
set(count 0)
foreach(f ${candidates})
  # Build trees (build/, build-*/ and anything CMake made) and fetched material are not ours.
  if(f MATCHES "^(build|build-[^/]*|\\.git)/" OR f MATCHES "/CMakeFiles/" OR f MATCHES "^_deps/")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  file(STRINGS ${ROOT}/${f} head LIMIT_COUNT 5)
  set(found FALSE)
  foreach(line IN LISTS head)
    if(line MATCHES "SPDX-License-Identifier: MIT")
      set(found TRUE)
    endif()
  endforeach()
  if(NOT found)
    string(APPEND missing "  ${f}\n")
  endif()
endforeach()
if(count LESS 100)
  message(FATAL_ERROR "check_spdx: only ${count} files found under ${ROOT}: wrong ROOT?")
endif()
if(missing)
  message(FATAL_ERROR "files without 'SPDX-License-Identifier: MIT' in their first five lines:\n${missing}")
endif()
message(STATUS "check_spdx: ${count} files, each with its SPDX-License-Identifier: MIT line")
