// SPDX-License-Identifier: MIT
/// @file
/// @brief The architectural rules of writing a control register, shared by every way a write
/// reaches a hypervisor (a VMX CR-access exit, an SVM CR write intercept, an instruction the
/// emulator executes): the #GP(0) conditions of MOV to CR0/CR3/CR4/CR8, CLTS and LMSW, and the
/// value the register then holds (SDM Vol. 2B "MOV—Move to/from Control Registers", "CLTS",
/// "LMSW"; SDM Vol. 3A 2.5; AMD APM Vol. 2, 3.1 "System-Control Registers").
/// paging/cr_write.hpp adds what the MMU must do afterwards.
#pragma once

#include <cstdint>

#include "address.hpp"
#include "cr.hpp"
#include "cr3.hpp"
#include "efer.hpp"

namespace hvkit::x86 {

/// CR4.CET may be 1 only while CR0.WP is 1: MOV to CR4 setting CET with WP=0, and MOV to CR0
/// clearing WP with CET=1, raise #GP(0) (SDM 2.5 CR4.CET; MOV—Move to/from Control Registers).
[[nodiscard]] constexpr bool cet_wp_consistent(x86::cr0 c0, x86::cr4 c4) noexcept {
  return !c4.test(x86::cr4::cet) || c0.test(x86::cr0::wp);
}

/// Why a CR write is illegal (each is #GP(0), SDM Vol. 2 "MOV—Move to/from Control Registers").
enum class cr_write_fault : std::uint8_t {
  none,
  reserved_bit,         ///< a reserved bit set (CR0[63:32]; CR4 bits the guest may not set; CR8[63:4])
  pg_without_pe,        ///< CR0.PG=1 with CR0.PE=0
  nw_without_cd,        ///< CR0.NW=1 with CR0.CD=0
  long_mode_without_pae,///< CR0.PG=1 with EFER.LME=1 and CR4.PAE=0
  clear_wp_with_cet,    ///< CR0.WP=0 while CR4.CET=1
  cet_without_wp,       ///< CR4.CET=1 while CR0.WP=0
  clear_pae_in_long_mode,///< CR4.PAE=0 while EFER.LMA=1
  change_la57_in_long_mode,///< CR4.LA57 changed while EFER.LMA=1
  pcide_bad_state,      ///< CR4.PCIDE 0->1 outside IA-32e mode or with CR3[11:0] != 0
  clear_pg_in_64bit_mode,///< CR0.PG=0 in 64-bit mode (EFER.LMA=1 and CS.L=1)
  activate_ia32e_with_cs_l,  ///< CR0.PG 0->1 with EFER.LME=1 (IA-32e activation) while CS.L=1
  clear_pg_with_pcide,  ///< CR0.PG=0 while CR4.PCIDE=1
  cr3_reserved_bit,     ///< MOV to CR3 in IA-32e mode with a bit of 63:MAXPHYADDR set (LAM bits 61/62 excepted with LAM)
};

/// The guest CR state a write is checked against.
struct cr_context {
  x86::cr0 cr0{};
  x86::cr4 cr4{};
  x86::efer efer{};
  std::uint64_t cr3 = 0;
  /// CR4 bits the guest may set (from its CPUID); others are reserved for it.
  x86::cr4 cr4_allowed = x86::cr4::defined;
  /// The guest's CS.L (bit 13 of the CS access rights, SDM 3.4.5): with EFER.LMA=1 the guest
  /// runs in 64-bit mode, where MOV to CR0 may not clear PG (SDM Vol. 2B MOV CR, 64-bit mode
  /// exceptions; 10.8.5.4: IA-32e mode is left from compatibility mode only).
  bool cs_l = false;
  /// The guest's MAXPHYADDR (CPUID.80000008H:EAX[7:0], 32..52): in IA-32e mode CR3 bits
  /// 63:MAXPHYADDR are reserved (SDM 4.5, Tables 4-12/4-13). Only MOV to CR3 reads it.
  /// Default: x86::default_maxphyaddr (36); cpuid::guest_cpu_model::apply_to() sets it and
  /// the other CPUID-derived fields (cr4_allowed, lam) from the guest's CPUID policy.
  unsigned maxphyaddr = default_maxphyaddr;
  /// The guest has LAM (CPUID.(EAX=07H,ECX=1):EAX[26]): CR3 bits 61 (LAM_U57) and 62 (LAM_U48)
  /// may be set (SDM 4.4 "Linear-address masking"); without it they are reserved.
  bool lam = false;
};

/// True if the guest runs in 64-bit mode: IA-32e mode active (EFER.LMA=1) with CS.L=1
/// (SDM 3.4.5, 2.2.1); compatibility mode has LMA=1 and CS.L=0.
[[nodiscard]] constexpr bool in_64bit_mode(const cr_context& c) noexcept {
  return c.efer.test(x86::efer::lma) && c.cs_l;
}

/// The source operand of a MOV to CR as the instruction uses it: the whole register in 64-bit
/// mode, its low 32 bits anywhere else (SDM Vol. 2B "MOV—Move to/from Control Registers": the
/// operand size is 64 bits in 64-bit mode and 32 bits outside it, whatever the upper half of
/// the register holds, e.g. a value left there by 64-bit code before a switch to
/// compatibility mode).
[[nodiscard]] constexpr std::uint64_t mov_to_cr_source(const cr_context& c, std::uint64_t gpr_value) noexcept {
  return in_64bit_mode(c) ? gpr_value : (gpr_value & 0xffff'ffffu);
}

/// #GP check for MOV to CR0 with `v`. Only CR0[63:32] are reserved in the #GP sense: the
/// undefined bits of CR0[31:0] are ignored, not faulted (SDM 2.5 "Bits 63:32 of CR0 ... #GP";
/// Vol. 2B MOV CR lists no other CR0 reserved-bit #GP); cr0_after_mov() drops them.
[[nodiscard]] constexpr cr_write_fault check_cr0_write(const cr_context& c, x86::cr0 v) noexcept {
  if ((v.raw() >> 32) != 0) return cr_write_fault::reserved_bit;
  if (v.test(x86::cr0::pg) && !v.test(x86::cr0::pe)) return cr_write_fault::pg_without_pe;
  if (v.test(x86::cr0::nw) && !v.test(x86::cr0::cd)) return cr_write_fault::nw_without_cd;
  if (v.test(x86::cr0::pg) && !c.cr0.test(x86::cr0::pg) && c.efer.test(x86::efer::lme)) {
    // Activating IA-32e mode (SDM 10.8.5) needs PAE, and a CS with L=0: the switch is made
    // from legacy protected mode, and with CS.L=1 it is #GP(0) (AMD APM Vol. 2, "Enabling
    // and Activating Long Mode"; Bochs and KVM fault the same way on Intel CPUs).
    if (!c.cr4.test(x86::cr4::pae)) return cr_write_fault::long_mode_without_pae;
    if (c.cs_l) return cr_write_fault::activate_ia32e_with_cs_l;
  }
  if (!cet_wp_consistent(v, c.cr4)) return cr_write_fault::clear_wp_with_cet;
  // SDM Vol. 2B MOV CR: #GP(0) on clearing CR0.PG in 64-bit mode, and (protected and
  // compatibility mode) on clearing it while CR4.PCIDE=1.
  if (c.cr0.test(x86::cr0::pg) && !v.test(x86::cr0::pg)) {
    if (c.efer.test(x86::efer::lma) && c.cs_l) return cr_write_fault::clear_pg_in_64bit_mode;
    if (c.cr4.test(x86::cr4::pcide)) return cr_write_fault::clear_pg_with_pcide;
  }
  return cr_write_fault::none;
}

/// A MOV to CR3 with source `v`: the value CR3 receives, whether bit 63 asked to keep the
/// PCID's TLB entries, and the #GP check.
struct cr3_load {
  std::uint64_t value = 0;  ///< the new CR3 (bit 63 stripped when CR4.PCIDE=1)
  bool noflush = false;     ///< CR4.PCIDE=1 and source bit 63 set: no TLB invalidation (SDM 4.10.4.1)
  cr_write_fault fault = cr_write_fault::none;
};

/// Evaluates MOV to CR3 with source register value `v` (truncated to its low 32 bits outside
/// 64-bit mode, mov_to_cr_source()).
/// In IA-32e mode (EFER.LMA=1): with CR4.PCIDE=1, bit 63 is the no-flush hint and is not
/// written to CR3 (SDM 4.10.4.1); bits 63:MAXPHYADDR are then reserved, except 61 and 62 with
/// LAM, and a set reserved bit is #GP(0) (SDM Vol. 2B MOV CR, 64-bit mode exceptions; Tables
/// 4-12, 4-13). Outside IA-32e mode MOV to CR3 has no reserved-bit #GP of its own (with PAE
/// paging the PDPTE load may fault: paging::mmu_actions::reload_pdptrs, SDM 4.4.1).
[[nodiscard]] constexpr cr3_load check_cr3_write(const cr_context& c, std::uint64_t v) noexcept {
  v = mov_to_cr_source(c, v);
  cr3_load r{v};
  if (!c.efer.test(x86::efer::lma)) return r;
  if (c.cr4.test(x86::cr4::pcide)) {
    r.noflush = x86::cr3{v}.test(x86::cr3::noflush);
    r.value = x86::cr3{v}.without(x86::cr3::noflush).raw();
  }
  std::uint64_t reserved = ~x86::physical_address_mask(c.maxphyaddr);
  if (c.lam) reserved &= ~(x86::cr3::lam_u57 | x86::cr3::lam_u48).raw();
  if (r.value & reserved) r.fault = cr_write_fault::cr3_reserved_bit;
  return r;
}

/// #GP check for MOV to CR4 with `v`.
[[nodiscard]] constexpr cr_write_fault check_cr4_write(const cr_context& c, x86::cr4 v) noexcept {
  if ((v & ~(x86::cr4::defined & c.cr4_allowed)).raw() != 0) return cr_write_fault::reserved_bit;
  if (!cet_wp_consistent(c.cr0, v)) return cr_write_fault::cet_without_wp;
  const bool lma = c.efer.test(x86::efer::lma);
  if (lma && !v.test(x86::cr4::pae)) return cr_write_fault::clear_pae_in_long_mode;
  if (lma && ((v ^ c.cr4) & x86::cr4::la57).raw() != 0) return cr_write_fault::change_la57_in_long_mode;
  if (v.test(x86::cr4::pcide) && !c.cr4.test(x86::cr4::pcide) && (!lma || (c.cr3 & 0xfff) != 0))
    return cr_write_fault::pcide_bad_state;
  return cr_write_fault::none;
}

/// The CR0 value after a legal MOV to CR0 with `v`: undefined bits of 31:0 are ignored (read
/// as 0) and ET (bit 4) is hardwired to 1 on every processor since the i486 (SDM 2.5).
[[nodiscard]] constexpr x86::cr0 cr0_after_mov(x86::cr0 v) noexcept { return (v & x86::cr0::defined).with(x86::cr0::et); }

/// The CR0 value after CLTS: TS cleared.
[[nodiscard]] constexpr x86::cr0 cr0_after_clts(x86::cr0 cr0) noexcept { return cr0.without(x86::cr0::ts); }

/// The CR0 value after LMSW `src`: bits 3:0 (PE, MP, EM, TS) loaded, PE never cleared.
[[nodiscard]] constexpr x86::cr0 cr0_after_lmsw(x86::cr0 cr0, std::uint16_t src) noexcept {
  const std::uint64_t low4 = 0xf;
  const std::uint64_t v = (cr0.raw() & ~low4) | (src & low4) | (cr0.raw() & x86::cr0::pe.raw());
  return x86::cr0{v};
}

}  // namespace hvkit::x86
