// SPDX-License-Identifier: MIT
// Freestanding smoke object: uses the public headers from an entry point linked with
// -nostdlib. A freestanding program provides the four memory functions itself, as every
// kernel does (GCC may emit calls to them).
#include <cstddef>
#include <cstdint>

#include <hvkit/x86/address.hpp>
#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/paging_mode.hpp>
#include <hvkit/x86/pfec.hpp>
#include <hvkit/x86/result.hpp>

extern "C" {
void* memcpy(void* d, const void* s, std::size_t n) {
  auto* dp = static_cast<unsigned char*>(d);
  const auto* sp = static_cast<const unsigned char*>(s);
  while (n--) *dp++ = *sp++;
  return d;
}
void* memmove(void* d, const void* s, std::size_t n) {
  auto* dp = static_cast<unsigned char*>(d);
  const auto* sp = static_cast<const unsigned char*>(s);
  if (dp < sp) {
    while (n--) *dp++ = *sp++;
  } else {
    while (n--) dp[n] = sp[n];
  }
  return d;
}
void* memset(void* d, int c, std::size_t n) {
  auto* dp = static_cast<unsigned char*>(d);
  while (n--) *dp++ = static_cast<unsigned char>(c);
  return d;
}
int memcmp(const void* a, const void* b, std::size_t n) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (; n; --n, ++x, ++y)
    if (*x != *y) return *x < *y ? -1 : 1;
  return 0;
}
}

namespace x86 = hvkit::x86;

volatile std::uint64_t sink;

static hvkit::result<x86::gpa, int> root_of(std::uint64_t raw_cr0, std::uint64_t raw_cr4, std::uint64_t raw_cr3) {
  const auto mode = x86::paging_mode_of(x86::cr0{raw_cr0}, x86::cr4{raw_cr4}, x86::efer{1u << 10});
  if (mode == x86::paging_mode::none) return hvkit::unexpected(1);
  return x86::cr3_root(x86::cr3{raw_cr3}, mode, 46);
}

extern "C" [[noreturn]] void hvkit_smoke_entry() {
  const auto r = root_of(sink, sink, sink);
  sink = r.has_value() ? r.value().value() : static_cast<std::uint64_t>(r.error());
  sink = (x86::pfec::write | x86::pfec::present).hardware_bits().raw();
  for (;;) {
  }
}
