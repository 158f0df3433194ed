// SPDX-License-Identifier: MIT
/// @file
/// @brief The MSRPM policy for the x2APIC MSRs under SVM (AMD APM Vol. 2, 15.11 "MSR
/// Intercepts"): without AVIC the guest's local APIC is the hypervisor's virtual APIC, so every
/// RDMSR and WRMSR of 800H-8FFH is intercepted (a passed-through access would reach the
/// physical x2APIC). AVIC's x2APIC mode (which lets some accesses through) is not modelled.
#pragma once

#include <cstdint>

#include "msr_permission_map.hpp"
#include "../x86/msr.hpp"

namespace hvkit::svm {

/// True if the access must be intercepted (without AVIC: every x2APIC MSR).
[[nodiscard]] constexpr bool x2apic_msr_intercepted(std::uint32_t msr, x86::msr_access) noexcept {
  return msr >= x86::msr::x2apic_first && msr <= x86::msr::x2apic_virtualized_last;
}

/// Intercepts every x2APIC MSR access in `m`.
constexpr void apply_x2apic_policy(msr_permission_map& m) noexcept {
  for (std::uint32_t i = x86::msr::x2apic_first; i <= x86::msr::x2apic_virtualized_last; ++i)
    for (x86::msr_access a : {x86::msr_access::read, x86::msr_access::write}) (void)m.set_intercept(i, a, true);
}

}  // namespace hvkit::svm
