// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest CPU model derived from a guest's CPUID policy (as the MSR policy is):
/// its MAXPHYADDR, the CR4 and EFER bits it may set, and the features the architectural
/// rules need. One type for every layer above: vmx::guest_cpu_config is an alias of it, and
/// x86::cr_context and emulate::context take their CPUID-derived fields from it
/// (apply_to() here, emulate::apply_cpu_model()).
///
/// A CR4 or EFER bit whose feature the guest's CPUID does not enumerate is reserved for that
/// guest: MOV to CR4 / WRMSR to IA32_EFER setting it is #GP(0) (SDM Vol. 2B "MOV—Move
/// to/from Control Registers", "#GP(0) If an attempt is made to write a 1 to any reserved
/// bit in CR4"; SDM Vol. 4 Table 2-2 IA32_EFER; AMD APM Vol. 2 3.1.7). The gates
/// (CPUID feature -> control bit) are listed in cr4_gates and efer_gates below, each from
/// the CPUID feature's description (SDM Vol. 2A Tables 3-8, 3-10 and the leaf 07H /
/// 80000001H / 80000021H tables; APM Vol. 3 Appendix E).
#pragma once

#include <array>
#include <cstdint>

#include "decode.hpp"
#include "features.hpp"
#include "policy.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr_rules.hpp"
#include "../x86/efer.hpp"
#include "../x86/address.hpp"

namespace hvkit::cpuid {

/// A control-register bit and the CPUID feature that makes it settable.
template <class Bits>
struct control_gate {
  Bits bit;
  feature needs;
  feature or_needs;  ///< a second feature that also enables it (CET: shadow stack or IBT); == needs if none
};

/// CR4 bit -> the CPUID feature without which it is reserved.
/// CR4.PCE has no CPUID gate (always settable, SDM 2.5); every other defined bit has one.
inline constexpr std::array<control_gate<x86::cr4>, 27> cr4_gates{{
    {x86::cr4::vme, feat::vme, feat::vme},                // CPUID.01H:EDX[1] VME: CR4.VME, CR4.PVI
    {x86::cr4::pvi, feat::vme, feat::vme},
    {x86::cr4::tsd, feat::tsc, feat::tsc},                // EDX[4] TSC: CR4.TSD
    {x86::cr4::de, feat::de, feat::de},                   // EDX[2] DE: CR4.DE
    {x86::cr4::pse, feat::pse, feat::pse},                // EDX[3] PSE: CR4.PSE
    {x86::cr4::pae, feat::pae, feat::pae},                // EDX[6] PAE: CR4.PAE
    {x86::cr4::mce, feat::mce, feat::mce},                // EDX[7] MCE: CR4.MCE
    {x86::cr4::pge, feat::pge, feat::pge},                // EDX[13] PGE: CR4.PGE
    {x86::cr4::osfxsr, feat::fxsr, feat::fxsr},           // EDX[24] FXSR: CR4.OSFXSR
    {x86::cr4::osxmmexcpt, feat::sse, feat::sse},         // EDX[25] SSE: CR4.OSXMMEXCPT
    {x86::cr4::umip, feat::umip, feat::umip},             // CPUID.(EAX=07H,ECX=0):ECX[2] UMIP
    {x86::cr4::la57, feat::la57, feat::la57},             // 07H.0:ECX[16] LA57: 5-level paging
    {x86::cr4::vmxe, feat::vmx, feat::vmx},               // CPUID.01H:ECX[5] VMX
    {x86::cr4::smxe, feat::smx, feat::smx},               // CPUID.01H:ECX[6] SMX
    {x86::cr4::fsgsbase, feat::fsgsbase, feat::fsgsbase}, // 07H.0:EBX[0] FSGSBASE
    {x86::cr4::pcide, feat::pcid, feat::pcid},            // CPUID.01H:ECX[17] PCID
    {x86::cr4::osxsave, feat::xsave, feat::xsave},        // CPUID.01H:ECX[26] XSAVE
    {x86::cr4::kl, feat::kl, feat::kl},                   // 07H.0:ECX[23] Key Locker
    {x86::cr4::smep, feat::smep, feat::smep},             // 07H.0:EBX[7] SMEP
    {x86::cr4::smap, feat::smap, feat::smap},             // 07H.0:EBX[20] SMAP
    {x86::cr4::pke, feat::pku, feat::pku},                // 07H.0:ECX[3] PKU
    {x86::cr4::cet, feat::shstk, feat::ibt},              // 07H.0:ECX[7] CET_SS or EDX[20] CET_IBT
    {x86::cr4::pks, feat::pks, feat::pks},                // 07H.0:ECX[31] PKS
    {x86::cr4::uintr, feat::uintr, feat::uintr},          // 07H.0:EDX[5] UINTR
    {x86::cr4::lass, feature{word::leaf7_1_eax, 6}, feature{word::leaf7_1_eax, 6}},  // 07H.1:EAX[6] LASS
    {x86::cr4::lam_sup, feat::lam, feat::lam},            // 07H.1:EAX[26] LAM
    {x86::cr4::fred, feat::fred, feat::fred},             // 07H.1:EAX[17] FRED
}};

/// EFER bit -> the CPUID feature without which it is reserved. LMA is read-only (the
/// processor sets it from LME and CR0.PG) but exists with long mode. LMSLE is not gated by a
/// feature bit but by the vendor and CPUID Fn8000_0008 EBX[20] (EferLmsleUnsupported), see
/// guest_efer_allowed().
inline constexpr std::array<control_gate<x86::efer>, 7> efer_gates{{
    {x86::efer::sce, feat::syscall, feat::syscall},     // CPUID.80000001H:EDX[11] SYSCALL/SYSRET
    {x86::efer::lme, feat::lm, feat::lm},               // 80000001H:EDX[29] Intel 64 / long mode
    {x86::efer::lma, feat::lm, feat::lm},
    {x86::efer::nxe, feat::nx, feat::nx},               // 80000001H:EDX[20] execute disable
    {x86::efer::svme, feat::svm, feat::svm},            // AMD 8000_0001 ECX[2] SVM
    {x86::efer::ffxsr, feat::fxsr_opt, feat::fxsr_opt}, // AMD 8000_0001 EDX[25] FFXSR
    {x86::efer::tce, feat::tce, feat::tce},             // AMD 8000_0001 ECX[17] TCE
}};
/// AMD Fn8000_0021 EAX[8] AutomaticIBRS: EFER.AIBRSE (bit 21).
inline constexpr control_gate<x86::efer> efer_autoibrs_gate{x86::efer::autoibrs, feat::autoibrs, feat::autoibrs};
/// AMD Fn8000_0008 EBX[20] EferLmsleUnsupported: EFER.LMSLE is reserved when it is 1.
inline constexpr feature efer_lmsle_unsupported{word::ext8_ebx, 20};

/// The CR4 bits a guest with features `f` may set.
[[nodiscard]] constexpr x86::cr4 guest_cr4_allowed(const feature_set& f) noexcept {
  x86::cr4 a = x86::cr4::defined;
  for (const auto& g : cr4_gates)
    if (!f.test(g.needs) && !f.test(g.or_needs)) a = a.without(g.bit);
  return a;
}

/// The EFER bits a guest with features `f` of vendor `v` may set (LMA: see efer_gates).
[[nodiscard]] constexpr x86::efer guest_efer_allowed(const feature_set& f, vendor v) noexcept {
  x86::efer a = x86::efer::defined;
  for (const auto& g : efer_gates)
    if (!f.test(g.needs)) a = a.without(g.bit);
  if (!f.test(efer_autoibrs_gate.needs)) a = a.without(x86::efer::autoibrs);
  // LMSLE (AMD APM Vol. 2, EFER bit 13): AMD long mode only, and not where Fn8000_0008
  // EBX[20] (EferLmsleUnsupported) says the processor dropped it.
  const bool amd_like = v == vendor::amd || v == vendor::hygon;
  if (!amd_like || !f.test(feat::lm) || f.test(efer_lmsle_unsupported)) a = a.without(x86::efer::lmsle);
  return a;
}

/// The guest CPU as its CPUID policy describes it. Plain data; the first three members keep
/// the order of the former vmx::guest_cpu_config (now an alias), so `{cr4, maxphyaddr, lam}`
/// still initialises it.
///
/// Default-constructed (no CPUID known): every defined CR4 and EFER bit settable, MAXPHYADDR
/// x86::default_maxphyaddr (36, SDM 4.1.4), no LAM, no features. make_guest_cpu_model() is
/// the model of a real guest.
struct guest_cpu_model {
  /// CR4 bits the guest may set; the others are reserved for it (#GP on MOV to CR4).
  x86::cr4 cr4_allowed = x86::cr4::defined;
  /// MAXPHYADDR the guest sees (CPUID.80000008H:EAX[7:0]).
  unsigned maxphyaddr = x86::default_maxphyaddr;
  /// CPUID.(EAX=07H,ECX=1):EAX[26] (LAM): CR3 bits 61 and 62 may be set (SDM 4.4).
  bool lam = false;
  /// EFER bits the guest may set; the others are reserved for it (#GP on WRMSR).
  x86::efer efer_allowed = x86::efer::defined;
  /// The guest's enumerated features (for the rules that depend on one).
  feature_set features{};
  vendor cpu_vendor = vendor::unknown;

  [[nodiscard]] constexpr bool has(feature f) const noexcept { return features.test(f); }
  /// 1-GByte pages (CPUID.80000001H:EDX[26]).
  [[nodiscard]] constexpr bool gbpages() const noexcept { return has(feat::pdpe1gb); }
  /// True if a write of `v` to IA32_EFER sets no bit reserved for this guest.
  [[nodiscard]] constexpr bool efer_write_allowed(x86::efer v) const noexcept { return (v & ~efer_allowed).none(); }
  /// True if a write of `v` to CR4 sets no bit reserved for this guest.
  [[nodiscard]] constexpr bool cr4_write_allowed(x86::cr4 v) const noexcept { return (v & ~cr4_allowed).none(); }

  /// Copies the CPUID-derived fields into an x86::cr_context (the one place they are set).
  constexpr void apply_to(x86::cr_context& c) const noexcept {
    c.cr4_allowed = cr4_allowed;
    c.maxphyaddr = maxphyaddr;
    c.lam = lam;
  }
};

/// The model of a guest with features `f`, vendor `v` and MAXPHYADDR `maxphyaddr` (what
/// decode_address_widths() reads from CPUID.80000008H, SDM 4.1.4).
[[nodiscard]] constexpr guest_cpu_model make_guest_cpu_model(const feature_set& f, vendor v,
                                                             unsigned maxphyaddr) noexcept {
  guest_cpu_model m;
  m.cr4_allowed = guest_cr4_allowed(f);
  m.maxphyaddr = maxphyaddr;
  m.lam = f.test(feat::lam);
  m.efer_allowed = guest_efer_allowed(f, v);
  m.features = f;
  m.cpu_vendor = v;
  return m;
}

/// The model of the guest whose CPUID policy is `p`.
[[nodiscard]] constexpr guest_cpu_model make_guest_cpu_model(const policy& p) noexcept {
  return make_guest_cpu_model(p.features(), p.cpu_vendor(), decode_address_widths(p.leaves()).physical);
}

}  // namespace hvkit::cpuid
