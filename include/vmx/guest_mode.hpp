// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest's IA-32e mode and 64-bit mode after a VM exit, from one source: every
/// vmx/ (and emulate/) reader that asks "is the guest in IA-32e mode / 64-bit mode?" goes
/// through here.
///
/// EFER.LMA lives in two places of a VMCS: the "IA-32e mode guest" VM-entry control and the
/// LMA bit of the guest IA32_EFER field. Only the control is always current: a VM exit stores
/// IA32_EFER.LMA into it on every exit (SDM Vol. 3C 28.2/28.3), and a VM entry that does not
/// load IA32_EFER takes LMA from it (SDM 27.3.2.1), while the guest IA32_EFER field is saved
/// only under the "save IA32_EFER" VM-exit control and is otherwise the value the hypervisor
/// last wrote. So LMA is the control's; LME, NXE, SCE and the rest come from the EFER field.
/// 64-bit mode is IA-32e mode with CS.L = 1 (SDM Vol. 3A 5.2.1; CS.L is bit 13 of the CS
/// access rights, SDM 25.4.1). Two readers deciding LMA from different fields disagreed on an
/// inconsistent software VMCS (one wrapped RIP at 16 bits, the other saw 64-bit mode).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "controls.hpp"
#include "fields.hpp"
#include "vmcs_reader.hpp"
#include "../x86/efer.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// IA-32e mode (EFER.LMA) of the guest: the "IA-32e mode guest" VM-entry control.
template <vmcs_backend B>
[[nodiscard]] constexpr bool guest_ia32e_mode(vmcs_reader<B>& r) noexcept {
  return entry_controls{r.get(fields::vm_entry_controls)}.test(entry_controls::ia32e_mode_guest);
}

/// The guest's EFER: the guest IA32_EFER field with LMA from the "IA-32e mode guest" control.
template <vmcs_backend B>
[[nodiscard]] constexpr x86::efer guest_efer(vmcs_reader<B>& r) noexcept {
  const x86::efer e{r.get(fields::guest_ia32_efer)};
  return e.with(x86::efer::lma, guest_ia32e_mode(r));
}

/// CS.L from the CS access rights (bit 13, SDM 25.4.1).
[[nodiscard]] constexpr bool cs_l_of(std::uint32_t cs_access_rights) noexcept {
  return ((cs_access_rights >> 13) & 1u) != 0;
}

/// 64-bit mode: IA-32e mode with CS.L = 1 (SDM Vol. 3A 5.2.1).
[[nodiscard]] constexpr bool in_64bit_mode(bool ia32e_mode, std::uint32_t cs_access_rights) noexcept {
  return ia32e_mode && cs_l_of(cs_access_rights);
}

/// Whether the guest is in 64-bit mode, read from the VMCS.
template <vmcs_backend B>
[[nodiscard]] constexpr bool guest_in_64bit_mode(vmcs_reader<B>& r) noexcept {
  const bool ia32e = guest_ia32e_mode(r);
  return in_64bit_mode(ia32e, r.get(fields::guest_cs_access_rights));
}
/// The same with its own error check.
template <vmcs_backend B>
[[nodiscard]] constexpr result<bool, vm_fail> guest_in_64bit_mode(B& b) noexcept {
  vmcs_reader<B> r(b);
  const bool v = guest_in_64bit_mode(r);
  return r.finish(v);
}
/// The guest's EFER with its own error check.
template <vmcs_backend B>
[[nodiscard]] constexpr result<x86::efer, vm_fail> read_guest_efer(B& b) noexcept {
  vmcs_reader<B> r(b);
  const x86::efer e = guest_efer(r);
  return r.finish(e);
}

}  // namespace hvkit::vmx
