// SPDX-License-Identifier: MIT
/// @file
/// @brief Serial console (COM1, polled; or Bochs' port 0xE9) and a small printf for the hypervisor.
#pragma once

#include <cstdarg>
#include <cstdint>

namespace hv {

inline void outb(std::uint16_t port, std::uint8_t v) { asm volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
inline void outw(std::uint16_t port, std::uint16_t v) { asm volatile("outw %0, %1" ::"a"(v), "Nd"(port)); }
inline std::uint8_t inb(std::uint16_t port) {
  std::uint8_t v;
  asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
  return v;
}

void console_init();
/// From now on the console is Bochs' port 0xE9 (the hypervisor's own channel), not COM1:
/// used when the guest owns the serial port (the Linux guest, linux/linux.cpp).
void console_use_port_e9();
void console_putc(char c);
void console_write(const char* s);
/// printf subset: %s %c %d %u %x %p, flags '0' and '-', width, length l/ll/z.
void kprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void kvprintf(const char* fmt, va_list ap);

/// Ends the machine: magic breakpoint for Bochs (its debugger rc file says "quit"), the
/// isa-debug-exit port for QEMU, then halt.
[[noreturn]] void machine_exit(bool success);

}  // namespace hv
