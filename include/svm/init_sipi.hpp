// SPDX-License-Identifier: MIT
/// @file
/// @brief INIT under SVM and the AP start-up model (AMD APM Vol. 2, 15.17 "Global Interrupt
/// Flag, STGI and CLGI"; the INIT intercept, bit 3 of the intercept word at VMCB offset 00Ch,
/// Table B-1, and VMEXIT_INIT 63h, Appendix C; VM_CR MSR C001_0114h bit 1, R_INIT, 15.30.1).
///
/// SVM has no guest wait-for-SIPI state: a guest's INIT and SIPI are messages the hypervisor's
/// virtual APIC sends between vCPUs, and the hypervisor applies x86/init_sipi.hpp to the target
/// (keeping a vCPU that waits for its SIPI off the CPU). A physical INIT is a different thing:
///  - with GIF = 0 it is held pending until GIF is set again (15.17);
///  - in a guest with the INIT intercept set it causes #VMEXIT(INIT) (exit code 63h);
///  - VM_CR.R_INIT = 1 redirects INIT to the #SX exception (vector 30) instead of resetting the
///    processor (the secure-startup mechanism that goes with SKINIT), so a host can survive it.
#pragma once

#include <cstdint>

#include "exit_code.hpp"
#include "intercepts.hpp"
#include "../x86/init_sipi.hpp"

namespace hvkit::svm {

/// VM_CR (MSR C001_0114h) bits (APM 15.30.1).
namespace vm_cr {
inline constexpr std::uint64_t dpd = 1u << 0;       ///< debug port disable
inline constexpr std::uint64_t r_init = 1u << 1;    ///< INIT redirected to #SX
inline constexpr std::uint64_t dis_a20m = 1u << 2;  ///< A20 masking disabled
inline constexpr std::uint64_t lock = 1u << 3;      ///< SVMDIS locked
inline constexpr std::uint64_t svmdis = 1u << 4;    ///< SVM disabled (EFER.SVME cannot be set)
}  // namespace vm_cr

/// #SX, the security exception INIT is redirected to.
inline constexpr std::uint8_t sx_vector = 30;

/// What a physical INIT does to this processor.
enum class physical_init_outcome : std::uint8_t {
  held_pending,     ///< GIF = 0: recognized once GIF is set again
  vmexit_init,      ///< in a guest, INIT intercepted: #VMEXIT with exit code 63h
  redirected_to_sx, ///< VM_CR.R_INIT: #SX
  processor_init,   ///< the processor performs INIT (x86::state_after_init)
};

/// The outcome of a physical INIT given GIF, whether the processor runs a guest with the INIT
/// intercept set, and VM_CR. GIF = 0 holds it first; an intercepted INIT in a guest exits
/// before any redirection is considered.
[[nodiscard]] constexpr physical_init_outcome on_physical_init(bool gif, bool in_guest_with_init_intercept,
                                                               std::uint64_t vm_cr_value) noexcept {
  if (!gif) return physical_init_outcome::held_pending;
  if (in_guest_with_init_intercept) return physical_init_outcome::vmexit_init;
  if (vm_cr_value & vm_cr::r_init) return physical_init_outcome::redirected_to_sx;
  return physical_init_outcome::processor_init;
}

/// The intercept and exit code, named together.
inline constexpr intercept init_intercept = intercept::init;
inline constexpr exit_code vmexit_init = exit_code::init;

}  // namespace hvkit::svm
