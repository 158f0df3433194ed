// SPDX-License-Identifier: MIT
/// @file
/// @brief The 4 KiB MSR bitmap (SDM Vol. 3C 25.6.9) and the RDMSR/WRMSR exit rule
/// (SDM 26.1.3).
///
/// Four 1 KiB quadrants: read-low (MSRs 0x00000000-0x00001FFF) at byte 0, read-high
/// (0xC0000000-0xC0001FFF) at 1024, write-low at 2048, write-high at 3072. A set bit makes
/// the access exit. An MSR outside both ranges always exits, whatever the bitmap holds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "../x86/msr.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// RDMSR or WRMSR (the vendor-neutral x86::msr_access).
using msr_access = x86::msr_access;

/// An MSR that the bitmap cannot describe (it always exits).
struct msr_out_of_range {
  std::uint32_t msr = 0;
};

class alignas(4096) msr_bitmap {
 public:
  static constexpr std::size_t size = 4096;

  /// A bitmap in which every access exits.
  [[nodiscard]] static constexpr msr_bitmap all_exit() noexcept {
    msr_bitmap b;
    for (auto& x : b.bytes_) x = 0xff;
    return b;
  }
  /// A bitmap in which no in-range access exits.
  [[nodiscard]] static constexpr msr_bitmap none_exit() noexcept { return msr_bitmap{}; }

  /// Byte offset and bit of `msr` for `a`, or an error if the MSR is outside both ranges.
  [[nodiscard]] static constexpr result<std::size_t, msr_out_of_range> bit_index(std::uint32_t msr, msr_access a) noexcept {
    std::size_t base;
    if (msr <= 0x1fffu) base = 0;
    else if (msr >= 0xc000'0000u && msr <= 0xc000'1fffu) base = 1024;
    else return unexpected(msr_out_of_range{msr});
    if (a == msr_access::write) base += 2048;
    return base * 8 + (msr & 0x1fffu);
  }

  /// Set whether `a` of `msr` exits. An out-of-range MSR is an error (it always exits).
  constexpr result<void, msr_out_of_range> set_intercept(std::uint32_t msr, msr_access a, bool exits) noexcept {
    auto i = bit_index(msr, a);
    if (!i) return unexpected(i.error());
    const std::size_t bit = i.value();
    const auto m = static_cast<std::uint8_t>(1u << (bit % 8));
    bytes_[bit / 8] = exits ? static_cast<std::uint8_t>(bytes_[bit / 8] | m) : static_cast<std::uint8_t>(bytes_[bit / 8] & ~m);
    return {};
  }
  /// Pass both reads and writes of `msr` through (no exit).
  constexpr result<void, msr_out_of_range> pass_through(std::uint32_t msr) noexcept {
    auto r = set_intercept(msr, msr_access::read, false);
    if (!r) return r;
    return set_intercept(msr, msr_access::write, false);
  }

  /// True if `a` of `msr` causes a VM exit with this bitmap (SDM 26.1.3 RDMSR/WRMSR).
  [[nodiscard]] constexpr bool exits(std::uint32_t msr, msr_access a) const noexcept {
    auto i = bit_index(msr, a);
    if (!i) return true;
    return (unsigned{bytes_[i.value() / 8]} >> (i.value() % 8)) & 1u;
  }

  [[nodiscard]] constexpr const std::array<std::uint8_t, size>& bytes() const noexcept { return bytes_; }

 private:
  std::array<std::uint8_t, size> bytes_{};
};
static_assert(sizeof(msr_bitmap) == 4096);

}  // namespace hvkit::vmx
