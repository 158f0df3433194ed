// SPDX-License-Identifier: MIT
/// @file
/// @brief VMX APIC virtualization: which features the capability MSRs allow and what each needs
/// (SDM Vol. 3C chapter 30 "APIC Virtualization and Virtual Interrupts"; the control rules of
/// 27.2.1.1, which vm_entry_controls_checks.hpp checks), the controls that enable a chosen set,
/// and the MSR-bitmap policy deciding which x2APIC MSR accesses must exit (30.5 "Virtualizing
/// MSR-Based APIC Accesses").
///
/// What each needs, besides its own allowed-1 bit:
///  - TPR shadow (primary bit 21): nothing.
///  - virtualize APIC accesses (secondary bit 0): nothing (xAPIC guests; never together with
///    virtualize x2APIC mode in one VMCS).
///  - virtualize x2APIC mode (secondary 4), APIC-register virtualization (secondary 8): the
///    TPR shadow ("If the use TPR shadow VM-execution control is 0, the following ... must also
///    be 0: virtualize x2APIC mode, APIC-register virtualization, virtual-interrupt delivery").
///  - virtual-interrupt delivery (secondary 9): TPR shadow and external-interrupt exiting (pin 0).
///  - posted interrupts (pin 7): virtual-interrupt delivery and acknowledge interrupt on exit
///    (exit control 15).
///  - IPI virtualization (tertiary 4): hvkit uses it only on top of posted interrupts (it posts
///    the IPI into the target vCPU's posted-interrupt descriptor).
/// Every path the processor does not offer is done in software: the access exits and the
/// virtual local APIC of x86/lapic.hpp answers it.
#pragma once

#include <cstdint>

#include "capabilities.hpp"
#include "controls.hpp"
#include "msr_bitmap.hpp"
#include "../x86/apic_registers.hpp"

namespace hvkit::vmx {

/// A set of APIC virtualization features.
struct apic_virtualization {
  bool tpr_shadow = false;
  bool virtualize_apic_accesses = false;
  bool virtualize_x2apic_mode = false;
  bool apic_register_virtualization = false;
  bool virtual_interrupt_delivery = false;
  bool posted_interrupts = false;
  bool ipi_virtualization = false;
  friend constexpr bool operator==(const apic_virtualization&, const apic_virtualization&) noexcept = default;
};

/// Every feature the processor allows together with its prerequisites.
[[nodiscard]] constexpr apic_virtualization usable_apic_virtualization(const vmx_capabilities& c) noexcept {
  const std::uint32_t pin1 = c.pin_caps().may_be_one, p1 = c.primary_caps().may_be_one;
  const std::uint32_t p2 = c.secondary_caps().may_be_one, ex1 = c.exit_caps().may_be_one;
  const bool secondary = (p1 & primary_proc_based::activate_secondary_controls.raw()) != 0;
  auto sec = [&](secondary_proc_based b) { return secondary && (p2 & b.raw()) != 0; };
  apic_virtualization v;
  v.tpr_shadow = (p1 & primary_proc_based::use_tpr_shadow.raw()) != 0;
  v.virtualize_apic_accesses = sec(secondary_proc_based::virtualize_apic_accesses);
  v.virtualize_x2apic_mode = v.tpr_shadow && sec(secondary_proc_based::virtualize_x2apic_mode);
  v.apic_register_virtualization = v.tpr_shadow && sec(secondary_proc_based::apic_register_virtualization);
  v.virtual_interrupt_delivery = v.tpr_shadow && sec(secondary_proc_based::virtual_interrupt_delivery) &&
                                 (pin1 & pin_based::external_interrupt_exiting.raw()) != 0;
  v.posted_interrupts = v.virtual_interrupt_delivery && (pin1 & pin_based::process_posted_interrupts.raw()) != 0 &&
                        (ex1 & exit_controls::acknowledge_interrupt_on_exit.raw()) != 0;
  v.ipi_virtualization = v.posted_interrupts && c.tertiary_allowed1().test(tertiary_proc_based::ipi_virtualization);
  return v;
}

/// The controls that enable `v` (callers adjust them with adjust_controls as usual).
struct apic_controls {
  pin_based pin{};
  primary_proc_based primary{};
  secondary_proc_based secondary{};
  tertiary_proc_based tertiary{};
  exit_controls exit{};
};
[[nodiscard]] constexpr apic_controls controls_for(const apic_virtualization& v) noexcept {
  apic_controls c;
  if (v.tpr_shadow) c.primary |= primary_proc_based::use_tpr_shadow;
  if (v.virtualize_apic_accesses) c.secondary |= secondary_proc_based::virtualize_apic_accesses;
  if (v.virtualize_x2apic_mode) c.secondary |= secondary_proc_based::virtualize_x2apic_mode;
  if (v.apic_register_virtualization) c.secondary |= secondary_proc_based::apic_register_virtualization;
  if (v.virtual_interrupt_delivery) {
    c.secondary |= secondary_proc_based::virtual_interrupt_delivery;
    c.pin |= pin_based::external_interrupt_exiting;
  }
  if (v.posted_interrupts) {
    c.pin |= pin_based::process_posted_interrupts;
    c.exit |= exit_controls::acknowledge_interrupt_on_exit;
  }
  if (v.ipi_virtualization) {
    c.tertiary |= tertiary_proc_based::ipi_virtualization;
    c.primary |= primary_proc_based::activate_tertiary_controls;
  }
  if (!c.secondary.none()) c.primary |= primary_proc_based::activate_secondary_controls;
  return c;
}

/// True if RDMSR/WRMSR of x2APIC MSR `msr` (800H-8FFH) must exit for a hypervisor that emulates
/// the local APIC with `v` enabled. Only the accesses the processor virtualizes may pass; any
/// other "operates normally" (SDM 30.5), i.e. reaches the physical x2APIC:
///  - with virtualize x2APIC mode: RDMSR and WRMSR of TPR (808H) use the virtual TPR;
///  - plus APIC-register virtualization: RDMSR of every readable register except the current
///    count (839H) reads the virtual-APIC page;
///  - plus virtual-interrupt delivery: WRMSR of EOI (80BH) and SELF IPI (83FH) are virtualized.
[[nodiscard]] constexpr bool x2apic_msr_exits(std::uint32_t msr, x86::msr_access a, const apic_virtualization& v) noexcept {
  if (msr < x86::msr::x2apic_first || msr > x86::msr::x2apic_virtualized_last) return true;
  if (!v.virtualize_x2apic_mode) return true;
  if (msr == x86::msr::x2apic_tpr) return false;
  const std::uint32_t index = msr - x86::msr::x2apic_first;
  if (a == x86::msr_access::read) {
    const auto acc = x86::apic::x2apic_access(index);
    const bool readable = acc == x86::apic::access::read_only || acc == x86::apic::access::read_write;
    return !(v.apic_register_virtualization && readable && msr != x86::msr::x2apic_timer_current_count);
  }
  return !(v.virtual_interrupt_delivery && (msr == x86::msr::x2apic_eoi || msr == x86::msr::x2apic_self_ipi));
}

/// Writes the x2APIC part of an MSR bitmap (800H-8FFH, reads and writes) for `v`.
constexpr void apply_x2apic_policy(msr_bitmap& b, const apic_virtualization& v) noexcept {
  for (std::uint32_t m = x86::msr::x2apic_first; m <= x86::msr::x2apic_virtualized_last; ++m)
    for (x86::msr_access a : {x86::msr_access::read, x86::msr_access::write})
      (void)b.set_intercept(m, a, x2apic_msr_exits(m, a, v));
}

}  // namespace hvkit::vmx
