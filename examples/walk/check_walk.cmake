# CTest driver for hvkit-walk: writes the test dump, runs the CLI and compares its output
# with lines typed by hand from the tables in make_test_dump.cpp.
execute_process(COMMAND ${MAKE_DUMP} ${WORK}/walk_test.dump RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_test_dump failed")
endif()
set(common --dump ${WORK}/walk_test.dump --base 0x100000 --cr0 0x80010033 --cr3 0x101018 --cr4 0x20 --efer 0xd00)

function(expect args expected_rc)
  execute_process(COMMAND ${WALK} ${common} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "hvkit-walk ${args}: exit ${rc}, expected ${expected_rc}\n${out}${err}")
  endif()
  foreach(line ${ARGN})
    string(FIND "${out}" "${line}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "hvkit-walk ${args}: missing line\n  ${line}\nin output:\n${out}")
    endif()
  endforeach()
  message(STATUS "hvkit-walk ${args}: ok")
endfunction()

expect("--gva;0x7f0000201abc" 0
  "gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000"
  "  PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A"
  "  PDPTE @ 0x0000000000102000 = 0x0000000000103027  P RW US A"
  "  PDE   @ 0x0000000000103008 = 0x0000000000104027  P RW US A"
  "  PTE   @ 0x0000000000104008 = 0x8000000012345063  P RW A D XD"
  "  -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)")
expect("--gva;0x7f0000412345" 0
  "  PDE   @ 0x0000000000103010 = 0x00000000400010e7  P RW US A D PS"
  "  -> gpa 0x0000000040012345 (2 MiB page, rwx user, pkey 0)")
expect("--gva;0x7f0000600000" 1
  "  fault: not present at PDE @ 0x0000000000103018 = 0x0000000000000000 (#PF error code 0x0)")
expect("--gva;0x0000800000000000" 1
  "  fault: non-canonical address (#GP)")
expect("--range;0x7f0000400000;0x7f0000800000" 0
  "0x00007f0000400000 -> 0x0000000040000000  2 MiB rwx user"
  "0x00007f0000600000    not present (PDE)")
