// SPDX-License-Identifier: MIT
#include "console.hpp"

namespace hv {
namespace {

constexpr std::uint16_t com1 = 0x3F8;
constexpr std::uint16_t port_e9 = 0xE9;  // Bochs' port_e9_hack: each byte written goes to its stdout
bool use_e9 = false;

void put_unsigned(std::uint64_t v, unsigned base, int width, bool zero_pad, bool left, bool neg) {
  char buf[24];
  int n = 0;
  do {
    unsigned d = static_cast<unsigned>(v % base);
    buf[n++] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
    v /= base;
  } while (v != 0);
  int len = n + (neg ? 1 : 0);
  if (!left && !zero_pad)
    for (int i = len; i < width; ++i) console_putc(' ');
  if (neg) console_putc('-');
  if (!left && zero_pad)
    for (int i = len; i < width; ++i) console_putc('0');
  while (n > 0) console_putc(buf[--n]);
  if (left)
    for (int i = len; i < width; ++i) console_putc(' ');
}

}  // namespace

void console_init() {
  outb(com1 + 1, 0x00);  // no interrupts
  outb(com1 + 3, 0x80);  // DLAB
  outb(com1 + 0, 0x01);  // divisor 1: 115200 baud
  outb(com1 + 1, 0x00);
  outb(com1 + 3, 0x03);  // 8N1
  outb(com1 + 2, 0xC7);  // FIFO on, cleared
  outb(com1 + 4, 0x03);  // DTR, RTS
}

void console_use_port_e9() { use_e9 = true; }

void console_putc(char c) {
  if (use_e9) {
    outb(port_e9, static_cast<std::uint8_t>(c));
    return;
  }
  if (c == '\n') console_putc('\r');
  for (int spin = 0; spin < 1000000 && (inb(com1 + 5) & 0x20) == 0; ++spin) {
  }
  outb(com1, static_cast<std::uint8_t>(c));
}

void console_write(const char* s) {
  while (*s) console_putc(*s++);
}

void kvprintf(const char* fmt, va_list ap) {
  for (const char* p = fmt; *p; ++p) {
    if (*p != '%') {
      console_putc(*p);
      continue;
    }
    ++p;
    bool zero_pad = false, left = false;
    for (;; ++p) {
      if (*p == '0') zero_pad = true;
      else if (*p == '-') left = true;
      else break;
    }
    int width = 0;
    while (*p >= '0' && *p <= '9') width = width * 10 + (*p++ - '0');
    int longs = 0;
    while (*p == 'l' || *p == 'z') {
      longs += (*p == 'z') ? 2 : 1;
      ++p;
    }
    switch (*p) {
      case 'd': {
        long long v = longs >= 1 ? va_arg(ap, long long) : va_arg(ap, int);
        bool neg = v < 0;
        put_unsigned(neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v), 10,
                     width, zero_pad, left, neg);
        break;
      }
      case 'u':
      case 'x': {
        std::uint64_t v = longs >= 1 ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned);
        put_unsigned(v, *p == 'u' ? 10 : 16, width, zero_pad, left, false);
        break;
      }
      case 'p':
        console_write("0x");
        put_unsigned(reinterpret_cast<std::uintptr_t>(va_arg(ap, void*)), 16, 0, false, false, false);
        break;
      case 'c':
        console_putc(static_cast<char>(va_arg(ap, int)));
        break;
      case 's': {
        const char* s = va_arg(ap, const char*);
        int len = 0;
        while (s[len]) ++len;
        if (!left)
          for (int i = len; i < width; ++i) console_putc(' ');
        console_write(s);
        if (left)
          for (int i = len; i < width; ++i) console_putc(' ');
        break;
      }
      case '%':
        console_putc('%');
        break;
      case '\0':
        return;
      default:
        console_putc('%');
        console_putc(*p);
    }
  }
}

namespace {
/// One line at a time from every processor (smp/smp.hpp: the hypervisor runs on all of them).
volatile std::uint32_t console_lock;
}  // namespace

void kprintf(const char* fmt, ...) {
  while (__atomic_exchange_n(&console_lock, 1u, __ATOMIC_ACQUIRE) != 0) asm volatile("pause");
  va_list ap;
  va_start(ap, fmt);
  kvprintf(fmt, ap);
  va_end(ap);
  __atomic_store_n(&console_lock, 0u, __ATOMIC_RELEASE);
}

void machine_exit(bool success) {
  // Bochs: magic breakpoint (magic_break: enabled=1) stops in the debugger, whose rc
  // file then runs "quit". Elsewhere xchg bx,bx is a harmless no-op.
  asm volatile("xchg %%bx, %%bx" ::: "memory");
  // QEMU: -device isa-debug-exit,iobase=0xf4 exits with status (v << 1) | 1.
  outb(0xf4, success ? 0 : 1);
  // Bochs without magic_break: the APM-style shutdown port.
  for (const char* s = "Shutdown"; *s; ++s) outb(0x8900, static_cast<std::uint8_t>(*s));
  for (;;) asm volatile("cli; hlt");
}

}  // namespace hv
