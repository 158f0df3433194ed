// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: boot path and the assembly the C++ code cannot express.
//
//   multiboot v1 header (a.out kludge: load addresses come from the header, so the flat
//   image from objcopy -O binary boots under GRUB and under QEMU's -kernel)
//   32-bit entry: zero .bss, identity-map 4 GiB with 2 MiB pages, PAE + EFER.LME + paging
//   (SDM Vol. 3A 10.8.5 "Initializing IA-32e Mode"), far jump to 64-bit code, hv_main()
//   host exception stubs (vectors 0-31 report and stop)
//   vmx_enter / vmx_exit_stub: VMLAUNCH/VMRESUME and the VM-exit entry point
//
// Written with top-level asm so the target needs no separate assembler language.

asm(R"(
  .set MB_MAGIC, 0x1BADB002
  .set MB_FLAGS, 0x00010003          /* page-align, memory info, a.out kludge (bit 16) */

  .section .multiboot, "a"
  .balign 4
multiboot_header:
  .long MB_MAGIC
  .long MB_FLAGS
  .long -(MB_MAGIC + MB_FLAGS)
  .long multiboot_header             /* header_addr */
  .long __image_start                /* load_addr */
  .long __load_end                   /* load_end_addr: end of the file's contents */
  .long __bss_end                    /* bss_end_addr: the loader zeroes up to here */
  .long _start                       /* entry_addr */

  .section .bss.pagetables, "aw", @nobits
  .balign 4096
  .globl boot_pml4
boot_pml4:  .skip 4096
boot_pdpt:  .skip 4096
boot_pd:    .skip 4 * 4096
  .balign 16
boot_stack: .skip 65536
  .globl boot_stack_top
boot_stack_top:

  .section .rodata
  .balign 16
boot_gdt:
  .quad 0
  .quad 0x00AF9A000000FFFF           /* 0x08: 64-bit code, DPL 0 */
  .quad 0x00CF92000000FFFF           /* 0x10: data, DPL 0 */
boot_gdt_end:
boot_gdt_ptr:
  .word boot_gdt_end - boot_gdt - 1
  .quad boot_gdt

  .section .text.boot, "ax"
  .code32
  .globl _start
_start:
  cli
  cld
  mov %eax, %esi                     /* multiboot magic */
  mov %ebx, %ebp                     /* multiboot info (physical) */

  /* Zero .bss ourselves: not every loader honours bss_end_addr. Nothing on the stack yet. */
  mov $__bss_start, %edi
  mov $__bss_end, %ecx
  sub %edi, %ecx
  shr $2, %ecx
  xor %eax, %eax
  rep stosl
  mov %esi, boot_multiboot_magic
  mov %ebp, boot_multiboot_info

  /* PML4[0] -> PDPT; PDPT[0..3] -> four page directories */
  mov $boot_pdpt + 0x3, %eax
  mov %eax, boot_pml4
  mov $boot_pd + 0x3, %eax
  mov $boot_pdpt, %edi
  mov $4, %ecx
1:
  mov %eax, (%edi)
  add $0x1000, %eax
  add $8, %edi
  loop 1b
  /* 2048 PDEs: 2 MiB pages, present + writable + PS, identity */
  mov $boot_pd, %edi
  mov $0x83, %eax
  mov $2048, %ecx
2:
  mov %eax, (%edi)
  add $0x200000, %eax
  add $8, %edi
  loop 2b

  mov %cr4, %eax
  or $0x20, %eax                     /* CR4.PAE */
  mov %eax, %cr4
  mov $boot_pml4, %eax
  mov %eax, %cr3
  mov $0xC0000080, %ecx              /* IA32_EFER */
  rdmsr
  or $0x100, %eax                    /* EFER.LME */
  wrmsr
  mov %cr0, %eax
  and $0x9FFFFFFF, %eax              /* caches on: clear CD, NW */
  or $0x80010001, %eax               /* PG | WP | PE */
  mov %eax, %cr0
  lgdt boot_gdt_ptr
  ljmp $0x08, $long_mode_entry

  .code64
long_mode_entry:
  mov $0x10, %eax
  mov %eax, %ds
  mov %eax, %es
  mov %eax, %ss
  mov %eax, %fs
  mov %eax, %gs
  mov $boot_stack_top, %rsp
  xor %ebp, %ebp
  call hv_main
  .globl hv_halt_forever
hv_halt_forever:
  cli
  hlt
  jmp hv_halt_forever

/* ---- host exception stubs: frame = 15 GPRs, vector, error code, CPU frame ---- */
  .text
.macro HOST_ISR n, has_error
  .balign 16
host_isr_\n:
  .if \has_error == 0
  push $0
  .endif
  push $\n
  jmp host_isr_common
.endm
  HOST_ISR 0,0
  HOST_ISR 1,0
  HOST_ISR 2,0
  HOST_ISR 3,0
  HOST_ISR 4,0
  HOST_ISR 5,0
  HOST_ISR 6,0
  HOST_ISR 7,0
  HOST_ISR 8,1
  HOST_ISR 9,0
  HOST_ISR 10,1
  HOST_ISR 11,1
  HOST_ISR 12,1
  HOST_ISR 13,1
  HOST_ISR 14,1
  HOST_ISR 15,0
  HOST_ISR 16,0
  HOST_ISR 17,1
  HOST_ISR 18,0
  HOST_ISR 19,0
  HOST_ISR 20,0
  HOST_ISR 21,1
  HOST_ISR 22,0
  HOST_ISR 23,0
  HOST_ISR 24,0
  HOST_ISR 25,0
  HOST_ISR 26,0
  HOST_ISR 27,0
  HOST_ISR 28,0
  HOST_ISR 29,1
  HOST_ISR 30,1
  HOST_ISR 31,0

host_isr_common:
  push %rax
  push %rbx
  push %rcx
  push %rdx
  push %rsi
  push %rdi
  push %rbp
  push %r8
  push %r9
  push %r10
  push %r11
  push %r12
  push %r13
  push %r14
  push %r15
  mov %rsp, %rdi
  and $-16, %rsp
  cld
  call hv_host_exception
  jmp hv_halt_forever

  .section .rodata
  .balign 8
  .globl host_isr_table
host_isr_table:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  .quad host_isr_\n
  .endr

/* ---- VM entry and exit ----------------------------------------------------------
 * guest_regs = hvkit::vmx::gpr_block: register n at 8 * n (RAX RCX RDX RBX, [RSP], RBP RSI RDI,
 * R8 ... R15; the RSP slot is unused, RSP is in the VMCS)  (vmx/vmx_glue.hpp)
 * int vmx_enter(guest_regs* regs, int launched, run_state* st, const vmx_host* host)
 *   every exit calls hv_handle_exit(regs, st, host) (the three pointers kept on the host stack);
 *   returns 0 when hv_handle_exit() asked to stop, 1 on VMfailInvalid (CF=1),
 *   2 on VMfailValid (ZF=1; read the VM-instruction error field) (SDM Vol. 3C 31.2
 *   "Conventions": VMX instructions report failure through RFLAGS). */
  .text
/* The guest's general-purpose registers from the save area at %rdi (RDI itself last;
   the MOVs leave the flags alone, which vmx_enter relies on). */
.macro HV_LOAD_GUEST_GPRS
  mov 0x00(%rdi), %rax
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
.endm

  .globl vmx_enter
vmx_enter:
  push %rbp
  push %rbx
  push %r12
  push %r13
  push %r14
  push %r15
  push %rcx                          /* the VMX host: found again at 16(%rsp) on exit */
  push %rdx                          /* the vCPU's state: found again at 8(%rsp) on exit */
  push %rdi                          /* regs pointer: found again at (%rsp) on exit */
  mov $0x6C14, %eax                  /* HOST_RSP = this stack, 16-byte aligned here */
  vmwrite %rsp, %rax
  jbe .Lvmx_failed
  test %esi, %esi                    /* flags survive the MOVs below */
  HV_LOAD_GUEST_GPRS
  jnz 1f
  vmlaunch
  jmp .Lvmx_failed
1:
  vmresume
.Lvmx_failed:
  mov $2, %eax
  jz 2f
  mov $1, %eax
2:
  add $24, %rsp
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbx
  pop %rbp
  ret

  .globl vmx_exit_stub
vmx_exit_stub:
  push %rdi
  mov 8(%rsp), %rdi
  mov %rax, 0x00(%rdi)
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
  cld
  mov 8(%rsp), %rsi                  /* hv_handle_exit(regs, st, host) */
  mov 16(%rsp), %rdx
  call hv_handle_exit                /* rsp is 16-byte aligned (HOST_RSP) */
  test %eax, %eax
  jz 3f
  mov (%rsp), %rdi
  HV_LOAD_GUEST_GPRS
  vmresume
  jmp .Lvmx_failed
3:
  xor %eax, %eax
  add $24, %rsp
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbx
  pop %rbp
  ret
)");

#include <cstdint>

#include <hvkit/vmx/fields.hpp>
#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/msr.hpp>
#include <hvkit/paging/pte.hpp>

#include "guest32/arch_bits.hpp"

// The numbers the assembly above writes (the 32-bit entry runs before any C++; vmx_enter
// writes HOST_RSP by its encoding), checked against the library's typed values.
static_assert(hvkit::x86::cr4::pae.raw() == 0x20);
static_assert(hvkit::x86::msr::ia32_efer == 0xC0000080);
static_assert(hvkit::x86::efer::lme.raw() == 0x100);
static_assert((hvkit::x86::cr0::cd | hvkit::x86::cr0::nw).raw() == (~0x9FFFFFFFull & 0xFFFFFFFFull));
static_assert((hvkit::x86::cr0::pg | hvkit::x86::cr0::wp | hvkit::x86::cr0::pe).raw() == 0x80010001);
static_assert(hvkit::vmx::fields::host_rsp.encoding == 0x6C14);

// The 32-bit guest's bits (guest32/arch_bits.hpp) and the AP trampoline's (smp/smp_boot.cpp:
// CR0.PE, CR4.PAE, IA32_EFER.LME, CR0.CD/NW cleared, CR0.PG/WP/PE), the same way.
namespace g32 = hv::guest32_bits;
static_assert(g32::cr0_wp == hvkit::x86::cr0::wp.raw());
static_assert(g32::cr4_pse == hvkit::x86::cr4::pse.raw() && g32::cr4_pae == hvkit::x86::cr4::pae.raw());
static_assert(g32::cr4_smep == hvkit::x86::cr4::smep.raw() && g32::cr4_smap == hvkit::x86::cr4::smap.raw());
static_assert(g32::msr_efer == hvkit::x86::msr::ia32_efer && g32::efer_nxe == hvkit::x86::efer::nxe.raw());
static_assert(g32::p_bit == hvkit::paging::pte::present.raw() && g32::rw_bit == hvkit::paging::pte::writable.raw());
static_assert(g32::us_bit == hvkit::paging::pte::user.raw() && g32::ps_bit == hvkit::paging::pte::page_size.raw());
static_assert(hvkit::x86::cr0::pe.raw() == 1);

extern "C" {
// Filled by the 32-bit entry (in .bss, so after the clear).
std::uint32_t boot_multiboot_magic;
std::uint32_t boot_multiboot_info;
}
