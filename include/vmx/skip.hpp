// SPDX-License-Identifier: MIT
/// @file
/// @brief Completing an instruction the hypervisor emulated after a VM exit: RIP advanced by
/// the VM-exit instruction length in the width of the current code segment, the STI and
/// MOV SS interrupt shadows ended, and a single-step trap made pending when RFLAGS.TF = 1
/// (KVM's kvm_skip_emulated_instruction).
///
/// - Width: 64-bit mode (IA-32e mode guest and CS.L = 1, vmx/guest_mode.hpp) adds in 64 bits; otherwise the
///   instruction pointer is EIP (CS.D = 1) or IP (CS.D = 0, also real and virtual-8086 mode)
///   and wraps at 2^32 or 2^16 (SDM Vol. 1 3.5; Vol. 3A 5.3 limit rules aside).
/// - The shadows: blocking by STI and by MOV SS lasts until the next instruction completes
///   (SDM 6.8.3; Vol. 3C 25.4.2 Table 25-3). The emulated instruction was that instruction.
/// - Single step: with RFLAGS.TF = 1 (and IA32_DEBUGCTL.BTF = 0) a completed instruction
///   raises a single-step #DB; the hypervisor records it as pending debug exception BS
///   (bit 14), which the processor delivers right after VM entry (SDM 27.7.3, 18.3.1.4).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "controls.hpp"
#include "fields.hpp"
#include "guest_mode.hpp"
#include "interruptibility.hpp"
#include "register_file.hpp"
#include "../x86/instruction_skip.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::vmx {

/// The vendor-neutral parts (x86/instruction_skip.hpp) under their vmx names.
using x86::advance_ip;
using x86::debugctl_btf;
using x86::ip_width;

/// From "IA-32e mode guest" (= EFER.LMA after an exit, vmx::guest_ia32e_mode) and the CS
/// access rights (L bit 13, D/B bit 14; SDM 25.4.1). 64-bit mode is vmx::in_64bit_mode.
[[nodiscard]] constexpr ip_width ip_width_of(bool ia32e_mode, std::uint32_t cs_access_rights) noexcept {
  if (in_64bit_mode(ia32e_mode, cs_access_rights)) return ip_width::w64;
  return x86::ip_width_of(false, false, ((cs_access_rights >> 14) & 1u) != 0);
}

/// Pending debug exceptions, BS (bit 14): a single-step trap is pending (SDM 25.4.2, Table 25-4).
inline constexpr std::uint64_t pending_dbg_bs = std::uint64_t{1} << 14;

/// What skip_instruction() did.
struct skip_effects {
  std::uint64_t new_rip = 0;
  bool shadow_cleared = false;  ///< blocking by STI / MOV SS was set and is now clear
  bool single_step = false;     ///< BS set in the pending debug exceptions
};

/// Skips the instruction that caused the VM exit, using the exit's instruction length.
/// RIP and RFLAGS go through the register file (flush() writes RIP back); the
/// interruptibility state and pending debug exceptions are written to the backend when
/// they change.
template <vmcs_backend B>
constexpr result<skip_effects, vm_fail> skip_instruction(register_file<B>& regs) noexcept {
  B& b = regs.backend();
  auto len = vmread(b, fields::vm_exit_instruction_length);
  if (!len) return unexpected(len.error());
  return skip_instruction(regs, len.value());
}

/// As above with an explicit length (an instruction the hypervisor decoded itself).
template <vmcs_backend B>
constexpr result<skip_effects, vm_fail> skip_instruction(register_file<B>& regs, std::uint32_t length) noexcept {
  B& b = regs.backend();
  skip_effects fx;
  auto rip = regs.rip();
  if (!rip) return unexpected(rip.error());
  vmcs_reader<B> r(b);
  const bool ia32e = guest_ia32e_mode(r);  // the one source of EFER.LMA (vmx/guest_mode.hpp)
  const std::uint32_t cs = r.get(fields::guest_cs_access_rights);
  if (r.failed()) return unexpected(r.error());
  fx.new_rip = advance_ip(rip.value(), length, ip_width_of(ia32e, cs));
  regs.set_rip(fx.new_rip);

  auto is = vmread(b, fields::guest_interruptibility_state);
  if (!is) return unexpected(is.error());
  const interruptibility_state s{is.value()};
  if (s.any(interruptibility_state::shadow)) {
    auto w = vmwrite(b, fields::guest_interruptibility_state, s.without(interruptibility_state::shadow).raw());
    if (!w) return unexpected(w.error());
    fx.shadow_cleared = true;
  }

  auto fl = regs.rflags();
  if (!fl) return unexpected(fl.error());
  if (fl.value().test(x86::rflags::tf)) {
    auto dc = vmread(b, fields::guest_ia32_debugctl);
    if (!dc) return unexpected(dc.error());
    if (x86::single_step_trap(fl.value(), dc.value())) {
      auto pd = vmread(b, fields::guest_pending_debug_exceptions);
      if (!pd) return unexpected(pd.error());
      auto w = vmwrite(b, fields::guest_pending_debug_exceptions, pd.value() | pending_dbg_bs);
      if (!w) return unexpected(w.error());
      fx.single_step = true;
    }
  }
  return fx;
}

}  // namespace hvkit::vmx
