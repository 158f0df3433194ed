// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator's seams, as concepts (static dispatch): the address translator (the
/// paging/ walker with the live CR0.WP), guest RAM, and the platform (MMIO devices, ports,
/// CPUID, MSRs); plus ready-made models: walker_translator, flat_ram, null_platform.
///
/// - `translator`: `refresh_passthrough_bits(live_cr0)` then `walk(walk_request)` (the
///   checked walk with A/D updates, the verb of paging/'s walkers); the
///   emulator calls the first before every translation, so a guest-owned CR0.WP that
///   changed since the MMU context was built is honoured (docs/background.md §1, the LTR bug).
///   walker_translator plugs in paging::mmu_context + paging::guest_walker.
/// - `guest_ram`: byte reads and writes at a guest-physical address that never cross a
///   4 KiB page (the emulator splits), and a 1/2/4/8-byte compare-exchange. `false` from
///   read/write means "not RAM here": the access goes to the platform's MMIO handlers.
///   RAM versus MMIO is therefore decided per 4 KiB page, the EPT granularity.
///   Optional (`guest_ram_cmpxchg16`): `cmpxchg16(gpa, expected, desired)`, an atomic
///   16-byte compare-exchange of two `u128` values, which makes LOCK CMPXCHG16B atomic;
///   without it LOCK CMPXCHG16B is a 16-byte read then a 16-byte write.
/// - `platform`: `mmio_read/mmio_write` (1, 2, 4 or 8 bytes at a byte-exact gpa),
///   `pio_in/pio_out`, `cpuid`, `rdmsr/wrmsr`. Returning false from an MMIO or port handler
///   means "not mine": the emulator then returns needs_mmio / needs_io. rdmsr/wrmsr
///   returning false inject #GP(0). cpuid returning false makes CPUID unsupported.
///   Optional: `mmio_region_bytes(gpa) -> std::uint64_t`, the bytes from `gpa` to the end of
///   the device region holding it (0: no limit); MMIO accesses are then also split at
///   device-region boundaries inside a page.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../paging/guest_memory.hpp"
#include "../paging/mmu.hpp"
#include "../paging/pdptr.hpp"
#include "../paging/walk_result.hpp"
#include "../paging/walker.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/result.hpp"

namespace hvkit::emulate {

/// Translates linear addresses with the permission check of the current role.
template <class T>
concept translator = requires(T& t, x86::cr0 live, const paging::walk_request& req) {
  { t.refresh_passthrough_bits(live) } -> std::same_as<bool>;
  { t.walk(req) } -> std::same_as<paging::walk_result>;
};

/// Guest RAM for data accesses (see the file comment).
template <class M>
concept guest_ram = requires(M& m, x86::gpa a, std::uint8_t* out, const std::uint8_t* in, std::size_t n,
                             unsigned bytes, std::uint64_t v) {
  { m.read(a, out, n) } -> std::same_as<bool>;
  { m.write(a, in, n) } -> std::same_as<bool>;
  { m.cmpxchg(a, bytes, v, v) } -> std::same_as<result<bool, paging::memory_error>>;
};

/// A 16-byte value as two little-endian halves: `lo` is the 8 bytes at the lower address
/// (CMPXCHG16B's m128; RDX:RAX and RCX:RBX are {RAX, RDX} and {RBX, RCX}).
struct u128 {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  friend constexpr bool operator==(const u128&, const u128&) = default;
};

/// Guest RAM that can also compare-exchange 16 bytes atomically (LOCK CMPXCHG16B; SDM Vol.
/// 2A CMPXCHG8B/CMPXCHG16B: "This instruction can be used with a LOCK prefix to allow the
/// instruction to be executed atomically"). `a` is 16-byte aligned (the emulator raises
/// #GP(0) before any access otherwise). Returns true if the 16 bytes at `a` were `expected`
/// and are now `desired`, false if they held something else (nothing written); an error
/// (e.g. memory_error::unbacked) sends the access down the emulator's non-atomic path.
template <class M>
concept guest_ram_cmpxchg16 = guest_ram<M> && requires(M& m, x86::gpa a, u128 v) {
  { m.cmpxchg16(a, v, v) } -> std::same_as<result<bool, paging::memory_error>>;
};

/// CPUID output registers.
struct cpuid_regs {
  std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

/// Devices, ports, CPUID and MSRs (see the file comment).
template <class P>
concept platform = requires(P& p, x86::gpa a, unsigned size, std::uint64_t& out, std::uint64_t v, std::uint16_t port,
                            std::uint32_t n, cpuid_regs& regs) {
  { p.mmio_read(a, size, out) } -> std::same_as<bool>;
  { p.mmio_write(a, size, v) } -> std::same_as<bool>;
  { p.pio_in(port, size, out) } -> std::same_as<bool>;
  { p.pio_out(port, size, v) } -> std::same_as<bool>;
  { p.cpuid(n, n, regs) } -> std::same_as<bool>;
  { p.rdmsr(n, out) } -> std::same_as<bool>;
  { p.wrmsr(n, v) } -> std::same_as<bool>;
};

/// A platform with nothing attached: derive from it and hide the members you implement
/// (the emulator calls them on the derived type: static dispatch, no virtual functions).
struct null_platform {
  constexpr bool mmio_read(x86::gpa, unsigned, std::uint64_t&) noexcept { return false; }
  constexpr bool mmio_write(x86::gpa, unsigned, std::uint64_t) noexcept { return false; }
  constexpr bool pio_in(std::uint16_t, unsigned, std::uint64_t&) noexcept { return false; }
  constexpr bool pio_out(std::uint16_t, unsigned, std::uint64_t) noexcept { return false; }
  constexpr bool cpuid(std::uint32_t, std::uint32_t, cpuid_regs&) noexcept { return false; }
  constexpr bool rdmsr(std::uint32_t, std::uint64_t&) noexcept { return false; }
  constexpr bool wrmsr(std::uint32_t, std::uint64_t) noexcept { return false; }
};
static_assert(platform<null_platform>);

/// The translator over hvkit's own MMU context and guest walker: the walk, its permission
/// check through `mmu` (refreshed from the live CR0 first) and A/D updates in `tables`.
template <paging::guest_memory Tables>
class walker_translator {
 public:
  /// `mmu` is the hypervisor's (possibly stale) context; it is refreshed in place.
  constexpr walker_translator(paging::mmu_context& mmu, Tables& tables, paging::cpu_properties props = {},
                              paging::pdpte_snapshot pdptes = {}) noexcept
      : mmu_(&mmu), tables_(&tables), walker_(mmu, props, pdptes) {}

  constexpr bool refresh_passthrough_bits(x86::cr0 live) noexcept { return mmu_->refresh_passthrough_bits(live); }
  [[nodiscard]] constexpr paging::walk_result walk(const paging::walk_request& req) noexcept {
    return walker_.walk(*tables_, *mmu_, req);
  }
  [[nodiscard]] constexpr const paging::mmu_context& mmu() const noexcept { return *mmu_; }

 private:
  paging::mmu_context* mmu_;
  Tables* tables_;
  paging::guest_walker walker_;
};

/// Guest RAM in one host buffer (guest-physical `base` .. `base + size`): models both
/// guest_ram (for the emulator) and paging::writable_guest_memory (for the walker).
/// Everything outside the buffer is "not RAM" (MMIO).
class flat_ram {
 public:
  constexpr flat_ram() noexcept = default;
  constexpr flat_ram(std::uint8_t* data, std::size_t size, x86::gpa base = x86::gpa{0}) noexcept
      : mem_(data, size, base), data_(data) {}

  [[nodiscard]] constexpr bool contains(x86::gpa a, std::size_t n) const noexcept { return mem_.contains(a, n); }

  [[nodiscard]] constexpr bool read(x86::gpa a, std::uint8_t* out, std::size_t n) const noexcept {
    if (!contains(a, n)) return false;
    const std::uint8_t* p = data_ + (a - mem_.base());
    for (std::size_t i = 0; i < n; ++i) out[i] = p[i];
    return true;
  }
  [[nodiscard]] constexpr bool write(x86::gpa a, const std::uint8_t* in, std::size_t n) noexcept {
    if (!contains(a, n)) return false;
    std::uint8_t* p = data_ + (a - mem_.base());
    for (std::size_t i = 0; i < n; ++i) p[i] = in[i];
    return true;
  }
  [[nodiscard]] constexpr result<bool, paging::memory_error> cmpxchg(x86::gpa a, unsigned bytes, std::uint64_t expected,
                                                                      std::uint64_t desired) noexcept {
    if (!(bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8) || !contains(a, bytes))
      return unexpected(paging::memory_error::unbacked);
    if (bytes == 4) return mem_.cmpxchg32(a, static_cast<std::uint32_t>(expected), static_cast<std::uint32_t>(desired));
    if (bytes == 8) return mem_.cmpxchg64(a, expected, desired);
    std::uint8_t* p = data_ + (a - mem_.base());
    // 1 and 2 bytes: atomic when the host byte is aligned (a LOCKed byte/word RMW, a
    // descriptor's type byte); in constant evaluation, or unaligned, a plain compare-and-store.
    if (!std::is_constant_evaluated()) {
      if (bytes == 1) {
        auto e = static_cast<std::uint8_t>(expected);
        return __atomic_compare_exchange_n(p, &e, static_cast<std::uint8_t>(desired), false, __ATOMIC_SEQ_CST,
                                           __ATOMIC_SEQ_CST);
      }
      if (reinterpret_cast<std::uintptr_t>(p) % 2 == 0) {
        auto e = static_cast<std::uint16_t>(expected);
        return __atomic_compare_exchange_n(reinterpret_cast<std::uint16_t*>(p), &e, static_cast<std::uint16_t>(desired),
                                           false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
      }
    }
    // Compares the low `bytes` bytes of `expected`, as the atomic paths above do.
    std::uint64_t cur = 0;
    for (unsigned i = 0; i < bytes; ++i) cur |= std::uint64_t{p[i]} << (8 * i);
    if (cur != (expected & ((std::uint64_t{1} << (8 * bytes)) - 1))) return false;
    for (unsigned i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(desired >> (8 * i));
    return true;
  }
  /// guest_ram_cmpxchg16: atomic (LOCK CMPXCHG16B on the host) when the host location is
  /// 16-byte aligned, which it is for a 16-byte-aligned guest address whenever the buffer
  /// is (operator new's alignment on x86-64); in constant evaluation, or on an unaligned
  /// host location, a plain compare-and-store, as the narrower compare-exchanges above.
  /// The host processor must have CMPXCHG16B (CPUID.01H:ECX[bit 13]), as every 64-bit
  /// processor that runs VMX or SVM has.
  [[nodiscard]] constexpr result<bool, paging::memory_error> cmpxchg16(x86::gpa a, u128 expected, u128 desired) noexcept {
    if (!contains(a, 16)) return unexpected(paging::memory_error::unbacked);
    std::uint8_t* p = data_ + (a - mem_.base());
    if (!std::is_constant_evaluated() && reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
      // RDX:RAX is compared with m128; on success RCX:RBX is stored, else m128 is loaded
      // into RDX:RAX (unused here) and ZF is cleared.
      std::uint64_t lo = expected.lo, hi = expected.hi;
      bool equal = false;
      asm volatile("lock cmpxchg16b %[m]"
                   : "=@ccz"(equal), [m] "+m"(*p), "+a"(lo), "+d"(hi)
                   : "b"(desired.lo), "c"(desired.hi)
                   : "memory");
      return equal;
    }
    const u128 cur{paging::detail::load_le<std::uint64_t>(p), paging::detail::load_le<std::uint64_t>(p + 8)};
    if (cur != expected) return false;
    for (unsigned i = 0; i < 8; ++i) {
      p[i] = static_cast<std::uint8_t>(desired.lo >> (8 * i));
      p[8 + i] = static_cast<std::uint8_t>(desired.hi >> (8 * i));
    }
    return true;
  }
  // paging::writable_guest_memory, for the walker.
  [[nodiscard]] constexpr result<std::uint32_t, paging::memory_error> read32(x86::gpa a) const noexcept { return mem_.read32(a); }
  [[nodiscard]] constexpr result<std::uint64_t, paging::memory_error> read64(x86::gpa a) const noexcept { return mem_.read64(a); }
  [[nodiscard]] constexpr result<bool, paging::memory_error> cmpxchg32(x86::gpa a, std::uint32_t e, std::uint32_t d) noexcept {
    return mem_.cmpxchg32(a, e, d);
  }
  [[nodiscard]] constexpr result<bool, paging::memory_error> cmpxchg64(x86::gpa a, std::uint64_t e, std::uint64_t d) noexcept {
    return mem_.cmpxchg64(a, e, d);
  }

 private:
  paging::flat_memory mem_{};
  std::uint8_t* data_ = nullptr;
};
static_assert(guest_ram_cmpxchg16<flat_ram> && paging::writable_guest_memory<flat_ram>);

}  // namespace hvkit::emulate
