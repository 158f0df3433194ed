// SPDX-License-Identifier: MIT
/// @file
/// @brief `table<Capacity>`: a fixed-capacity, sorted set of CPUID entries (no heap).
///
/// Entries are kept sorted by (leaf, subleaf), so lookup is a binary search. A full table
/// is reported as `table_error::full`, never an overflow.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "leaf.hpp"
#include "../x86/result.hpp"

namespace hvkit::cpuid {

/// Why a table operation failed.
enum class table_error : std::uint8_t {
  none,
  full,  ///< no room for another entry
};

/// Capacity that holds every leaf a current host enumerates (basic, hypervisor, extended,
/// with the XSAVE, cache and topology subleaves).
inline constexpr std::size_t default_capacity = 192;

template <std::size_t Capacity = default_capacity>
class table {
  static_assert(Capacity > 0);

 public:
  static constexpr std::size_t capacity = Capacity;

  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] constexpr const entry* begin() const noexcept { return entries_.data(); }
  [[nodiscard]] constexpr const entry* end() const noexcept { return entries_.data() + size_; }
  [[nodiscard]] constexpr const entry& operator[](std::size_t i) const noexcept {
    HVKIT_EXPECTS(i < size_);
    return entries_[i];
  }

  /// The stored registers for (leaf, subleaf), or nullptr. ECX is ignored for leaves that
  /// are not indexed.
  [[nodiscard]] constexpr const regs* find(std::uint32_t leaf, std::uint32_t subleaf = 0) const noexcept {
    const std::size_t i = lower_bound(make_key(leaf, subleaf));
    if (i < size_ && entries_[i].key() == make_key(leaf, subleaf)) return &entries_[i].value;
    return nullptr;
  }
  [[nodiscard]] constexpr regs* find(std::uint32_t leaf, std::uint32_t subleaf = 0) noexcept {
    const std::size_t i = lower_bound(make_key(leaf, subleaf));
    if (i < size_ && entries_[i].key() == make_key(leaf, subleaf)) return &entries_[i].value;
    return nullptr;
  }
  /// True if any subleaf of `leaf` is present.
  [[nodiscard]] constexpr bool has_leaf(std::uint32_t leaf) const noexcept {
    const std::size_t i = lower_bound(std::uint64_t{leaf} << 32);
    return i < size_ && entries_[i].leaf == leaf;
  }
  /// The registers of (leaf, subleaf), or all zeros if absent.
  [[nodiscard]] constexpr regs get(std::uint32_t leaf, std::uint32_t subleaf = 0) const noexcept {
    const regs* r = find(leaf, subleaf);
    return r ? *r : regs{};
  }

  /// Inserts or replaces (leaf, subleaf).
  constexpr result<void, table_error> set(std::uint32_t leaf, std::uint32_t subleaf, const regs& v) noexcept {
    const std::uint64_t k = make_key(leaf, subleaf);
    const std::size_t i = lower_bound(k);
    if (i < size_ && entries_[i].key() == k) {
      entries_[i].value = v;
      return {};
    }
    if (size_ == Capacity) return unexpected(table_error::full);
    for (std::size_t j = size_; j > i; --j) entries_[j] = entries_[j - 1];
    entries_[i] = entry{leaf, is_indexed(leaf) ? subleaf : 0u, v};
    ++size_;
    return {};
  }
  /// Removes (leaf, subleaf); true if it was present.
  constexpr bool erase(std::uint32_t leaf, std::uint32_t subleaf = 0) noexcept {
    const std::uint64_t k = make_key(leaf, subleaf);
    const std::size_t i = lower_bound(k);
    if (i >= size_ || entries_[i].key() != k) return false;
    remove_range(i, i + 1);
    return true;
  }
  /// Removes every subleaf of `leaf`; returns how many entries went.
  constexpr std::size_t erase_leaf(std::uint32_t leaf) noexcept {
    const std::size_t first = lower_bound(std::uint64_t{leaf} << 32);
    std::size_t last = first;
    while (last < size_ && entries_[last].leaf == leaf) ++last;
    remove_range(first, last);
    return last - first;
  }
  /// Removes every entry with first <= leaf <= last.
  constexpr std::size_t erase_range(std::uint32_t first_leaf, std::uint32_t last_leaf) noexcept {
    const std::size_t first = lower_bound(std::uint64_t{first_leaf} << 32);
    std::size_t last = first;
    while (last < size_ && entries_[last].leaf <= last_leaf) ++last;
    remove_range(first, last);
    return last - first;
  }
  /// The highest leaf present in [first_leaf, last_leaf], or `none` if there is none.
  [[nodiscard]] constexpr std::uint32_t highest_leaf(std::uint32_t first_leaf, std::uint32_t last_leaf,
                                                     std::uint32_t none) const noexcept {
    std::uint32_t best = none;
    bool found = false;
    for (std::size_t i = lower_bound(std::uint64_t{first_leaf} << 32); i < size_ && entries_[i].leaf <= last_leaf; ++i) {
      best = entries_[i].leaf;
      found = true;
    }
    return found ? best : none;
  }
  /// The highest subleaf stored for `leaf` (0 if only subleaf 0 or none).
  [[nodiscard]] constexpr std::uint32_t highest_subleaf(std::uint32_t leaf) const noexcept {
    std::uint32_t best = 0;
    for (std::size_t i = lower_bound(std::uint64_t{leaf} << 32); i < size_ && entries_[i].leaf == leaf; ++i)
      best = entries_[i].subleaf;
    return best;
  }
  constexpr void clear() noexcept { size_ = 0; }

 private:
  [[nodiscard]] constexpr std::size_t lower_bound(std::uint64_t k) const noexcept {
    std::size_t lo = 0, hi = size_;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (entries_[mid].key() < k) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  constexpr void remove_range(std::size_t first, std::size_t last) noexcept {
    const std::size_t n = last - first;
    if (n == 0) return;
    for (std::size_t j = first; j + n < size_; ++j) entries_[j] = entries_[j + n];
    size_ -= n;
  }

  std::array<entry, Capacity> entries_{};
  std::size_t size_ = 0;
};

}  // namespace hvkit::cpuid
