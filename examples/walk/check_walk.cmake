# SPDX-License-Identifier: MIT
# CTest driver for hvkit-walk: writes the test dump, runs the CLI and compares its output
# with lines typed by hand from the tables in make_test_dump.cpp; then installs the tool
# (component "tools") and runs the installed copy.
execute_process(COMMAND ${MAKE_DUMP} ${WORK}/walk_test.dump ${WORK}/walk_test RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_test_dump failed")
endif()
set(common --dump ${WORK}/walk_test.dump --base 0x100000 --cr0 0x80010033 --cr3 0x101018 --cr4 0x20 --efer 0xd00)

# expect(<args> <exit code> <line>...): every line must occur in the output.
# A line starting with "NOT " must not occur.
function(expect_with walk args expected_rc)
  execute_process(COMMAND ${walk} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "hvkit-walk ${args}: exit ${rc}, expected ${expected_rc}\n${out}${err}")
  endif()
  foreach(line ${ARGN})
    if(line MATCHES "^NOT (.*)")
      string(FIND "${out}" "${CMAKE_MATCH_1}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "hvkit-walk ${args}: unexpected line\n  ${CMAKE_MATCH_1}\nin output:\n${out}")
      endif()
    else()
      string(FIND "${out}" "${line}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "hvkit-walk ${args}: missing line\n  ${line}\nin output:\n${out}")
      endif()
    endif()
  endforeach()
  message(STATUS "hvkit-walk ${args}: ok")
endfunction()
function(expect args expected_rc)
  expect_with(${WALK} "${common};${args}" ${expected_rc} ${ARGN})
endfunction()

expect("--gva;0x7f0000201abc" 0
  "gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000\n"
  "  PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A\n"
  "  PDPTE @ 0x0000000000102000 = 0x0000000000103027  P RW US A\n"
  "  PDE   @ 0x0000000000103008 = 0x0000000000104027  P RW US A\n"
  "  PTE   @ 0x0000000000104008 = 0x8000000012345063  P RW A D XD\n"
  "  -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)\n")
expect("--gva;0x7f0000412345" 0
  "  PDE   @ 0x0000000000103010 = 0x00000000400010e7  P RW US A D PS PAT\n"
  "  -> gpa 0x0000000040012345 (2 MiB page, rwx user, pkey 0)\n")
expect("--gva;0xffffffff80200234" 0
  "  PML4E @ 0x0000000000101ff8 = 0x0000000000105003  P RW\n"
  "  PTE   @ 0x0000000000107000 = 0x80000000fee0001b  P RW PWT PCD XD\n"
  "  -> gpa 0x00000000fee00234 (4 KiB page, rw- supervisor, pkey 0)\n")
expect("--gva;0x7f0000600000" 1
  "  fault: not_present at PDE @ 0x0000000000103018 = 0x0000000000000000 (#PF error code 0x0)\n")
expect("--gva;0x0000800000000000" 1
  "  fault: non_canonical address (#GP)\n")
expect("--range;0x7f0000400000;0x7f0000800000" 0
  "0x00007f0000400000 -> 0x0000000040000000  2 MiB rwx user\n"
  "0x00007f0000600000    not_present (PDE)\n"
  "NOT 0x00007f0000800000")

# The whole address space: both canonical halves, the hole as one line, runs of
# not-present regions as one line each, no cut-off.
expect("--range;0;0xffffffffffffffff" 0
  "0x0000000000000000    not_present (PML4E) through 0x00007effffffffff\n"
  "0x00007f0000201000 -> 0x0000000012345000  4 KiB rw- supervisor\n"
  "0x00007f0000202000    not_present (PTE) through 0x00007f00003fffff\n"
  "0x00007f0000400000 -> 0x0000000040000000  2 MiB rwx user\n"
  "0x0000800000000000    non-canonical (#GP) through 0xffff7fffffffffff\n"
  "0xffff800000000000    not_present (PML4E) through 0xffffff7fffffffff\n"
  "0xffffffff80000000 -> 0x0000000000200000  2 MiB rwx supervisor\n"
  "0xffffffff80200000 -> 0x00000000fee00000  4 KiB rw- supervisor\n"
  "0xffffffffc0000000    not_present (PDPTE)\n"
  "NOT cut off")
# A cut-off is said, with where it stopped, and exits 3.
expect("--range;0;0xffffffffffffffff;--max-lines;3" 3
  "0x00007f0000200000    not_present (PTE)\n"
  "hvkit-walk: output cut off after 3 lines, next address 0x00007f0000201000: raise --max-lines or narrow --range\n"
  "NOT 0x00007f0000201000 ->")

# --mappings: every mapped page, nothing else.
expect("--mappings" 0
  "0x00007f0000201000 -> 0x0000000012345000  4 KiB rw- supervisor pkey 0 pat 0\n0x00007f0000400000 -> 0x0000000040000000  2 MiB rwx user pkey 0 pat 4\n0xffffffff80000000 -> 0x0000000000200000  2 MiB rwx supervisor pkey 0 pat 0\n0xffffffff80200000 -> 0x00000000fee00000  4 KiB rw- supervisor pkey 0 pat 3\n4 mappings, 0 faults, 3584 entries read\n"
  "NOT not_present")
expect("--mappings;--range;0x7f0000300000;0xffffffff80000001" 0
  "0x00007f0000400000 -> 0x0000000040000000  2 MiB rwx user pkey 0 pat 4\n0xffffffff80000000 -> 0x0000000000200000  2 MiB rwx supervisor pkey 0 pat 0\n2 mappings"
  "NOT 0xffffffff80200000")
expect("--mappings;--max-lines;2" 3
  "hvkit-walk: output cut off after 2 lines, next address 0xffffffff80000000")

# EPT: one walk, every EPT mapping, and the guest's mappings through EPT (nested).
set(dump --dump ${WORK}/walk_test.dump --base 0x100000)
expect_with(${WALK} "${dump};--eptp;0x10801e;--gpa;0x40012345" 0
  "gpa 0x0000000040012345: 4-level EPT, root 0x0000000000108000\n"
  "  EPT PML4E @ 0x0000000000108000 = 0x0000000000109007  R W X\n"
  "  EPT PDPTE @ 0x0000000000109008 = 0x00000000800000b5  R X PS WB\n"
  "  -> hpa 0x0000000080012345 (1 GiB page, r-x, WB)\n")
expect_with(${WALK} "${dump};--eptp;0x10801e;--mappings" 0
  "0x0000000000000000 -> 0x0000000000000000  2 MiB rwx WB\n0x0000000000200000 -> 0x0000000000600000  2 MiB rw- WB\nfault: ept_misconfig at EPT PTE @ 0x000000000010b028 = 0x0000000000000002 (EPT misconfiguration, gpa 0x0000000000405000) (0x0000000000405000)\n0x0000000040000000 -> 0x0000000080000000  1 GiB r-x WB\n3 mappings, 1 faults, 2048 entries read\n")
expect("--eptp;0x10801e;--mappings" 0
  "0x00007f0000400000 +0x200000 -> gpa 0x0000000040000000 -> 0x0000000080000000  rwx user / r-x\n0xffffffff80000000 +0x200000 -> gpa 0x0000000000200000 -> 0x0000000000600000  rwx supervisor / rw-\n2 mappings, 0 faults"
  "NOT 0x00007f0000201000")

expect("--eptp;0x10801e;--gva;0x7f0000412345" 0
  "gva 0x00007f0000412345: 4-level paging, root 0x0000000000101000\n"
  "  PDE   @ 0x0000000000103010 = 0x00000000400010e7  P RW US A D PS PAT\n"
  "  -> gpa 0x0000000040012345 (2 MiB page, rwx user, pkey 0)\n"
  "    EPT PML4E @ 0x0000000000108000 = 0x0000000000109007  R W X\n"
  "    EPT PDPTE @ 0x0000000000109008 = 0x00000000800000b5  R X PS WB\n"
  "    -> hpa 0x0000000080012345 (1 GiB page, r-x, WB)\n")
# A raw translation makes no access, so the qualification has no access bit (SDM 28.2.1,
# Table 28-7: bits 2:0 are the access that caused the violation; issue 23 item 7).
expect("--eptp;0x10801e;--gva;0x7f0000201abc" 1
  "  fault: not_present at EPT PDE @ 0x000000000010a488 = 0x0000000000000000 (EPT violation, exit qualification 0x0, gpa 0x0000000012345abc)\n")

# --help answers on stdout with exit 0; a bad option is exit 2.
expect_with(${WALK} "--help" 0 "usage: hvkit-walk IMAGE" "--mappings" "--max-lines" "--region GPA FILE" "--read X N")

# An ELF core of the same memory (make_test_dump.cpp: two PT_LOADs, the page at 0x106000
# left out, CR0/CR3/CR4 in the QEMU note): the registers come from the core, the walk is
# the raw dump's, and the hole is unbacked memory.
set(core --dump ${WORK}/walk_test.core)
expect_with(${WALK} "${core};--info" 0
  "region 0x0000000000100000 - 0x0000000000105fff (24576 bytes)\n"
  "region 0x0000000000107000 - 0x000000000010bfff (20480 bytes)\n2 regions, 45056 bytes\n"
  "core: 1 vCPU notes; vCPU 0 (QEMU state version 1): RIP 0x00007f0000201abc RFLAGS 0x2 CS 0x10 (64-bit)\n"
  "  CR0 0x80010033 CR2 0x0 CR3 0x101018 CR4 0x20\n")
expect_with(${WALK} "${core};--gva;0x7f0000201abc" 0
  "gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000\n"
  "  PTE   @ 0x0000000000104008 = 0x8000000012345063  P RW A D XD\n"
  "  -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)\n")
expect_with(${WALK} "${core};--gva;0xffffffff80200234" 1
  "  fault: unbacked at PDE @ 0x0000000000106008 = 0x0000000000000000 (not backed: 0x0000000000106008)\n")
# Raw regions with holes: the PTE's page at 0x12345000, and the two pages a read crosses.
set(regions ${common} --region 0x12345000 ${WORK}/walk_test.12345 --region 0x3ff000 ${WORK}/walk_test.3ff
            --region 0xfee00000 ${WORK}/walk_test.fee)
expect_with(${WALK} "${regions};--read;0x7f0000201000;13;--raw" 0 "hvkit read ok")
# 2 MiB page (gpa 0x3ffff3) to 4 KiB page (gpa 0xfee00000).
expect_with(${WALK} "${regions};--read;0xffffffff801ffff3;23;--raw" 0 "a read across two pages")
expect_with(${WALK} "${regions};--read;0xffffffff801ffff3;23" 0
  "0xffffffff801ffff3  61 20 72 65 61 64 20 61 63 72 6f 73 73 20 74 77  |a read across tw|\n")
expect_with(${WALK} "${regions};--read;0x7f0000201ff8;16" 1
  "fault: gva 0x00007f0000202000: not_present at PTE @ 0x0000000000104010")
expect_with(${WALK} "${common};--read;0x7f0000201ffc;8" 1
  "fault: gva 0x00007f0000201ffc -> gpa 0x0000000012345ffc: not in memory (after 0 bytes)\n")
expect_with(${WALK} "--bogus" 2)

# cmake --install puts the tool in <prefix>/bin.
file(REMOVE_RECURSE ${WORK}/install)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --component tools --prefix ${WORK}/install
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/install/bin/hvkit-walk)
  message(FATAL_ERROR "cmake --install --component tools did not install bin/hvkit-walk:\n${out}${err}")
endif()
expect_with(${WORK}/install/bin/hvkit-walk "--help" 0 "usage: hvkit-walk")
expect_with(${WORK}/install/bin/hvkit-walk "${common};--mappings" 0 "4 mappings, 0 faults")
