// SPDX-License-Identifier: MIT
/// @file
/// @brief The hypervisor's own memory for what a processor reads by physical address: VMXON
/// and VMCS regions, VMCBs and host-save areas, EPT and NPT tables, I/O and MSR permission
/// maps, descriptor tables, per-CPU stacks. One pool per boot, created by hv_main (or the
/// Linux boot) over the region the linker reserves for it (linker.ld: `__pool_start`,
/// `__pool_end`, inside .bss, so the loader keeps its modules out of it and the entry code
/// zeroes it) and handed down by reference: no page of the hypervisor is a named global.
///
/// Pages are handed out once and never given back (everything is set up at boot and reused
/// run after run), so a pool is a bump pointer; it hands out zeroed memory because .bss is
/// zeroed before hv_main runs and no page comes back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "../console.hpp"

namespace hv::core {

inline constexpr std::size_t page_size = 4096;

class page_pool {
 public:
  page_pool(std::uint8_t* begin, std::uint8_t* end) noexcept : next_{begin}, end_{end} {}
  page_pool(const page_pool&) = delete;
  page_pool& operator=(const page_pool&) = delete;

  /// `bytes` (rounded up to whole pages) of zeroed memory aligned to `align` (a power of two,
  /// at least a page); the boot ends with "HVKIT ERROR" when the pool is exhausted (a
  /// configuration error: linker.ld's pool is too small).
  [[nodiscard]] void* take_bytes(std::size_t bytes, std::size_t align = page_size) noexcept {
    if (align < page_size) align = page_size;
    const auto at = reinterpret_cast<std::uintptr_t>(next_);
    const std::uintptr_t start = (at + align - 1) & ~(std::uintptr_t{align} - 1);
    const std::size_t size = (bytes + page_size - 1) & ~(page_size - 1);
    if (start < at || start > reinterpret_cast<std::uintptr_t>(end_) ||
        size > reinterpret_cast<std::uintptr_t>(end_) - start) {
      kprintf("HVKIT ERROR page pool exhausted: %llu bytes wanted, %llu left (linker.ld __pool_end)\n",
              (unsigned long long)bytes, (unsigned long long)(reinterpret_cast<std::uintptr_t>(end_) - at));
      machine_exit(false);
    }
    next_ = reinterpret_cast<std::uint8_t*>(start + size);
    return reinterpret_cast<void*>(start);
  }
  /// One `T` in zeroed pages (page-aligned, or `T`'s own alignment if larger): an array of
  /// entries, a VMCB, a per-CPU block. `T` must be implicit-lifetime with all-zero as its
  /// value (trivially default constructible and destructible).
  template <class T>
  [[nodiscard]] T& take() noexcept {
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                  "page_pool hands out zeroed storage: T must be valid as all-zero bytes");
    return *::new (take_bytes(sizeof(T), alignof(T))) T;
  }
  /// A 4-KByte page of 512 entries (a paging structure, EPT or NPT table).
  [[nodiscard]] std::uint64_t* take_table() noexcept { return static_cast<std::uint64_t*>(take_bytes(page_size)); }
  /// A zeroed 4-KByte page.
  [[nodiscard]] std::uint8_t* take_page() noexcept { return static_cast<std::uint8_t*>(take_bytes(page_size)); }
  /// Bytes left.
  [[nodiscard]] std::size_t left() const noexcept { return static_cast<std::size_t>(end_ - next_); }

 private:
  std::uint8_t* next_;
  std::uint8_t* end_;
};

extern "C" {
extern std::uint8_t __pool_start[], __pool_end[];  // linker.ld
}

/// The pool over linker.ld's region, created once per boot by the boot's entry function
/// (hv_main, lx::boot): a second pool over the same region would hand out the same pages.
[[nodiscard]] inline page_pool boot_page_pool() noexcept { return page_pool{__pool_start, __pool_end}; }

}  // namespace hv::core
