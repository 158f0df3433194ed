// SPDX-License-Identifier: MIT
/// @file
/// @brief The one typed answer of a shadow MMU to a host #PF, and the host TLB work that a
/// change to the shadow tables needs.
#pragma once

#include <cstdint>

#include "../walk_result.hpp"
#include "../../x86/address.hpp"

namespace hvkit::paging::shadow {

/// What the host TLB needs after the shadow MMU changed its tables, assuming every shadow
/// root of the guest shares one host tag (VPID/ASID and PCID): a caller that gives each root
/// its own tag may skip `all` on a pure root switch.
enum class host_flush : std::uint8_t {
  none,     ///< nothing cached can be stale
  address,  ///< the host translations of the faulting linear address (INVLPG / INVVPID type 0)
  all,      ///< every host translation of the guest's tag (INVVPID type 1 / ASID flush)
};

/// Combines two flush requirements (the larger one).
[[nodiscard]] constexpr host_flush merge(host_flush a, host_flush b) noexcept {
  return static_cast<std::uint8_t>(a) > static_cast<std::uint8_t>(b) ? a : b;
}

/// What to do about a host #PF taken while the guest ran on shadow tables.
enum class fault_action : std::uint8_t {
  /// The shadow entry now gives the guest's verdict for the access: resume the guest (after
  /// `flush`). The guest's A/D flags were set by the guest walk, as the processor sets them.
  fixed,
  /// The guest's own tables deny the access: inject `fault` (its vector and error code; CR2 =
  /// `fault.linear` for a #PF). Nothing was changed in the guest's memory.
  inject,
  /// The guest-physical address `gpa` has no host frame: emulate the instruction, with the
  /// access going to the device model.
  emulate_mmio,
  /// A write to a frame holding a guest paging structure the shadow MMU mirrors (write
  /// protection): emulate the write, then report it with shadow_mmu::table_written().
  emulate_protected,
  /// The guest allows the access but no host entry can express it exactly (a CR0.WP = 0
  /// supervisor write to a read-only user-mode page under SMAP or PKE, a CR0.WP = 0
  /// supervisor write blocked by a protection key's WD, a shadow-stack access): emulate it.
  emulate_access,
};

/// The answer to one host #PF.
struct fault_answer {
  fault_action action = fault_action::fixed;
  host_flush flush = host_flush::none;
  walk_fault fault{};  ///< inject: the guest's fault
  x86::gpa gpa{};      ///< emulate_*: the guest-physical address of the access
  /// The host root to run the guest on (changes only when a full cache was rebuilt).
  x86::hpa root{};
};

}  // namespace hvkit::paging::shadow
