// SPDX-License-Identifier: MIT
/// @file
/// @brief Which changes to a translation the hypervisor owns (an EPT or NPT entry, or a shadow
/// page-table entry) require invalidating what processors may have cached, and which need not:
/// the vendor-neutral half of the cross-vCPU TLB rule. vmx/ept_invalidation.hpp turns the
/// answer into INVEPT/INVVPID, svm/npt_invalidation.hpp into TLB_CONTROL or a new ASID.
///
/// Sources: SDM Vol. 3A 4.10.4.2 "Recommended Invalidation" and 4.10.4.3 "Optional
/// Invalidation" (the same rules hold for EPT entries and guest-physical/combined mappings,
/// SDM Vol. 3C 29.4.3 "Invalidating Cached Translation Information"); AMD APM Vol. 2 15.16
/// "TLB Control". Cached translations are per logical processor, and INVEPT, INVVPID and
/// TLB_CONTROL act on the processor that executes them only, so a required invalidation is
/// required on every processor that may cache the translation: every processor a vCPU using
/// it has run on since its last invalidation there (SDM 4.10.5 "Propagation of Paging-Structure
/// Changes to Multiple Processors").
#pragma once

#include <cstdint>

#include "../x86/flags.hpp"

namespace hvkit::paging {

/// What changed in one entry (any combination).
class mapping_change : public x86::flags<mapping_change, std::uint16_t> {
 public:
  using flags::flags;
  /// Not present -> present: "no TLB entry or paging-structure cache entry is created with
  /// information from a paging-structure entry in which the P flag is 0" (4.10.4.3).
  static const mapping_change made_present;
  /// Only permissions added (write or execute allowed, a user bit set, XD/NX cleared): a stale
  /// entry may cause a spurious fault (EPT violation, #NPF, #PF) "but no other adverse
  /// behavior", and the fault invalidates it (4.10.4.3; 29.4.3.1: an EPT violation invalidates
  /// the guest-physical mappings used for the faulting address).
  static const mapping_change permission_increased;
  /// A permission removed (read, write, execute, user).
  static const mapping_change permission_reduced;
  /// Present -> not present.
  static const mapping_change made_not_present;
  /// The physical address (frame) changed.
  static const mapping_change frame_changed;
  /// The memory type changed (EPT bits 6:3; NPT PAT/PCD/PWT).
  static const mapping_change memory_type_changed;
  /// The page size changed (a large page split, or pages merged into one).
  static const mapping_change page_size_changed;
  /// An accessed or dirty flag cleared: without invalidation the processor may not set it
  /// again on the next access (4.10.4.3), so dirty logging would miss writes.
  static const mapping_change accessed_dirty_cleared;
};
inline constexpr mapping_change mapping_change::made_present = bit(0);
inline constexpr mapping_change mapping_change::permission_increased = bit(1);
inline constexpr mapping_change mapping_change::permission_reduced = bit(2);
inline constexpr mapping_change mapping_change::made_not_present = bit(3);
inline constexpr mapping_change mapping_change::frame_changed = bit(4);
inline constexpr mapping_change mapping_change::memory_type_changed = bit(5);
inline constexpr mapping_change mapping_change::page_size_changed = bit(6);
inline constexpr mapping_change mapping_change::accessed_dirty_cleared = bit(7);

/// The vendor-neutral answer.
enum class invalidation : std::uint8_t {
  /// Nothing to do: a stale cached entry can only be more restrictive than memory, and the
  /// exit it causes invalidates it (the exit handler must resume the guest when it finds the
  /// access now allowed: a spurious exit).
  none,
  /// Every processor that may cache the translation must invalidate it before the change is
  /// relied upon (before a removed frame is reused, a reduced permission trusted, a cleared
  /// dirty flag read): running vCPUs are kicked out of the guest first.
  every_caching_processor,
};

/// The invalidation `c` requires: none only if every change in it is made_present or
/// permission_increased.
[[nodiscard]] constexpr invalidation required_invalidation(mapping_change c) noexcept {
  const mapping_change harmless = mapping_change::made_present | mapping_change::permission_increased;
  return (c & ~harmless).none() ? invalidation::none : invalidation::every_caching_processor;
}

/// The set of processors that may cache a translation (one bit per processor id < 64): a vCPU
/// entering the guest on processor `cpu` marks it; an invalidation there clears it. The
/// processors left to kick and invalidate are the marked ones.
class caching_cpus {
 public:
  constexpr void entered_on(unsigned cpu) noexcept { mask_ |= bit(cpu); }
  constexpr void invalidated_on(unsigned cpu) noexcept { mask_ &= ~bit(cpu); }
  [[nodiscard]] constexpr bool may_cache(unsigned cpu) const noexcept { return (mask_ & bit(cpu)) != 0; }
  [[nodiscard]] constexpr std::uint64_t mask() const noexcept { return mask_; }

 private:
  static constexpr std::uint64_t bit(unsigned cpu) noexcept { return cpu < 64 ? std::uint64_t{1} << cpu : 0; }
  std::uint64_t mask_ = 0;
};

}  // namespace hvkit::paging
