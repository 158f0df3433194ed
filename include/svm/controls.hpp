// SPDX-License-Identifier: MIT
/// @file
/// @brief The bits inside the VMCB control quadwords that are not intercepts: virtual
/// interrupt control (060h), interrupt state (068h), nested-paging and SEV control (090h),
/// virtualization extensions (0B8h) (AMD APM Vol. 2, Table B-1; 15.21 "Interrupt and Local
/// APIC Support", 15.25 "Nested Paging", 15.33 "Decode Assists").
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"

namespace hvkit::svm {

/// VMCB 060h: virtual interrupt control (15.21.1 "Virtual Interrupts").
namespace interrupt_control {
using v_tpr = x86::bitfield<std::uint64_t, 0, 8, std::uint8_t>;         ///< virtual TPR (CR8[3:0] in bits 3:0)
using v_irq = x86::bitflag<std::uint64_t, 8>;                           ///< a virtual interrupt is pending
using v_gif = x86::bitflag<std::uint64_t, 9>;                           ///< virtual GIF value (with vGIF enabled)
using v_intr_prio = x86::bitfield<std::uint64_t, 16, 4, std::uint8_t>;  ///< priority of the pending virtual interrupt
using v_ign_tpr = x86::bitflag<std::uint64_t, 20>;                      ///< ignore V_TPR for the pending interrupt
using v_intr_masking = x86::bitflag<std::uint64_t, 24>;  ///< virtualize EFLAGS.IF masking and CR8 (host IF controls physical interrupts)
using v_gif_enable = x86::bitflag<std::uint64_t, 25>;    ///< virtual GIF enabled (CPUID 8000_000A EDX[16])
using avic_enable = x86::bitflag<std::uint64_t, 31>;
using v_intr_vector = x86::bitfield<std::uint64_t, 32, 8, std::uint8_t>;  ///< vector of the pending virtual interrupt
static_assert(x86::fields_disjoint<v_tpr, v_irq, v_gif, v_intr_prio, v_ign_tpr, v_intr_masking, v_gif_enable,
                                   avic_enable, v_intr_vector>());
}  // namespace interrupt_control

/// VMCB 068h: interrupt state.
namespace interrupt_state {
using interrupt_shadow = x86::bitflag<std::uint64_t, 0>;  ///< the guest is in an interrupt shadow (STI, MOV SS)
using guest_interrupt_mask = x86::bitflag<std::uint64_t, 1>;  ///< the guest's EFLAGS.IF (written on #VMEXIT with V_INTR_MASKING)
}  // namespace interrupt_state

/// VMCB 090h: nested paging and encryption control (15.25.3 "Enabling Nested Paging").
namespace nested_control {
using np_enable = x86::bitflag<std::uint64_t, 0>;  ///< nested paging (CPUID 8000_000A EDX[0])
using sev_enable = x86::bitflag<std::uint64_t, 1>;
using sev_es_enable = x86::bitflag<std::uint64_t, 2>;
}  // namespace nested_control

/// VMCB 0B8h: virtualization extensions.
namespace virtualization_ext {
using lbr_virtualization = x86::bitflag<std::uint64_t, 0>;      ///< CPUID 8000_000A EDX[1]
using virtual_vmsave_vmload = x86::bitflag<std::uint64_t, 1>;   ///< CPUID 8000_000A EDX[15]
}  // namespace virtualization_ext

}  // namespace hvkit::svm
