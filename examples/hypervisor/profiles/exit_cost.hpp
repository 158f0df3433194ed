// SPDX-License-Identifier: MIT
/// @file
/// @brief The exit-cost guest profile (docs/exit-cost.md): the guest of
/// examples/exit-cost/guest, the same bytes KVM runs, under the reference hypervisor on
/// either backend. Selected by the word "exit-cost" on the multiboot command line.
#pragma once

#include "../core/profile.hpp"
#include "../core/state.hpp"

namespace hv::exit_cost {

/// True when the multiboot command line holds the word "exit-cost".
bool requested();

/// The profile: the image embedded by guest_blob.cpp, ports 0xE9 (console), 0xF4 (end),
/// anything else discarded (OUT) or all ones (IN).
extern const core::guest_profile profile;

/// Its two runs: CR0.WP guest-owned (the cr0_wp row is the no-exit floor) and CR0.WP
/// intercepted (the cr0_wp row is a CR-access round trip); CR0.TS guest-owned in both.
inline constexpr core::run_config runs[2] = {
    {"exit_cost_wp_guest_owned", false, false, 0, core::run_status::done, false, -1, false, &profile},
    {"exit_cost_wp_intercepted", true, false, 0, core::run_status::done, false, -1, false, &profile},
};

}  // namespace hv::exit_cost
