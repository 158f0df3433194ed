// SPDX-License-Identifier: MIT
/// @file
/// @brief The INVEPT/INVVPID a change to a translation requires under VMX (SDM Vol. 3C 29.4
/// "Caching Translation Information", 29.4.3.1 "Operations that Invalidate Cached Mappings",
/// 31.3 INVEPT and INVVPID; capabilities in IA32_VMX_EPT_VPID_CAP, Vol. 3D A.10).
///
/// With EPT the processor caches guest-physical mappings (tagged with the EP4TA) and combined
/// mappings (tagged with the EP4TA, the VPID and the PCID). INVEPT single-context invalidates
/// both kinds for one EP4TA, whatever the VPID; all-context for every EP4TA. INVVPID
/// invalidates linear and combined mappings but never guest-physical ones, so it is never
/// enough for an EPT change. Without EPT (shadow paging), the hypervisor's page tables are
/// the guest's linear translations, tagged with the VPID: INVVPID single-context flushes
/// them; with VPID 0 (VPIDs disabled) every VM entry and VM exit already invalidates the
/// mappings of VPID 0000H, so the kick out of the guest is the whole invalidation.
#pragma once

#include <cstdint>

#include "../paging/tlb_invalidation.hpp"

namespace hvkit::vmx {

/// INVEPT types (register operand; SDM 31.3 INVEPT).
enum class invept_type : std::uint64_t { single_context = 1, all_context = 2 };
/// INVVPID types (SDM 31.3 INVVPID).
enum class invvpid_type : std::uint64_t {
  individual_address = 0, single_context = 1, all_context = 2, single_context_retaining_globals = 3,
};

/// IA32_VMX_EPT_VPID_CAP bits (SDM A.10).
namespace ept_vpid_cap {
inline constexpr std::uint64_t invept = std::uint64_t{1} << 20;
inline constexpr std::uint64_t invept_single_context = std::uint64_t{1} << 25;
inline constexpr std::uint64_t invept_all_context = std::uint64_t{1} << 26;
inline constexpr std::uint64_t invvpid = std::uint64_t{1} << 32;
inline constexpr std::uint64_t invvpid_individual_address = std::uint64_t{1} << 40;
inline constexpr std::uint64_t invvpid_single_context = std::uint64_t{1} << 41;
inline constexpr std::uint64_t invvpid_all_context = std::uint64_t{1} << 42;
}  // namespace ept_vpid_cap

/// What every processor that may cache the translation must do.
enum class vmx_flush : std::uint8_t {
  none,                    ///< nothing (the change cannot leave a harmful stale entry)
  invept_single_context,   ///< INVEPT single-context with the EPTP (for each EPTP using the tables)
  invept_all_context,      ///< INVEPT all-context
  invvpid_single_context,  ///< INVVPID single-context with the vCPU's VPID
  invvpid_all_context,     ///< INVVPID all-context
  vm_exit_suffices,        ///< VPID disabled: the kick's VM exit and the next entry invalidate
  unsupported,             ///< the processor offers no invalidation of the needed kind
};

/// The answer for a change `c` to EPT paging structures referenced by `eptp_count` EPTPs.
/// Single-context when the processor has it and one EPTP references the structures (or the
/// caller will issue it per EPTP: `per_eptp_ok`); all-context otherwise.
[[nodiscard]] constexpr vmx_flush ept_change_flush(paging::mapping_change c, std::uint64_t cap,
                                                   unsigned eptp_count = 1, bool per_eptp_ok = true) noexcept {
  if (paging::required_invalidation(c) == paging::invalidation::none) return vmx_flush::none;
  namespace k = ept_vpid_cap;
  if (!(cap & k::invept)) return vmx_flush::unsupported;
  const bool single = (cap & k::invept_single_context) != 0, all = (cap & k::invept_all_context) != 0;
  if (single && (eptp_count == 1 || per_eptp_ok)) return vmx_flush::invept_single_context;
  if (all) return vmx_flush::invept_all_context;
  return vmx_flush::unsupported;
}

/// The answer for a change `c` to a shadow page table (EPT off) of a vCPU tagged with
/// `vpid_enabled` (a non-zero VPID).
[[nodiscard]] constexpr vmx_flush shadow_change_flush(paging::mapping_change c, std::uint64_t cap,
                                                      bool vpid_enabled) noexcept {
  if (paging::required_invalidation(c) == paging::invalidation::none) return vmx_flush::none;
  if (!vpid_enabled) return vmx_flush::vm_exit_suffices;
  namespace k = ept_vpid_cap;
  if (!(cap & k::invvpid)) return vmx_flush::unsupported;
  if (cap & k::invvpid_single_context) return vmx_flush::invvpid_single_context;
  if (cap & k::invvpid_all_context) return vmx_flush::invvpid_all_context;
  return vmx_flush::unsupported;
}

}  // namespace hvkit::vmx
