# SPDX-License-Identifier: MIT
# The header-only install needs CMake and a compiler, nothing else: hvkit's source tree is
# configured with tests, benchmarks, examples and docs off, with every find_package() call
# refused by a dependency provider (so a look-up of GTest, Google Benchmark, Zydis, Capstone,
# Boost, Doxygen or anything else fails the configure) and the system prefixes hidden from
# find_*(), as on a machine that has none of them; then installed into a fresh prefix, and
# the consumer app is built against that prefix. A control first shows that the provider
# does catch a look-up (the default developer configuration looks for GTest).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

file(WRITE ${WORK}/refuse_find_package.cmake [=[
# SPDX-License-Identifier: MIT
macro(hvkit_refuse_find_package method name)
  message(FATAL_ERROR "hvkit-no-packages: find_package(${name}) called")
endmacro()
cmake_language(SET_DEPENDENCY_PROVIDER hvkit_refuse_find_package SUPPORTED_METHODS FIND_PACKAGE)
]=])
# The system prefixes, hidden from every find_*() (an initial cache: a list survives it).
file(WRITE ${WORK}/no_system_prefixes.cmake
     "# SPDX-License-Identifier: MIT\nset(CMAKE_IGNORE_PREFIX_PATH \"/usr;/usr/local;/opt\" CACHE STRING \"\")\n")
set(no_packages
  -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=${WORK}/refuse_find_package.cmake
  -C ${WORK}/no_system_prefixes.cmake
  -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_Zydis=ON -DCMAKE_DISABLE_FIND_PACKAGE_Capstone=ON
  -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_Doxygen=ON)
set(header_only -DHVKIT_BUILD_TESTS=OFF -DHVKIT_BUILD_BENCHMARKS=OFF -DHVKIT_BUILD_EXAMPLES=OFF
                -DHVKIT_BUILD_DOCS=OFF -DHVKIT_BUILD_FUZZERS=OFF)
set(cfg -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX})

# Control: the developer configuration (tests on) must be refused by the provider.
execute_process(COMMAND ${CMAKE_COMMAND} ${cfg} ${no_packages} -S ${HVKIT_SOURCE} -B ${WORK}/control
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "hvkit-no-packages: find_package\\(")
  message(FATAL_ERROR "control: the developer configuration looked for no package (rc=${rc}):\n${err}")
endif()
string(REGEX MATCH "find_package\\([A-Za-z0-9_]+\\)" first "${err}")
message(STATUS "control: the developer configuration is refused at ${first}")

# The header-only install.
run(${CMAKE_COMMAND} ${cfg} ${no_packages} ${header_only} -S ${HVKIT_SOURCE} -B ${WORK}/build)
run(${CMAKE_COMMAND} --build ${WORK}/build)
run(${CMAKE_COMMAND} --install ${WORK}/build --prefix ${WORK}/prefix)
foreach(f include/hvkit/x86/cr.hpp include/hvkit/version.hpp share/cmake/hvkit/hvkitConfig.cmake
          share/cmake/hvkit/hvkitConfigVersion.cmake share/pkgconfig/hvkit.pc share/doc/hvkit/LICENSE)
  if(NOT EXISTS ${WORK}/prefix/${f})
    message(FATAL_ERROR "header-only install lacks ${f}")
  endif()
endforeach()
file(GLOB_RECURSE binaries ${WORK}/prefix/bin/* ${WORK}/prefix/lib/*)
if(binaries)
  message(FATAL_ERROR "header-only install installed binaries: ${binaries}")
endif()

# A consumer built against the installed copy, still with no system packages visible.
run(${CMAKE_COMMAND} ${cfg} -DCMAKE_BUILD_TYPE=Release -C ${WORK}/no_system_prefixes.cmake
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DHVKIT_CONSUMER_MODE=find_package -S ${APP} -B ${WORK}/app)
run(${CMAKE_COMMAND} --build ${WORK}/app)
run(${WORK}/app/consumer_app)
message(STATUS "header-only install: ${last_out}")
if(NOT last_out MATCHES "consumer ok")
  message(FATAL_ERROR "consumer app printed '${last_out}'")
endif()
