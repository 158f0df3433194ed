// SPDX-License-Identifier: MIT
/// @file
/// @brief PAE paging: loading the four PDPTE registers from the PDPT CR3 points to.
///
/// With PAE paging the processor loads the four PDPTEs when CR3 is written (and when CR0 or
/// CR4 changes enter PAE paging), and checks their reserved bits then: a violation is a
/// #GP(0) on that MOV, not a #PF (SDM 4.4.1). The walk itself uses the registers and never
/// re-reads the PDPT (so a later write to the PDPT has no effect until CR3 is reloaded).
/// `load_pdptrs` does that load; the PAE walker consumes its snapshot. For a guest whose
/// memory lies behind EPT, the overload of paging/nested.hpp translates the PDPT as the
/// processor does (a PDPTE load, its own EPT access class).
#pragma once

#include <array>
#include <cstdint>

#include "guest_memory.hpp"
#include "pte.hpp"
#include "reserved.hpp"
#include "walk_result.hpp"
#include "../x86/address.hpp"
#include "../x86/cr3.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/result.hpp"
#include "../x86/vector.hpp"

namespace hvkit::paging {

/// The four PDPTE registers and where they were loaded from.
struct pdpte_snapshot {
  std::array<std::uint64_t, 4> entries{};
  x86::gpa pdpt{};  ///< CR3 bits 31:5: the PDPT the entries came from
  /// The registers hold a load: set by load_pdptrs() (or by a caller that fills `entries`
  /// itself). A PAE walk through a snapshot that was never loaded fails with
  /// fault_kind::pdptes_not_loaded instead of reporting every address "not present".
  bool loaded = false;
};

/// Why loading the PDPTEs failed.
struct pdptr_error {
  enum class kind_type : std::uint8_t {
    none,
    reserved_bit,  ///< a present PDPTE with a reserved bit: #GP(0)
    unbacked,      ///< the PDPT (or, behind EPT, its translation) is not in the memory object
    ept,           ///< behind EPT: translating the PDPT failed (an EPT violation or misconfiguration exit, see `ept`)
  } kind = kind_type::none;
  std::uint8_t index = 0;     ///< which PDPTE (0-3)
  std::uint64_t value = 0;    ///< its value (reserved_bit)
  x86::gpa address{};         ///< its (guest-physical) address
  /// What the MOV that loaded it raises: #GP(0) for a reserved bit. An unbacked PDPT is
  /// a host-side problem (no architectural fault): the vector is still #GP for callers
  /// that must inject something, but `kind` tells the two apart. Meaningless for `ept`
  /// (a VM exit, not a guest exception).
  x86::vector vector = x86::vector::gp;
  /// kind_type::ept: the EPT walk's fault (stage ept, exit qualification with bit 0 only
  /// and bits 7/8 clear for a violation: a PDPTE load is a read without a linear address).
  walk_fault ept{};
};

namespace detail {
/// Reads and checks the four PDPTEs of the PDPT at guest-physical `pdpt`, found at `at` in
/// `memory` (the same address without a second stage).
template <guest_memory M>
[[nodiscard]] constexpr result<pdpte_snapshot, pdptr_error> read_pdptes(const M& memory, x86::gpa pdpt, x86::gpa at,
                                                                       unsigned maxphyaddr) noexcept {
  pdpte_snapshot s{};
  s.pdpt = pdpt;
  const std::uint64_t rsvd = pae_pdpte_reserved(maxphyaddr);
  for (unsigned i = 0; i < 4; ++i) {
    const x86::gpa a = pdpt + 8u * i;
    const auto v = memory.read64(at + 8u * i);
    if (!v) return unexpected(pdptr_error{pdptr_error::kind_type::unbacked, static_cast<std::uint8_t>(i), 0, a});
    const pdpte e{*v};
    if (e.test(pdpte::present) && (e.raw() & rsvd) != 0)
      return unexpected(pdptr_error{pdptr_error::kind_type::reserved_bit, static_cast<std::uint8_t>(i), *v, a});
    s.entries[i] = *v;
  }
  s.loaded = true;
  return s;
}
}  // namespace detail

/// A PDPTE snapshot from given register values (e.g. the VMCS guest PDPTE fields, or a
/// saved state), checked as a load checks them (SDM 4.4.1, Table 4-8): a present PDPTE with
/// a reserved bit (2:1, 8:5, 63:MAXPHYADDR) fails with pdptr_error::kind_type::reserved_bit
/// (the #GP(0) the load would raise), with `address` = `pdpt` + 8 * index. The one checked
/// way to fill a snapshot by hand (filling `entries` directly skips the check).
[[nodiscard]] constexpr result<pdpte_snapshot, pdptr_error> make_pdpte_snapshot(const std::array<std::uint64_t, 4>& values,
                                                                               x86::gpa pdpt,
                                                                               unsigned maxphyaddr) noexcept {
  pdpte_snapshot s{};
  s.pdpt = pdpt;
  const std::uint64_t rsvd = pae_pdpte_reserved(maxphyaddr);
  for (unsigned i = 0; i < 4; ++i) {
    const std::uint64_t v = values[i];
    if ((v & pdpte::present.raw()) && (v & rsvd) != 0)
      return unexpected(pdptr_error{pdptr_error::kind_type::reserved_bit, static_cast<std::uint8_t>(i), v, pdpt + 8u * i});
    s.entries[i] = v;
  }
  s.loaded = true;
  return s;
}

/// Loads and checks the four PDPTEs at CR3 bits 31:5 (SDM 4.4.1, Table 4-8). A present
/// PDPTE with a reserved bit (2:1, 8:5, 63:MAXPHYADDR) fails with #GP; a not-present PDPTE
/// is loaded as is (a walk through it then takes a not-present #PF).
template <guest_memory M>
[[nodiscard]] constexpr result<pdpte_snapshot, pdptr_error> load_pdptrs(x86::cr3 cr3, const M& memory,
                                                                       unsigned maxphyaddr) noexcept {
  const x86::gpa pdpt = x86::cr3_root(cr3, x86::paging_mode::pae, maxphyaddr);
  return detail::read_pdptes(memory, pdpt, pdpt, maxphyaddr);
}

}  // namespace hvkit::paging
