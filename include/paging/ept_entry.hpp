// SPDX-License-Identifier: MIT
/// @file
/// @brief EPT paging-structure entries and the EPT pointer (SDM 29.3.2, Tables 29-1 to 29-7;
/// 25.6.11 for the EPTP).
#pragma once

#include <cstdint>

#include "../x86/address.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/contract.hpp"
#include "../x86/flags.hpp"

namespace hvkit::paging {

/// EPT memory types (SDM 29.3.7, 11.3): the values of EPT leaf bits 5:3 and EPTP bits 2:0.
enum class ept_memory_type : std::uint8_t {
  uc = 0,  ///< uncacheable
  wc = 1,  ///< write combining
  wt = 4,  ///< write through
  wp = 5,  ///< write protected
  wb = 6,  ///< write back
};

/// True if `v` (bits 5:3 of a leaf EPT entry) is a valid memory type; 2, 3 and 7 are
/// reserved and make the entry misconfigured (SDM 29.3.3.1).
[[nodiscard]] constexpr bool is_valid_ept_memory_type(unsigned v) noexcept {
  return v == 0 || v == 1 || v == 4 || v == 5 || v == 6;
}

/// One EPT paging-structure entry (PML5E, PML4E, PDPTE, PDE or PTE).
class ept_entry : public x86::flags<ept_entry> {
 public:
  using flags::flags;
  static const ept_entry read;        ///< 0: R
  static const ept_entry write;       ///< 1: W
  static const ept_entry exec;        ///< 2: X (XS, supervisor-mode execute, with MBEC)
  static const ept_entry ignore_pat;  ///< 6: leaf: ignore the guest PAT
  static const ept_entry page_size;   ///< 7: PS in a PDPTE/PDE (reserved in PML4E/PML5E)
  static const ept_entry accessed;    ///< 8: A (with EPT A/D enabled)
  static const ept_entry dirty;       ///< 9: D (leaf, with EPT A/D enabled)
  static const ept_entry user_exec;   ///< 10: XU, user-mode execute (with MBEC)
  static const ept_entry suppress_ve; ///< 63: leaf: suppress #VE
  /// Bits 5:3 of a leaf: the memory type.
  using memory_type_field = x86::bitfield<std::uint64_t, 3, 3, std::uint8_t>;
  [[nodiscard]] constexpr std::uint8_t memory_type() const noexcept { return memory_type_field::get(raw()); }
};
inline constexpr ept_entry ept_entry::read = ept_entry::bit(0);
inline constexpr ept_entry ept_entry::write = ept_entry::bit(1);
inline constexpr ept_entry ept_entry::exec = ept_entry::bit(2);
inline constexpr ept_entry ept_entry::ignore_pat = ept_entry::bit(6);
inline constexpr ept_entry ept_entry::page_size = ept_entry::bit(7);
inline constexpr ept_entry ept_entry::accessed = ept_entry::bit(8);
inline constexpr ept_entry ept_entry::dirty = ept_entry::bit(9);
inline constexpr ept_entry ept_entry::user_exec = ept_entry::bit(10);
inline constexpr ept_entry ept_entry::suppress_ve = ept_entry::bit(63);

/// The EPT pointer, EPTP (VMCS field 0x201A, SDM 25.6.11 "Extended-Page-Table Pointer
/// (EPTP)", Table 25-9): bits 2:0 the memory type of the EPT paging-structure accesses,
/// 5:3 the page-walk length minus 1, 6 the EPT A/D enable, 7 the supervisor shadow-stack
/// control, 11:8 reserved, MAXPHYADDR-1:12 the host-physical address of the EPT PML4 (PML5)
/// table, above that reserved. The typed value of vmx::fields::ept_pointer (vmwrite/vmread
/// accept it) and what ept_walker::make() takes; vmx::check_eptp() applies the VM-entry
/// checks, make_ept_pointer() builds one.
class ept_pointer : public x86::flags<ept_pointer> {
 public:
  using flags::flags;
  /// Bits 2:0: memory type of the paging-structure accesses (UC = 0 or WB = 6).
  using memory_type_field = x86::bitfield<std::uint64_t, 0, 3, std::uint8_t>;
  /// Bits 5:3: page-walk length minus 1 (3 = 4 levels, 4 = 5 levels).
  using walk_length_field = x86::bitfield<std::uint64_t, 3, 3, std::uint8_t>;
  static const ept_pointer ad_enabled;            ///< 6: accessed and dirty flags for EPT
  static const ept_pointer supervisor_shadow_stack;  ///< 7: enforce access rights for supervisor shadow stacks

  /// Bits 2:0: the memory type of the paging-structure accesses (VM entry allows UC or WB).
  [[nodiscard]] constexpr ept_memory_type memory_type() const noexcept {
    return static_cast<ept_memory_type>(memory_type_field::get(raw()));
  }
  /// Bits 5:3: the page-walk length field, one less than the number of levels.
  [[nodiscard]] constexpr unsigned walk_length() const noexcept { return walk_length_field::get(raw()); }
  /// The number of EPT levels (page-walk length + 1: 4 or 5 for a usable EPTP).
  [[nodiscard]] constexpr unsigned levels() const noexcept { return walk_length_field::get(raw()) + 1u; }
  /// Bit 6: accessed and dirty flags for EPT are enabled.
  [[nodiscard]] constexpr bool accessed_dirty() const noexcept { return (raw() >> 6) & 1u; }
  /// Bit 7: access rights for supervisor shadow-stack pages are enforced.
  [[nodiscard]] constexpr bool supervisor_shadow_stack_control() const noexcept { return (raw() >> 7) & 1u; }
  /// The PML4 (or PML5) table: bits MAXPHYADDR-1:12, a host-physical address (the EPT tables
  /// live in the memory of the one that set up the EPT; SDM 25.6.11).
  [[nodiscard]] constexpr x86::hpa root(unsigned maxphyaddr) const noexcept {
    return x86::hpa{raw() & x86::physical_address_mask(maxphyaddr) & ~(x86::page_size_4k - 1)};
  }
};
inline constexpr ept_pointer ept_pointer::ad_enabled = ept_pointer::bit(6);
inline constexpr ept_pointer ept_pointer::supervisor_shadow_stack = ept_pointer::bit(7);

/// What the processor and the VM-execution controls allow (IA32_VMX_EPT_VPID_CAP, SDM A.10;
/// secondary processor-based controls): hvkit's one EPT capability type, used by the EPT
/// walker, the mappings enumerator and vmx's EPT builders. vmx::ept_capabilities_from()
/// decodes the MSR into it.
///
/// The default state is one thing: a processor that reports *every* capability this struct
/// describes (every `IA32_VMX_EPT_VPID_CAP` bit below is 1, MAXPHYADDR 52), with the one
/// VM-execution control it carries, `mbec`, off (controls are off unless set). A caller
/// describing a real processor clears what it lacks (or uses vmx::ept_capabilities_from);
/// nothing must be set to get a permissive walker for a tool.
struct ept_capabilities {
  unsigned maxphyaddr = 52;  ///< CPUID.80000008H:EAX[7:0], 32..52
  bool execute_only = true;  ///< cap bit 0: execute-only entries are allowed
  bool walk4 = true;          ///< cap bit 6: 4-level walks
  bool walk5 = true;          ///< cap bit 7: 5-level walks
  bool page_2m = true;        ///< cap bit 16: PDEs may map 2 MiB pages
  bool page_1g = true;        ///< cap bit 17: PDPTEs may map 1 GiB pages
  bool ad = true;             ///< cap bit 21: EPT accessed and dirty flags
  bool mbec = false;          ///< the "mode-based execute control for EPT" control is 1
  /// cap bit 23: supervisor shadow-stack control, i.e. EPTP bit 7 may be 1 (SDM A.10,
  /// 27.2.1.1); without it EPTP bit 7 is reserved.
  bool supervisor_shadow_stack = true;
  /// cap bit 8: an EPTP may have memory type UC (checked by vmx::check_eptp; SDM A.10).
  bool eptp_uc = true;
  /// cap bit 14: an EPTP may have memory type WB (checked by vmx::check_eptp; SDM A.10).
  bool eptp_wb = true;
};

/// Which rule of SDM 29.3.3.1 makes a present EPT entry misconfigured (the first one, in
/// this order, when several apply).
enum class ept_misconfig : std::uint8_t {
  none = 0,                  ///< not misconfigured
  write_without_read,        ///< W=1 and R=0 (bits 2:0 = 010b or 110b)
  execute_only_unsupported,  ///< R=0 with X=1 (or XU=1 under MBEC) without capability bit 0
  reserved_memory_type,      ///< a leaf (or PS=1) entry with memory type 2, 3 or 7
  large_page_unsupported,    ///< PS=1 in a PML5E/PML4E, or in a PDPTE/PDE without that page size
  reserved_bits,             ///< another reserved bit: 51:MAXPHYADDR, 7:3 of a non-leaf, the
                             ///< address bits below a large page's alignment
};

/// The EPT misconfiguration rules of SDM 29.3.3.1 for one set of capabilities, as masks
/// computed once: the single rule set of hvkit, used by the EPT walker on every level and
/// by vmx's entry builders (through ept_misconfiguration()).
///
/// "Present" (SDM 29.3.2) is any of bits 2:0, or bit 10 (XU) under MBEC; the rules apply
/// to present entries only.
class ept_entry_rules {
 public:
  constexpr ept_entry_rules() noexcept : ept_entry_rules(make(ept_capabilities{})) {}

  /// The rules for `caps`. `caps.maxphyaddr` outside 32..52 is a contract violation.
  [[nodiscard]] static constexpr ept_entry_rules make(const ept_capabilities& caps) noexcept {
    HVKIT_EXPECTS(x86::is_valid_maxphyaddr(caps.maxphyaddr));
    ept_entry_rules r{no_init{}};
    r.present_mask_ = caps.mbec ? 0x407u : 0x7u;
    r.exec_only_bits_ = caps.execute_only ? 0u : (caps.mbec ? 0x404u : 0x4u);
    const std::uint64_t high = caps.maxphyaddr < 52 ? x86::bit_range(51, caps.maxphyaddr) : 0;
    // Tables 29-1..29-7: a non-leaf entry reserves bits 7:3 (so PS=1 in a PML5E/PML4E, or
    // in a PDPTE/PDE where that page size is not supported, is reserved); a 1 GiB leaf
    // reserves 29:12, a 2 MiB leaf 20:12; all reserve 51:MAXPHYADDR.
    for (unsigned l = 1; l <= 5; ++l) r.table_rsvd_[l] = high | (l > 1 ? x86::bit_range(7, 3) : 0);
    r.large_rsvd_[2] = high | x86::bit_range(20, 12);
    r.large_rsvd_[3] = high | x86::bit_range(29, 12);
    r.large_ok_[2] = caps.page_2m;
    r.large_ok_[3] = caps.page_1g;
    return r;
  }

  /// Bits of which any set makes an entry present: R, W, X (and XU under MBEC).
  [[nodiscard]] constexpr std::uint64_t present_mask() const noexcept { return present_mask_; }

  /// True if `e` at `level` (1 = PTE .. 5 = PML5E) maps a page: level 1, or PS=1 in a
  /// PDE/PDPTE whose page size the capabilities allow.
  [[nodiscard, gnu::always_inline]] constexpr bool maps_page(std::uint64_t e, unsigned level) const noexcept {
    return level == 1 || ((level == 2 || level == 3) && (e & ept_entry::page_size.raw()) && large_ok_[level]);
  }

  /// True if the present entry `e` at `level` (1..5; `leaf` = maps_page(e, level)) is
  /// misconfigured. The walker's fast form: a mask test and, for the rare R=0 entry, two
  /// more.
  [[nodiscard, gnu::always_inline]] constexpr bool misconfigured(std::uint64_t e, unsigned level,
                                                                 bool leaf) const noexcept {
    if (!(e & 1u)) [[unlikely]] {
      if (e & 2u) return true;                // write without read
      if (e & exec_only_bits_) return true;   // execute-only without the capability
    }
    // A leaf with memory type 2, 3 or 7 (valid: 0, 1, 4, 5, 6 = the bits of 0x73).
    const bool bad_type = leaf && !((0x73u >> ((e >> 3) & 7u)) & 1u);
    const std::uint64_t rsvd = leaf && level > 1 ? large_rsvd_[level & 7u] : table_rsvd_[level & 7u];
    return ((e & rsvd) != 0) | bad_type;
  }

  /// The reserved bits of an entry at `level` (1..5) that maps a page (`leaf`) or not: the
  /// mask misconfigured() tests.
  [[nodiscard, gnu::always_inline]] constexpr std::uint64_t reserved_bits(unsigned level, bool leaf) const noexcept {
    return leaf && level > 1 ? large_rsvd_[level & 7u] : table_rsvd_[level & 7u];
  }

  /// Which rule makes the present entry `e` at `level` misconfigured (ept_misconfig::none
  /// if none does). A level outside 1..5 is reported as large_page_unsupported only if PS
  /// is set; callers pass valid levels.
  [[nodiscard]] constexpr ept_misconfig classify(ept_entry e, unsigned level) const noexcept {
    const std::uint64_t v = e.raw();
    if (level < 1 || level > 5) return ept_misconfig::large_page_unsupported;
    if ((v & 3u) == 2u) return ept_misconfig::write_without_read;
    if (!(v & 1u) && (v & exec_only_bits_)) return ept_misconfig::execute_only_unsupported;
    const bool ps = level > 1 && (v & ept_entry::page_size.raw());
    if ((level == 1 || ps) && !is_valid_ept_memory_type(e.memory_type())) return ept_misconfig::reserved_memory_type;
    if (ps && !maps_page(v, level)) return ept_misconfig::large_page_unsupported;
    if (misconfigured(v, level, maps_page(v, level))) return ept_misconfig::reserved_bits;
    return ept_misconfig::none;
  }

  friend constexpr bool operator==(const ept_entry_rules&, const ept_entry_rules&) noexcept = default;

 private:
  struct no_init {};
  constexpr explicit ept_entry_rules(no_init) noexcept {}
  std::uint64_t present_mask_ = 7;    ///< R, W, X (and XU under MBEC): any set = present
  std::uint64_t exec_only_bits_ = 4;  ///< bits that make an R=0 entry execute-only (0 if allowed)
  std::uint64_t table_rsvd_[8]{};     ///< per level: reserved bits of a non-leaf (or PTE)
  std::uint64_t large_rsvd_[8]{};     ///< per level: reserved bits of a large-page leaf
  bool large_ok_[8]{};                ///< per level: PS=1 maps a page
};
static_assert(is_valid_ept_memory_type(0) && is_valid_ept_memory_type(1) && !is_valid_ept_memory_type(2) &&
                  !is_valid_ept_memory_type(3) && is_valid_ept_memory_type(4) && is_valid_ept_memory_type(5) &&
                  is_valid_ept_memory_type(6) && !is_valid_ept_memory_type(7),
              "ept_entry_rules::misconfigured() hard-codes the valid memory types as the bits of 0x73");

/// Which rule of SDM 29.3.3.1 makes the present EPT entry `entry` at `level` (1 = PTE to
/// 5 = PML5E) misconfigured under `caps`, or ept_misconfig::none. For one-off checks (entry
/// builders, audits); a walker keeps an ept_entry_rules.
[[nodiscard]] constexpr ept_misconfig ept_misconfiguration(ept_entry entry, unsigned level,
                                                           const ept_capabilities& caps) noexcept {
  return ept_entry_rules::make(caps).classify(entry, level);
}

/// True if the present EPT entry `entry` at `level` is misconfigured under `caps`
/// (SDM 29.3.3.1; see ept_misconfiguration()).
[[nodiscard]] constexpr bool ept_misconfigured(ept_entry entry, unsigned level, const ept_capabilities& caps) noexcept {
  return ept_misconfiguration(entry, level, caps) != ept_misconfig::none;
}

/// An EPTP for a (host-physical) root, a number of levels (4 or 5) and the A/D setting, with
/// WB paging-structure accesses. vmx::make_eptp() is the checked builder.
[[nodiscard]] constexpr ept_pointer make_ept_pointer(x86::hpa root, unsigned levels, bool ad) noexcept {
  HVKIT_EXPECTS(levels == 4 || levels == 5);
  std::uint64_t v = root.value() & ~(x86::page_size_4k - 1);
  v = ept_pointer::memory_type_field::set(v, 6);
  v = ept_pointer::walk_length_field::set(v, static_cast<std::uint8_t>(levels - 1));
  return ept_pointer{v}.with(ept_pointer::ad_enabled, ad);
}

}  // namespace hvkit::paging
