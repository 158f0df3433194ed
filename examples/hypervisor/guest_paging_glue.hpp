/// @file
/// @brief STAND-IN until include/paging/'s walker lands: a 4-level (IA-32e) guest page-table
/// walk, used by the hypervisor to emulate implicit supervisor accesses (LTR's busy-bit
/// write) and to fetch instruction bytes. The access-rights decision is already hvkit's
/// (paging::mmu_context); only the table walk itself is local. Swap it for the walker.
///
/// The rule this example exists to show: the walk takes CR0 from the *live* guest
/// register (the VMCS guest CR0 field), never from a value cached at the last CR exit,
/// because a guest-owned CR0.WP changes without any exit.
#pragma once

#include <cstdint>

#include <x86/cr.hpp>
#include <x86/efer.hpp>
#include <x86/pfec.hpp>
#include <x86/rflags.hpp>

#include <paging/access.hpp>
#include <paging/mmu.hpp>

#include "layout.hpp"

namespace hv::glue {

using hvkit::x86::cr0;
using hvkit::x86::cr4;
using hvkit::x86::efer;
using hvkit::x86::pfec;

/// Guest RAM as the hypervisor sees it: EPT is an identity map, so a guest-physical address
/// inside guest memory is also the host-physical (and host-virtual) address.
inline std::uint8_t* guest_ram(std::uint64_t gpa, std::uint64_t size) {
  if (gpa < layout::guest_mem_base || size > layout::guest_mem_size ||
      gpa - layout::guest_mem_base > layout::guest_mem_size - size)
    return nullptr;
  return reinterpret_cast<std::uint8_t*>(gpa);
}

struct walk_regs {
  cr0 cr0_live;
  cr4 cr4_live;
  efer efer_live;
  std::uint64_t cr3;
  hvkit::x86::rflags rflags;
  unsigned maxphyaddr;
};

enum class walk_status : std::uint8_t { ok, page_fault, outside_ram };

struct walk_result {
  walk_status status;
  std::uint64_t gpa;  ///< translation (ok)
  pfec error;         ///< #PF error code (page_fault)
  std::uint64_t bad_gpa;  ///< paging-structure address outside guest RAM (outside_ram)
  bool role_refreshed;    ///< the passthrough refresh switched the role (CR0.WP changed)
};

/// Translates `la` for an access described by `access` (pfec::write / user / fetch /
/// implicit_access). The table walk is SDM Vol. 3A 4.5 (4-level paging) with the reserved
/// bits of 4.5.4; the access-rights decision is hvkit's: mmu_context's precomputed
/// permission table, after re-syncing CR0.WP from the live CR0 (refresh = true). With
/// refresh = false the cached role is used as it is: the KVM bug, kept for the negative
/// control run. A/D bits (4.8) are set only on a successful walk, as Bochs does.
inline walk_result walk_4level(hvkit::paging::mmu_context& mmu, const walk_regs& r, std::uint64_t la, pfec access,
                               bool refresh = true) {
  using hvkit::paging::pte_access;
  const bool nxe = r.efer_live.test(efer::nxe);
  const std::uint64_t addr_mask = ((1ull << r.maxphyaddr) - 1) & ~0xFFFull;
  const std::uint64_t rsvd_high = ~((1ull << r.maxphyaddr) - 1) & ~(1ull << 63) & 0x000FFFFFFFFFFFFFull;
  const std::uint64_t xd_rsvd = nxe ? 0 : (1ull << 63);
  const bool write = access.test(pfec::write), fetch = access.test(pfec::fetch);
  const bool user = access.test(pfec::user) && !access.test(pfec::implicit_access);
  // The error-code bits the access contributes (SDM 4.7): W, U, and I/D only with NX or SMEP.
  pfec base{};
  if (write) base = base.set(pfec::write);
  if (user) base = base.set(pfec::user);
  if (fetch && (nxe || r.cr4_live.test(cr4::smep))) base = base.set(pfec::fetch);

  std::uint64_t* used[4] = {};
  int nused = 0;
  pte_access rights = pte_access::paging_rights;
  std::uint64_t table = r.cr3 & addr_mask;
  for (int level = 4; level >= 1; --level) {
    unsigned shift = 12 + 9 * (level - 1);
    std::uint64_t gpa = table + ((la >> shift) & 0x1FF) * 8;
    auto* e = reinterpret_cast<std::uint64_t*>(guest_ram(gpa, 8));
    if (!e) return {walk_status::outside_ram, 0, pfec{}, gpa, false};
    std::uint64_t v = *e;
    if (!(v & 1)) return {walk_status::page_fault, 0, base, 0, false};
    bool large = level > 1 && (v & 0x80);
    std::uint64_t rsvd = rsvd_high | xd_rsvd;
    if (level == 4 && (v & 0x80)) rsvd |= 0x80;      // PS is reserved in a PML4E
    if (large && level == 3) rsvd |= 0x3FFFE000ull;  // 1 GiB page: bits 29:13
    if (large && level == 2) rsvd |= 0x1FE000ull;    // 2 MiB page: bits 20:13
    if (v & rsvd) return {walk_status::page_fault, 0, base.set(pfec::present).set(pfec::rsvd), 0, false};
    used[nused++] = e;
    if (!(v & 2)) rights = rights.clear(pte_access::write);
    if (!(v & 4)) rights = rights.clear(pte_access::user);
    if (nxe && (v >> 63)) rights = rights.clear(pte_access::exec);
    if (large || level == 1) {
      std::uint64_t page_mask = (1ull << shift) - 1;
      std::uint64_t out = (v & addr_mask & ~page_mask) | (la & page_mask);
      auto pkey = static_cast<std::uint8_t>((v >> 59) & 0xF);
      bool refreshed = refresh && mmu.refresh_passthrough_bits(r.cr0_live);
      // PKRU/PKRS are not enabled for this guest (CR4.PKE/PKS are host-owned and 0): 0.
      pfec denied = mmu.permission_fault(rights, pkey, access, r.rflags, 0);
      if (!denied.none()) return {walk_status::page_fault, 0, base | denied, 0, refreshed};
      for (int i = 0; i < nused; ++i) *used[i] |= 0x20;  // accessed
      if (write) *e |= 0x40;                              // dirty (leaf)
      return {walk_status::ok, out, pfec{}, 0, refreshed};
    }
    table = v & addr_mask;
  }
  return {walk_status::page_fault, 0, base, 0, false};  // not reached
}

}  // namespace hv::glue
