// SPDX-License-Identifier: MIT
// l1tool: the two port writes the KVM host inside Bochs needs, as a static freestanding
// Linux x86-64 program (no libc: the initramfs carries no C library for it).
//
//   l1tool e9        copies stdin to I/O port 0xE9 (Bochs' port_e9_hack prints every byte
//                    written there on its standard output at once; no UART timing)
//   l1tool shutdown  writes "Shutdown" to port 0x8900: Bochs ends the simulation
//
// Built by nested-kvm/build-image.sh with the host compiler:
//   g++ -static -nostdlib -ffreestanding -fno-exceptions -fno-rtti -O2 ...
#include <cstddef>
#include <cstdint>

namespace {

long syscall3(long nr, long a, long b, long c) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
constexpr long sys_read = 0, sys_ioperm = 173, sys_exit_group = 231;

[[noreturn]] void exit_now(int code) {
  syscall3(sys_exit_group, code, 0, 0);
  __builtin_unreachable();
}

bool same(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

void out_bytes(std::uint16_t port, const char* p, std::size_t n) {
  // REP OUTSB: one instruction for the whole buffer (SDM Vol. 2B, OUTS).
  asm volatile("rep outsb" : "+S"(p), "+c"(n) : "d"(port) : "memory");
}

int run(int argc, char** argv) {
  if (argc != 2) return 2;
  if (same(argv[1], "e9")) {
    if (syscall3(sys_ioperm, 0xE9, 1, 1) != 0) return 3;
    static char buf[4096];
    for (;;) {
      long n = syscall3(sys_read, 0, reinterpret_cast<long>(buf), sizeof buf);
      if (n == -4) continue;  // EINTR
      if (n <= 0) return n == 0 ? 0 : 4;
      out_bytes(0xE9, buf, static_cast<std::size_t>(n));
    }
  }
  if (same(argv[1], "shutdown")) {
    if (syscall3(sys_ioperm, 0x8900, 1, 1) != 0) return 3;
    out_bytes(0x8900, "Shutdown", 8);
    return 0;  // not reached under Bochs
  }
  return 2;
}

}  // namespace

extern "C" [[noreturn]] void l1tool_main(long* sp) {
  // Process entry (System V x86-64 ABI, 3.4.1): argc at the stack pointer, argv after it.
  exit_now(run(static_cast<int>(sp[0]), reinterpret_cast<char**>(sp + 1)));
}

asm(".globl _start\n"
    "_start:\n"
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call l1tool_main\n");
