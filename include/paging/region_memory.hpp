// SPDX-License-Identifier: MIT
/// @file
/// @brief Read-only guest memory made of several regions: a memory image with holes (RAM
/// below and above the PCI hole, a dump that leaves out MMIO and ROM), as the walkers see it.
///
/// The regions are the caller's (an array of memory_region, each a host buffer and the
/// guest-physical address of its first byte); the view holds a pointer to them and checks
/// once, in make(), that they are sorted by address, do not overlap and do not wrap around
/// the address space. An address in no region is `memory_error::unbacked`, never a read
/// outside a buffer. A read that spans two adjacent regions (one ends where the next
/// begins) is served from both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../x86/address.hpp"
#include "../x86/result.hpp"
#include "guest_memory.hpp"

namespace hvkit::paging {

/// One region of a memory image: `size` bytes at `data`, the first at guest-physical `base`.
struct memory_region {
  x86::gpa base{};
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;

  /// One past the region's last address (base + size; make() refuses a region that wraps).
  [[nodiscard]] constexpr std::uint64_t end() const noexcept { return base.value() + size; }
};

/// Why a set of regions cannot be a memory image.
enum class region_error : std::uint8_t {
  none = 0,
  unsorted,      ///< a region starts below the one before it
  overlapping,   ///< a region starts before the one before it ends
  wraps,         ///< base + size is past 2^64 - 1
  no_data,       ///< a region of non-zero size has no buffer
};

/// A read-only guest_memory over sorted, disjoint regions.
class region_view {
 public:
  constexpr region_view() noexcept = default;

  /// The view over `count` regions at `regions` (kept by pointer: they must outlive the
  /// view). Regions of size 0 are allowed and back nothing.
  [[nodiscard]] static constexpr result<region_view, region_error> make(const memory_region* regions,
                                                                      std::size_t count) noexcept {
    for (std::size_t i = 0; i < count; ++i) {
      const memory_region& r = regions[i];
      if (r.size != 0 && r.data == nullptr) return unexpected(region_error::no_data);
      if (r.base.value() + r.size < r.base.value()) return unexpected(region_error::wraps);
      if (i > 0) {
        if (r.base.value() < regions[i - 1].base.value()) return unexpected(region_error::unsorted);
        if (r.base.value() < regions[i - 1].end()) return unexpected(region_error::overlapping);
      }
    }
    region_view v;
    v.regions_ = regions;
    v.count_ = count;
    return v;
  }

  [[nodiscard]] constexpr const memory_region* begin() const noexcept { return regions_; }
  [[nodiscard]] constexpr const memory_region* end() const noexcept { return regions_ + count_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return count_; }

  /// The region holding address `a`, or nullptr.
  [[nodiscard]] constexpr const memory_region* find(std::uint64_t a) const noexcept {
    // The last region whose base is <= a (binary search over the sorted bases).
    std::size_t lo = 0, hi = count_;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (regions_[mid].base.value() <= a) lo = mid + 1;
      else hi = mid;
    }
    if (lo == 0) return nullptr;
    const memory_region& r = regions_[lo - 1];
    return a - r.base.value() < r.size ? &r : nullptr;
  }

  /// True if every byte of [a, a + n) is backed.
  [[nodiscard]] constexpr bool contains(x86::gpa a, std::size_t n) const noexcept {
    std::uint64_t at = a.value();
    while (n > 0) {
      const memory_region* r = find(at);
      if (r == nullptr) return false;
      const std::uint64_t left = r->end() - at;  // > 0
      if (left >= n) return true;
      n -= static_cast<std::size_t>(left);
      at += left;
      if (at == 0) return false;  // wrapped past the top of the address space
    }
    return true;
  }

  [[nodiscard]] constexpr result<std::uint32_t, memory_error> read32(x86::gpa a) const noexcept {
    std::uint32_t v = 0;
    if (!try_read(a, v)) return unexpected(memory_error::unbacked);
    return v;
  }
  [[nodiscard]] constexpr result<std::uint64_t, memory_error> read64(x86::gpa a) const noexcept {
    std::uint64_t v = 0;
    if (!try_read(a, v)) return unexpected(memory_error::unbacked);
    return v;
  }

  /// read32()/read64() as a test with an out parameter (the walkers' entry read).
  template <class T>
    requires(std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>)
  [[nodiscard]] constexpr bool try_read(x86::gpa a, T& out) const noexcept {
    const memory_region* r = find(a.value());
    if (r == nullptr) return false;
    const std::uint64_t off = a.value() - r->base.value();
    if (r->size - off >= sizeof(T)) {
      out = detail::load_le<T>(r->data + off);
      return true;
    }
    // The value spans the end of this region: the rest must start the next one.
    T v = 0;
    for (unsigned i = 0; i < sizeof(T); ++i) {
      const std::uint64_t at = a.value() + i;
      if (at < a.value()) return false;  // wrapped
      const memory_region* b = find(at);
      if (b == nullptr) return false;
      v |= static_cast<T>(static_cast<T>(b->data[at - b->base.value()]) << (8 * i));
    }
    out = v;
    return true;
  }

 private:
  const memory_region* regions_ = nullptr;
  std::size_t count_ = 0;
};

static_assert(guest_memory<region_view> && !writable_guest_memory<region_view>);

}  // namespace hvkit::paging
