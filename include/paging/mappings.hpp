// SPDX-License-Identifier: MIT
/// @file
/// @brief Enumerating every mapping of an address space: guest paging in every mode, EPT,
/// and nested (guest paging through EPT), the way a debugger or an introspection tool lists
/// a process's pages. Freestanding, no heap: a cursor over the tables that reads them
/// through the same guest_memory accessors the walkers use.
///
/// The enumeration is a depth-first traversal of the paging structures in address order:
/// a not-present entry skips everything it would map, a leaf (a PTE, or an entry with PS=1
/// where that maps a page) yields one `mapping`: the input range it maps, the output
/// address, the page size, the rights ANDed over the levels, the protection key and the
/// memory-type bits, computed by the rules the walkers apply (SDM 4.3-4.6 for guest paging,
/// 29.3.2-29.3.3 for EPT). What cannot be enumerated is reported as a typed `walk_fault`
/// and skipped, never read out of range:
///  - a table the memory does not back (`fault_kind::unbacked`; the rest of that table is
///    skipped, since an unbacked read usually means the table address is bad);
///  - a present entry with a reserved bit set (`fault_kind::reserved_bit`) or a
///    misconfigured EPT entry (`fault_kind::ept_misconfig`): a walk through it faults, so
///    it maps nothing;
///  - for nested enumeration, a guest table whose guest-physical address the second stage
///    does not translate (the second stage's fault, `walk_stage::ept`).
///
/// Termination: every step moves a cursor strictly forward through the input address space
/// (at most 512 or 1024 entries per table, a bounded number of levels), so even tables
/// whose entries point back at themselves end; `mapping_limits::max_reads` bounds the work
/// for hostile tables (the cursor then reports `mapping_step::truncated`).
///
/// @code
///   paging::flat_view mem(image, size, x86::gpa{base});
///   paging::guest_walker w(mmu, props);            // or basic_walker, or a walker_state
///   paging::guest_mappings pages(w.state(), mem);
///   for (const auto& m : pages) {
///     if (m) use(m->input, m->size, m->output);   // one page
///     else report(m.error());                     // a table that could not be read
///   }
///   if (pages.truncated()) ...                    // max_reads was reached
/// @endcode
#pragma once

#include <cstddef>
#include <cstdint>

#include "access.hpp"
#include "ept_entry.hpp"
#include "ept_walker.hpp"
#include "guest_memory.hpp"
#include "pte.hpp"
#include "walk_result.hpp"
#include "walker.hpp"
#include "../x86/address.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// What one step of a cursor produced. (Declared before the `mapping` alias below, whose name
/// its first enumerator repeats: so -Wshadow has nothing to report.)
enum class mapping_step : std::uint8_t {
  mapping,    ///< current() is the next mapping
  fault,      ///< fault() says which subtree could not be enumerated (it is skipped)
  end,        ///< the enumeration is complete
  truncated,  ///< mapping_limits::max_reads was reached: the enumeration stopped early
};

/// One page of an address space and where it is mapped. `Address` is the space the tables
/// and the output live in: x86::gpa for the guest's own paging structures (`mapping`,
/// linear -> guest-physical), x86::hpa for EPT (`host_mapping`, guest-physical ->
/// host-physical; the EPT tables are host-physical too, SDM 25.6.11, 29.3).
template <class Address>
struct basic_mapping {
  /// First input address of the page: a linear address (canonical, sign-extended) for guest
  /// paging, a guest-physical address for EPT.
  std::uint64_t input = 0;
  std::uint64_t size = 0;     ///< bytes mapped (the page size; 4 GiB for "paging off")
  Address output{};           ///< first output address (guest-physical, or EPT's host-physical)
  pte_access rights{};        ///< as translation::rights: ANDed over every level
  std::uint8_t pkey = 0;      ///< protection key of the leaf (4/5-level paging; else 0)
  std::uint8_t memory_type = 0;  ///< as translation::memory_type (PAT index, or EPT type | IPAT << 3)
  std::uint8_t page_shift = 0;   ///< log2 of the page size: 12, 21, 22 or 30 (32 for "paging off")
  std::uint8_t level = 0;        ///< level of the leaf entry (1 = PTE); 0 with paging off
  walk_stage stage = walk_stage::guest;  ///< guest paging or EPT tables
  Address entry_address{};       ///< where the leaf entry is (in the tables' space)
  std::uint64_t entry_value = 0; ///< what the leaf entry holds

  /// The last input address of the page.
  [[nodiscard]] constexpr std::uint64_t last() const noexcept { return input + (size - 1u); }
  friend constexpr bool operator==(const basic_mapping&, const basic_mapping&) noexcept = default;
};
/// A page of the guest's own paging structures: linear -> guest-physical (guest_mappings,
/// and the guest page of a nested_mapping).
using mapping = basic_mapping<x86::gpa>;
/// A page of an EPT address space: guest-physical -> host-physical (ept_mappings).
using host_mapping = basic_mapping<x86::hpa>;

/// A piece of a guest page mapped by both stages: a nested mapping is where the guest's
/// page and the second stage's page overlap (the smaller of the two, or less when the
/// second stage does not map all of the guest page).
struct nested_mapping {
  std::uint64_t linear = 0;   ///< first linear address (canonical)
  std::uint64_t size = 0;     ///< bytes mapped by both stages from `linear` on
  x86::gpa guest_physical{};  ///< the guest (L2) physical address of `linear`
  x86::hpa output{};          ///< the second stage's output address of `linear` (host-physical)
  mapping guest;              ///< the whole guest page this piece lies in
  /// The second stage's translation of `guest_physical`: rights, memory type, page shift
  /// (the identity stage reports all rights and 4 KiB).
  pte_access second_rights{};
  std::uint8_t second_memory_type = 0;
  std::uint8_t second_page_shift = 0;

  /// The last linear address of the piece.
  [[nodiscard]] constexpr std::uint64_t last() const noexcept { return linear + (size - 1u); }
};

/// Which input addresses to enumerate: the pages that overlap [first, last] (inclusive),
/// yielded whole. For 4/5-level paging a bound inside the non-canonical hole is moved to
/// the canonical side (`first` up to the upper half, `last` down to the lower half).
struct mapping_range {
  std::uint64_t first = 0;
  std::uint64_t last = ~std::uint64_t{0};
};

/// A bound on the work of one enumeration, for tables that may be hostile.
struct mapping_limits {
  /// Paging-structure entries read from memory (a nested enumeration also counts each
  /// second-stage translation); reaching it ends the enumeration with mapping_step::truncated.
  std::uint64_t max_reads = ~std::uint64_t{0};
};

namespace detail {

/// The accumulated entries above a level: the AND (R/W, U/S; EPT R/W/X/XU) and the OR (XD).
struct mapping_acc {
  std::uint64_t all = ~std::uint64_t{0};
  std::uint64_t any = 0;
};

/// The depth-first traversal shared by the guest and EPT cursors. `Policy` describes the
/// tables: `address` (the space of the tables and the output: x86::gpa or x86::hpa), `top()`, `index_bits(l)`, `shift(l)`, `stage()`, `reads_memory(l)`,
/// `to_input(offset)`, `read(l, table, index, e, ea, f, counted)`, `classify(l, e, f)` (0 not
/// present, 1 a table, 2 a leaf, -1 a fault filled in f), `child(l, e, acc)`,
/// `next_table(l, e)` and `leaf(l, e, ea, acc, m)`.
template <class Policy>
class table_cursor {
 public:
  using address = typename Policy::address;
  using item = basic_mapping<address>;
  constexpr table_cursor() noexcept = default;
  constexpr table_cursor(const Policy& p, std::uint64_t first, std::uint64_t last, std::uint64_t root,
                         mapping_limits lim) noexcept
      : p_(p), first_(first), last_(last), limits_(lim) {
    level_ = p_.top();
    if (first > last || level_ == 0) {
      level_ = 0;  // empty
      return;
    }
    table_[level_] = root;
    base_[level_] = 0;
    index_[level_] = first >> p_.shift(level_);
    acc_[level_] = mapping_acc{};
  }

  /// The next mapping, fault or the end (see mapping_step).
  constexpr mapping_step next() noexcept {
    const unsigned top = p_.top();
    while (level_ != 0 && level_ <= top) {
      const unsigned l = level_;
      const unsigned shift = p_.shift(l);
      const std::uint64_t count = std::uint64_t{1} << p_.index_bits(l);
      if (index_[l] >= count) {
        ++level_;  // this table is done: back to the parent (its index already moved on)
        continue;
      }
      const std::uint64_t start = base_[l] + (index_[l] << shift);
      if (start > last_) {
        index_[l] = count;  // the rest of this table lies beyond the range
        continue;
      }
      std::uint64_t e = 0;
      address ea{};
      bool counted = false;
      fault_ = walk_fault{};
      if (reads_ >= limits_.max_reads && p_.reads_memory(l)) {
        level_ = 0;
        return mapping_step::truncated;
      }
      const bool ok = p_.read(l, table_[l], index_[l], e, ea, fault_, counted);
      if (counted) ++reads_;
      if (!ok) {
        fault_.level = fault_.stage == p_.stage() ? static_cast<std::uint8_t>(l) : fault_.level;
        if (fault_.stage == p_.stage()) fault_.set_entry_address(ea);
        fault_.linear = x86::gva{p_.to_input(start)};
        if (p_.stage() == walk_stage::ept) fault_.guest_physical = x86::gpa{start};  // the input, not the table
        index_[l] = count;  // a table that cannot be read is skipped whole
        return mapping_step::fault;
      }
      ++index_[l];
      const int kind = p_.classify(l, e, fault_);
      if (kind == 0) continue;
      if (kind < 0) {
        fault_.level = static_cast<std::uint8_t>(l);
        fault_.set_entry_address(ea);
        fault_.entry_value = e;
        fault_.linear = x86::gva{p_.to_input(start)};
        if (fault_.stage == walk_stage::ept) fault_.guest_physical = x86::gpa{start};
        return mapping_step::fault;
      }
      if (kind == 2) {
        current_ = item{};
        p_.leaf(l, e, ea, acc_[l], current_);
        current_.input = p_.to_input(start);
        current_.size = std::uint64_t{1} << shift;
        current_.page_shift = static_cast<std::uint8_t>(shift);
        current_.level = static_cast<std::uint8_t>(l);
        current_.stage = p_.stage();
        current_.entry_address = ea;
        current_.entry_value = e;
        return mapping_step::mapping;
      }
      // A table: descend, starting at the entry that covers `first_` if the range starts
      // inside this entry's region.
      const unsigned c = l - 1;
      table_[c] = p_.next_table(l, e);
      base_[c] = start;
      acc_[c] = p_.child(l, e, acc_[l]);
      index_[c] = first_ > start ? (first_ - start) >> p_.shift(c) : 0;
      level_ = c;
    }
    level_ = 0;
    return mapping_step::end;
  }

  [[nodiscard]] constexpr const item& current() const noexcept { return current_; }
  [[nodiscard]] constexpr const walk_fault& fault() const noexcept { return fault_; }
  [[nodiscard]] constexpr std::uint64_t reads() const noexcept { return reads_; }
  /// Changes the bound (a nested enumeration shares one bound between both stages).
  constexpr void set_limits(mapping_limits lim) noexcept { limits_ = lim; }

 private:
  Policy p_{};
  std::uint64_t first_ = 0, last_ = 0;  ///< the range in the policy's offset space
  mapping_limits limits_{};
  std::uint64_t reads_ = 0;
  unsigned level_ = 0;  ///< level being scanned; 0 = finished
  std::uint64_t table_[6]{};
  std::uint64_t base_[6]{};   ///< input offset of the first entry of the table at each level
  std::uint64_t index_[6]{};  ///< next entry to read at each level
  mapping_acc acc_[6]{};      ///< the entries above each level
  item current_{};
  walk_fault fault_{};
};

/// Reads guest tables straight from a guest_memory.
template <guest_memory M>
struct direct_reader {
  const M* mem = nullptr;
  constexpr bool read(x86::gpa a, unsigned bytes, std::uint64_t& out, walk_fault& f) noexcept {
    if (bytes == 4) {
      const auto v = mem->read32(a);
      if (v) {
        out = *v;
        return true;
      }
    } else {
      const auto v = mem->read64(a);
      if (v) {
        out = *v;
        return true;
      }
    }
    f.kind = fault_kind::unbacked;
    f.stage = walk_stage::guest;
    f.guest_physical = a;
    return false;
  }
};

/// Reads guest tables through a second stage (raw translation: no permission checks, no
/// A/D), caching the translation of the last table page (a table lies in one 4 KiB page).
template <class Stage, guest_memory M>
struct stage_reader {
  const Stage* stage = nullptr;
  const M* mem = nullptr;
  std::uint64_t cached_page = ~std::uint64_t{0};  ///< guest-physical page of the cached translation
  std::uint64_t cached_out = 0;                   ///< its output page
  constexpr bool read(x86::gpa a, unsigned bytes, std::uint64_t& out, walk_fault& f) noexcept {
    if ((a.value() >> 12) != cached_page) {
      const auto t = stage->translate(*mem, x86::gpa{a.value() & ~std::uint64_t{0xfff}});
      if (!t) {
        f = t.error();
        f.stage = walk_stage::ept;
        f.guest_physical = a;
        return false;
      }
      cached_page = a.value() >> 12;
      cached_out = t->address.value();
    }
    const x86::gpa h{cached_out | (a.value() & 0xfffu)};
    direct_reader<M> d{mem};
    if (!d.read(h, bytes, out, f)) {
      f.guest_physical = a;  // the guest entry's address is not backed behind the second stage
      return false;
    }
    return true;
  }
};

/// The guest paging formats as runtime parameters (the walker's format:: structs, SDM 4.3-4.5).
template <class Reader>
struct guest_policy {
  using address = x86::gpa;  ///< the guest's tables and its output are guest-physical
  walker_state s{};
  Reader reader{};
  unsigned levels = 0;
  unsigned width = 32;  ///< bits of linear address: 32, 48 or 57

  constexpr guest_policy() noexcept = default;
  constexpr guest_policy(const walker_state& st, Reader r) noexcept : s(st), reader(r) {
    levels = x86::paging_levels(s.mode);
    width = s.mode == x86::paging_mode::four_level ? 48u : s.mode == x86::paging_mode::five_level ? 57u : 32u;
  }
  [[nodiscard]] constexpr bool ia32e() const noexcept { return width != 32; }
  [[nodiscard]] constexpr unsigned top() const noexcept { return levels; }
  [[nodiscard]] constexpr unsigned bits() const noexcept { return s.mode == x86::paging_mode::two_level ? 10u : 9u; }
  [[nodiscard]] constexpr unsigned index_bits(unsigned l) const noexcept {
    return s.mode == x86::paging_mode::pae && l == 3 ? 2u : bits();  // the four PDPTE registers
  }
  [[nodiscard]] constexpr unsigned shift(unsigned l) const noexcept { return 12 + bits() * (l - 1); }
  [[nodiscard]] constexpr unsigned entry_bytes() const noexcept { return s.mode == x86::paging_mode::two_level ? 4u : 8u; }
  [[nodiscard]] constexpr std::uint64_t address_mask() const noexcept {
    return s.mode == x86::paging_mode::two_level ? format::ia32::address_mask : format::pae::address_mask;
  }
  [[nodiscard]] constexpr walk_stage stage() const noexcept { return walk_stage::guest; }
  [[nodiscard]] constexpr bool reads_memory(unsigned l) const noexcept {
    return !(s.mode == x86::paging_mode::pae && l == 3);
  }
  /// Offset space -> linear address: sign-extended from bit width-1 in IA-32e mode.
  [[nodiscard]] constexpr std::uint64_t to_input(std::uint64_t off) const noexcept {
    if (!ia32e()) return off;
    return x86::canonicalize(x86::gva{off}, width == 57 ? x86::linear_width::la57 : x86::linear_width::la48).value();
  }
  constexpr bool read(unsigned l, std::uint64_t table, std::uint64_t index, std::uint64_t& e, x86::gpa& ea,
                      walk_fault& f, bool& counted) noexcept {
    if (!reads_memory(l)) {  // PAE: the PDPTE registers (SDM 4.4.1), never re-read
      e = s.pdptes.entries[index & 3u];
      ea = s.pdptes.pdpt + 8u * index;
      if (!s.pdptes.loaded) {  // no snapshot: an error, not an empty address space
        f.kind = fault_kind::pdptes_not_loaded;
        f.stage = walk_stage::guest;
        f.level = 3;
        f.set_entry_address(ea);
        return false;
      }
      return true;
    }
    counted = true;
    ea = x86::gpa{(table & address_mask()) + index * entry_bytes()};
    return reader.read(ea, entry_bytes(), e, f);
  }
  [[nodiscard]] constexpr bool large(unsigned l, std::uint64_t e) const noexcept {
    return l > 1 && l < 6 && (e & pte::page_size.raw()) && s.rsvd.large_ok[l];
  }
  constexpr int classify(unsigned l, std::uint64_t e, walk_fault& f) const noexcept {
    if (!(e & pte::present.raw())) return 0;
    if (!reads_memory(l)) return 1;  // PDPTE registers: checked at the load
    const bool big = large(l, e);
    if (e & (big ? s.rsvd.large[l] : s.rsvd.table[l])) {
      f.kind = fault_kind::reserved_bit;
      f.stage = walk_stage::guest;
      f.vector = x86::vector::pf;
      f.error_code = x86::pfec::present | x86::pfec::rsvd;
      return -1;
    }
    return (l == 1 || big) ? 2 : 1;
  }
  [[nodiscard]] constexpr mapping_acc child(unsigned l, std::uint64_t e, mapping_acc a) const noexcept {
    if (!reads_memory(l)) return a;  // a PDPTE register has no rights (the walker skips it too)
    return mapping_acc{a.all & e, a.any | e};
  }
  [[nodiscard]] constexpr std::uint64_t next_table(unsigned, std::uint64_t e) const noexcept { return e; }
  constexpr void leaf(unsigned l, std::uint64_t e, x86::gpa, mapping_acc a, mapping& m) const noexcept {
    const std::uint64_t size = std::uint64_t{1} << shift(l);
    const std::uint64_t base = l == 1 ? (e & address_mask())
                                      : (s.mode == x86::paging_mode::two_level ? format::ia32::large_base(e, l)
                                                                              : format::pae::large_base(e, l));
    m.output = x86::gpa{base & ~(size - 1)};
    // SDM 4.6.1: write/user where R/W and U/S are 1 in every entry; exec where no entry
    // has XD (with NXE); shadow stack: R/W=1 above the leaf, R/W=0 and D=1 in the leaf.
    const std::uint64_t all = a.all & e, any = a.any | e;
    const std::uint64_t exec = s.nx ? (~any >> 63) & 1u : 1u;
    const std::uint64_t ss = (a.all >> 1) & (~e >> 1) & (e >> 6) & 1u;
    m.rights = pte_access{static_cast<std::uint8_t>((all & 6u) | exec | (ss << 5))};
    m.pkey = ia32e() ? pte{e}.pkey() : std::uint8_t{0};
    // PAT index = PAT*4 + PCD*2 + PWT (SDM 11.12.3); PAT is bit 7 of a PTE, bit 12 of a large page.
    const std::uint64_t pat = l == 1 ? (e >> 7) & 1u : (e >> 12) & 1u;
    m.memory_type = static_cast<std::uint8_t>((pat << 2) | ((e >> 3) & 3u));
  }
};

/// EPT tables (SDM 29.3.2, 29.3.3.1) as a policy.
template <guest_memory M>
struct ept_policy {
  using address = x86::hpa;  ///< the EPT tables and EPT's output are host-physical
  const M* mem = nullptr;
  ept_entry_rules rules{};
  unsigned levels = 4;
  constexpr ept_policy() noexcept = default;
  constexpr ept_policy(const M* m, const ept_entry_rules& r, unsigned lv) noexcept : mem(m), rules(r), levels(lv) {}
  [[nodiscard]] constexpr unsigned top() const noexcept { return levels; }
  [[nodiscard]] static constexpr unsigned index_bits(unsigned) noexcept { return 9; }
  [[nodiscard]] static constexpr unsigned shift(unsigned l) noexcept { return 12 + 9 * (l - 1); }
  [[nodiscard]] static constexpr walk_stage stage() noexcept { return walk_stage::ept; }
  [[nodiscard]] static constexpr bool reads_memory(unsigned) noexcept { return true; }
  [[nodiscard]] static constexpr std::uint64_t to_input(std::uint64_t off) noexcept { return off; }
  constexpr bool read(unsigned, std::uint64_t table, std::uint64_t index, std::uint64_t& e, x86::hpa& ea,
                      walk_fault& f, bool& counted) const noexcept {
    counted = true;
    ea = x86::hpa{(table & 0x000f'ffff'ffff'f000u) + index * 8u};
    // The memory object takes its own addresses as x86::gpa, whatever space it models.
    const auto v = mem->read64(x86::gpa{ea.value()});
    if (!v) {
      f.kind = fault_kind::unbacked;
      f.stage = walk_stage::ept;
      return false;
    }
    e = *v;
    return true;
  }
  constexpr int classify(unsigned l, std::uint64_t e, walk_fault& f) const noexcept {
    if (!(e & rules.present_mask())) return 0;
    const bool leaf = rules.maps_page(e, l);
    if (rules.misconfigured(e, l, leaf)) {
      f.kind = fault_kind::ept_misconfig;
      f.stage = walk_stage::ept;
      return -1;
    }
    return leaf ? 2 : 1;
  }
  [[nodiscard]] static constexpr mapping_acc child(unsigned, std::uint64_t e, mapping_acc a) noexcept {
    return mapping_acc{a.all & e, a.any | e};
  }
  [[nodiscard]] static constexpr std::uint64_t next_table(unsigned, std::uint64_t e) noexcept { return e; }
  static constexpr void leaf(unsigned l, std::uint64_t e, x86::hpa, mapping_acc a, host_mapping& m) noexcept {
    const std::uint64_t size = std::uint64_t{1} << shift(l);
    m.output = x86::hpa{e & 0x000f'ffff'ffff'f000u & ~(size - 1)};
    m.rights = pte_access{static_cast<std::uint8_t>(ept_walker::entry_rights(a.all & e))};
    m.memory_type = static_cast<std::uint8_t>(ept_entry{e}.memory_type() | ((e >> 3) & 8u));
  }
};

/// The range in a guest policy's offset space (see mapping_range).
[[nodiscard]] constexpr bool guest_offsets(unsigned width, mapping_range r, std::uint64_t& first,
                                           std::uint64_t& last) noexcept {
  if (width == 32) {
    if (r.first > 0xffff'ffffu || r.first > r.last) return false;
    first = r.first;
    last = r.last > 0xffff'ffffu ? 0xffff'ffffu : r.last;
    return true;
  }
  const std::uint64_t half = std::uint64_t{1} << (width - 1);  // first offset of the upper half
  const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
  const std::uint64_t upper = ~(half - 1);                     // first canonical upper address
  auto off = [&](std::uint64_t a, bool is_first) -> std::uint64_t {
    if (a < half) return a;
    if (a >= upper) return a & mask;
    return is_first ? half : half - 1;  // in the hole
  };
  if (r.first > r.last) return false;
  first = off(r.first, true);
  last = off(r.last, false);
  return first <= last;
}

/// Iterator over a cursor's steps: `*it` is a result<Item, walk_fault>.
template <class Cursor, class Item>
class mapping_iterator {
 public:
  using value_type = result<Item, walk_fault>;
  using difference_type = std::ptrdiff_t;
  struct sentinel {};
  constexpr mapping_iterator() noexcept = default;
  constexpr explicit mapping_iterator(Cursor* c) noexcept : c_(c), step_(c->next()) {}
  [[nodiscard]] constexpr value_type operator*() const noexcept {
    if (step_ == mapping_step::mapping) return value_type(c_->current());
    return value_type(unexpected(c_->fault()));
  }
  constexpr mapping_iterator& operator++() noexcept {
    step_ = c_->next();
    return *this;
  }
  constexpr void operator++(int) noexcept { ++*this; }
  [[nodiscard]] friend constexpr bool operator==(const mapping_iterator& i, sentinel) noexcept {
    return i.step_ == mapping_step::end || i.step_ == mapping_step::truncated;
  }

 private:
  Cursor* c_ = nullptr;
  mapping_step step_ = mapping_step::end;
};

/// What every cursor class shares: range-for over results, and truncated() afterwards.
template <class Derived, class Item>
class cursor_range {
 public:
  using iterator = mapping_iterator<Derived, Item>;
  /// Starts (or continues) the enumeration. Single pass: the cursor is the iterator's state.
  [[nodiscard]] constexpr iterator begin() noexcept { return iterator(static_cast<Derived*>(this)); }
  [[nodiscard]] constexpr typename iterator::sentinel end() const noexcept { return {}; }
};

}  // namespace detail

/// Every mapping of a guest address space (any paging mode; PAE uses the walker state's
/// PDPTE snapshot, as the walker does), through a `guest_memory`.
template <guest_memory M>
class guest_mappings : public detail::cursor_range<guest_mappings<M>, mapping> {
 public:
  /// `state` is a walker's state (basic_walker::state(), guest_walker::state()).
  constexpr guest_mappings(const walker_state& state, const M& mem, mapping_range range = {},
                           mapping_limits limits = {}) noexcept
      : cursor_(make(state, detail::direct_reader<M>{&mem}, range, limits)) {
    init_identity(state, range);
  }

  /// The next mapping, fault or end.
  constexpr mapping_step next() noexcept {
    if (identity_) {
      identity_ = false;
      return mapping_step::mapping;
    }
    if (finished_) return truncated_ ? mapping_step::truncated : mapping_step::end;
    const mapping_step s = cursor_.next();
    if (s == mapping_step::end || s == mapping_step::truncated) {
      finished_ = true;
      truncated_ = s == mapping_step::truncated;
    }
    return s;
  }
  [[nodiscard]] constexpr const mapping& current() const noexcept { return paging_off_ ? off_ : cursor_.current(); }
  [[nodiscard]] constexpr const walk_fault& fault() const noexcept { return cursor_.fault(); }
  /// True if the enumeration stopped at mapping_limits::max_reads.
  [[nodiscard]] constexpr bool truncated() const noexcept { return truncated_; }
  /// Entries read so far.
  [[nodiscard]] constexpr std::uint64_t reads() const noexcept { return cursor_.reads(); }

 private:
  using policy = detail::guest_policy<detail::direct_reader<M>>;
  [[nodiscard]] static constexpr detail::table_cursor<policy> make(const walker_state& s, detail::direct_reader<M> r,
                                                                   mapping_range range, mapping_limits lim) noexcept {
    const policy p(s, r);
    std::uint64_t first = 1, last = 0;
    if (!detail::guest_offsets(p.width, range, first, last)) first = 1, last = 0;
    return detail::table_cursor<policy>(p, first, last, s.root.value(), lim);
  }
  constexpr void init_identity(const walker_state& s, mapping_range range) noexcept {
    if (s.mode != x86::paging_mode::none) return;
    // Paging off: linear = physical for the 32-bit linear address space (the walker's
    // identity), one mapping clipped to the range.
    paging_off_ = true;
    finished_ = true;
    std::uint64_t first = 0, last = 0;
    if (!detail::guest_offsets(32, range, first, last)) return;
    identity_ = true;
    off_.input = first;
    off_.size = last - first + 1;
    off_.output = x86::gpa{first};
    off_.rights = pte_access::paging_rights;
    off_.page_shift = 32;
  }

  detail::table_cursor<policy> cursor_;
  mapping off_{};
  bool paging_off_ = false, identity_ = false, finished_ = false, truncated_ = false;
};

/// Every mapping of an EPT address space (guest-physical -> host-physical: each item is a
/// `host_mapping`), through the memory that holds the EPT tables.
template <guest_memory M>
class ept_mappings : public detail::cursor_range<ept_mappings<M>, host_mapping> {
 public:
  /// The enumeration for `eptp` under `caps` (validated as ept_walker::make() does).
  [[nodiscard]] static constexpr result<ept_mappings, eptp_error> make(ept_pointer eptp, const ept_capabilities& caps,
                                                                       const M& mem, mapping_range range = {},
                                                                       mapping_limits limits = {}) noexcept {
    const auto w = ept_walker::make(eptp, caps);
    if (!w) return unexpected(w.error());
    ept_mappings m;
    const unsigned levels = w->levels();
    const std::uint64_t top = (std::uint64_t{1} << (12 + 9 * levels)) - 1;
    const std::uint64_t last = range.last > top ? top : range.last;
    const std::uint64_t first = range.first > last ? 1 : range.first;
    m.cursor_ = detail::table_cursor<policy>(policy(&mem, ept_entry_rules::make(caps), levels), first,
                                             range.first > last ? 0 : last, w->root().value(), limits);
    return m;
  }
  constexpr ept_mappings() noexcept = default;

  /// The next mapping, fault or end.
  constexpr mapping_step next() noexcept {
    if (finished_) return truncated_ ? mapping_step::truncated : mapping_step::end;
    const mapping_step s = cursor_.next();
    if (s == mapping_step::end || s == mapping_step::truncated) {
      finished_ = true;
      truncated_ = s == mapping_step::truncated;
    }
    return s;
  }
  [[nodiscard]] constexpr const host_mapping& current() const noexcept { return cursor_.current(); }
  [[nodiscard]] constexpr const walk_fault& fault() const noexcept { return cursor_.fault(); }
  [[nodiscard]] constexpr bool truncated() const noexcept { return truncated_; }
  [[nodiscard]] constexpr std::uint64_t reads() const noexcept { return cursor_.reads(); }

 private:
  using policy = detail::ept_policy<M>;
  detail::table_cursor<policy> cursor_{};
  bool finished_ = false, truncated_ = false;
};

/// Every mapping of a nested address space: the guest's paging structures read through the
/// second stage `Stage` (ept_walker or identity_stage; raw translations), and each guest
/// page split where the second stage's pages start and end. Pieces the second stage does
/// not map are skipped; pieces it cannot translate for another reason (misconfigured,
/// unbacked) are reported as its fault.
template <class Stage, guest_memory M>
class nested_mappings : public detail::cursor_range<nested_mappings<Stage, M>, nested_mapping> {
 public:
  constexpr nested_mappings(const walker_state& guest, const Stage& stage, const M& mem, mapping_range range = {},
                            mapping_limits limits = {}) noexcept
      : stage_(&stage), mem_(&mem), limits_(limits) {
    const policy p(guest, detail::stage_reader<Stage, M>{&stage, &mem});
    std::uint64_t first = 1, last = 0;
    if (!detail::guest_offsets(p.width, range, first, last)) first = 1, last = 0;
    cursor_ = detail::table_cursor<policy>(p, first, last, guest.root.value(), limits);
    if (guest.mode == x86::paging_mode::none) {
      // Paging off: the guest maps linear = guest-physical over 4 GiB.
      paging_off_ = true;
      if (first <= last) {
        have_page_ = true;
        page_ = mapping{};
        page_.input = first;
        page_.size = last - first + 1;
        page_.output = x86::gpa{first};
        page_.rights = pte_access::paging_rights;
        page_.page_shift = 32;
        offset_ = 0;
      }
    }
  }

  constexpr mapping_step next() noexcept {
    for (;;) {
      if (!have_page_) {
        if (paging_off_ || finished_) return finish();
        // One bound for both stages: the guest cursor may use what the pieces left.
        cursor_.set_limits(mapping_limits{limits_.max_reads - (extra_reads_ < limits_.max_reads ? extra_reads_
                                                                                               : limits_.max_reads)});
        const mapping_step s = cursor_.next();
        if (s == mapping_step::fault) {
          fault_ = cursor_.fault();
          return s;
        }
        if (s != mapping_step::mapping) {
          truncated_ = s == mapping_step::truncated;
          return finish();
        }
        page_ = cursor_.current();
        offset_ = 0;
        have_page_ = true;
      }
      if (offset_ >= page_.size) {
        have_page_ = false;
        if (paging_off_) finished_ = true;
        continue;
      }
      if (cursor_.reads() + extra_reads_ >= limits_.max_reads) {
        truncated_ = true;
        have_page_ = false;
        finished_ = true;
        return finish();
      }
      ++extra_reads_;
      const std::uint64_t gpa = page_.output.value() + offset_;
      const std::uint64_t linear = page_.input + offset_;
      const auto t = stage_->translate(*mem_, x86::gpa{gpa});
      if (!t) {
        // Skip the region the failing second-stage entry covers (or the rest of the page).
        const walk_fault& f = t.error();
        const unsigned level = f.level ? f.level : 1u;
        const std::uint64_t region = std::uint64_t{1} << (12 + 9 * (level - 1));
        advance(region - (gpa & (region - 1)));
        if (f.kind == fault_kind::not_present) continue;
        fault_ = f;
        fault_.linear = x86::gva{linear};
        return mapping_step::fault;
      }
      const std::uint64_t second = t->page_size();
      const std::uint64_t piece = second - (gpa & (second - 1));
      const std::uint64_t rest = page_.size - offset_;
      current_ = nested_mapping{};
      current_.linear = linear;
      current_.size = piece < rest ? piece : rest;
      current_.guest_physical = x86::gpa{gpa};
      current_.output = t->address;
      current_.guest = page_;
      current_.second_rights = t->rights;
      current_.second_memory_type = t->memory_type;
      current_.second_page_shift = t->page_shift;
      advance(current_.size);
      return mapping_step::mapping;
    }
  }
  [[nodiscard]] constexpr const nested_mapping& current() const noexcept { return current_; }
  [[nodiscard]] constexpr const walk_fault& fault() const noexcept { return fault_; }
  [[nodiscard]] constexpr bool truncated() const noexcept { return truncated_; }
  /// Guest entries read plus second-stage translations made.
  [[nodiscard]] constexpr std::uint64_t reads() const noexcept { return cursor_.reads() + extra_reads_; }

 private:
  using policy = detail::guest_policy<detail::stage_reader<Stage, M>>;
  constexpr void advance(std::uint64_t n) noexcept {
    const std::uint64_t rest = page_.size - offset_;
    offset_ += n < rest ? n : rest;
  }
  constexpr mapping_step finish() noexcept {
    finished_ = true;
    have_page_ = false;
    return truncated_ ? mapping_step::truncated : mapping_step::end;
  }

  const Stage* stage_ = nullptr;
  const M* mem_ = nullptr;
  mapping_limits limits_{};
  detail::table_cursor<policy> cursor_{};
  mapping page_{};
  std::uint64_t offset_ = 0;
  std::uint64_t extra_reads_ = 0;
  nested_mapping current_{};
  walk_fault fault_{};
  bool have_page_ = false, paging_off_ = false, finished_ = false, truncated_ = false;
};

}  // namespace hvkit::paging
