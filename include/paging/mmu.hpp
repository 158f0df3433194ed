// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest MMU context: role, precomputed permission table and root, with the
/// O(1) CR0.WP passthrough refresh (docs/background.md §1: KVM's CR0.WP work).
///
/// THE RULE: when the hypervisor lets the guest own CR0.WP (clear in the CR0 guest/host
/// mask, only legal with EPT/NPT), WP toggles do not exit and the cached role goes stale.
/// Every emulated access must therefore call refresh_passthrough_bits() with the live CR0
/// (read from the VMCS) before permission_fault(), or use checked_permission_fault(), which
/// does both. Forgetting it is exactly the bug that made an emulated LTR fault with error
/// code 0x3 under CR0.WP=0 and triple-fault the guest.
#pragma once

#include <cstdint>

#include "access.hpp"
#include "permission.hpp"
#include "role.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/guest_owned.hpp"
#include "../x86/pfec.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::paging {

// The bits of cpu_role that may be refreshed from a live, guest-owned register: only
// CR0.WP. guest_owned.hpp proves at compile time that no other role bit can be guest-owned.
// (Plain comments: a Doxygen comment here would become part of mmu_context's description.)
static_assert((x86::cr0_mmu_role_bits & x86::cr0_possible_guest_owned) == x86::cr0::wp,
              "the passthrough refresh handles exactly CR0.WP");
static_assert((x86::cr4_mmu_role_bits & x86::cr4_possible_guest_owned).none(),
              "no CR4 bit may feed the role and be guest-owned: the refresh would not see it");

/// A guest MMU context for walking guest page tables: role, the role's permission table
/// (a pointer into the constexpr permission_tables, never computed at run time) and the
/// root of the guest page tables.
class mmu_context {
 public:
  /// Paging off, root 0.
  constexpr mmu_context() noexcept = default;

  /// The context for these control registers and root (the walker's starting point, e.g.
  /// x86::cr3_root()).
  [[nodiscard]] static constexpr mmu_context make(x86::cr0 cr0, x86::cr4 cr4, x86::efer efer, x86::gpa root,
                                                  bool smm = false, bool guest_mode = false) noexcept {
    return mmu_context{make_cpu_role(cr0, cr4, efer, smm, guest_mode), root};
  }
  /// The context for a role and root.
  constexpr mmu_context(cpu_role role, x86::gpa root) noexcept
      : role_(role), table_(&permission_table_for(role)), root_(root) {}

  [[nodiscard]] constexpr cpu_role role() const noexcept { return role_; }
  [[nodiscard]] constexpr x86::gpa root() const noexcept { return root_; }
  constexpr void set_root(x86::gpa root) noexcept { root_ = root; }
  /// The role's permission table (one of permission_tables).
  [[nodiscard]] constexpr const permission_table& permissions() const noexcept { return *table_; }

  /// Re-syncs the role's passthrough bits (only CR0.WP) from the live CR0, in O(1): if WP
  /// differs from the role (and paging is on), switches role and table to the precomputed
  /// ones for the new WP. Returns true if anything changed. Call it before every
  /// permission check when the guest may own CR0.WP.
  constexpr bool refresh_passthrough_bits(x86::cr0 live_cr0) noexcept {
    const cpu_role fresh = role_.with_cr0_wp(live_cr0.test(x86::cr0::wp));
    if (fresh == role_) return false;
    role_ = fresh;
    table_ = &permission_table_for(fresh);
    return true;
  }

  /// Checks one access to a present page. Branch-free.
  ///
  /// @param rights accumulated rights of the translation (pte_access exec, write, user, and
  ///        shadow_stack for a shadow-stack page; the EPT-only bits are ignored). `user` set
  ///        means a user-mode address.
  /// @param pkey the leaf entry's protection key (bits 62:59; only the low 4 bits are used).
  /// @param access the access: x86::pfec::write, ::user (a user-mode access, CPL 3 and not
  ///        implicit), ::fetch, and the software flag x86::pfec::implicit_access (an implicit
  ///        supervisor-mode access, e.g. a GDT/TSS write by LTR: SMAP is then not overridden
  ///        by RFLAGS.AC). Other bits are ignored. With ::user set, ::implicit_access has no
  ///        effect (a user-mode access is never overridden by AC either). ::write together
  ///        with ::fetch is not an access the processor makes; the result is then both checks
  ///        combined. ::ss marks a shadow-stack access (CET; with ::write for a
  ///        shadow-stack write, with ::user for a user-mode one, which includes WRUSS at
  ///        CPL 0): SDM 4.6.1 allows it only to a shadow-stack page (`rights` has
  ///        pte_access::shadow_stack) of the same mode (U/S of the page = ::user of the
  ///        access), regardless of CR0.WP, SMAP and RFLAGS.AC, and protection keys apply
  ///        as to a data access (SDM 4.6.2). A non-shadow-stack write to a shadow-stack page
  ///        follows the ordinary rules: the leaf has R/W=0, so it faults except for a
  ///        supervisor write under CR0.WP=0, which CET cannot meet (CR4.CET=1 requires
  ///        CR0.WP=1, SDM 2.5). hvkit checks shadow-stack accesses the same way under
  ///        CR0.WP=0, where no processor makes them. ::ss with ::fetch is not an access the
  ///        processor makes (the shadow-stack rule then replaces the paging-rights one).
  ///        The check assumes paging is on: with paging off there is no page-level
  ///        protection and nothing to check (the walkers do not call it).
  /// @param rflags the guest's RFLAGS; only AC (bit 18) is used.
  /// @param pkr the protection-key register that applies to the address: PKRU for a
  ///        user-mode address, IA32_PKRS for a supervisor-mode one (pk_register_for() picks
  ///        it). Ignored unless the role has CR4.PKE (user-mode addresses) or CR4.PKS
  ///        (supervisor-mode addresses).
  /// @return empty if the access is allowed; otherwise exactly the #PF error-code bits this
  ///        check decides: P (bit 0) always, and PK (bit 5) if the protection key denies the
  ///        access (SDM 4.7), even when paging rights deny it too. The caller ORs in W, U
  ///        I/D (the latter only with EFER.NXE or SMEP, SDM 4.7) and SS from the access.
  [[nodiscard]] constexpr x86::pfec permission_fault(pte_access rights, std::uint8_t pkey, x86::pfec access,
                                                     x86::rflags rflags, std::uint32_t pkr) const noexcept {
    return paging::permission_fault(*table_, rights, pkey, access, rflags, pkr);
  }

  /// refresh_passthrough_bits(live_cr0), then permission_fault(): the form an emulator
  /// should use when CR0.WP may be guest-owned.
  [[nodiscard]] constexpr x86::pfec checked_permission_fault(x86::cr0 live_cr0, pte_access rights,
                                                             std::uint8_t pkey, x86::pfec access,
                                                             x86::rflags rflags, std::uint32_t pkr) noexcept {
    static_cast<void>(refresh_passthrough_bits(live_cr0));
    return permission_fault(rights, pkey, access, rflags, pkr);
  }

 private:
  cpu_role role_{};
  const permission_table* table_ = &permission_tables[0];
  x86::gpa root_{};
};

}  // namespace hvkit::paging
