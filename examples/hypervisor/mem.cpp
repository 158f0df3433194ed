// SPDX-License-Identifier: MIT
// The four functions GCC may call even in freestanding code (GCC manual, "Standards":
// memcpy, memmove, memset, memcmp must be provided). Linked into the hypervisor and,
// separately, into the guest.
#include <cstddef>

extern "C" {

// Eight bytes per iteration, then the tail: an emulator that counts each iteration of a
// REP string instruction (Bochs: its TSC is its instruction count) sees an eighth of the
// byte-wise count; on hardware with fast strings either form is fine.
#if defined(__x86_64__)
void* memset(void* dst, int c, std::size_t n) {
  void* d = dst;
  std::size_t q = n / 8, r = n % 8;
  const unsigned long long v = 0x0101010101010101ull * static_cast<unsigned char>(c);
  asm volatile("rep stosq" : "+D"(d), "+c"(q) : "a"(v) : "memory");
  asm volatile("rep stosb" : "+D"(d), "+c"(r) : "a"(v) : "memory");
  return dst;
}

void* memcpy(void* dst, const void* src, std::size_t n) {
  void* d = dst;
  std::size_t q = n / 8, r = n % 8;
  asm volatile("rep movsq" : "+D"(d), "+S"(src), "+c"(q) : : "memory");
  asm volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(r) : : "memory");
  return dst;
}
#else  // the 32-bit guest
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
#endif

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
