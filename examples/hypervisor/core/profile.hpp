// SPDX-License-Identifier: MIT
/// @file
/// @brief A guest profile: a guest other than the conformance guest that the reference
/// hypervisor runs over the same core (the same exit loop and handlers, either backend). A
/// profile names its flat image (loaded at layout::guest_load_gpa, entered at `entry` in
/// 64-bit mode on the hypervisor's identity boot paging) and the I/O ports it gives the
/// guest; a run_config with `profile` set runs it (core/state.hpp), its exits going through
/// core::handle_exit with the hook core::image_profile (core/exit_loop.hpp), which gives the
/// port I/O to `io` and everything else to the core. The first profile is the exit-cost
/// guest (profiles/exit_cost.cpp, docs/exit-cost.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "state.hpp"

namespace hv::core {

struct guest_profile {
  const char* name;
  const unsigned char* image;      ///< the flat image
  const unsigned char* image_end;  ///< one past its last byte
  std::uint64_t entry;        ///< guest-physical entry point (64-bit mode, CPL 0, IF = 0)
  std::uint64_t stack_top;    ///< initial RSP (the guest may set its own)
  /// An I/O exit: OUT writes `value` (the low `size` bytes of RAX), IN returns it in `value`.
  /// False: the run ends (the callee set the status: done, or fatal_exit).
  bool (*io)(vcpu_state& v, const io_access& a, std::uint64_t& value);
};

}  // namespace hv::core
