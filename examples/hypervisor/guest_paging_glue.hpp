/// @file
/// @brief STAND-IN until include/paging/ lands: a 4-level (IA-32e) guest page walk with the
/// SDM permission rules, used by the hypervisor to emulate implicit supervisor accesses
/// (LTR's busy-bit write) and to fetch instruction bytes. Swap for hvkit::paging's walker.
///
/// The rule this example exists to show: the walk takes CR0 from the *live* guest
/// register (the VMCS guest CR0 field), never from a value cached at the last CR exit,
/// because a guest-owned CR0.WP changes without any exit.
#pragma once

#include <cstdint>

#include <x86/cr.hpp>
#include <x86/efer.hpp>
#include <x86/pfec.hpp>

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
  bool rflags_ac;
  unsigned maxphyaddr;
};

enum class walk_status : std::uint8_t { ok, page_fault, outside_ram };

struct walk_result {
  walk_status status;
  std::uint64_t gpa;  ///< translation (ok)
  pfec error;         ///< #PF error code (page_fault)
  std::uint64_t bad_gpa;  ///< paging-structure address outside guest RAM (outside_ram)
};

/// Translates `la` for an access described by `access` (pfec::write / user / fetch /
/// implicit_access). SDM Vol. 3A 4.5 (4-level paging), 4.6 (access rights), 4.7 (#PF error
/// code), 4.8 (A/D bits: set only on a successful walk, as Bochs does; the SDM allows it).
inline walk_result walk_4level(const walk_regs& r, std::uint64_t la, pfec access) {
  const bool nxe = r.efer_live.test(efer::nxe);
  const std::uint64_t addr_mask = ((1ull << r.maxphyaddr) - 1) & ~0xFFFull;
  const std::uint64_t rsvd_high = ~((1ull << r.maxphyaddr) - 1) & ~(1ull << 63) & 0x000FFFFFFFFFFFFFull;
  const std::uint64_t xd_rsvd = nxe ? 0 : (1ull << 63);
  const bool write = access.test(pfec::write), fetch = access.test(pfec::fetch);
  const bool user = access.test(pfec::user) && !access.test(pfec::implicit_access);

  std::uint64_t* used[4] = {};
  int nused = 0;
  bool rw = true, us = true, xd = false;
  std::uint64_t table = r.cr3 & addr_mask;
  std::uint64_t out = 0;
  for (int level = 4; level >= 1; --level) {
    unsigned shift = 12 + 9 * (level - 1);
    std::uint64_t gpa = table + ((la >> shift) & 0x1FF) * 8;
    auto* e = reinterpret_cast<std::uint64_t*>(guest_ram(gpa, 8));
    if (!e) return {walk_status::outside_ram, 0, pfec{}, gpa};
    std::uint64_t v = *e;
    pfec base = access.hardware_bits();
    if (user) base = base.set(pfec::user);
    else base = base.clear(pfec::user);
    // I/D is reported only with NX or SMEP enabled (SDM 4.7).
    if (!(fetch && (nxe || r.cr4_live.test(cr4::smep)))) base = base.clear(pfec::fetch);
    if (!(v & 1)) return {walk_status::page_fault, 0, base, 0};
    bool large = level > 1 && (v & 0x80);
    std::uint64_t rsvd = rsvd_high | xd_rsvd;
    if (level == 4 && (v & 0x80)) rsvd |= 0x80;  // PS is reserved in a PML4E
    if (large && level == 3) rsvd |= 0x3FFFE000ull;  // 1 GiB page: bits 29:13
    if (large && level == 2) rsvd |= 0x1FE000ull;    // 2 MiB page: bits 20:13
    if (v & rsvd) return {walk_status::page_fault, 0, base.set(pfec::present).set(pfec::rsvd), 0};
    used[nused++] = e;
    rw = rw && (v & 2);
    us = us && (v & 4);
    xd = xd || (nxe && (v >> 63));
    if (large || level == 1) {
      std::uint64_t page_mask = (1ull << shift) - 1;
      out = (v & addr_mask & ~page_mask) | (la & page_mask);
      // Access rights (SDM 4.6.1).
      bool denied = false;
      if (user) {
        denied = !us || (write && !rw) || (fetch && xd);
      } else {
        if (write && !rw && r.cr0_live.test(cr0::wp)) denied = true;
        if (fetch && xd) denied = true;
        if (fetch && us && r.cr4_live.test(cr4::smep)) denied = true;
        if (!fetch && us && r.cr4_live.test(cr4::smap) &&
            (access.test(pfec::implicit_access) || !r.rflags_ac))
          denied = true;
      }
      if (denied) return {walk_status::page_fault, 0, base.set(pfec::present), 0};
      for (int i = 0; i < nused; ++i) *used[i] |= 0x20;  // accessed
      if (write) *e |= 0x40;                              // dirty (leaf)
      return {walk_status::ok, out, pfec{}, 0};
    }
    table = v & addr_mask;
  }
  return {walk_status::ok, out, pfec{}, 0};
}

}  // namespace hv::glue
