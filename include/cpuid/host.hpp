// SPDX-License-Identifier: MIT
/// @file
/// @brief Reading CPUID: the CPUID instruction (inline asm, freestanding) and the
/// enumeration of every leaf and subleaf a processor reports into a `table`.
///
/// The enumeration takes any `cpuid_source` (a callable `regs(leaf, subleaf)`), so the same
/// code reads the real CPU (`host_source`) or a recorded dump in a test.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "leaf.hpp"
#include "table.hpp"
#include "../x86/result.hpp"

namespace hvkit::cpuid {

/// Anything that answers a CPUID query.
template <class S>
concept cpuid_source = requires(const S& s, std::uint32_t leaf, std::uint32_t subleaf) {
  { s(leaf, subleaf) } -> std::convertible_to<regs>;
};

#if defined(__x86_64__) || defined(__i386__) || defined(HVKIT_DOXYGEN)
/// Executes CPUID with EAX = leaf, ECX = subleaf on the current processor.
[[nodiscard]] inline regs execute(std::uint32_t leaf, std::uint32_t subleaf = 0) noexcept {
  regs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(subleaf));
  return r;
}

/// The processor this code runs on, as a cpuid_source.
struct host_source {
  [[nodiscard]] regs operator()(std::uint32_t leaf, std::uint32_t subleaf) const noexcept { return execute(leaf, subleaf); }
};
#endif

namespace detail {
// Subleaf bounds while enumerating: a guard against a source that never terminates a list.
inline constexpr std::uint32_t max_enumerated_subleaves = 64;

template <cpuid_source S, std::size_t N>
constexpr result<void, table_error> read_basic_leaf(const S& src, std::uint32_t leaf, table<N>& out) noexcept {
  auto put = [&](std::uint32_t sub, const regs& r) { return out.set(leaf, sub, r); };
  const regs r0 = src(leaf, 0);
  if (auto e = put(0, r0); !e) return e;
  switch (leaf) {
    case 0x4:  // deterministic cache parameters: until cache type (EAX[4:0]) is 0
    case 0x8000001d:
      for (std::uint32_t s = 1; s < max_enumerated_subleaves; ++s) {
        const regs r = src(leaf, s);
        if ((r.eax & 0x1fu) == 0) break;
        if (auto e = put(s, r); !e) return e;
      }
      break;
    case 0x7:   // EAX of subleaf 0 is the highest subleaf
    case 0x14:
    case 0x17:
    case 0x18:
    case 0x1d:
    case 0x20:
      for (std::uint32_t s = 1; s <= r0.eax && s < max_enumerated_subleaves; ++s)
        if (auto e = put(s, src(leaf, s)); !e) return e;
      break;
    case 0xb:  // topology: until the level type (ECX[15:8]) is 0 (invalid)
    case 0x1f:
      if (((r0.ecx >> 8) & 0xffu) == 0) break;
      for (std::uint32_t s = 1; s < max_enumerated_subleaves; ++s) {
        const regs r = src(leaf, s);
        if (((r.ecx >> 8) & 0xffu) == 0) break;
        if (auto e = put(s, r); !e) return e;
      }
      break;
    case 0xd: {  // XSAVE: subleaf 1, then one per supported component (SDM Vol. 1, 13.2)
      const regs r1 = src(leaf, 1);
      if (auto e = put(1, r1); !e) return e;
      const std::uint64_t comps = ((std::uint64_t{r0.edx} << 32) | r0.eax) | ((std::uint64_t{r1.edx} << 32) | r1.ecx);
      for (std::uint32_t s = 2; s < 64; ++s)
        if ((comps >> s) & 1u)
          if (auto e = put(s, src(leaf, s)); !e) return e;
      break;
    }
    default:
      break;  // other indexed leaves: subleaf 0 only
  }
  return {};
}
}  // namespace detail

/// Reads every basic and extended leaf `src` reports, and the hypervisor leaves when
/// CPUID.1:ECX[31] says a hypervisor is present (bases 0x40000000 and 0x40000100).
/// A full table is `table_error::full`.
template <cpuid_source S, std::size_t N>
constexpr result<void, table_error> read_all(const S& src, table<N>& out) noexcept {
  out.clear();
  const std::uint32_t max_basic = src(0, 0).eax;
  // A bogus maximum (above the basic range) is clamped: the basic range ends below 0x40000000.
  const std::uint32_t basic_last = max_basic < 0x100 ? max_basic : 0xff;
  for (std::uint32_t leaf = 0; leaf <= basic_last; ++leaf)
    if (auto e = detail::read_basic_leaf(src, leaf, out); !e) return e;
  if (basic_last >= 1 && (src(1, 0).ecx >> 31) != 0) {
    for (std::uint32_t base : {0x40000000u, 0x40000100u}) {
      const regs sig = src(base, 0);
      if (sig.eax < base || sig.eax > base + 0xff) continue;
      for (std::uint32_t leaf = base; leaf <= sig.eax; ++leaf)
        if (auto e = out.set(leaf, 0, src(leaf, 0)); !e) return e;
    }
  }
  const std::uint32_t max_ext = src(0x80000000, 0).eax;
  if (max_ext >= 0x80000000 && max_ext <= 0x800000ff)
    for (std::uint32_t leaf = 0x80000000; leaf <= max_ext; ++leaf)
      if (auto e = detail::read_basic_leaf(src, leaf, out); !e) return e;
  return {};
}

}  // namespace hvkit::cpuid
