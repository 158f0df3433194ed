// SPDX-License-Identifier: MIT
/// @file
/// @brief The MSR policy derived from a guest's CPUID features, and the consistency check
/// between the two: a guest that sees a feature must be able to use the MSR it implies.
///
/// Background: a guest whose CPUID enumerates IBPB writes IA32_PRED_CMD; a hypervisor that
/// advertises IBPB but refuses the write injects #GP into the guest's scheduler. Deriving
/// both from one source (and checking hand-edited MSR policies) rules that out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "features.hpp"
#include "../x86/msr.hpp"
#include "../x86/result.hpp"
#include "../x86/xcr0.hpp"

namespace hvkit::cpuid {

/// The outcome of an MSR access under a policy.
enum class msr_verdict : std::uint8_t {
  not_covered,  ///< the MSR policy does not decide this MSR (the hypervisor does)
  allow,        ///< perform the access
  gp,           ///< inject #GP(0): the MSR or a bit written is not enumerated
};

/// AMD VIRT_SPEC_CTRL (MSR 0xC001011F) bit 2: SSBD (AMD speculative store bypass whitepaper).
inline constexpr std::uint64_t virt_spec_ctrl_ssbd = 1u << 2;

/// Which MSRs the guest may access and which bits it may write. Plain data: a hypervisor
/// may edit it, and check_consistency() tells whether the edit contradicts CPUID.
struct msr_policy {
  std::uint64_t pred_cmd_bits = 0;       ///< IA32_PRED_CMD (write-only); 0: absent
  bool spec_ctrl = false;                ///< IA32_SPEC_CTRL present
  std::uint64_t spec_ctrl_bits = 0;      ///< IA32_SPEC_CTRL writable bits
  bool arch_capabilities = false;        ///< IA32_ARCH_CAPABILITIES readable (read-only)
  std::uint64_t flush_cmd_bits = 0;      ///< IA32_FLUSH_CMD (write-only); 0: absent
  bool virt_spec_ctrl = false;           ///< AMD VIRT_SPEC_CTRL present
  std::uint64_t virt_spec_ctrl_bits = 0;
  bool tsc_deadline = false;             ///< IA32_TSC_DEADLINE
  bool tsc_adjust = false;               ///< IA32_TSC_ADJUST
  bool xss = false;                      ///< IA32_XSS
  x86::xfeatures xss_bits{};             ///< IA32_XSS writable bits
  bool tsc_aux = false;                  ///< IA32_TSC_AUX (RDTSCP or RDPID)
  bool pkrs = false;                     ///< IA32_PKRS
  bool cet = false;                      ///< IA32_U_CET, IA32_S_CET (shadow stack or IBT)
  /// IA32_PL0_SSP..IA32_PL3_SSP and IA32_INTERRUPT_SSP_TABLE_ADDR: shadow stack only; an
  /// IBT-only CPU #GPs on them (SDM Vol. 4 Table 2-2: "If CPUID.(EAX=07H,ECX=0H):ECX[7] = 1").
  bool cet_ssp = false;

  /// RDMSR `index`.
  [[nodiscard]] constexpr msr_verdict read(std::uint32_t index) const noexcept {
    namespace m = x86::msr;
    switch (index) {
      case m::ia32_pred_cmd:  // write-only command MSRs: RDMSR #GP
      case m::ia32_flush_cmd: return msr_verdict::gp;
      case m::ia32_spec_ctrl: return yes(spec_ctrl);
      case m::ia32_arch_capabilities: return yes(arch_capabilities);
      case m::amd_virt_spec_ctrl: return yes(virt_spec_ctrl);
      case m::ia32_tsc_deadline: return yes(tsc_deadline);
      case m::ia32_tsc_adjust: return yes(tsc_adjust);
      case m::ia32_xss: return yes(xss);
      case m::ia32_tsc_aux: return yes(tsc_aux);
      case m::ia32_pkrs: return yes(pkrs);
      case m::ia32_u_cet: case m::ia32_s_cet: return yes(cet);
      case m::ia32_pl0_ssp: case m::ia32_pl1_ssp: case m::ia32_pl2_ssp: case m::ia32_pl3_ssp:
      case m::ia32_interrupt_ssp_table_addr: return yes(cet_ssp);
      default: return msr_verdict::not_covered;
    }
  }

  /// WRMSR `index` with `value`. Writing a bit that is not enumerated is #GP, as on
  /// hardware (SDM Vol. 4, Table 2-2: reserved bits of these MSRs).
  [[nodiscard]] constexpr msr_verdict write(std::uint32_t index, std::uint64_t value) const noexcept {
    namespace m = x86::msr;
    switch (index) {
      case m::ia32_pred_cmd: return yes(pred_cmd_bits != 0 && (value & ~pred_cmd_bits) == 0);
      case m::ia32_flush_cmd: return yes(flush_cmd_bits != 0 && (value & ~flush_cmd_bits) == 0);
      case m::ia32_spec_ctrl: return yes(spec_ctrl && (value & ~spec_ctrl_bits) == 0);
      case m::ia32_arch_capabilities: return msr_verdict::gp;  // read-only
      case m::amd_virt_spec_ctrl: return yes(virt_spec_ctrl && (value & ~virt_spec_ctrl_bits) == 0);
      case m::ia32_tsc_deadline: return yes(tsc_deadline);
      case m::ia32_tsc_adjust: return yes(tsc_adjust);
      case m::ia32_xss: return yes(xss && (value & ~xss_bits.raw()) == 0);
      case m::ia32_tsc_aux: return yes(tsc_aux && (value >> 32) == 0);  // bits 63:32 reserved
      case m::ia32_pkrs: return yes(pkrs && (value >> 32) == 0);        // bits 63:32 reserved
      // Presence only: canonicality, alignment and reserved bits are the hypervisor's.
      case m::ia32_u_cet: case m::ia32_s_cet: return yes(cet);
      case m::ia32_pl0_ssp: case m::ia32_pl1_ssp: case m::ia32_pl2_ssp: case m::ia32_pl3_ssp:
      case m::ia32_interrupt_ssp_table_addr: return yes(cet_ssp);
      default: return msr_verdict::not_covered;
    }
  }

  friend constexpr bool operator==(const msr_policy&, const msr_policy&) noexcept = default;

 private:
  [[nodiscard]] static constexpr msr_verdict yes(bool ok) noexcept { return ok ? msr_verdict::allow : msr_verdict::gp; }
};

/// An IA32_SPEC_CTRL bit and the features that enumerate it (Intel and AMD).
struct spec_ctrl_bit {
  std::uint64_t bits;
  feature intel;
  bool has_amd;
  feature amd;
};
inline constexpr spec_ctrl_bit spec_ctrl_bits[] = {
    {x86::msr::spec_ctrl::ibrs, feat::spec_ctrl, true, feat::amd_ibrs},
    {x86::msr::spec_ctrl::stibp, feat::intel_stibp, true, feat::amd_stibp},
    {x86::msr::spec_ctrl::ssbd, feat::spec_ctrl_ssbd, true, feat::amd_ssbd},
    {x86::msr::spec_ctrl::ipred_dis_u | x86::msr::spec_ctrl::ipred_dis_s, feat::ipred_ctrl, false, {}},
    {x86::msr::spec_ctrl::rrsba_dis_u | x86::msr::spec_ctrl::rrsba_dis_s, feat::rrsba_ctrl, false, {}},
    {x86::msr::spec_ctrl::psfd, feat::psfd, true, feat::amd_psfd},
    {x86::msr::spec_ctrl::ddpd_u, feat::ddpd_u, false, {}},
    {x86::msr::spec_ctrl::bhi_dis_s, feat::bhi_ctrl, false, {}},
};

/// Derives the MSR policy from the guest's features (`policy::features()`); `xss_components`
/// is the exposed IA32_XSS set (`policy::xss_components()`).
[[nodiscard]] constexpr msr_policy derive_msr_policy(const feature_set& f, x86::xfeatures xss_components = {}) noexcept {
  namespace m = x86::msr;
  msr_policy p;
  // IBPB: Intel CPUID.7.0:EDX[26] (IBRS/IBPB) or AMD CPUID.0x80000008:EBX[12];
  // SBPB: AMD CPUID.0x80000021:EAX[27].
  if (f.test(feat::spec_ctrl) || f.test(feat::amd_ibpb)) p.pred_cmd_bits |= m::pred_cmd::ibpb;
  if (f.test(feat::sbpb)) p.pred_cmd_bits |= m::pred_cmd::sbpb;
  for (const spec_ctrl_bit& b : spec_ctrl_bits)
    if (f.test(b.intel) || (b.has_amd && f.test(b.amd))) p.spec_ctrl_bits |= b.bits;
  p.spec_ctrl = p.spec_ctrl_bits != 0;
  p.arch_capabilities = f.test(feat::arch_capabilities);                  // CPUID.7.0:EDX[29]
  if (f.test(feat::flush_l1d)) p.flush_cmd_bits = m::flush_cmd::l1d_flush;  // CPUID.7.0:EDX[28]
  p.virt_spec_ctrl = f.test(feat::virt_ssbd);                               // CPUID.0x80000008:EBX[25]
  if (p.virt_spec_ctrl) p.virt_spec_ctrl_bits = virt_spec_ctrl_ssbd;
  p.tsc_deadline = f.test(feat::tsc_deadline);
  p.tsc_adjust = f.test(feat::tsc_adjust);
  p.xss = f.test(feat::xsaves);
  p.xss_bits = p.xss ? (xss_components & x86::xfeatures::supervisor_components) : x86::xfeatures{};
  p.tsc_aux = f.test(feat::rdtscp) || f.test(feat::rdpid);
  p.pkrs = f.test(feat::pks);
  // SDM Vol. 4 Table 2-2: U_CET/S_CET exist with CET_SS (7.0:ECX[7]) or CET_IBT (7.0:EDX[20]);
  // the SSP MSRs with CET_SS only.
  p.cet = f.test(feat::shstk) || f.test(feat::ibt);
  p.cet_ssp = f.test(feat::shstk);
  return p;
}

/// An access a feature obliges the hypervisor to allow.
struct msr_obligation {
  feature f;
  std::uint32_t index;
  bool write;
  std::uint64_t value;
};

inline constexpr msr_obligation msr_obligations[] = {
    {feat::spec_ctrl, x86::msr::ia32_pred_cmd, true, x86::msr::pred_cmd::ibpb},
    {feat::amd_ibpb, x86::msr::ia32_pred_cmd, true, x86::msr::pred_cmd::ibpb},
    {feat::sbpb, x86::msr::ia32_pred_cmd, true, x86::msr::pred_cmd::sbpb},
    {feat::spec_ctrl, x86::msr::ia32_spec_ctrl, false, 0},
    {feat::spec_ctrl, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ibrs},
    {feat::amd_ibrs, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ibrs},
    {feat::intel_stibp, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::stibp},
    {feat::amd_stibp, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::stibp},
    {feat::spec_ctrl_ssbd, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ssbd},
    {feat::amd_ssbd, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ssbd},
    {feat::ipred_ctrl, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ipred_dis_u | x86::msr::spec_ctrl::ipred_dis_s},
    {feat::rrsba_ctrl, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::rrsba_dis_u | x86::msr::spec_ctrl::rrsba_dis_s},
    {feat::psfd, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::psfd},
    {feat::amd_psfd, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::psfd},
    {feat::ddpd_u, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::ddpd_u},
    {feat::bhi_ctrl, x86::msr::ia32_spec_ctrl, true, x86::msr::spec_ctrl::bhi_dis_s},
    {feat::virt_ssbd, x86::msr::amd_virt_spec_ctrl, true, virt_spec_ctrl_ssbd},
    {feat::flush_l1d, x86::msr::ia32_flush_cmd, true, x86::msr::flush_cmd::l1d_flush},
    {feat::arch_capabilities, x86::msr::ia32_arch_capabilities, false, 0},
    {feat::tsc_deadline, x86::msr::ia32_tsc_deadline, false, 0},
    {feat::tsc_deadline, x86::msr::ia32_tsc_deadline, true, 0},
    {feat::tsc_adjust, x86::msr::ia32_tsc_adjust, false, 0},
    {feat::xsaves, x86::msr::ia32_xss, false, 0},
    {feat::xsaves, x86::msr::ia32_xss, true, 0},
    {feat::rdtscp, x86::msr::ia32_tsc_aux, false, 0},
    {feat::rdpid, x86::msr::ia32_tsc_aux, false, 0},
    {feat::pks, x86::msr::ia32_pkrs, false, 0},
    {feat::shstk, x86::msr::ia32_u_cet, false, 0},
    {feat::shstk, x86::msr::ia32_pl0_ssp, false, 0},
    {feat::shstk, x86::msr::ia32_interrupt_ssp_table_addr, false, 0},
    {feat::ibt, x86::msr::ia32_u_cet, false, 0},
};

/// The first obligation a policy breaks: a feature the guest sees, and the access that
/// would #GP.
struct msr_inconsistency {
  feature f{};
  std::uint32_t index = 0;
  bool write = false;
  std::uint64_t value = 0;
};

/// Fails when `advertised` contains a feature whose MSR access `msrs` would refuse.
[[nodiscard]] constexpr result<void, msr_inconsistency> check_consistency(const feature_set& advertised,
                                                                         const msr_policy& msrs) noexcept {
  for (const msr_obligation& o : msr_obligations) {
    if (!advertised.test(o.f)) continue;
    const msr_verdict v = o.write ? msrs.write(o.index, o.value) : msrs.read(o.index);
    if (v != msr_verdict::allow) return unexpected(msr_inconsistency{o.f, o.index, o.write, o.value});
  }
  return {};
}

}  // namespace hvkit::cpuid
