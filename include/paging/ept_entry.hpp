/// @file
/// @brief EPT paging-structure entries and the EPT pointer (SDM 29.3.2, Tables 29-1 to 29-7;
/// 25.6.11 for the EPTP).
#pragma once

#include <cstdint>

#include <x86/address.hpp>
#include <x86/bitfield.hpp>
#include <x86/contract.hpp>
#include <x86/flags.hpp>

namespace hvkit::paging {

/// EPT memory types (SDM 29.3.7, 11.3): the values of EPT leaf bits 5:3 and EPTP bits 2:0.
enum class ept_memory_type : std::uint8_t {
  uc = 0,  ///< uncacheable
  wc = 1,  ///< write combining
  wt = 4,  ///< write through
  wp = 5,  ///< write protected
  wb = 6,  ///< write back
};

/// True if `v` (bits 5:3 of a leaf EPT entry) is a valid memory type; 2, 3 and 7 are
/// reserved and make the entry misconfigured (SDM 29.3.3.1).
[[nodiscard]] constexpr bool is_valid_ept_memory_type(unsigned v) noexcept {
  return v == 0 || v == 1 || v == 4 || v == 5 || v == 6;
}

/// One EPT paging-structure entry (PML5E, PML4E, PDPTE, PDE or PTE).
class ept_entry : public x86::flags<ept_entry> {
 public:
  using flags::flags;
  static const ept_entry read;        ///< 0: R
  static const ept_entry write;       ///< 1: W
  static const ept_entry exec;        ///< 2: X (XS, supervisor-mode execute, with MBEC)
  static const ept_entry ignore_pat;  ///< 6: leaf: ignore the guest PAT
  static const ept_entry page_size;   ///< 7: PS in a PDPTE/PDE (reserved in PML4E/PML5E)
  static const ept_entry accessed;    ///< 8: A (with EPT A/D enabled)
  static const ept_entry dirty;       ///< 9: D (leaf, with EPT A/D enabled)
  static const ept_entry user_exec;   ///< 10: XU, user-mode execute (with MBEC)
  static const ept_entry suppress_ve; ///< 63: leaf: suppress #VE
  /// Bits 5:3 of a leaf: the memory type.
  using memory_type_field = x86::bitfield<std::uint64_t, 3, 3, std::uint8_t>;
  [[nodiscard]] constexpr std::uint8_t memory_type() const noexcept { return memory_type_field::get(raw()); }
};
inline constexpr ept_entry ept_entry::read = ept_entry::bit(0);
inline constexpr ept_entry ept_entry::write = ept_entry::bit(1);
inline constexpr ept_entry ept_entry::exec = ept_entry::bit(2);
inline constexpr ept_entry ept_entry::ignore_pat = ept_entry::bit(6);
inline constexpr ept_entry ept_entry::page_size = ept_entry::bit(7);
inline constexpr ept_entry ept_entry::accessed = ept_entry::bit(8);
inline constexpr ept_entry ept_entry::dirty = ept_entry::bit(9);
inline constexpr ept_entry ept_entry::user_exec = ept_entry::bit(10);
inline constexpr ept_entry ept_entry::suppress_ve = ept_entry::bit(63);

/// The EPT pointer (VMCS field 0x201A, SDM 25.6.11, Table 25-9).
class ept_pointer : public x86::flags<ept_pointer> {
 public:
  using flags::flags;
  /// Bits 2:0: memory type of the paging-structure accesses (UC = 0 or WB = 6).
  using memory_type_field = x86::bitfield<std::uint64_t, 0, 3, std::uint8_t>;
  /// Bits 5:3: page-walk length minus 1 (3 = 4 levels, 4 = 5 levels).
  using walk_length_field = x86::bitfield<std::uint64_t, 3, 3, std::uint8_t>;
  static const ept_pointer ad_enabled;            ///< 6: accessed and dirty flags for EPT
  static const ept_pointer supervisor_shadow_stack;  ///< 7: enforce access rights for supervisor shadow stacks

  /// The number of EPT levels (page-walk length).
  [[nodiscard]] constexpr unsigned levels() const noexcept { return walk_length_field::get(raw()) + 1u; }
  /// The PML4 (or PML5) table: bits MAXPHYADDR-1:12.
  [[nodiscard]] constexpr x86::gpa root(unsigned maxphyaddr) const noexcept {
    return x86::gpa{raw() & x86::physical_address_mask(maxphyaddr) & ~(x86::page_size_4k - 1)};
  }
};
inline constexpr ept_pointer ept_pointer::ad_enabled = ept_pointer::bit(6);
inline constexpr ept_pointer ept_pointer::supervisor_shadow_stack = ept_pointer::bit(7);

/// An EPTP for a root, a number of levels (4 or 5) and the A/D setting, with WB
/// paging-structure accesses.
[[nodiscard]] constexpr ept_pointer make_ept_pointer(x86::gpa root, unsigned levels, bool ad) noexcept {
  HVKIT_EXPECTS(levels == 4 || levels == 5);
  std::uint64_t v = root.value() & ~(x86::page_size_4k - 1);
  v = ept_pointer::memory_type_field::set(v, 6);
  v = ept_pointer::walk_length_field::set(v, static_cast<std::uint8_t>(levels - 1));
  return ept_pointer{v}.assign(ept_pointer::ad_enabled, ad);
}

}  // namespace hvkit::paging
