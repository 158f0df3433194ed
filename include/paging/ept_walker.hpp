// SPDX-License-Identifier: MIT
/// @file
/// @brief The EPT walker: 4- and 5-level EPT, 2 MiB / 1 GiB pages, execute-only and
/// mode-based execute control, EPT A/D, memory types; EPT violations with their exit
/// qualification and EPT misconfigurations (SDM 29.3).
///
/// Order of a walk: per level "present" (any of bits 2:0, or bit 10 with MBEC), then the
/// misconfiguration rules (SDM 29.3.3.1: W without R; execute-only without the capability;
/// reserved bits; a reserved memory type in the leaf; the one rule set, ept_entry_rules of
/// paging/ept_entry.hpp, shared with vmx's entry builders), rights ANDed; then the EPT
/// permission check (ept_permission_fault of paging/permission.hpp); then, with EPTP bit 6,
/// A on every entry used and D on the leaf of a write, by compare-exchange (re-walk if an
/// entry changed). With EPT A/D enabled, accesses to guest paging structures count as
/// writes (SDM 29.3.3.2): they need W, set D and report both bit 0 and bit 1 in the exit
/// qualification (SDM 28.2.1, the note on bits 0 and 1). Loads of the PAE PDPTE registers
/// are reads in every case (SDM 29.3.3.2, 29.3.5) and carry no guest-linear address.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "access.hpp"
#include "ept_entry.hpp"
#include "guest_memory.hpp"
#include "memory_holder.hpp"
#include "permission.hpp"
#include "role.hpp"
#include "walk_result.hpp"
#include "../x86/address.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/contract.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// Why an EPTP cannot be used (the VM-entry checks of SDM 27.2.1.1 that concern the walk).
enum class eptp_error : std::uint8_t {
  none = 0,
  walk_length,   ///< page-walk length not 4 (or 5) levels, or not supported
  memory_type,   ///< bits 2:0 neither UC nor WB
  ad_unsupported,///< bit 6 set without EPT A/D support
  /// bit 7 (supervisor shadow-stack control) set without IA32_VMX_EPT_VPID_CAP bit 23
  /// (SDM 27.2.1.1, A.10)
  supervisor_shadow_stack_unsupported,
  reserved_bits, ///< bits 11:8 or bits 63:MAXPHYADDR set
};

/// What a guest-physical access is for: the three classes the EPT rules and the
/// EPT-violation exit qualification tell apart (SDM 28.2.1, 29.3.3.2, 29.3.5).
enum class ept_origin : std::uint8_t {
  /// The access itself: a data access or fetch at its guest-physical address (with a
  /// linear address: qualification bits 7 and 8 set). The request's access is used as given.
  final_access,
  /// An access to a guest paging-structure entry while translating a linear address
  /// (qualification bit 8 = 0). With EPT A/D enabled it is treated as a write (it needs W and
  /// sets D), and a violation on it reports both bit 0 and bit 1 (SDM 28.2.1, note on bits
  /// 0 and 1). Without EPT A/D the request's access (a read, or the write of a guest A/D
  /// update) is used as given.
  paging_structure,
  /// A load of the PAE PDPTE registers by MOV to CR0/CR3/CR4 (SDM 4.4.1): a read whatever EPT
  /// A/D says, so never a violation for "not writable" and never a D flag (SDM 29.3.3.2,
  /// 29.3.5); there is no guest-linear address (qualification bits 7 and 8 are 0). The
  /// request must say so: access ept_access::read and linear_valid false (else
  /// fault_kind::invalid_request, see ept_request_consistent()).
  pdpte_load,
};

/// One guest-physical access to translate.
struct ept_request {
  x86::gpa address{};
  /// read / write / fetch (and ept_access::user_address for a fetch under MBEC).
  ept_access access = ept_access::read;
  /// The access class (see ept_origin).
  ept_origin origin = ept_origin::final_access;
  bool linear_valid = false;  ///< the access has a guest-linear address (qualification bit 7)
  x86::gva linear{};          ///< that address
  bool update_ad = true;      ///< set EPT A/D flags (with EPTP bit 6 and writable memory)
};

/// True if `req` does not contradict itself (else a walk fails with
/// fault_kind::invalid_request and reads nothing):
///  - a guest paging-structure access is a read, or the write of a guest A/D update, never
///    an instruction fetch (SDM 29.3.3.2 and 28.2.1: such an access is a data access; bit 2
///    of the qualification is set only for an instruction fetch of the linear address);
///  - a PDPTE load is a read (bits 2:0 = ept_access::read) and has no guest-linear address (SDM
///    29.3.5: "treated as reads"; 28.2.1: bit 7 is cleared for a PDPTE load).
[[nodiscard, gnu::always_inline]] constexpr bool ept_request_consistent(const ept_request& req) noexcept {
  switch (req.origin) {
    case ept_origin::final_access: return true;
    case ept_origin::paging_structure: return !(req.access.raw() & ept_access::fetch.raw());
    case ept_origin::pdpte_load: return (req.access.raw() & 7u) == ept_access::read.raw() && !req.linear_valid;
  }
  return false;
}

/// The EPT walker for one EPTP.
class ept_walker {
 public:
  constexpr ept_walker() noexcept = default;

  /// A walker for `eptp`, checked against the capabilities.
  [[nodiscard]] static constexpr result<ept_walker, eptp_error> make(ept_pointer eptp, ept_capabilities caps) noexcept {
    HVKIT_EXPECTS(caps.maxphyaddr >= 32 && caps.maxphyaddr <= 52);
    const unsigned levels = eptp.levels();
    if (!((levels == 4 && caps.walk4) || (levels == 5 && caps.walk5))) return unexpected(eptp_error::walk_length);
    const unsigned mt = ept_pointer::memory_type_field::get(eptp.raw());
    if (mt != 0 && mt != 6) return unexpected(eptp_error::memory_type);
    if (eptp.test(ept_pointer::ad_enabled) && !caps.ad) return unexpected(eptp_error::ad_unsupported);
    // SDM 27.2.1.1: bit 7 must be 0 unless IA32_VMX_EPT_VPID_CAP bit 23 is 1. (hvkit does
    // not apply the supervisor shadow-stack rules of EPT bit 60 to its walks.)
    if (eptp.test(ept_pointer::supervisor_shadow_stack) && !caps.supervisor_shadow_stack)
      return unexpected(eptp_error::supervisor_shadow_stack_unsupported);
    if (eptp.raw() & (x86::bit_range(11, 8) | ~x86::physical_address_mask(caps.maxphyaddr)))
      return unexpected(eptp_error::reserved_bits);
    ept_walker w;
    w.role_ = ept_role(caps.execute_only, caps.mbec, eptp.test(ept_pointer::ad_enabled));
    w.levels_ = levels;
    w.rules_ = ept_entry_rules::make(caps);  // SDM 29.3.2 (present), 29.3.3.1 (misconfigurations)
    w.root_ = eptp.root(caps.maxphyaddr);
    w.table_need_ = w.role_.ad_enabled() ? 3u : 1u;
    for (unsigned l = 1; l <= max_levels; ++l) w.table_check_[l] = w.table_need_ | w.rules_.reserved_bits(l, false);
    return w;
  }

  [[nodiscard]] constexpr ept_role role() const noexcept { return role_; }
  [[nodiscard]] constexpr unsigned levels() const noexcept { return levels_; }
  /// The EPT PML4 (or PML5) table: host-physical (its entries are read from the memory
  /// object at this address).
  [[nodiscard]] constexpr x86::hpa root() const noexcept { return root_; }
  /// EPTP bit 6: EPT accessed and dirty flags are on.
  [[nodiscard]] constexpr bool ad_enabled() const noexcept { return role_.ad_enabled(); }

  /// The access the permission check and the qualification see (see ept_origin): a guest
  /// paging-structure access with EPT A/D enabled is a read and a write (SDM 29.3.3.2 and
  /// 28.2.1: both bits 0 and 1); otherwise the request's access (a PDPTE load's is a read,
  /// see ept_request_consistent()).
  [[nodiscard, gnu::always_inline]] constexpr ept_access effective_access(const ept_request& req) const noexcept {
    if (req.origin == ept_origin::paging_structure && role_.ad_enabled()) return ept_access::read | ept_access::write;
    return req.access;
  }

  /// The typed error of a request that contradicts itself (ept_request_consistent()).
  static constexpr bool invalid_request(walk_fault& f) noexcept {
    f.kind = fault_kind::invalid_request;
    f.level = 0;
    f.qualification = ept_qualification{};
    return false;
  }

  /// The checked walk of `req.address`: walk, misconfiguration and permission checks, then
  /// EPT A/D (with EPTP bit 6, `req.update_ad` and writable memory). The verbs of every
  /// hvkit walker: walk() = checked walk with A/D updates; check() = the same without A/D
  /// writes (const memory); translate() = raw translation (no rights, no A/D).
  template <guest_memory M>
  [[nodiscard, gnu::always_inline]] constexpr host_walk_result walk(M& mem, const ept_request& req) const noexcept {
    // As basic_walker::walk_with(): the translation is built in place, straight into the
    // result (walk_levels() writes every member on success, so it is not cleared first), and
    // its address comes back in a register, stored once after the join with the A/D slow
    // path: a caller that feeds the address into its next walk (a loop-carried chain) reads
    // it without a store-to-load round trip.
    host_walk_result r{hvkit::detail::default_init};
    walk_fault f = base_fault(req);
    std::uint64_t all = 0;
    std::uint64_t out = 0;
    if (!walk_checked(mem, req, r.value(), f, all, out)) [[unlikely]] {
      r = host_walk_result(unexpected(f));
      return r;
    }
    if constexpr (writable_guest_memory<M>) {
      if (req.update_ad && needs_ad(req, all)) [[unlikely]] {
        out = update_slow(mem, req, r).value();
        if (!r) [[unlikely]] return r;
      }
    }
    r.value().address = x86::hpa{out};
    return r;
  }

  /// The walk and the permission check, without A/D updates.
  template <guest_memory M>
  [[nodiscard, gnu::always_inline]] constexpr host_walk_result check(const M& mem, const ept_request& req) const noexcept {
    host_translation t{};
    walk_fault f = base_fault(req);
    std::uint64_t all = 0;
    if (!walk_checked(mem, req, t, f, all)) [[unlikely]] return unexpected(f);
    return t;
  }

  /// check() into caller-provided objects: `f` must come from fault_for(req). `all` gets the
  /// AND of the entries with the leaf's D flag in bit 0 (see needs_ad()).
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_checked(const M& mem, const ept_request& req, host_translation& t,
                                                     walk_fault& f, std::uint64_t& all) const noexcept {
    std::uint64_t out = 0;
    if (!walk_checked(mem, req, t, f, all, out)) [[unlikely]] return false;
    t.address = x86::hpa{out};
    return true;
  }
  /// As above, with the output address in `out` instead of `t.address` (not written): a
  /// caller that stores it itself keeps it in a register up to that store (walk()).
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_checked(const M& mem, const ept_request& req, host_translation& t,
                                                     walk_fault& f, std::uint64_t& all,
                                                     std::uint64_t& out) const noexcept {
    if (req.origin != ept_origin::final_access && !ept_request_consistent(req)) [[unlikely]]
      return invalid_request(f);
    const ept_access acc = effective_access(req);
    if (!walk_levels(mem, req.address, t, f, acc, all, out)) [[unlikely]] return false;
    // The role's permission table answers allowed/denied with one lookup (its documented
    // layout: row = access class R/W/X/user-address, bit = rights); the full check, which
    // also builds the qualification bits, runs only for a denied access.
    if (denied(acc, t.rights.raw())) [[unlikely]] {
      const ept_violation v = ept_permission_fault(role_, t.rights, acc);
      permission_report(t, acc, v, f);
      return false;
    }
    return true;
  }

  /// The second stage of the guest paging-structure reads of one nested walk (see
  /// paging/nested.hpp): a paging-structure cache that lives for that walk only, holding the
  /// entries of the last EPT walk of a guest table that ended at a PTE, and the AND of the EPT
  /// entries every table read used (for one EPT A/D test at the end of the walk).
  ///
  /// Two objects: `table_cache`, what every table read tests (three words the compiler keeps
  /// in registers for the whole nested walk), and `table_fill`, what only a miss writes and
  /// only the final access reads (in memory: an out-of-line miss writes it through a pointer,
  /// which never makes the three words escape).
  struct table_cache {
    std::uint64_t tag = ~std::uint64_t{0};  ///< guest-physical address >> 21 of the cached region; ~0: empty
    std::uint64_t pt = 0;                   ///< the address of that region's EPT page table
    /// A (bit 8) and D (bit 9) over the PTEs of the hits.
    std::uint64_t ad = ~std::uint64_t{0};
  };
  struct table_fill {
    std::uint64_t upper;  ///< AND of the entries above the cached PTE
    std::uint64_t first;  ///< address of the top-level entry
    /// A (bit 8): AND over every entry used by a miss; D (bit 9): AND over their leaves.
    std::uint64_t ad = ~std::uint64_t{0};
    /// The entries of the walk that filled the cache (meaningful once the cache's `tag` is
    /// set: written by that walk before they are read): levels 4-1 at [1..4], a PML5 entry at
    /// [0] (see table_walk()).
    std::uint64_t vals[max_levels];
    std::uint8_t count;  ///< entries above the PTE (3 or 4)
  };

  /// The second-stage translation of a guest paging-structure read (ept_origin::paging_structure,
  /// access read) in a nested walk, through `c`: true with `out` = where the entry is, false
  /// if the access faults (nothing is reported: the caller recomputes the report with check(),
  /// which never uses the cache). If `ga` lies in the 2 MiB region of the cached page table,
  /// only the PTE is read; otherwise the walk is a full one, and refills `c` when it ends at a
  /// PTE.
  ///
  /// Why this makes the decisions of walk_checked(): every table read is the same access
  /// class, which needs R, and W with EPT A/D (SDM 29.3.3.2), i.e. the bits `table_need_`.
  /// A cached entry was read, checked for misconfiguration and found to have those bits
  /// exactly as an uncached walk does, only earlier in the same nested walk. For the PTE of a
  /// hit, R set makes it present (SDM 29.3.2) and rules out the two R=0 misconfigurations, so
  /// what remains of SDM 29.3.3.1 is the reserved bits and the memory type; and since the
  /// upper entries have the needed bits, the AND of the walk has them exactly when the PTE
  /// has them. Without a concurrent writer the values are the same; with one, using the
  /// earlier values is what a processor's EPT paging-structure caches do (SDM 29.4.1-29.4.2:
  /// entries may be cached and used until INVEPT, so a concurrent change need not be seen).
  /// EPT A/D: `c.ad` keeps the A flags of every entry used (the cached ones ANDed in when the
  /// cache was filled) and the D flags of the leaves, so a missing flag sends the nested walk
  /// to its slow path, which walks without the cache and sets the flags.
  ///
  /// A miss walks inline where the cache is known to be empty (the first table read of every
  /// nested walk: the compiler sees `c.tag` is still ~0), and out of line elsewhere (a guest
  /// table outside the cached 2 MiB region): one copy of the miss for the later guest levels
  /// instead of one per level, without the cache's words ever leaving registers.
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool table_read(const M& mem, std::uint64_t ga, table_cache& c, table_fill& fill,
                                                   std::uint64_t& out) const noexcept {
    if ((ga >> 21) == c.tag) [[likely]] {
      std::uint64_t e = 0;
      if (!detail::read_entry(mem, x86::gpa{c.pt + ((ga >> 12) & 511u) * 8u}, e)) [[unlikely]] return false;
      if ((e & table_check_[1]) != table_need_ || !valid_memory_type(e)) [[unlikely]] return false;
      c.ad &= e;
      out = (e & 0x000f'ffff'ffff'f000u) | (ga & 0xfffu);
      return true;
    }
    miss_answer m{};
    if (__builtin_constant_p(c.tag) && c.tag == ~std::uint64_t{0}) {
      m = table_walk(mem, ga, fill);
    } else {
      m = table_miss(mem, ga, fill);
    }
    if (m.out == miss_failed) [[unlikely]] return false;
    c.tag = (m.pt & 1u) ? ga >> 21 : ~std::uint64_t{0};
    c.pt = m.pt & ~std::uint64_t{1};
    out = m.out;
    return true;
  }
  /// What a miss answers, in two registers: `out` the entry's address, or miss_failed (an
  /// address is below 2^52, never all ones); `pt` the page table now cached with bit 0 set
  /// if the walk ended at a PTE (the cache is refilled), else 0 (the cache is emptied:
  /// `fill.vals` holds this walk's entries now).
  struct miss_answer {
    std::uint64_t out = 0;
    std::uint64_t pt = 0;
  };
  static constexpr std::uint64_t miss_failed = ~std::uint64_t{0};
  /// table_walk() out of line (see table_read()).
  template <guest_memory M>
  [[gnu::noinline]] constexpr miss_answer table_miss(const M& mem, std::uint64_t ga, table_fill& fill) const noexcept {
    return table_walk(mem, ga, fill);
  }

  /// True if the table reads through `c` need EPT A/D updates: EPT A/D on, and A clear in an
  /// entry used or D clear in a leaf (the reads are writes then, SDM 29.3.3.2).
  [[nodiscard, gnu::always_inline]] constexpr bool table_needs_ad(const table_cache& c,
                                                                const table_fill& fill) const noexcept {
    constexpr std::uint64_t want = ept_entry::accessed.raw() | ept_entry::dirty.raw();
    return role_.ad_enabled() && (c.ad & fill.ad & want) != want;
  }

  /// walk_checked() of a final access through the cache of the table reads before it (see
  /// table_read(), whose argument carries over: the entries and checks are those of an
  /// uncached walk, and the access class only enters the permission check, which is made on
  /// the same AND). On a hit only the PTE is read and `t` is filled as walk_checked() fills
  /// it, the path's upper entries coming from the cache; on failure nothing is reported (the
  /// caller recomputes the report with check()).
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_checked_final(const M& mem, const ept_request& req, const table_cache& c,
                                                           const table_fill& fill, host_translation& t,
                                                           [[maybe_unused]] walk_fault& f,
                                                           std::uint64_t& all) const noexcept {
    const std::uint64_t ga = req.address.value();
    if ((ga >> 21) != c.tag) return final_miss(mem, req, t, all);
    std::uint64_t e = 0;
    if (!detail::read_entry(mem, x86::gpa{c.pt + ((ga >> 12) & 511u) * 8u}, e)) [[unlikely]] return false;
    if (!(e & rules_.present_mask()) || rules_.misconfigured(e, 1, true)) [[unlikely]] return false;
    const std::uint64_t w_all = fill.upper & e;
    if (denied_raw(role_, effective_access(req), w_all)) [[unlikely]] return false;
    const unsigned n = fill.count;
    const std::uint64_t* const above = fill.vals + (4u - n);  // the top entry (see table_walk())
    for (unsigned i = 0; i < max_levels - 1; ++i) t.path.values[i] = above[i];
    t.path.values[max_levels - 1] = 0;  // every entry is written (a 4-level walk's fifth holds 0)
    t.path.values[n] = e;
    t.path.start(ga, 9, 8);
    t.path.first = fill.first;
    t.path.top = static_cast<std::uint8_t>(n + 1u);
    t.path.count = static_cast<std::uint8_t>(n + 1u);
    t.address = x86::hpa{(e & 0x000f'ffff'ffff'f000u) | (ga & 0xfffu)};
    t.page_shift = 12;
    t.rights = pte_access{static_cast<std::uint8_t>(entry_rights(w_all))};
    t.pkey = 0;
    t.memory_type = static_cast<std::uint8_t>(ept_entry{e}.memory_type() | ((e >> 3) & 8u));
    all = (w_all & ~std::uint64_t{1}) | ((e >> 9) & 1u);
    return true;
  }

  /// walk_checked_final() outside the cached region: the uncached walk, out of line.
  template <guest_memory M>
  [[gnu::noinline]] constexpr bool final_miss(const M& mem, const ept_request& req, host_translation& t,
                                              std::uint64_t& all) const noexcept {
    walk_fault unused{};  // the caller reports a failure again with check()
    return walk_checked_outlined(mem, req, t, unused, all);
  }
  /// walk_checked(), out of line: one copy per memory type for the nested walk's slow paths
  /// and reports (check_outlined(), final_miss()).
  template <guest_memory M>
  [[gnu::noinline]] constexpr bool walk_checked_outlined(const M& mem, const ept_request& req, host_translation& t,
                                                         walk_fault& f, std::uint64_t& all) const noexcept {
    return walk_checked(mem, req, t, f, all);
  }
  /// check() through walk_checked_outlined() (what the nested walk's slow paths call).
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result check_outlined(const M& mem, const ept_request& req) const noexcept {
    host_translation t{};
    walk_fault f = base_fault(req);
    std::uint64_t all = 0;
    if (!walk_checked_outlined(mem, req, t, f, all)) [[unlikely]] return unexpected(f);
    return t;
  }

  /// True if an access needs EPT A/D updates: A/D on, and A clear in an entry used or D clear
  /// in the leaf of a write (`all` from walk_checked()).
  [[nodiscard, gnu::always_inline]] constexpr bool needs_ad(const ept_request& req, std::uint64_t all) const noexcept {
    if (!role_.ad_enabled()) return false;
    static_assert(ept_access::write.raw() == 2u);
    const std::uint64_t want = ept_entry::accessed.raw() | ((effective_access(req).raw() >> 1) & 1u);  // bit 1: write
    return (all & want) != want;
  }

  /// The fault object a walk for `req` starts from (stage, addresses, qualification bits 7/8).
  [[nodiscard]] static constexpr walk_fault fault_for(const ept_request& req) noexcept { return base_fault(req); }

  /// The raw translation of `address`: no permission checks and no A/D updates (not-present,
  /// misconfigured and unbacked entries are still reported). For debuggers and introspection.
  template <guest_memory M>
  [[nodiscard]] constexpr host_walk_result translate(const M& mem, x86::gpa address) const noexcept {
    host_translation t{};
    ept_request req{};
    req.address = address;
    walk_fault f = base_fault(req);
    // No access: a not-present fault reports bits 2:0 = 0 (a raw translation is no read).
    if (!walk_tables(mem, address, t, f, ept_access{})) return unexpected(f);
    return t;
  }

  /// Not available: `translate(mem, ept_request)` was once the checked walk with EPT A/D.
  /// That is walk(mem, req) (or check(mem, req) without A/D); translate(mem, gpa) is the
  /// raw translation. Deleted so that old code fails to compile instead of changing meaning.
  template <guest_memory M>
  host_walk_result translate(const M& mem, const ept_request& req) const noexcept = delete;

  /// Sets A on every entry of `t.path` and D on its leaf if `dirty`, by compare-exchange.
  /// Returns 1 when done, 0 when an entry changed (re-walk), -1 if memory refused (f filled).
  template <writable_guest_memory M>
  constexpr int apply_ad(M& mem, const host_translation& t, bool dirty, walk_fault& f) const noexcept {
    for (unsigned i = 0; i < t.path.count; ++i) {
      const host_walked_entry w = t.path[i];
      const std::uint64_t want = ad_bits(i + 1 == t.path.count, dirty);
      if ((w.value & want) == want) continue;
      // The memory object takes its own addresses as x86::gpa, whatever space it models
      // (here the host-physical memory the EPT tables live in).
      const x86::gpa at{w.address.value()};
      const auto r = mem.cmpxchg64(at, w.value, w.value | want);
      if (!r) {
        f.kind = fault_kind::unbacked;
        f.level = w.level;
        f.set_entry_address(w.address);
        f.entry_value = w.value;
        return -1;
      }
      if (!*r) return 0;
    }
    return 1;
  }
  /// The A/D bits entry `leaf`/non-leaf should have after an access (0 without EPT A/D).
  [[nodiscard]] constexpr std::uint64_t ad_bits(bool leaf, bool dirty) const noexcept {
    if (!role_.ad_enabled()) return 0;
    return ept_entry::accessed.raw() | (leaf && dirty ? ept_entry::dirty.raw() : 0);
  }

  /// The table walk only: fills `t` or `f` (not_present, ept_misconfig or unbacked).
  template <guest_memory M>
  constexpr bool walk_tables(const M& mem, x86::gpa address, host_translation& t, walk_fault& f,
                             ept_access acc) const noexcept {
    std::uint64_t all = 0;
    return walk_tables(mem, address, t, f, acc, all);
  }
  /// As above; `all` gets the AND of the entries with the leaf's D flag in bit 0.
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_tables(const M& mem, x86::gpa address, host_translation& t, walk_fault& f,
                                                    ept_access acc, std::uint64_t& all) const noexcept {
    std::uint64_t out = 0;
    if (!walk_levels(mem, address, t, f, acc, all, out)) [[unlikely]] return false;
    t.address = x86::hpa{out};
    return true;
  }

  /// EPT rights of one entry as pte_access: R -> read, W -> write, X -> exec, XU -> user_exec.
  [[nodiscard, gnu::always_inline]] static constexpr std::uint64_t entry_rights(std::uint64_t e) noexcept {
    return ((e & 1u) << 3) | (e & 2u) | ((e >> 2) & 1u) | (((e >> 10) & 1u) << 4);
  }

 private:
  /// The walk of either length: a 5-level walk is its PML5 step, then the steps of levels 4-1
  /// that a 4-level walk takes, on the path's entries one further on (one copy of levels 4-1
  /// for both lengths: half the code of the walk in every function that inlines it).
  /// On success `t` gets every member but the address and `out` the output address; on a
  /// fault `f` reports it and `t` holds nothing meaningful.
  template <guest_memory M>
  [[gnu::always_inline]] constexpr bool walk_levels(const M& mem, x86::gpa address, host_translation& t, walk_fault& f,
                                                    ept_access acc, std::uint64_t& all,
                                                    std::uint64_t& out) const noexcept {
    const std::uint64_t ga = address.value();
    const detail::memory_holder<const M> m(&mem);
    regs w{};
    w.table = root_.value();
    w.vals = t.path.values.data();
    // Every entry of the path is written on success: the fifth of a 4-level walk (a 5-level
    // walk's PTE overwrites it) and those below a large page (step()) hold 0.
    t.path.values[max_levels - 1] = 0;
    const unsigned top = levels_ == 5 ? 5u : 4u;
    unsigned level = 5;
    int st = 0;
    // The top entry's address, stored before the walk (off its dependency chain).
    t.path.first = (root_.value() & 0x000f'ffff'ffff'f000u) + ((ga >> (top == 5 ? 48 : 39)) & 511u) * 8u;
    if (top == 5) {
      st = step<5, 5>(m, ga, w, f, acc);  // never a leaf (no page is mapped at level 5)
      ++w.vals;
    }
    if (st == 0) st = run<4, 4>(m, ga, w, f, acc, level);
    if (st < 0) [[unlikely]] return false;
    t.path.start(ga, 9, 8);
    t.path.top = static_cast<std::uint8_t>(top);
    const std::uint64_t e = w.e;
    // The leaf is a PTE on the common path: its address, size and the path's length from
    // constants there, and only a large page computes them from the level.
    if (level == 1) [[likely]] {
      out = (e & 0x000f'ffff'ffff'f000u) | (ga & 0xfffu);
      t.page_shift = 12;
      t.path.count = static_cast<std::uint8_t>(top);
    } else {
      t.path.count = static_cast<std::uint8_t>(top - level + 1);
      const unsigned shift = 12 + 9 * (level - 1);
      const std::uint64_t size = std::uint64_t{1} << shift;
      out = (e & 0x000f'ffff'ffff'f000u & ~(size - 1)) | (ga & (size - 1));
      t.page_shift = static_cast<std::uint8_t>(shift);
    }
    t.rights = pte_access{static_cast<std::uint8_t>(entry_rights(w.all))};
    t.pkey = 0;
    t.memory_type = static_cast<std::uint8_t>(ept_entry{e}.memory_type() | ((e >> 3) & 8u));
    all = (w.all & ~std::uint64_t{1}) | ((e >> 9) & 1u);  // bit 0: the leaf's D flag
    return true;
  }

  /// The leaf's memory type is not 2, 3 or 7 (the test of ept_entry_rules::misconfigured()).
  [[nodiscard, gnu::always_inline]] static constexpr bool valid_memory_type(std::uint64_t e) noexcept {
    return (0x73u >> ((e >> 3) & 7u)) & 1u;
  }

  /// table_read() on a miss: the walk of a paging-structure read without the report (the
  /// entries go straight into `c.vals`), then the refill of `c` if the walk ended at a PTE.
  /// It makes walk_checked()'s decision with fewer tests: the read needs R (and W with EPT
  /// A/D) in the AND of the entries, so it fails as soon as one entry lacks them; an entry
  /// with R is present and escapes the R=0 misconfigurations (SDM 29.3.2, 29.3.3.1), which
  /// leaves one mask test per level (`table_check_`: the needed bits and the reserved bits
  /// of a non-leaf entry, bits 7:3 included, so PS=1 takes the large-page branch) and the
  /// memory type of the leaf.
  /// Both lengths as walk_levels(): a 5-level walk is its PML5 step, then levels 4-1 on the
  /// entries one further on.
  template <guest_memory M>
  [[gnu::always_inline]] constexpr miss_answer table_walk(const M& mem, std::uint64_t ga, table_fill& c) const noexcept {
    constexpr miss_answer failed{miss_failed, 0};
    table_leaf leaf{};
    leaf.all = ~std::uint64_t{0};
    // Levels 4-1 at c.vals[1..4] whatever the length (constant indices), a PML5 entry at
    // c.vals[0]; see walk_checked_final().
    std::uint64_t* const vals = c.vals + 1;
    std::uint64_t table = root_.value();
    std::uint64_t first = 0;
    const bool five = levels_ == 5;
    if (five) {
      // A PML5 entry is never a leaf: it needs exactly what a non-leaf entry needs.
      const x86::gpa ea{(table & 0x000f'ffff'ffff'f000u) + ((ga >> 48) & 511u) * 8u};
      std::uint64_t e = 0;
      if (!detail::read_entry(mem, ea, e)) [[unlikely]] return failed;
      c.vals[0] = e;
      leaf.all = e;
      if ((e & table_check_[5]) != table_need_) [[unlikely]] return failed;
      first = ea.value();
      table = e;
    } else {
      first = (table & 0x000f'ffff'ffff'f000u) + ((ga >> 39) & 511u) * 8u;
    }
    if (!table_steps<4, 4>(mem, ga, vals, table, leaf)) [[unlikely]] return failed;
    const std::uint64_t e = leaf.e;
    const std::uint64_t size = std::uint64_t{1} << (12 + 9 * (leaf.level - 1));
    miss_answer m{(e & 0x000f'ffff'ffff'f000u & ~(size - 1)) | (ga & (size - 1)), 0};
    constexpr std::uint64_t d_bit = ept_entry::dirty.raw();
    c.ad &= (leaf.all & ~d_bit) | (e & d_bit);  // A of every entry, D of the leaf
    if (leaf.level == 1) {
      m.pt = (leaf.table & 0x000f'ffff'ffff'f000u) | 1u;  // refilled
      c.upper = leaf.upper;
      c.first = first;
      c.count = static_cast<std::uint8_t>(five ? 4u : 3u);
    }  // else m.pt = 0: `c.vals` holds this walk's entries now, not the cached region's
    return m;
  }
  /// What table_steps() ends with: the leaf, its level, the table it was read from, the AND
  /// of the entries above it and of every entry (all).
  struct table_leaf {
    std::uint64_t e = 0, table = 0, upper = 0, all = 0;
    unsigned level = 0;
  };
  /// One level of table_walk() and the levels below it.
  template <unsigned Top, unsigned Level, guest_memory M>
  [[gnu::always_inline]] constexpr bool table_steps(const M& mem, std::uint64_t ga, std::uint64_t* vals,
                                                    std::uint64_t table, table_leaf& leaf) const noexcept {
    const x86::gpa ea{(table & 0x000f'ffff'ffff'f000u) + ((ga >> (12 + 9 * (Level - 1))) & 511u) * 8u};
    std::uint64_t e = 0;
    if (!detail::read_entry(mem, ea, e)) [[unlikely]] return false;
    vals[Top - Level] = e;
    leaf.upper = leaf.all;
    leaf.all &= e;
    leaf.e = e;
    leaf.table = table;
    if constexpr (Level == 1) {
      leaf.level = 1;
      return (e & table_check_[1]) == table_need_ && valid_memory_type(e);
    } else {
      if ((e & table_check_[Level]) != table_need_) [[unlikely]] {
        // A large page (PS=1 where the capabilities allow it), or a fault.
        if constexpr (Level == 2 || Level == 3) {
          if ((e & ept_entry::page_size.raw()) && rules_.maps_page(e, Level) &&
              (e & (table_need_ | rules_.reserved_bits(Level, true))) == table_need_ && valid_memory_type(e)) {
            leaf.level = Level;
            return true;
          }
        }
        return false;
      }
      return table_steps<Top, Level - 1>(mem, ga, vals, e, leaf);
    }
  }

  struct regs {
    std::uint64_t table = 0, e = 0;
    std::uint64_t all = ~std::uint64_t{0};
    std::uint64_t* vals = nullptr;
  };

  template <unsigned Top, unsigned Level, class Mem>
  [[gnu::always_inline]] constexpr int run(const Mem& m, std::uint64_t ga, regs& w, walk_fault& f, ept_access acc,
                                           unsigned& level) const noexcept {
    const int st = step<Top, Level>(m, ga, w, f, acc);
    if constexpr (Level > 1) {
      if (st == 0) return run<Top, Level - 1>(m, ga, w, f, acc, level);
    }
    level = Level;
    return st;
  }

  /// Allowed or denied, on the raw EPT entry bits (the AND over the walk): the access needs
  /// R (bit 0) for a read, W (bit 1) for a write, and for a fetch X (bit 2), or XU (bit 10)
  /// under MBEC from a user-mode linear address (SDM 29.3.3.2). The same rule as the role's
  /// permission table (ept_permission_fault(), used for the report), without converting
  /// the entry to pte_access first; the walk tests check the two against each other.
  [[nodiscard, gnu::always_inline]] static constexpr bool denied_raw(ept_role role, ept_access acc,
                                                                     std::uint64_t entry_and) noexcept {
    const std::uint64_t a = acc.raw();
    const std::uint64_t xu = role.mbec() && (acc.raw() & ept_access::user_address.raw()) ? 1u : 0u;
    const std::uint64_t need = (a & 3u) | ((a & 4u) << (8u * xu));  // bit 2 -> bit 10 for XU
    return (entry_and & need) != need;
  }
  /// The same decision by the role's permission table, on pte_access rights.
  [[nodiscard, gnu::always_inline]] static constexpr bool denied(ept_role role, ept_access acc,
                                                                 std::uint64_t rights) noexcept {
    const unsigned cls = static_cast<unsigned>((acc.raw() & 7u) | ((acc.raw() & ept_access::user_address.raw()) ? 8u : 0u));
    return (permission_table_for(role).entries[cls] >> (rights & 31u)) & 1u;
  }
  [[nodiscard, gnu::always_inline]] constexpr bool denied(ept_access acc, std::uint64_t rights) const noexcept {
    return denied(role_, acc, rights);
  }

 public:
  /// denied_raw() and denied() agree for every role, access class and R/W/X/XU combination
  /// (checked by a static_assert below this class).
  static consteval bool denied_raw_matches_table() {
    for (unsigned p = 0; p < 4; ++p) {
      const ept_role role(p & 1u, p & 2u, false);
      for (unsigned c = 0; c < 16; ++c) {
        const ept_access acc{(c & 7u) | (c & 8u ? ept_access::user_address.raw() : 0u)};
        for (unsigned b = 0; b < 16; ++b) {
          const std::uint64_t e = (b & 7u) | ((b & 8u) ? std::uint64_t{1} << 10 : 0u);
          if (denied_raw(role, acc, e) != denied(role, acc, entry_rights(e))) return false;
        }
      }
    }
    return true;
  }

 private:

  /// One level (SDM 29.3.2, 29.3.3.1): read, present, misconfiguration, rights, leaf.
  template <unsigned Top, unsigned Level, class Mem>
  [[gnu::always_inline]] constexpr int step(const Mem& m, std::uint64_t ga, regs& w, walk_fault& f,
                                            ept_access acc) const noexcept {
    const x86::gpa ea{(w.table & 0x000f'ffff'ffff'f000u) + ((ga >> (12 + 9 * (Level - 1))) & 511u) * 8u};
    std::uint64_t e = 0;
    constexpr unsigned i = Top - Level;
    if (!detail::read_entry(*m, ea, e)) [[unlikely]] {
      f.kind = fault_kind::unbacked;
      f.level = static_cast<std::uint8_t>(Level);
      f.set_entry_address(x86::hpa{ea.value()});  // the EPT tables are host-physical
      return -1;
    }
    w.e = e;
    w.vals[i] = e;
    if (!(e & rules_.present_mask())) [[unlikely]] {
      // SDM 28.2.1: bits 6:3 are the ANDed rights including this entry, i.e. 0.
      fail(f, fault_kind::not_present, Level, ea, e);
      f.qualification = f.qualification | ept_qualification{acc.raw() & 7u};
      return -1;
    }
    const bool leaf = rules_.maps_page(e, Level);
    if (rules_.misconfigured(e, Level, leaf)) [[unlikely]] {
      fail(f, fault_kind::ept_misconfig, Level, ea, e);
      return -1;
    }
    w.all &= e;  // the rights are a bit permutation of the entry: ANDed once at the end
    if (leaf) {
      for (unsigned j = i + 1; j < Top; ++j) w.vals[j] = 0;  // below a large page
      return 1;
    }
    w.table = e;
    return 0;
  }

  /// The A/D update by compare-exchange, with bounded re-walks when an entry changed: out of
  /// line and from a fresh walk. Fills `r` and returns its address (walk() stores it).
  template <writable_guest_memory M>
  [[gnu::noinline]] constexpr x86::hpa update_slow(M& mem, ept_request req, host_walk_result& r) const noexcept {
    r = update_slow(mem, req);
    return r ? r.value().address : x86::hpa{};
  }
  template <writable_guest_memory M>
  constexpr host_walk_result update_slow(M& mem, const ept_request& req) const noexcept {
    const bool dirty = effective_access(req).test(ept_access::write);
    host_translation t{};
    walk_fault f = base_fault(req);
    for (unsigned attempt = 0;; ++attempt) {
      std::uint64_t all = 0;
      if (!walk_checked(mem, req, t, f, all)) return unexpected(f);
      if (!needs_ad(req, all)) return t;
      if (attempt >= 8) {
        f.kind = fault_kind::retry_exhausted;
        return unexpected(f);
      }
      const int u = apply_ad(mem, t, dirty, f);
      if (u > 0) return t;
      if (u < 0) return unexpected(f);
    }
  }

  [[nodiscard]] static constexpr walk_fault base_fault(const ept_request& req) noexcept {
    walk_fault f{};
    f.stage = walk_stage::ept;
    f.guest_physical = req.address;
    f.linear = req.linear;
    // SDM 28.2.1: bit 7 = guest-linear address valid; bit 8 (with bit 7) = the access was
    // to the translation of that address rather than to a guest paging-structure entry.
    // A PDPTE load has no linear address (bits 7 and 8 are 0).
    if (req.origin == ept_origin::pdpte_load) {
      f.linear = x86::gva{};
    } else if (req.linear_valid) {
      f.qualification = ept_qualification::linear_valid;
      if (req.origin == ept_origin::final_access)
        f.qualification = f.qualification | ept_qualification::final_translation;
    }
    return f;
  }

  [[gnu::cold, gnu::noinline]] static constexpr bool fail(walk_fault& f, fault_kind k, unsigned level, x86::gpa ea,
                                                          std::uint64_t e) noexcept {
    f.kind = k;
    f.level = static_cast<std::uint8_t>(level);
    f.set_entry_address(x86::hpa{ea.value()});  // the EPT tables are host-physical
    f.entry_value = e;
    if (k == fault_kind::ept_misconfig) f.qualification = ept_qualification{};  // a misconfiguration has none
    return false;
  }

  /// An EPT violation on permissions: the qualification from ept_permission_fault plus
  /// bits 7/8; the level blamed is the first entry lacking a needed right.
  constexpr void permission_report(const host_translation& t, ept_access acc, ept_violation v, walk_fault& f) const noexcept {
    f.kind = fault_kind::permission;
    f.qualification = f.qualification | ept_qualification::from(v);
    std::uint64_t needed = 0;
    if (acc.test(ept_access::read)) needed |= pte_access::read.raw();
    if (acc.test(ept_access::write)) needed |= pte_access::write.raw();
    if (acc.test(ept_access::fetch))
      needed |= role_.mbec() && acc.test(ept_access::user_address) ? pte_access::user_exec.raw() : pte_access::exec.raw();
    host_walked_entry blame = t.path.back();
    for (unsigned i = 0; i < t.path.count; ++i) {
      if ((entry_rights(t.path.values[i]) & needed) != needed) {
        blame = t.path[i];
        break;
      }
    }
    f.level = blame.level;
    f.leaf_level = static_cast<std::uint8_t>(t.path.top - t.path.count + 1u);  // the entry that maps the page
    f.set_entry_address(blame.address);
    f.entry_value = blame.value;
  }

  ept_role role_{};
  ept_entry_rules rules_{};  ///< present and misconfiguration rules for the capabilities
  /// What a guest paging-structure read needs of the AND of the EPT entries: R, and W with
  /// EPT A/D (SDM 29.3.3.2: effective_access() of such a read, as denied_raw() tests it).
  std::uint64_t table_need_ = 1;
  /// Per level (1..5): table_need_ and the reserved bits of a non-leaf entry, or of a PTE
  /// (SDM 29.3.3.1): the one mask table_read() tests an entry against.
  std::uint64_t table_check_[max_levels + 1] = {0, 1u | ept_entry_rules{}.reserved_bits(1, false),
                                                1u | ept_entry_rules{}.reserved_bits(2, false),
                                                1u | ept_entry_rules{}.reserved_bits(3, false),
                                                1u | ept_entry_rules{}.reserved_bits(4, false),
                                                1u | ept_entry_rules{}.reserved_bits(5, false)};
  unsigned levels_ = 4;
  x86::hpa root_{};
};

static_assert(ept_walker::denied_raw_matches_table(),
              "ept_walker: the raw-entry permission check disagrees with the EPT permission tables");

}  // namespace hvkit::paging
