// The exception entry stubs of both conformance guests (guest/ and guest32/), as assembler
// text for their top-level asm() blocks: one stub per vector 0-31 and one for INT 0x80.
// Each pushes a 0 where the processor pushes no error code (SDM Vol. 3A Table 6-1: #DF, #TS,
// #NP, #SS, #GP, #PF, #AC, #CP, #VC and #SX push one), then the vector, and jumps to the
// guest's own `guest_isr_common`, which knows the frame of its mode.
#pragma once

#define HV_GUEST_ISR_STUBS                                                                   \
  ".macro GUEST_ISR n, has_error\n"                                                          \
  "  .balign 16\n"                                                                           \
  "guest_isr_\\n:\n"                                                                         \
  "  .if \\has_error == 0\n"                                                                 \
  "  push $0\n"                                                                              \
  "  .endif\n"                                                                               \
  "  push $\\n\n"                                                                            \
  "  jmp guest_isr_common\n"                                                                 \
  ".endm\n"                                                                                  \
  "  .irp n, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,22,23,24,25,26,27,28,31\n"                     \
  "  GUEST_ISR \\n, 0\n"                                                                     \
  "  .endr\n"                                                                                \
  "  .irp n, 8,10,11,12,13,14,17,21,29,30\n"                                                 \
  "  GUEST_ISR \\n, 1\n"                                                                     \
  "  .endr\n"                                                                                \
  "  GUEST_ISR 128, 0\n"
