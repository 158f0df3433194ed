// SPDX-License-Identifier: MIT
/// @file
/// @brief I/O bitmaps A and B (SDM Vol. 3C 25.6.4) and the I/O-instruction exit rule
/// (SDM 26.1.3 "IN, INS/INSB/INSW/INSD, OUT, OUTS/OUTSB/OUTSW/OUTSD").
///
/// Bitmap A covers ports 0x0000-0x7FFF, bitmap B ports 0x8000-0xFFFF, one bit per port.
/// With "use I/O bitmaps", an access of N bytes at port p exits if any of the bits for ports
/// p .. p+N-1 is set, or if the access wraps around the 16-bit port space (p + N - 1 > 0xFFFF).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hvkit::vmx {

class io_bitmaps {
 public:
  static constexpr std::size_t page = 4096;

  [[nodiscard]] static constexpr io_bitmaps all_exit() noexcept {
    io_bitmaps b;
    for (auto& x : b.a_) x = 0xff;
    for (auto& x : b.b_) x = 0xff;
    return b;
  }
  [[nodiscard]] static constexpr io_bitmaps none_exit() noexcept { return io_bitmaps{}; }

  constexpr void set_intercept(std::uint16_t port, bool exits) noexcept {
    auto& bm = port < 0x8000 ? a_ : b_;
    const unsigned bit = port & 0x7fffu;
    const auto m = static_cast<std::uint8_t>(1u << (bit % 8));
    bm[bit / 8] = exits ? static_cast<std::uint8_t>(bm[bit / 8] | m) : static_cast<std::uint8_t>(bm[bit / 8] & ~m);
  }
  /// Set the interception of ports [first, first + count) (clamped to 0xFFFF).
  constexpr void set_intercept_range(std::uint16_t first, std::uint32_t count, bool exits) noexcept {
    for (std::uint32_t p = first; p < static_cast<std::uint32_t>(first) + count && p <= 0xffffu; ++p)
      set_intercept(static_cast<std::uint16_t>(p), exits);
  }

  /// The bitmap byte holding port `port`'s bit.
  [[nodiscard]] constexpr std::uint8_t port_byte(std::uint16_t port) const noexcept {
    return (port < 0x8000 ? a_ : b_)[(port & 0x7fffu) / 8];
  }
  [[nodiscard]] constexpr bool port_bit(std::uint16_t port) const noexcept {
    const auto& bm = port < 0x8000 ? a_ : b_;
    const unsigned bit = port & 0x7fffu;
    return (bm[bit / 8] >> (bit % 8)) & 1u;
  }

  /// True if an access of `size` bytes (1, 2 or 4) at `port` exits.
  [[nodiscard]] constexpr bool exits(std::uint16_t port, unsigned size) const noexcept {
    const std::uint32_t last = static_cast<std::uint32_t>(port) + size - 1;
    if (last > 0xffffu) return true;  // wraps around
    if (size - 1u > 3u) {             // not an IN/OUT size (1 to 4): the bits one by one
      for (unsigned i = 0; i < size; ++i)
        if (port_bit(static_cast<std::uint16_t>(port + i))) return true;
      return false;
    }
    // The bits of ports port..last lie in at most two adjacent bytes (port % 8 + size <= 11),
    // bitmap B's byte 0 following bitmap A's last byte at ports 7FFFh/8000h: one 16-bit
    // window and one mask instead of a bit test per port.
    const std::uint32_t lo = port_byte(port), hi = port_byte(static_cast<std::uint16_t>(last));
    return (((lo | (hi << 8)) >> (port % 8)) & ((1u << size) - 1)) != 0;
  }

  /// Bitmap A (VMCS field io_bitmap_a) and B (io_bitmap_b); each must sit in its own 4 KiB page.
  [[nodiscard]] constexpr const std::array<std::uint8_t, page>& a() const noexcept { return a_; }
  [[nodiscard]] constexpr const std::array<std::uint8_t, page>& b() const noexcept { return b_; }

 private:
  alignas(4096) std::array<std::uint8_t, page> a_{};
  alignas(4096) std::array<std::uint8_t, page> b_{};
};

}  // namespace hvkit::vmx
