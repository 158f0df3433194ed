// SPDX-License-Identifier: MIT
// Embeds the separately linked conformance guests (guest/guest.ld, guest32/guest32.ld) and
// the exit-cost guest (examples/exit-cost/guest, the exit-cost profile) as
// opaque blobs; the hypervisor copies one of them into guest memory at
// layout::guest_load_gpa before each run.
#ifndef HV_GUEST_BIN
#error "HV_GUEST_BIN must name the flat guest image (set by CMakeLists.txt)"
#endif
#ifndef HV_GUEST32_BIN
#error "HV_GUEST32_BIN must name the flat 32-bit guest image (set by CMakeLists.txt)"
#endif
#ifndef HV_EXIT_COST_BIN
#error "HV_EXIT_COST_BIN must name the flat exit-cost guest image (set by CMakeLists.txt)"
#endif
#define HV_STR2(x) #x
#define HV_STR(x) HV_STR2(x)
asm(".section .rodata.guest, \"a\"\n"
    ".balign 4096\n"
    ".globl guest_blob_start\n"
    "guest_blob_start:\n"
    ".incbin \"" HV_STR(HV_GUEST_BIN) "\"\n"
    ".globl guest_blob_end\n"
    "guest_blob_end:\n"
    ".balign 4096\n"
    ".globl guest32_blob_start\n"
    "guest32_blob_start:\n"
    ".incbin \"" HV_STR(HV_GUEST32_BIN) "\"\n"
    ".globl guest32_blob_end\n"
    "guest32_blob_end:\n"
    ".balign 4096\n"
    ".globl exit_cost_blob_start\n"
    "exit_cost_blob_start:\n"
    ".incbin \"" HV_STR(HV_EXIT_COST_BIN) "\"\n"
    ".globl exit_cost_blob_end\n"
    "exit_cost_blob_end:\n"
    ".previous\n");
