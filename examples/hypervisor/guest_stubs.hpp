// SPDX-License-Identifier: MIT
// Assembler text shared by both conformance guests (guest/ and guest32/) for their top-level
// asm() blocks.
//
// HV_GUEST_ISR_STUBS: the exception entry stubs, one per vector 0-31 and one for INT 0x80.
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

// HV_GUEST_USER_STUB: the CPL 3 stub each guest copies into a user page (in .rodata, between
// user_stub_start and user_stub_end). ADDR holds the address, ESI the kind (0 read, 1 write,
// 2 fetch, 3 implicit supervisor read through an LDT selector), VAL the value to write, ACC
// the accumulator of the mode's width and MOV the move of that width. Every path ends in
// INT 0x80, which returns to the kernel.
#define HV_GUEST_USER_STUB(ADDR, VAL, ACC, MOV)                                               \
  "  .section .rodata\n"                                                                      \
  "  .globl user_stub_start, user_stub_end\n"                                                 \
  "user_stub_start:\n"                                                                        \
  "  cmpl $1, %esi\n"                                                                         \
  "  je 1f\n"                                                                                 \
  "  cmpl $2, %esi\n"                                                                         \
  "  je 2f\n"                                                                                 \
  "  cmpl $3, %esi\n"                                                                         \
  "  je 3f\n"                                                                                 \
  "  " MOV " (" ADDR "), " ACC "\n"                                                           \
  "  int $0x80\n"                                                                             \
  "3:\n"                                                                                      \
  "  movw $0x0F, %ax\n" /* LDT index 1, RPL 3: an implicit supervisor read */                 \
  "  movw %ax, %fs\n"                                                                         \
  "  int $0x80\n"                                                                             \
  "1:\n"                                                                                      \
  "  " MOV " " VAL ", (" ADDR ")\n"                                                           \
  "  int $0x80\n"                                                                             \
  "2:\n"                                                                                      \
  "  call *" ADDR "\n"                                                                        \
  "  int $0x80\n"                                                                             \
  "user_stub_end:\n"
