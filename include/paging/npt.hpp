// SPDX-License-Identifier: MIT
/// @file
/// @brief AMD nested paging (NPT) as the second stage of a nested walk: the nested page
/// tables rooted at nCR3, in the host's paging format, with the nested-paging rules
/// (AMD APM Vol. 2, 15.25).
///
/// The nested tables have the format of the host's paging mode at VMRUN (APM 15.25.3 and
/// 15.25.5; the host's CR4 and EFER are not switched by VMRUN): 4- or 5-level (long mode; 5 levels with host CR4.LA57), PAE, or 32-bit legacy
/// paging, so `npt_walker<HostFormat>` reuses the entry formats of walker.hpp
/// (format::ia32e<4>, ia32e<5>, pae, ia32) and basic_walker's table walk. What differs from a
/// linear-address walk:
///  - every nested access is a *user* access (APM 15.25.5): the nested entries need U/S=1,
///    R/W=1 for a write whatever the host's CR0.WP (hCR0.WP is ignored under nested
///    paging), and SMEP, SMAP and protection keys never apply (they concern supervisor
///    accesses or host linear addresses);
///  - accesses to the *guest's* page tables (reads of guest entries and the guest's A/D
///    updates) are treated as user *writes* (APM 15.25.5): they need R/W=1 and set D in the
///    nested leaf; the final guest-physical access keeps its class (read, write, fetch);
///  - XD (bit 63) is honoured under the host's EFER.NXE and is a reserved bit without it;
///    reserved bits are the host format's (MAXPHYADDR, PS where no large page exists, the
///    AMD PML4E bit-8 rule if cpu_properties says so);
///  - with a PAE host the nested PDPTEs are not held in PDPTE registers (those are loaded by
///    a MOV to CR3, and nCR3 is no CR3 of the host): the nested walk reads the PDPTE it needs
///    from memory (nCR3 bits 31:5) on every walk, and a reserved bit in it (2:1, 8:5,
///    63:MAXPHYADDR) is an #NPF with RSV, not a #GP (Bochs' nested walk does the same);
///  - A is set in every nested entry used and D in the leaf of a write (guest table accesses
///    included), by compare-exchange, after every check passed.
/// A fault is a #NPF (walk_stage::npt): `error_code` holds the #PF-format bits of EXITINFO1
/// (P, RW, US = 1, RSV, ID; APM 15.25.6) and `qualification` bit 8 tells the final
/// guest-physical access (EXITINFO1 bit 32) from a guest page-table access (bit 33);
/// svm/npf.hpp builds EXITINFO1/EXITINFO2 from it.
///
/// Verbs: walk() = checked with A/D updates, check() = checked without them, translate() =
/// no rights and no A/D (the table walk only). The nested walker's stage interface
/// (walk_checked, needs_ad, ad_bits, the upper cache) is the one of identity_stage (ept_walker
/// has a table cache of its own instead of the upper cache).
#pragma once

#include <cstdint>

#include "access.hpp"
#include "ept_walker.hpp"
#include "guest_memory.hpp"
#include "pdptr.hpp"
#include "pte.hpp"
#include "reserved.hpp"
#include "walk_result.hpp"
#include "walker.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/efer.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/pfec.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// The host's paging controls at VMRUN that shape the nested walk besides its format:
/// EFER.NXE (XD honoured, else bit 63 reserved) and CR4.PSE (legacy 32-bit
/// host: 4 MiB nested pages). Nothing else of the host's state matters: CR0.WP, SMEP, SMAP
/// and PKE do not apply to nested accesses (all are user accesses, APM 15.25.5).
struct npt_host {
  bool nxe = false;  ///< host EFER.NXE
  bool pse = false;  ///< host CR4.PSE (32-bit legacy host only)
};

/// The host controls of `npt_host` from the host's CR4 and EFER.
[[nodiscard]] constexpr npt_host make_npt_host(x86::cr4 cr4, x86::efer efer) noexcept {
  return npt_host{efer.test(x86::efer::nxe), cr4.test(x86::cr4::pse)};
}

/// The NPT second stage for a host in paging format `HostFormat` (format::ia32e<4>,
/// format::ia32e<5>, format::pae or format::ia32), rooted at nCR3 (VMCB offset 0B0h).
template <class HostFormat>
class npt_walker {
 public:
  using format_type = HostFormat;

  constexpr npt_walker() noexcept = default;
  /// A walker for nCR3 `ncr3` (its root bits as the host's CR3 would give them: bits 31:12
  /// for 32-bit, 31:5 for PAE, MAXPHYADDR-1:12 for long mode), the host controls and the
  /// processor's properties (MAXPHYADDR, 1 GiB pages, the AMD PML4E bit-8 rule, PSE-36).
  /// nCR3 is host-physical (APM 15.25.4: "the nested page table base address" in system
  /// physical memory): an x86::hpa, never a gpa or a plain integer (write
  /// `x86::hpa{vmcb_ncr3}` for the VMCB field's value).
  constexpr npt_walker(x86::hpa ncr3, npt_host host, cpu_properties props) noexcept {
    s_.mode = HostFormat::mode;
    s_.root = x86::cr3_root(x86::cr3{ncr3.value()}, HostFormat::mode, props.maxphyaddr);
    s_.nx = host.nxe && HostFormat::mode != x86::paging_mode::two_level;
    s_.fetch_bit = s_.nx || props.npf_fetch_id_without_nxe;
    s_.rsvd = reserved_bits(HostFormat::mode, reserved_params{props.maxphyaddr, s_.nx, host.pse, props.gbpages,
                                                               props.amd_nonleaf_bit8, props.pse36});
    pdpte_rsvd_ = pae_pdpte_reserved(props.maxphyaddr);
  }

  /// The nested tables' root: a host (system) physical address, like an EPT root (APM 15.25.4).
  [[nodiscard]] constexpr x86::hpa root() const noexcept { return x86::hpa{s_.root.value()}; }
  [[nodiscard]] constexpr bool nx() const noexcept { return s_.nx; }

  /// The access the nested permission check sees, as #PF error-code bits (APM 15.25.5):
  /// always US; a guest page-table access (or PDPTE load) is a write and never a fetch; a
  /// final access keeps its class.
  [[nodiscard]] static constexpr x86::pfec effective_access(const ept_request& req) noexcept {
    if (req.origin != ept_origin::final_access) return x86::pfec::user | x86::pfec::write;
    if (req.access.test(ept_access::fetch)) return x86::pfec::user | x86::pfec::fetch;
    if (req.access.test(ept_access::write)) return x86::pfec::user | x86::pfec::write;
    return x86::pfec::user;
  }

  // ---- the verbs ----

  /// Translates `req.address`: the nested walk, the permission check, then A/D updates of
  /// the nested entries (with writable memory and `req.update_ad`).
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result walk(M& mem, const ept_request& req) const noexcept {
    host_translation t{};
    walk_fault f{};
    std::uint64_t all = 0;
    if (!walk_checked(mem, req, t, f, all)) return unexpected(f);
    if constexpr (writable_guest_memory<M>) {
      if (req.update_ad && needs_ad(req, all)) return update_slow(mem, req);
    }
    return t;
  }

  /// The nested walk and the permission check, without A/D updates.
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result check(const M& mem, const ept_request& req) const noexcept {
    host_translation t{};
    walk_fault f{};
    std::uint64_t all = 0;
    if (!walk_checked(mem, req, t, f, all)) return unexpected(f);
    return t;
  }

  /// The translation of `address` without permission checks or A/D updates (not-present,
  /// reserved-bit and unbacked entries are still reported, as final-access faults).
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result translate(const M& mem, x86::gpa address) const noexcept {
    host_translation t{};
    walk_fault f{};
    std::uint64_t all = 0;
    ept_request req{};
    req.address = address;
    if (!walk_tables(mem, address, t, f, all)) {
      finish_fault(f, req);
      return unexpected(f);
    }
    return t;
  }

  // ---- the stage interface of nested_walker ----

  /// The stage nested_walker names in its own faults (an unbacked guest table).
  static constexpr walk_stage fault_stage = walk_stage::npt;

  /// Guest page-table accesses are writes to the nested tables (APM 15.25.5): they were
  /// checked for R/W already, and their nested leaf gets D.
  [[nodiscard]] static constexpr bool ad_enabled() noexcept { return true; }
  /// A on every nested entry, D on the leaf of a write.
  [[nodiscard]] static constexpr std::uint64_t ad_bits(bool leaf, bool dirty) noexcept {
    return pte::accessed.raw() | (leaf && dirty ? pte::dirty.raw() : 0);
  }
  /// As above for entry `i` of `path`: a PAE host's PDPTE has no A flag (bits 8:5 are
  /// reserved), so it gets nothing.
  [[nodiscard]] static constexpr std::uint64_t ad_bits(const host_walk_path& path, unsigned i, bool dirty) noexcept {
    if constexpr (HostFormat::pdpte_registers) {
      if (i == 0 && path.top == 3) return 0;
    }
    return ad_bits(i + 1 == path.count, dirty);
  }

  /// check() into caller-provided objects; `all` gets the AND of the nested entries read
  /// from memory with the leaf's D flag in bit 0 (see needs_ad()).
  template <guest_memory M>
  constexpr bool walk_checked(const M& mem, const ept_request& req, host_translation& t, walk_fault& f,
                              std::uint64_t& all) const noexcept {
    const std::uint64_t out = walk_checked_at(mem, req, req.address.value(), t, f, all);
    if (out == failed) [[unlikely]] return false;
    t.address = x86::hpa{out};
    return true;
  }
  /// What walk_checked_at() returns for an access that faults (an output address is below
  /// 2^52, never all ones).
  static constexpr std::uint64_t failed = ~std::uint64_t{0};
  /// walk_checked() of `ga` (the value of `req.address`, passed on its own), returning the
  /// output address (or `failed`) instead of writing `t.address`: whether the compiler
  /// inlines it or not, the address to translate and the translated one travel in
  /// registers, not through the request and the translation in memory (a nested walk's
  /// guest table reads chain one such access to the next).
  template <guest_memory M>
  constexpr std::uint64_t walk_checked_at(const M& mem, const ept_request& req, std::uint64_t ga, host_translation& t,
                                          walk_fault& f, std::uint64_t& all) const noexcept {
    if (!ept_request_consistent(req)) [[unlikely]] {  // the same request rules as EPT
      f.kind = fault_kind::invalid_request;
      f.stage = walk_stage::npt;
      f.guest_physical = req.address;
      return failed;
    }
    const std::uint64_t out = walk_tables_at(mem, x86::gpa{ga}, t, f, all);
    if (out == failed) [[unlikely]] {
      finish_fault(f, req);
      return failed;
    }
    const x86::pfec acc = effective_access(req);
    const std::uint64_t need = needed_rights(acc);
    if ((t.rights.raw() & need) != need) [[unlikely]] {
      permission_report(t, need, f);
      finish_fault(f, req);
      return failed;
    }
    return out;
  }

  /// True if the access must set A or D in a nested entry (`all` from walk_checked()).
  [[nodiscard]] static constexpr bool needs_ad(const ept_request& req, std::uint64_t all) noexcept {
    const std::uint64_t want = pte::accessed.raw() | (effective_access(req).test(x86::pfec::write) ? 1u : 0u);
    return (all & want) != want;
  }

  /// The per-walk cache of a nested walk's guest page-table accesses (long-mode hosts): the
  /// nested page table of the last 2 MiB region a guest table access walked to a PTE, with
  /// the AND and OR of the nested entries above it, as ept_walker::table_cache does for EPT.
  /// A hit reads only the PTE. Why the decision is walk_checked()'s: every guest table access
  /// is the same access (a user write, APM 15.25.5), which needs P, no reserved bit, and U and
  /// W in every entry; the cached entries passed those tests earlier in the same nested walk,
  /// so what remains is the PTE's P, its reserved bits and the AND of U/W (the PTE with the
  /// cached AND). A concurrently changed upper entry is not seen, as a processor's nested
  /// paging-structure caches need not see it until the next TLB flush (APM 15.16, 15.25.10).
  /// Without the cache (PAE and 32-bit hosts) every nested access walks from nCR3.
  struct upper_cache {
    std::uint64_t tag = ~std::uint64_t{0};  ///< guest-physical address >> 21 of the cached region; ~0: empty
    std::uint64_t pt = 0;                   ///< the nested page table of that region
    std::uint64_t upper = 0;                ///< AND of the nested entries above the PTE
    std::uint64_t any = 0;                  ///< OR of them (XD)
    std::uint64_t first = 0;                ///< address of the top-level entry
    std::uint64_t vals[max_levels];         ///< the entries above the PTE (meaningful once `tag` is set)
  };

  /// A guest page-table access of a nested walk (ept_origin::paging_structure, read) through
  /// `c`: true with `address` = where the guest entry is in the memory object; false if it
  /// faults (the report is recomputed by the caller with check()).
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_checked_cached(const M& mem, const ept_request& req, upper_cache& c,
                                                            host_translation& t, walk_fault& f, x86::gpa& address,
                                                            std::uint64_t& all) const noexcept {
    if constexpr (detail::has_ia32e<HostFormat>) {
      const std::uint64_t ga = req.address.value();
      if ((ga >> 21) == c.tag) [[likely]] {
        std::uint64_t e = 0;
        if (!detail::read_entry(mem, x86::gpa{c.pt + ((ga >> 12) & 511u) * 8u}, e)) [[unlikely]] return false;
        const std::uint64_t w = c.upper & e;
        // P; no reserved bit of a PTE; U and W (bits 2, 1) in every entry used.
        if (!(e & pte::present.raw()) || (e & s_.rsvd.table[1]) || (w & 6u) != 6u) [[unlikely]] return false;
        address = x86::gpa{(e & HostFormat::address_mask) | (ga & 0xfffu)};
        all = (w & ~std::uint64_t{1}) | ((e >> 6) & 1u);  // bit 0: the leaf's D flag
        return true;
      }
      const std::uint64_t out = walk_checked_at(mem, req, ga, t, f, all);
      if (out == failed) [[unlikely]] return false;
      t.address = x86::hpa{out};
      address = x86::gpa{out};  // where the memory object holds it
      fill(c, t, ga);
      return true;
    } else {
      const std::uint64_t out = walk_checked_at(mem, req, req.address.value(), t, f, all);
      if (out == failed) return false;
      t.address = x86::hpa{out};
      address = x86::gpa{out};
      return true;
    }
  }
  /// walk_checked() of the final guest-physical access through `c` (see upper_cache): on a
  /// hit only the PTE is read and `t` is filled as walk_tables() fills it; on failure nothing
  /// is reported (the caller recomputes the report with check()).
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_checked_final(const M& mem, const ept_request& req, const upper_cache& c,
                                                           host_translation& t, walk_fault& f,
                                                           std::uint64_t& all) const noexcept {
    if constexpr (detail::has_ia32e<HostFormat>) {
      const std::uint64_t ga = req.address.value();
      if ((ga >> 21) != c.tag) return walk_checked(mem, req, t, f, all);
      std::uint64_t e = 0;
      if (!detail::read_entry(mem, x86::gpa{c.pt + ((ga >> 12) & 511u) * 8u}, e)) [[unlikely]] return false;
      if (!(e & pte::present.raw()) || (e & s_.rsvd.table[1])) [[unlikely]] return false;
      const std::uint64_t w_all = c.upper & e;
      const std::uint64_t exec = s_.nx ? (~(c.any | e) >> 63) : 1u;
      const std::uint64_t ss = (c.upper >> 1) & (~e >> 1) & (e >> 6) & 1u;  // as walk_tables()
      const std::uint64_t rights = (w_all & 6u) | exec | (ss << 5);
      const std::uint64_t need = needed_rights(effective_access(req));
      if ((rights & need) != need) [[unlikely]] return false;
      constexpr unsigned n = HostFormat::levels - 1;
      for (unsigned i = 0; i < n; ++i) t.path.values[i] = c.vals[i];
      t.path.values[n] = e;
      for (unsigned i = n + 1; i < max_levels; ++i) t.path.values[i] = 0;  // every member is written
      t.path.start(ga, HostFormat::index_bits, HostFormat::entry_bytes);
      t.path.first = c.first;
      t.path.top = static_cast<std::uint8_t>(HostFormat::levels);
      t.path.count = static_cast<std::uint8_t>(HostFormat::levels);
      t.address = x86::hpa{(e & HostFormat::address_mask) | (ga & 0xfffu)};
      t.page_shift = 12;
      t.rights = pte_access{static_cast<std::uint8_t>(rights)};
      t.pkey = pte{e}.pkey();
      t.memory_type = static_cast<std::uint8_t>((((e >> 7) & 1u) << 2) | ((e >> 3) & 3u));  // PAT, PCD, PWT
      all = (w_all & ~std::uint64_t{1}) | ((e >> 6) & 1u);
      return true;
    } else {
      return walk_checked(mem, req, t, f, all);
    }
  }

  /// The nested table walk only: fills `t` (address, size, rights, path) or `f`
  /// (not_present / reserved_bit / unbacked with level and entry; error_code P/RSV only).
  template <guest_memory M>
  constexpr bool walk_tables(const M& mem, x86::gpa address, host_translation& t, walk_fault& f,
                             std::uint64_t& all) const noexcept {
    const std::uint64_t out = walk_tables_at(mem, address, t, f, all);
    if (out == failed) return false;
    t.address = x86::hpa{out};
    return true;
  }
  /// As above, returning the output address (or `failed`) instead of writing `t.address`.
  template <guest_memory M>
  constexpr std::uint64_t walk_tables_at(const M& mem, x86::gpa address, host_translation& t, walk_fault& f,
                                         std::uint64_t& all) const noexcept {
    detail::direct_tables<const M> tables(&mem);
    const x86::gva in{address.value()};
    if constexpr (HostFormat::pdpte_registers) {
      // PAE host: the PDPTE is read from memory on every nested walk (no PDPTE registers).
      const unsigned i = static_cast<unsigned>((address.value() >> 30) & 3u);
      const x86::gpa at{s_.root.value() + 8u * i};
      const auto v = mem.read64(at);
      if (!v) {
        f.kind = fault_kind::unbacked;
        f.level = 3;
        f.set_entry_address(x86::hpa{at.value()});  // the nested page tables are host-physical
        return failed;
      }
      if ((*v & pte::present.raw()) && (*v & pdpte_rsvd_)) {
        t.path.start(address.value() & 0xffff'ffffu, HostFormat::index_bits, HostFormat::entry_bytes);
        t.path.push(x86::hpa{at.value()}, *v, 3);
        f.kind = fault_kind::reserved_bit;
        f.level = 3;
        f.set_entry_address(x86::hpa{at.value()});
        f.entry_value = *v;
        f.error_code = x86::pfec::present | x86::pfec::rsvd;
        return failed;
      }
      walker_state s = s_;
      s.pdptes.entries[i] = *v;
      s.pdptes.pdpt = s_.root;
      s.pdptes.loaded = true;  // this walk's PDPTE, just read and checked
      std::uint64_t out = 0;
      return basic_walker<HostFormat>(s).walk_tables(tables, in, t, f, all, out) ? out : failed;
    } else {
      std::uint64_t out = 0;
      return basic_walker<HostFormat>(s_).walk_tables(tables, in, t, f, all, out) ? out : failed;
    }
  }

 private:
  /// Refills `c` from a walk of `ga` that ended at a PTE (else empties it).
  static constexpr void fill(upper_cache& c, const host_translation& t, std::uint64_t ga) noexcept {
    constexpr unsigned n = HostFormat::levels - 1;
    if (t.page_shift != 12) {
      c.tag = ~std::uint64_t{0};
      return;
    }
    std::uint64_t upper = ~std::uint64_t{0}, any = 0;
    for (unsigned i = 0; i < n; ++i) {
      c.vals[i] = t.path.values[i];
      upper &= t.path.values[i];
      any |= t.path.values[i];
    }
    c.tag = ga >> 21;
    c.pt = t.path.values[n - 1] & HostFormat::address_mask;
    c.upper = upper;
    c.any = any;
    c.first = t.path.first;
  }

  /// The rights an access needs: U always; W for a write; X for a fetch (pte_access::exec
  /// is already set at every level without NX).
  [[nodiscard]] static constexpr std::uint64_t needed_rights(x86::pfec acc) noexcept {
    std::uint64_t need = pte_access::user.raw();
    if (acc.test(x86::pfec::write)) need |= pte_access::write.raw();
    if (acc.test(x86::pfec::fetch)) need |= pte_access::exec.raw();
    return need;
  }

  /// The entry blamed for a permission fault: the first from the top that lacks a needed
  /// right (a PAE PDPTE has none to lack), as basic_walker reports guest faults.
  constexpr void permission_report(const host_translation& t, std::uint64_t need, walk_fault& f) const noexcept {
    f.kind = fault_kind::permission;
    host_walked_entry blame = t.path.back();
    for (unsigned i = 0; i < t.path.count; ++i) {
      const host_walked_entry w = t.path[i];
      if (HostFormat::pdpte_registers && w.level == 3) continue;
      const std::uint64_t x = s_.nx ? (~w.value >> 63) & 1u : 1u;
      const std::uint64_t r = (w.value & 6u) | x;
      if ((r & need) != need) {
        blame = w;
        break;
      }
    }
    f.level = blame.level;
    f.leaf_level = static_cast<std::uint8_t>(t.path.top - t.path.count + 1u);
    f.set_entry_address(blame.address);
    f.entry_value = blame.value;
    f.error_code = x86::pfec::present;
  }

  /// Completes a fault as an #NPF report: stage, the faulting guest-physical address, the
  /// access bits of the error code (APM 15.25.6: RW and US as the nested check saw the
  /// access, ID for a final fetch when the host has NX, as #PF reports I/D, or whatever the
  /// host's NXE with cpu_properties::npf_fetch_id_without_nxe), the phase in
  /// qualification bit 8 (final access) and bit 7 (a linear address is known).
  constexpr void finish_fault(walk_fault& f, const ept_request& req) const noexcept {
    const x86::pfec acc = effective_access(req);
    f.stage = walk_stage::npt;
    f.vector = x86::vector::pf;
    f.guest_physical = req.address;
    f.linear = req.linear_valid ? req.linear : x86::gva{};
    x86::pfec ec = f.kind == fault_kind::unbacked ? x86::pfec{} : f.error_code;
    ec = ec | (acc & (x86::pfec::user | x86::pfec::write));
    if (s_.fetch_bit && acc.test(x86::pfec::fetch)) ec = ec | x86::pfec::fetch;
    f.error_code = ec.hardware_bits();
    ept_qualification q{};
    if (req.linear_valid && req.origin != ept_origin::pdpte_load) q = q | ept_qualification::linear_valid;
    if (req.origin == ept_origin::final_access) q = q | ept_qualification::final_translation;
    f.qualification = q;
  }

  template <writable_guest_memory M>
  [[gnu::noinline]] constexpr host_walk_result update_slow(M& mem, const ept_request& req) const noexcept {
    const bool write = effective_access(req).test(x86::pfec::write);
    detail::direct_tables<M> tables(&mem);
    for (unsigned attempt = 0;; ++attempt) {
      host_translation t{};
      walk_fault f{};
      std::uint64_t all = 0;
      if (!walk_checked(mem, req, t, f, all)) return unexpected(f);
      if (!needs_ad(req, all)) return t;
      if (attempt >= max_ad_retries) {
        f.kind = fault_kind::retry_exhausted;
        finish_fault(f, req);
        return unexpected(f);
      }
      // basic_walker's update: A everywhere, D on the leaf, the PAE PDPTE left alone,
      // 4-byte entries for a 32-bit host.
      const int u = basic_walker<HostFormat>(s_).update_accessed_dirty(tables, t, write, f);
      if (u > 0) return t;
      if (u < 0) {
        finish_fault(f, req);
        return unexpected(f);
      }
    }
  }

  walker_state s_{};
  std::uint64_t pdpte_rsvd_ = 0;
};

/// Why no NPT walker can be built for the host's state.
enum class npt_host_error : std::uint8_t {
  none = 0,
  /// Host CR0.PG = 0: hvkit refuses (nested tables "in the host's paging format" need a
  /// host paging mode, APM 15.25.3).
  host_paging_off,
  /// The host's paging mode (CR0/CR4/EFER) is not the walker's format (e.g. an
  /// npt_walker_4level for a host with CR4.LA57, whose nested tables have five levels).
  format_mismatch,
};

/// The format of the nested tables for the host's CR0, CR4 and EFER at VMRUN (APM 15.25.3:
/// the host's paging mode; VMRUN does not switch CR4 and EFER): 32-bit, PAE, 4-level or
/// 5-level; host_paging_off without paging.
[[nodiscard]] constexpr result<x86::paging_mode, npt_host_error> npt_host_mode(x86::cr0 cr0, x86::cr4 cr4,
                                                                              x86::efer efer) noexcept {
  const x86::paging_mode m = x86::paging_mode_of(cr0, cr4, efer);
  if (m == x86::paging_mode::none) return unexpected(npt_host_error::host_paging_off);
  return m;
}

/// The checked construction of an npt_walker<HostFormat> from the host's registers: fails
/// with format_mismatch unless the host's paging mode is HostFormat's (a 4-level walker for a
/// 5-level host cannot be built this way); the host controls come from the same CR4/EFER.
template <class HostFormat>
[[nodiscard]] constexpr result<npt_walker<HostFormat>, npt_host_error> make_npt_walker(
    x86::hpa ncr3, x86::cr0 cr0, x86::cr4 cr4, x86::efer efer, cpu_properties props) noexcept {
  const auto m = npt_host_mode(cr0, cr4, efer);
  if (!m) return unexpected(m.error());
  if (*m != HostFormat::mode) return unexpected(npt_host_error::format_mismatch);
  return npt_walker<HostFormat>(ncr3, make_npt_host(cr4, efer), props);
}

/// Runtime selection of the host format: calls `f` with the npt_walker of the host's paging
/// mode (static dispatch, one switch; `f` is instantiated for each of the four formats) and
/// returns its result, or host_paging_off. `f` must return the same type R for every format.
template <class F>
[[nodiscard]] constexpr auto with_npt_walker(x86::hpa ncr3, x86::cr0 cr0, x86::cr4 cr4, x86::efer efer,
                                             cpu_properties props, F&& f) noexcept
    -> result<decltype(f(npt_walker<format::ia32e<4>>{})), npt_host_error> {
  const auto m = npt_host_mode(cr0, cr4, efer);
  if (!m) return unexpected(m.error());
  const npt_host host = make_npt_host(cr4, efer);
  switch (*m) {
    case x86::paging_mode::two_level: return f(npt_walker<format::ia32>(ncr3, host, props));
    case x86::paging_mode::pae: return f(npt_walker<format::pae>(ncr3, host, props));
    case x86::paging_mode::four_level: return f(npt_walker<format::ia32e<4>>(ncr3, host, props));
    case x86::paging_mode::five_level: return f(npt_walker<format::ia32e<5>>(ncr3, host, props));
    case x86::paging_mode::none: break;
  }
  return unexpected(npt_host_error::host_paging_off);
}

using npt_walker_32bit = npt_walker<format::ia32>;      ///< 32-bit legacy host
using npt_walker_pae = npt_walker<format::pae>;         ///< PAE host
using npt_walker_4level = npt_walker<format::ia32e<4>>; ///< long-mode host, 4-level
using npt_walker_5level = npt_walker<format::ia32e<5>>; ///< long-mode host with CR4.LA57

}  // namespace hvkit::paging
