# SPDX-License-Identifier: MIT
# Control for check_docs.py: a page with only good references passes; one broken link, one
# wrong anchor, one missing repository path, one missing header, one page
# named in prose that is not in the repository, one ../ path out of it and one missing hvkit name
# each make it fail, naming the broken reference.
set(good "# Good\n\nSee [the architecture](architecture.md#layers), [README](../README.md),\n`include/vmx/cr_access.hpp`, <hvkit/paging/walker.hpp> and `hvkit::vmx::evaluate_cr_write`.\n")
file(WRITE ${WORK}/good.md "${good}")
execute_process(COMMAND ${PYTHON} ${CHECK} ${ROOT} --page ${WORK}/good.md=docs/control.md
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "control: a page with good references fails the docs check:\n${out}")
endif()
foreach(case
    "link|[gone](no-such-page.md)|no-such-page.md"
    "anchor|[arch](architecture.md#no-such-heading)|#no-such-heading"
    "path|see `examples/no_such_example/run`|examples/no_such_example/run"
    "header|#include <hvkit/vmx/no_such_header.hpp>|vmx/no_such_header.hpp"
    "page|see bochs-notes-outside.md|bochs-notes-outside.md"
    "outside|see ../../notes-elsewhere/design.md|../../notes-elsewhere/design.md"
    "name|calls `hvkit::vmx::no_such_function_xyz`|no_such_function_xyz")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 kind)
  list(GET parts 1 text)
  list(GET parts 2 expect)
  file(WRITE ${WORK}/${kind}.md "${good}\n${text}\n")
  execute_process(COMMAND ${PYTHON} ${CHECK} ${ROOT} --page ${WORK}/${kind}.md=docs/control.md
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(FIND "${out}" "${expect}" at)
  if(rc EQUAL 0 OR at EQUAL -1)
    message(FATAL_ERROR "control: a broken ${kind} passed the docs check (rc=${rc}):\n${out}")
  endif()
  message(STATUS "control: broken ${kind} caught: ${out}")
endforeach()
