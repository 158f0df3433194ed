// SPDX-License-Identifier: MIT
/// @file
/// @brief CR-access VM exits (exit reason 28): from the decoded qualification to the new
/// guest CR value, its legality (#GP), and the MMU actions from paging::cr_write_actions.
///
/// Architecture (SDM Vol. 3C 26.1.3, 28.2.1 Table 28-3; Vol. 2 MOV CR, CLTS, LMSW):
/// - MOV to CR0/CR4 exits if a host-owned bit would differ from the read shadow;
/// - CLTS exits if CR0.TS is host-owned and the shadow's TS is 1; it clears TS;
/// - LMSW exits if a host-owned bit of CR0[3:0] would change; it loads CR0[3:0] from the
///   source but can never clear PE;
/// - MOV from CR3/CR8 exits with the CR3/CR8-store controls; MOV from CR0/CR4 never exits.
#pragma once

#include <cstdint>

#include "../paging/cr_write.hpp"
#include "capabilities.hpp"
#include "cr_mask.hpp"
#include "exit_qualification.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/efer.hpp"
#include "../x86/cr_rules.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

/// The vendor-neutral rules (x86/cr_rules.hpp) under their vmx names.
using x86::cr_write_fault;
using x86::cr_context;
using x86::in_64bit_mode;
using x86::mov_to_cr_source;
using x86::check_cr0_write;
using x86::cr3_load;
using x86::check_cr3_write;
using x86::check_cr4_write;
using x86::cr0_after_mov;
using x86::cr0_after_clts;
using x86::cr0_after_lmsw;

/// The outcome of a CR write (paging::cr_write_outcome); `cr` is ~0u for MOV from CR.
using paging::cr_write_outcome;

/// Evaluates a CR-access exit that writes a control register (MOV to CR0/CR3/CR4/CR8, CLTS,
/// LMSW): the qualification as a paging::cr_write_op, then paging::evaluate_cr_write (the
/// vendor-neutral rules). `c` must hold the guest-visible CR state; MOV to CR3 also needs
/// `c.maxphyaddr` and `c.lam`, MOV to CR0 `c.cs_l`. `gpr_value` is the whole source register
/// for MOV to CR, as saved at the VM exit (outside 64-bit mode only its low 32 bits count).
/// MOV from CR sets `cr` to ~0u; use evaluate_cr_read().
[[nodiscard]] constexpr cr_write_outcome evaluate_cr_write(cr_access_qualification q, const cr_context& c,
                                                           std::uint64_t gpr_value, paging::paging_kind kind) noexcept {
  using access = cr_access_qualification::access;
  using op = paging::cr_write_op::instruction;
  switch (q.type()) {
    case access::mov_to_cr: return paging::evaluate_cr_write({op::mov_to_cr, q.cr(), gpr_value}, c, kind);
    case access::clts: return paging::evaluate_cr_write({op::clts, 0, 0}, c, kind);
    case access::lmsw: return paging::evaluate_cr_write({op::lmsw, 0, q.lmsw_source()}, c, kind);
    case access::mov_from_cr: break;
  }
  cr_write_outcome out;
  out.cr = ~0u;
  return out;
}

/// A MOV from CR3 or CR8 (the only MOV-from-CR that exits: CR3-store / CR8-store exiting,
/// SDM 26.1.3): the destination register and the value the guest must read.
struct cr_read_outcome {
  unsigned gpr = 0;         ///< 0 = RAX ... 15 = R15
  std::uint64_t value = 0;
  bool valid = false;       ///< false if the qualification is not a MOV from CR3/CR8
};
/// `cr8` is the guest's TPR bits 7:4 as CR8 (SDM 10.8.6.1).
[[nodiscard]] constexpr cr_read_outcome evaluate_cr_read(cr_access_qualification q, const cr_context& c,
                                                         std::uint64_t cr8) noexcept {
  if (q.type() != cr_access_qualification::access::mov_from_cr) return {};
  if (q.cr() == 3) return {q.gpr(), c.cr3, true};
  if (q.cr() == 8) return {q.gpr(), cr8 & 0xf, true};
  return {};
}

/// The CR0/CR4 read shadow and real value to load after an emulated write of guest-visible
/// value `v`: the shadow holds the guest's view of the host-owned bits; the real register gets
/// the guest's bits plus the bits the hypervisor forces (FIXED0/FIXED1, e.g. CR0.NE, CR4.VMXE).
struct cr_vmcs_values {
  std::uint64_t actual = 0;
  std::uint64_t read_shadow = 0;
};
[[nodiscard]] constexpr cr_vmcs_values cr_values_for(std::uint64_t v, std::uint64_t must_be_one,
                                                     std::uint64_t may_be_one) noexcept {
  return {(v | must_be_one) & may_be_one, v};
}

/// CR0 values for the VMCS from the guest-visible value and the VMX fixed bits; with
/// "unrestricted guest" PE and PG are not forced (SDM 27.3.1.1, A.7).
[[nodiscard]] constexpr cr_vmcs_values cr0_values_for(x86::cr0 v, cr_fixed f, bool unrestricted_guest) noexcept {
  return {adjust_cr0(v, f, unrestricted_guest).raw(), v.raw()};
}
/// CR4 values for the VMCS (CR4.VMXE is forced by FIXED0, hidden by the read shadow).
[[nodiscard]] constexpr cr_vmcs_values cr4_values_for(x86::cr4 v, cr_fixed f) noexcept {
  return {adjust_cr4(v, f).raw(), v.raw()};
}

}  // namespace hvkit::vmx
