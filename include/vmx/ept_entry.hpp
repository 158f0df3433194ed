/// @file
/// @brief EPT entry and EPTP builders that refuse what the CPU would treat as an EPT
/// misconfiguration (SDM Vol. 3C 29.3.3.1) or reject at VM entry (EPTP, 25.6.11, 27.2.1.1).
///
/// Refused: write without read (bits 2:0 = 010b or 110b); execute-only (100b) unless
/// IA32_VMX_EPT_VPID_CAP bit 0; a leaf memory type of 2, 3 or 7; a large page the CPU does
/// not support (2 MiB: capability bit 16, 1 GiB: bit 17; never at PML4E/PML5E level); an
/// address that is unaligned or wider than MAXPHYADDR.
#pragma once

#include <cstdint>

#include <x86/address.hpp>
#include <x86/result.hpp>

namespace hvkit::vmx {

/// EPT memory types (SDM 29.3.7); 2, 3 and 7 are reserved.
enum class ept_memory_type : std::uint8_t { uc = 0, wc = 1, wt = 4, wp = 5, wb = 6 };

[[nodiscard]] constexpr bool is_valid_ept_memory_type(unsigned t) noexcept {
  return t == 0 || t == 1 || t == 4 || t == 5 || t == 6;
}

/// Level of an EPT paging structure entry: 1 = PTE, 2 = PDE, 3 = PDPTE, 4 = PML4E, 5 = PML5E.
enum class ept_level : std::uint8_t { pte = 1, pde = 2, pdpte = 3, pml4e = 4, pml5e = 5 };

struct ept_permissions {
  bool read = false;
  bool write = false;
  bool execute = false;       ///< supervisor-mode execute with mode-based execute control
  bool user_execute = false;  ///< bit 10, with mode-based execute control
};

/// IA32_VMX_EPT_VPID_CAP, the bits the builders need (SDM A.10).
struct ept_caps {
  std::uint64_t raw = 0;
  [[nodiscard]] constexpr bool execute_only() const noexcept { return raw & (1ull << 0); }
  [[nodiscard]] constexpr bool walk_length_4() const noexcept { return raw & (1ull << 6); }
  [[nodiscard]] constexpr bool walk_length_5() const noexcept { return raw & (1ull << 7); }
  [[nodiscard]] constexpr bool uc_eptp() const noexcept { return raw & (1ull << 8); }
  [[nodiscard]] constexpr bool wb_eptp() const noexcept { return raw & (1ull << 14); }
  [[nodiscard]] constexpr bool pde_2m() const noexcept { return raw & (1ull << 16); }
  [[nodiscard]] constexpr bool pdpte_1g() const noexcept { return raw & (1ull << 17); }
  [[nodiscard]] constexpr bool accessed_dirty() const noexcept { return raw & (1ull << 21); }
};

enum class ept_error : std::uint8_t {
  write_without_read,
  execute_only_unsupported,
  reserved_memory_type,
  large_page_unsupported,
  misaligned_address,
  address_too_wide,
  walk_length_unsupported,
  eptp_memory_type_unsupported,
  accessed_dirty_unsupported,
};

namespace detail {
[[nodiscard]] constexpr result<std::uint64_t, ept_error> ept_permission_bits(ept_permissions p, ept_caps caps) noexcept {
  if (p.write && !p.read) return unexpected(ept_error::write_without_read);
  if (p.execute && !p.read && !p.write && !caps.execute_only()) return unexpected(ept_error::execute_only_unsupported);
  return (p.read ? 1ull : 0) | (p.write ? 2ull : 0) | (p.execute ? 4ull : 0) | (p.user_execute ? (1ull << 10) : 0);
}
[[nodiscard]] constexpr bool fits(std::uint64_t pa, unsigned maxphyaddr) noexcept {
  return maxphyaddr >= 64 || (pa >> maxphyaddr) == 0;
}
}  // namespace detail

/// A non-leaf EPT entry pointing at the next table `next` (4 KiB aligned).
[[nodiscard]] constexpr result<std::uint64_t, ept_error> make_ept_table_entry(x86::hpa next, ept_permissions p, ept_caps caps,
                                                                             unsigned maxphyaddr = 52) noexcept {
  auto bits = detail::ept_permission_bits(p, caps);
  if (!bits) return bits;
  if (next.value() & 0xfff) return unexpected(ept_error::misaligned_address);
  if (!detail::fits(next.value(), maxphyaddr)) return unexpected(ept_error::address_too_wide);
  return next.value() | bits.value();
}

/// A leaf EPT entry mapping `frame` at `level` (PTE: 4 KiB; PDE: 2 MiB; PDPTE: 1 GiB).
[[nodiscard]] constexpr result<std::uint64_t, ept_error> make_ept_leaf(x86::hpa frame, ept_level level, ept_permissions p,
                                                                      ept_memory_type type, ept_caps caps,
                                                                      bool ignore_pat = false,
                                                                      unsigned maxphyaddr = 52) noexcept {
  auto bits = detail::ept_permission_bits(p, caps);
  if (!bits) return bits;
  if (!is_valid_ept_memory_type(static_cast<unsigned>(type))) return unexpected(ept_error::reserved_memory_type);
  std::uint64_t align = x86::page_size_4k;
  std::uint64_t large = 0;
  switch (level) {
    case ept_level::pte: break;
    case ept_level::pde:
      if (!caps.pde_2m()) return unexpected(ept_error::large_page_unsupported);
      align = x86::page_size_2m;
      large = 1ull << 7;
      break;
    case ept_level::pdpte:
      if (!caps.pdpte_1g()) return unexpected(ept_error::large_page_unsupported);
      align = x86::page_size_1g;
      large = 1ull << 7;
      break;
    case ept_level::pml4e:
    case ept_level::pml5e:
      return unexpected(ept_error::large_page_unsupported);  // bit 7 is reserved there
  }
  if (frame.value() & (align - 1)) return unexpected(ept_error::misaligned_address);
  if (!detail::fits(frame.value(), maxphyaddr)) return unexpected(ept_error::address_too_wide);
  return frame.value() | bits.value() | (static_cast<std::uint64_t>(type) << 3) | (ignore_pat ? (1ull << 6) : 0) | large;
}

/// The memory type of a raw leaf entry (bits 5:3) is one the CPU accepts; entries built
/// elsewhere can be checked with this.
[[nodiscard]] constexpr bool ept_leaf_memory_type_ok(std::uint64_t entry) noexcept {
  return is_valid_ept_memory_type(static_cast<unsigned>((entry >> 3) & 7));
}

/// The EPT pointer (SDM 25.6.11): memory type UC or WB (per capability), page-walk length
/// minus one in bits 5:3 (4 or 5 levels), A/D enable in bit 6, the PML4/PML5 table address.
[[nodiscard]] constexpr result<std::uint64_t, ept_error> make_eptp(x86::hpa root, ept_memory_type type, unsigned levels,
                                                                  bool accessed_dirty, ept_caps caps,
                                                                  unsigned maxphyaddr = 52) noexcept {
  if (type == ept_memory_type::uc ? !caps.uc_eptp() : type == ept_memory_type::wb ? !caps.wb_eptp() : true)
    return unexpected(ept_error::eptp_memory_type_unsupported);
  if (levels == 4 ? !caps.walk_length_4() : levels == 5 ? !caps.walk_length_5() : true)
    return unexpected(ept_error::walk_length_unsupported);
  if (accessed_dirty && !caps.accessed_dirty()) return unexpected(ept_error::accessed_dirty_unsupported);
  if (root.value() & 0xfff) return unexpected(ept_error::misaligned_address);
  if (!detail::fits(root.value(), maxphyaddr)) return unexpected(ept_error::address_too_wide);
  return root.value() | static_cast<std::uint64_t>(type) | (std::uint64_t{levels - 1} << 3) | (accessed_dirty ? (1ull << 6) : 0);
}

}  // namespace hvkit::vmx
