// Embeds the separately linked conformance guest (guest/guest.ld) as an opaque blob; the
// hypervisor copies it into guest memory at layout::guest_load_gpa before each run.
#ifndef HV_GUEST_BIN
#error "HV_GUEST_BIN must name the flat guest image (set by CMakeLists.txt)"
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
    ".previous\n");
