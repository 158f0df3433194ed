// SPDX-License-Identifier: MIT
// The exit-cost guest: the same bytes run under every hypervisor compared (KVM through
// examples/exit-cost/vmm, the hvkit reference hypervisor). It times N repetitions of each
// exit with RDTSC and prints one line per row on I/O port 0xE9:
//
//   exit-cost-guest: hash=<FNV-1a 64 of the loaded image, hex> bytes=<image size>
//   exit-cost-guest: row=<name> reps=<N> tsc=<total TSC> tsc_per_rep=<total/N, 1 decimal>
//   exit-cost-guest: done
//
// then writes 0 to port 0xF4 (the end) and halts. On Bochs the TSC advances with the
// instructions executed, so a row's TSC per repetition counts the instructions of the
// whole round trip (exit, the hypervisor's handling, entry) plus the loop's own few.
//
// The environment it expects (the "exit-cost profile" a hypervisor provides):
//  - the flat image loaded at guest-physical 0x1000000 and entered there in 64-bit mode,
//    CPL 0, interrupts off, with identity paging (4 KiB/2 MiB/1 GiB pages, any) covering the
//    image and its .bss (one page after it), and guest-physical 0xD0000000 (the MMIO page);
//  - CPUID, RDMSR of IA32_EFER (C000_0080h), MOV to CR0 emulated by the hypervisor as the
//    processor would (answers from its policy; WP toggled);
//  - OUT to port 0x0700 (1 byte) handled and discarded by the hypervisor;
//  - 4-byte writes to guest-physical page 0xD0000000 (not memory: an EPT/NPT violation or
//    MMIO exit) emulated and discarded;
//  - OUT to port 0xE9: one byte of console output each; OUT to 0xF4: the end.
// The rows: empty (the loop alone: the floor), cpuid (leaf 0), rdmsr_efer, cr0_wp (MOV to CR0
// toggling WP; intercepted or guest-owned as the hypervisor decides), cr0_ts (MOV to CR0
// toggling TS: guest-owned under KVM, the no-exit floor of a CR0 write there), out_port,
// mmio_write.
#include <cstddef>
#include <cstdint>

extern "C" {
extern const unsigned char __image_start[], __image_end[];
[[noreturn]] void guest_main();
}

namespace {

constexpr std::uint16_t port_console = 0xe9, port_end = 0xf4, port_test = 0x700;
constexpr std::uint64_t mmio_page = 0xd000'0000;
constexpr unsigned reps = 1000, warmup = 16;

inline void outb(std::uint16_t port, std::uint8_t v) { asm volatile("outb %0, %1" ::"a"(v), "Nd"(port) : "memory"); }

void put(const char* s) {
  while (*s) outb(port_console, static_cast<std::uint8_t>(*s++));
}
void put_dec(std::uint64_t v) {
  char b[21];
  int i = 20;
  b[i] = 0;
  do {
    b[--i] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  put(b + i);
}
void put_hex(std::uint64_t v) {
  char b[17];
  for (int i = 15; i >= 0; --i, v >>= 4) b[i] = "0123456789abcdef"[v & 15];
  b[16] = 0;
  put(b);
}

inline std::uint64_t tsc() {
  std::uint32_t lo, hi;
  asm volatile("lfence; rdtsc; lfence" : "=a"(lo), "=d"(hi)::"memory");
  return (std::uint64_t{hi} << 32) | lo;
}

inline std::uint64_t read_cr0() {
  std::uint64_t v;
  asm volatile("mov %%cr0, %0" : "=r"(v));
  return v;
}
inline void write_cr0(std::uint64_t v) { asm volatile("mov %0, %%cr0" ::"r"(v) : "memory"); }

// One repetition of each row.
void rep_empty(std::uint64_t) { asm volatile("" ::: "memory"); }
void rep_cpuid(std::uint64_t) {
  std::uint32_t a = 0, b, c = 0, d;
  asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d)::"memory");
}
void rep_rdmsr(std::uint64_t) {
  std::uint32_t lo, hi;
  asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(0xc000'0080u) : "memory");
}
void rep_cr0_wp(std::uint64_t i) {
  static std::uint64_t cr0;
  if (i == 0) cr0 = read_cr0();
  write_cr0(cr0 ^ ((i & 1) ? 0 : (std::uint64_t{1} << 16)));  // WP off, on, off, on ...
}
void rep_cr0_ts(std::uint64_t i) {
  static std::uint64_t cr0;
  if (i == 0) cr0 = read_cr0();
  write_cr0(cr0 ^ ((i & 1) ? 0 : (std::uint64_t{1} << 3)));  // TS
}
void rep_out(std::uint64_t) { outb(port_test, 0x5a); }
void rep_mmio(std::uint64_t i) {
  asm volatile("movl %0, (%1)" ::"r"(static_cast<std::uint32_t>(i)), "r"(mmio_page) : "memory");
}

struct row {
  const char* name;
  void (*rep)(std::uint64_t);
};
const row rows[] = {{"empty", rep_empty},    {"cpuid", rep_cpuid},   {"rdmsr_efer", rep_rdmsr},
                    {"cr0_wp", rep_cr0_wp},  {"cr0_ts", rep_cr0_ts}, {"out_port", rep_out},
                    {"mmio_write", rep_mmio}};

// Even repetition counts leave CR0 as it was. noinline: every row runs the same loop code.
[[gnu::noinline]] std::uint64_t time_row(void (*rep)(std::uint64_t), unsigned n) {
  const std::uint64_t t0 = tsc();
  for (unsigned i = 0; i < n; ++i) rep(i);
  return tsc() - t0;
}

std::uint64_t fnv1a(const unsigned char* p, const unsigned char* end) {
  std::uint64_t h = 0xcbf2'9ce4'8422'2325u;
  for (; p != end; ++p) h = (h ^ *p) * 0x100'0000'01b3u;
  return h;
}

}  // namespace

extern "C" [[noreturn]] void guest_main() {
  put("exit-cost-guest: hash=");
  put_hex(fnv1a(__image_start, __image_end));
  put(" bytes=");
  put_dec(static_cast<std::uint64_t>(__image_end - __image_start));
  put("\n");
  for (const row& r : rows) {
    (void)time_row(r.rep, warmup);
    const std::uint64_t t = time_row(r.rep, reps);
    put("exit-cost-guest: row=");
    put(r.name);
    put(" reps=");
    put_dec(reps);
    put(" tsc=");
    put_dec(t);
    put(" tsc_per_rep=");
    put_dec(t / reps);
    put(".");
    put_dec((t * 10 / reps) % 10);
    put("\n");
  }
  put("exit-cost-guest: done\n");
  for (;;) {
    outb(port_end, 0);
    asm volatile("hlt");
  }
}

// Entry: zero .bss (it holds the stack), set the stack, call guest_main.
asm(R"(
  .section .text.entry, "ax"
  .globl guest_entry
guest_entry:
  cld
  lea __bss_start(%rip), %rdi
  lea __bss_end(%rip), %rcx
  sub %rdi, %rcx
  xor %eax, %eax
  rep stosb
  lea guest_stack_top(%rip), %rsp
  call guest_main
1: hlt
  jmp 1b
  .bss
  .balign 16
  .space 16384
guest_stack_top:
  .text
)");
