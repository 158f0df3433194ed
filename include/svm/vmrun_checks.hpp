/// @file
/// @brief The guest-state consistency checks VMRUN makes before it enters the guest (AMD APM
/// Vol. 2, 15.5.1 "Basic Operation", "Canonicalization and Consistency Checks"): an illegal
/// combination ends VMRUN at once with #VMEXIT(VMEXIT_INVALID, exit code -1) and no guest
/// instruction runs. check_vmrun() finds the first one in a VMCB, so a hypervisor can refuse a
/// state (its own mistake, or a nested guest's VMCB it is about to run) with a typed reason.
#pragma once

#include <cstdint>

#include "event_injection.hpp"
#include "intercepts.hpp"
#include "io_permission_map.hpp"
#include "msr_permission_map.hpp"
#include "segment.hpp"
#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"

namespace hvkit::svm {

/// The illegal combinations of 15.5.1, in the APM's order.
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
};

/// What the checks depend on beyond the VMCB.
struct vmrun_environment {
  unsigned maxphyaddr = 52;             ///< the processor's physical-address width
  bool long_mode = true;                ///< CPUID Fn8000_0001 EDX[29]
  x86::cr4 cr4_supported = x86::cr4::defined;  ///< CR4 bits the processor implements
  x86::efer efer_supported = x86::efer::defined;  ///< EFER bits the processor implements
};

/// The first illegal combination in `m`, or vmrun_error::none.
template <vmcb_memory M>
[[nodiscard]] constexpr vmrun_error check_vmrun(const M& m, const vmrun_environment& env = {}) noexcept {
  const auto efer = read_typed(m, fields::efer);
  const auto cr0 = read(m, fields::cr0);
  const x86::cr0 c0{cr0};
  const auto cr3 = read(m, fields::cr3);
  const auto cr4 = read_typed(m, fields::cr4);
  if (!efer.test(x86::efer::svme)) return vmrun_error::svme_clear;
  if (!c0.test(x86::cr0::cd) && c0.test(x86::cr0::nw)) return vmrun_error::nw_without_cd;
  if ((cr0 >> 32) != 0) return vmrun_error::cr0_high_bits;
  const bool lme = efer.test(x86::efer::lme);
  const bool pg = c0.test(x86::cr0::pg);
  if (lme && pg && (cr3 & ~x86::physical_address_mask(env.maxphyaddr)) != 0) return vmrun_error::cr3_mbz;
  if ((cr4 & ~(x86::cr4::defined & env.cr4_supported)).raw() != 0) return vmrun_error::cr4_mbz;
  if ((read(m, fields::dr6) >> 32) != 0) return vmrun_error::dr6_high_bits;
  if ((read(m, fields::dr7) >> 32) != 0) return vmrun_error::dr7_high_bits;
  if ((efer & ~(x86::efer::defined & env.efer_supported)).raw() != 0) return vmrun_error::efer_mbz;
  if (!env.long_mode && efer.any(x86::efer::lma | x86::efer::lme)) return vmrun_error::long_mode_unsupported;
  if (lme && pg && !cr4.test(x86::cr4::pae)) return vmrun_error::lme_pg_without_pae;
  if (lme && pg && !c0.test(x86::cr0::pe)) return vmrun_error::lme_pg_without_pe;
  const auto cs = read(m, fields::cs_attrib);
  if (lme && pg && cr4.test(x86::cr4::pae) && (cs & attrib::l) != 0 && (cs & attrib::db) != 0)
    return vmrun_error::lme_pg_pae_cs_l_and_d;
  if (!intercepted(m, intercept::vmrun)) return vmrun_error::vmrun_intercept_clear;
  const std::uint64_t limit = env.maxphyaddr >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << env.maxphyaddr) - 1;
  const std::uint64_t msrpm = read(m, fields::msrpm_base_pa) & ~std::uint64_t{0xfff};
  const std::uint64_t iopm = read(m, fields::iopm_base_pa) & ~std::uint64_t{0xfff};
  if (msrpm > limit || limit - msrpm < msr_permission_map::size - 1) return vmrun_error::msrpm_address;
  if (iopm > limit || limit - iopm < io_permission_map::size - 1) return vmrun_error::iopm_address;
  const bool guest_64 = lme && pg && (cs & attrib::l) != 0;
  if (check_eventinj(read_injection(m), guest_64) != injection_error::none) return vmrun_error::event_injection;
  if (read(m, fields::guest_asid) == 0) return vmrun_error::asid_zero;
  return vmrun_error::none;
}

}  // namespace hvkit::svm
