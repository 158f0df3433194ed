// SPDX-License-Identifier: MIT
// A rule model of AMD nested paging (NPT) and of a nested walk over it, written for the
// tests from the AMD APM Vol. 2 independently of include/paging/npt.hpp: plain integers, no
// hvkit types, one rule per branch. The host-format table walk is typed here again from
// APM 5.3-5.4 (legacy 32-bit, PAE, long mode 4- and 5-level entry formats); the nested
// rules from 15.25.5 (every nested access is a user access; guest page-table accesses are
// user writes; hCR0.WP ignored) and 15.25.6 (the #NPF EXITINFO1 bits and EXITINFO2). The
// guest's own walk is walk_model::guest_walk (tests/paging/walk_model.hpp, from the SDM),
// reading its tables through the NPT model.
//
// Choices the APM does not spell out, shared with hvkit and listed here so that the test
// says what it assumes: guest-physical address bits above what the host format indexes are
// ignored (bits 63:32 for legacy and PAE hosts, 63:48 / 63:57 for long mode); ID is reported
// for a final fetch only with host EFER.NXE in a PAE or long-mode host (as #PF reports I/D);
// a nested walk that faults anywhere writes no A/D flag, guest or nested.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "walk_model.hpp"

namespace npt_model {

using walk_model::any_bit_in;
using walk_model::bit;
using walk_model::bits;
using walk_model::u64;

enum class host_mode { legacy, pae, long4, long5 };

// The host's state at VMRUN that matters, and the processor's properties.
struct host {
  host_mode m = host_mode::long4;
  bool nxe = false;      // host EFER.NXE
  bool pse = false;      // host CR4.PSE (legacy only)
  unsigned maxphyaddr = 48;
  bool gbpages = true;   // 1 GiB pages
  bool amd_bit8 = true;  // PML4E/PML5E bit 8 must be zero
  bool id_without_nxe = false;  // 15.25.6 taken literally: ID for a final fetch whatever NXE
  bool pse36 = true;     // 4 MiB pages take PA bits 39:32 from PDE bits 20:13
};

// Host memory, with reads that fail outside it.
struct memory {
  std::vector<std::uint8_t> bytes;
  bool read(u64 a, unsigned n, u64& out) const {
    if (a >= bytes.size() || bytes.size() - a < n) return false;
    out = 0;
    for (unsigned i = 0; i < n; ++i) out |= u64{bytes[a + i]} << (8 * i);
    return true;
  }
  void write(u64 a, unsigned n, u64 v) {
    for (unsigned i = 0; i < n; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

enum class result { ok, npf, unbacked };

struct entry_ref {
  u64 addr = 0;
  unsigned size = 8;
  u64 value = 0;
  bool leaf = false;
  bool has_a = true;  // false for a PAE PDPTE (bits 8:5 reserved: no A flag)
};

struct npt_outcome {
  result r = result::ok;
  u64 info1 = 0;  // EXITINFO1 bits 4:0
  unsigned level = 0;
  u64 phys = 0;
  u64 page_size = 0;
  std::vector<entry_ref> entries;
};

// One nested translation of `gpa`. `table_access`: an access to a guest page-table entry
// (APM 15.25.5: a user write whatever the guest does); otherwise the final access with
// `write` / `fetch` as the guest made it.
inline npt_outcome npt_walk(const memory& mem, const host& h, u64 ncr3, u64 gpa, bool table_access, bool write,
                            bool fetch) {
  npt_outcome o;
  const bool w = table_access || write;       // 15.25.5: guest table walks are writes
  const bool f = !table_access && fetch;      // ... and never code reads
  const bool legacy = h.m == host_mode::legacy;
  // 15.25.6: RW and US (always: a user access) as the nested check sees the access; ID as
  // #PF reports it (needs NXE, which only exists with PAE-format entries).
  // (With id_without_nxe: for every final fetch, the APM's description of bit 4.)
  const u64 ec_base = (w ? 2u : 0u) | 4u | ((f && ((h.nxe && !legacy) || h.id_without_nxe)) ? 16u : 0u);
  const unsigned top_bit = legacy || h.m == host_mode::pae ? 31 : h.m == host_mode::long4 ? 47 : 56;
  const u64 in = gpa & ((u64{2} << top_bit) - 1);
  unsigned level = legacy ? 2 : h.m == host_mode::pae ? 3 : h.m == host_mode::long4 ? 4 : 5;
  u64 table = legacy ? (ncr3 & 0xfffff000u) : (ncr3 & 0x000ffffffffff000ull & ((u64{1} << h.maxphyaddr) - 1));
  bool all_user = true, all_write = true, any_nx = false;
  u64 e = 0;
  for (;; --level) {
    u64 ea = 0;
    unsigned size = legacy ? 4 : 8;
    if (h.m == host_mode::pae && level == 3) {
      ea = (ncr3 & 0xffffffe0u) + 8 * bits(in, 31, 30);  // the PDPTE, read from memory now
    } else if (legacy) {
      ea = table + 4 * bits(in, 12 + 10 * level - 1, 12 + 10 * (level - 1));
    } else {
      ea = table + 8 * bits(in, 12 + 9 * level - 1, 12 + 9 * (level - 1));
    }
    if (!mem.read(ea, size, e)) {
      o.r = result::unbacked;
      o.level = level;
      return o;
    }
    entry_ref ref{ea, size, e, false, !(h.m == host_mode::pae && level == 3)};
    o.entries.push_back(ref);
    if (!bit(e, 0)) {
      o.r = result::npf;
      o.level = level;
      o.info1 = ec_base;  // P = 0
      return o;
    }
    const bool ps = bit(e, 7);
    bool leaf = level == 1;
    bool rsvd = false;
    if (legacy) {
      // APM 5.3 (legacy, CR4.PSE): a 4 MiB PDE; PA bits 39:32 in PDE 20:13 (PSE-36), bit 21
      // reserved, and the PA bits at or above MAXPHYADDR reserved.
      if (level == 2 && ps && h.pse) {
        leaf = true;
        const unsigned mm = !h.pse36 ? 32 : h.maxphyaddr < 40 ? h.maxphyaddr : 40;
        if (any_bit_in(e, 21, mm - 19)) rsvd = true;
      }
    } else if (h.m == host_mode::pae) {
      if (level == 3) {
        // The PAE PDPTE: bits 2:1, 8:5, 63:MAXPHYADDR reserved.
        if (any_bit_in(e, 2, 1) || any_bit_in(e, 8, 5) || any_bit_in(e, 63, h.maxphyaddr)) rsvd = true;
      } else {
        if (any_bit_in(e, 62, h.maxphyaddr)) rsvd = true;
        if (bit(e, 63) && !h.nxe) rsvd = true;
        if (level == 2 && ps) {
          leaf = true;
          if (any_bit_in(e, 20, 13)) rsvd = true;
        }
      }
    } else {
      if (h.maxphyaddr < 52 && any_bit_in(e, 51, h.maxphyaddr)) rsvd = true;
      if (bit(e, 63) && !h.nxe) rsvd = true;
      if (level >= 4 && ps) rsvd = true;
      if (level >= 4 && h.amd_bit8 && bit(e, 8)) rsvd = true;
      if (level == 3 && ps) {
        if (!h.gbpages) rsvd = true;
        else {
          leaf = true;
          if (any_bit_in(e, 29, 13)) rsvd = true;
        }
      }
      if (level == 2 && ps) {
        leaf = true;
        if (any_bit_in(e, 20, 13)) rsvd = true;
      }
    }
    if (rsvd) {
      o.r = result::npf;
      o.level = level;
      o.info1 = ec_base | 1u | 8u;
      return o;
    }
    if (!(h.m == host_mode::pae && level == 3)) {
      all_user = all_user && bit(e, 2);
      all_write = all_write && bit(e, 1);
      if (!legacy) any_nx = any_nx || bit(e, 63);
    }
    if (leaf) {
      o.entries.back().leaf = true;
      if (level == 1) {
        o.phys = (legacy ? (e & 0xfffff000u) : (e & 0x000ffffffffff000ull)) | bits(in, 11, 0);
        o.page_size = 4096;
      } else if (legacy) {
        o.phys = (e & 0xffc00000u) | (bits(e, 20, 13) << 32) | bits(in, 21, 0);
        o.page_size = u64{4} << 20;
      } else if (level == 2) {
        o.phys = (bits(e, 51, 21) << 21) | bits(in, 20, 0);
        o.page_size = u64{2} << 20;
      } else {
        o.phys = (bits(e, 51, 30) << 30) | bits(in, 29, 0);
        o.page_size = u64{1} << 30;
      }
      break;
    }
    table = legacy ? (e & 0xfffff000u) : (e & 0x000ffffffffff000ull);
  }
  o.level = level;
  // 15.25.5: a user access. hCR0.WP, SMEP, SMAP and keys do not enter.
  bool denied = false;
  if (!all_user) denied = true;
  if (w && !all_write) denied = true;
  if (f && h.nxe && !legacy && any_nx) denied = true;
  if (denied) {
    o.r = result::npf;
    o.info1 = ec_base | 1u;
  }
  return o;
}

// The guest's view of memory for walk_model::guest_walk: each read of a guest table entry
// is a nested translation (a table access) and then a host read. The first failure is kept.
struct nested_memory {
  const memory* host_mem = nullptr;
  const host* h = nullptr;
  u64 ncr3 = 0;
  mutable bool failed = false;
  mutable npt_outcome fault;
  mutable u64 fault_gpa = 0;
  mutable bool host_unbacked = false;
  mutable std::vector<npt_outcome> walks;  // the successful nested translations of the reads
  mutable std::map<u64, u64> host_of;      // guest entry gpa -> host address

  bool read(u64 gpa, unsigned n, u64& out) const {
    npt_outcome t = npt_walk(*host_mem, *h, ncr3, gpa, true, false, false);
    if (t.r != result::ok) {
      failed = true;
      fault = t;
      fault_gpa = gpa;
      return false;
    }
    if (!host_mem->read(t.phys, n, out)) {
      failed = true;
      host_unbacked = true;
      fault_gpa = gpa;
      return false;
    }
    host_of[gpa] = t.phys;
    walks.push_back(t);
    return true;
  }
};

enum class nested_kind { ok, guest_fault, npf, unbacked };

struct nested_outcome {
  nested_kind k = nested_kind::ok;
  walk_model::outcome guest;  // the guest walk (its fault for guest_fault)
  u64 info1 = 0;              // #NPF EXITINFO1 (bits 32/33 included)
  u64 info2 = 0;              // #NPF EXITINFO2
  u64 l2 = 0, l1 = 0;         // translations
  std::map<u64, std::pair<unsigned, u64>> writes;  // host address -> (size, bits to OR in)
};

inline void want(nested_outcome& n, u64 addr, unsigned size, u64 bits_to_set) {
  auto& w = n.writes[addr];
  w.first = size;
  w.second |= bits_to_set;
}

// The nested walk of `va` by a guest in mode `gm` (cr3, PAE PDPTE registers, controls) over
// the NPT at `ncr3`. APM 15.25.6: a fault of the nested walk of a guest table entry reports
// bit 33 and that entry's gpa; of the final access, bit 32 and the final gpa; guest faults
// come after the nested translations of the entries the guest read and before the final one.
inline nested_outcome nested_walk(const memory& mem, const host& h, u64 ncr3, walk_model::mode gm, u64 gcr3,
                                  const u64* pdpte, u64 va, const walk_model::controls& c) {
  nested_outcome n;
  nested_memory nm;
  nm.host_mem = &mem;
  nm.h = &h;
  nm.ncr3 = ncr3;
  n.guest = walk_model::guest_walk(gm, nm, gcr3, pdpte, va, c);
  if (nm.failed) {
    if (nm.host_unbacked || nm.fault.r == result::unbacked) {
      n.k = nested_kind::unbacked;
    } else {
      n.k = nested_kind::npf;
      n.info1 = nm.fault.info1 | (u64{1} << 33);
      n.info2 = nm.fault_gpa;
    }
    return n;
  }
  if (n.guest.k != walk_model::kind::ok) {
    n.k = nested_kind::guest_fault;
    return n;
  }
  n.l2 = n.guest.phys;
  const bool w = c.acc == walk_model::access::write, f = c.acc == walk_model::access::fetch;
  const npt_outcome fin = npt_walk(mem, h, ncr3, n.l2, false, w, f);
  if (fin.r == result::unbacked) {
    n.k = nested_kind::unbacked;
    return n;
  }
  if (fin.r == result::npf) {
    n.k = nested_kind::npf;
    n.info1 = fin.info1 | (u64{1} << 32);
    n.info2 = n.l2;
    return n;
  }
  n.l1 = fin.phys;
  // A/D (APM 5.4.2 for each walk; 15.25.5: the nested walks of guest table entries are
  // writes, so their nested leaf gets D): guest entries A, the guest leaf D on a write.
  const unsigned gsize = gm == walk_model::mode::m32 ? 4 : 8;
  for (unsigned i = 0; i < n.guest.entries; ++i) {
    const u64 ga = n.guest.entry_addr[i];
    const bool leaf = ga == n.guest.leaf_addr;
    want(n, nm.host_of.at(ga), gsize, 0x20u | ((leaf && w) ? 0x40u : 0u));
  }
  for (const auto& t : nm.walks)
    for (const auto& e : t.entries)
      if (e.has_a) want(n, e.addr, e.size, 0x20u | (e.leaf ? 0x40u : 0u));
  for (const auto& e : fin.entries)
    if (e.has_a) want(n, e.addr, e.size, 0x20u | ((e.leaf && w) ? 0x40u : 0u));
  return n;
}

}  // namespace npt_model
