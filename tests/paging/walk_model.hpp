// SPDX-License-Identifier: MIT
// A rule model of IA-32 paging and EPT walks, written for the walker tests from the SDM
// (4.3-4.8 for guest paging, 29.3 for EPT), independently of include/paging: one SDM rule
// per branch, plain integers, no hvkit types. It is the oracle of walk_matrix_test.cpp and
// walk_random_test.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace walk_model {

using u64 = std::uint64_t;

inline bool bit(u64 v, unsigned b) { return ((v >> b) & 1u) != 0; }
inline u64 bits(u64 v, unsigned hi, unsigned lo) { return (v >> lo) & ((hi - lo == 63) ? ~u64{0} : ((u64{1} << (hi - lo + 1)) - 1)); }
inline bool any_bit_in(u64 v, unsigned hi, unsigned lo) { return hi >= lo && bits(v, hi, lo) != 0; }

// Guest-physical memory for the model: a byte vector at a base address.
struct memory {
  std::vector<std::uint8_t> bytes;
  u64 base = 0;
  bool read(u64 a, unsigned n, u64& out) const {
    if (a < base || a - base > bytes.size() || bytes.size() - (a - base) < n) return false;
    out = 0;
    for (unsigned i = 0; i < n; ++i) out |= u64{bytes[a - base + i]} << (8 * i);
    return true;
  }
  void write(u64 a, unsigned n, u64 v) {
    for (unsigned i = 0; i < n; ++i) bytes[a - base + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

enum class mode { m32, pae, l4, l5 };
enum class access { read, write, fetch };
// 0 ok; otherwise the kind of fault.
enum class kind { ok, not_present, reserved, permission, pkey, unbacked, non_canonical };

struct controls {
  bool wp = false, smep = false, smap = false, nxe = false, pke = false, pse = false, ac = false;
  unsigned cpl = 0;
  bool implicit = false;  // implicit supervisor access (descriptor tables)
  access acc = access::read;
  bool shadow_stack = false;  // a shadow-stack access (CET; acc read or write)
  std::uint32_t pkru = 0;
  unsigned maxphyaddr = 52;
  bool gbpages = true;
  bool amd = false;
  bool pse36 = true;  // CPUID.01H:EDX.PSE-36[17]
};

struct outcome {
  kind k = kind::ok;
  unsigned level = 0;
  u64 error_code = 0;
  u64 phys = 0;
  u64 page_size = 0;
  bool vector_ss = false;
  // Entries that were used (address, width) so the test can check A/D flags.
  u64 entry_addr[5] = {};
  unsigned entry_level[5] = {};
  unsigned entries = 0;
  u64 leaf_addr = 0;
};

// The model of one guest walk (SDM 4.3 32-bit, 4.4 PAE, 4.5 4/5-level; 4.6 rights; 4.7
// error code). `pdpte` holds the four PAE PDPTE registers. `mem` is a `memory`, or anything
// with its read(address, bytes, out) (the NPT model reads the guest tables through a second
// stage that way); the walk stops at the first read that fails.
template <class Mem = memory>
inline outcome guest_walk(mode m, const Mem& mem, u64 cr3, const u64* pdpte, u64 va, const controls& c) {
  outcome o;
  const bool w = c.acc == access::write, f = c.acc == access::fetch;
  const bool user_access = c.cpl == 3 && !c.implicit;
  // SDM 4.7: I/D is set only with SMEP, or with PAE/4/5-level paging and EFER.NXE.
  const bool report_fetch = f && (c.smep || (m != mode::m32 && c.nxe));
  // SDM 4.7: SS (bit 6) for a shadow-stack access, whatever the fault.
  const u64 ec_base = (w ? 2u : 0u) | (user_access ? 4u : 0u) | (report_fetch ? 16u : 0u) |
                      (c.shadow_stack ? 64u : 0u);

  // Canonical check (SDM 3.3.7.1): only with IA-32e paging.
  if (m == mode::l4 || m == mode::l5) {
    const unsigned top = m == mode::l4 ? 47 : 56;
    const u64 upper = va >> top;
    const u64 all_ones = (~u64{0}) >> top;
    if (upper != 0 && upper != all_ones) {
      o.k = kind::non_canonical;
      return o;
    }
  }
  if (m == mode::m32 || m == mode::pae) va &= 0xffffffffu;

  unsigned level = m == mode::m32 ? 2 : m == mode::pae ? 3 : m == mode::l4 ? 4 : 5;
  u64 table = 0;
  if (m == mode::m32) table = cr3 & 0xfffff000u;
  else table = cr3 & 0x000ffffffffff000ull;  // 4/5-level root; PAE uses the registers
  bool all_user = true, all_write = true, any_xd = false;
  bool write_above_leaf = true;  // R/W=1 in every entry above the current one
  u64 e = 0;
  for (;; --level) {
    u64 ea = 0;
    if (m == mode::pae && level == 3) {
      e = pdpte[bits(va, 31, 30)];
      ea = (cr3 & 0xffffffe0u) + 8 * bits(va, 31, 30);
    } else {
      const unsigned size = m == mode::m32 ? 4 : 8;
      const u64 index = m == mode::m32 ? bits(va, 12 + 10 * level - 1, 12 + 10 * (level - 1))
                                       : bits(va, 12 + 9 * level - 1, 12 + 9 * (level - 1));
      ea = table + index * size;
      if (!mem.read(ea, size, e)) {
        o.k = kind::unbacked;
        o.level = level;
        return o;
      }
      o.entry_addr[o.entries] = ea;
      o.entry_level[o.entries] = level;
      ++o.entries;
    }
    // P (SDM 4.7: P = 0 in the error code).
    if (!bit(e, 0)) {
      o.k = kind::not_present;
      o.level = level;
      o.error_code = ec_base;
      return o;
    }
    // Reserved bits, one rule each.
    bool rsvd = false;
    const bool ps = bit(e, 7);
    if (m == mode::m32) {
      // Table 4-4: a 4 MiB PDE (CR4.PSE = 1) holds PA bits M-1:32 in 20:13, M = min(MAXPHYADDR, 40);
      // bits 21:(M-19) are reserved.
      const unsigned mm = c.maxphyaddr < 40 ? c.maxphyaddr : 40;
      if (level == 2 && ps && c.pse && any_bit_in(e, 21, mm - 19)) rsvd = true;
      // Table 4-4, notes: without PSE-36 there are no high address bits (M = 32): 21:13 reserved.
      if (level == 2 && ps && c.pse && !c.pse36 && any_bit_in(e, 21, 13)) rsvd = true;
    } else if (m == mode::pae) {
      if (level < 3 && any_bit_in(e, 62, c.maxphyaddr)) rsvd = true;      // Tables 4-9..4-11
      if (level < 3 && bit(e, 63) && !c.nxe) rsvd = true;                   // XD without NXE
      if (level == 2 && ps && any_bit_in(e, 20, 13)) rsvd = true;           // 2 MiB PDE
    } else {
      if (c.maxphyaddr < 52 && any_bit_in(e, 51, c.maxphyaddr)) rsvd = true;  // Tables 4-14..4-20
      if (bit(e, 63) && !c.nxe) rsvd = true;
      if (level >= 4 && ps) rsvd = true;                                      // PS in PML4E/PML5E
      if (level >= 4 && c.amd && bit(e, 8)) rsvd = true;                      // AMD: bit 8 MBZ
      if (level == 3 && ps && !c.gbpages) rsvd = true;                        // no 1 GiB pages (XSA-176)
      if (level == 3 && ps && c.gbpages && any_bit_in(e, 29, 13)) rsvd = true;
      if (level == 2 && ps && any_bit_in(e, 20, 13)) rsvd = true;
    }
    if (rsvd) {
      o.k = kind::reserved;
      o.level = level;
      o.error_code = ec_base | 1u | 8u;
      return o;
    }
    // Rights (SDM 4.6.1): PAE PDPTEs have none.
    write_above_leaf = all_write;
    if (!(m == mode::pae && level == 3)) {
      all_user = all_user && bit(e, 2);
      all_write = all_write && bit(e, 1);
      if (m != mode::m32) any_xd = any_xd || bit(e, 63);
    }
    bool leaf = level == 1;
    if (level == 2 && ps && (m != mode::m32 || c.pse)) leaf = true;
    if (level == 3 && ps && (m == mode::l4 || m == mode::l5)) leaf = true;  // reserved without gbpages: handled
    if (leaf) {
      if (level == 1) {
        o.phys = (m == mode::m32 ? (e & 0xfffff000u) : (e & 0x000ffffffffff000ull)) | bits(va, 11, 0);
        o.page_size = 4096;
      } else if (m == mode::m32) {
        o.phys = (e & 0xffc00000u) | (bits(e, 20, 13) << 32) | bits(va, 21, 0);
        o.page_size = u64{4} << 20;
      } else if (level == 2) {
        o.phys = (bits(e, 51, 21) << 21) | bits(va, 20, 0);
        o.page_size = u64{2} << 20;
      } else {
        o.phys = (bits(e, 51, 30) << 30) | bits(va, 29, 0);
        o.page_size = u64{1} << 30;
      }
      o.leaf_addr = ea;
      break;
    }
    table = m == mode::m32 ? (e & 0xfffff000u) : (e & 0x000ffffffffff000ull);
  }
  o.level = level;

  // Permission checks (SDM 4.6.1), one rule per branch.
  const bool xd_active = m != mode::m32 && c.nxe;
  const bool can_exec = !(xd_active && any_xd);
  bool denied = false;
  // SDM 4.6.1 (CET): a shadow-stack page has R/W=1 in every entry above the leaf and R/W=0,
  // D=1 in the leaf. Shadow-stack accesses may touch only those, of their own mode; WP,
  // SMAP and AC do not matter.
  const bool ss_page = write_above_leaf && !bit(e, 1) && bit(e, 6);
  if (c.shadow_stack) {
    if (!ss_page) denied = true;
    if (user_access && !all_user) denied = true;
    if (!user_access && all_user) denied = true;
  } else if (user_access) {
    if (!all_user) denied = true;                      // user access to a supervisor-mode address
    if (w && !all_write) denied = true;                // user write to a read-only address
    if (f && !can_exec) denied = true;                 // fetch from an XD address
  } else {
    if (w && !all_write && c.wp) denied = true;        // supervisor write to read-only with WP = 1
    if (f && !can_exec) denied = true;
    if (f && all_user && c.smep) denied = true;        // SMEP
    if (!f && all_user && c.smap && (c.implicit || !c.ac)) denied = true;  // SMAP
  }
  // Protection keys (SDM 4.6.2): 4/5-level, user-mode addresses, data accesses only.
  bool pk = false;
  if ((m == mode::l4 || m == mode::l5) && c.pke && all_user && !f) {
    const unsigned key = static_cast<unsigned>(bits(e, 62, 59));
    const bool ad = bit(c.pkru, 2 * key), wd = bit(c.pkru, 2 * key + 1);
    if (ad) pk = true;
    if (w && wd && (user_access || c.wp)) pk = true;
  }
  if (denied || pk) {
    o.k = pk ? kind::pkey : kind::permission;
    o.error_code = ec_base | 1u | (pk ? 32u : 0u);
  }
  return o;
}

// ---- EPT (SDM 29.3) ----
struct ept_controls {
  bool execute_only = false, mbec = false, ad = false, page_2m = true, page_1g = true;
  unsigned maxphyaddr = 52;
  unsigned levels = 4;
  bool read = true, write = false, fetch = false, user_address = false;
  bool paging_structure = false;  // a guest paging-structure access (qualification bit 8 = 0)
  bool pdpte_load = false;        // a load of the PAE PDPTE registers (MOV to CR)
  bool linear_valid = false;      // the access has a guest-linear address
};
enum class ept_kind { ok, violation, misconfig, unbacked };
struct ept_outcome {
  ept_kind k = ept_kind::ok;
  unsigned level = 0;
  u64 qual = 0;  // bits 8:0
  u64 phys = 0;
  u64 page_size = 0;
  unsigned memtype = 0;
};

// SDM 29.3.3.1, one rule per branch, for one present entry at `level` (1 = PTE): is it an
// EPT misconfiguration? (The oracle of ept_misconfigured(); ept_walk below states the same
// rules inline, in walk order.)
inline bool ept_entry_misconfigured(u64 e, unsigned level, const ept_controls& c) {
  const bool ps = bit(e, 7);
  bool leaf = level == 1;
  if (level == 2 && ps && c.page_2m) leaf = true;
  if (level == 3 && ps && c.page_1g) leaf = true;
  if (bit(e, 1) && !bit(e, 0)) return true;  // write permission without read permission
  if (!c.execute_only && !bit(e, 0) && bit(e, 2)) return true;  // execute-only, not supported
  if (!c.execute_only && c.mbec && !bit(e, 0) && bit(e, 10)) return true;  // XU counts under MBEC
  if (c.maxphyaddr < 52 && any_bit_in(e, 51, c.maxphyaddr)) return true;
  if (!leaf && any_bit_in(e, 7, 3)) return true;  // non-leaf: 7:3 reserved (PS where no page)
  if (leaf && level == 2 && any_bit_in(e, 20, 12)) return true;
  if (leaf && level == 3 && any_bit_in(e, 29, 12)) return true;
  if (leaf) {
    const unsigned mt = static_cast<unsigned>(bits(e, 5, 3));
    if (mt == 2 || mt == 3 || mt == 7) return true;  // reserved memory types
  }
  return false;
}

// SDM 27.2.1.1, the VM-entry checks on the EPTP that concern the walk (the UC/WB capability
// bits aside): is `eptp` usable? `walk4`/`walk5`, `ad` and `sss` are IA32_VMX_EPT_VPID_CAP
// bits 6, 7, 21 and 23 (SDM A.10).
struct eptp_caps {
  bool walk4 = true, walk5 = true, ad = true, sss = false;
  unsigned maxphyaddr = 52;
};
inline bool eptp_ok(u64 eptp, const eptp_caps& c) {
  const unsigned mt = static_cast<unsigned>(bits(eptp, 2, 0));
  if (mt != 0 && mt != 6) return false;                 // UC or WB only
  const unsigned len = static_cast<unsigned>(bits(eptp, 5, 3));
  if (!((len == 3 && c.walk4) || (len == 4 && c.walk5))) return false;  // 4 or 5 levels, if supported
  if (bit(eptp, 6) && !c.ad) return false;              // A/D enable needs bit 21
  if (bit(eptp, 7) && !c.sss) return false;             // supervisor shadow-stack control needs bit 23
  if (any_bit_in(eptp, 11, 8)) return false;            // reserved
  if (any_bit_in(eptp, 63, c.maxphyaddr)) return false; // beyond MAXPHYADDR
  return true;
}

inline ept_outcome ept_walk(const memory& mem, u64 root, u64 gpa, const ept_controls& c) {
  ept_outcome o;
  bool rd = c.read, wr = c.write, fe = c.fetch;
  // SDM 29.3.3.2 and 28.2.1 (note on bits 0 and 1): with EPT A/D, an access to a guest
  // paging-structure entry is treated as a write, and its violation sets bits 0 and 1.
  if (c.paging_structure && c.ad) rd = true, wr = true;
  // SDM 29.3.3.2, 29.3.5: a load of the PDPTE registers is a read, never "not writable".
  if (c.pdpte_load) rd = true, wr = false, fe = false;
  // SDM 28.2.1: bit 7 = a guest-linear address is valid (never for a PDPTE load); bit 8 =
  // the access was the final one (not to a paging-structure entry).
  const u64 linear_bits = (c.linear_valid && !c.pdpte_load) ? (c.paging_structure ? 0x80u : 0x180u) : 0u;
  const u64 acc_bits = (rd ? 1u : 0u) | (wr ? 2u : 0u) | (fe ? 4u : 0u) | linear_bits;
  bool r_all = true, w_all = true, x_all = true, xu_all = true;
  u64 table = root & 0x000ffffffffff000ull;
  unsigned level = c.levels;
  u64 e = 0;
  for (;; --level) {
    const u64 ea = table + bits(gpa, 12 + 9 * level - 1, 12 + 9 * (level - 1)) * 8;
    if (!mem.read(ea, 8, e)) {
      o.k = ept_kind::unbacked;
      o.level = level;
      return o;
    }
    const bool present = bits(e, 2, 0) != 0 || (c.mbec && bit(e, 10));
    if (!present) {
      o.k = ept_kind::violation;
      o.level = level;
      o.qual = acc_bits;  // ANDed rights include this entry's zeros
      return o;
    }
    const bool ps = bit(e, 7);
    bool leaf = level == 1;
    if (level == 2 && ps && c.page_2m) leaf = true;
    if (level == 3 && ps && c.page_1g) leaf = true;
    bool mis = false;
    if (bit(e, 1) && !bit(e, 0)) mis = true;                                   // write-only
    if (!c.execute_only && !bit(e, 0) && (bit(e, 2) || (c.mbec && bit(e, 10)))) mis = true;  // execute-only
    if (c.maxphyaddr < 52 && any_bit_in(e, 51, c.maxphyaddr)) mis = true;
    if (!leaf && any_bit_in(e, 7, 3)) mis = true;                              // non-leaf 7:3 (PS where no page)
    if (leaf && level == 2 && any_bit_in(e, 20, 12)) mis = true;
    if (leaf && level == 3 && any_bit_in(e, 29, 12)) mis = true;
    if (leaf) {
      const unsigned mt = static_cast<unsigned>(bits(e, 5, 3));
      if (mt == 2 || mt == 3 || mt == 7) mis = true;
    }
    if (mis) {
      o.k = ept_kind::misconfig;
      o.level = level;
      return o;
    }
    r_all = r_all && bit(e, 0);
    w_all = w_all && bit(e, 1);
    x_all = x_all && bit(e, 2);
    xu_all = xu_all && bit(e, 10);
    if (leaf) {
      const u64 size = u64{1} << (12 + 9 * (level - 1));
      o.phys = (e & 0x000ffffffffff000ull & ~(size - 1)) | (gpa & (size - 1));
      o.page_size = size;
      o.memtype = static_cast<unsigned>(bits(e, 5, 3)) | (bit(e, 6) ? 8u : 0u);
      break;
    }
    table = e & 0x000ffffffffff000ull;
  }
  o.level = level;
  bool denied = false;
  if (rd && !r_all) denied = true;
  if (wr && !w_all) denied = true;
  if (fe) {
    const bool can = c.mbec ? (c.user_address ? xu_all : x_all) : x_all;
    if (!can) denied = true;
  }
  if (denied) {
    o.k = ept_kind::violation;
    o.qual = acc_bits | (r_all ? 8u : 0u) | (w_all ? 16u : 0u) | (x_all ? 32u : 0u) |
             ((c.mbec && xu_all) ? 64u : 0u);
  }
  return o;
}

}  // namespace walk_model
