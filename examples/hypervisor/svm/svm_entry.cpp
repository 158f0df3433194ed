// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend: one VMRUN (AMD APM Vol. 2, 15.5 "VMRUN
// Instruction", 15.17 "Global Interrupt Flag", 15.5.2 "#VMEXIT").
//
// void svm_vmrun(gpr_block* regs, uint64_t vmcb_pa, uint64_t host_save_pa, uint64_t host_if)
//   CLGI; VMSAVE the host's FS/GS/TR/LDTR/KernelGSBase/STAR/... into host_save_pa (VMRUN
//   saves only part of the host state, into VM_HSAVE_PA); VMLOAD the guest's from the VMCB;
//   the guest GPRs except RAX and RSP (those are in the VMCB) from `regs`; VMRUN. After
//   #VMEXIT (GIF = 0, host RSP/RAX/RIP back from VM_HSAVE_PA): the guest GPRs into `regs`,
//   VMSAVE the guest's state into the VMCB, VMLOAD the host's, STGI. host_if != 0: the host's
//   RFLAGS.IF is 1 at VMRUN (the scheduled runs: a physical interrupt in the guest is then an
//   INTR #VMEXIT, V_INTR_MASKING; GIF = 0 holds it until VMRUN, and it is taken at STGI).
// regs layout: hvkit::vmx::gpr_block, register n at 8 * n (slot 0 RAX and 4 RSP unused here).

asm(R"(
  .text
  .globl svm_vmrun
svm_vmrun:
  push %rbp
  push %rbx
  push %r12
  push %r13
  push %r14
  push %r15
  push %rcx                          /* host_if: at 0x10(%rsp) */
  push %rdi                          /* regs: found again at 8(%rsp) on exit */
  push %rdx                          /* host save area: at (%rsp) on exit */
  clgi
  mov %rdx, %rax
  vmsave %rax
  mov %rsi, %rax                     /* RAX = VMCB physical address for VMLOAD/VMRUN/VMSAVE */
  vmload %rax
  mov 0x08(%rdi), %rcx
  mov 0x10(%rdi), %rdx
  mov 0x18(%rdi), %rbx
  mov 0x28(%rdi), %rbp
  mov 0x30(%rdi), %rsi
  mov 0x40(%rdi), %r8
  mov 0x48(%rdi), %r9
  mov 0x50(%rdi), %r10
  mov 0x58(%rdi), %r11
  mov 0x60(%rdi), %r12
  mov 0x68(%rdi), %r13
  mov 0x70(%rdi), %r14
  mov 0x78(%rdi), %r15
  mov 0x38(%rdi), %rdi
  cmpq $0, 0x10(%rsp)                /* host_if: the scheduled runs' host RFLAGS.IF = 1 at VMRUN */
  je 1f
  sti
1:
  vmrun %rax
  vmsave %rax                        /* RAX is the host's again: the VMCB address */
  push %rdi
  mov 0x10(%rsp), %rdi               /* regs */
  mov %rcx, 0x08(%rdi)
  mov %rdx, 0x10(%rdi)
  mov %rbx, 0x18(%rdi)
  mov %rbp, 0x28(%rdi)
  mov %rsi, 0x30(%rdi)
  pop %rax
  mov %rax, 0x38(%rdi)
  mov %r8, 0x40(%rdi)
  mov %r9, 0x48(%rdi)
  mov %r10, 0x50(%rdi)
  mov %r11, 0x58(%rdi)
  mov %r12, 0x60(%rdi)
  mov %r13, 0x68(%rdi)
  mov %r14, 0x70(%rdi)
  mov %r15, 0x78(%rdi)
  pop %rax                           /* host save area */
  vmload %rax
  stgi                               /* an interrupt that caused the exit is taken here */
  cli
  add $16, %rsp                      /* regs, host_if */
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbx
  pop %rbp
  ret
)");

// #GP handler for rdmsr_safe (svm_setup.cpp; installed in the host IDT only around the
// RDMSR): skips the two-byte RDMSR and reports the fault in the interrupted code's ESI, which
// rdmsr_safe clears before the RDMSR and reads after it. Frame: error code, RIP, CS, RFLAGS,
// RSP, SS.
asm(R"(
  .text
  .globl svm_gp_skip
svm_gp_skip:
  add $8, %rsp
  addq $2, (%rsp)
  mov $1, %esi
  iretq
)");

// Host handlers of the scheduled runs: the local APIC timer (EOI, counted in the 64-bit word
// at GS base, which the scheduled run points at its tick counter: svm_runs.cpp) and the
// spurious vector (no EOI, SDM Vol. 3A 11.9).
asm(R"(
  .text
  .globl svm_timer_isr
svm_timer_isr:
  push %rax
  incq %gs:0
  mov $0xFEE000B0, %eax              /* EOI register (zero-extended address) */
  movl $0, (%rax)
  pop %rax
  iretq
  .globl svm_spurious_isr
svm_spurious_isr:
  iretq
)");
