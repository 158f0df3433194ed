// SPDX-License-Identifier: MIT
/// @file
/// @brief Keeping the MMU context's role in step with a CR0 the guest writes without an exit:
/// a CR0.WP change is the O(1) refresh_passthrough_bits(), a change of the paging mode
/// (CR0.PG) rebuilds the role. Vendor-neutral: SVM's no-intercept CR0 setting and VMX's
/// guest-owned CR0 bits both need it (svm/cr_intercepts.hpp proves that PG and WP are the only
/// role bits the SVM setting exposes).
#pragma once

#include <cstdint>

#include "mmu.hpp"
#include "role.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"

namespace hvkit::paging {

/// What sync_cr0_role() did.
enum class role_sync : std::uint8_t {
  unchanged,     ///< the role matches the live registers
  wp_refreshed,  ///< only CR0.WP changed: the precomputed table for the new WP was selected (O(1))
  rebuilt,       ///< CR0.PG (or EFER.LMA with it) changed: a new role and root were built
};

/// Bring `ctx` in step with the guest's live CR0 (read from the VMCB or VMCS after an exit)
/// when CR0 writes do not exit (SVM without the CR0 write intercept; VMX with the role bits
/// guest-owned in the CR0 guest/host mask): the refresh_passthrough_bits() contract for a
/// hypervisor that learns CR0 only at the next exit. Call
/// it before the first permission check of each exit (checked_permission_fault() then keeps
/// WP in step within the exit). `cr4`, `efer` and `root` are the live CR4, EFER and the root
/// derived from the live CR3 (x86::cr3_root), used only when the role must be rebuilt.
[[nodiscard]] constexpr role_sync sync_cr0_role(mmu_context& ctx, x86::cr0 live_cr0, x86::cr4 cr4,
                                                x86::efer efer, x86::gpa root, bool smm = false,
                                                bool guest_mode = false) noexcept {
  const cpu_role fresh = make_cpu_role(live_cr0, cr4, efer, smm, guest_mode);
  if (fresh == ctx.role()) return role_sync::unchanged;
  if (fresh == ctx.role().with_cr0_wp(live_cr0.test(x86::cr0::wp))) {
    static_cast<void>(ctx.refresh_passthrough_bits(live_cr0));
    return role_sync::wp_refreshed;
  }
  ctx = mmu_context{fresh, root};
  return role_sync::rebuilt;
}

}  // namespace hvkit::paging
