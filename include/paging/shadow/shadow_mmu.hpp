// SPDX-License-Identifier: MIT
/// @file
/// @brief The shadow MMU: shadow tables for a guest without EPT/NPT, built on demand from the
/// guest's own tables, with the guest #PF path, write protection of guest paging structures
/// and the context switches (MOV to CR0/CR3/CR4, EFER, PDPTE loads).
///
/// Every decision goes through the library's guest walker and permission tables: a host #PF
/// walks the guest tables (setting A/D as the processor would), and the answer follows from
/// that walk's result alone (fault_answer.hpp). The shadow tables are kept in sync with the
/// guest's tables at all times: every frame holding a mirrored guest paging structure is
/// write-protected, a write to it is emulated and reported with table_written(), which zaps
/// the shadow entries it changed. The shadow tables therefore never hold a translation the
/// guest's tables do not give, which is stricter than any TLB the SDM allows (4.10.4), so
/// INVLPG, INVPCID and MOV to CR3 need no shadow work (see invalidate.hpp).
///
/// Host format (host_mode(), host_role()): PAE paging for a guest that runs outside IA-32e
/// mode (32-bit and PAE paging: the processor walks CR3 in the format of the real CR4.PAE,
/// SDM 4.1.1), 4-level paging for a 4-level guest (and paging off), 5-level paging for a
/// 5-level guest (the host then runs the guest with CR4.LA57 = 1). A PAE-format root is a
/// PDPT (four used entries, present + address only, SDM 4.4.1); it must lie below 4 GiB
/// (CR3 bits 31:5 locate it), and the host loads its PDPTEs into the PDPTE registers when it
/// enters the guest (VMX without EPT: every VM entry, SDM 27.3.2.4) or loads CR3: every change
/// of a root PDPTE is answered with host_flush::all. A 32-bit guest's 1024-entry tables are
/// mirrored by quadrants (a page directory by the four 1 GiB host directories, a page table
/// by two 2 MiB host tables); guest large pages are mapped by 4 KiB host pages (direct
/// shadow pages).
#pragma once

#include <array>
#include <cstdint>

#include "fault_answer.hpp"
#include "frame_map.hpp"
#include "page_cache.hpp"
#include "spte.hpp"
#include "../access.hpp"
#include "../guest_memory.hpp"
#include "../mmu.hpp"
#include "../pdptr.hpp"
#include "../permission.hpp"
#include "../pkru.hpp"
#include "../pte.hpp"
#include "../role.hpp"
#include "../walk_result.hpp"
#include "../walker.hpp"
#include "../../x86/address.hpp"
#include "../../x86/paging_mode.hpp"
#include "../../x86/pfec.hpp"

namespace hvkit::paging::shadow {

/// The result of loading a guest context (role, root, PDPTEs).
struct context_answer {
  x86::hpa root{};                    ///< the host root to run the guest on (host CR3)
  host_flush flush = host_flush::none;
  bool supported = true;              ///< always true (every paging mode is shadowed; kept for callers)
};

/// A shadow MMU over the caller's page cache and frame map. Single-vCPU: the guest's tables
/// must not change between a walk and the write protection that follows (one vCPU per MMU).
template <frame_map Map>
class shadow_mmu {
 public:
  shadow_mmu(page_cache& cache, const Map& map, cpu_properties props = {}) noexcept
      : cache_(&cache), map_(&map), props_(props),
        frame_mask_(x86::physical_address_mask(props.maxphyaddr) & pte::address_bits) {}

  [[nodiscard]] constexpr cpu_role role() const noexcept { return guest_.role(); }
  /// The guest context (role, root) the walks use.
  [[nodiscard]] constexpr const mmu_context& guest_context() const noexcept { return guest_; }
  /// The host root page (host CR3 while the guest runs).
  [[nodiscard]] constexpr x86::hpa root() const noexcept { return cache_->address_of(root_); }
  [[nodiscard]] constexpr const pdpte_snapshot& pdptes() const noexcept { return pdptes_; }
  [[nodiscard]] constexpr page_cache& cache() noexcept { return *cache_; }
  /// How many times a full cache was zapped and rebuilt.
  [[nodiscard]] constexpr std::uint32_t rebuilds() const noexcept { return rebuilds_; }
  /// The guest walker for the current context.
  [[nodiscard]] constexpr const guest_walker& walker() const noexcept { return walker_; }

  /// Loads the guest context `role` with guest root `root` (x86::cr3_root()) and, for PAE,
  /// the PDPTE registers. A root cached for the same (root, role, PDPTEs) is reused as it is:
  /// switching back to a known address space or role rebuilds nothing.
  context_answer load(cpu_role role, x86::gpa root, const pdpte_snapshot& pdptes = {}) noexcept {
    const std::uint16_t before = root_;
    // A zap empties every shadow page, the root's included: the host's cached translations
    // are stale even if the new root lands in the cache page of the old one.
    bool zapped = false;
    // CR4.PSE (32-bit guests), CR4.PKE and CR4.PKS change what shadow entries mean but are
    // not in page_role: pages built under other values are thrown away (SDM 4.3, 4.6.2).
    const std::uint8_t ext = static_cast<std::uint8_t>((role.pse() ? 1u : 0u) | (role.pke() ? 2u : 0u) |
                                                       (role.pks() ? 4u : 0u));
    if (ext != ext_ && root_ != page_cache::npos) {
      cache_->zap_all();
      zapped = true;
    }
    ext_ = ext;
    const bool same_role = role == guest_.role() && root_ != page_cache::npos;
    guest_ = mmu_context(role, root);
    if (!same_role) {
      host_ = host_role(role);
      levels_ = shadow::host_levels(role);
      // Every page_role of this context, less the per-page fields (install() adds them).
      role_base_ = make_page_role(role, {.level = 1, .access = pte_access{}}).raw() & ~page_role::level_field::mask;
      static_assert(pte_access::paging_rights.raw() <= page_role::access_field::max_raw);
    }
    pdptes_ = role.mode() == x86::paging_mode::pae ? pdptes : pdpte_snapshot{};
    if (same_role) {  // a CR3 switch: only the root and PDPTEs change, not the reserved-bit masks
      walker_state ws = walker_.state();
      ws.root = root;
      ws.pdptes = pdptes_;
      walker_ = guest_walker(ws);
    } else {
      walker_ = guest_walker(guest_, props_, pdptes_);
    }
    root_ = find_or_make_root();
    if (root_ == page_cache::npos) {  // full: start over (one page always fits)
      ++rebuilds_;
      cache_->zap_all();
      zapped = true;
      root_ = find_or_make_root();
    }
    return {this->root(), root_ == before && !zapped ? host_flush::none : host_flush::all, true};
  }

  /// The answer to a host #PF at `req.linear` for the access `req.access` (with the guest's
  /// RFLAGS, PKRU and IA32_PKRS in `req`), the guest's memory being `mem`.
  template <writable_guest_memory M>
  fault_answer page_fault(M& mem, const walk_request& req) noexcept {
    fault_answer a{};
    walk_request r = req;
    r.update_ad = true;  // the access happens (resumed or emulated): A/D as the processor sets them
    const walk_result w = walker_.walk(mem, guest_, r);
    if (!w) {
      a.action = fault_action::inject;
      a.fault = w.error();
      a.root = root();
      return a;
    }
    const translation& t = w.value();
    a.gpa = t.address;
    if (req.access.test(x86::pfec::ss)) {  // shadow stacks: not expressed in host entries
      a.action = fault_action::emulate_access;
      a.root = root();
      return a;
    }
    int st = install(req, t, a);
    if (st < 0) {  // cache full: zap everything and build the path again
      ++rebuilds_;
      cache_->zap_all();
      root_ = find_or_make_root();
      a.flush = host_flush::all;
      st = install(req, t, a);
      if (st < 0) a.action = fault_action::emulate_access;  // a cache too small for one path
    }
    a.root = root();
    return a;
  }

  /// Stops mirroring guest frame `g`: every shadow page of it is zapped, so the frame is no
  /// longer write-protected (the next write fault on it maps it writable) and the guest may
  /// write it natively. For a write the emulator cannot carry out to a frame that held a guest
  /// paging structure (most often one the guest freed and reuses as data): the processor then
  /// executes the instruction itself, and a table in that frame is mirrored and protected
  /// again the next time a walk uses it. The current root is rebuilt if it was zapped.
  host_flush unprotect(x86::gfn g) noexcept {
    if (!cache_->mirrors(g)) return host_flush::none;
    cache_->zap_frame(g);
    if (root_ == page_cache::npos || !cache_->page(root_).used) {
      root_ = find_or_make_root();
      if (root_ == page_cache::npos) {  // cannot happen right after a zap; kept total
        ++rebuilds_;
        cache_->zap_all();
        root_ = find_or_make_root();
      }
    }
    return host_flush::all;
  }

  /// Write flooding. A frame stays write-protected as long as a shadow page mirrors it, also
  /// when the guest has stopped using it as a paging structure (a freed page table reused as
  /// data or a kernel stack, a new process's table being filled): every write to it is then
  /// an exit and an emulation. With a threshold n (1-255; 0, the default, turns the rule
  /// off), a frame whose shadow page has seen n writes reported by table_written() since a
  /// fix-up last went through that page (page_fault() building or checking a path through
  /// it: the guest walks that table) is unprotected (unprotect(): its shadow pages zapped), so
  /// the guest writes it natively; a table in it is mirrored and protected again by the next
  /// walk that uses it. The frame of the current root is never unprotected (the root would
  /// be rebuilt, and the frame protected again, at once). A heuristic, not an architectural
  /// rule: what the guest sees does not change (unprotect() leaves nothing that mirrors the
  /// frame), only which writes exit.
  constexpr void set_write_flood_threshold(unsigned n) noexcept { flood_threshold_ = n > 255 ? 255 : n; }
  [[nodiscard]] constexpr unsigned write_flood_threshold() const noexcept { return flood_threshold_; }
  /// How many frames write flooding unprotected.
  [[nodiscard]] constexpr std::uint64_t flood_unprotects() const noexcept { return flood_unprotects_; }

  /// Reports `bytes` bytes written by the guest (an emulated write) at `a`: every shadow
  /// entry that mirrors a guest entry in that range is zapped (rebuilt from the new guest
  /// entry on the next fault). With write flooding on, the write counts towards it (a flooded
  /// frame is unprotected; the current root may then be rebuilt: run the guest on root()).
  /// Returns the host TLB work.
  host_flush table_written(x86::gpa a, unsigned bytes) noexcept {
    if (bytes == 0) return host_flush::none;
    host_flush f = host_flush::none;
    const std::uint64_t first = a.value(), last = a.value() + bytes - 1;
    for (std::uint64_t g = first >> 12; g <= last >> 12; ++g) {
      const std::uint64_t lo = g == first >> 12 ? first & 0xfffu : 0;
      const std::uint64_t hi = g == last >> 12 ? last & 0xfffu : 0xfffu;
      cache_->for_each_page_of(x86::gfn{g}, [&](std::uint16_t p) {
        const page_role pr = cache_->page(p).role;
        if (pr.direct()) return;
        const unsigned esz = pr.has_4byte_gpte() ? 4u : 8u;
        for (std::uint64_t gi = lo / esz; gi <= hi / esz; ++gi) {
          if (pr.has_4byte_gpte()) {
            if (pr.level() == 2) {
              if (gi / 256 != pr.quadrant()) continue;
              f = merge(f, zap_entry(p, static_cast<unsigned>(2 * (gi % 256))));
              f = merge(f, zap_entry(p, static_cast<unsigned>(2 * (gi % 256) + 1)));
            } else {
              if (gi / 512 != pr.quadrant()) continue;
              f = merge(f, zap_entry(p, static_cast<unsigned>(gi % 512)));
            }
          } else {
            f = merge(f, zap_entry(p, static_cast<unsigned>(gi)));
          }
        }
      });
      if (flood_threshold_ != 0 && flooded(x86::gfn{g})) {
        ++flood_unprotects_;
        f = merge(f, unprotect(x86::gfn{g}));
      }
    }
    return f;
  }

 private:
  /// Rights of one guest entry (exec, write, user), XD only with EFER.NXE.
  [[nodiscard]] constexpr pte_access entry_rights(std::uint64_t e) const noexcept {
    const bool x = !guest_.role().efer_nx() || !(e & pte::xd.raw());
    return pte_access{static_cast<std::uint8_t>((e & 6u) | (x ? 1u : 0u))};
  }
  [[nodiscard]] constexpr std::uint64_t entry_frame(std::uint64_t e) const noexcept {
    if (guest_.role().has_4byte_gpte()) return (e & 0xffff'f000u) >> 12;
    return (e & frame_mask_) >> 12;
  }

  /// What the shadow page under a host entry must be for translation `t`.
  struct child_desc {
    x86::gfn gfn{};
    page_role role{};
    bool hashed = true;
  };

  /// The page_role of this context with the per-page fields: make_page_role() from the
  /// cached base, the fields ORed in place (each value fits its field by construction:
  /// level 1-5, quadrant 0-3, access masked to three bits).
  [[nodiscard]] constexpr page_role derive(unsigned level, pte_access acc, bool direct = false, unsigned quadrant = 0,
                                           bool passthrough = false) const noexcept {
    using pr = page_role;
    const auto a = static_cast<pr::storage_type>((acc & pte_access::paging_rights).raw());
    return page_role{role_base_ | (static_cast<pr::storage_type>(level) << pr::level_field::offset) |
                     (static_cast<pr::storage_type>(quadrant) << pr::quadrant_field::offset) |
                     (static_cast<pr::storage_type>(direct) << pr::direct_field::offset) |
                     (a << pr::access_field::offset) |
                     (static_cast<pr::storage_type>(passthrough) << pr::passthrough_field::offset)};
  }

  [[nodiscard]] constexpr child_desc root_desc() const noexcept {
    const cpu_role r = guest_.role();
    const x86::gfn g = x86::gpa_to_gfn(guest_.root());
    switch (r.mode()) {
      case x86::paging_mode::four_level:
      case x86::paging_mode::five_level:
        return {g, derive(levels_, pte_access::paging_rights), true};
      case x86::paging_mode::pae:
      case x86::paging_mode::two_level:  // a PAE-format host PDPT, built from the PDPTE registers / quadrants
        return {g, derive(3, pte_access::paging_rights, false, 0, true), false};
      default:
        return {x86::gfn{0}, derive(4, pte_access::paging_rights, true), false};
    }
  }

  /// The root page for the current context (cached, hashed, or new); npos if the cache is full.
  std::uint16_t find_or_make_root() noexcept {
    const std::array<std::uint64_t, 4> key = pdptes_.entries;
    const cpu_role r = guest_.role();
    std::uint16_t p = cache_->find_root(guest_.root().value(), r, key);
    if (p != page_cache::npos) return p;
    const child_desc d = root_desc();
    p = d.hashed ? cache_->lookup(d.gfn, d.role) : page_cache::npos;
    if (p == page_cache::npos) {
      p = cache_->allocate(d.gfn, d.role, d.hashed);
      if (p == page_cache::npos) return p;
      if (d.hashed) write_protect(d.gfn);
    }
    cache_->remember_root(guest_.root().value(), r, key, p);
    return p;
  }

  /// Clears R/W in every shadow leaf that maps frame `g` (it now holds a mirrored table).
  host_flush write_protect(x86::gfn g) noexcept {
    const auto h = map_->host_frame(g);
    if (!h) return host_flush::none;
    const std::uint64_t target = h.value().value();
    bool any = false;
    for (std::uint16_t p = 0; p < cache_->capacity(); ++p) {
      if (!cache_->page(p).used || cache_->page(p).role.level() != 1) continue;
      std::uint64_t* t = cache_->table(p);
      for (unsigned i = 0; i < table_entries; ++i) {
        const std::uint64_t e = t[i];
        if ((e & pte::present.raw()) && (e & pte::writable.raw()) && (e & pte::address_bits) == target) {
          t[i] = e & ~pte::writable.raw();
          any = true;
        }
      }
    }
    return any ? host_flush::all : host_flush::none;
  }

  /// Write flooding: one more write to every page mirroring a table in frame `g`; true if
  /// one of them reached the threshold and none is the current root.
  bool flooded(x86::gfn g) noexcept {
    bool reached = false, root = false;
    cache_->for_each_page_of(g, [&](std::uint16_t p) {
      if (cache_->page(p).role.direct()) return;
      root = root || p == root_;
      reached = cache_->note_write(p) >= flood_threshold_ || reached;
    });
    return reached && !root;
  }

  host_flush zap_entry(std::uint16_t p, unsigned idx) noexcept {
    std::uint64_t& e = cache_->table(p)[idx];
    if (!(e & pte::present.raw())) return host_flush::none;
    if (cache_->page(p).role.level() > 1) {
      const std::uint16_t c = cache_->child_of(e);
      e = 0;
      if (c != page_cache::npos && !cache_->page(c).hashed) cache_->release(c);
    } else {
      e = 0;
    }
    return host_flush::all;
  }

  /// Builds the shadow path for `t` and writes the leaf. 0 done (answer in `a`), -1 cache full.
  int install(const walk_request& req, const translation& t, fault_answer& a) noexcept {
    // Outside IA-32e mode linear addresses are 32 bits (SDM 4.3, 4.4).
    const std::uint64_t va = req.linear.value() & (guest_.role().lma() ? ~std::uint64_t{0} : 0xffff'ffffu);
    const x86::paging_mode m = guest_.role().mode();
    const bool pae_host = levels_ == 3;
    const unsigned gt = t.path.top;
    const unsigned gl = gt - t.path.count + 1u;  // guest leaf level
    // The rights of the guest entries above the next shadow page, ANDed as the descent goes
    // (SDM 4.6.1); `used` entries of t.path are in `acc`. PAE PDPTEs carry no rights.
    pte_access acc = pte_access::paging_rights;
    unsigned used = 0;
    std::uint16_t p = root_;
    for (unsigned hl = levels_; hl >= 2; --hl) {
      cache_->note_use(p);  // write flooding: the guest walks this table
      const unsigned idx = static_cast<unsigned>((va >> (12 + 9 * (hl - 1))) & 511u);
      const unsigned cl = hl - 1;  // level of the child page
      child_desc d;
      if (m == x86::paging_mode::none || cl < gl) {
        // Paging off, or below a guest large page: a direct page over the frames it maps.
        const std::uint64_t base = t.address.value() & ~((std::uint64_t{1} << (12 + 9 * cl)) - 1);
        const pte_access da = m == x86::paging_mode::none ? pte_access::paging_rights : t.rights;
        d = {x86::gfn{base >> 12}, derive(cl, da, true), false};
      } else {
        for (; used < gt - cl; ++used)
          if (!(m == x86::paging_mode::pae && gt - used == 3)) acc = acc & entry_rights(t.path.values[used]);
        const x86::gfn g = cl == gt ? x86::gpa_to_gfn(guest_.root()) : x86::gfn{entry_frame(t.path.values[gt - cl - 1])};
        unsigned quadrant = 0;
        if (guest_.role().has_4byte_gpte())
          quadrant = cl == 2 ? static_cast<unsigned>((va >> 30) & 3u) : static_cast<unsigned>((va >> 21) & 1u);
        d = {g, derive(cl, acc, false, quadrant), true};
      }
      std::uint64_t& e = cache_->table(p)[idx];
      std::uint16_t c = cache_->child_of(e);
      if (c == page_cache::npos || !(cache_->page(c).gfn == d.gfn) || !(cache_->page(c).role == d.role)) {
        if (c != page_cache::npos) {
          if (!cache_->page(c).hashed) cache_->release(c);
          e = 0;
          a.flush = host_flush::all;
        }
        c = d.hashed ? cache_->lookup(d.gfn, d.role) : page_cache::npos;
        if (c == page_cache::npos) {
          c = cache_->allocate(d.gfn, d.role, d.hashed);
          if (c == page_cache::npos) return -1;
          if (d.hashed && !d.role.direct()) a.flush = merge(a.flush, write_protect(d.gfn));
        }
        if (pae_host && hl == 3) {  // a root PDPTE: the host must load it again (see the file comment)
          cache_->table(p)[idx] = make_root_pdpte(cache_->address_of(c));
          a.flush = host_flush::all;
        } else {
          cache_->table(p)[idx] = make_nonleaf(cache_->address_of(c));
        }
      }
      p = c;
    }
    cache_->note_use(p);
    // The leaf (SDM 4.6.1 folding, spte.hpp).
    const cpu_role r = guest_.role();
    const x86::gfn g = x86::gpa_to_gfn(t.address);
    const auto h = map_->host_frame(g);
    if (!h) {
      a.action = fault_action::emulate_mmio;
      return 0;
    }
    const bool write = req.access.test(x86::pfec::write);
    const bool dirty = write || r.mode() == x86::paging_mode::none || (t.path.values[t.path.count - 1u] & pte::dirty.raw());
    const bool supervisor_write = write && !req.access.test(x86::pfec::user);
    const pte_access g_rights = t.rights & pte_access::paging_rights;
    const fold_variant v = variant_for(r, g_rights, supervisor_write);
    const bool protect = cache_->mirrors(g);
    std::uint64_t& e = cache_->table(p)[static_cast<unsigned>((va >> 12) & 511u)];
    const std::uint64_t old = e;
    if (v == fold_variant::supervisor_write && !supervisor_write_variant_ok(r)) {
      a.action = protect ? fault_action::emulate_protected : fault_action::emulate_access;
      return 0;
    }
    const pte_access hr = fold_rights(r, g_rights, dirty, v, protect);
    e = make_leaf(h.value(), hr, t.memory_type, t.pkey);
    if ((old & pte::present.raw()) && old != e) a.flush = merge(a.flush, host_flush::address);
    // The host now checks the access on the entry as written, with host_role(); if it still
    // faults, the access cannot be expressed (write protection, or a key's WD under CR0.WP =
    // 0): emulate it.
    const pte_access written = leaf_rights(e);
    const std::uint32_t pkr = pk_register_for(written, req.pkru, req.pkrs);
    const x86::pfec hf = permission_fault(host_, written, t.pkey, req.access, req.rflags, pkr);
    if (hf.none()) {
      a.action = fault_action::fixed;
    } else {
      a.action = protect && write ? fault_action::emulate_protected : fault_action::emulate_access;
    }
    return 0;
  }

  page_cache* cache_;
  const Map* map_;
  cpu_properties props_;
  std::uint64_t frame_mask_;          ///< address bits of a guest entry under MAXPHYADDR
  mmu_context guest_{};
  pdpte_snapshot pdptes_{};
  guest_walker walker_{};
  std::uint16_t root_ = page_cache::npos;
  std::uint32_t rebuilds_ = 0;
  unsigned flood_threshold_ = 0;      ///< write flooding: writes before a frame is unprotected (0 off)
  std::uint64_t flood_unprotects_ = 0;
  std::uint8_t ext_ = 0;
  cpu_role host_{};                   ///< host_role(guest role)
  unsigned levels_ = 4;               ///< host_levels(guest role)
  page_role::storage_type role_base_ = 0;
};

}  // namespace hvkit::paging::shadow
