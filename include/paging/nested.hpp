// SPDX-License-Identifier: MIT
/// @file
/// @brief Two-dimensional (nested) walks: a guest (L2) linear address through the guest's
/// page tables, where every guest table read and the final guest-physical address go
/// through a second stage (the EPT walker, AMD's nested paging of paging/npt.hpp, or the
/// identity).
///
/// Order (SDM 29.3.3: the EPT checks apply to each guest paging-structure access as it is
/// made, then to the final access):
///  1. the guest walk; each entry's L2 guest-physical address is translated by the second
///     stage as a paging-structure access (a read, or a write with EPT A/D) - a failure is
///     an EPT violation/misconfiguration with exit-qualification bit 7 = 1, bit 8 = 0;
///  2. the guest permission check (a failure is a guest #PF, stage = guest);
///  3. the second stage of the final guest-physical address with the real access (bit 8 = 1);
///  4. only then the A/D updates: guest A/D (each entry written must be EPT-writable: without
///     EPT A/D this is where a write violation can occur), then EPT A/D for every EPT
///     translation used. Nothing is written by a walk that faults in steps 1-3 or in the
///     write check of step 4.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "access.hpp"
#include "ept_walker.hpp"
#include "guest_memory.hpp"
#include "mmu.hpp"
#include "pdptr.hpp"
#include "walk_result.hpp"
#include "walker.hpp"
#include "../x86/address.hpp"
#include "../x86/pfec.hpp"

namespace hvkit::paging {

/// The identity second stage: guest-physical addresses are addresses in the memory object
/// (a guest without EPT). Has the interface the nested walk uses of ept_walker, with the
/// same verbs: walk() (checked, A/D), check() (checked, no A/D), translate() (raw); all
/// three are the identity here.
struct identity_stage {
  [[nodiscard]] static constexpr bool ad_enabled() noexcept { return false; }
  [[nodiscard]] static constexpr std::uint64_t ad_bits(bool, bool) noexcept { return 0; }
  /// The checked walk: the identity, every right, nothing to update.
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result walk(M& mem, const ept_request& req) const noexcept {
    return check(std::as_const(mem), req);
  }
  /// The checked walk without A/D updates: the identity, every right.
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result check(const M&, const ept_request& req) const noexcept {
    host_translation t{};
    t.address = x86::hpa{req.address.value()};  // the identity: no second stage
    t.page_shift = 12;
    t.rights = pte_access::ept_rights;
    return t;
  }
  /// The raw translation: the identity.
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result translate(const M& mem, x86::gpa address) const noexcept {
    ept_request req{};
    req.address = address;
    return check(mem, req);
  }
  template <guest_memory M>
  constexpr bool walk_checked(const M&, const ept_request& req, host_translation& t, walk_fault&,
                              std::uint64_t& all) const noexcept {
    t = host_translation{};  // every member is written (the nested walk does not clear `t`)
    t.address = x86::hpa{req.address.value()};
    t.page_shift = 12;
    t.rights = pte_access::ept_rights;
    t.path.start(req.address.value(), 9, 8);
    all = ~std::uint64_t{0};
    return true;
  }
  [[nodiscard]] static constexpr bool needs_ad(const ept_request&, std::uint64_t) noexcept { return false; }
  struct upper_cache {};
  template <guest_memory M>
  constexpr bool walk_checked_final(const M& mem, const ept_request& req, const upper_cache&, host_translation& t,
                                    walk_fault& f, std::uint64_t& all) const noexcept {
    return walk_checked(mem, req, t, f, all);
  }
  template <guest_memory M>
  constexpr bool walk_checked_cached(const M&, const ept_request& req, upper_cache&, host_translation&, walk_fault&,
                                     x86::gpa& address, std::uint64_t& all) const noexcept {
    address = req.address;
    all = ~std::uint64_t{0};
    return true;
  }
};

namespace detail {

/// The walk_stage a nested walk's own faults (an unbacked table) name for `Stage`.
template <class Stage>
[[nodiscard]] consteval walk_stage second_stage_kind() noexcept {
  if constexpr (requires { Stage::fault_stage; }) {
    return Stage::fault_stage;
  } else {
    return walk_stage::ept;
  }
}
template <class Stage>
inline constexpr walk_stage second_stage_of = second_stage_kind<Stage>();

/// Pending second-stage A/D updates, merged by address.
struct pending_ad {
  struct item {
    x86::gpa address{};
    std::uint64_t value = 0;
    std::uint64_t want = 0;
    std::uint8_t bytes = 8;  ///< entry width (4: a 32-bit host's NPT entries)
  };
  std::array<item, 32> items{};
  unsigned count = 0;
  bool overflow = false;

  constexpr void add(x86::gpa a, std::uint64_t value, std::uint64_t want, unsigned bytes = 8) noexcept {
    if ((value & want) == want) return;
    for (unsigned i = 0; i < count; ++i) {
      if (items[i].address == a) {
        items[i].want |= want;
        return;
      }
    }
    if (count < items.size()) {
      items[count++] = item{a, value, want, static_cast<std::uint8_t>(bytes)};
    } else {
      overflow = true;
    }
  }
  template <class Stage>
  constexpr void add_path(const Stage& stage, const host_translation& t, bool dirty) noexcept {
    for (unsigned i = 0; i < t.path.count; ++i) {
      // A stage whose entries do not all carry A (an NPT PAE host's PDPTE) says so per entry.
      std::uint64_t want = 0;
      if constexpr (requires { stage.ad_bits(t.path, i, dirty); }) {
        want = stage.ad_bits(t.path, i, dirty);
      } else {
        want = stage.ad_bits(i + 1 == t.path.count, dirty);
      }
      add(x86::gpa{t.path[i].address.value()}, t.path.values[i], want, t.path.entry_bytes);
    }
  }
};

/// The per-walk cache of a second stage: its table_cache if it has one (ept_walker), else
/// its upper_cache (used through walk_checked_cached()).
template <class Stage>
struct stage_cache {
  using type = typename Stage::upper_cache;
};
template <class Stage>
  requires requires { typename Stage::table_cache; }
struct stage_cache<Stage> {
  using type = typename Stage::table_cache;
};

/// What a second stage's table-read misses fill for the final access (ept_walker::table_fill).
template <class Stage>
struct stage_fill {
  struct type {};
};
template <class Stage>
  requires requires { typename Stage::table_fill; }
struct stage_fill<Stage> {
  using type = typename Stage::table_fill;
};

/// The checked second-stage walk of `req` without A/D writes, out of line: every report and
/// slow path of a nested walk shares this one copy (ept_walker's walk_checked_outlined()).
template <class Stage, class M>
[[gnu::noinline]] constexpr host_walk_result stage_check(const Stage& stage, const M& mem, const ept_request& req) noexcept {
  if constexpr (requires { stage.check_outlined(mem, req); }) {
    return stage.check_outlined(mem, req);
  } else {
    return stage.check(mem, req);
  }
}

/// How a nested walk's table accessor translates the table reads: the fast path (no
/// second-stage report per access), the slow path (every access recorded for the A/D
/// updates), or the raw translation (nested_walker::translate(): no permission checks).
enum class table_mode : std::uint8_t { fast, record, raw };

/// The full report of a guest table read that failed on the fast path (recomputed uncached).
/// A free function: a member would make the accessor (and its cache) escape the fast path.
template <class Stage, class M>
[[gnu::cold, gnu::noinline]] constexpr void table_fault(const Stage& stage, const M& mem, x86::gpa a, x86::gva linear,
                                                       walk_fault& f) noexcept {
  ept_request r{};
  r.address = a;
  r.access = ept_access::read;
  r.origin = ept_origin::paging_structure;
  r.linear_valid = true;
  r.linear = linear;
  f = stage_check(stage, mem, r).error();
}

/// The table accessor of a nested walk (see basic_walker::walk_with), in one table_mode.
template <class Stage, guest_memory M, table_mode Mode = table_mode::fast>
struct nested_tables {
  /// The second stage translates the fast path's table reads with its own table_read() (a
  /// cache made for them, ept_walker), or with walk_checked_cached().
  static constexpr bool table_cached = requires { typename Stage::table_cache; };
  struct no_scratch {};

  constexpr nested_tables(const Stage* s, M* m, x86::gva lin) noexcept : stage(s), mem(m), linear(lin) {}

  const Stage* stage;
  M* mem;
  x86::gva linear{};
  pending_ad* ept_ad = nullptr;  ///< where the slow path records second-stage A/D updates
  /// L2 gpa -> L1 address of the guest entries read, for their A/D updates; only the first
  /// `mapped` are meaningful (left uninitialized: written before they are read).
  std::uint64_t l2[max_levels];
  std::uint64_t l1[max_levels];
  unsigned mapped = 0;
  /// The second stage's translation of the last table read (walk_checked_cached() only).
  [[no_unique_address]] std::conditional_t<table_cached, no_scratch, host_translation> scratch{};
  /// The second stage's cache of the table reads (see stage_cache), and what its misses
  /// fill for the final access (ept_walker::table_fill; nothing for other stages).
  typename stage_cache<Stage>::type cache;
  /// A local of the walk, not a member: the out-of-line miss takes its address, and a
  /// member's would make this whole accessor (the cache included) live in memory.
  [[no_unique_address]] std::conditional_t<table_cached, typename stage_fill<Stage>::type*, no_scratch> fill{};
  static constexpr bool Raw = Mode == table_mode::raw;  ///< no second-stage permission checks
  static constexpr bool record = Mode == table_mode::record;  ///< collect second-stage A/D updates
  /// Fast path without table_read(): the AND of the second stage's `all` over the table
  /// reads (every read is the same access class, so one needs_ad() test of the AND tells
  /// whether any lacks A/D; with table_read() the cache keeps that AND).
  std::uint64_t table_all = ~std::uint64_t{0};

  static constexpr bool can_update = writable_guest_memory<M>;

  [[nodiscard]] constexpr ept_request table_request(x86::gpa a, ept_access acc) const noexcept {
    ept_request r{};
    r.address = a;
    r.access = acc;
    r.origin = ept_origin::paging_structure;
    r.linear_valid = true;
    r.linear = linear;
    return r;
  }

  /// The second stage's checked walk of a table access `acc` at `a` (no A/D writes): out of
  /// line, one copy per configuration, for the slow path and the fault reports (keeping the
  /// full second-stage walk out of every guest level of the fast path).
  [[gnu::always_inline]] constexpr host_walk_result checked(x86::gpa a, ept_access acc) const noexcept {
    return stage_check(*stage, *mem, table_request(a, acc));
  }
  /// The raw second-stage translation of `a` (translate()), out of line as checked().
  [[gnu::noinline]] constexpr host_walk_result raw_translate(x86::gpa a) const noexcept { return stage->translate(*mem, a); }

  /// The second stage of a table read on the slow path (or raw): a full walk_result,
  /// recorded for the A/D updates. Out of line: the fast path carries only a call per level.
  [[gnu::cold, gnu::noinline]] constexpr bool translate_recorded(x86::gpa a, x86::gpa& h, walk_fault& f) noexcept {
    host_walk_result s{host_translation{}};
    if constexpr (Raw) {
      s = raw_translate(a);
    } else {
      s = checked(a, ept_access::read);
    }
    if (!s) [[unlikely]] {
      f = s.error();
      return false;
    }
    // With EPT A/D the paging-structure access is a write: D on the EPT leaf too.
    if (record && ept_ad) ept_ad->add_path(*stage, *s, stage->ad_enabled());
    h = x86::gpa{s->address.value()};  // the memory object's own address for it
    // Where each entry was read, for the guest A/D updates of the slow path (the fast path
    // makes none).
    if (record && mapped < max_levels) {
      l2[mapped] = a.value();
      l1[mapped] = h.value();
      ++mapped;
    }
    return true;
  }

  template <unsigned Bytes>
  [[gnu::always_inline]] constexpr bool read(x86::gpa a, std::uint64_t& out, walk_fault& f) noexcept {
    x86::gpa h{};
    if constexpr (Mode == table_mode::fast) {
      // Fast path: no walk_result per access; a fault is recomputed with its full report.
      if constexpr (table_cached) {
        std::uint64_t hv = 0;
        if (!stage->table_read(*mem, a.value(), cache, *fill, hv)) [[unlikely]] {
          table_fault(*stage, *mem, a, linear, f);
          return false;
        }
        h = x86::gpa{hv};
      } else {
        const ept_request req = table_request(a, ept_access::read);
        std::uint64_t all = 0;
        if (!stage->walk_checked_cached(*mem, req, cache, scratch, f, h, all)) [[unlikely]] {
          table_fault(*stage, *mem, a, linear, f);
          return false;
        }
        table_all &= all;
      }
    } else {
      if (!translate_recorded(a, h, f)) [[unlikely]] return false;
    }
    if constexpr (Bytes == 4) {
      std::uint32_t v = 0;
      if (read_entry(*mem, h, v)) [[likely]] {
        out = v;
        return true;
      }
    } else {
      if (read_entry(*mem, h, out)) [[likely]] return true;
    }
    f.kind = fault_kind::unbacked;
    f.stage = second_stage_of<Stage>;
    f.guest_physical = a;
    f.set_entry_address(x86::hpa{h.value()});  // where the guest entry would be, host-physical
    return false;
  }

  /// The fast path's table reads need second-stage A/D updates.
  [[nodiscard, gnu::always_inline]] constexpr bool tables_need_ad() const noexcept {
    if constexpr (table_cached) {
      return stage->table_needs_ad(cache, *fill);
    } else {
      return stage->needs_ad(table_request(x86::gpa{}, ept_access::read), table_all);
    }
  }

  // GCC's -O3 cannot see that l2[i] and l1[i] for i < mapped were written by the table reads
  // before any A/D update looks them up; zero-filling them costs every nested walk stores.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  [[nodiscard]] constexpr x86::gpa l1_of(x86::gpa a) const noexcept {
    for (unsigned i = 0; i < mapped; ++i)
      if (l2[i] == a.value()) return x86::gpa{l1[i]};
    return a;  // not reached: every entry written was read first
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  constexpr bool prepare_updates(walk_fault&) const noexcept { return true; }

  /// A guest A/D update is a write to the guest table: it needs EPT write permission
  /// (already checked with EPT A/D, where the read was treated as a write).
  template <unsigned Bytes>
  constexpr bool check_update(x86::gpa a, unsigned, walk_fault& f) const noexcept {
    if (stage->ad_enabled()) return true;
    const host_walk_result s = checked(a, ept_access::write);
    if (!s) {
      f = s.error();
      return false;
    }
    return true;
  }

  template <unsigned Bytes>
  constexpr int update(x86::gpa a, std::uint64_t old, std::uint64_t val, walk_fault& f) noexcept {
    if constexpr (writable_guest_memory<M>) {
      const x86::gpa h = l1_of(a);
      const auto r = Bytes == 4 ? mem->cmpxchg32(h, static_cast<std::uint32_t>(old), static_cast<std::uint32_t>(val))
                                : mem->cmpxchg64(h, old, val);
      if (!r) {
        f.kind = fault_kind::unbacked;
        f.stage = second_stage_of<Stage>;
        f.guest_physical = a;
        f.set_entry_address(x86::hpa{h.value()});
        return -1;
      }
      return *r ? 1 : 0;
    } else {
      static_cast<void>(a), static_cast<void>(old), static_cast<void>(val), static_cast<void>(f);
      return 1;
    }
  }
  constexpr bool commit() const noexcept { return true; }
};

}  // namespace detail

/// A nested walker: a guest walker (format Format) over a second stage (ept_walker,
/// npt_walker<HostFormat> of paging/npt.hpp, or identity_stage).
template <class Format, class Stage = ept_walker>
class nested_walker {
 public:
  constexpr nested_walker(const basic_walker<Format>& guest, const Stage& stage) noexcept
      : guest_(guest), stage_(stage) {}

  /// The checked walk of `req.linear` through both stages, with the A/D updates of both
  /// (see the file comment for the order; none with read-only memory or `update_ad = false`).
  ///
  /// Out of line (never force-inlined): one instantiation per configuration (guest format,
  /// second stage, memory type) serves every call site, so a further call site costs a call,
  /// not another copy of the walk (docs/paging-walkers.md, "Compile cost and code size").
  template <guest_memory M>
  [[nodiscard, gnu::noinline]] constexpr nested_result walk(M& mem, const mmu_context& mmu,
                                                            const walk_request& req) const noexcept {
    // Fast path: no second-stage report per access, and no A/D work when every flag is set.
    // The guest walk and the final second-stage translation go straight into the result
    // (one named result, NRVO; no copies); the final translation reuses the second stage's
    // upper entries of the table reads when it lies in the same 2 MiB region
    // (walk_checked_final).
    nested_result r{hvkit::detail::default_init};
    translation& g = r.value().guest;
    host_translation& second = r.value().second;
    detail::nested_tables<Stage, M> tables(&stage_, &mem, req.linear);
    typename detail::stage_fill<Stage>::type fill;
    if constexpr (detail::nested_tables<Stage, M>::table_cached) tables.fill = &fill;
    std::uint64_t guest_all = 0;
    walk_fault gf{};
    // The guest's output address goes on to the final access in a register (stored into
    // `g` beside it, off the walk's dependency chain).
    std::uint64_t l2 = 0;
    if (!guest_.walk_checked(tables, mmu, req, g, gf, guest_all, l2)) [[unlikely]] {
      r = nested_result(unexpected(gf));
      return r;
    }
    g.address = x86::gpa{l2};
    const ept_request fin = final_request(req, g, l2);
    walk_fault ef{};
    std::uint64_t all = 0;
    bool final_ok = false;
    if constexpr (detail::nested_tables<Stage, M>::table_cached) {
      final_ok = stage_.walk_checked_final(mem, fin, tables.cache, fill, second, ef, all);
    } else {
      final_ok = stage_.walk_checked_final(mem, fin, tables.cache, second, ef, all);
    }
    if (!final_ok) [[unlikely]] {
      r = nested_result(unexpected(final_fault(mem, fin)));
      return r;
    }
    if constexpr (writable_guest_memory<M>) {
      if (req.update_ad && (tables.tables_need_ad() ||
                             stage_.needs_ad(fin, all) ||
                             basic_walker<Format>::needs_ad(req, guest_all))) [[unlikely]] {
        r = walk_slow(mem, mmu, req);
        return r;
      }
    }
    return r;
  }

 private:
  /// The final access with the rights of the guest translation (SDM 29.3.3.2: under MBEC,
  /// XU applies to fetches from user-mode linear addresses).
  [[nodiscard]] static constexpr ept_request final_request(const walk_request& req, const translation& g) noexcept {
    return final_request(req, g, g.address.value());
  }
  /// As above, the guest's output address `l2` passed on its own (in a register).
  [[nodiscard]] static constexpr ept_request final_request(const walk_request& req, const translation& g,
                                                           std::uint64_t l2) noexcept {
    ept_request fin{};
    fin.address = x86::gpa{l2};
    fin.linear_valid = true;
    fin.linear = req.linear;
    // Bit tests by hand (flags::test() may be left out of line in a large nested walk).
    const std::uint64_t a = req.access.raw();
    if (a & x86::pfec::fetch.raw()) {
      fin.access = ept_access::fetch;
      if (g.rights.raw() & pte_access::user.raw()) fin.access = fin.access | ept_access::user_address;
    } else if (a & x86::pfec::write.raw()) {
      fin.access = ept_access::write;
    } else {
      fin.access = ept_access::read;
    }
    return fin;
  }

  /// The full report of a final access that failed on the fast path (recomputed uncached).
  template <guest_memory M>
  [[gnu::cold, gnu::noinline]] constexpr walk_fault final_fault(const M& mem, const ept_request& fin) const noexcept {
    return detail::stage_check(stage_, mem, fin).error();
  }

  /// The slow path: the walk again, recording every second-stage entry, then the A/D updates.
  template <guest_memory M>
  [[gnu::cold, gnu::noinline]] constexpr nested_result walk_slow(M& mem, const mmu_context& mmu,
                                                      const walk_request& req) const noexcept {
    for (unsigned attempt = 0;; ++attempt) {
      detail::nested_tables<Stage, M, detail::table_mode::record> tables(&stage_, &mem, req.linear);
      detail::pending_ad pending{};
      tables.ept_ad = &pending;
      // The guest walk without its own A/D path (walk_checked(): update_slow is never
      // instantiated here), the final access through the out-of-line checked walk.
      nested_result out{};
      translation& g = out.value().guest;
      walk_fault gf{};
      std::uint64_t guest_all = 0;
      if (!guest_.walk_checked(tables, mmu, req, g, gf, guest_all)) return unexpected(gf);
      const ept_request fin = final_request(req, g);
      const host_walk_result s = stage_checked(mem, fin);
      if (!s) return unexpected(s.error());
      out.value().second = *s;
      if constexpr (writable_guest_memory<M>) {
        if (!req.update_ad) return out;
        walk_fault f{};
        f.linear = req.linear;
        const int u = guest_.update_accessed_dirty(tables, g, req.access.test(x86::pfec::write), f);
        if (u < 0) return unexpected(f);
        if (u > 0) {
          pending.add_path(stage_, *s, fin.access.test(ept_access::write));
          const int e = apply(mem, pending);
          if (e > 0) [[likely]] return out;
          if (e < 0) {
            f.kind = fault_kind::unbacked;
            f.stage = detail::second_stage_of<Stage>;
            return unexpected(f);
          }
        }
        if (attempt + 1 >= max_ad_retries) {
          f.kind = fault_kind::retry_exhausted;
          return unexpected(f);
        }
      } else {
        return out;
      }
    }
  }

 public:
  /// The checked walk of both stages without A/D updates (memory is not written).
  template <guest_memory M>
  [[nodiscard]] constexpr nested_result check(const M& mem, const mmu_context& mmu,
                                              const walk_request& req) const noexcept {
    walk_request r = req;
    r.update_ad = false;  // no A/D path at all, whatever `M` offers
    return walk(mem, mmu, r);
  }

  /// The raw translation through both stages: no permission checks, no A/D updates.
  template <guest_memory M>
  [[nodiscard]] constexpr nested_result translate(const M& mem, x86::gva linear) const noexcept {
    detail::nested_tables<Stage, const M, detail::table_mode::raw> tables(&stage_, &mem, linear);
    translation g{};
    walk_fault f{};
    f.linear = linear;
    if (!guest_.walk_tables(tables, linear, g, f)) return unexpected(f);
    const host_walk_result s = stage_.translate(mem, g.address);
    if (!s) return unexpected(s.error());
    return nested_translation{g, *s};
  }

 private:
  template <guest_memory M>
  [[gnu::always_inline]] constexpr host_walk_result stage_checked(const M& mem, const ept_request& req) const noexcept {
    return detail::stage_check(stage_, mem, req);
  }

  template <class M>
  static constexpr int apply(M& mem, const detail::pending_ad& p) noexcept {
    for (unsigned i = 0; i < p.count; ++i) {
      const auto& it = p.items[i];
      const auto r = it.bytes == 4 ? mem.cmpxchg32(it.address, static_cast<std::uint32_t>(it.value),
                                                   static_cast<std::uint32_t>(it.value | it.want))
                                   : mem.cmpxchg64(it.address, it.value, it.value | it.want);
      if (!r) return -1;
      if (!*r) return 0;
    }
    return p.overflow ? 0 : 1;
  }

  basic_walker<Format> guest_;
  Stage stage_;
};

namespace format {
/// A guest with paging off (CR0.PG = 0): linear addresses are guest-physical (32 bits, SDM
/// 4.1.1), only the second stage translates. For nested_walker<format::paging_off, Stage>.
struct paging_off {
  static constexpr x86::paging_mode mode = x86::paging_mode::none;
};
}  // namespace format

/// The nested walk of a guest with paging off: the linear address (bits 31:0) is the L2
/// guest-physical address (SDM 4.1.1: without paging "linear addresses are used directly as
/// physical addresses"), translated by the second stage as the final access (qualification
/// bits 7 and 8 set: the access has a guest-linear address, SDM 28.2.1). Every linear address
/// is a supervisor-mode address here (no U/S bit exists), so under MBEC a fetch needs XS.
/// Same verbs as the paging nested_walker; the mmu_context must have paging off (else
/// fault_kind::mode_mismatch).
template <class Stage>
class nested_walker<format::paging_off, Stage> {
 public:
  constexpr explicit nested_walker(const Stage& stage) noexcept : stage_(stage) {}

  /// The checked walk with the second stage's A/D updates.
  template <guest_memory M>
  [[nodiscard]] constexpr nested_result walk(M& mem, const mmu_context& mmu, const walk_request& req) const noexcept {
    return run(mmu, req, [&](const ept_request& fin) {
      if constexpr (writable_guest_memory<M>) {
        if (req.update_ad) return stage_.walk(mem, fin);
      }
      return stage_.check(std::as_const(mem), fin);
    });
  }
  /// The checked walk without A/D updates.
  template <guest_memory M>
  [[nodiscard]] constexpr nested_result check(const M& mem, const mmu_context& mmu,
                                              const walk_request& req) const noexcept {
    return run(mmu, req, [&](const ept_request& fin) { return stage_.check(mem, fin); });
  }
  /// The raw translation (no rights, no A/D).
  template <guest_memory M>
  [[nodiscard]] constexpr nested_result translate(const M& mem, x86::gva linear) const noexcept {
    const translation g = guest(linear);
    const host_walk_result s = stage_.translate(mem, g.address);
    if (!s) return unexpected(s.error());
    return nested_translation{g, *s};
  }

 private:
  [[nodiscard]] static constexpr translation guest(x86::gva linear) noexcept {
    translation g{};
    g.address = x86::gpa{linear.value() & 0xffff'ffffu};
    g.page_shift = 12;
    g.rights = pte_access::paging_rights;
    return g;
  }
  template <class F>
  [[nodiscard]] constexpr nested_result run(const mmu_context& mmu, const walk_request& req, F&& second) const noexcept {
    if (mmu.role().mode() != x86::paging_mode::none) {
      walk_fault f{};
      f.kind = fault_kind::mode_mismatch;
      f.linear = req.linear;
      return unexpected(f);
    }
    const translation g = guest(req.linear);
    ept_request fin{};
    fin.address = g.address;
    fin.linear_valid = true;
    fin.linear = req.linear;
    const std::uint64_t a = req.access.raw();
    fin.access = (a & x86::pfec::fetch.raw())   ? ept_access::fetch
                 : (a & x86::pfec::write.raw()) ? ept_access::write
                                                : ept_access::read;
    const host_walk_result s = second(fin);
    if (!s) return unexpected(s.error());
    return nested_translation{g, *s};
  }
  Stage stage_;
};

/// Loads the PAE PDPTE registers of a guest whose memory lies behind EPT (MOV to CR3, or a
/// CR0/CR4 write entering PAE paging, in VMX non-root operation with EPT; SDM 4.4.1). The
/// PDPT (32 bytes, 32-byte aligned: one page, one translation) is translated as a *PDPTE
/// load*, its own EPT access class (ept_origin::pdpte_load): a read whatever EPT A/D says,
/// so never a violation for "not writable" and no D flag; A flags are set with EPT A/D
/// when `memory` is writable; the qualification of a violation has bit 0 and no
/// guest-linear address (SDM 29.3.3.2, 29.3.5, 28.2.1). Then the entries are read and
/// checked as by load_pdptrs(cr3, memory, maxphyaddr). `memory` is the memory the EPT
/// tables and the guest's memory live in (as for nested_walker); a read-only view may be
/// passed as a temporary.
///
/// `ept` may be any second stage with the walker verbs (ept_walker, or an npt_walker of
/// paging/npt.hpp for a PAE guest under AMD nested paging: the PDPT read is then a guest
/// page-table access, a user write to the nested tables, APM 15.25.5, and a failure is the
/// #NPF in pdptr_error::ept with stage npt).
template <class M, class Stage>
  requires guest_memory<std::remove_cvref_t<M>> && requires(const Stage& st, const std::remove_cvref_t<M>& m,
                                                            const ept_request& r) { st.check(m, r); }
[[nodiscard]] constexpr result<pdpte_snapshot, pdptr_error> load_pdptrs(x86::cr3 cr3, M&& memory, unsigned maxphyaddr,
                                                                       const Stage& ept) noexcept {
  const x86::gpa pdpt = x86::cr3_root(cr3, x86::paging_mode::pae, maxphyaddr);
  ept_request req{};
  req.address = pdpt;
  req.access = ept_access::read;
  req.origin = ept_origin::pdpte_load;
  host_walk_result s{host_translation{}};
  if constexpr (writable_guest_memory<std::remove_cvref_t<M>> && !std::is_const_v<std::remove_reference_t<M>>) {
    s = ept.walk(memory, req);
  } else {
    s = ept.check(memory, req);
  }
  if (!s) {
    pdptr_error e{pdptr_error::kind_type::ept, 0, 0, pdpt};
    e.ept = s.error();
    if (e.ept.kind == fault_kind::unbacked) e.kind = pdptr_error::kind_type::unbacked;
    return unexpected(e);
  }
  return detail::read_pdptes(std::as_const(memory), pdpt, x86::gpa{s->address.value()}, maxphyaddr);
}

}  // namespace hvkit::paging
