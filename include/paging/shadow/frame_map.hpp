// SPDX-License-Identifier: MIT
/// @file
/// @brief The caller's guest-frame to host-frame map that a shadow MMU maps guest pages
/// through: a concept and a flat array adapter.
#pragma once

#include <concepts>
#include <cstdint>

#include "../guest_memory.hpp"
#include "../../x86/address.hpp"
#include "../../x86/result.hpp"

namespace hvkit::paging::shadow {

/// Maps a guest frame to the host-physical address of its 4 KiB page. A frame without host
/// memory (memory_error::unbacked) is MMIO: accesses to it are emulated, never mapped.
template <class M>
concept frame_map = requires(const M& m, x86::gfn f) {
  { m.host_frame(f) } -> std::same_as<result<x86::hpa, memory_error>>;
};

/// Guest frames [0, count) backed by host memory at `base + 4096 * gfn` (one contiguous host
/// range, as a hypervisor that gives a guest one block of RAM has); frames at or above
/// `count` are MMIO.
class linear_frame_map {
 public:
  constexpr linear_frame_map() noexcept = default;
  constexpr linear_frame_map(x86::hpa base, std::uint64_t count) noexcept : base_(base), count_(count) {}
  [[nodiscard]] constexpr result<x86::hpa, memory_error> host_frame(x86::gfn f) const noexcept {
    if (f.value() >= count_) return unexpected(memory_error::unbacked);
    return base_ + (f.value() << x86::page_shift);
  }

 private:
  x86::hpa base_{};
  std::uint64_t count_ = 0;
};
static_assert(frame_map<linear_frame_map>);

}  // namespace hvkit::paging::shadow
