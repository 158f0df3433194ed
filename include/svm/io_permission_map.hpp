// SPDX-License-Identifier: MIT
/// @file
/// @brief The 12 KiB I/O permission map (IOPM, AMD APM Vol. 2, 15.10.1 "I/O Permissions Map")
/// and the IN/OUT intercept rule.
///
/// One bit per port (bit p for port p), 64K bits in the first 8 KiB; an access of n bytes at
/// port p checks the bits of ports p .. p+n-1, and is intercepted if any is set. A 2- or
/// 4-byte access at the top of the port space reaches bits 10000h-10002h, which is why the
/// map is three 4 KiB pages (IOPM_BASE_PA, VMCB 040h, page aligned) though only 64K+3 bits
/// are consulted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "../x86/contract.hpp"

namespace hvkit::svm {

class alignas(4096) io_permission_map {
 public:
  static constexpr std::size_t size = 12288;
  /// The bits the processor consults: ports 0-FFFFh and three beyond.
  static constexpr std::size_t bits_used = 0x10000 + 3;

  [[nodiscard]] static constexpr io_permission_map intercept_all() noexcept {
    io_permission_map m;
    for (auto& b : m.bytes_) b = 0xff;
    return m;
  }
  [[nodiscard]] static constexpr io_permission_map intercept_none() noexcept { return io_permission_map{}; }

  /// Set whether port `port` is intercepted.
  constexpr void set_intercept(std::uint16_t port, bool intercepted) noexcept { set_bit(port, intercepted); }
  /// Intercept (or not) every port in [first, last].
  constexpr void set_intercept(std::uint16_t first, std::uint16_t last, bool intercepted) noexcept {
    for (std::uint32_t p = first; p <= last; ++p) set_bit(p, intercepted);
  }
  /// True if an access of `access_size` bytes (1, 2 or 4) at `port` is intercepted (15.10.1): any
  /// of the bits of ports port .. port+access_size-1 is set. Sizes 0 and 3 (no IN/OUT has them)
  /// get the same bit-by-bit answer (0: false); a size above 4 is a contract violation.
  [[nodiscard]] constexpr bool intercepts(std::uint16_t port, unsigned access_size) const noexcept {
    // One compare for the contract on the hot path (sizes vary from exit to exit, so no
    // branch on 1/2/4): the window below is exact for every size up to 4.
    HVKIT_EXPECTS(access_size <= 4);
    // Bits port..port+access_size-1 lie in bytes port/8 and port/8+1 (port % 8 + access_size <= 11); the
    // second byte exists for every port (byte 2000h is in the third page): one 16-bit window.
    // Both bytes through one pointer, so that the second is a displacement, not an index
    // computed again.
    const std::uint8_t* const at = bytes_.data() + port / 8u;
    const std::uint32_t two = at[0] | (std::uint32_t{at[1]} << 8);
    return ((two >> (port % 8)) & ((1u << access_size) - 1)) != 0;
  }
  [[nodiscard]] constexpr const std::array<std::uint8_t, size>& bytes() const noexcept { return bytes_; }

 private:
  constexpr void set_bit(std::uint32_t bit, bool on) noexcept {
    auto& b = bytes_[bit / 8];
    const auto m = static_cast<std::uint8_t>(1u << (bit % 8));
    b = on ? static_cast<std::uint8_t>(b | m) : static_cast<std::uint8_t>(b & ~m);
  }

  std::array<std::uint8_t, size> bytes_{};
};
static_assert(sizeof(io_permission_map) == 12288);

}  // namespace hvkit::svm
