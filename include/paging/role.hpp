// SPDX-License-Identifier: MIT
/// @file
/// @brief MMU roles: `cpu_role` (the guest's translation regime), `ept_role`, and the
/// shadow-MMU `page_role`; typed values over one unsigned word each.
///
/// A role holds every control bit that changes translation or access rights (SDM 4.1.3),
/// normalised so that two roles that translate identically are the same integer: bits that
/// have no effect in the current paging mode are stored as 0 (with paging off only SMM and
/// guest mode remain; EFER.NXE only with PAE/4/5-level paging, which have an XD bit;
/// CR4.PSE only with 32-bit paging; CR4.PKE/PKS only in IA-32e mode, SDM 4.6.2).
/// Comparing two roles is one integer comparison.
#pragma once

#include <cstdint>

#include "access.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/contract.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/paging_mode.hpp"

namespace hvkit::paging {

/// The role of a guest MMU context: what CR0, CR4 and EFER (and SMM / guest mode) say about
/// translation and access rights. Build it with make_cpu_role().
///
/// Layout (bits of raw()): 2:0 paging mode (0, 2, 3, 4, 5 = number of levels),
/// 3 CR0.WP, 4 CR4.SMEP, 5 CR4.SMAP, 6 EFER.NXE, 7 CR4.PKE, 8 CR4.PKS (bits 8:3 are the
/// permission-table index, see permission.hpp), 9 CR4.PSE, 10 SMM, 11 guest mode.
class cpu_role {
 public:
  using storage_type = std::uint32_t;
  using level_field = x86::bitfield<storage_type, 0, 3, x86::paging_mode>;
  using wp_field = x86::bitflag<storage_type, 3>;
  using smep_field = x86::bitflag<storage_type, 4>;
  using smap_field = x86::bitflag<storage_type, 5>;
  using nx_field = x86::bitflag<storage_type, 6>;
  using pke_field = x86::bitflag<storage_type, 7>;
  using pks_field = x86::bitflag<storage_type, 8>;
  using pse_field = x86::bitflag<storage_type, 9>;
  using smm_field = x86::bitflag<storage_type, 10>;
  using guest_mode_field = x86::bitflag<storage_type, 11>;
  static_assert(x86::fields_disjoint<level_field, wp_field, smep_field, smap_field, nx_field, pke_field,
                                     pks_field, pse_field, smm_field, guest_mode_field>());

  /// First bit of the permission-table index (WP, SMEP, SMAP, NX, PKE, PKS, in that order).
  static constexpr unsigned permission_index_shift = 3;
  /// Number of permission-table index bits.
  static constexpr unsigned permission_index_bits = 6;

  /// Paging off, not in SMM, not in guest mode.
  constexpr cpu_role() noexcept = default;
  /// A role from its raw word. Only values produced by raw() are meaningful.
  constexpr explicit cpu_role(storage_type raw) noexcept : raw_(raw) {}

  [[nodiscard]] constexpr storage_type raw() const noexcept { return raw_; }

  /// The paging mode (SDM 4.1.1).
  [[nodiscard]] constexpr x86::paging_mode mode() const noexcept { return level_field::get(raw_); }
  /// Number of paging-structure levels: 0 (paging off), 2, 3, 4 or 5.
  [[nodiscard]] constexpr unsigned level() const noexcept { return level_field::raw(raw_); }
  /// CR0.PG.
  [[nodiscard]] constexpr bool paging() const noexcept { return level() != 0; }
  /// 32-bit paging: 4-byte paging-structure entries (SDM 4.3).
  [[nodiscard]] constexpr bool has_4byte_gpte() const noexcept { return mode() == x86::paging_mode::two_level; }
  /// CR4.PAE with paging on (PAE, 4-level or 5-level paging).
  [[nodiscard]] constexpr bool pae() const noexcept { return level() >= 3; }
  /// EFER.LMA: IA-32e paging (4- or 5-level).
  [[nodiscard]] constexpr bool lma() const noexcept { return level() >= 4; }
  /// CR4.LA57 in IA-32e mode: 5-level paging.
  [[nodiscard]] constexpr bool la57() const noexcept { return level() == 5; }
  /// CR0.WP (with paging on).
  [[nodiscard]] constexpr bool cr0_wp() const noexcept { return wp_field::get(raw_); }
  /// CR4.SMEP (with paging on).
  [[nodiscard]] constexpr bool smep() const noexcept { return smep_field::get(raw_); }
  /// CR4.SMAP (with paging on).
  [[nodiscard]] constexpr bool smap() const noexcept { return smap_field::get(raw_); }
  /// EFER.NXE with PAE/4/5-level paging (32-bit paging has no XD bit, SDM 4.6.1).
  [[nodiscard]] constexpr bool efer_nx() const noexcept { return nx_field::get(raw_); }
  /// CR4.PKE in IA-32e mode (SDM 4.6.2).
  [[nodiscard]] constexpr bool pke() const noexcept { return pke_field::get(raw_); }
  /// CR4.PKS in IA-32e mode (SDM 4.6.2).
  [[nodiscard]] constexpr bool pks() const noexcept { return pks_field::get(raw_); }
  /// CR4.PSE with 32-bit paging (4 MiB pages, SDM 4.3); PAE and IA-32e paging ignore it.
  [[nodiscard]] constexpr bool pse() const noexcept { return pse_field::get(raw_); }
  /// The logical processor is in SMM (a separate address space for the MMU).
  [[nodiscard]] constexpr bool smm() const noexcept { return smm_field::get(raw_); }
  /// The context translates for a nested (L2) guest.
  [[nodiscard]] constexpr bool guest_mode() const noexcept { return guest_mode_field::get(raw_); }

  /// The index of this role's permission table (bits WP, SMEP, SMAP, NX, PKE, PKS).
  [[nodiscard]] constexpr unsigned permission_index() const noexcept {
    return (raw_ >> permission_index_shift) & ((1u << permission_index_bits) - 1);
  }

  /// The same role with CR0.WP replaced by `wp` (ignored, i.e. kept 0, with paging off).
  [[nodiscard]] constexpr cpu_role with_cr0_wp(bool wp) const noexcept {
    return cpu_role{wp_field::set(raw_, wp && paging())};
  }

  friend constexpr bool operator==(cpu_role, cpu_role) noexcept = default;

 private:
  storage_type raw_ = 0;
};

/// The cpu_role for the given control registers (SDM 4.1.1 for the mode, 4.1.3 for the
/// modifiers). EFER.LMA is taken as given (it is set by the processor, SDM 2.2.1).
[[nodiscard]] constexpr cpu_role make_cpu_role(x86::cr0 cr0, x86::cr4 cr4, x86::efer efer, bool smm = false,
                                               bool guest_mode = false) noexcept {
  using r = cpu_role;
  const auto mode = x86::paging_mode_of(cr0, cr4, efer);
  const auto levels = x86::paging_levels(mode);
  r::storage_type v = 0;
  v = r::smm_field::set(v, smm);
  v = r::guest_mode_field::set(v, guest_mode);
  if (levels == 0) return cpu_role{v};  // no paging: no access rights to emulate
  v = r::level_field::set(v, mode);
  v = r::wp_field::set(v, cr0.test(x86::cr0::wp));
  v = r::smep_field::set(v, cr4.test(x86::cr4::smep));
  v = r::smap_field::set(v, cr4.test(x86::cr4::smap));
  v = r::nx_field::set(v, levels >= 3 && efer.test(x86::efer::nxe));  // XD exists with PAE/IA-32e only
  v = r::pke_field::set(v, levels >= 4 && cr4.test(x86::cr4::pke));   // keys: IA-32e paging only
  v = r::pks_field::set(v, levels >= 4 && cr4.test(x86::cr4::pks));
  v = r::pse_field::set(v, levels == 2 && cr4.test(x86::cr4::pse));   // PAE/IA-32e always allow PS
  return cpu_role{v};
}

/// The role of an EPT context (SDM 29.3): what the VMCS and IA32_VMX_EPT_VPID_CAP say
/// about EPT translation and rights.
///
/// Layout: bit 0 execute-only translations allowed (IA32_VMX_EPT_VPID_CAP bit 0; only
/// affects which entries are misconfigured, SDM 29.3.3.1), bit 1 mode-based execute control
/// (secondary control bit 22), bit 2 accessed/dirty flags enabled (EPTP bit 6).
class ept_role {
 public:
  using storage_type = std::uint8_t;
  using execute_only_field = x86::bitflag<storage_type, 0>;
  using mbec_field = x86::bitflag<storage_type, 1>;
  using ad_field = x86::bitflag<storage_type, 2>;

  constexpr ept_role() noexcept = default;
  /// A role from its three properties.
  constexpr ept_role(bool execute_only_allowed, bool mbec, bool ad_enabled) noexcept
      : raw_(static_cast<storage_type>(execute_only_field::set(0, execute_only_allowed) |
                                       mbec_field::set(0, mbec) | ad_field::set(0, ad_enabled))) {}

  [[nodiscard]] constexpr storage_type raw() const noexcept { return raw_; }
  /// Execute-only EPT entries (R=0, W=0, X=1) are allowed.
  [[nodiscard]] constexpr bool execute_only_allowed() const noexcept { return execute_only_field::get(raw_); }
  /// Mode-based execute control: XS (bit 2) for supervisor-mode and XU (bit 10) for
  /// user-mode linear addresses.
  [[nodiscard]] constexpr bool mbec() const noexcept { return mbec_field::get(raw_); }
  /// Accessed and dirty flags for EPT are enabled; guest paging-structure accesses then
  /// count as writes (SDM 29.3.3.2).
  [[nodiscard]] constexpr bool ad_enabled() const noexcept { return ad_field::get(raw_); }
  /// Index of the EPT permission table (execute-only, MBEC).
  [[nodiscard]] constexpr unsigned permission_index() const noexcept { return raw_ & 3u; }

  friend constexpr bool operator==(ept_role, ept_role) noexcept = default;

 private:
  storage_type raw_ = 0;
};

/// The role of one shadow-MMU page: which guest translation regime and which part of it a
/// shadow page table mirrors. Two shadow pages are interchangeable exactly when their
/// roles (and guest frame) are equal.
///
/// Layout: 3:0 level, 4 has_4byte_gpte, 6:5 quadrant, 7 direct, 10:8 access (pte_access
/// exec/write/user), 11 cr0_wp, 12 smep_andnot_wp, 13 smap_andnot_wp, 14 efer_nx,
/// 15 ad_disabled, 16 guest_mode, 17 passthrough, 18 smm.
class page_role {
 public:
  using storage_type = std::uint32_t;
  using level_field = x86::bitfield<storage_type, 0, 4, std::uint8_t>;
  using has_4byte_gpte_field = x86::bitflag<storage_type, 4>;
  using quadrant_field = x86::bitfield<storage_type, 5, 2, std::uint8_t>;
  using direct_field = x86::bitflag<storage_type, 7>;
  using access_field = x86::bitfield<storage_type, 8, 3, std::uint8_t>;
  using cr0_wp_field = x86::bitflag<storage_type, 11>;
  using smep_andnot_wp_field = x86::bitflag<storage_type, 12>;
  using smap_andnot_wp_field = x86::bitflag<storage_type, 13>;
  using efer_nx_field = x86::bitflag<storage_type, 14>;
  using ad_disabled_field = x86::bitflag<storage_type, 15>;
  using guest_mode_field = x86::bitflag<storage_type, 16>;
  using passthrough_field = x86::bitflag<storage_type, 17>;
  using smm_field = x86::bitflag<storage_type, 18>;
  static_assert(x86::fields_disjoint<level_field, has_4byte_gpte_field, quadrant_field, direct_field,
                                     access_field, cr0_wp_field, smep_andnot_wp_field, smap_andnot_wp_field,
                                     efer_nx_field, ad_disabled_field, guest_mode_field, passthrough_field,
                                     smm_field>());

  constexpr page_role() noexcept = default;
  constexpr explicit page_role(storage_type raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr storage_type raw() const noexcept { return raw_; }

  /// Level of the shadow page (1 = 4 KiB page table ... 5 = PML5).
  [[nodiscard]] constexpr unsigned level() const noexcept { return level_field::get(raw_); }
  /// The guest uses 4-byte entries (32-bit paging).
  [[nodiscard]] constexpr bool has_4byte_gpte() const noexcept { return has_4byte_gpte_field::get(raw_); }
  /// Which part of a 4-byte-entry guest table this 8-byte-entry shadow page covers (0-3).
  [[nodiscard]] constexpr unsigned quadrant() const noexcept { return quadrant_field::get(raw_); }
  /// The page maps a guest-physical range directly (no guest page table behind it).
  [[nodiscard]] constexpr bool direct() const noexcept { return direct_field::get(raw_); }
  /// Rights accumulated above this page (exec, write, user).
  [[nodiscard]] constexpr pte_access access() const noexcept { return pte_access{access_field::get(raw_)}; }
  [[nodiscard]] constexpr bool cr0_wp() const noexcept { return cr0_wp_field::get(raw_); }
  /// CR4.SMEP && !CR0.WP: SMEP needs a distinct shadow page when supervisor writes are emulated.
  [[nodiscard]] constexpr bool smep_andnot_wp() const noexcept { return smep_andnot_wp_field::get(raw_); }
  /// CR4.SMAP && !CR0.WP.
  [[nodiscard]] constexpr bool smap_andnot_wp() const noexcept { return smap_andnot_wp_field::get(raw_); }
  [[nodiscard]] constexpr bool efer_nx() const noexcept { return efer_nx_field::get(raw_); }
  /// Accessed/dirty tracking is off for this page.
  [[nodiscard]] constexpr bool ad_disabled() const noexcept { return ad_disabled_field::get(raw_); }
  [[nodiscard]] constexpr bool guest_mode() const noexcept { return guest_mode_field::get(raw_); }
  /// A pass-through page standing for a guest level that does not exist (e.g. PAE PDPT).
  [[nodiscard]] constexpr bool passthrough() const noexcept { return passthrough_field::get(raw_); }
  [[nodiscard]] constexpr bool smm() const noexcept { return smm_field::get(raw_); }

  friend constexpr bool operator==(page_role, page_role) noexcept = default;

 private:
  storage_type raw_ = 0;
};

/// Properties of one shadow page that the cpu_role does not determine.
struct shadow_page_params {
  unsigned level = 1;              ///< 1-5
  bool direct = false;             ///< no guest table behind the page
  pte_access access = pte_access::paging_rights;  ///< rights accumulated above the page
  unsigned quadrant = 0;           ///< 0-3, only with 4-byte guest entries
  bool ad_disabled = false;        ///< no A/D tracking
  bool passthrough = false;        ///< stands for a guest level that does not exist
};

/// The page_role of a shadow page mirroring a guest table under `role`.
/// Preconditions: level in 1..5, quadrant in 0..3 (HVKIT_EXPECTS).
[[nodiscard]] constexpr page_role make_page_role(cpu_role role, shadow_page_params p) noexcept {
  using pr = page_role;
  HVKIT_EXPECTS(p.level >= 1 && p.level <= 5);
  HVKIT_EXPECTS(p.quadrant <= 3);
  pr::storage_type v = 0;
  v = pr::level_field::set(v, static_cast<std::uint8_t>(p.level));
  v = pr::has_4byte_gpte_field::set(v, role.has_4byte_gpte());
  v = pr::quadrant_field::set(v, static_cast<std::uint8_t>(p.quadrant));
  v = pr::direct_field::set(v, p.direct);
  v = pr::access_field::set(v, static_cast<std::uint8_t>((p.access & pte_access::paging_rights).raw()));
  v = pr::cr0_wp_field::set(v, role.cr0_wp());
  v = pr::smep_andnot_wp_field::set(v, role.smep() && !role.cr0_wp());
  v = pr::smap_andnot_wp_field::set(v, role.smap() && !role.cr0_wp());
  v = pr::efer_nx_field::set(v, role.efer_nx());
  v = pr::ad_disabled_field::set(v, p.ad_disabled);
  v = pr::guest_mode_field::set(v, role.guest_mode());
  v = pr::passthrough_field::set(v, p.passthrough);
  v = pr::smm_field::set(v, role.smm());
  return page_role{v};
}

}  // namespace hvkit::paging
