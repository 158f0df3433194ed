// SPDX-License-Identifier: MIT
/// @file
/// @brief `read_cr_context()`: the guest CR state a CR-access exit is checked against
/// (vmx::cr_context), filled from a VMCS backend in one call; and the source operand of a
/// MOV to CR through the register file.
///
/// CR0/CR4 are the values the guest sees: guest-owned bits from the guest CR field,
/// host-owned bits from the read shadow (SDM Vol. 3C 25.6.6). EFER is vmx::guest_efer: the
/// guest IA32_EFER field with LMA from the "IA-32e mode guest" VM-entry control, the same
/// source skip_instruction() uses (vmx/guest_mode.hpp); CS.L is bit 13 of the CS access
/// rights (SDM 25.4.1). What the VMCS does not hold, the guest's
/// CPUID-derived properties, comes from the guest CPU model (`cpuid::guest_cpu_model`, alias
/// `guest_cpu_config`).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "cr_access.hpp"
#include "cr_mask.hpp"
#include "fields.hpp"
#include "guest_mode.hpp"
#include "register_file.hpp"
#include "vmcs_reader.hpp"
#include "../cpuid/guest_cpu_model.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"

namespace hvkit::vmx {

/// The guest properties its CPUID policy decides (constant for a VM): the vendor-neutral
/// guest CPU model. Kept as an alias for one release; new code writes
/// cpuid::guest_cpu_model (made by cpuid::make_guest_cpu_model from the guest's policy).
using guest_cpu_config = cpuid::guest_cpu_model;

/// The guest-visible CR0 and CR4 (guest field where guest-owned, read shadow where host-owned).
template <vmcs_backend B>
[[nodiscard]] constexpr result<x86::cr0, vm_fail> read_guest_visible_cr0(B& b) noexcept {
  vmcs_reader<B> r(b);
  const auto m = r.get(fields::cr0_guest_host_mask);
  const auto v = guest_visible_cr0(x86::cr0{r.get(fields::guest_cr0)}, x86::cr0{r.get(fields::cr0_read_shadow)}, m);
  return r.finish(v);
}
template <vmcs_backend B>
[[nodiscard]] constexpr result<x86::cr4, vm_fail> read_guest_visible_cr4(B& b) noexcept {
  vmcs_reader<B> r(b);
  const auto m = r.get(fields::cr4_guest_host_mask);
  const auto v = guest_visible_cr4(x86::cr4{r.get(fields::guest_cr4)}, x86::cr4{r.get(fields::cr4_read_shadow)}, m);
  return r.finish(v);
}

/// vmx::cr_context from the VMCS and the guest's CPUID-derived properties.
template <vmcs_backend B>
[[nodiscard]] constexpr result<cr_context, vm_fail> read_cr_context(B& b, const guest_cpu_config& g) noexcept {
  vmcs_reader<B> r(b);
  cr_context c{};
  const auto m0 = r.get(fields::cr0_guest_host_mask);
  const auto m4 = r.get(fields::cr4_guest_host_mask);
  c.cr0 = guest_visible_cr0(x86::cr0{r.get(fields::guest_cr0)}, x86::cr0{r.get(fields::cr0_read_shadow)}, m0);
  c.cr4 = guest_visible_cr4(x86::cr4{r.get(fields::guest_cr4)}, x86::cr4{r.get(fields::cr4_read_shadow)}, m4);
  c.efer = guest_efer(r);  // LMA from "IA-32e mode guest", the one source (vmx/guest_mode.hpp)
  c.cr3 = r.get(fields::guest_cr3);
  c.cs_l = cs_l_of(r.get(fields::guest_cs_access_rights));
  g.apply_to(c);
  return r.finish(c);
}

/// The source operand of a MOV to CR: the register the qualification names, its low 32
/// bits outside 64-bit mode (vmx::mov_to_cr_source; evaluate_cr_write applies the same rule
/// itself, so passing it the result is harmless). LMSW and CLTS take no register (0).
template <vmcs_backend B>
[[nodiscard]] constexpr result<std::uint64_t, vm_fail> cr_source_value(register_file<B>& regs,
                                                                       cr_access_qualification q,
                                                                       const cr_context& c) noexcept {
  if (q.type() != cr_access_qualification::access::mov_to_cr) return std::uint64_t{0};
  auto v = regs.read(q.gpr());
  if (!v) return v;
  return mov_to_cr_source(c, v.value());
}

}  // namespace hvkit::vmx
