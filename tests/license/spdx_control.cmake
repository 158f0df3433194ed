# SPDX-License-Identifier: MIT
# Control for check_spdx.cmake: copy enough tagged files to pass the size guard, add one
# untagged header, and require the check to fail naming it.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(COPY ${SRC}/include DESTINATION ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${WORK} -P ${CHECK} RESULT_VARIABLE rc_clean OUTPUT_QUIET ERROR_QUIET)
if(NOT rc_clean EQUAL 0)
  message(FATAL_ERROR "control: the check fails on tagged files alone")
endif()
file(WRITE ${WORK}/include/untagged.hpp "#pragma once\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${WORK} -P ${CHECK} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0 OR NOT err MATCHES "include/untagged.hpp")
  message(FATAL_ERROR "control: an untagged header passed the SPDX check (rc=${rc})")
endif()
