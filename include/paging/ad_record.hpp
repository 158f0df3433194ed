// SPDX-License-Identifier: MIT
/// @file
/// @brief An optional record of a walk's accessed/dirty-flag writes (address, width, old and
/// new value), for fuzzers and introspection tools: `ad_recorder<M>` is a writable
/// guest_memory over `M` that logs every compare-exchange that succeeded.
///
/// Pass it wherever the walk takes its memory (any walker, nested walks included): every
/// A/D write of the walk, guest entries and second-stage (EPT/NPT) entries alike, lands in
/// `log()` in the order the walk made it, at the address in the memory object (for a nested
/// walk the L1 / host-physical address of the entry). Writes that lost a race (the entry
/// changed, the walk re-walked) are not recorded; a walk that faults records nothing, as it
/// writes nothing. Reads go straight through (the recorder adds no cost to them beyond a
/// forwarding call).
#pragma once

#include <array>
#include <cstdint>

#include "guest_memory.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// One A/D write: where, how wide (4 or 8 bytes), the entry before and after.
struct ad_write {
  x86::gpa address{};
  std::uint8_t width = 8;
  std::uint64_t old_value = 0;
  std::uint64_t new_value = 0;
};

/// A fixed-size log of A/D writes (a walk makes at most 5 guest + 5 x 6 second-stage writes).
struct ad_log {
  std::array<ad_write, 40> items{};
  unsigned count = 0;
  bool overflow = false;  ///< more writes than `items` holds (the first ones are kept)
  constexpr void add(const ad_write& w) noexcept {
    if (count < items.size()) {
      items[count++] = w;
    } else {
      overflow = true;
    }
  }
  constexpr void clear() noexcept {
    count = 0;
    overflow = false;
  }
};

/// A writable guest_memory that forwards to `M` and logs the successful compare-exchanges.
template <writable_guest_memory M>
class ad_recorder {
 public:
  constexpr explicit ad_recorder(M& mem) noexcept : mem_(&mem) {}
  [[nodiscard]] constexpr result<std::uint32_t, memory_error> read32(x86::gpa a) const noexcept { return mem_->read32(a); }
  [[nodiscard]] constexpr result<std::uint64_t, memory_error> read64(x86::gpa a) const noexcept { return mem_->read64(a); }
  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg32(x86::gpa a, std::uint32_t expected,
                                                               std::uint32_t desired) noexcept {
    const auto r = mem_->cmpxchg32(a, expected, desired);
    if (r && *r) log_.add(ad_write{a, 4, expected, desired});
    return r;
  }
  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg64(x86::gpa a, std::uint64_t expected,
                                                               std::uint64_t desired) noexcept {
    const auto r = mem_->cmpxchg64(a, expected, desired);
    if (r && *r) log_.add(ad_write{a, 8, expected, desired});
    return r;
  }
  /// The writes recorded so far.
  [[nodiscard]] constexpr const ad_log& log() const noexcept { return log_; }
  constexpr void clear() noexcept { log_.clear(); }

 private:
  M* mem_;
  ad_log log_{};
};

}  // namespace hvkit::paging
