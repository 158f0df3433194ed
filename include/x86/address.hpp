// SPDX-License-Identifier: MIT
/// @file
/// @brief Distinct address types: gva, gpa, gfn, hpa, hva, and their named conversions.
///
/// Each address space has its own type, so a guest-physical address cannot be passed where
/// a host-physical one is expected. All conversions are explicit and named:
/// gpa_to_gfn(), gfn_to_gpa(), offset_in_page(), is_canonical(), canonicalize().
#pragma once

#include <compare>
#include <cstdint>

#include "contract.hpp"

namespace hvkit::x86 {

inline constexpr unsigned page_shift = 12;
inline constexpr std::uint64_t page_size_4k = std::uint64_t{1} << 12;
inline constexpr std::uint64_t page_size_2m = std::uint64_t{1} << 21;
inline constexpr std::uint64_t page_size_4m = std::uint64_t{1} << 22;
inline constexpr std::uint64_t page_size_1g = std::uint64_t{1} << 30;

/// A byte address in one address space (Tag). Arithmetic stays in the same space.
template <class Tag>
class address {
 public:
  constexpr address() noexcept = default;
  constexpr explicit address(std::uint64_t v) noexcept : v_(v) {}
  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return v_; }

  [[nodiscard]] friend constexpr address operator+(address a, std::uint64_t off) noexcept { return address{a.v_ + off}; }
  [[nodiscard]] friend constexpr address operator-(address a, std::uint64_t off) noexcept { return address{a.v_ - off}; }
  /// Distance in bytes between two addresses of the same space.
  [[nodiscard]] friend constexpr std::uint64_t operator-(address a, address b) noexcept { return a.v_ - b.v_; }
  constexpr address& operator+=(std::uint64_t off) noexcept { v_ += off; return *this; }
  friend constexpr auto operator<=>(address, address) noexcept = default;

 private:
  std::uint64_t v_ = 0;
};

/// A 4 KiB frame number in one address space (Tag).
template <class Tag>
class frame_number {
 public:
  constexpr frame_number() noexcept = default;
  constexpr explicit frame_number(std::uint64_t v) noexcept : v_(v) {}
  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return v_; }
  friend constexpr auto operator<=>(frame_number, frame_number) noexcept = default;

 private:
  std::uint64_t v_ = 0;
};

struct gva_tag {};
struct gpa_tag {};
struct hpa_tag {};
struct hva_tag {};

using gva = address<gva_tag>;  ///< guest-virtual (linear) address
using gpa = address<gpa_tag>;  ///< guest-physical address
using hpa = address<hpa_tag>;  ///< host-physical address
using hva = address<hva_tag>;  ///< host-virtual address
using gfn = frame_number<gpa_tag>;  ///< guest frame number (gpa >> 12)
using hfn = frame_number<hpa_tag>;  ///< host frame number (hpa >> 12)

[[nodiscard]] constexpr gfn gpa_to_gfn(gpa a) noexcept { return gfn{a.value() >> page_shift}; }
[[nodiscard]] constexpr gpa gfn_to_gpa(gfn f) noexcept { return gpa{f.value() << page_shift}; }
[[nodiscard]] constexpr hfn hpa_to_hfn(hpa a) noexcept { return hfn{a.value() >> page_shift}; }
[[nodiscard]] constexpr hpa hfn_to_hpa(hfn f) noexcept { return hpa{f.value() << page_shift}; }

/// Offset within the 4 KiB page.
template <class Tag>
[[nodiscard]] constexpr std::uint64_t offset_in_page(address<Tag> a) noexcept {
  return a.value() & (page_size_4k - 1);
}
/// The address rounded down to its 4 KiB page.
template <class Tag>
[[nodiscard]] constexpr address<Tag> page_base(address<Tag> a) noexcept {
  return address<Tag>{a.value() & ~(page_size_4k - 1)};
}

/// Linear-address width: 48 bits with 4-level paging, 57 with 5-level (SDM 3.3.7.1, 4.5).
enum class linear_width : std::uint8_t { la48 = 48, la57 = 57 };

/// True if bits 63:width-1 of `a` are all equal (SDM 3.3.7.1 "canonical address").
namespace detail {
/// 64 - width; total over the enum's storage (any value but la57 counts as 48 bits), so a
/// bogus width can never make a shift of 64.
[[nodiscard]] constexpr unsigned canonical_shift(linear_width w) noexcept { return w == linear_width::la57 ? 7u : 16u; }
}  // namespace detail

[[nodiscard]] constexpr bool is_canonical(gva a, linear_width w) noexcept {
  const auto shift = detail::canonical_shift(w);
  const auto v = static_cast<std::int64_t>(a.value() << shift) >> shift;
  return static_cast<std::uint64_t>(v) == a.value();
}
/// Sign-extends bit width-1 into the upper bits.
[[nodiscard]] constexpr gva canonicalize(gva a, linear_width w) noexcept {
  const auto shift = detail::canonical_shift(w);
  return gva{static_cast<std::uint64_t>(static_cast<std::int64_t>(a.value() << shift) >> shift)};
}

/// True for a MAXPHYADDR hvkit accepts (CPUID.80000008H:EAX[7:0]): at most 52 (SDM 4.1.4),
/// at least 32 (a processor without that leaf and without PAE). The one spelling of the range.
[[nodiscard]] constexpr bool is_valid_maxphyaddr(unsigned maxphyaddr) noexcept {
  return maxphyaddr >= 32 && maxphyaddr <= 52;
}

/// The one default MAXPHYADDR of hvkit: the width of a processor that enumerates PAE but not
/// CPUID leaf 80000008H. SDM Vol. 3A 4.1.4: "CPUID.80000008H:EAX[7:0] reports the
/// physical-address width supported by the processor. (For processors that do not support
/// CPUID function 80000008H, the width is generally 36 if CPUID.01H:EDX.PAE [bit 6] = 1 and
/// 32 otherwise.)" Every type that holds a guest's MAXPHYADDR and is built without one starts
/// from it (cpuid::guest_cpu_model and its alias vmx::guest_cpu_config, x86::cr_context,
/// emulate::context); a hypervisor takes the real value from its guest's CPUID policy
/// (cpuid::make_guest_cpu_model). (paging::cpu_properties, the walker's view of a CPU, keeps
/// 52: a walker without a model accepts every address a processor could have.)
inline constexpr unsigned default_maxphyaddr = 36;

/// Mask of physical-address bits below MAXPHYADDR (bits maxphyaddr-1:0).
[[nodiscard]] constexpr std::uint64_t physical_address_mask(unsigned maxphyaddr) noexcept {
  HVKIT_EXPECTS(is_valid_maxphyaddr(maxphyaddr));
  return (std::uint64_t{1} << maxphyaddr) - 1;
}

}  // namespace hvkit::x86
