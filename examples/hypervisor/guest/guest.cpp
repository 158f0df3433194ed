// SPDX-License-Identifier: MIT
// The conformance guest: a freestanding 64-bit kernel that the hypervisor loads at
// layout::guest_load_gpa and enters in long mode with the hypervisor's boot page tables.
// It builds its own page tables, installs an IDT, runs the checks and reports each one by
// VMCALL (hypercall.hpp). Linked on its own (guest.ld): it cannot reach hypervisor code.
#include <cstddef>
#include <cstdint>

#include "../guest_stubs.hpp"
#include "../hypercall.hpp"
#include "../layout.hpp"
#include "guest.hpp"

namespace hc = hv::hc;

// ---------------------------------------------------------------------------------------
// Assembly: header, entry, exception stubs and fault probes.
// A probe performs one access; if it faults, the exception handler resumes at the probe's
// recovery label (g_recover_rip) and the probe returns 0x100 | vector, else 0.
asm(R"(
  .section .text.header, "a"
  .globl guest_header
guest_header:
  .long 0x47544b48                   /* hc::header_magic */
  .long 0
  .quad __guest_bss_end              /* image_end */
  .quad guest_entry
  .quad guest_stack_top
  .quad 0x1801000                    /* gdt_page: a read-only page of the guest's own tables */
  .quad 16 * 8 - 1
  .quad guest_idt
  .quad 256 * 16 - 1
  .quad guest_tss

  .section .bss.stack, "aw", @nobits
  .balign 16
  .skip 65536
guest_stack_top:

  .section .text.entry, "ax"
  .globl guest_entry
guest_entry:
  /* RSP = guest_stack_top, RDI = configuration (hc::cfg_*) */
  call guest_main
  mov $5, %eax                       /* hc::done */
  cmpb $0, g_amd(%rip)
  jne 2f
  vmcall
  jmp 1f
2:
  vmmcall                            /* AMD: VMCALL is #UD there (APM Vol. 3, VMMCALL) */
1:
  hlt
  jmp 1b

  .text
)" HV_GUEST_ISR_STUBS R"(

/* frame on entry: vector, error code, RIP, CS, RFLAGS, RSP, SS */
guest_isr_common:
  push %rax
  push %rcx
  push %rdx
  push %rsi
  push %rdi
  push %r8
  push %r9
  push %r10
  push %r11
  push %rbx
  mov %rsp, %rdi                     /* -> isr_frame */
  mov %rsp, %rbx
  and $-16, %rsp
  cld
  call guest_exception
  mov %rbx, %rsp
  pop %rbx
  pop %r11
  pop %r10
  pop %r9
  pop %r8
  pop %rdi
  pop %rsi
  pop %rdx
  pop %rcx
  pop %rax
  add $16, %rsp
  iretq

  .section .rodata
  .balign 8
  .globl guest_isr_table
guest_isr_table:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  .quad guest_isr_\n
  .endr
  .globl guest_isr_128_addr
guest_isr_128_addr:
  .quad guest_isr_128

  .text
.macro PROBE_BEGIN name
  .globl \name
\name:
  leaq 9f(%rip), %rax
  movq %rax, g_recover_rip(%rip)
.endm
.macro PROBE_END
  movq $0, g_recover_rip(%rip)
  xorl %eax, %eax
  ret
9:
  movl g_fault_vector(%rip), %eax
  orl $0x100, %eax
  ret
.endm

/* unsigned probe_ltr(uint16_t selector) */
PROBE_BEGIN probe_ltr
  ltr %di
PROBE_END

/* unsigned probe_lldt(uint16_t selector) */
PROBE_BEGIN probe_lldt
  lldt %di
PROBE_END

/* unsigned probe_mov_cr3(uint64_t value) */
PROBE_BEGIN probe_mov_cr3
  movq %rdi, %cr3
PROBE_END

/* uint64_t read_sldt(void): SLDT into a 64-bit register (exits with descriptor-table exiting) */
  .globl read_sldt
read_sldt:
  xorl %eax, %eax
  sldt %rax
  ret

/* uint64_t read_str(void): STR into a 64-bit register (exits with descriptor-table exiting) */
  .globl read_str
read_str:
  xorl %eax, %eax
  str %rax
  ret

/* unsigned probe_mmio_xadd(uint32_t* p, uint32_t v): XADD, outside the emulator's subset */
PROBE_BEGIN probe_mmio_xadd
  xaddl %esi, (%rdi)
PROBE_END

/* unsigned probe_load_fs(uint16_t selector): the descriptor read is an implicit
   supervisor-mode access (SDM Vol. 3A 4.6) */
PROBE_BEGIN probe_load_fs
  movw %di, %fs
PROBE_END

/* unsigned probe_read64(const uint64_t* p) */
PROBE_BEGIN probe_read64
  movq (%rdi), %rax
PROBE_END

/* unsigned probe_fetch(void (*f)(void)): calls f (a RET); a fault at the fetch leaves the
   return address pushed, so the recovery path restores RSP first. */
  .globl probe_fetch
probe_fetch:
  leaq 8f(%rip), %rax
  movq %rax, g_recover_rip(%rip)
  movq %rsp, g_probe_rsp(%rip)
  call *%rdi
  movq $0, g_recover_rip(%rip)
  xorl %eax, %eax
  ret
8:
  movq g_probe_rsp(%rip), %rsp
  movl g_fault_vector(%rip), %eax
  orl $0x100, %eax
  ret

/* unsigned probe_user(uint64_t addr, unsigned kind, uint64_t value, uint64_t user_rip,
                        uint64_t user_rsp): runs the user stub at CPL 3 (IRETQ), which does
   the access and returns with INT 0x80; a fault comes back the same way (guest_exception
   redirects both to label 7 at CPL 0 with the saved kernel RSP). */
  .globl probe_user
probe_user:
  push %rbx
  push %rbp
  push %r12
  push %r13
  push %r14
  push %r15
  leaq 7f(%rip), %rax
  movq %rax, g_recover_rip(%rip)
  movq %rsp, g_probe_rsp(%rip)
  pushfq
  popq %rax
  pushq $0x53                        /* SS: user data (0x50), RPL 3 */
  pushq %r8                          /* RSP */
  pushq %rax                         /* RFLAGS (AC as for the case) */
  pushq $0x5B                        /* CS: user code64 (0x58), RPL 3 */
  pushq %rcx                         /* RIP */
  iretq
7:
  movq g_probe_rsp(%rip), %rsp
  movl g_fault_vector(%rip), %eax
  cmpl $0x80, %eax
  je 6f
  orl $0x100, %eax
  jmp 5f
6:
  xorl %eax, %eax
5:
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbp
  pop %rbx
  ret

)" HV_GUEST_USER_STUB("%rdi", "%rdx", "%rax", "movq") R"(
  .text

/* unsigned probe_write64(uint64_t* p, uint64_t v) */
PROBE_BEGIN probe_write64
  movq %rsi, (%rdi)
PROBE_END

/* unsigned probe_wrmsr(uint32_t msr, uint64_t v) */
PROBE_BEGIN probe_wrmsr
  movl %edi, %ecx
  movl %esi, %eax
  movq %rsi, %rdx
  shrq $32, %rdx
  wrmsr
PROBE_END

/* unsigned probe_rdmsr(uint32_t msr, uint64_t* out) */
PROBE_BEGIN probe_rdmsr
  movl %edi, %ecx
  rdmsr
  movl %eax, (%rsi)
  movl %edx, 4(%rsi)
PROBE_END
)");

extern "C" {
struct isr_frame {
  std::uint64_t rbx, r11, r10, r9, r8, rdi, rsi, rdx, rcx, rax;
  std::uint64_t vector, error_code, rip, cs, rflags, rsp, ss;
};

alignas(16) std::uint64_t guest_idt[512];
alignas(16) std::uint8_t guest_tss[104];
alignas(16) std::uint8_t guest_tss_a[104];
alignas(16) std::uint8_t guest_tss_b[104];
extern const std::uint64_t guest_isr_table[32];

/// The CPU is AMD's (CPUID 0 vendor "AuthenticAMD"): hypercalls are VMMCALL, not VMCALL.
/// Set once, first thing in guest_main.
bool g_amd;
volatile std::uint64_t g_recover_rip;
volatile std::uint64_t g_probe_rsp;
volatile std::uint32_t g_fault_vector;
volatile std::uint64_t g_fault_error;
volatile std::uint64_t g_fault_cr2;
volatile std::uint64_t g_fault_count;
volatile std::uint64_t g_fault_rip;

unsigned probe_ltr(std::uint16_t selector);
unsigned probe_mmio_xadd(std::uint32_t* p, std::uint32_t v);
extern const std::uint64_t guest_isr_128_addr;
std::uint64_t read_str();
std::uint64_t read_sldt();
unsigned probe_lldt(std::uint16_t selector);
unsigned probe_mov_cr3(std::uint64_t value);
unsigned probe_wrmsr(std::uint32_t msr, std::uint64_t v);
unsigned probe_rdmsr(std::uint32_t msr, std::uint64_t* out);

void guest_exception(isr_frame* f);
void guest_main(std::uint64_t config);
}


alignas(4096) std::uint64_t pml4[512];
alignas(4096) std::uint64_t pt_test[512];
std::uint64_t g_config;

namespace {

// ---- page tables -----------------------------------------------------------------------
// Identity map of the low 4 GiB with 2 MiB pages, except the 2 MiB region at
// test_region, mapped with 4 KiB pages so single pages can be made read-only.
constexpr std::uint64_t ro_page = test_region;                                // read-only data page
constexpr std::uint64_t gdt_page = test_region + 0x1000;  // the GDT, read-only (header: gdt_base)
constexpr std::uint16_t sel_user_data = 0x50, sel_user_code = 0x58;  // DPL 3 (after the 16-byte TSS descriptors)
auto* const gdt = reinterpret_cast<volatile std::uint64_t*>(gdt_page);
constexpr std::uint16_t sel_tss_a = 0x28, sel_tss_b = 0x38;
constexpr std::uint16_t sel_ldt_check = 0x70;  // LDT for the LLDT check (16 bytes)
/// The LDT of the LLDT check: entry 1 a DPL 0 data segment, entry 2 not present, limit 31.
alignas(16) std::uint64_t check_ldt[4];

alignas(16) std::uint8_t guest_event_stack[16384];
alignas(4096) std::uint64_t pdpt[512];
alignas(4096) std::uint64_t pd[4][512];

void build_page_tables() {
  pml4[0] = addr(pdpt) | pte_p | pte_rw;
  for (int i = 0; i < 4; ++i) pdpt[i] = addr(pd[i]) | pte_p | pte_rw;
  for (std::uint64_t i = 0; i < 2048; ++i) pd[i / 512][i % 512] = (i << 21) | pte_p | pte_rw | pte_ps;
  for (std::uint64_t i = 0; i < 512; ++i) pt_test[i] = (test_region + (i << 12)) | pte_p | pte_rw;
  pt_test[0] &= ~pte_rw;  // ro_page
  pt_test[1] &= ~pte_rw;  // gdt_page
  // The two user pages: U/S = 1 on their whole path. U/S is ANDed over the levels, so the
  // upper entries having it changes no other page (their leaves keep U/S = 0).
  pt_test[2] |= 4;
  pt_test[3] |= 4;
  std::uint64_t idx = test_region >> 21;
  pd[idx / 512][idx % 512] = addr(pt_test) | pte_p | pte_rw | 4;
  pml4[0] |= 4;
  pdpt[0] |= 4;
  write_cr3(addr(pml4));
}

/// A 64-bit TSS descriptor, 16 bytes (SDM Vol. 3A 8.2.3, Figure 8-4); type 9 available,
/// 11 busy.
void set_tss_descriptor(unsigned index, const void* tss, unsigned type) {
  std::uint64_t t = addr(tss);
  gdt[index] = 103 | ((t & 0xFFFFFF) << 16) | (std::uint64_t{0x80u | type} << 40) | (((t >> 24) & 0xFF) << 56);
  gdt[index + 1] = t >> 32;
}
unsigned tss_type(unsigned index) { return (gdt[index] >> 40) & 0xF; }

/// Runs while the hypervisor's boot page tables (all writable) are still in use.
void build_descriptor_tables() {
  gdt[0] = 0;
  gdt[1] = 0x00AF9B000000FFFF;  // 0x08 code64, accessed (the GDT page is read-only)
  gdt[2] = 0x00CF93000000FFFF;  // 0x10 data, accessed
  // 0x18: busy: the hypervisor enters with TR = 0x18 loaded
  set_tss_descriptor(3, guest_tss, 0xB);
  set_tss_descriptor(sel_tss_a / 8, guest_tss_a, 0x9);
  set_tss_descriptor(sel_tss_b / 8, guest_tss_b, 0x9);
  for (unsigned i = 9; i < 16; ++i) gdt[i] = 0;
  gdt[sel_user_data / 8] = 0x00CFF3000000FFFF;  // user data, DPL 3, accessed
  gdt[sel_user_code / 8] = 0x00AFFB000000FFFF;  // user code64, DPL 3, accessed
  // 0x60: an LDT at the differential paging test address (descriptor 1 of it is read
  // through the randomised mapping: implicit supervisor accesses). 16 bytes, type 2.
  {
    constexpr std::uint64_t base = (1ull << 39) + hv::layout::guest_mem_base + 0xC00000;  // test_la
    gdt[sel_ldt / 8] = 0xFFFF | ((base & 0xFFFFFF) << 16) | (0x82ull << 40) | (((base >> 24) & 0xFF) << 56);
    gdt[sel_ldt / 8 + 1] = base >> 32;
  }
  {
    const std::uint64_t base = addr(check_ldt);
    gdt[sel_ldt_check / 8] = 31 | ((base & 0xFFFFFF) << 16) | (0x82ull << 40) | (((base >> 24) & 0xFF) << 56);
    gdt[sel_ldt_check / 8 + 1] = base >> 32;
    check_ldt[1] = 0x00CF93000000FFFF;  // data, DPL 0, accessed
    check_ldt[2] = 0x00CF13000000FFFF;  // the same, not present
  }
  // Kernel stack for events taken at CPL 3 (TSS.RSP0, SDM Vol. 3A 8.7), in every TSS.
  std::uint64_t rsp0 = addr(guest_event_stack) + sizeof guest_event_stack;
  std::uint8_t* const tsses[] = {guest_tss, guest_tss_a, guest_tss_b};
  for (std::uint8_t* t : tsses)
    for (unsigned b = 0; b < 8; ++b) t[4 + b] = static_cast<std::uint8_t>(rsp0 >> (8 * b));
  guest_tss[102] = guest_tss_a[102] = guest_tss_b[102] = 104;  // no I/O bitmap
  for (int v = 0; v < 32; ++v) {
    std::uint64_t h = guest_isr_table[v];
    guest_idt[2 * v] = (h & 0xFFFF) | (std::uint64_t{hc::guest_cs} << 16) | (0x8E00ull << 32) |
                       (((h >> 16) & 0xFFFF) << 48);
    guest_idt[2 * v + 1] = h >> 32;
  }
  std::uint64_t h = guest_isr_128_addr;  // INT 0x80: interrupt gate, DPL 3
  guest_idt[2 * 0x80] = (h & 0xFFFF) | (std::uint64_t{hc::guest_cs} << 16) | (0xEE00ull << 32) |
                        (((h >> 16) & 0xFFFF) << 48);
  guest_idt[2 * 0x80 + 1] = h >> 32;
}

// ---- checks ------------------------------------------------------------------------------
/// 10000 CR0.WP toggles, each read back: the guest-visible CR0 must be exactly what was
/// written whether WP is guest-owned or intercepted.
void check_wp_toggle() {
  constexpr std::uint64_t toggles = 10000;
  std::uint64_t base = read_cr0() | cr0_wp;
  std::uint64_t mismatches = 0;
  vmcall(hc::mark_begin);
  std::uint64_t t0 = rdtsc();
  for (std::uint64_t i = 0; i < toggles / 2; ++i) {
    write_cr0(base & ~cr0_wp);
    if (read_cr0() != (base & ~cr0_wp)) ++mismatches;
    write_cr0(base);
    if (read_cr0() != base) ++mismatches;
  }
  std::uint64_t t1 = rdtsc();
  vmcall(hc::mark_end, addr("wp_toggle"), toggles, mismatches, t1 - t0);
}

/// CR0.WP semantics, toggling as above: a supervisor write to a read-only page succeeds
/// with WP=0 and raises #PF (error code 0x3: present, write, supervisor) with WP=1
/// (SDM Vol. 3A 4.6.1).
void check_wp_semantics() {
  constexpr std::uint64_t toggles = 1000;
  std::uint64_t base = read_cr0() | cr0_wp;
  auto* p = reinterpret_cast<std::uint64_t*>(ro_page);
  std::uint64_t mismatches = 0;
  vmcall(hc::mark_begin);
  std::uint64_t t0 = rdtsc();
  for (std::uint64_t i = 0; i < toggles / 2; ++i) {
    write_cr0(base & ~cr0_wp);
    if (probe_write64(p, i) != 0 || *p != i) ++mismatches;
    write_cr0(base);
    if (probe_write64(p, ~i) != (0x100 | 14) || g_fault_error != 0x3 || g_fault_cr2 != ro_page || *p != i)
      ++mismatches;
  }
  std::uint64_t t1 = rdtsc();
  vmcall(hc::mark_end, addr("wp_semantics"), toggles, mismatches, t1 - t0);
}

/// The CPUID policy as the hypervisor builds it with hvkit::cpuid (hypervisor.cpp,
/// build_cpuid_policy): hypervisor bit set, VMX hidden, KVM signature at 0x40000000 with
/// max leaf >= 0x40000001, no paravirtual feature offered (EAX of 0x40000001) and the
/// "realtime" hint (EDX bit 0) set: features and hints are separate words.
void check_cpuid() {
  cpuid_regs l1 = cpuid(1);
  report("cpuid_hypervisor_bit", (l1.ecx >> 31) & 1, l1.ecx);
  report("cpuid_vmx_hidden", ((l1.ecx >> 5) & 1) == 0, l1.ecx);
  if (g_amd) {
    const std::uint32_t e1 = cpuid(0x80000001).ecx;  // SVM: 8000_0001h:ECX[2] (APM Vol. 3, E.4.2)
    report("cpuid_svm_hidden", ((e1 >> 2) & 1) == 0, e1);
  }
  cpuid_regs h = cpuid(0x40000000);
  bool sig = h.ebx == 0x4b4d564b && h.ecx == 0x564b4d56 && h.edx == 0x0000004d;  // "KVMKVMKVM\0\0\0"
  report("cpuid_hv_signature", sig && h.eax >= 0x40000001 && h.eax <= 0x400000FF, h.eax,
         (std::uint64_t{h.ebx} << 32) | h.ecx);
  cpuid_regs f = cpuid(0x40000001);
  report("cpuid_pv_features_hints", f.eax == 0 && f.edx == 0x1, f.eax, f.edx);
  // OSXSAVE mirrors the guest's CR4.OSXSAVE (clear here), whatever the host's is.
  report("cpuid_osxsave_dynamic", ((l1.ecx >> 27) & 1) == 0, l1.ecx);
}

/// MSR policy derived from the CPUID policy: IA32_PRED_CMD (0x49) accepts IBPB exactly
/// when CPUID.7.0:EDX[26] is advertised, reserved bits #GP; unknown MSRs #GP.
void check_msrs() {
  bool ibpb = (cpuid(0).eax >= 7) && ((cpuid(7, 0).edx >> 26) & 1);
  unsigned r = probe_wrmsr(0x49, 1);
  report("msr_pred_cmd_ibpb", ibpb ? r == 0 : r == (0x100 | 13), ibpb, r);
  r = probe_wrmsr(0x49, 1ull << 5);
  report("msr_pred_cmd_reserved_gp", r == (0x100 | 13) && g_fault_error == 0, r);
  std::uint64_t v = 0;
  r = probe_rdmsr(0x4b564d00, &v);  // not an architectural MSR
  report("msr_unknown_gp", r == (0x100 | 13), r);
  r = probe_rdmsr(x86::msr::ia32_efer, &v);
  report("msr_efer", r == 0 && x86::efer{v}.test(x86::efer::lme | x86::efer::lma), r, v);
}

/// LTR against a read-only GDT (docs/background.md §1): LTR marks the TSS descriptor busy with an
/// implicit supervisor write, so with CR0.WP=0 it succeeds and with CR0.WP=1 it raises
/// #PF with error code 0x3 (present, write, supervisor) and leaves TR and the descriptor
/// unchanged. With descriptor-table exiting the hypervisor emulates LTR, and its page walk
/// must see the WP value the guest set without any exit.
void check_ltr() {
  std::uint64_t base = read_cr0() | cr0_wp;
  // Case 1: CR0.WP=0 (toggled without an exit when WP is guest-owned).
  write_cr0(base & ~cr0_wp);
  unsigned r = probe_ltr(sel_tss_a);
  std::uint64_t tr = read_str();
  unsigned type = tss_type(sel_tss_a / 8);
  write_cr0(base);
  report("ltr_ro_gdt_wp0_ok", r == 0 && tr == sel_tss_a && type == 0xB, r, (tr << 8) | type);

  // Case 2: CR0.WP=1: #PF 0x3 at the descriptor, nothing changed.
  g_fault_error = 0;
  g_fault_cr2 = 0;
  r = probe_ltr(sel_tss_b);
  std::uint64_t err = g_fault_error, cr2 = g_fault_cr2;
  tr = read_str();
  type = tss_type(sel_tss_b / 8);
  std::uint64_t desc = gdt_page + sel_tss_b;
  bool cr2_ok = cr2 >= desc && cr2 < desc + 16;
  report("ltr_ro_gdt_wp1_pf", r == (0x100 | 14) && err == 0x3 && cr2_ok && type == 0x9,
         (std::uint64_t{r} << 32) | err, ((cr2 - gdt_page) << 8) | type);
  // A fault leaves the state as before the instruction (SDM Vol. 3A 6.5): TR unchanged.
  // Bochs 2.7 executing LTR itself loads TR before the busy-bit write faults: an erratum
  // of the emulated CPU, reported apart; the emulated LTR must get it right.
  bool tr_ok = tr == sel_tss_a;
  if (g_config & hc::cfg_dt_native) report_native("ltr_fault_keeps_tr", tr_ok, tr);
  else report("ltr_fault_keeps_tr", tr_ok, tr);
}

/// LLDT (SDM Vol. 2A "LLDT"): with descriptor-table exiting the hypervisor emulates it (and
/// SLDT) with hvkit::emulate; without it the CPU runs it (the oracle). LLDT of the LDT
/// descriptor loads LDTR (SLDT reads it back, and a segment load through the LDT sees its
/// base and limit: entry 1 loads, entry 2 is not present (#NP), entry 4 is beyond the
/// limit (#GP)); a non-LDT descriptor and a selector with TI=1 raise #GP(selector); a null
/// selector leaves LDTR unusable. Bit n of the failure mask = step n.
void check_lldt() {
  std::uint64_t fails = 0;
  unsigned n = 0;
  auto expect = [&](bool ok) {
    if (!ok) fails |= 1ull << n;
    ++n;
  };
  expect(probe_lldt(sel_ldt_check) == 0);
  expect(read_sldt() == sel_ldt_check);
  expect(probe_load_fs(0x0C) == 0);  // LDT entry 1, RPL 0
  expect(probe_load_fs(0x14) == (0x100 | 11) && g_fault_error == 0x14);  // entry 2: #NP(0x14)
  expect(probe_load_fs(0x24) == (0x100 | 13) && g_fault_error == 0x24);  // entry 4 > limit: #GP(0x24)
  asm volatile("movw %w0, %%fs" ::"r"(0) : "memory");
  expect(probe_lldt(hc::guest_ds) == (0x100 | 13) && g_fault_error == hc::guest_ds);  // a data descriptor
  expect(probe_lldt(0x0C) == (0x100 | 13) && g_fault_error == 0x0C);  // TI = 1
  expect(read_sldt() == sel_ldt_check);  // faults changed nothing
  expect(probe_lldt(0) == 0);
  expect(read_sldt() == 0);
  expect(probe_load_fs(0x0C) == (0x100 | 13));  // no LDT any more: #GP(0x0C)
  report("lldt_forms", fails == 0, n, fails);
}

/// MOV to CR3 with a bit above MAXPHYADDR set: #GP(0) in IA-32e mode (SDM Vol. 2B MOV CR,
/// 64-bit mode exceptions; 4.5), CR3 unchanged. With CR3-load exiting the hypervisor decides
/// it (vmx::evaluate_cr_write); without, the CPU does. Then the same CR3 written legally.
void check_cr3_reserved() {
  const unsigned maxphyaddr = cpuid(0x80000000).eax >= 0x80000008 ? (cpuid(0x80000008).eax & 0xFF) : 36;
  std::uint64_t cr3;
  asm volatile("mov %%cr3, %0" : "=r"(cr3));
  g_fault_error = ~0ull;
  unsigned r = maxphyaddr < 52 ? probe_mov_cr3(cr3 | (1ull << maxphyaddr)) : (0x100 | 13);
  std::uint64_t err = g_fault_error, after;
  asm volatile("mov %%cr3, %0" : "=r"(after));
  unsigned r63 = probe_mov_cr3(cr3 | (1ull << 63));  // bit 63 without CR4.PCIDE: reserved too
  std::uint64_t err63 = g_fault_error;
  unsigned ok = probe_mov_cr3(cr3);
  bool pass = r == (0x100 | 13) && err == 0 && after == cr3 && r63 == (0x100 | 13) && err63 == 0 && ok == 0;
  report("cr3_reserved_bit_gp", pass, (std::uint64_t{r} << 32) | r63, after ^ cr3);
}

/// The MMIO test device (layout.hpp), one instruction form per step; the hypervisor sees
/// each access as an EPT violation and emulates it. Bit n of the failure mask = step n.
void check_mmio() {
  const std::uint64_t m = hv::layout::mmio_device_gpa;
  std::uint64_t fails = 0;
  unsigned n = 0;
  auto expect = [&](bool ok) {
    if (!ok) fails |= 1ull << n;
    ++n;
  };
  std::uint64_t v = 0, preset = 0xA5A5A5A5A5A5A5A5;
  std::uint32_t v32 = 0;
  asm volatile("movl (%1), %0" : "=r"(v32) : "r"(m) : "memory");  // 8B: 32-bit load
  expect(v32 == 0x494B5648);
  asm volatile("movq (%1), %0" : "=r"(v) : "r"(m) : "memory");  // REX.W 8B
  expect(v == hv::layout::mmio_device_id);
  asm volatile("movq %0, 8(%1)" ::"r"(0x1122334455667788ull), "r"(m) : "memory");  // REX.W 89, disp8
  asm volatile("movq 8(%1), %0" : "=r"(v) : "r"(m) : "memory");
  expect(v == 0x1122334455667788ull);
  asm volatile("movl $0xCAFEBABE, 8(%0)" ::"r"(m) : "memory");  // C7 imm32
  asm volatile("movb $0x5A, 8(%0)" ::"r"(m) : "memory");        // C6 imm8
  asm volatile("movw %w0, 10(%1)" ::"r"(0x7788u), "r"(m) : "memory");  // 66 89
  asm volatile("movq 8(%1), %0" : "=r"(v) : "r"(m) : "memory");
  expect(v == 0x112233447788BA5Aull);
  v = preset;
  asm volatile("movb 9(%1), %%ah" : "+a"(v) : "r"(m) : "memory");  // 8A, AH (no REX)
  expect(v == ((preset & ~0xFF00ull) | 0xBA00));
  asm volatile("movq %2, %%r9\n\tmovb 8(%1), %%r9b\n\tmovq %%r9, %0" : "=r"(v) : "r"(m), "r"(preset) : "r9", "memory");
  expect(v == ((preset & ~0xFFull) | 0x5A));  // REX 8A, R9B
  v = preset;
  asm volatile("movzbl 8(%1), %k0" : "+r"(v) : "r"(m) : "memory");  // 0F B6, zero-extends to 64
  expect(v == 0x5A);
  asm volatile("movzwq 10(%1), %0" : "=r"(v) : "r"(m) : "memory");  // REX.W 0F B7
  expect(v == 0x7788);
  v = preset;
  asm volatile("movw 8(%1), %w0" : "+r"(v) : "r"(m) : "memory");  // 66 8B: merges 16 bits
  expect(v == ((preset & ~0xFFFFull) | 0xBA5A));
  asm volatile("movq (%1,%2,8), %0" : "=r"(v) : "r"(m), "r"(1ull) : "memory");  // SIB
  expect(v == 0x112233447788BA5Aull);
  asm volatile("movl 0x800(%1), %0" : "=r"(v32) : "r"(m) : "memory");  // disp32, no register
  expect(v32 == 0);
  asm volatile("movq %0, (%1)" ::"r"(0ull), "r"(m) : "memory");  // write to the read-only id
  asm volatile("movq (%1), %0" : "=r"(v) : "r"(m) : "memory");
  expect(v == hv::layout::mmio_device_id);
  // Read-modify-write and other forms the emulator executes (each RMW is one device read
  // and one device write).
  asm volatile("movq %0, 8(%1)" ::"r"(100ull), "r"(m) : "memory");
  asm volatile("addq $5, 8(%0)" ::"r"(m) : "memory");  // 48 83 /0 ib
  asm volatile("orq %0, 8(%1)" ::"r"(0x1000ull), "r"(m) : "memory");  // 48 09 /r
  asm volatile("movq 8(%1), %0" : "=r"(v) : "r"(m) : "memory");
  expect(v == (105 | 0x1000));
  v = 0xFFull;
  asm volatile("xchgq %0, 8(%1)" : "+r"(v) : "r"(m) : "memory");  // 48 87 /r
  expect(v == (105 | 0x1000));
  std::int64_t sv = 0;
  asm volatile("movsbq 8(%1), %0" : "=r"(sv) : "r"(m) : "memory");  // 48 0F BE: sign-extends 0xFF
  expect(sv == -1);
  std::uint8_t flag = 0;
  asm volatile("cmpq $0xFF, 8(%1)\n\tsete %0" : "=r"(flag) : "r"(m) : "memory", "cc");  // 48 81 /7 id: flags only
  expect(flag == 1);
  asm volatile("movq 16(%1), %0" : "=r"(v) : "r"(m) : "memory");  // writes so far
  expect(v == 9);  // 5 above + MOV, ADD, OR, XCHG
  report("mmio_forms", fails == 0, n, fails);
}

/// Hostile guest: accesses the hypervisor must survive without exposing itself.
void check_hostile() {
  report("hostile_unknown_hypercall", vmcall(0x4B4B4B4B) == ~0ull);
  // The hypervisor's own image (its multiboot header) is not mapped by EPT: reads give
  // all ones, writes go nowhere.
  auto* hv_image = reinterpret_cast<volatile std::uint64_t*>(hv::layout::hypervisor_image_gpa);
  std::uint64_t before = *hv_image;
  *hv_image = 0;
  std::uint64_t after = *hv_image;
  report("hostile_read_hypervisor_memory", before == ~0ull && after == ~0ull, before, after);
  auto* beyond = reinterpret_cast<volatile std::uint32_t*>(0x40000000);  // no RAM, no device
  std::uint32_t u = *beyond;
  report("hostile_unassigned_gpa", u == 0xFFFFFFFFu, u);
  // An instruction the emulator does not handle: #UD, and the guest goes on.
  unsigned r = probe_mmio_xadd(reinterpret_cast<std::uint32_t*>(hv::layout::mmio_device_gpa + 8), 1);
  report("hostile_mmio_not_emulable_ud", r == (0x100 | 6), r);
}

}  // namespace


// Probes for the injection checks (PROBE_BEGIN/PROBE_END from the first block).
asm(R"(
  .text
PROBE_BEGIN probe_mov_cr0
  movq %rdi, %cr0
PROBE_END
PROBE_BEGIN probe_mov_cr4
  movq %rdi, %cr4
PROBE_END
PROBE_BEGIN probe_vmxon
  vmxon (%rdi)
PROBE_END
PROBE_BEGIN probe_vmread
  vmread %rdi, %rax
PROBE_END
PROBE_BEGIN probe_vmclear
  vmclear (%rdi)
PROBE_END
PROBE_BEGIN probe_invept
  invept (%rdi), %rsi
PROBE_END
PROBE_BEGIN probe_ud2
  ud2
PROBE_END
PROBE_BEGIN probe_int3
  int3
  .globl probe_int3_next
probe_int3_next:
PROBE_END
PROBE_BEGIN probe_int80
  int $0x80
  .globl probe_int80_next
probe_int80_next:
PROBE_END
)");

extern "C" void guest_exception(isr_frame* f) {
  std::uint64_t cr2;
  asm volatile("mov %%cr2, %0" : "=r"(cr2));
  g_fault_vector = static_cast<std::uint32_t>(f->vector);
  g_fault_error = f->error_code;
  g_fault_cr2 = cr2;
  g_fault_count = g_fault_count + 1;
  g_fault_rip = f->rip;
  if (g_recover_rip) {
    if (f->cs & 3) {  // from CPL 3 (probe_user): back to the kernel at the saved stack
      f->cs = hc::guest_cs;
      f->ss = hc::guest_ds;
      f->rsp = g_probe_rsp;
    }
    f->rip = g_recover_rip;
    g_recover_rip = 0;
    return;
  }
  vmcall(hc::unexpected, f->vector, f->error_code, f->rip, cr2);
  for (;;) asm volatile("hlt");
}

extern "C" void guest_main(std::uint64_t config) {
  g_amd = cpuid(0).ebx == 0x68747541;  // "Auth"
  g_config = config;
  build_descriptor_tables();
  build_page_tables();
  log((config & hc::cfg_wp_intercepted) ? "conformance guest up (CR0.WP intercepted)"
                                        : "conformance guest up (CR0.WP guest-owned)");
  if (config & hc::cfg_triple_fault) {
    log("hostile: clearing the IDT and raising #UD (expect a triple fault)");
    for (auto& e : guest_idt) e = 0;
    asm volatile("ud2");
  }
  if (config & hc::cfg_ept_diff) {
    check_ept_differential(6000);
    return;
  }
  if (config & hc::cfg_spin) {
    // Busy work while the hypervisor switches VMCSes under us on preemption-timer exits.
    // With RFLAGS.IF = 1: a Bochs 2.7 erratum keeps the host's external interrupts blocked
    // while a guest entered with IF = 0 runs, and under KVM on Bochs those carry the
    // emulated preemption timer (vmx/scheduler.cpp, spin_rflags). The hypervisor masks the PICs
    // first, so no interrupt is delivered here.
    static volatile std::uint64_t spins;
    asm volatile("sti" ::: "memory");
    std::uint64_t target = 150000;
    for (std::uint64_t i = 0; i < 150000; ++i) spins = spins + 1;
    while (vmcall(hc::spin_more) == 1) {
      for (std::uint64_t i = 0; i < 10000; ++i) spins = spins + 1;
      target += 10000;
    }
    asm volatile("cli" ::: "memory");
    report("spin_survived_switches", spins == target, spins);
    return;
  }
  if (config & hc::cfg_paging_diff) {
    check_paging_differential(12000);
    return;
  }
  if (config & hc::cfg_ltr_only) {
    check_ltr();
    return;
  }
  if (config & hc::cfg_quick) {
    check_cpuid();
    check_hostile();
    return;
  }
  check_wp_toggle();
  check_wp_semantics();
  check_cpuid();
  check_msrs();
  check_ltr();
  check_lldt();
  check_cr3_reserved();
  check_mmio();
  check_hostile();
  check_injection();
  check_reinjection();
}
