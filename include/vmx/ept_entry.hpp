// SPDX-License-Identifier: MIT
/// @file
/// @brief EPT entry and EPTP builders over paging's typed `paging::ept_entry` and
/// `paging::ept_pointer`, refusing what the CPU would treat as an EPT misconfiguration
/// (SDM Vol. 3C 29.3.3.1) or reject at VM entry (EPTP, 25.6.11, 27.2.1.1), and the decoder
/// of the EPT bits of IA32_VMX_EPT_VPID_CAP (SDM A.10).
///
/// Refused: write without read (bits 2:0 = 010b or 110b); execute-only (100b) unless
/// IA32_VMX_EPT_VPID_CAP bit 0; a leaf memory type of 2, 3 or 7; a large page the CPU does
/// not support (2 MiB: capability bit 16, 1 GiB: bit 17; never at PML4E/PML5E level): the
/// entry is checked by paging::ept_misconfiguration(), the rule set the EPT walker applies;
/// and an address that is unaligned or wider than MAXPHYADDR. The EPTP is
/// checked by the EPT walker's own rule (paging::ept_walker::make) plus the UC/WB capability
/// bits only the VMX capability MSR knows.
#pragma once

#include <cstdint>

#include "../paging/ept_entry.hpp"
#include "../paging/ept_walker.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// Level of an EPT paging structure entry: 1 = PTE, 2 = PDE, 3 = PDPTE, 4 = PML4E, 5 = PML5E.
enum class ept_level : std::uint8_t { pte = 1, pde = 2, pdpte = 3, pml4e = 4, pml5e = 5 };

/// The access rights of an entry to build.
struct ept_permissions {
  bool read = false;
  bool write = false;
  bool execute = false;       ///< supervisor-mode execute with mode-based execute control
  bool user_execute = false;  ///< bit 10, with mode-based execute control
};

/// Decodes the EPT bits of IA32_VMX_EPT_VPID_CAP (SDM A.10) into paging's one capability
/// type: the only decoder of these bits. `maxphyaddr` is CPUID.80000008H:EAX[7:0] and `mbec`
/// the "mode-based execute control for EPT" secondary processor-based control (bit 22).
[[nodiscard]] constexpr paging::ept_capabilities ept_capabilities_from(std::uint64_t ept_vpid_cap,
                                                                      unsigned maxphyaddr = 52,
                                                                      bool mbec = false) noexcept {
  const auto bit = [ept_vpid_cap](unsigned n) { return ((ept_vpid_cap >> n) & 1u) != 0; };
  paging::ept_capabilities c{};
  c.maxphyaddr = maxphyaddr;
  c.execute_only = bit(0);
  c.walk4 = bit(6);
  c.walk5 = bit(7);
  c.eptp_uc = bit(8);
  c.eptp_wb = bit(14);
  c.page_2m = bit(16);
  c.page_1g = bit(17);
  c.ad = bit(21);
  c.supervisor_shadow_stack = bit(23);
  c.mbec = mbec;
  return c;
}

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
  eptp_reserved_bits,  ///< EPTP bits 11:8 set (SDM 25.6.11, Table 25-9)
  /// EPTP bit 7 (supervisor shadow-stack control) without capability bit 23 (SDM 27.2.1.1, A.10)
  supervisor_shadow_stack_unsupported,
  invalid_maxphyaddr,  ///< MAXPHYADDR outside 32..52 (CPUID.80000008H:EAX[7:0], SDM 4.1.4)
};

namespace detail {
[[nodiscard]] constexpr paging::ept_entry ept_rights(ept_permissions p) noexcept {
  using E = paging::ept_entry;
  return E{}.with(E::read, p.read).with(E::write, p.write).with(E::exec, p.execute).with(E::user_exec, p.user_execute);
}
/// `e` (without its address) at `level` against the EPT walker's misconfiguration rules
/// (paging::ept_misconfiguration, SDM 29.3.3.1) for these capabilities. `caps.maxphyaddr`
/// must be valid (checked by the callers first).
[[nodiscard]] constexpr result<void, ept_error> check_misconfiguration(paging::ept_entry e, unsigned level,
                                                                       const paging::ept_capabilities& caps) noexcept {
  using M = paging::ept_misconfig;
  switch (paging::ept_misconfiguration(e, level, caps)) {
    case M::none: return {};
    case M::write_without_read: return unexpected(ept_error::write_without_read);
    case M::execute_only_unsupported: return unexpected(ept_error::execute_only_unsupported);
    case M::reserved_memory_type: return unexpected(ept_error::reserved_memory_type);
    case M::large_page_unsupported: return unexpected(ept_error::large_page_unsupported);
    case M::reserved_bits: break;  // not reachable: the entry checked has no address bits
  }
  return unexpected(ept_error::misaligned_address);
}
/// Alignment and width of a physical address (bits 63:MAXPHYADDR must be 0).
[[nodiscard]] constexpr result<void, ept_error> check_address(x86::hpa pa, std::uint64_t align,
                                                              unsigned maxphyaddr) noexcept {
  if (!x86::is_valid_maxphyaddr(maxphyaddr)) return unexpected(ept_error::invalid_maxphyaddr);
  if (pa.value() & (align - 1)) return unexpected(ept_error::misaligned_address);
  if (pa.value() & ~x86::physical_address_mask(maxphyaddr)) return unexpected(ept_error::address_too_wide);
  return {};
}
}  // namespace detail

/// A non-leaf EPT entry pointing at the next table `next` (4 KiB aligned, below
/// `caps.maxphyaddr`).
[[nodiscard]] constexpr result<paging::ept_entry, ept_error> make_ept_table_entry(
    x86::hpa next, ept_permissions p, const paging::ept_capabilities& caps) noexcept {
  const unsigned maxphyaddr = caps.maxphyaddr;
  if (!x86::is_valid_maxphyaddr(maxphyaddr)) return unexpected(ept_error::invalid_maxphyaddr);
  const paging::ept_entry rights = detail::ept_rights(p);
  // Level 4 stands for any non-leaf level: the rules for an entry with PS=0 and no memory
  // type do not depend on it.
  if (auto m = detail::check_misconfiguration(rights, 4, caps); !m) return unexpected(m.error());
  if (auto a = detail::check_address(next, x86::page_size_4k, maxphyaddr); !a) return unexpected(a.error());
  return paging::ept_entry{next.value()} | rights;
}

/// A leaf EPT entry mapping `frame` at `level` (PTE: 4 KiB; PDE: 2 MiB; PDPTE: 1 GiB), below
/// `caps.maxphyaddr`.
[[nodiscard]] constexpr result<paging::ept_entry, ept_error> make_ept_leaf(x86::hpa frame, ept_level level,
                                                                          ept_permissions p,
                                                                          paging::ept_memory_type type,
                                                                          const paging::ept_capabilities& caps,
                                                                          bool ignore_pat = false) noexcept {
  using E = paging::ept_entry;
  const unsigned maxphyaddr = caps.maxphyaddr;
  if (!x86::is_valid_maxphyaddr(maxphyaddr)) return unexpected(ept_error::invalid_maxphyaddr);
  const auto mt = static_cast<std::uint8_t>(type);
  if (mt > E::memory_type_field::max_raw) return unexpected(ept_error::reserved_memory_type);  // not 3 bits
  const unsigned lvl = static_cast<unsigned>(level);
  const bool large = lvl > 1;  // PS=1 above the PTE; at PML4E/PML5E (or no level) the rules refuse it
  const E entry = (E{E::memory_type_field::set(0, mt)} | detail::ept_rights(p))
                      .with(E::ignore_pat, ignore_pat)
                      .with(E::page_size, large);
  if (auto m = detail::check_misconfiguration(entry, lvl, caps); !m) return unexpected(m.error());
  const std::uint64_t align = level == ept_level::pde     ? x86::page_size_2m
                              : level == ept_level::pdpte ? x86::page_size_1g
                                                          : x86::page_size_4k;
  if (auto a = detail::check_address(frame, align, maxphyaddr); !a) return unexpected(a.error());
  return E{frame.value()} | entry;
}

/// The memory type of a leaf entry (bits 5:3) is one the CPU accepts (SDM 29.3.3.1); entries
/// built elsewhere can be checked with this.
[[nodiscard]] constexpr bool ept_leaf_memory_type_ok(paging::ept_entry leaf) noexcept {
  return paging::is_valid_ept_memory_type(leaf.memory_type());
}

/// Checks an EPTP against the CPU: the walker's rule (page-walk length 4 or 5 as supported,
/// memory type UC or WB, A/D only if supported, bit 7 only with supervisor shadow-stack
/// control (capability bit 23), bits 11:8 and 63:MAXPHYADDR clear; SDM
/// 27.2.1.1) and the capability bits for the memory type (UC: bit 8, WB: bit 14; SDM A.10).
/// Returns the first violation, or nothing. `caps.maxphyaddr` is the width checked.
[[nodiscard]] constexpr result<paging::ept_pointer, ept_error> check_eptp(paging::ept_pointer eptp,
                                                                        const paging::ept_capabilities& caps) noexcept {
  const unsigned maxphyaddr = caps.maxphyaddr;
  if (!x86::is_valid_maxphyaddr(maxphyaddr)) return unexpected(ept_error::invalid_maxphyaddr);
  auto w = paging::ept_walker::make(eptp, caps);
  if (!w) {
    switch (w.error()) {
      case paging::eptp_error::walk_length: return unexpected(ept_error::walk_length_unsupported);
      case paging::eptp_error::memory_type: return unexpected(ept_error::eptp_memory_type_unsupported);
      case paging::eptp_error::ad_unsupported: return unexpected(ept_error::accessed_dirty_unsupported);
      case paging::eptp_error::supervisor_shadow_stack_unsupported:
        return unexpected(ept_error::supervisor_shadow_stack_unsupported);
      case paging::eptp_error::reserved_bits:
        return unexpected(eptp.raw() & ~x86::physical_address_mask(maxphyaddr) ? ept_error::address_too_wide
                                                                                : ept_error::eptp_reserved_bits);
      case paging::eptp_error::none: break;
    }
    return unexpected(ept_error::eptp_reserved_bits);
  }
  const auto mt = static_cast<paging::ept_memory_type>(paging::ept_pointer::memory_type_field::get(eptp.raw()));
  if (mt == paging::ept_memory_type::uc ? !caps.eptp_uc : !caps.eptp_wb)
    return unexpected(ept_error::eptp_memory_type_unsupported);
  return eptp;
}

/// The EPT pointer (SDM 25.6.11): memory type UC or WB (per capability), page-walk length
/// minus one in bits 5:3 (4 or 5 levels), A/D enable in bit 6, the PML4/PML5 table address
/// (host-physical, below `caps.maxphyaddr`).
[[nodiscard]] constexpr result<paging::ept_pointer, ept_error> make_eptp(x86::hpa root, paging::ept_memory_type type,
                                                                       unsigned levels, bool accessed_dirty,
                                                                       const paging::ept_capabilities& caps) noexcept {
  using P = paging::ept_pointer;
  const unsigned maxphyaddr = caps.maxphyaddr;
  if (levels != 4 && levels != 5) return unexpected(ept_error::walk_length_unsupported);
  if (static_cast<unsigned>(type) > P::memory_type_field::max_raw) return unexpected(ept_error::eptp_memory_type_unsupported);
  if (auto a = detail::check_address(root, x86::page_size_4k, maxphyaddr); !a) return unexpected(a.error());
  std::uint64_t v = P::memory_type_field::set(root.value(), static_cast<std::uint8_t>(type));
  v = P::walk_length_field::set(v, static_cast<std::uint8_t>(levels - 1));
  return check_eptp(P{v}.with(P::ad_enabled, accessed_dirty), caps);
}

}  // namespace hvkit::vmx
