// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest page-table walker: one template over the entry format and number of
/// levels, instantiated for 32-bit, PAE, 4-level and 5-level paging, with permission checks
/// through mmu_context, A/D updates by compare-exchange and a rich fault report.
///
/// Order of a walk (SDM 4.3-4.8):
///  1. with IA-32e paging, the canonical check (#GP(0), or #SS(0) for a stack access);
///  2. the walk from the root (CR3 bits with control/PCID bits stripped, or the PAE PDPTE
///     snapshot): per level P (not present), reserved bits (RSVD), rights ANDed;
///  3. the permission check on the accumulated rights (mmu_context::permission_fault);
///  4. only then A on every entry used and D on the leaf of a write, by compare-exchange;
///     if an entry changed in between the walk is redone (at most `max_ad_retries` times).
///     Nothing is written by a faulting walk; read-only memory or `update_ad = false`
///     writes nothing at all.
/// Every table read goes through a "table accessor" (a guest_memory directly, or a second
/// stage, see paging/nested.hpp), resolved at compile time.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "access.hpp"
#include "guest_memory.hpp"
#include "memory_holder.hpp"
#include "mmu.hpp"
#include "pdptr.hpp"
#include "pkru.hpp"
#include "pte.hpp"
#include "reserved.hpp"
#include "role.hpp"
#include "walk_result.hpp"
#include "../x86/address.hpp"
#include "../x86/cr3.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/pfec.hpp"
#include "../x86/result.hpp"
#include "../x86/rflags.hpp"
#include "../x86/vector.hpp"

namespace hvkit::paging {

namespace detail {
/// The first member of cpu_properties: constructible only by its (explicit) default
/// constructor, so that no positional initialiser list can reach the properties.
struct by_name_only {
  explicit constexpr by_name_only() noexcept = default;
};
}  // namespace detail

/// Processor properties a walk depends on beyond the control registers.
///
/// Built by name only: `cpu_properties{}` (the defaults) or designated initialisers,
/// `cpu_properties{.maxphyaddr = 40, .gbpages = false}`, or by assigning members. The
/// positional form `cpu_properties{40, true, false}` does not compile (its first value would
/// initialise the hidden first member), so adding a property can never re-mean an old call.
struct cpu_properties {
  /// Not a property: makes positional initialisation ill-formed (see the struct comment).
  [[no_unique_address]] detail::by_name_only by_name_only_{};
  unsigned maxphyaddr = 52;       ///< CPUID.80000008H:EAX[7:0], 32..52
  bool gbpages = true;            ///< 1 GiB pages (CPUID.80000001H:EDX[26])
  bool amd_nonleaf_bit8 = false;  ///< AMD: bit 8 of PML4E/PML5E is reserved
  /// PSE-36 (CPUID.01H:EDX[17]): 4 MiB pages of 32-bit paging reach above 4 GiB through PDE
  /// bits 20:13; without it PDE bits 21:13 of a 4 MiB page are reserved (SDM 4.3, Table 4-4).
  /// Every recent processor has it.
  bool pse36 = true;
  /// AMD nested paging: a #NPF on an instruction fetch reports ID (EXITINFO1 bit 4) even when
  /// the host's EFER.NXE is 0. APM Vol. 2 15.25.6 describes bit 4 without an NXE condition
  /// (the default, as Bochs' AMD models do); false is the #PF error-code rule (I/D only with
  /// NXE, APM 8.4.2), as QEMU TCG reports it. Evidence: docs/svm.md.
  bool npf_fetch_id_without_nxe = true;
};

/// One access to translate.
struct walk_request {
  x86::gva linear{};
  /// The access: x86::pfec::write, ::user (CPL 3 and not implicit), ::fetch,
  /// ::implicit_access, ::ss (shadow stack); the same meaning as for permission_fault().
  x86::pfec access{};
  x86::rflags rflags{};     ///< only AC matters (SMAP)
  std::uint32_t pkru = 0;   ///< PKRU, for user-mode addresses with CR4.PKE
  std::uint32_t pkrs = 0;   ///< IA32_PKRS, for supervisor-mode addresses with CR4.PKS
  bool stack = false;       ///< an SS-relative access: non-canonical is #SS(0), not #GP(0)
  bool update_ad = true;    ///< set A/D flags (only with writable_guest_memory)
};

/// How many times a walk is redone when an entry changes under its A/D update.
inline constexpr unsigned max_ad_retries = 8;

/// Entry formats: the static shape of each paging mode.
namespace format {
/// 32-bit paging (SDM 4.3): two levels of 4-byte entries, 10 index bits each.
struct ia32 {
  static constexpr x86::paging_mode mode = x86::paging_mode::two_level;
  static constexpr unsigned levels = 2;
  static constexpr unsigned entry_bytes = 4;
  static constexpr unsigned index_bits = 10;
  static constexpr bool pdpte_registers = false;
  static constexpr std::uint64_t address_mask = 0xffff'f000u;
  [[nodiscard]] static constexpr unsigned shift(unsigned level) noexcept { return 12 + 10 * (level - 1); }
  /// A 4 MiB page: bits 31:22 from the PDE, bits 39:32 from PDE bits 20:13 (PSE-36,
  /// SDM 4.3, Table 4-4); bits 21:13 beyond MAXPHYADDR (all of them without PSE-36, see
  /// cpu_properties::pse36) are reserved, PAT (12) is not address.
  [[nodiscard]] static constexpr std::uint64_t large_base(std::uint64_t e, unsigned) noexcept {
    return (e & 0xffc0'0000u) | (pte::pse36_field::get(e) << 32);
  }
};
/// PAE paging (SDM 4.4): the PDPTE registers, then PD and PT of 8-byte entries.
struct pae {
  static constexpr x86::paging_mode mode = x86::paging_mode::pae;
  static constexpr unsigned levels = 3;
  static constexpr unsigned entry_bytes = 8;
  static constexpr unsigned index_bits = 9;
  static constexpr bool pdpte_registers = true;
  static constexpr std::uint64_t address_mask = 0x000f'ffff'ffff'f000u;
  [[nodiscard]] static constexpr unsigned shift(unsigned level) noexcept { return 12 + 9 * (level - 1); }
  [[nodiscard]] static constexpr std::uint64_t large_base(std::uint64_t e, unsigned level) noexcept {
    return e & address_mask & ~((std::uint64_t{1} << shift(level)) - 1);
  }
};
/// 4-level (Levels = 4) and 5-level (Levels = 5) paging (SDM 4.5).
template <unsigned Levels>
struct ia32e {
  static_assert(Levels == 4 || Levels == 5);
  static constexpr x86::paging_mode mode = Levels == 4 ? x86::paging_mode::four_level : x86::paging_mode::five_level;
  static constexpr unsigned levels = Levels;
  static constexpr unsigned entry_bytes = 8;
  static constexpr unsigned index_bits = 9;
  static constexpr bool ia32e_mode = true;
  static constexpr bool pdpte_registers = false;
  static constexpr std::uint64_t address_mask = 0x000f'ffff'ffff'f000u;
  static constexpr x86::linear_width width = Levels == 4 ? x86::linear_width::la48 : x86::linear_width::la57;
  [[nodiscard]] static constexpr unsigned shift(unsigned level) noexcept { return 12 + 9 * (level - 1); }
  [[nodiscard]] static constexpr std::uint64_t large_base(std::uint64_t e, unsigned level) noexcept {
    // The PAT bit (12) of a 2 MiB/1 GiB page lies below the page size: never address.
    return e & address_mask & ~((std::uint64_t{1} << shift(level)) - 1);
  }
};
}  // namespace format

namespace detail {

template <class F>
concept has_ia32e = requires { F::ia32e_mode; };

/// The walk's per-access data that the table accessor needs (nested walks use it for the
/// EPT-violation exit qualification).
struct table_access {
  x86::gva linear{};
  bool fetch_user_address = false;
};

/// Reads guest tables straight from a guest_memory.
template <guest_memory M>
struct direct_tables {
  memory_holder<M> mem;
  constexpr explicit direct_tables(M* m) noexcept : mem(m) {}
  template <unsigned Bytes>
  constexpr bool read(x86::gpa a, std::uint64_t& out, walk_fault& f) const noexcept {
    if constexpr (Bytes == 4) {
      std::uint32_t v = 0;
      if (detail::read_entry(*mem, a, v)) [[likely]] {
        out = v;
        return true;
      }
    } else {
      if (detail::read_entry(*mem, a, out)) [[likely]] return true;
    }
    f.kind = fault_kind::unbacked;
    f.guest_physical = a;
    return false;
  }
  /// 1 = written, 0 = the entry changed (re-walk), -1 = failed (f filled).
  template <unsigned Bytes>
  constexpr int update(x86::gpa a, std::uint64_t old, std::uint64_t val, walk_fault& f) noexcept {
    if constexpr (writable_guest_memory<M>) {
      const auto r = Bytes == 4 ? mem->cmpxchg32(a, static_cast<std::uint32_t>(old), static_cast<std::uint32_t>(val))
                                : mem->cmpxchg64(a, old, val);
      if (!r) {
        f.kind = fault_kind::unbacked;
        f.guest_physical = a;
        return -1;
      }
      return *r ? 1 : 0;
    } else {
      static_cast<void>(a), static_cast<void>(old), static_cast<void>(val), static_cast<void>(f);
      return 1;
    }
  }
  static constexpr bool can_update = writable_guest_memory<M>;
  constexpr bool prepare_updates(walk_fault&) const noexcept { return true; }
  template <unsigned Bytes>
  constexpr bool check_update(x86::gpa, unsigned, walk_fault&) const noexcept { return true; }
  constexpr bool commit() const noexcept { return true; }
};

}  // namespace detail

/// What every guest walker holds: the root, the reserved masks, the PDPTEs (PAE) and the
/// few role bits the walk itself needs (the permission check stays with mmu_context).
struct walker_state {
  x86::paging_mode mode = x86::paging_mode::none;
  x86::gpa root{};
  reserved_masks rsvd{};
  bool nx = false;        ///< EFER.NXE with PAE/IA-32e paging: bit 63 is XD
  bool fetch_bit = false; ///< PFEC.I/D is reported: CR4.SMEP or (CR4.PAE and EFER.NXE) (SDM 4.7)
  pdpte_snapshot pdptes{};
};

/// Builds the walker state from a role, the root (e.g. x86::cr3_root(cr3, mode, maxphyaddr))
/// and processor properties; `pdptes` is the PAE snapshot (load_pdptrs), unused otherwise.
[[nodiscard]] constexpr walker_state make_walker_state(cpu_role role, x86::gpa root, cpu_properties props,
                                                       pdpte_snapshot pdptes = {}) noexcept {
  walker_state s{};
  s.mode = role.mode();
  s.root = root;
  s.nx = role.efer_nx();
  s.fetch_bit = role.smep() || role.efer_nx();
  s.rsvd = reserved_bits(s.mode, reserved_params{props.maxphyaddr, role.efer_nx(), role.pse(), props.gbpages,
                                                 props.amd_nonleaf_bit8, props.pse36});
  s.pdptes = pdptes;
  return s;
}

/// The guest page-table walker for one entry format.
template <class Format>
class basic_walker {
 public:
  using format_type = Format;

  constexpr basic_walker() noexcept = default;
  constexpr explicit basic_walker(const walker_state& s) noexcept : s_(s) {}
  /// The walker for `mmu`'s role and root (not for PAE: its walker needs the PDPTEs).
  constexpr basic_walker(const mmu_context& mmu, cpu_properties props) noexcept
    requires(!Format::pdpte_registers)
      : s_(make_walker_state(mmu.role(), mmu.root(), props)) {}
  /// The walker for `mmu`'s role and root with the PAE PDPTE registers `pdptes` (the
  /// snapshot of load_pdptrs(); unused by the other formats).
  constexpr basic_walker(const mmu_context& mmu, cpu_properties props, pdpte_snapshot pdptes) noexcept
      : s_(make_walker_state(mmu.role(), mmu.root(), props, pdptes)) {}

  [[nodiscard]] constexpr const walker_state& state() const noexcept { return s_; }

  /// The checked walk of `req.linear` for the access `req.access`: the canonical check, the
  /// walk, the permission check through `mmu`, then A/D updates (see the file comment).
  /// The verbs of every hvkit walker: walk() = checked walk with A/D updates; check() = the
  /// same without A/D writes (const memory); translate() = raw translation (no rights, no A/D).
  template <guest_memory M>
  [[nodiscard, gnu::always_inline]] constexpr walk_result walk(M& mem, const mmu_context& mmu,
                                                               const walk_request& req) const noexcept {
    detail::direct_tables<M> tables(&mem);
    return walk_with(tables, mmu, req);
  }

  /// The checked walk without A/D updates: the canonical check, the walk and the permission
  /// check through `mmu`, exactly as walk(), and nothing written to `mem`.
  template <guest_memory M>
  [[nodiscard, gnu::always_inline]] constexpr walk_result check(const M& mem, const mmu_context& mmu,
                                                                const walk_request& req) const noexcept {
    detail::direct_tables<const M> tables(&mem);
    walk_request r = req;
    r.update_ad = false;  // no A/D path at all, whatever `M` offers
    return walk_with(tables, mmu, r);
  }

  /// The raw translation of `linear`: no permission checks and no A/D updates (for
  /// debuggers and introspection). Not-present, reserved-bit, unbacked and non-canonical
  /// faults are still reported.
  template <guest_memory M>
  [[nodiscard, gnu::always_inline]] constexpr walk_result translate(const M& mem, x86::gva linear) const noexcept {
    detail::direct_tables<const M> tables(&mem);
    translation t{};
    walk_fault f{};
    f.linear = linear;
    if (!canonical_ok(linear, false, f) || !walk_tables(tables, linear, t, f)) return unexpected(f);
    return t;
  }

  /// The walk over any table accessor (a guest_memory, or a second stage).
  template <class Tables>
  [[nodiscard, gnu::always_inline]] constexpr walk_result walk_with(Tables& tables, const mmu_context& mmu,
                                                                    const walk_request& req) const noexcept {
    std::uint64_t all = 0;
    return walk_with(tables, mmu, req, all);
  }
  /// As above; on success `all` gets the AND of the entries read from memory with the leaf's
  /// D flag in bit 0 (what needs_ad() tests), for a caller that defers the A/D updates.
  template <class Tables>
  [[nodiscard, gnu::always_inline]] constexpr walk_result walk_with(Tables& tables, const mmu_context& mmu,
                                                                    const walk_request& req,
                                                                    std::uint64_t& all) const noexcept {
    // The translation is built in place, straight into the result (walk_tables() writes
    // every member on success, so the value is not cleared first), and its address comes
    // back in a register, stored once at the end: a caller that feeds the address into its
    // next walk (a loop-carried chain) reads it without a store-to-load round trip.
    walk_result r{hvkit::detail::default_init};
    walk_fault f{};
    f.linear = req.linear;
    all = 0;
    std::uint64_t out = 0;
    if (!canonical_ok(req.linear, req.stack, f) || !walk_once(tables, mmu, req, r.value(), f, all, out)) [[unlikely]] {
      r = walk_result(unexpected(f));
      return r;
    }
    if constexpr (Tables::can_update) {
      if (needs_ad(req, all)) [[unlikely]] {
        out = update_slow(tables, mmu, req, r).value();
        if (!r) [[unlikely]] return r;
      }
    }
    r.value().address = x86::gpa{out};
    return r;
  }

  /// The canonical check, the walk and the permission check into caller-provided objects,
  /// without A/D updates (what walk_with() does before them): on success `t` is the
  /// translation and `all` as for walk_with(); on failure `f` is the fault. `t` and `f`
  /// must be default-constructed.
  template <class Tables>
  [[gnu::always_inline]] constexpr bool walk_checked(Tables& tables, const mmu_context& mmu, const walk_request& req,
                                                     translation& t, walk_fault& f, std::uint64_t& all) const noexcept {
    f.linear = req.linear;
    all = 0;
    return canonical_ok(req.linear, req.stack, f) && walk_once(tables, mmu, req, t, f, all);
  }
  /// As above, with the output address in `out` instead of `t.address` (not written): a
  /// caller that uses the address next (nested_walker: the final second-stage access) keeps
  /// it in a register, off a store-to-load round trip.
  template <class Tables>
  [[gnu::always_inline]] constexpr bool walk_checked(Tables& tables, const mmu_context& mmu, const walk_request& req,
                                                     translation& t, walk_fault& f, std::uint64_t& all,
                                                     std::uint64_t& out) const noexcept {
    f.linear = req.linear;
    all = 0;
    return canonical_ok(req.linear, req.stack, f) && walk_once(tables, mmu, req, t, f, all, out);
  }

  /// True if the walk must set A or D: A clear in an entry read, or D clear in the leaf of a write.
  [[nodiscard, gnu::always_inline]] static constexpr bool needs_ad(const walk_request& req, std::uint64_t all) noexcept {
    // `all` is the AND of the entries read, with the leaf's D bit moved to bit 0 (SDM 4.8:
    // A in every entry, D in the leaf of a write).
    // The write bit by hand: GCC left flags::test() out of line here in a large nested walk.
    const std::uint64_t want = pte::accessed.raw() | ((req.access.raw() & x86::pfec::write.raw()) ? 1u : 0u);
    return req.update_ad && (all & want) != want;
  }

  /// Stage-1 table walk only: fills `t` (address, size, rights, pkey, path) or `f`
  /// (not_present / reserved_bit / unbacked, level, entry; error_code holds P/RSVD only).
  /// `t` is a translation (a walk of the guest's tables) or, for an NPT walk (paging/npt.hpp:
  /// the nested tables in the host's format), a host_translation. On success every member of
  /// `t` is written (the path's entries below the leaf and beyond the format's levels as 0),
  /// so `t` need not be cleared first (nested_walker builds its result in place).
  template <class Tables, class Address>
  [[gnu::always_inline]] constexpr bool walk_tables(Tables& tables, x86::gva linear, basic_translation<Address>& t,
                                                    walk_fault& f) const noexcept {
    std::uint64_t all = 0;
    return walk_tables(tables, linear, t, f, all);
  }
  /// As above; `all` receives the AND of the entries read from memory (A/D fast check).
  template <class Tables, class Address>
  [[gnu::always_inline]] constexpr bool walk_tables(Tables& tables, x86::gva linear, basic_translation<Address>& t,
                                                    walk_fault& f, std::uint64_t& all) const noexcept {
    std::uint64_t out = 0;
    if (!walk_tables(tables, linear, t, f, all, out)) [[unlikely]] return false;
    t.address = Address{out};
    return true;
  }
  /// As above, with the output address in `out` instead of `t.address` (not written): a
  /// caller that stores it itself keeps it in a register up to that store (walk_with()).
  template <class Tables, class Address>
  [[gnu::always_inline]] constexpr bool walk_tables(Tables& tables, x86::gva linear, basic_translation<Address>& t,
                                                    walk_fault& f, std::uint64_t& all,
                                                    std::uint64_t& out) const noexcept {
    // A walker_4level over a 32-bit-paging state (and any other pairing) walks nothing.
    if (s_.mode != Format::mode) [[unlikely]] return mode_mismatch(f);
    std::uint64_t va = linear.value();
    if constexpr (!detail::has_ia32e<Format>) va &= 0xffff'ffffu;  // 32-bit linear addresses
    // The walk runs on locals (one step per level, unrolled at compile time) and fills the
    // report at the end: no store into the result can alias the tables or the masks.
    regs w{};
    w.vals = t.path.values.data();
    w.table = s_.root.value();
    x86::gpa first{};
    unsigned level = top_level;
    int st = 0;
    if constexpr (Format::pdpte_registers) {
      // PAE: the PDPTE registers (SDM 4.4.1); their reserved bits were checked at load.
      const unsigned i = static_cast<unsigned>((va >> 30) & 3u);
      w.e = s_.pdptes.entries[i];
      w.vals[0] = w.e;
      first = s_.pdptes.pdpt + 8u * i;
      if (!s_.pdptes.loaded) [[unlikely]] {  // no snapshot: never a silent "not present"
        fail(f, fault_kind::pdptes_not_loaded, 3, first, w.e);
        st = -1;
      } else if (!(w.e & pte::present.raw())) [[unlikely]] {
        st = fail(f, fault_kind::not_present, 3, first, w.e) ? 0 : -1;
      } else {
        w.table = w.e;
        st = run<2>(tables, va, w, f, level, first);
      }
    } else {
      st = run<Format::levels>(tables, va, w, f, level, first);
    }
    // Bit 0 of `all` (P, set in every entry that got here) carries the leaf's D flag.
    all = (w.all & ~std::uint64_t{1}) | ((w.e >> 6) & 1u);
    // A fault leaves `t` as it is (only `f` reports it): the report below is the success
    // path's alone, with the leaf's level known at compile time on each path.
    if (st < 0) [[unlikely]] return false;
    for (unsigned i = top_level; i < max_levels; ++i) t.path.values[i] = 0;  // below the format's levels
    const std::uint64_t e = w.e;
    // The leaf's level is 1 on the common path: its fields from constants there, and only a
    // large page computes them from the level. The constants are stored first, in one basic
    // block with the path's other constant bytes (GCC merges them into one word store; stored
    // in both branches, GCC would common them into one store of a run-time value), and a
    // large page overwrites them.
    path_shape(t.path, va, first, top_level);
    t.page_shift = 12;
    // PAT index = PAT*4 + PCD*2 + PWT, PAT being bit 7 of a PTE and bit 12 of a large page.
    std::uint64_t pat = (e >> 7) & 1u;
    if (level == 1) [[likely]] {
      out = (e & Format::address_mask) | (va & 0xfffu);
    } else {
      // Every entry of the path is written on success: those below a large page hold 0.
      for (unsigned i = top_level - level + 1; i < top_level; ++i) t.path.values[i] = 0;
      const unsigned shift = Format::shift(level);
      const std::uint64_t size = std::uint64_t{1} << shift;
      out = Format::large_base(e, level) | (va & (size - 1));
      t.page_shift = static_cast<std::uint8_t>(shift);
      t.path.count = static_cast<std::uint8_t>(top_level - level + 1);
      pat = (e >> 12) & 1u;
    }
    // exec (bit 0): no XD anywhere (with NXE); write and user (bits 1, 2): R/W and U/S everywhere.
    const std::uint64_t exec = s_.nx ? (~w.any >> 63) : 1u;
    // shadow_stack (bit 5, CET, SDM 4.6.1): R/W=1 in every entry above the leaf (PAE
    // PDPTEs have no R/W bit and do not count), R/W=0 and D=1 in the leaf.
    const std::uint64_t ss = (w.upper >> 1) & (~e >> 1) & (e >> 6) & 1u;
    t.rights = pte_access{static_cast<std::uint8_t>((w.all & 6u) | exec | (ss << 5))};
    if constexpr (detail::has_ia32e<Format>) {
      t.pkey = pte{e}.pkey();
    } else {
      t.pkey = 0;
    }
    t.memory_type = static_cast<std::uint8_t>((pat << 2) | ((e >> 3) & 3u));
    return true;
  }

  /// Sets A on every entry used and D on the leaf of a write (SDM 4.8). Returns 1 when done,
  /// 0 when an entry changed (re-walk), -1 on failure (f filled).
  /// `t` as for walk_tables(); `tables` takes the entries' addresses as x86::gpa (the
  /// memory object's own addresses, whatever space it models).
  template <class Tables, class Address>
  constexpr int update_accessed_dirty(Tables& tables, const basic_translation<Address>& t, bool write,
                                      walk_fault& f) const noexcept {
    constexpr std::uint64_t a_bit = pte::accessed.raw(), d_bit = pte::dirty.raw();
    // Fast path: nothing to set.
    bool any = false;
    const unsigned first = Format::pdpte_registers ? 1u : 0u;  // PAE PDPTEs have no A bit
    for (unsigned i = first; i < t.path.count; ++i) {
      const std::uint64_t want = a_bit | ((write && i + 1 == t.path.count) ? d_bit : 0);
      if ((t.path.values[i] & want) != want) any = true;
    }
    if (!any) [[likely]] return 1;
    // Every entry that needs a write must be writable through the table accessor (a second
    // stage may refuse): check all first so that a refused write leaves nothing written.
    if (!tables.prepare_updates(f)) return -1;
    for (unsigned i = first; i < t.path.count; ++i) {
      const auto w = t.path[i];
      const std::uint64_t want = a_bit | ((write && i + 1 == t.path.count) ? d_bit : 0);
      if ((w.value & want) == want) continue;
      if (!tables.template check_update<Format::entry_bytes>(x86::gpa{w.address.value()}, w.level, f)) {
        return -1;
      }
    }
    for (unsigned i = first; i < t.path.count; ++i) {
      const auto w = t.path[i];
      const std::uint64_t want = a_bit | ((write && i + 1 == t.path.count) ? d_bit : 0);
      if ((w.value & want) == want) continue;
      const int u = tables.template update<Format::entry_bytes>(x86::gpa{w.address.value()}, w.value, w.value | want, f);
      if (u <= 0) {
        return u;
      }
    }
    return tables.commit() ? 1 : -1;
  }

 private:
  static constexpr unsigned top_level = Format::levels;

  /// The table walk and the permission check; fills `f` (with its #PF error code) on a fault.
  template <class Tables>
  [[gnu::always_inline]] constexpr bool walk_once(Tables& tables, const mmu_context& mmu, const walk_request& req,
                                                  translation& t, walk_fault& f, std::uint64_t& all) const noexcept {
    std::uint64_t out = 0;
    if (!walk_once(tables, mmu, req, t, f, all, out)) [[unlikely]] return false;
    t.address = x86::gpa{out};
    return true;
  }
  /// As above, with the output address in `out` instead of `t.address` (walk_tables()).
  template <class Tables>
  [[gnu::always_inline]] constexpr bool walk_once(Tables& tables, const mmu_context& mmu, const walk_request& req,
                                                  translation& t, walk_fault& f, std::uint64_t& all,
                                                  std::uint64_t& out) const noexcept {
    // The context's paging mode must be the walker's (a typed error; docs/paging-walkers.md).
    if (mmu.role().mode() != Format::mode) [[unlikely]] return mode_mismatch(f);
    if (!walk_tables(tables, req.linear, t, f, all, out)) [[unlikely]] {
      if ((f.kind == fault_kind::not_present || f.kind == fault_kind::reserved_bit) && f.stage == walk_stage::guest)
        f.error_code = error_code(req.access, f.error_code);
      return false;
    }
    const std::uint32_t pkr = pk_register_for(t.rights, req.pkru, req.pkrs);
    const x86::pfec pf = mmu.permission_fault(t.rights, t.pkey, req.access, req.rflags, pkr);
    if (!pf.none()) [[unlikely]] {
      permission_report(t, req.access, pf, f);
      return false;
    }
    return true;
  }


  /// The A/D update by compare-exchange, with bounded re-walks when an entry changed. Out of
  /// line and starting from a fresh walk, so that the common path keeps its state in registers.
  template <class Tables>
  [[gnu::noinline]] constexpr x86::gpa update_slow(Tables& tables, const mmu_context& mmu,
                                                   const walk_request& req, walk_result& r) const noexcept {
    r = update_slow(tables, mmu, req);
    return r ? r.value().address : x86::gpa{};
  }
  template <class Tables>
  constexpr walk_result update_slow(Tables& tables, const mmu_context& mmu, const walk_request& req) const noexcept {
    const bool write = req.access.test(x86::pfec::write);
    translation t{};
    walk_fault f{};
    f.linear = req.linear;
    for (unsigned attempt = 0;; ++attempt) {
      std::uint64_t all = 0;
      if (!walk_once(tables, mmu, req, t, f, all)) return unexpected(f);
      if (!needs_ad(req, all)) return t;
      if (attempt >= max_ad_retries) {
        f.kind = fault_kind::retry_exhausted;
        return unexpected(f);
      }
      const int u = update_accessed_dirty(tables, t, write, f);
      if (u > 0) return t;
      if (u < 0) return unexpected(f);
    }
  }

  /// The success report's path shape (every member but the entries), in member order.
  template <class Address>
  [[gnu::always_inline]] static constexpr void path_shape(basic_walk_path<Address>& p, std::uint64_t va, x86::gpa first,
                                                          unsigned count) noexcept {
    p.first = first.value();
    p.input = va;
    p.count = static_cast<std::uint8_t>(count);
    p.top = static_cast<std::uint8_t>(top_level);
    p.index_bits = static_cast<std::uint8_t>(Format::index_bits);
    p.entry_bytes = static_cast<std::uint8_t>(Format::entry_bytes);
  }

  /// The walk's working registers.
  struct regs {
    std::uint64_t table = 0, e = 0;
    std::uint64_t all = ~std::uint64_t{0};  ///< AND of the entries read from memory (A/D fast check)
    std::uint64_t any = 0;                  ///< OR of the entries read from memory (XD)
    std::uint64_t upper = ~std::uint64_t{0};  ///< the AND of the entries above the last one
    std::uint64_t* vals = nullptr;          ///< the path's values (written in place)
  };

  /// Steps from `Level` down; returns 1 at the leaf, -1 on a fault (f filled), with
  /// `level` the level it stopped at.
  template <unsigned Level, class Tables>
  [[gnu::always_inline]] constexpr int run(Tables& tables, std::uint64_t va, regs& w, walk_fault& f, unsigned& level,
                    x86::gpa& first) const noexcept {
    const int st = step<Level>(tables, va, w, f, first);
    if constexpr (Level > 1) {
      if (st == 0) return run<Level - 1>(tables, va, w, f, level, first);
    }
    level = Level;
    return st;
  }

  /// A table entry at `level` could not be read: an unbacked guest table names its entry (a
  /// second stage that failed the table's access has reported its own entry). Cold and out
  /// of line: inline, this tail cost the 4-level walk 5 instructions (GCC 12 -O2, callgrind).
  [[gnu::cold, gnu::noinline]] static constexpr void unreadable_table(walk_fault& f, unsigned level, x86::gpa ea) noexcept {
    if (f.stage == walk_stage::guest) {
      f.level = static_cast<std::uint8_t>(level);
      f.set_entry_address(ea);
    } else {
      f.guest_level = static_cast<std::uint8_t>(level);  // the guest level whose table access faulted
    }
  }

  /// One level: read, P, reserved bits (SDM 4.3-4.5), rights, leaf or next table.
  template <unsigned Level, class Tables>
  [[gnu::always_inline]] constexpr int step(Tables& tables, std::uint64_t va, regs& w, walk_fault& f, x86::gpa& first) const noexcept {
    constexpr unsigned i = top_level - Level;
    constexpr std::uint64_t idx_mask = (std::uint64_t{1} << Format::index_bits) - 1;
    const x86::gpa ea{(w.table & Format::address_mask) +
                      ((va >> Format::shift(Level)) & idx_mask) * Format::entry_bytes};
    if constexpr (i == 0) first = ea;
    if (!tables.template read<Format::entry_bytes>(ea, w.e, f)) [[unlikely]] {
      unreadable_table(f, Level, ea);
      w.vals[i] = 0;
      return -1;
    }
    const std::uint64_t e = w.e;
    w.vals[i] = e;
    if (!(e & pte::present.raw())) [[unlikely]]
      return fail_out_of_line(f, fault_kind::not_present, Level, ea, e) ? 0 : -1;
    // PS: known at compile time where the format fixes it (SDM 4.4.2, 4.5.4): reserved in a
    // PML5E/PML4E (bit 7 is in rsvd.table there), a 2 MiB page in a PAE or 4/5-level PDE;
    // elsewhere (a PDPTE: 1 GiB pages; a 32-bit PDE: CR4.PSE) the role decides.
    bool large = false;
    if constexpr (detail::has_ia32e<Format> && Level >= 4) {
      large = false;
    } else if constexpr (Format::entry_bytes == 8 && Level == 2) {
      large = (e & pte::page_size.raw()) != 0;
    } else if constexpr (Level > 1) {
      large = (e & pte::page_size.raw()) && s_.rsvd.large_ok[Level];
    }
    if (e & (large ? s_.rsvd.large[Level] : s_.rsvd.table[Level])) [[unlikely]]
      return fail_out_of_line(f, fault_kind::reserved_bit, Level, ea, e) ? 0 : -1;
    w.upper = w.all;  // the AND above this entry: the shadow-stack right needs it at the leaf
    w.all &= e;  // R/W, U/S: ANDed; XD: ORed (SDM 4.6.1); the rights are formed at the end
    w.any |= e;
    if (Level == 1 || large) return 1;
    w.table = e;
    return 0;
  }

  [[nodiscard]] constexpr std::uint64_t entry_rights(std::uint64_t e) const noexcept {
    // R/W and U/S sit at bits 1 and 2, as pte_access::write and ::user do.
    static_assert(pte_access::write.raw() == pte::writable.raw() && pte_access::user.raw() == pte::user.raw());
    const std::uint64_t x = s_.nx ? (~e >> 63) : 1u;
    return (e & 6u) | x;
  }

  /// The typed error of a walker used over another paging mode (its state, or the
  /// mmu_context of the walk): fault_kind::mode_mismatch, no entry, no error code.
  static constexpr bool mode_mismatch(walk_fault& f) noexcept {
    f.kind = fault_kind::mode_mismatch;
    f.stage = walk_stage::guest;
    f.level = 0;
    return false;
  }
  /// fail() from a step, out of line for every table accessor: the fault report's stores
  /// (the entry's address and value side by side) then stay off the success path. Inline,
  /// GCC 12 built the report's vector of (address, value) after every table read of a
  /// direct walk, three instructions per level that only a fault uses.
  [[gnu::cold, gnu::noinline]] static constexpr bool fail_out_of_line(walk_fault& f, fault_kind k, unsigned level,
                                                                      x86::gpa ea, std::uint64_t e) noexcept {
    return fail(f, k, level, ea, e);
  }
  static constexpr bool fail(walk_fault& f, fault_kind k, unsigned level, x86::gpa ea, std::uint64_t e) noexcept {
    f.kind = k;
    f.stage = walk_stage::guest;
    f.vector = x86::vector::pf;
    f.level = static_cast<std::uint8_t>(level);
    f.set_entry_address(ea);
    f.entry_value = e;
    // SDM 4.7: P = 0 for a not-present entry; a reserved-bit fault has P = 1 and RSVD = 1.
    f.error_code = k == fault_kind::reserved_bit ? (x86::pfec::present | x86::pfec::rsvd) : x86::pfec{};
    return false;
  }

  /// ORs the access bits into a #PF error code (SDM 4.7): W/R, U/S (a user-mode access),
  /// I/D only with SMEP or PAE+NXE, SS for shadow-stack accesses.
  [[nodiscard]] constexpr x86::pfec error_code(x86::pfec access, x86::pfec base) const noexcept {
    x86::pfec ec = base | (access & (x86::pfec::write | x86::pfec::user | x86::pfec::ss));
    if (s_.fetch_bit && access.test(x86::pfec::fetch)) ec = ec | x86::pfec::fetch;
    return ec.hardware_bits();
  }

  [[nodiscard]] constexpr bool canonical_ok(x86::gva linear, bool stack, walk_fault& f) const noexcept {
    if constexpr (detail::has_ia32e<Format>) {
      // SDM 3.3.7.1, 6.14 / Vol. 1 3.3.7.1: a non-canonical linear address raises #GP(0),
      // or #SS(0) when the SS segment is used; no walk takes place.
      if (!x86::is_canonical(linear, Format::width)) [[unlikely]] {
        f.kind = fault_kind::non_canonical;
        f.vector = stack ? x86::vector::ss : x86::vector::gp;
        return false;
      }
    } else {
      static_cast<void>(linear), static_cast<void>(stack), static_cast<void>(f);
    }
    return true;
  }

  /// Fills the report of a permission or protection-key fault. The level blamed is the
  /// first (top-down) entry that lacks a right the access needs (R/W for a write that is not
  /// a shadow-stack write, U/S for a user-mode access, XD for a fetch); when no single entry
  /// lacks one (SMEP, SMAP, keys, a shadow-stack access to a page that is not a shadow-stack
  /// page), the leaf.
  /// Cold and out of line: inlined (GCC -O3) it was about 600 bytes of every walk.
  [[gnu::cold, gnu::noinline]] constexpr void permission_report(const translation& t, x86::pfec access, x86::pfec pf,
                                                               walk_fault& f) const noexcept {
    f.kind = pf.test(x86::pfec::pk) ? fault_kind::protection_key : fault_kind::permission;
    f.stage = walk_stage::guest;
    f.vector = x86::vector::pf;
    std::uint64_t needed = 0;
    // A shadow-stack write needs no R/W (the leaf of a shadow-stack page has R/W=0): for a
    // shadow-stack access only a U/S mismatch blames an upper entry, anything else the leaf.
    if (access.test(x86::pfec::write) && !access.test(x86::pfec::ss)) needed |= pte_access::write.raw();
    if (access.test(x86::pfec::user)) needed |= pte_access::user.raw();
    if (access.test(x86::pfec::fetch)) needed |= pte_access::exec.raw();
    needed &= ~static_cast<std::uint64_t>(t.rights.raw());
    walked_entry blame = t.path.back();
    if (needed != 0 && f.kind == fault_kind::permission) {
      for (unsigned i = 0; i < t.path.count; ++i) {
        const walked_entry w = t.path[i];
        const std::uint64_t r = (Format::pdpte_registers && w.level == 3) ? pte_access::paging_rights.raw()
                                                                           : entry_rights(w.value);
        if ((r & needed) != needed) {
          blame = w;
          break;
        }
      }
    }
    f.level = blame.level;
    f.leaf_level = static_cast<std::uint8_t>(t.path.top - t.path.count + 1u);  // the entry that maps the page
    f.set_entry_address(blame.address);
    f.entry_value = blame.value;
    f.error_code = error_code(access, pf);
  }

  walker_state s_{};
};

using walker_32bit = basic_walker<format::ia32>;      ///< 32-bit paging
using walker_pae = basic_walker<format::pae>;         ///< PAE paging
using walker_4level = basic_walker<format::ia32e<4>>; ///< 4-level paging
using walker_5level = basic_walker<format::ia32e<5>>; ///< 5-level paging

/// A walker for whatever mode the role selects: one switch per walk (static dispatch; no
/// function pointers), for tools that do not know the mode at compile time. With paging
/// off, the translation is the identity (32-bit linear = physical).
class guest_walker {
 public:
  constexpr guest_walker() noexcept = default;
  constexpr explicit guest_walker(const walker_state& s) noexcept : s_(s) {}
  /// The walker for `mmu`'s role and root. For PAE pass the snapshot from load_pdptrs(), or
  /// build the walker with with_pdptes_from(): without one, a PAE walk fails with
  /// fault_kind::pdptes_not_loaded (never a silent "not present").
  constexpr guest_walker(const mmu_context& mmu, cpu_properties props, pdpte_snapshot pdptes = {}) noexcept
      : s_(make_walker_state(mmu.role(), mmu.root(), props, pdptes)) {}

  /// The walker for `mmu`'s role and root, with the PAE PDPTEs loaded from `mem` as a MOV to
  /// CR3 loads them (load_pdptrs() at CR3 = `mmu.root()`; SDM 4.4.1): for dump tools and
  /// debuggers, which have the memory but no PDPTE registers. Outside PAE paging nothing is
  /// read. Fails as load_pdptrs() fails (a reserved bit in a present PDPTE, an unbacked PDPT).
  template <guest_memory M>
  [[nodiscard]] static constexpr result<guest_walker, pdptr_error> with_pdptes_from(const M& mem,
                                                                                   const mmu_context& mmu,
                                                                                   cpu_properties props) noexcept {
    if (mmu.role().mode() != x86::paging_mode::pae) return guest_walker(mmu, props);
    const auto p = load_pdptrs(x86::cr3{mmu.root().value()}, mem, props.maxphyaddr);
    if (!p) return unexpected(p.error());
    return guest_walker(mmu, props, *p);
  }

  [[nodiscard]] constexpr const walker_state& state() const noexcept { return s_; }

  /// See basic_walker::walk().
  template <guest_memory M>
  [[nodiscard]] constexpr walk_result walk(M& mem, const mmu_context& mmu, const walk_request& req) const noexcept {
    switch (s_.mode) {
      case x86::paging_mode::two_level: return walker_32bit{s_}.walk(mem, mmu, req);
      case x86::paging_mode::pae: return walker_pae{s_}.walk(mem, mmu, req);
      case x86::paging_mode::four_level: return walker_4level{s_}.walk(mem, mmu, req);
      case x86::paging_mode::five_level: return walker_5level{s_}.walk(mem, mmu, req);
      case x86::paging_mode::none: break;
    }
    return identity(req.linear);
  }
  /// See basic_walker::check().
  template <guest_memory M>
  [[nodiscard]] constexpr walk_result check(const M& mem, const mmu_context& mmu, const walk_request& req) const noexcept {
    switch (s_.mode) {
      case x86::paging_mode::two_level: return walker_32bit{s_}.check(mem, mmu, req);
      case x86::paging_mode::pae: return walker_pae{s_}.check(mem, mmu, req);
      case x86::paging_mode::four_level: return walker_4level{s_}.check(mem, mmu, req);
      case x86::paging_mode::five_level: return walker_5level{s_}.check(mem, mmu, req);
      case x86::paging_mode::none: break;
    }
    return identity(req.linear);
  }
  /// See basic_walker::translate().
  template <guest_memory M>
  [[nodiscard]] constexpr walk_result translate(const M& mem, x86::gva linear) const noexcept {
    switch (s_.mode) {
      case x86::paging_mode::two_level: return walker_32bit{s_}.translate(mem, linear);
      case x86::paging_mode::pae: return walker_pae{s_}.translate(mem, linear);
      case x86::paging_mode::four_level: return walker_4level{s_}.translate(mem, linear);
      case x86::paging_mode::five_level: return walker_5level{s_}.translate(mem, linear);
      case x86::paging_mode::none: break;
    }
    return identity(linear);
  }

 private:
  [[nodiscard]] static constexpr walk_result identity(x86::gva linear) noexcept {
    translation t{};
    t.address = x86::gpa{linear.value() & 0xffff'ffffu};
    t.page_shift = 12;
    t.rights = pte_access::paging_rights;
    return t;
  }
  walker_state s_{};
};

}  // namespace hvkit::paging
