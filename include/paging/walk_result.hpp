// SPDX-License-Identifier: MIT
/// @file
/// @brief What a page walk returns: the translation with its report (address, page size,
/// rights, protection key, the entries walked) or a fault that says what failed, where,
/// and carries the ready #PF error code or EPT-violation exit qualification.
#pragma once

#include <array>
#include <cstdint>

#include "access.hpp"
#include "../x86/address.hpp"
#include "../x86/contract.hpp"
#include "../x86/flags.hpp"
#include "../x86/pfec.hpp"
#include "../x86/result.hpp"
#include "../x86/vector.hpp"

namespace hvkit::paging {

/// The most levels any walk has (5-level paging, 5-level EPT).
inline constexpr unsigned max_levels = 5;

/// One paging-structure entry the walk read: where it is and what it held. `level` is
/// 1 for a PTE (EPT PTE) up to 5 for a PML5E; for a PAE PDPTE `address` is where the
/// PDPTE was loaded from (it comes from the snapshot, not from memory). `Address` is the
/// space the tables live in: x86::gpa for the guest's own tables (walked_entry), x86::hpa
/// for a second stage's (EPT, NPT: host_walked_entry; SDM 25.6.11, APM 15.25.4).
template <class Address>
struct basic_walked_entry {
  Address address{};
  std::uint64_t value = 0;
  std::uint8_t level = 0;
};
using walked_entry = basic_walked_entry<x86::gpa>;       ///< an entry of the guest's tables
using host_walked_entry = basic_walked_entry<x86::hpa>;  ///< an EPT or NPT entry

/// The entries of one walk, top level first. Only the values are stored: the address of
/// each entry below the first follows from the entry above it and the input address (SDM
/// 4.3-4.5, 29.3.2), which keeps a result small enough to return by value cheaply.
/// `operator[]` gives one entry with its address (in `Address`'s space) and level.
/// Value-initialized (`walk_path p{}`) every member but `index_bits` and `entry_bytes` is 0;
/// the others have no default member initializer (see basic_translation).
template <class Address>
struct basic_walk_path {
  std::array<std::uint64_t, max_levels> values;  ///< what each entry held, top level first
  std::uint64_t first;           ///< address of the first (top-level) entry
  std::uint64_t input;           ///< the address translated (linear, or guest-physical for EPT)
  std::uint8_t count;            ///< entries read
  std::uint8_t top;              ///< level of the first entry
  std::uint8_t index_bits = 9;   ///< bits of index per level (10 for 32-bit paging)
  std::uint8_t entry_bytes = 8;  ///< 4 for 32-bit paging

  /// Sets the shape of the walk and clears the entries.
  constexpr void start(std::uint64_t in, unsigned bits, unsigned bytes) noexcept {
    count = 0;
    input = in;
    index_bits = static_cast<std::uint8_t>(bits);
    entry_bytes = static_cast<std::uint8_t>(bytes);
  }
  /// Appends an entry read at `a` (only the first address is kept) for `level`.
  constexpr void push(Address a, std::uint64_t v, unsigned level) noexcept {
    if (count == 0) {
      first = a.value();
      top = static_cast<std::uint8_t>(level);
    }
    if (count < max_levels) values[count++] = v;
  }
  /// Entry `i` (0 = top level); precondition i < count.
  [[nodiscard]] constexpr basic_walked_entry<Address> operator[](unsigned i) const noexcept {
    HVKIT_EXPECTS(i < count);
    const unsigned level = top - i;
    std::uint64_t a = first;
    if (i != 0) {
      const std::uint64_t index = (input >> (12 + index_bits * (level - 1))) & ((std::uint64_t{1} << index_bits) - 1);
      a = (values[i - 1] & 0x000f'ffff'ffff'f000u) + index * entry_bytes;
    }
    return basic_walked_entry<Address>{Address{a}, values[i], static_cast<std::uint8_t>(level)};
  }
  /// The last entry read (the leaf on success); precondition count > 0.
  [[nodiscard]] constexpr basic_walked_entry<Address> back() const noexcept { return (*this)[count - 1u]; }
};
using walk_path = basic_walk_path<x86::gpa>;       ///< a walk of the guest's tables
using host_walk_path = basic_walk_path<x86::hpa>;  ///< a walk of EPT or NPT tables

/// Why a walk failed.
enum class fault_kind : std::uint8_t {
  none = 0,
  not_present,       ///< P = 0 (EPT: bits 2:0, and 10 with MBEC, all 0)
  reserved_bit,      ///< a reserved bit is set (IA-32 paging: #PF with RSVD)
  permission,        ///< the accumulated rights deny the access (R/W, U/S, XD, SMEP, SMAP, EPT R/W/X)
  protection_key,    ///< PKRU/PKRS denies the access (#PF with PK)
  unbacked,          ///< a paging-structure entry lies in memory the guest_memory does not back
  ept_misconfig,     ///< an EPT entry is misconfigured (SDM 29.3.3.1): an EPT-misconfiguration exit
  non_canonical,     ///< the linear address is not canonical: #GP(0) or #SS(0), no walk
  invalid_pdpte,     ///< a PAE PDPTE has a reserved bit set: #GP(0) at the PDPTE load
  retry_exhausted,   ///< the entries kept changing under the A/D update (bounded re-walks)
  /// A PAE walk without PDPTE registers: the walker was given no snapshot from load_pdptrs()
  /// (a caller error, not an architectural fault; see guest_walker::with_pdptes_from()).
  pdptes_not_loaded,
  /// A typed walker (walker_4level, ...) holds, or was handed, a paging mode other than its
  /// own (e.g. walker_4level built over a 32-bit-paging mmu_context): nothing was read (a
  /// caller error, not an architectural fault; see docs/paging-walkers.md).
  mode_mismatch,
  /// The request contradicts itself (a guest paging-structure access marked as a fetch; a
  /// PDPTE load that is not a read or carries a guest-linear address): nothing was read
  /// (a caller error, not an architectural fault).
  invalid_request,
};

/// Which stage of a (nested) walk failed.
enum class walk_stage : std::uint8_t {
  guest,  ///< the guest's own paging structures (stage 1): the fault goes to the guest
  ept,    ///< the second stage (EPT): an EPT violation or misconfiguration exit
  npt,    ///< the second stage (AMD nested paging, paging/npt.hpp): a #NPF exit
};

/// The EPT-violation exit qualification (SDM 28.2.1, Table 28-7), bits 8:0.
class ept_qualification : public x86::flags<ept_qualification> {
 public:
  using flags::flags;
  static const ept_qualification read;             ///< 0: data read
  static const ept_qualification write;            ///< 1: data write
  static const ept_qualification fetch;            ///< 2: instruction fetch
  static const ept_qualification readable;         ///< 3: AND of R over the EPT entries used
  static const ept_qualification writable;         ///< 4: AND of W
  static const ept_qualification executable;       ///< 5: AND of X (XS with MBEC)
  static const ept_qualification user_executable;  ///< 6: AND of XU (MBEC only)
  static const ept_qualification linear_valid;     ///< 7: the guest-linear-address field is valid
  /// 8 (with bit 7): 1 = the access was to the translation of the linear address,
  /// 0 = to a guest paging-structure entry.
  static const ept_qualification final_translation;

  /// Builds bits 6:0 from the EPT permission bit set.
  [[nodiscard]] static constexpr ept_qualification from(ept_violation v) noexcept {
    return ept_qualification{v.raw() & 0x7fu};
  }
};
inline constexpr ept_qualification ept_qualification::read = ept_qualification::bit(0);
inline constexpr ept_qualification ept_qualification::write = ept_qualification::bit(1);
inline constexpr ept_qualification ept_qualification::fetch = ept_qualification::bit(2);
inline constexpr ept_qualification ept_qualification::readable = ept_qualification::bit(3);
inline constexpr ept_qualification ept_qualification::writable = ept_qualification::bit(4);
inline constexpr ept_qualification ept_qualification::executable = ept_qualification::bit(5);
inline constexpr ept_qualification ept_qualification::user_executable = ept_qualification::bit(6);
inline constexpr ept_qualification ept_qualification::linear_valid = ept_qualification::bit(7);
inline constexpr ept_qualification ept_qualification::final_translation = ept_qualification::bit(8);

struct walk_fault;

/// Where a faulting paging-structure entry is (walk_fault::entry_address). Its space follows
/// the fault's stage: guest-physical for the guest's own tables, host-physical for EPT and
/// NPT tables. So it converts to neither x86::gpa nor x86::hpa by itself; walk_fault reads it
/// typed by stage (guest_entry_address(), host_entry_address()) and records it from either
/// type (set_entry_address()). `value()` is the number, for printing it beside the stage.
class fault_entry_address {
 public:
  constexpr fault_entry_address() noexcept = default;
  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return v_; }
  friend constexpr bool operator==(fault_entry_address, fault_entry_address) noexcept = default;

 private:
  friend struct walk_fault;
  std::uint64_t v_ = 0;
};

/// A failed walk.
///
/// Which level a fault names (`level`): for a not-present, reserved-bit, misconfigured or
/// unbacked entry, the entry where the walk stopped. For a permission fault (guest R/W,
/// U/S, XD; EPT R/W/X/XU) hvkit names the *first entry from the top* that lacks a right
/// the access needs (the entry whose bit a hypervisor or OS would have to change), and the
/// leaf when no single entry lacks one (SMEP, SMAP, protection keys, a shadow-stack access
/// to a page that is not a shadow-stack page). Other tools report the entry that maps the
/// page instead; both are legitimate, since the architecture delivers neither (a #PF gives
/// only the error code and CR2, an EPT violation only the qualification and addresses).
/// `leaf_level` gives that second answer, so a tool can print either.
struct walk_fault {
  fault_kind kind = fault_kind::none;
  walk_stage stage = walk_stage::guest;
  /// The exception the guest gets for a guest-stage fault: #PF, or #GP/#SS for a
  /// non-canonical address, #GP for an invalid PDPTE. Meaningless for an EPT-stage fault.
  x86::vector vector = x86::vector::pf;
  /// Level of the entry at fault (1 = PTE ... 5 = PML5E), chosen as the struct comment
  /// says; 0 when no entry is involved (non-canonical address).
  std::uint8_t level = 0;
  /// For a permission or protection-key fault: the level of the entry that maps the page
  /// (1 = 4 KiB PTE, 2 = 2/4 MiB PDE, 3 = 1 GiB PDPTE). 0 for every other kind (the walk did
  /// not reach a leaf).
  std::uint8_t leaf_level = 0;
  /// For a second-stage (EPT or NPT) fault during the guest walk: the level of the guest
  /// paging-structure entry whose access faulted (4 = the guest PML4E's table read ...,
  /// 1 = the PTE's); 0 for a fault on the final guest-physical access (qualification bit 8,
  /// #NPF EXITINFO1 bit 32) and for every guest-stage fault.
  std::uint8_t guest_level = 0;
  /// Where that entry is, in the faulting stage's memory: read it typed with
  /// guest_entry_address() or host_entry_address() (it converts to neither address type).
  fault_entry_address entry_address{};
  std::uint64_t entry_value = 0;
  x86::gva linear{};          ///< the linear address of the access (also the CR2 value of a #PF)
  /// Guest-physical address that failed the second stage (EPT faults: the exit's
  /// guest-physical address); for a guest-stage unbacked fault, the unbacked address.
  x86::gpa guest_physical{};
  /// The #PF error code, hardware bits only (guest stage, #PF); for an NPT-stage fault the
  /// #PF-format low bits of the #NPF EXITINFO1 (P, RW, US, RSV, ID; AMD APM 15.25.6).
  x86::pfec error_code{};
  /// The EPT-violation exit qualification (EPT stage). For an NPT-stage fault only bits 7
  /// and 8, with the same meaning: bit 8 = the final guest-physical access faulted (#NPF
  /// EXITINFO1 bit 32), clear = an access to a guest page-table entry (bit 33); bit 7 = a
  /// guest-linear address is known (`linear`).
  ept_qualification qualification{};

  /// The level the architecture (and KVM's fault reports) names: for a permission or
  /// protection-key fault the entry that maps the page (`leaf_level`), for every other kind
  /// the entry where the walk stopped (`level`); 0 when no entry is involved.
  [[nodiscard]] constexpr unsigned architectural_level() const noexcept {
    return kind == fault_kind::permission || kind == fault_kind::protection_key ? leaf_level : level;
  }

  /// Where the entry at fault is, for a guest-stage fault (`stage == walk_stage::guest`):
  /// the guest's own tables are guest-physical. A contract violation for a second-stage
  /// fault, whose entry is host-physical (host_entry_address()).
  [[nodiscard]] constexpr x86::gpa guest_entry_address() const noexcept {
    HVKIT_EXPECTS(stage == walk_stage::guest);
    return x86::gpa{entry_address.v_};
  }
  /// Where the entry at fault is, for a second-stage fault (`stage` is walk_stage::ept or
  /// walk_stage::npt): the EPT and nested page tables are host-physical (SDM 25.6.11, APM
  /// 15.25.4), and so is the output address of a guest table the second stage does not
  /// back. A contract violation for a guest-stage fault (guest_entry_address()).
  [[nodiscard]] constexpr x86::hpa host_entry_address() const noexcept {
    HVKIT_EXPECTS(stage != walk_stage::guest);
    return x86::hpa{entry_address.v_};
  }
  /// Records a guest-stage entry's address (an entry of the guest's own tables).
  constexpr void set_entry_address(x86::gpa a) noexcept { entry_address.v_ = a.value(); }
  /// Records a second-stage entry's address (an EPT or NPT entry, or the host-physical
  /// address of a guest table entry the second stage does not back).
  constexpr void set_entry_address(x86::hpa a) noexcept { entry_address.v_ = a.value(); }
};

/// A successful walk. Kept at 80 bytes so that building and returning one stays cheap.
/// `translation t{}` is all zero (the path's `index_bits` and `entry_bytes` aside), as it
/// always was; the members have no default member initializers, so that a walk can build its
/// result in place without clearing it first: a successful walk writes every member (the
/// path's entries below its leaf, and beyond its levels, as 0). A default-initialized
/// `translation t;` is indeterminate until written, as any aggregate of integers.
/// `Address` is the output's space: x86::gpa for a walk of the guest's own tables
/// (translation: linear -> guest-physical), x86::hpa for a second-stage walk (host_translation:
/// guest-physical -> host-physical through EPT or NPT, whose tables are host-physical too;
/// SDM 29.3, APM 15.25). The two never convert into each other implicitly.
template <class Address>
struct basic_translation {
  Address address;                 ///< the byte-exact output address
  basic_walk_path<Address> path;   ///< the entries used, top level first
  pte_access rights;          ///< the rights accumulated over every level
  std::uint8_t pkey;          ///< protection key of the leaf (4/5-level paging; else 0)
  /// Guest paging: the leaf's PAT/PCD/PWT bits as an index 0-7 (SDM 11.12.3).
  /// EPT: the leaf's memory type (bits 5:3), with bit 3 = ignore-PAT (bit 6).
  std::uint8_t memory_type;
  std::uint8_t page_shift;  ///< log2 of the page size: 12, 21, 22 or 30

  /// The page size in bytes: 4 KiB, 2 MiB, 4 MiB or 1 GiB.
  [[nodiscard]] constexpr std::uint64_t page_size() const noexcept { return std::uint64_t{1} << page_shift; }
};
/// A walk of the guest's own paging structures: linear -> guest-physical.
using translation = basic_translation<x86::gpa>;
/// A second-stage walk (EPT, NPT, the identity stage): guest-physical -> host-physical.
using host_translation = basic_translation<x86::hpa>;

/// The result of a walk of the guest's paging structures.
using walk_result = result<translation, walk_fault>;
/// The result of a second-stage (EPT or NPT) walk: the output is host-physical.
using host_walk_result = result<host_translation, walk_fault>;

/// A successful two-stage walk: the guest's (L2) translation to its guest-physical address
/// and the second stage's (L1) output for it.
struct nested_translation {
  translation guest;   ///< stage 1: `guest.address` is the L2 guest-physical address
  host_translation second;  ///< stage 2 of the final address: `second.address` is the L1 (host-physical) address
  [[nodiscard]] constexpr x86::gpa l2_gpa() const noexcept { return guest.address; }
  [[nodiscard]] constexpr x86::hpa l1_address() const noexcept { return second.address; }
};

/// The result of a nested walk (the fault's `stage` tells which stage failed).
using nested_result = result<nested_translation, walk_fault>;

}  // namespace hvkit::paging
