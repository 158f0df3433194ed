// SPDX-License-Identifier: MIT
/// @file
/// @brief The VMX adapter of the neutral executor paging::apply_mmu_actions (paging/cr_write_apply.hpp): refresh or rebuild the
/// mmu_context, reload the PAE PDPTEs into the VMCS guest-PDPTE fields, and say which TLB
/// flush the transition needs.
///
/// - PDPTEs: with EPT, VM entry loads the PDPTE registers from the guest-PDPTE fields
///   when the guest uses PAE paging (SDM Vol. 3C 27.3.2.4), so a CR write the hypervisor
///   emulates that loads them (MOV to CR3 under PAE paging, or a CR0/CR4 write entering or
///   changing PAE paging, SDM 4.4.1) must store them there. They are read from guest
///   memory (an ept_memory when an EPT is in use); a present PDPTE with a reserved bit
///   makes the MOV #GP(0) and nothing is written.
/// - TLB: cr_write_actions says flush_tlb_current / flush_tlb_all (SDM 4.10.4.1). With VPIDs
///   enabled, the guest's linear and combined mappings are tagged with its VPID and survive
///   VM entries: INVVPID single-context (all PCIDs, global entries included: it covers both
///   actions). With VPIDs disabled, every VM entry and exit invalidates the mappings of
///   VPID 0 (SDM 29.4.3.1), so nothing is needed. A guest CR write never needs INVEPT:
///   guest-physical mappings do not depend on guest control registers (SDM 29.4.1, 29.4.2).
/// - Shadow paging: reset_mmu means the caller unloads its shadow roots (reported in the
///   actions, which are returned unchanged).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "fields.hpp"
#include "../paging/cr_write.hpp"
#include "../paging/cr_write_apply.hpp"
#include "../paging/guest_memory.hpp"
#include "../paging/mmu.hpp"
#include "../paging/pdptr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// The TLB invalidation a transition needs.
enum class tlb_flush : std::uint8_t {
  none,                     ///< nothing (no flush action, or VPIDs disabled)
  invvpid_single_context,   ///< INVVPID type 1 for the guest's VPID
};

/// Why the actions could not be applied.
struct cr_apply_error {
  enum class kind_type : std::uint8_t { vmcs, pdpte } kind = kind_type::vmcs;
  vm_fail vmcs{};               ///< kind vmcs: a VMWRITE failed
  paging::pdptr_error pdpte{};  ///< kind pdpte: #GP(0) for a reserved bit (see pdptr_error)
};

/// What was done.
struct cr_apply_result {
  tlb_flush flush = tlb_flush::none;
  bool pdptes_loaded = false;
  bool mmu_rebuilt = false;  ///< role refreshed (and, on reset_mmu, root recomputed)
};

/// The TLB flush for `actions` (see the file comment).
[[nodiscard]] constexpr tlb_flush tlb_flush_for(paging::mmu_actions actions, bool vpid_enabled) noexcept {
  if (!actions.any(paging::mmu_actions::flush_tlb_current | paging::mmu_actions::flush_tlb_all)) return tlb_flush::none;
  return vpid_enabled ? tlb_flush::invvpid_single_context : tlb_flush::none;
}

namespace detail {
/// The VMX PDPTE store: GUEST_PDPTE0-3 (VM entry with EPT loads the PDPTE registers from
/// there, SDM Vol. 3C 27.3.2.4).
template <vmcs_backend B>
struct vmcs_pdpte_store {
  B& b;
  constexpr result<void, vm_fail> operator()(const paging::pdpte_snapshot& p) const noexcept {
    const auto& e = p.entries;
    result<void, vm_fail> w = vmwrite(b, fields::guest_pdpte0, e[0]);
    if (w) w = vmwrite(b, fields::guest_pdpte1, e[1]);
    if (w) w = vmwrite(b, fields::guest_pdpte2, e[2]);
    if (w) w = vmwrite(b, fields::guest_pdpte3, e[3]);
    return w;
  }
};

constexpr cr_apply_error from_neutral(const paging::mmu_apply_error<vm_fail>& e) noexcept {
  if (e.kind == paging::mmu_apply_error<vm_fail>::kind_type::pdpte)
    return cr_apply_error{cr_apply_error::kind_type::pdpte, {}, e.pdpte};
  return cr_apply_error{cr_apply_error::kind_type::vmcs, e.store, {}};
}
}  // namespace detail

/// Loads the PDPTEs for `cr3` from `memory` into GUEST_PDPTE0-3. Nothing is written if a
/// PDPTE is bad.
template <vmcs_backend B, paging::guest_memory M>
constexpr result<paging::pdpte_snapshot, cr_apply_error> load_guest_pdptes(B& b, x86::cr3 cr3, const M& memory,
                                                                           unsigned maxphyaddr) noexcept {
  paging::mmu_context unused;
  const auto r = paging::apply_mmu_actions(unused, paging::mmu_actions::reload_pdptrs, paging::cr_state{}, cr3, memory,
                                           maxphyaddr, detail::vmcs_pdpte_store<B>{b});
  if (!r) return unexpected(detail::from_neutral(r.error()));
  return r->pdptes;
}

/// Applies `actions` (from cr_write_actions(before, after, ...)) for the new state `after`
/// with guest CR3 `cr3`: PDPTEs first (their failure leaves everything unchanged), then the
/// MMU context, then the flush verdict. A thin adapter over paging::apply_mmu_actions.
template <vmcs_backend B, paging::guest_memory M>
constexpr result<cr_apply_result, cr_apply_error> apply_cr_write_actions(B& b, paging::mmu_context& mmu,
                                                                         paging::mmu_actions actions,
                                                                         const paging::cr_state& after, x86::cr3 cr3,
                                                                         const M& memory, unsigned maxphyaddr,
                                                                         bool vpid_enabled) noexcept {
  const auto r = paging::apply_mmu_actions(mmu, actions, after, cr3, memory, maxphyaddr, detail::vmcs_pdpte_store<B>{b});
  if (!r) return unexpected(detail::from_neutral(r.error()));
  cr_apply_result out;
  out.pdptes_loaded = r->pdptes_loaded;
  out.mmu_rebuilt = r->mmu_rebuilt;
  out.flush = tlb_flush_for(actions, vpid_enabled);
  return out;
}

}  // namespace hvkit::vmx
