// SPDX-License-Identifier: MIT
/// @file
/// @brief The pending-exception merge: what the processor delivers when an exception occurs
/// while it is delivering an earlier event (SDM Vol. 3A 6.15, "Interrupt 8—Double Fault
/// Exception (#DF)", Tables 6-4 and 6-5).
///
/// The classes and the table itself are x86::class_of() and x86::combine_exceptions()
/// (vector.hpp); this header adds the event view a hypervisor needs: the first event may be
/// an interrupt (external, NMI, INT n), which is benign whatever its vector (Table 6-4:
/// "All INT n", "All INTR"), and the verdict carries the event to deliver: the second
/// exception itself, #DF with error code 0, or shutdown (a contributory or page-fault class
/// exception while delivering #DF: a triple fault).
#pragma once

#include <cstdint>

#include "vector.hpp"

namespace hvkit::x86 {

/// An exception with its error code (meaningful only if has_error_code(vector, vendor)).
struct exception_event {
  vector v = vector::de;
  std::uint32_t error_code = 0;
  [[nodiscard]] constexpr bool pushes_error_code(vendor cpu) const noexcept { return has_error_code(v, cpu); }
  friend constexpr bool operator==(const exception_event&, const exception_event&) noexcept = default;
};

/// The first event's kind, as far as Table 6-4 cares: an exception is classed by its
/// vector; any interrupt (external, NMI, software INT n) is benign.
enum class first_event : std::uint8_t { exception, interrupt };

/// The merge verdict.
enum class merge_verdict : std::uint8_t {
  deliver_second,  ///< handle serially: the second exception is delivered (the first is dropped)
  double_fault,    ///< deliver #DF(0)
  shutdown,        ///< triple fault: the processor enters shutdown (SDM 6.15, interrupt 8)
};

/// What to deliver: `event` is the second exception or #DF(0); unused on shutdown.
struct merged_event {
  merge_verdict verdict = merge_verdict::deliver_second;
  exception_event event{};
  friend constexpr bool operator==(const merged_event&, const merged_event&) noexcept = default;
};

/// The processor's answer when `second` occurs while delivering `first` (SDM Table 6-5).
[[nodiscard]] constexpr merged_event merge_exception(first_event kind, vector first, exception_event second) noexcept {
  if (kind == first_event::interrupt) return {merge_verdict::deliver_second, second};
  switch (combine_exceptions(first, second.v)) {
    case delivery_outcome::deliver_second: return {merge_verdict::deliver_second, second};
    case delivery_outcome::double_fault: return {merge_verdict::double_fault, exception_event{vector::df, 0}};
    case delivery_outcome::triple_fault: return {merge_verdict::shutdown, {}};
  }
  return {merge_verdict::shutdown, {}};
}

}  // namespace hvkit::x86
