// SPDX-License-Identifier: MIT
/// @file
/// @brief The shadow-page cache: fixed-capacity storage owned by the caller, shadow pages
/// keyed by (guest frame, page_role), lookup, allocation and zapping, and the root cache
/// keyed by (guest CR3 root, cpu_role).
///
/// Two shadow pages are interchangeable exactly when their guest frame and page_role are
/// equal (role.hpp): the role carries everything the guest walk below that table depends on
/// (level, CR0.WP, SMEP/SMAP without WP, NX, 4-byte entries and quadrant, the rights
/// accumulated above). Pages are found through an open-addressing hash on the guest frame
/// alone, so every page mirroring one frame (whatever its role) sits in one probe run: that
/// is what write protection and zapping by frame need. Pass-through pages (the top of a 32-bit
/// or PAE guest's shadow, which mirror no guest table in memory) are not hashed: they are
/// reached from their root only.
///
/// Nothing is allocated: the caller hands in arrays (cache_storage) and their host-physical
/// base. A full cache is a typed answer (npos); the shadow MMU then zaps everything and
/// rebuilds (shadow_mmu.hpp).
#pragma once

#include <array>
#include <cstdint>

#include "spte.hpp"
#include "../pte.hpp"
#include "../role.hpp"
#include "../../x86/address.hpp"
#include "../../x86/contract.hpp"

namespace hvkit::paging::shadow {

/// One shadow paging structure: 512 host entries, 4 KiB aligned.
struct alignas(4096) shadow_table {
  std::array<std::uint64_t, table_entries> entries{};
};
static_assert(sizeof(shadow_table) == 4096);

/// Bookkeeping of one shadow page.
struct shadow_page {
  x86::gfn gfn{};          ///< the guest frame mirrored (direct pages: the first frame covered)
  page_role role{};
  std::uint16_t next = 0;  ///< free-list link (unused pages)
  bool used = false;
  bool hashed = false;     ///< findable by (gfn, role); false for pass-through pages
  /// Write flooding (shadow_mmu::set_write_flood_threshold()): emulated writes to the frame
  /// since a fix-up last went through this page (saturates at 255).
  std::uint8_t writes = 0;
};

/// One cached root: the shadow page that translates guest CR3 root `root` under `role`.
/// For a PAE guest the PDPTE registers it was built from are part of the key.
struct root_entry {
  std::uint64_t root = 0;
  cpu_role role{};
  std::array<std::uint64_t, 4> pdptes{};
  std::uint16_t page = 0;
  bool used = false;
  std::uint64_t last_use = 0;  ///< when the root was last remembered or found (the cache's clock)
};

/// The caller's storage. `tables[i]` lives at host-physical `base + 4096 * i`.
/// `hash` has `hash_size` slots, a power of two above `capacity`.
struct cache_storage {
  shadow_table* tables = nullptr;
  shadow_page* pages = nullptr;
  std::uint16_t capacity = 0;  ///< at most 65535 pages
  std::uint16_t* hash = nullptr;
  std::uint32_t hash_size = 0;
  root_entry* roots = nullptr;
  std::uint16_t root_capacity = 0;
  x86::hpa base{};
};

/// Storage of a fixed size, for a caller that keeps the cache in one object (tests, fuzzers,
/// a kernel's static data). `Pages` shadow pages, `Roots` cached roots.
template <unsigned Pages, unsigned Roots = 8>
struct static_cache_storage {
  static_assert(Pages > 0 && Pages < 0xffff && Roots > 0 && Roots <= 0xffff);
  static constexpr std::uint32_t hash_slots = [] {
    std::uint32_t n = 1;
    while (n <= 2 * Pages) n *= 2;
    return n;
  }();
  std::array<shadow_table, Pages> tables{};
  std::array<shadow_page, Pages> pages{};
  std::array<std::uint16_t, hash_slots> hash{};
  std::array<root_entry, Roots> roots{};
  /// The storage descriptor, with the tables at host-physical `base`.
  [[nodiscard]] cache_storage view(x86::hpa base) noexcept {
    return cache_storage{tables.data(), pages.data(), static_cast<std::uint16_t>(Pages), hash.data(), hash_slots,
                         roots.data(), static_cast<std::uint16_t>(Roots), base};
  }
};

/// The shadow-page cache over caller storage.
class page_cache {
 public:
  static constexpr std::uint16_t npos = 0xffff;

  constexpr page_cache() noexcept = default;
  /// Takes the storage and empties it. Preconditions: hash_size a power of two > capacity,
  /// base 4 KiB aligned.
  constexpr explicit page_cache(cache_storage s) noexcept : s_(s) {
    HVKIT_EXPECTS(s.hash_size > s.capacity && (s.hash_size & (s.hash_size - 1)) == 0);
    HVKIT_EXPECTS((s.base.value() & 0xfffu) == 0);
    zap_all();
  }

  [[nodiscard]] constexpr std::uint16_t capacity() const noexcept { return s_.capacity; }
  [[nodiscard]] constexpr unsigned used() const noexcept { return used_; }
  [[nodiscard]] constexpr const shadow_page& page(std::uint16_t i) const noexcept { return s_.pages[i]; }
  [[nodiscard]] constexpr std::uint64_t* table(std::uint16_t i) noexcept { return s_.tables[i].entries.data(); }
  [[nodiscard]] constexpr const std::uint64_t* table(std::uint16_t i) const noexcept {
    return s_.tables[i].entries.data();
  }
  /// Host-physical address of page `i`'s table.
  [[nodiscard]] constexpr x86::hpa address_of(std::uint16_t i) const noexcept {
    return s_.base + std::uint64_t{i} * 4096u;
  }
  /// The page whose table is at `a` (the address in a non-leaf entry), or npos.
  [[nodiscard]] constexpr std::uint16_t index_of(x86::hpa a) const noexcept {
    const std::uint64_t off = (a.value() & pte::address_bits) - s_.base.value();
    if (off / 4096u >= s_.capacity) return npos;
    return static_cast<std::uint16_t>(off / 4096u);
  }
  /// The page referenced by non-leaf entry `e`, or npos (not present).
  [[nodiscard]] constexpr std::uint16_t child_of(std::uint64_t e) const noexcept {
    return (e & pte::present.raw()) ? index_of(x86::hpa{e}) : npos;
  }

  /// The hashed page (gfn, role), or npos.
  [[nodiscard]] constexpr std::uint16_t lookup(x86::gfn gfn, page_role role) const noexcept {
    for (std::uint32_t h = slot_of(gfn);; h = (h + 1) & mask()) {
      const std::uint16_t i = s_.hash[h];
      if (i == npos) return npos;
      if (s_.pages[i].gfn == gfn && s_.pages[i].role == role) return i;
    }
  }
  /// Calls `fn(index)` for every hashed page whose gfn is `gfn` (any role).
  template <class F>
  constexpr void for_each_page_of(x86::gfn gfn, F&& fn) const noexcept {
    for (std::uint32_t h = slot_of(gfn);; h = (h + 1) & mask()) {
      const std::uint16_t i = s_.hash[h];
      if (i == npos) return;
      if (s_.pages[i].gfn == gfn) fn(i);
    }
  }
  /// True if a hashed page mirrors the guest paging structure in frame `gfn` (not direct):
  /// the frame must then be write-protected.
  [[nodiscard]] constexpr bool mirrors(x86::gfn gfn) const noexcept {
    bool any = false;
    for_each_page_of(gfn, [&](std::uint16_t i) { any = any || !s_.pages[i].role.direct(); });
    return any;
  }

  /// A new page (gfn, role) with an empty table; hashed unless `hashed` is false. npos if the
  /// cache is full. Precondition: (gfn, role) not hashed yet.
  constexpr std::uint16_t allocate(x86::gfn gfn, page_role role, bool hashed = true) noexcept {
    if (free_ == npos) return npos;
    const std::uint16_t i = free_;
    free_ = s_.pages[i].next;
    s_.pages[i] = shadow_page{gfn, role, npos, true, hashed};
    s_.tables[i].entries.fill(0);
    ++used_;
    if (hashed) {
      std::uint32_t h = slot_of(gfn);
      while (s_.hash[h] != npos) h = (h + 1) & mask();
      s_.hash[h] = i;
    }
    return i;
  }

  /// Write flooding: one more emulated write to page `i`'s frame; returns the count since the
  /// page was last used by a fix-up (saturating at 255).
  constexpr unsigned note_write(std::uint16_t i) noexcept {
    std::uint8_t& w = s_.pages[i].writes;
    if (w != 0xff) ++w;
    return w;
  }
  /// Write flooding: page `i` was used by a fix-up (its guest table is in use): the count restarts.
  constexpr void note_use(std::uint16_t i) noexcept { s_.pages[i].writes = 0; }

  /// Zaps page `i`: every non-leaf entry referencing it is cleared, cached roots naming it are
  /// dropped, its un-hashed children (pass-through pages) are zapped with it, and it is freed.
  /// O(pages in use x 512): zapping single pages is a slow path. A shadow_mmu whose current
  /// root was zapped must be loaded again (shadow_mmu::load()).
  constexpr void zap(std::uint16_t i) noexcept {
    if (i >= s_.capacity || !s_.pages[i].used) return;
    const std::uint64_t target = address_of(i).value();
    for (std::uint16_t p = 0; p < s_.capacity; ++p) {
      if (!s_.pages[p].used || s_.pages[p].role.level() <= 1) continue;
      for (auto& e : s_.tables[p].entries)
        if ((e & pte::present.raw()) && (e & pte::address_bits) == target) e = 0;
    }
    for (std::uint16_t r = 0; r < s_.root_capacity; ++r)
      if (s_.roots[r].used && s_.roots[r].page == i) s_.roots[r].used = false;
    if (s_.pages[i].role.level() > 1) {
      for (auto& e : s_.tables[i].entries) {
        const std::uint16_t c = child_of(e);
        e = 0;
        if (c != npos && s_.pages[c].used && !s_.pages[c].hashed) zap(c);
      }
    }
    if (s_.pages[i].hashed) unhash(i);
    s_.pages[i].used = false;
    s_.pages[i].next = free_;
    free_ = i;
    --used_;
  }
  /// Frees the un-hashed page `i` (a pass-through or direct page, which has exactly one
  /// parent entry: the caller clears it) and its un-hashed children, without the parent scan.
  constexpr void release(std::uint16_t i) noexcept {
    if (i >= s_.capacity || !s_.pages[i].used || s_.pages[i].hashed) return;
    if (s_.pages[i].role.level() > 1) {
      for (auto& e : s_.tables[i].entries) {
        const std::uint16_t c = child_of(e);
        e = 0;
        if (c != npos && s_.pages[c].used && !s_.pages[c].hashed) release(c);
      }
    }
    s_.pages[i].used = false;
    s_.pages[i].next = free_;
    free_ = i;
    --used_;
  }
  /// Zaps every page mirroring frame `gfn` (any role).
  constexpr void zap_frame(x86::gfn gfn) noexcept {
    for (;;) {
      std::uint16_t victim = npos;
      for_each_page_of(gfn, [&](std::uint16_t i) { victim = i; });
      if (victim == npos) return;
      zap(victim);
    }
  }
  /// Empties the cache: every page free, the hash and the root cache empty.
  constexpr void zap_all() noexcept {
    for (std::uint32_t h = 0; h < s_.hash_size; ++h) s_.hash[h] = npos;
    free_ = s_.capacity == 0 ? npos : 0;
    for (std::uint16_t i = 0; i < s_.capacity; ++i) {
      s_.pages[i] = shadow_page{};
      s_.pages[i].next = i + 1u < s_.capacity ? static_cast<std::uint16_t>(i + 1u) : npos;
    }
    for (std::uint16_t r = 0; r < s_.root_capacity; ++r) s_.roots[r] = root_entry{};
    used_ = 0;
  }

  // The root cache keeps the roots a guest switched to most recently: a guest's CR3 moves
  // between a few processes, and the root it left longest ago is the one least likely to
  // come back (the previous-roots cache of a KVM-style shadow MMU works the same way). So
  // finding a root makes it the most recently used, and a full cache forgets the least
  // recently used one.

  /// The cached root page for (guest root, role, PAE PDPTEs), or npos. A hit makes that root
  /// the most recently used (the caller is switching to it); cached_root() only looks.
  [[nodiscard]] constexpr std::uint16_t find_root(std::uint64_t root, cpu_role role,
                                                  const std::array<std::uint64_t, 4>& pdptes) noexcept {
    const std::uint16_t r = root_slot(root, role, pdptes);
    if (r == npos) return npos;
    s_.roots[r].last_use = ++clock_;
    return s_.roots[r].page;
  }
  /// As find_root(), without changing which root is the least recently used.
  [[nodiscard]] constexpr std::uint16_t cached_root(std::uint64_t root, cpu_role role,
                                                    const std::array<std::uint64_t, 4>& pdptes) const noexcept {
    const std::uint16_t r = root_slot(root, role, pdptes);
    return r == npos ? npos : s_.roots[r].page;
  }
  /// Remembers `page` as the (most recently used) root for (root, role, pdptes); when the
  /// root cache is full the least recently used entry (remembered or found longest ago) is
  /// forgotten, and its page released unless it is hashed (then it stays cached until zapped).
  constexpr void remember_root(std::uint64_t root, cpu_role role, const std::array<std::uint64_t, 4>& pdptes,
                               std::uint16_t page) noexcept {
    std::uint16_t slot = npos;
    for (std::uint16_t r = 0; r < s_.root_capacity && slot == npos; ++r)
      if (!s_.roots[r].used) slot = r;
    if (slot == npos) {
      if (s_.root_capacity == 0) return;  // no root cache: nothing to remember
      slot = 0;
      for (std::uint16_t r = 1; r < s_.root_capacity; ++r)
        if (s_.roots[r].last_use < s_.roots[slot].last_use) slot = r;
      // An un-hashed root (pass-through or direct) is reachable only from here.
      const std::uint16_t old = s_.roots[slot].page;
      s_.roots[slot].used = false;
      if (old != page) release(old);
    }
    s_.roots[slot] = root_entry{root, role, pdptes, page, true, ++clock_};
  }

 private:
  [[nodiscard]] constexpr std::uint32_t mask() const noexcept { return s_.hash_size - 1; }
  [[nodiscard]] constexpr std::uint16_t root_slot(std::uint64_t root, cpu_role role,
                                                  const std::array<std::uint64_t, 4>& pdptes) const noexcept {
    for (std::uint16_t r = 0; r < s_.root_capacity; ++r) {
      const root_entry& e = s_.roots[r];
      if (e.used && e.root == root && e.role == role && e.pdptes == pdptes) return r;
    }
    return npos;
  }
  [[nodiscard]] constexpr std::uint32_t slot_of(x86::gfn gfn) const noexcept {
    // Fibonacci hashing of the frame number (frames of one guest are mostly consecutive).
    return static_cast<std::uint32_t>((gfn.value() * 0x9e37'79b9'7f4a'7c15ull) >> 32) & mask();
  }
  /// Removes page `i` from the hash: backward-shift deletion keeps every probe run unbroken.
  constexpr void unhash(std::uint16_t i) noexcept {
    std::uint32_t h = slot_of(s_.pages[i].gfn);
    while (s_.hash[h] != i) h = (h + 1) & mask();
    std::uint32_t hole = h;
    for (std::uint32_t j = (hole + 1) & mask(); s_.hash[j] != npos; j = (j + 1) & mask()) {
      const std::uint32_t home = slot_of(s_.pages[s_.hash[j]].gfn);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!stays) {
        s_.hash[hole] = s_.hash[j];
        hole = j;
      }
    }
    s_.hash[hole] = npos;
  }

  cache_storage s_{};
  std::uint16_t free_ = npos;
  std::uint64_t clock_ = 0;  ///< counts root uses (64 bits: never wraps)
  unsigned used_ = 0;
};

}  // namespace hvkit::paging::shadow
