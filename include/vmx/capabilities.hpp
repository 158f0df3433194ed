// SPDX-License-Identifier: MIT
/// @file
/// @brief VMX capability MSRs (SDM Vol. 3D Appendix A) and control adjustment: allowed-0 /
/// allowed-1 settings, the TRUE_* MSRs (IA32_VMX_BASIC bit 55), which requested bit the CPU
/// lacks, and CR0/CR4 fixed bits with the unrestricted-guest exemption for PE and PG.
#pragma once

#include <cstdint>

#include "controls.hpp"
#include "../x86/cr.hpp"
#include "../x86/msr.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// A 32-bit control capability MSR (SDM A.3-A.5): bits 31:0 are the allowed-0 settings (a 1
/// there means the control must be 1), bits 63:32 the allowed-1 settings (a 0 there means the
/// control must be 0).
struct control_capability {
  std::uint32_t must_be_one = 0;  ///< allowed-0 settings (low half)
  std::uint32_t may_be_one = 0;   ///< allowed-1 settings (high half)
  [[nodiscard]] static constexpr control_capability from_msr(std::uint64_t v) noexcept {
    return {static_cast<std::uint32_t>(v), static_cast<std::uint32_t>(v >> 32)};
  }
};

/// Requested bits the CPU cannot provide.
template <class Controls>
struct control_error {
  /// Requested bits whose allowed-1 setting is 0.
  Controls unsupported{};
  /// Bits the caller required to be 0 whose allowed-0 setting forces them to 1.
  Controls cannot_clear{};
};

/// Adjusts controls to a capability: result = (required | optional | must_be_one) & may_be_one.
/// `required` bits the CPU cannot set, or `forbidden` bits it cannot clear, are an error
/// naming those bits; `optional` bits are dropped silently when unsupported.
template <class Controls>
[[nodiscard]] constexpr result<Controls, control_error<Controls>> adjust_controls(
    control_capability cap, Controls required, Controls optional = Controls{}, Controls forbidden = Controls{}) noexcept {
  using S = typename Controls::storage_type;
  const Controls must1{static_cast<S>(cap.must_be_one)};
  const Controls may1{static_cast<S>(cap.may_be_one)};
  control_error<Controls> e{required & ~may1, forbidden & must1};
  if (!e.unsupported.none() || !e.cannot_clear.none()) return unexpected(e);
  return ((required | optional | must1) & may1 & ~forbidden);
}

/// CR fixed bits (SDM A.7, A.8): a bit set in FIXED0 must be 1, a bit clear in FIXED1 must be 0.
struct cr_fixed {
  std::uint64_t fixed0 = 0;
  std::uint64_t fixed1 = ~std::uint64_t{0};
  [[nodiscard]] constexpr std::uint64_t must_be_one() const noexcept { return fixed0; }
  [[nodiscard]] constexpr std::uint64_t must_be_zero() const noexcept { return ~fixed1; }
};


/// The capability MSRs a hypervisor reads once per CPU.
struct vmx_capabilities {
  std::uint64_t basic = 0;
  std::uint64_t pinbased = 0, procbased = 0, exit = 0, entry = 0;
  std::uint64_t true_pinbased = 0, true_procbased = 0, true_exit = 0, true_entry = 0;
  std::uint64_t procbased2 = 0;
  std::uint64_t procbased3 = 0;
  std::uint64_t misc = 0;
  std::uint64_t cr0_fixed0 = 0, cr0_fixed1 = 0, cr4_fixed0 = 0, cr4_fixed1 = 0;
  std::uint64_t ept_vpid_cap = 0;
  std::uint64_t vmfunc = 0;

  /// Reads every capability MSR through `rdmsr(index)`. The TRUE_*, PROCBASED_CTLS2,
  /// EPT_VPID_CAP, VMFUNC and PROCBASED_CTLS3 MSRs are read only when the architecture says
  /// they exist (SDM A.1, A.3.2-A.3.4, A.10, A.11), so a strict MSR reader never #GPs.
  template <class Rdmsr>
  [[nodiscard]] static constexpr vmx_capabilities read(Rdmsr&& rdmsr) noexcept {
    namespace m = x86::msr;
    vmx_capabilities c;
    c.basic = rdmsr(m::ia32_vmx_basic);
    c.pinbased = rdmsr(m::ia32_vmx_pinbased_ctls);
    c.procbased = rdmsr(m::ia32_vmx_procbased_ctls);
    c.exit = rdmsr(m::ia32_vmx_exit_ctls);
    c.entry = rdmsr(m::ia32_vmx_entry_ctls);
    c.misc = rdmsr(m::ia32_vmx_misc);
    c.cr0_fixed0 = rdmsr(m::ia32_vmx_cr0_fixed0);
    c.cr0_fixed1 = rdmsr(m::ia32_vmx_cr0_fixed1);
    c.cr4_fixed0 = rdmsr(m::ia32_vmx_cr4_fixed0);
    c.cr4_fixed1 = rdmsr(m::ia32_vmx_cr4_fixed1);
    if (c.has_true_controls()) {
      c.true_pinbased = rdmsr(m::ia32_vmx_true_pinbased_ctls);
      c.true_procbased = rdmsr(m::ia32_vmx_true_procbased_ctls);
      c.true_exit = rdmsr(m::ia32_vmx_true_exit_ctls);
      c.true_entry = rdmsr(m::ia32_vmx_true_entry_ctls);
    }
    const auto may1 = static_cast<std::uint32_t>(c.procbased >> 32);
    if (may1 & primary_proc_based::activate_secondary_controls.raw()) {
      c.procbased2 = rdmsr(m::ia32_vmx_procbased_ctls2);
      const auto may1_2 = static_cast<std::uint32_t>(c.procbased2 >> 32);
      if (may1_2 & (secondary_proc_based::enable_ept | secondary_proc_based::enable_vpid).raw())
        c.ept_vpid_cap = rdmsr(m::ia32_vmx_ept_vpid_cap);
      if (may1_2 & secondary_proc_based::enable_vm_functions.raw()) c.vmfunc = rdmsr(m::ia32_vmx_vmfunc);
    }
    if (may1 & primary_proc_based::activate_tertiary_controls.raw())
      c.procbased3 = rdmsr(m::ia32_vmx_procbased_ctls3);
    return c;
  }

  /// IA32_VMX_BASIC bit 55: the TRUE_* control MSRs exist and may clear default1 bits (SDM A.1).
  [[nodiscard]] constexpr bool has_true_controls() const noexcept { return (basic >> 55) & 1u; }
  /// VMCS revision identifier, bits 30:0 of IA32_VMX_BASIC (SDM A.1).
  [[nodiscard]] constexpr std::uint32_t revision_id() const noexcept { return static_cast<std::uint32_t>(basic) & 0x7fff'ffffu; }
  /// IA32_VMX_MISC bit 29: VMWRITE may write VM-exit information fields (SDM A.6).
  [[nodiscard]] constexpr bool vmwrite_any_field() const noexcept { return (misc >> 29) & 1u; }

  [[nodiscard]] constexpr cr_fixed cr0_fixed() const noexcept { return {cr0_fixed0, cr0_fixed1}; }
  [[nodiscard]] constexpr cr_fixed cr4_fixed() const noexcept { return {cr4_fixed0, cr4_fixed1}; }

  [[nodiscard]] constexpr control_capability pin_caps() const noexcept {
    return control_capability::from_msr(has_true_controls() ? true_pinbased : pinbased);
  }
  [[nodiscard]] constexpr control_capability primary_caps() const noexcept {
    return control_capability::from_msr(has_true_controls() ? true_procbased : procbased);
  }
  /// Secondary controls: only if the primary control "activate secondary controls" may be 1.
  [[nodiscard]] constexpr control_capability secondary_caps() const noexcept {
    if (!((procbased >> 32) & primary_proc_based::activate_secondary_controls.raw())) return {};
    return control_capability::from_msr(procbased2);
  }
  [[nodiscard]] constexpr control_capability exit_caps() const noexcept {
    return control_capability::from_msr(has_true_controls() ? true_exit : exit);
  }
  [[nodiscard]] constexpr control_capability entry_caps() const noexcept {
    return control_capability::from_msr(has_true_controls() ? true_entry : entry);
  }
  /// Tertiary controls: IA32_VMX_PROCBASED_CTLS3 holds allowed-1 settings only; every bit
  /// may be 0 (SDM A.3.4).
  [[nodiscard]] constexpr tertiary_proc_based tertiary_allowed1() const noexcept {
    if (!((procbased >> 32) & primary_proc_based::activate_tertiary_controls.raw())) return {};
    return tertiary_proc_based{procbased3};
  }
};

/// Adjusts tertiary controls: every requested bit must be allowed-1.
[[nodiscard]] constexpr result<tertiary_proc_based, control_error<tertiary_proc_based>> adjust_tertiary(
    tertiary_proc_based allowed1, tertiary_proc_based required, tertiary_proc_based optional = {}) noexcept {
  const tertiary_proc_based missing = required & ~allowed1;
  if (!missing.none()) return unexpected(control_error<tertiary_proc_based>{missing, {}});
  return (required | optional) & allowed1;
}

/// FIXED0 of CR0 for the guest: with "unrestricted guest" (secondary control bit 7) PE and PG
/// may be 0 (SDM 27.3.1.1, A.7).
[[nodiscard]] constexpr std::uint64_t guest_cr0_must_be_one(cr_fixed f, bool unrestricted_guest) noexcept {
  return unrestricted_guest ? f.fixed0 & ~(x86::cr0::pe | x86::cr0::pg).raw() : f.fixed0;
}

/// `v` with the fixed bits forced: (v | fixed0) & fixed1.
[[nodiscard]] constexpr x86::cr0 adjust_cr0(x86::cr0 v, cr_fixed f, bool unrestricted_guest = false) noexcept {
  return x86::cr0{(v.raw() | guest_cr0_must_be_one(f, unrestricted_guest)) & f.fixed1};
}
[[nodiscard]] constexpr x86::cr4 adjust_cr4(x86::cr4 v, cr_fixed f) noexcept {
  return x86::cr4{(v.raw() | f.fixed0) & f.fixed1};
}

/// The bits of `v` that violate the fixed bits (for reporting); zero means `v` is acceptable.
[[nodiscard]] constexpr x86::cr0 cr0_fixed_violations(x86::cr0 v, cr_fixed f, bool unrestricted_guest = false) noexcept {
  const std::uint64_t m1 = guest_cr0_must_be_one(f, unrestricted_guest);
  return x86::cr0{(m1 & ~v.raw()) | (v.raw() & f.must_be_zero())};
}
[[nodiscard]] constexpr x86::cr4 cr4_fixed_violations(x86::cr4 v, cr_fixed f) noexcept {
  return x86::cr4{(f.fixed0 & ~v.raw()) | (v.raw() & f.must_be_zero())};
}

}  // namespace hvkit::vmx
