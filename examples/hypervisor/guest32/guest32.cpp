// SPDX-License-Identifier: MIT
// The 32-bit conformance guest: a freestanding protected-mode kernel (built with -m32) that
// the hypervisor enters with IA-32e mode guest = 0, CR0.PG = 1, CR4.PSE = 1 and 32-bit
// paging over its boot page directory. It runs the differential paging cases for 32-bit
// paging (4 KiB, 4 MiB with CR4.PSE, PSE-36, PS ignored without PSE) and PAE paging
// (PDPTEs loaded by MOV to CR3, #GP on their reserved bits, XD with EFER.NXE): each access
// is done natively, and the hypervisor repeats it with hvkit's walker (hc::paging_case32).
// Linked on its own (guest32.ld), like the 64-bit guest.
#include <cstdint>

#include "../guest_stubs.hpp"
#include "../hypercall.hpp"
#include "../layout.hpp"
#include "arch_bits.hpp"

namespace hc = hv::hc;
using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

// Selectors (GDT built by build_tables; the hypervisor enters with CS 0x08, SS/DS 0x10,
// TR 0x18, matching it).
constexpr u16 sel_code = 0x08, sel_data = 0x10, sel_tss = 0x18;
constexpr u16 sel_user_data = 0x23, sel_user_code = 0x2B;  // DPL 3 (RPL 3)
constexpr u16 sel_ldt = 0x30;                              // LDT at the test address
static_assert(sel_tss == hc::guest_tr && sel_code == hc::guest_cs && sel_data == hc::guest_ds,
              "the VMCS guest state (vmx/vmx_setup.cpp) loads these");
static_assert(sel_user_code == 0x2B && sel_user_data == 0x23, "probe_user and the user stub use them");

asm(R"(
  .section .text.header, "a"
  .globl guest_header
guest_header:
  .long 0x47544b48                   /* hc::header_magic */
  .long 0
  .long __guest_bss_end, 0           /* image_end */
  .long guest_entry, 0
  .long guest_stack_top, 0
  .long guest_gdt, 0                 /* gdt_base */
  .long 8 * 8 - 1, 0
  .long guest_idt, 0
  .long 256 * 8 - 1, 0
  .long guest_tss, 0

  .section .bss.stack, "aw", @nobits
  .balign 16
  .skip 32768
guest_stack_top:
  .skip 16384
  .globl guest_event_stack_top
guest_event_stack_top:

  .section .text.entry, "ax"
  .globl guest_entry
guest_entry:
  /* ESP = guest_stack_top, EDI = configuration (hc::cfg_*) */
  push %edi
  call guest_main
  mov $5, %eax                       /* hc::done */
  cmpb $0, g_amd
  jne 2f
  vmcall
  jmp 1f
2:
  vmmcall                            /* AMD: VMCALL is #UD there */
1:
  hlt
  jmp 1b

  .text
)" HV_GUEST_ISR_STUBS R"(

/* frame: EDI ESI EBP ESP EBX EDX ECX EAX (pusha), vector, error code, EIP, CS, EFLAGS */
guest_isr_common:
  pusha
  mov %esp, %eax
  push %eax
  cld
  call guest_exception
  add $4, %esp
  popa
  add $8, %esp
  iret

  .section .rodata
  .balign 4
  .globl guest_isr_table
guest_isr_table:
  .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
  .long guest_isr_\n
  .endr
  .globl guest_isr_128_addr
guest_isr_128_addr:
  .long guest_isr_128

  .text
.macro PROBE_BEGIN name
  .globl \name
\name:
  movl $9f, g_recover_eip
.endm
.macro PROBE_END
  movl $0, g_recover_eip
  xorl %eax, %eax
  ret
9:
  movl g_fault_vector, %eax
  orl $0x100, %eax
  ret
.endm

/* unsigned probe_read32(const u32* p) */
PROBE_BEGIN probe_read32
  movl 4(%esp), %ecx
  movl (%ecx), %eax
PROBE_END

/* unsigned probe_write32(u32* p, u32 v) */
PROBE_BEGIN probe_write32
  movl 4(%esp), %ecx
  movl 8(%esp), %edx
  movl %edx, (%ecx)
PROBE_END

/* unsigned probe_load_fs(u16 selector): the descriptor read is an implicit supervisor access */
PROBE_BEGIN probe_load_fs
  movl 4(%esp), %eax
  movw %ax, %fs
PROBE_END

/* unsigned probe_mov_cr3(u32 value): with PAE paging the PDPTE load may #GP */
PROBE_BEGIN probe_mov_cr3
  movl 4(%esp), %eax
  movl %eax, %cr3
PROBE_END

/* unsigned probe_mov_cr0(u32 value) */
PROBE_BEGIN probe_mov_cr0
  movl 4(%esp), %eax
  movl %eax, %cr0
PROBE_END

/* unsigned probe_fetch(const void* f): calls f (a RET) */
  .globl probe_fetch
probe_fetch:
  movl $8f, g_recover_eip
  movl %esp, g_probe_esp
  movl 4(%esp), %ecx
  call *%ecx
  movl $0, g_recover_eip
  xorl %eax, %eax
  ret
8:
  movl g_probe_esp, %esp
  movl g_fault_vector, %eax
  orl $0x100, %eax
  ret

/* unsigned probe_user(u32 addr, u32 kind, u32 value, u32 user_eip, u32 user_esp): the user
   stub at CPL 3 (IRET) does the access and returns with INT 0x80; a fault comes back the
   same way (guest_exception redirects both to label 7 at CPL 0). */
  .globl probe_user
probe_user:
  push %ebx
  push %ebp
  push %esi
  push %edi
  movl $7f, g_recover_eip
  movl %esp, g_probe_esp
  movl 20(%esp), %edi                /* addr */
  movl 24(%esp), %esi                /* kind */
  movl 28(%esp), %edx                /* value */
  movl 32(%esp), %ecx                /* user EIP */
  movl 36(%esp), %ebx                /* user ESP */
  pushfl
  popl %eax
  pushl $0x23                        /* SS: user data, RPL 3 */
  pushl %ebx
  pushl %eax                         /* EFLAGS (AC as for the case) */
  pushl $0x2B                        /* CS: user code, RPL 3 */
  pushl %ecx
  iret
7:
  movl g_probe_esp, %esp
  movl g_fault_vector, %eax
  cmpl $0x80, %eax
  je 6f
  orl $0x100, %eax
  jmp 5f
6:
  xorl %eax, %eax
5:
  pop %edi
  pop %esi
  pop %ebp
  pop %ebx
  ret

)" HV_GUEST_USER_STUB("%edi", "%edx", "%eax", "movl") R"(
  .text
)");

extern "C" {
struct isr_frame {
  u32 edi, esi, ebp, esp, ebx, edx, ecx, eax;
  u32 vector, error_code, eip, cs, eflags;
};

alignas(4096) u64 guest_idt[256];
alignas(16) u64 guest_gdt[8];
alignas(16) u8 guest_tss[104];
extern const u32 guest_isr_table[32];
extern const u32 guest_isr_128_addr;
extern const u8 user_stub_start[], user_stub_end[];
extern u8 guest_event_stack_top[];

/// The CPU is AMD's (CPUID 0 vendor "AuthenticAMD"): hypercalls are VMMCALL. Set first thing.
bool g_amd;
volatile u32 g_recover_eip;
volatile u32 g_probe_esp;
volatile u32 g_fault_vector;
volatile u32 g_fault_error;
volatile u32 g_fault_cr2;

unsigned probe_read32(const u32* p);
unsigned probe_write32(u32* p, u32 v);
unsigned probe_load_fs(u32 selector);
unsigned probe_mov_cr3(u32 value);
unsigned probe_mov_cr0(u32 value);
unsigned probe_fetch(const void* code);
unsigned probe_user(u32 addr, u32 kind, u32 value, u32 user_eip, u32 user_esp);

void guest_exception(isr_frame* f);
void guest_main(u32 config);
}

namespace {

inline u32 vmcall(u32 nr, u32 a = 0, u32 b = 0, u32 c = 0, u32 d = 0) {
  u32 ret;
  if (g_amd)
    asm volatile("vmmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d) : "memory");
  else
    asm volatile("vmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d) : "memory");
  return ret;
}
inline u32 addr(const void* p) { return reinterpret_cast<u32>(p); }
void log(const char* s) { vmcall(hc::log, addr(s)); }
void report(const char* name, bool pass, u32 a = 0, u32 b = 0) {
  vmcall(hc::result, addr(name), pass ? hc::result_pass : hc::result_fail, a, b);
}

inline u32 read_cr0() { u32 v; asm volatile("mov %%cr0, %0" : "=r"(v)); return v; }
inline void write_cr0(u32 v) { asm volatile("mov %0, %%cr0" ::"r"(v) : "memory"); }
inline u32 read_cr4() { u32 v; asm volatile("mov %%cr4, %0" : "=r"(v)); return v; }
inline void write_cr4(u32 v) { asm volatile("mov %0, %%cr4" ::"r"(v) : "memory"); }
inline void write_cr3(u32 v) { asm volatile("mov %0, %%cr3" ::"r"(v) : "memory"); }
inline u64 rdmsr(u32 m) {
  u32 lo, hi;
  asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(m));
  return (u64{hi} << 32) | lo;
}
inline void wrmsr(u32 m, u64 v) {
  asm volatile("wrmsr" ::"c"(m), "a"(static_cast<u32>(v)), "d"(static_cast<u32>(v >> 32)) : "memory");
}
struct cpuid_regs {
  u32 eax, ebx, ecx, edx;
};
inline cpuid_regs cpuid(u32 leaf, u32 sub = 0) {
  cpuid_regs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(sub));
  return r;
}

using namespace hv::guest32_bits;  // the bits, checked against hvkit::x86 in boot.cpp

// ---- memory ------------------------------------------------------------------------------
// Identity map of guest RAM [16 MiB, 32 MiB) only (all the guest touches), supervisor,
// except the user pages at 30 MiB. The differential test address hc::test_la32 is
// randomised per case; it always lands on the scratch page at 28 MiB.
constexpr u32 scratch = hv::layout::guest_mem_base + 0xC00000;  // 28 MiB, 4 MiB aligned
constexpr u32 user_code_page = hv::layout::guest_mem_base + 0xE00000;   // 30 MiB
constexpr u32 user_stack_page = user_code_page + 0x1000;
constexpr u32 test_la = hc::test_la32;

// 32-bit paging: the page directory and four page tables of 4 KiB pages (so that the map
// does not depend on CR4.PSE). PDEs 0x380-0x387 (linear 3.5 GiB, unused here) hold the PAE
// PDPT: CR3 = pd32 + 0xE00 is the same page directory for 32-bit paging (CR3 bits 11:0
// are ignored there) and the PDPT for PAE paging (CR3 bits 31:5), so CR4.PAE can be
// toggled with paging on (SDM 4.1.2).
alignas(4096) u32 pd32[1024];
alignas(4096) u32 pt32[4][1024];
alignas(4096) u32 pt32_test[1024];
constexpr unsigned pdpt_index = 0x380;
constexpr u32 pae_cr3_offset = pdpt_index * 4;
// PAE paging: PD of 0-1 GiB (2 MiB pages for 16-32 MiB), the test PD and PT.
alignas(4096) u64 pd_pae0[512];
alignas(4096) u64 pd_pae_test[512];
alignas(4096) u64 pt_pae_test[512];
constexpr unsigned test_pde32 = test_la >> 22;
constexpr unsigned test_pde_pae = (test_la >> 21) & 511;
volatile u64* const pdpt = reinterpret_cast<volatile u64*>(&pd32[pdpt_index]);

void build_tables() {
  // GDT (SDM 3.4.5): flat code/data at DPL 0 and 3, the busy TSS the VMCS loads, the LDT.
  guest_gdt[0] = 0;
  guest_gdt[1] = 0x00CF9B000000FFFF;  // 0x08 code32
  guest_gdt[2] = 0x00CF93000000FFFF;  // 0x10 data
  const u64 t = addr(guest_tss);
  guest_gdt[3] = 103 | ((t & 0xFFFFFF) << 16) | (0x89ull << 40) | (((t >> 24) & 0xFF) << 56);  // available 32-bit TSS
  guest_gdt[4] = 0x00CFF3000000FFFF;  // 0x20 user data, DPL 3
  guest_gdt[5] = 0x00CFFB000000FFFF;  // 0x28 user code32, DPL 3
  const u64 l = test_la;
  guest_gdt[6] = 0xFFFF | ((l & 0xFFFFFF) << 16) | (0x82ull << 40) | (((l >> 24) & 0xFF) << 56);  // 0x30 LDT
  guest_gdt[7] = 0;
  // TSS: the stack for events taken at CPL 3 (ESP0/SS0, SDM 8.2.1).
  const u32 esp0 = addr(guest_event_stack_top);
  for (unsigned b = 0; b < 4; ++b) guest_tss[4 + b] = static_cast<u8>(esp0 >> (8 * b));
  guest_tss[8] = sel_data;
  guest_tss[102] = 104;
  for (unsigned v = 0; v < 32; ++v) {
    const u64 h = guest_isr_table[v];
    guest_idt[v] = (h & 0xFFFF) | (u64{sel_code} << 16) | (0x8E00ull << 32) | ((h >> 16) << 48);
  }
  const u64 h = guest_isr_128_addr;  // INT 0x80: DPL 3
  guest_idt[0x80] = (h & 0xFFFF) | (u64{sel_code} << 16) | (0xEE00ull << 32) | ((h >> 16) << 48);
  // TR loaded by the guest's own LTR (it marks the descriptor busy, SDM Vol. 2A LTR), not only
  // by the hypervisor's VMCS/VMCB: QEMU's TCG keeps the available type in its TR cache and
  // aborts ("invalid tss type") on a privilege change through a TR whose cached type is busy,
  // as every VMCB/VMCS TR is (docs/hypervisor.md, SVM errata).
  asm volatile("ltr %w0" ::"r"(sel_tss) : "memory");
  // Data segments DPL 3 (usable at CPL 0 and 3, so an IRET to CPL 3 keeps them); SS DPL 0.
  asm volatile("movw %w0, %%ds\n\tmovw %w0, %%es\n\tmovw %w1, %%fs\n\tmovw %w1, %%gs" ::"r"(sel_user_data), "r"(0)
               : "memory");

  // 32-bit paging.
  for (unsigned i = 0; i < 4; ++i) {
    for (u32 j = 0; j < 1024; ++j) pt32[i][j] = (hv::layout::guest_mem_base + ((i * 1024 + j) << 12)) | p_bit | rw_bit;
    pd32[(hv::layout::guest_mem_base >> 22) + i] = addr(pt32[i]) | p_bit | rw_bit | us_bit;
  }
  pt32[3][(user_code_page >> 12) & 1023] |= us_bit;
  pt32[3][(user_stack_page >> 12) & 1023] |= us_bit;
  // PAE paging: PDPTE 0 -> pd_pae0 (16-32 MiB in 2 MiB pages; the 2 MiB page of the user
  // pages is user-mode), PDPTE 3 -> the test PD.
  for (u32 i = 8; i < 16; ++i) pd_pae0[i] = (u64{i} << 21) | p_bit | rw_bit | ps_bit;
  pd_pae0[user_code_page >> 21] |= us_bit;
  pdpt[0] = addr(pd_pae0) | p_bit;
  pdpt[1] = 0;
  pdpt[2] = 0;
  pdpt[3] = 0;
  write_cr3(addr(pd32) + pae_cr3_offset);
}

struct rng {
  u64 s;
  u32 next() {  // xorshift64*, upper half
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<u32>((s * 0x2545F4914F6CDD1Dull) >> 32);
  }
  bool chance(u32 one_in) { return next() % one_in == 0; }
};

/// A 32-bit paging entry (SDM 4.3, Tables 4-4 to 4-6): mostly permissive rights, A/D clear.
/// A 4 MiB page may carry PAT (bit 12), PSE-36 address bits (bit 13 = PA bit 32: the EPT
/// alias of the scratch area) and, rarely, reserved bit 21 (bits 21:(M-19) with
/// M = min(MAXPHYADDR, 40)). 4 KiB entries have no reserved bits.
u32 random_entry32(rng& g, u32 target, bool large, bool pse36) {
  u32 e = target | p_bit;
  if (g.chance(16)) e &= ~p_bit;
  if (!g.chance(4)) e |= rw_bit;
  if (!g.chance(4)) e |= us_bit;
  if (large) {
    e |= ps_bit;
    if (g.chance(8)) e |= 1u << 12;              // PAT
    if (pse36 && g.chance(4)) e |= 1u << 13;     // PA bit 32
    if (g.chance(24)) e |= 1u << 21;             // reserved
  }
  return e;
}

/// A PAE paging entry (SDM 4.4, Tables 4-9 to 4-11): XD (reserved without EFER.NXE), a
/// reserved bit above MAXPHYADDR (bit 45 on Bochs' 40-bit models) or in a 2 MiB page's
/// address bits 20:13.
u64 random_entry_pae(rng& g, u64 target, bool large) {
  u64 e = target | p_bit;
  if (g.chance(16)) e &= ~p_bit;
  if (!g.chance(4)) e |= rw_bit;
  if (!g.chance(4)) e |= us_bit;
  if (large) e |= ps_bit;
  if (g.chance(4)) e |= 1ull << 63;
  if (g.chance(24)) e |= (large && g.chance(2)) ? 1ull << 13 : 1ull << 45;
  return e;
}

/// The PDPTE of the test address (SDM 4.4.1, Table 4-8): bits 2:1, 8:5 and 63:MAXPHYADDR
/// are reserved, checked when MOV to CR3 loads it (#GP).
u64 random_pdpte(rng& g, u64 target) {
  u64 e = target | p_bit;
  if (g.chance(16)) e &= ~p_bit;
  if (g.chance(4)) e |= 1u << 3;  // PWT
  if (g.chance(4)) e |= 1u << 4;  // PCD
  if (g.chance(10)) {
    static constexpr u8 bits[] = {1, 2, 5, 6, 7, 8, 45, 63};
    e |= 1ull << bits[g.next() % 8];
  }
  return e;
}

void copy_user_stub() {
  for (const u8* b = user_stub_start; b != user_stub_end; ++b)
    reinterpret_cast<volatile u8*>(user_code_page)[b - user_stub_start] = *b;
}

/// One mode's cases: random entries for test_la, random CR0.WP, CR4.SMEP/SMAP (and
/// CR4.PSE with 32-bit paging), EFER.NXE and RFLAGS.AC; reads, writes and fetches at CPL 0
/// and 3 and implicit supervisor reads (FS loaded from the LDT at test_la); each reported
/// to the hypervisor with the CPU's outcome and A/D flags.
u32 run_cases(bool pae, u32 cases, u64 seed) {
  rng g{seed};
  const cpuid_regs l7 = cpuid(7);
  const bool has_smep = (l7.ebx >> 7) & 1, has_smap = (l7.ebx >> 20) & 1;
  const bool has_nx = (cpuid(0x80000001).edx >> 20) & 1;
  const bool has_pse36 = (cpuid(1).edx >> 17) & 1;
  const u32 cr0_base = read_cr0() | cr0_wp;
  u32 cr4 = read_cr4();
  u64 efer = rdmsr(msr_efer);
  const u32 cr3 = addr(pd32) + pae_cr3_offset;
  u32 mismatches = 0;
  hc::paging_case_block blk{};
  for (u32 i = 0; i < cases; ++i) {
    const bool wp = !g.chance(3), smep = has_smep && g.chance(2), smap = has_smap && g.chance(2);
    const bool nxe = has_nx && !g.chance(4), ac = has_smap && g.chance(2);
    const bool pse = pae || !g.chance(4);
    const u32 want_cr4 = (cr4 & ~(cr4_smep | cr4_smap | cr4_pse)) | (smep ? cr4_smep : 0) | (smap ? cr4_smap : 0) |
                         (pse ? cr4_pse : 0);
    if (want_cr4 != cr4) {
      write_cr4(want_cr4);
      cr4 = want_cr4;
    }
    const u64 want_efer = (efer & ~efer_nxe) | (nxe ? efer_nxe : 0);
    if (want_efer != efer) {
      wrmsr(msr_efer, want_efer);
      efer = want_efer;
    }
    // Entries (A/D clear), then MOV to CR3: flushes the TLB and, with PAE, loads the PDPTEs.
    const bool large = g.next() % 8 >= 5;
    u64 e[3] = {0, 0, 0};  // [level - 1]
    if (!pae) {
      // Without CR4.PSE the PS bit is ignored and the PDE references a page table: point it
      // at the test page table then.
      const u32 target = large && pse ? scratch : addr(pt32_test);
      e[1] = random_entry32(g, target, large, has_pse36);
      e[0] = random_entry32(g, scratch, false, false);
      pd32[test_pde32] = static_cast<u32>(e[1]);
      pt32_test[0] = static_cast<u32>(e[0]);
    } else {
      e[2] = random_pdpte(g, addr(pd_pae_test));
      e[1] = random_entry_pae(g, large ? scratch : addr(pt_pae_test), large);
      e[0] = random_entry_pae(g, scratch, false);
      pdpt[3] = e[2];
      *reinterpret_cast<volatile u64*>(&pd_pae_test[test_pde_pae]) = e[1];
      *reinterpret_cast<volatile u64*>(&pt_pae_test[0]) = e[0];
    }
    const unsigned kind = g.next() % 4;  // 0 read, 1 write, 2 fetch, 3 implicit supervisor read
    const bool user = g.chance(2);
    const u32 la = test_la + (kind == 2 ? 0 : (kind == 3 ? 8 : 0x100));
    blk = {};
    blk.la = la;
    blk.access = kind == 3 ? 0x80000000u : ((kind == 1 ? 0x2 : (kind == 2 ? 0x10 : 0)) | (user ? 0x4 : 0));
    blk.cr3 = cr3;
    g_fault_error = 0;
    blk.cr3_result = probe_mov_cr3(cr3);
    blk.cr3_result = blk.cr3_result ? (blk.cr3_result | (g_fault_error << 16)) : 0;
    blk.result = 0xFFFF;
    if (blk.cr3_result == 0) {
      write_cr0(wp ? cr0_base : cr0_base & ~cr0_wp);
      if (ac) asm volatile("stac" ::: "memory");
      g_fault_error = 0;
      g_fault_cr2 = 0;
      unsigned r;
      if (user) r = probe_user(la, kind, 0x5A5A5A5A, user_code_page, user_stack_page + 4096);
      else if (kind == 3) r = probe_load_fs(0x0F);
      else if (kind == 0) r = probe_read32(reinterpret_cast<const u32*>(la));
      else if (kind == 1) r = probe_write32(reinterpret_cast<u32*>(la), 0x5A5A5A5A);
      else r = probe_fetch(reinterpret_cast<const void*>(la));
      blk.result = r;
      blk.error = g_fault_error;
      blk.cr2 = g_fault_cr2;
      asm volatile("movw %w0, %%fs" ::"r"(0) : "memory");
      u64 now[3];
      if (!pae) {
        now[1] = pd32[test_pde32];
        now[0] = pt32_test[0];
        now[2] = 0;
      } else {
        now[2] = pdpt[3];
        now[1] = *reinterpret_cast<volatile u64*>(&pd_pae_test[test_pde_pae]);
        now[0] = *reinterpret_cast<volatile u64*>(&pt_pae_test[0]);
      }
      // The flags the CPU set (a not-present PDPTE may hold any bit 6:5, put there by us).
      for (unsigned lvl = 1; lvl <= 3; ++lvl) {
        const u64 set = now[lvl - 1] & ~e[lvl - 1];
        if (set & 0x20) blk.ad |= 1u << (lvl - 1);
        if (set & 0x40) blk.ad |= 1u << (hc::ad_dirty_shift + lvl - 1);
      }
      if (kind == 1 && r == 0) *reinterpret_cast<volatile u8*>(scratch) = 0xC3;
      // A/D clear again: the hypervisor walks the state the CPU started from.
      if (!pae) {
        pd32[test_pde32] = static_cast<u32>(e[1]);
        pt32_test[0] = static_cast<u32>(e[0]);
      } else {
        pdpt[3] = e[2];  // a PDPTE has no A flag, but a CPU that writes one (QEMU) is undone too
        *reinterpret_cast<volatile u64*>(&pd_pae_test[test_pde_pae]) = e[1];
        *reinterpret_cast<volatile u64*>(&pt_pae_test[0]) = e[0];
      }
    }
    // With CR0.WP and RFLAGS.AC as they were for the access (the hypervisor reads them
    // from the VMCS).
    if (ac && blk.cr3_result != 0) asm volatile("stac" ::: "memory");
    const u32 verdict = vmcall(hc::paging_case32, addr(&blk));
    if (ac) asm volatile("clac" ::: "memory");
    if (pae && blk.cr3_result != 0) {
      // The PDPTE registers kept their old values: load a valid set again (before the MOV
      // to CR0 below: Bochs 2.7 checks the PDPTEs in memory on every MOV to CR0 with PAE
      // paging, see check_pae_cr0_pdpte()).
      pdpt[3] = 0;
      write_cr3(cr3);
    }
    write_cr0(cr0_base);
    if (verdict != 0) ++mismatches;
  }
  // Back to the base state: no test mapping, SMEP/SMAP off, PSE on.
  pd32[test_pde32] = 0;
  pdpt[3] = 0;
  write_cr4((cr4 & ~(cr4_smep | cr4_smap)) | cr4_pse);
  write_cr3(cr3);
  return mismatches;
}

/// PAE paging loads the PDPTEs on MOV to CR0 only when the write changes CD, NW or PG (SDM
/// 4.4.1); toggling CR0.WP with a PDPTE in memory that has a reserved bit (the registers
/// hold a valid one) must not fault. Bochs 2.7 checks the PDPTEs on every MOV to CR0 and
/// raises #GP: reported as an erratum of the emulated CPU. The hypervisor's view of the same
/// write (vmx::evaluate_cr_write: no reload_pdptrs action) is what hvkit does.
void check_pae_cr0_pdpte() {
  const u32 cr3 = addr(pd32) + pae_cr3_offset;
  pdpt[3] = 0;
  write_cr3(cr3);
  pdpt[3] = addr(pd_pae_test) | p_bit | (1u << 5);  // reserved bit 5, in memory only
  const u32 cr0 = read_cr0();
  g_fault_error = ~0u;
  const unsigned r1 = probe_mov_cr0(cr0 & ~cr0_wp);
  const unsigned r2 = probe_mov_cr0(cr0);
  const u32 err = g_fault_error;
  pdpt[3] = 0;
  write_cr3(cr3);
  write_cr0(cr0);
  vmcall(hc::result, addr("pae_mov_cr0_no_pdpte_load"), r1 == 0 && r2 == 0 ? hc::result_pass : hc::result_erratum,
         (r1 << 16) | r2, err);
}

}  // namespace

extern "C" void guest_exception(isr_frame* f) {
  u32 cr2;
  asm volatile("mov %%cr2, %0" : "=r"(cr2));
  g_fault_vector = f->vector;
  g_fault_error = f->error_code;
  g_fault_cr2 = cr2;
  if (g_recover_eip) {
    // From CPL 3 (probe_user): an IRET to CPL 0 pops EIP, CS and EFLAGS only; the recovery
    // code then restores the kernel stack it saved.
    if (f->cs & 3) f->cs = sel_code;
    f->eip = g_recover_eip;
    g_recover_eip = 0;
    return;
  }
  vmcall(hc::unexpected, f->vector, f->error_code, f->eip, cr2);
  for (;;) asm volatile("hlt");
}

extern "C" void guest_main(u32 config) {
  g_amd = cpuid(0).ebx == 0x68747541;  // "Auth"
  build_tables();
  static_cast<void>(config);
  log("32-bit guest up (protected mode, 32-bit paging)");
  // The LDT whose descriptor 1 lies at test_la + 8 (a DPL 3 data segment, accessed set, so
  // loading FS with it is a pure implicit supervisor read).
  *reinterpret_cast<volatile u64*>(scratch + 8) = 0x00CFF3000000FFFF;
  *reinterpret_cast<volatile u8*>(scratch) = 0xC3;  // RET, for fetches
  asm volatile("lldt %w0" ::"r"(sel_ldt) : "memory");
  copy_user_stub();
  constexpr u32 cases = 12000;
  u32 m32 = run_cases(false, cases, 0x3332'6269'7400'0001ull);
  // PAE paging: CR3 already holds the PDPT (pd32 + 0xE00); CR4.PAE=1 loads the PDPTEs.
  write_cr4(read_cr4() | cr4_pae);
  u32 mpae = run_cases(true, cases, 0x7061'6562'6974'0001ull);
  check_pae_cr0_pdpte();
  write_cr4(read_cr4() & ~cr4_pae);
  asm volatile("lldt %w0" ::"r"(0) : "memory");
  report("paging_differential_guest32", m32 == 0 && mpae == 0, m32, mpae);
}
