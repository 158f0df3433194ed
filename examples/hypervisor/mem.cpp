// SPDX-License-Identifier: MIT
// The four functions GCC may call even in freestanding code (GCC manual, "Standards":
// memcpy, memmove, memset, memcmp must be provided). Linked into the hypervisor and,
// separately, into the guest.
#include <cstddef>

extern "C" {

void* memset(void* dst, int c, std::size_t n) {
  void* d = dst;
  asm volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
  return dst;
}

void* memcpy(void* dst, const void* src, std::size_t n) {
  void* d = dst;
  asm volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
  return dst;
}

void* memmove(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  auto* s = static_cast<const unsigned char*>(src);
  if (d <= s || d >= s + n) return memcpy(dst, src, n);
  while (n--) d[n] = s[n];
  return dst;
}

int memcmp(const void* a, const void* b, std::size_t n) {
  auto* x = static_cast<const unsigned char*>(a);
  auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}
}
