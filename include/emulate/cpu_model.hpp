// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulation context's CPUID-derived fields from the guest CPU model: one place
/// where emulate::context gets MAXPHYADDR, LAM, the CR4 bits the guest may set and CX8/CX16.
#pragma once

#include <cstdint>

#include "context.hpp"
#include "../cpuid/guest_cpu_model.hpp"

namespace hvkit::emulate {

/// Sets `c.maxphyaddr`, `c.lam`, `c.cr4_allowed`, `c.cx8` and `c.cx16` from `m` (the rest of `c` is the
/// guest's state and untouched).
constexpr void apply_cpu_model(context& c, const cpuid::guest_cpu_model& m) noexcept {
  c.maxphyaddr = static_cast<std::uint8_t>(m.maxphyaddr);
  c.lam = m.lam;
  c.cr4_allowed = m.cr4_allowed;
  c.cx8 = m.has(cpuid::feat::cx8);
  c.cx16 = m.has(cpuid::feat::cx16);
}

}  // namespace hvkit::emulate
