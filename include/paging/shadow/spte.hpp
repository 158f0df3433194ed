// SPDX-License-Identifier: MIT
/// @file
/// @brief Shadow entries from guest entries: the host role a shadow MMU runs the guest under,
/// the rights folding that makes the host's hardware check give the guest's verdict, and the
/// host entries (8-byte: 4-level, 5-level or PAE format) built from them.
///
/// The host walks the shadow tables with CR0.WP = 1, EFER.NXE = 1 and the guest's CR4.SMEP,
/// CR4.SMAP, CR4.PKE and CR4.PKS (host_role()); the guest runs at its own CPL with its own
/// RFLAGS.AC, PKRU and IA32_PKRS. The folding rules, each from SDM 4.6.1 / 4.6.2:
/// - exec: XD in the host leaf exactly when the guest's accumulated rights forbid fetches
///   (with the guest's EFER.NXE; without it every page is executable, SDM 4.6.1).
/// - user: the guest's U/S (user-mode accesses need a user-mode address; SMEP and SMAP look
///   at the same bit, so with U/S copied they give the guest's verdict).
/// - write, CR0.WP = 1: the guest's R/W. Host and guest then apply the same rules.
/// - write, CR0.WP = 0: "supervisor-mode ... data may be written to any linear address with a
///   valid translation" (SDM 4.6.1), which the host (WP = 1) cannot express for a page that
///   is also a user-mode address. A supervisor-mode address gets R/W = 1 (only supervisor
///   accesses reach it). A user-mode, read-only address gets one of two host entries: the
///   `normal` one (R/W = 0, U/S = 1: user accesses exact, a supervisor write faults to the
///   shadow MMU) or, after a supervisor write, the `supervisor_write` one (R/W = 1, U/S = 0:
///   supervisor reads and writes exact, every user access faults to the shadow MMU, and XD
///   set under CR4.SMEP, because a supervisor-mode address escapes SMEP's fetch check). The
///   second entry is not exact under CR4.SMAP (the host no longer sees a user-mode address, so
///   AC = 0 supervisor accesses would pass) or CR4.PKE (the host would apply IA32_PKRS
///   instead of PKRU): there the supervisor write is emulated instead.
/// - dirty: a leaf whose guest D flag is clear is mapped without R/W, so that the first write
///   faults to the shadow MMU, which sets D as the processor would (SDM 4.8); the accessed
///   flag needs nothing here: a host entry only exists after a guest walk set A.
/// - a frame that holds a guest paging structure the shadow MMU mirrors is mapped without
///   R/W (write protection; the write is emulated).
/// Every rule is checked exhaustively in tests/paging/shadow_fold_test.cpp against the
/// walker, with the host entry checked by permission_fault() under host_role().
#pragma once

#include <cstdint>

#include "../access.hpp"
#include "../pte.hpp"
#include "../role.hpp"
#include "../../x86/address.hpp"
#include "../../x86/cr.hpp"
#include "../../x86/efer.hpp"
#include "../../x86/paging_mode.hpp"

namespace hvkit::paging::shadow {

/// The paging format of the host's shadow tables for a guest under `guest`. Outside IA-32e
/// mode the processor walks CR3 in the format CR4.PAE selects (SDM 4.1.1), so a guest that
/// runs outside it (32-bit or PAE paging) is shadowed in the PAE format, the guest seeing its
/// own CR4.PAE through the hypervisor (VMX: the CR4 read shadow; SVM: CR4 reads intercepted);
/// a 4-level guest (and paging off) in the 4-level format, a 5-level guest in the 5-level one
/// (its 57-bit linear addresses need a PML5; SDM 4.5.1).
[[nodiscard]] constexpr x86::paging_mode host_mode(cpu_role guest) noexcept {
  switch (guest.mode()) {
    case x86::paging_mode::two_level:
    case x86::paging_mode::pae: return x86::paging_mode::pae;
    case x86::paging_mode::five_level: return x86::paging_mode::five_level;
    case x86::paging_mode::none:
    case x86::paging_mode::four_level: break;
  }
  return x86::paging_mode::four_level;
}
/// Levels of the host's shadow tables (host_mode()): 3 for PAE (the root a PDPT of 4 used
/// entries), 4, 5.
[[nodiscard]] constexpr unsigned host_levels(cpu_role guest) noexcept {
  switch (host_mode(guest)) {
    case x86::paging_mode::pae: return 3;
    case x86::paging_mode::five_level: return 5;
    default: return 4;
  }
}
/// Entries per shadow table.
inline constexpr unsigned table_entries = 512;

/// The role the host processor checks shadow entries with: the format of host_mode() (PAE:
/// CR4.PAE, EFER.LME = LMA = 0; 4-level: EFER.LMA; 5-level: CR4.LA57 too), CR0.WP = 1,
/// EFER.NXE = 1, and the guest's SMEP, SMAP, PKE and PKS (what the hypervisor loads into the
/// real CR4 while the guest runs). PKE/PKS only when the guest has them (4- and 5-level guests).
[[nodiscard]] constexpr cpu_role host_role(cpu_role guest) noexcept {
  using c0 = x86::cr0;
  using c4 = x86::cr4;
  x86::cr4 cr4 = c4::pae;
  if (guest.smep()) cr4 = cr4 | c4::smep;
  if (guest.smap()) cr4 = cr4 | c4::smap;
  if (guest.pke()) cr4 = cr4 | c4::pke;
  if (guest.pks()) cr4 = cr4 | c4::pks;
  const x86::paging_mode m = host_mode(guest);
  if (m == x86::paging_mode::five_level) cr4 = cr4 | c4::la57;
  const x86::efer efer = m == x86::paging_mode::pae ? x86::efer::nxe : x86::efer::lme | x86::efer::lma | x86::efer::nxe;
  return make_cpu_role(c0::pe | c0::pg | c0::wp, cr4, efer, guest.smm(), guest.guest_mode());
}

/// Which of the two host entries of a CR0.WP = 0 user-mode read-only page (see the file comment).
enum class fold_variant : std::uint8_t {
  normal,            ///< R/W = 0, U/S = 1: exact for user accesses
  supervisor_write,  ///< R/W = 1, U/S = 0 (XD under SMEP): exact for supervisor accesses
};

/// True if the `supervisor_write` entry is exact for `guest` (no SMAP, no PKE; see the file
/// comment). Otherwise a CR0.WP = 0 supervisor write to a read-only user page is emulated.
[[nodiscard]] constexpr bool supervisor_write_variant_ok(cpu_role guest) noexcept {
  return !guest.smap() && !guest.pke();
}

/// The variant a faulting access asks for: `supervisor_write` for a supervisor-mode write to a
/// read-only user-mode address under CR0.WP = 0, `normal` otherwise.
[[nodiscard]] constexpr fold_variant variant_for(cpu_role guest, pte_access rights, bool supervisor_write) noexcept {
  const bool ro_user = rights.test(pte_access::user) && !rights.test(pte_access::write);
  return supervisor_write && ro_user && !guest.cr0_wp() ? fold_variant::supervisor_write : fold_variant::normal;
}

/// The host rights (pte_access exec, write, user) of the shadow leaf for a guest translation
/// with accumulated rights `g` (exec already reflects the guest's EFER.NXE, as the walker
/// reports it) and leaf D flag `dirty`; `write_protected`: the frame holds a mirrored guest
/// paging structure.
[[nodiscard]] constexpr pte_access fold_rights(cpu_role guest, pte_access g, bool dirty, fold_variant v,
                                               bool write_protected) noexcept {
  const bool user = g.test(pte_access::user);
  bool w = g.test(pte_access::write);
  bool u = user;
  bool x = g.test(pte_access::exec);
  if (!guest.cr0_wp()) {
    if (!user) {
      w = true;  // SDM 4.6.1: WP = 0, supervisor writes go anywhere; only supervisor accesses reach it
    } else if (!w && v == fold_variant::supervisor_write) {
      w = true;
      u = false;
      x = x && !guest.smep();  // SMEP forbids supervisor fetches from the (guest) user-mode address
    }
  }
  w = w && dirty && !write_protected;  // SDM 4.8: the first write must set D; protected tables
  pte_access r{};
  if (x) r = r | pte_access::exec;
  if (w) r = r | pte_access::write;
  if (u) r = r | pte_access::user;
  return r;
}

/// Bits of every non-leaf shadow entry: present, writable, user, accessed (the leaf carries
/// all the rights, so upper entries grant everything; SDM 4.6.1 ANDs over the levels).
inline constexpr std::uint64_t nonleaf_bits =
    (pte::present | pte::writable | pte::user | pte::accessed).raw();

/// A non-leaf shadow entry referencing the shadow table at `table`.
[[nodiscard]] constexpr std::uint64_t make_nonleaf(x86::hpa table) noexcept {
  return (table.value() & pte::address_bits) | nonleaf_bits;
}

/// A PDPTE of a PAE-format shadow root referencing the shadow page directory at `table`:
/// present and the address only. In a PDPTE bits 2:1 (R/W, U/S) and 8:5 (A among them) are
/// reserved (SDM 4.4.1, Table 4-8: a load with one of them set is #GP, a VM entry that loads
/// it fails), and a PDPTE carries no rights (the PDE and PTE do).
[[nodiscard]] constexpr std::uint64_t make_root_pdpte(x86::hpa table) noexcept {
  return (table.value() & pte::address_bits) | pte::present.raw();
}

/// A 4 KiB shadow leaf mapping `frame` with host rights `r`, the guest leaf's memory type
/// index `memory_type` (PAT*4 + PCD*2 + PWT, as translation::memory_type) and protection key.
/// A and D are preset (the host never needs to set them: the guest's flags are tracked by
/// faults, see fold_rights()).
[[nodiscard]] constexpr std::uint64_t make_leaf(x86::hpa frame, pte_access r, std::uint8_t memory_type,
                                                std::uint8_t pkey) noexcept {
  std::uint64_t e = (frame.value() & pte::address_bits) | (pte::present | pte::accessed | pte::dirty).raw();
  if (r.test(pte_access::write)) e |= pte::writable.raw();
  if (r.test(pte_access::user)) e |= pte::user.raw();
  if (!r.test(pte_access::exec)) e |= pte::xd.raw();
  e |= std::uint64_t{memory_type & 3u} << 3;          // PWT, PCD
  e |= std::uint64_t{(memory_type >> 2) & 1u} << 7;   // PAT of a 4 KiB PTE
  return pte{e}.with_pkey(pkey).raw();
}

/// The host rights a leaf built by make_leaf() carries (exec, write, user).
[[nodiscard]] constexpr pte_access leaf_rights(std::uint64_t e) noexcept {
  pte_access r{};
  if (!(e & pte::xd.raw())) r = r | pte_access::exec;
  if (e & pte::writable.raw()) r = r | pte_access::write;
  if (e & pte::user.raw()) r = r | pte_access::user;
  return r;
}

}  // namespace hvkit::paging::shadow
