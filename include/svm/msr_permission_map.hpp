// SPDX-License-Identifier: MIT
/// @file
/// @brief The 8 KiB MSR permission map (MSRPM, AMD APM Vol. 2, 15.11 "MSR Intercepts") and the
/// RDMSR/WRMSR intercept rule.
///
/// Two bits per MSR, for three MSR ranges of 8192 MSRs each: 0000_0000h-0000_1FFFh at bytes
/// 000h-7FFh, C000_0000h-C000_1FFFh at 800h-FFFh, C001_0000h-C001_1FFFh at 1000h-17FFh;
/// bytes 1800h-1FFFh are reserved. Of an MSR's two bits the even one intercepts RDMSR and
/// the odd one WRMSR. An MSR outside the three ranges is always intercepted (when the
/// MSR_PROT intercept is set). Physically the map is two contiguous 4 KiB pages (MSRPM_BASE_PA,
/// VMCB 048h, page aligned).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "../x86/msr.hpp"
#include "../x86/result.hpp"

namespace hvkit::svm {

using x86::msr_access;

/// An MSR no range of the permission map covers (its accesses are always intercepted).
struct msr_out_of_range {
  std::uint32_t msr = 0;
  friend constexpr bool operator==(msr_out_of_range, msr_out_of_range) noexcept = default;
};

/// Where an MSR's bit lives: byte offset in the map and bit in the byte.
struct msrpm_position {
  std::size_t byte = 0;
  unsigned bit = 0;
  friend constexpr bool operator==(msrpm_position, msrpm_position) noexcept = default;
};

class alignas(4096) msr_permission_map {
 public:
  static constexpr std::size_t size = 8192;

  /// A map that intercepts every access.
  [[nodiscard]] static constexpr msr_permission_map intercept_all() noexcept {
    msr_permission_map m;
    for (std::size_t i = 0; i < 0x1800; ++i) m.bytes_[i] = 0xff;
    return m;
  }
  /// A map that intercepts no in-range access.
  [[nodiscard]] static constexpr msr_permission_map intercept_none() noexcept { return msr_permission_map{}; }

  /// The position of the bit for `a` of `msr`, or an error for an MSR outside the ranges.
  [[nodiscard]] static constexpr result<msrpm_position, msr_out_of_range> position(std::uint32_t msr,
                                                                                     msr_access a) noexcept {
    std::size_t base;
    if (msr <= 0x0000'1fffu) base = 0x000;
    else if (msr >= 0xc000'0000u && msr <= 0xc000'1fffu) base = 0x800;
    else if (msr >= 0xc001'0000u && msr <= 0xc001'1fffu) base = 0x1000;
    else return unexpected(msr_out_of_range{msr});
    const std::size_t bit = std::size_t{msr & 0x1fffu} * 2 + (a == msr_access::write ? 1 : 0);
    return msrpm_position{base + bit / 8, static_cast<unsigned>(bit % 8)};
  }

  /// Set whether `a` of `msr` is intercepted. An out-of-range MSR is an error (always intercepted).
  constexpr result<void, msr_out_of_range> set_intercept(std::uint32_t msr, msr_access a, bool intercepted) noexcept {
    auto p = position(msr, a);
    if (!p) return unexpected(p.error());
    auto& b = bytes_[p.value().byte];
    const auto m = static_cast<std::uint8_t>(1u << p.value().bit);
    b = intercepted ? static_cast<std::uint8_t>(b | m) : static_cast<std::uint8_t>(b & ~m);
    return {};
  }
  /// Let the guest read and write `msr` without an intercept.
  constexpr result<void, msr_out_of_range> pass_through(std::uint32_t msr) noexcept {
    auto r = set_intercept(msr, msr_access::read, false);
    if (!r) return r;
    return set_intercept(msr, msr_access::write, false);
  }
  /// True if `a` of `msr` is intercepted with this map (15.11).
  [[nodiscard]] constexpr bool intercepts(std::uint32_t msr, msr_access a) const noexcept {
    auto p = position(msr, a);
    if (!p) return true;
    return ((unsigned{bytes_[p.value().byte]} >> p.value().bit) & 1u) != 0;
  }

  [[nodiscard]] constexpr const std::array<std::uint8_t, size>& bytes() const noexcept { return bytes_; }

 private:
  std::array<std::uint8_t, size> bytes_{};
};
static_assert(sizeof(msr_permission_map) == 8192);

}  // namespace hvkit::svm
