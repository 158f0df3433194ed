// SPDX-License-Identifier: MIT
/// @file
/// @brief Plain x86 instructions the hypervisor executes on the host: RDMSR/WRMSR, CPUID,
/// control registers, RDTSC. Vendor-neutral.
#pragma once

#include <cstdint>

namespace hv {

inline std::uint64_t rdmsr(std::uint32_t m) {
  std::uint32_t lo, hi;
  asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(m));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
inline void wrmsr(std::uint32_t m, std::uint64_t v) {
  asm volatile("wrmsr" ::"c"(m), "a"(static_cast<std::uint32_t>(v)), "d"(static_cast<std::uint32_t>(v >> 32))
               : "memory");
}
struct cpuid_regs {
  std::uint32_t eax, ebx, ecx, edx;
};
inline cpuid_regs cpuid(std::uint32_t leaf, std::uint32_t subleaf = 0) {
  cpuid_regs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(subleaf));
  return r;
}
inline std::uint64_t read_cr0() { std::uint64_t v; asm volatile("mov %%cr0, %0" : "=r"(v)); return v; }
inline std::uint64_t read_cr3() { std::uint64_t v; asm volatile("mov %%cr3, %0" : "=r"(v)); return v; }
inline std::uint64_t read_cr4() { std::uint64_t v; asm volatile("mov %%cr4, %0" : "=r"(v)); return v; }
inline void write_cr0(std::uint64_t v) { asm volatile("mov %0, %%cr0" ::"r"(v) : "memory"); }
inline void write_cr4(std::uint64_t v) { asm volatile("mov %0, %%cr4" ::"r"(v) : "memory"); }
inline void write_cr2(std::uint64_t v) { asm volatile("mov %0, %%cr2" ::"r"(v) : "memory"); }
inline std::uint64_t rdtsc() {
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

}  // namespace hv
