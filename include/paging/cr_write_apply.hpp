// SPDX-License-Identifier: MIT
/// @file
/// @brief The vendor-neutral executor of paging::mmu_actions (what cr_write_actions() says
/// a CR0/CR4/EFER/CR3 write needs): load and check the PAE PDPTEs, hand them to the
/// vendor's store, refresh or rebuild the mmu_context, and say which TLB flush the write
/// needs. vmx/cr_write_apply.hpp and svm/cr_write_apply.hpp are thin adapters over it.
///
/// Order (so that a failure leaves everything unchanged):
///  1. reload_pdptrs: the four PDPTEs are read from the PDPT CR3 points to and checked; a
///     present PDPTE with a reserved bit makes the MOV #GP(0) (SDM 4.4.1). Then the store
///     (e.g. the VMCS guest-PDPTE fields) receives them; its failure stops here too.
///  2. refresh_permissions / reset_mmu: the role is recomputed from the new CR0/CR4/EFER
///     (EFER.LMA as CR0.PG and EFER.LME make it); on reset_mmu the root is taken from CR3
///     for the new paging mode.
///  3. the TLB flush: flush_tlb_all wins over flush_tlb_current (SDM 4.10.4.1); how a
///     vendor carries it out (INVVPID, TLB_CONTROL) is the adapter's business.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cr_write.hpp"
#include "guest_memory.hpp"
#include "mmu.hpp"
#include "pdptr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// The TLB invalidation a CR write needs, vendor-neutral (SDM 4.10.4.1).
enum class tlb_flush_scope : std::uint8_t {
  none,     ///< no flush action
  current,  ///< the TLB entries and paging-structure caches of the current PCID
  all,      ///< all entries of all PCIDs, global ones included
};

/// The flush scope `actions` ask for: `all` if flush_tlb_all is among them, else `current`
/// if flush_tlb_current is, else `none`.
[[nodiscard]] constexpr tlb_flush_scope tlb_flush_scope_for(mmu_actions actions) noexcept {
  if (actions.any(mmu_actions::flush_tlb_all)) return tlb_flush_scope::all;
  if (actions.any(mmu_actions::flush_tlb_current)) return tlb_flush_scope::current;
  return tlb_flush_scope::none;
}

/// A PDPTE store that keeps nothing (a vendor without PDPTE registers in its control block).
struct no_pdpte_store {
  /// Never fails.
  struct error {};
  constexpr result<void, error> operator()(const pdpte_snapshot&) const noexcept { return {}; }
};

/// Where the loaded PDPTEs go: called once with the checked snapshot; returns
/// result<void, E> (E: why storing failed, e.g. a VMWRITE's VMfail).
template <class S>
concept pdpte_store = requires(S& s, const pdpte_snapshot& p) {
  { s(p).has_value() } -> std::convertible_to<bool>;
  s(p).error();
};

/// The error type of a pdpte_store.
template <pdpte_store S>
using pdpte_store_error_t = std::remove_cvref_t<decltype(std::declval<S&>()(std::declval<const pdpte_snapshot&>()).error())>;

/// Why the actions could not be applied.
template <class StoreError>
struct mmu_apply_error {
  enum class kind_type : std::uint8_t {
    store,  ///< the store refused the PDPTEs (`store`)
    pdpte,  ///< loading the PDPTEs failed (`pdpte`: #GP(0) for a reserved bit, see pdptr_error)
  } kind = kind_type::store;
  StoreError store{};
  pdptr_error pdpte{};
};

/// What was done.
struct mmu_apply_result {
  tlb_flush_scope flush = tlb_flush_scope::none;
  bool pdptes_loaded = false;
  bool mmu_rebuilt = false;  ///< role refreshed (and, on reset_mmu, root recomputed)
  pdpte_snapshot pdptes{};   ///< the PDPTEs loaded (pdptes_loaded)
};

/// Applies `actions` (from cr_write_actions(before, after, ...)) for the new state `after`
/// with guest CR3 `cr3`, reading the PDPT from `memory` (an ept_memory or an NPT-backed
/// memory when a second stage is in use) and giving the PDPTEs to `store`. See the file
/// comment for the order; on an error `mmu` is unchanged.
template <guest_memory M, pdpte_store S>
constexpr result<mmu_apply_result, mmu_apply_error<pdpte_store_error_t<S>>> apply_mmu_actions(
    mmu_context& mmu, mmu_actions actions, const cr_state& after, x86::cr3 cr3, const M& memory,
    unsigned maxphyaddr, S&& store) noexcept {
  using error = mmu_apply_error<pdpte_store_error_t<S>>;
  mmu_apply_result out;
  if (actions.any(mmu_actions::reload_pdptrs)) {
    const auto p = load_pdptrs(cr3, memory, maxphyaddr);
    if (!p) {
      error e{};
      e.kind = error::kind_type::pdpte;
      e.pdpte = p.error();
      return unexpected(e);
    }
    if (auto s = store(p.value()); !s.has_value()) {
      error e{};
      e.kind = error::kind_type::store;
      e.store = s.error();
      return unexpected(e);
    }
    out.pdptes = p.value();
    out.pdptes_loaded = true;
  }
  if (actions.any(mmu_actions::refresh_permissions | mmu_actions::reset_mmu)) {
    const x86::efer efer = efer_with_lma(after.cr0, after.efer);
    auto next = mmu_context::make(after.cr0, after.cr4, efer, mmu.root());
    if (actions.any(mmu_actions::reset_mmu)) next.set_root(x86::cr3_root(cr3, next.role().mode(), maxphyaddr));
    mmu = next;
    out.mmu_rebuilt = true;
  }
  out.flush = tlb_flush_scope_for(actions);
  return out;
}

/// The same without a PDPTE store (the PDPTEs are still loaded and checked, and returned).
template <guest_memory M>
constexpr result<mmu_apply_result, mmu_apply_error<no_pdpte_store::error>> apply_mmu_actions(
    mmu_context& mmu, mmu_actions actions, const cr_state& after, x86::cr3 cr3, const M& memory,
    unsigned maxphyaddr) noexcept {
  return apply_mmu_actions(mmu, actions, after, cr3, memory, maxphyaddr, no_pdpte_store{});
}

}  // namespace hvkit::paging
