// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest-state consistency checks VMRUN makes before it enters the guest (AMD APM
/// Vol. 2, 15.5.1 "Basic Operation", "Canonicalization and Consistency Checks"): an illegal
/// combination ends VMRUN at once with #VMEXIT(VMEXIT_INVALID, exit code -1) and no guest
/// instruction runs. check_vmrun() finds the first one in a VMCB, so a hypervisor can refuse a
/// state (its own mistake, or a nested guest's VMCB it is about to run) with a typed reason.
/// vmrun_violations() reports every one of them (a bit per vmrun_error), for a differential
/// against a processor that makes only some of the checks. With nested paging enabled, 15.25.3
/// and 15.25.4 add three: host CR0.PG clear, an MBZ bit of nCR3, an invalid G_PAT.
#pragma once

#include <bit>
#include <cstdint>

#include "controls.hpp"
#include "event_injection.hpp"
#include "intercepts.hpp"
#include "io_permission_map.hpp"
#include "msr_permission_map.hpp"
#include "segment.hpp"
#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../x86/address.hpp"
#include "../x86/pat.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"

namespace hvkit::svm {

/// The illegal combinations of 15.5.1, in the APM's order, then those nested paging adds
/// (15.25.3, 15.25.4).
enum class vmrun_error : std::uint8_t {
  none,
  svme_clear,             ///< EFER.SVME = 0
  nw_without_cd,          ///< CR0.CD = 0 and CR0.NW = 1
  cr0_high_bits,          ///< CR0[63:32] not zero
  cr3_mbz,                ///< a must-be-zero bit of CR3 (long mode: bits 63:MAXPHYADDR)
  cr4_mbz,                ///< a must-be-zero bit of CR4 (not defined, or not supported)
  dr6_high_bits,          ///< DR6[63:32] not zero
  dr7_high_bits,          ///< DR7[63:32] not zero
  efer_mbz,               ///< a must-be-zero bit of EFER
  long_mode_unsupported,  ///< EFER.LMA or LME set on a processor without long mode
  lme_pg_without_pae,     ///< EFER.LME and CR0.PG set, CR4.PAE clear
  lme_pg_without_pe,      ///< EFER.LME and CR0.PG set, CR0.PE clear
  lme_pg_pae_cs_l_and_d,  ///< EFER.LME, CR0.PG, CR4.PAE, CS.L and CS.D all set
  vmrun_intercept_clear,  ///< the VMRUN intercept bit is clear
  msrpm_address,          ///< the MSR permission map reaches beyond the physical-address width
  iopm_address,           ///< the I/O permission map reaches beyond the physical-address width
  event_injection,        ///< EVENTINJ is illegal (15.20, check_eventinj)
  asid_zero,              ///< guest ASID 0 (the host's)
  np_host_paging_off,     ///< NP_ENABLE = 1 while the host runs with CR0.PG = 0 (15.25.3)
  ncr3_mbz,               ///< NP_ENABLE = 1 and a must-be-zero bit of nCR3 (15.25.4)
  g_pat_invalid,          ///< NP_ENABLE = 1 and G_PAT holds a reserved type or bit (15.25.4)
};
inline constexpr unsigned vmrun_error_count = static_cast<unsigned>(vmrun_error::g_pat_invalid) + 1;

/// The rule's name (for logs).
[[nodiscard]] constexpr const char* name(vmrun_error e) noexcept {
  constexpr const char* names[vmrun_error_count] = {
      "none", "svme_clear", "nw_without_cd", "cr0_high_bits", "cr3_mbz", "cr4_mbz", "dr6_high_bits",
      "dr7_high_bits", "efer_mbz", "long_mode_unsupported", "lme_pg_without_pae", "lme_pg_without_pe",
      "lme_pg_pae_cs_l_and_d", "vmrun_intercept_clear", "msrpm_address", "iopm_address", "event_injection",
      "asid_zero", "np_host_paging_off", "ncr3_mbz", "g_pat_invalid"};
  const auto i = static_cast<unsigned>(e);
  return i < vmrun_error_count ? names[i] : "?";
}

/// What the checks depend on beyond the VMCB.
struct vmrun_environment {
  unsigned maxphyaddr = 52;             ///< the processor's physical-address width
  bool long_mode = true;                ///< CPUID Fn8000_0001 EDX[29]
  x86::cr4 cr4_supported = x86::cr4::defined;  ///< CR4 bits the processor implements
  x86::efer efer_supported = x86::efer::defined;  ///< EFER bits the processor implements
  bool host_paging = true;              ///< the host's CR0.PG at VMRUN
  bool host_long_mode = true;           ///< the host's EFER.LMA at VMRUN (the format of nCR3)
};

/// A set of vmrun_error, one bit each (bit 0, `none`, never set).
using vmrun_error_set = std::uint32_t;
[[nodiscard]] constexpr vmrun_error_set bit(vmrun_error e) noexcept { return vmrun_error_set{1} << static_cast<unsigned>(e); }
static_assert(vmrun_error_count <= 32);

/// Every illegal combination in `m` (an empty set: VMRUN enters the guest).
template <vmcb_memory M>
[[nodiscard]] constexpr vmrun_error_set vmrun_violations(const M& m, const vmrun_environment& env = {}) noexcept {
  vmrun_error_set v = 0;
  const auto add = [&v](bool illegal, vmrun_error e) {
    if (illegal) v |= bit(e);
  };
  const auto efer = read_typed(m, fields::efer);
  const auto cr0 = read(m, fields::cr0);
  const x86::cr0 c0{cr0};
  const auto cr3 = read(m, fields::cr3);
  const auto cr4 = read_typed(m, fields::cr4);
  add(!efer.test(x86::efer::svme), vmrun_error::svme_clear);
  add(!c0.test(x86::cr0::cd) && c0.test(x86::cr0::nw), vmrun_error::nw_without_cd);
  add((cr0 >> 32) != 0, vmrun_error::cr0_high_bits);
  const bool lme = efer.test(x86::efer::lme);
  const bool pg = c0.test(x86::cr0::pg);
  add(lme && pg && (cr3 & ~x86::physical_address_mask(env.maxphyaddr)) != 0, vmrun_error::cr3_mbz);
  add((cr4 & ~(x86::cr4::defined & env.cr4_supported)).raw() != 0, vmrun_error::cr4_mbz);
  add((read(m, fields::dr6) >> 32) != 0, vmrun_error::dr6_high_bits);
  add((read(m, fields::dr7) >> 32) != 0, vmrun_error::dr7_high_bits);
  add((efer & ~(x86::efer::defined & env.efer_supported)).raw() != 0, vmrun_error::efer_mbz);
  add(!env.long_mode && efer.any(x86::efer::lma | x86::efer::lme), vmrun_error::long_mode_unsupported);
  add(lme && pg && !cr4.test(x86::cr4::pae), vmrun_error::lme_pg_without_pae);
  add(lme && pg && !c0.test(x86::cr0::pe), vmrun_error::lme_pg_without_pe);
  const auto cs = read(m, fields::cs_attrib);
  add(lme && pg && cr4.test(x86::cr4::pae) && (cs & attrib::l) != 0 && (cs & attrib::db) != 0,
      vmrun_error::lme_pg_pae_cs_l_and_d);
  add(!intercepted(m, intercept::vmrun), vmrun_error::vmrun_intercept_clear);
  const std::uint64_t limit = env.maxphyaddr >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << env.maxphyaddr) - 1;
  const std::uint64_t msrpm = read(m, fields::msrpm_base_pa) & ~std::uint64_t{0xfff};
  const std::uint64_t iopm = read(m, fields::iopm_base_pa) & ~std::uint64_t{0xfff};
  add(msrpm > limit || limit - msrpm < msr_permission_map::size - 1, vmrun_error::msrpm_address);
  add(iopm > limit || limit - iopm < io_permission_map::size - 1, vmrun_error::iopm_address);
  const bool guest_64 = lme && pg && (cs & attrib::l) != 0;
  add(check_eventinj(read_injection(m), guest_64) != injection_error::none, vmrun_error::event_injection);
  add(read(m, fields::guest_asid) == 0, vmrun_error::asid_zero);
  // 15.25.3 "Enabling Nested Paging", 15.25.4 "Nested Paging and VMRUN": with NP_ENABLE set,
  // host paging must be on, nCR3 has the host CR3's MBZ bits (long mode: 63:MAXPHYADDR;
  // legacy PAE: 63:32), G_PAT only supported types.
  if (nested_control::np_enable::get(read(m, fields::nested_control))) {
    add(!env.host_paging, vmrun_error::np_host_paging_off);
    const std::uint64_t ncr3 = read(m, fields::n_cr3);
    const std::uint64_t ncr3_mbz = env.host_long_mode ? ~x86::physical_address_mask(env.maxphyaddr) : ~std::uint64_t{0xffff'ffff};
    add((ncr3 & ncr3_mbz) != 0, vmrun_error::ncr3_mbz);
    add(!x86::valid_pat(read(m, fields::g_pat)), vmrun_error::g_pat_invalid);
  }
  return v;
}

/// The first illegal combination in `m` (in vmrun_error order), or vmrun_error::none.
template <vmcb_memory M>
[[nodiscard]] constexpr vmrun_error check_vmrun(const M& m, const vmrun_environment& env = {}) noexcept {
  const vmrun_error_set v = vmrun_violations(m, env);
  return v == 0 ? vmrun_error::none : static_cast<vmrun_error>(std::countr_zero(v));
}

}  // namespace hvkit::svm
