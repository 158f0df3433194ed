// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: reporting helpers. (Register access, instruction skip and
// event injection are hvkit's: vmx/register_file.hpp, vmx/skip.hpp, vmx/event_injection.hpp.)
#include "hv.hpp"

namespace hv {

bool str_eq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
namespace {
void print_result(const char* name, bool pass, const char* fmt, va_list ap) {
  kprintf("HVKIT RESULT %s %s", name, pass ? "PASS" : "FAIL");
  if (fmt) {
    console_putc(' ');
    kvprintf(fmt, ap);
  }
  console_putc('\n');
}
}  // namespace

void result(core::tally& t, const char* name, bool pass, const char* fmt, ...) {
  (pass ? t.pass : t.fail)++;
  va_list ap;
  va_start(ap, fmt);
  print_result(name, pass, fmt, ap);
  va_end(ap);
}


milli ratio(std::uint64_t num, std::uint64_t den) {
  if (den == 0) return {0, 0};
  std::uint64_t m = num * 1000 / den;
  return {m / 1000, m % 1000};
}

/// Reads a NUL-terminated guest string at a guest-physical address into buf. The guest
/// runs identity-paged and EPT is an identity map, so the GPA is also the HPA; it is only
/// trusted after the bounds check against guest memory.
bool read_guest_string(std::uint64_t gpa, char* buf, std::size_t size) {
  for (std::size_t i = 0; i + 1 < size; ++i) {
    std::uint64_t a = gpa + i;
    if (a < layout::guest_mem_base || a >= layout::guest_mem_base + layout::guest_mem_size) {
      buf[i] = '\0';
      return false;
    }
    char c = *reinterpret_cast<const volatile char*>(a);
    buf[i] = c;
    if (c == '\0') return true;
    if (c < ' ' || c > '~') buf[i] = '?';
  }
  buf[size - 1] = '\0';
  return true;
}

}  // namespace hv
