// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest-policy normalization rules as data: each rule with what it does, why,
/// and its SDM/APM reference; and the feature-dependency table the XSAVE rule uses.
///
/// policy.hpp applies the static rules in table order when it builds a policy, and the
/// dynamic ones each time it answers a CPUID exit. docs/cpuid.md prints the same table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "features.hpp"
#include "../x86/xcr0.hpp"

namespace hvkit::cpuid {

enum class rule_id : std::uint8_t {
  nested_virtualization,
  emulated_only,
  feature_dependencies,
  topoext_hidden,
  hypervisor_bit,
  xsave_leaf,
  topology,
  hypervisor_leaves,
  leaf7_max_subleaf,
  max_basic_leaf,
  max_extended_leaf,
  osxsave_ospke,
  apic_id,
  xsave_sizes,
  pv_send_ipi,
};

/// One normalization rule.
struct rule {
  rule_id id;
  const char* name;
  const char* what;
  const char* why;
  const char* reference;
  bool dynamic;  ///< applied per CPUID exit from the vCPU's state, not at build time
};

inline constexpr std::array<rule, 15> normalization_rules{{
    {rule_id::nested_virtualization, "nested_virtualization",
     "VMX (1:ECX[5]) and SVM (0x80000001:ECX[2], leaf 0x8000000A) hidden unless nested virtualization is offered; with nested SVM, 0x8000000A EDX carries only the features the hypervisor implements (svm_nested_caps)",
     "a guest that sees VMX/SVM executes VMXON/VMRUN, which exit and must be emulated",
     "SDM Vol. 3C 24.6 (discovering VMX support); APM vol. 2 15.4 (enabling SVM); APM vol. 3 Appendix E (Fn8000_000A)", false},
    {rule_id::emulated_only, "emulated_only",
     "x2APIC (1:ECX[21]), TSC-deadline (1:ECX[24]) and ARAT (6:EAX[2]) come from what the hypervisor emulates, not from the host",
     "the guest's local APIC is the hypervisor's virtual APIC: the host's APIC capabilities say nothing about it",
     "SDM Vol. 3A 11.12.1 (x2APIC detection), 11.5.4.1 (TSC-deadline mode), CPUID leaf 06H", false},
    {rule_id::feature_dependencies, "feature_dependencies",
     "a host component whose own 0xD sub-leaf contradicts the 0xD.0/0xD.1 bitmaps is withheld (reason recorded); a feature whose prerequisite feature or XSAVE state component is not exposed is hidden; a component no exposed feature needs is not exposed",
     "software checks AVX etc. together with XCR0; enumerating AVX without its state component makes XSETBV fail or VEX instructions #UD; a component without a usable size cannot be laid out",
     "SDM Vol. 1 13.2, 14.3 (detection of AVX), 15.2 (AVX-512), 13.3 (XCR0 rules); SDM Vol. 2A CPUID leaf 0DH (sub-leaves n > 1)", false},
    {rule_id::topoext_hidden, "topoext_hidden",
     "AMD TOPOEXT (0x80000001:ECX[22]) hidden and leaves 0x8000001D/0x8000001E removed",
     "hvkit does not synthesize AMD's extended topology; the host's values would contradict the guest topology",
     "APM vol. 3 E.4.15-E.4.16 (Fn8000_001D, Fn8000_001E)", false},
    {rule_id::hypervisor_bit, "hypervisor_bit", "CPUID.1:ECX[31] set",
     "tells the guest it runs under a hypervisor and may look at the 0x40000000 range",
     "APM vol. 3 E.3.2 (Fn0000_0001_ECX[31] reserved for hypervisor use); SDM CPUID leaf 01H ECX[31]", false},
    {rule_id::xsave_leaf, "xsave_leaf",
     "leaf 0xD rebuilt: 0xD.0 EDX:EAX and 0xD.1 EDX:ECX = exposed XCR0/XSS components, 0xD.0 ECX = standard size of all exposed user components, subleaves of hidden components removed",
     "the guest sizes its XSAVE buffers from leaf 0xD: sizes of host components it cannot enable would be wrong",
     "SDM Vol. 1 13.2, 13.4.3 (compacted format); SDM Vol. 2A CPUID leaf 0DH", false},
    {rule_id::topology, "topology",
     "leaves 0xB/0x1F from the configured threads/cores; 1:EBX[23:16], 1:EDX[28] (HTT), 4:EAX[31:14] and AMD 0x80000008:ECX[15:0] made to agree",
     "every topology enumeration the guest may use must describe the same vCPU layout",
     "SDM Vol. 2A CPUID leaves 01H, 04H, 0BH, 1FH; APM vol. 3 E.4.7 (Fn8000_0008_ECX)", false},
    {rule_id::hypervisor_leaves, "hypervisor_leaves",
     "host 0x4000xxxx leaves removed; KVM signature at the base (EAX = base+1), features in EAX and hints in EDX of base+1",
     "the guest's paravirtual interface is this hypervisor's, not whatever the host runs on",
     "Linux Documentation/virt/kvm/x86/cpuid.rst (KVM_CPUID_SIGNATURE, KVM_CPUID_FEATURES)", false},
    {rule_id::leaf7_max_subleaf, "leaf7_max_subleaf", "7.0:EAX = highest subleaf of leaf 7 present",
     "software enumerates subleaves 1..EAX", "SDM Vol. 2A CPUID leaf 07H, subleaf 0 EAX", false},
    {rule_id::max_basic_leaf, "max_basic_leaf", "0:EAX = highest basic leaf present (at most the configured cap)",
     "leaves above the maximum are not queried; leaves added or removed must be reflected",
     "SDM Vol. 2A CPUID leaf 00H EAX", false},
    {rule_id::max_extended_leaf, "max_extended_leaf", "0x80000000:EAX = highest extended leaf present",
     "as for basic leaves", "SDM Vol. 2A CPUID leaf 80000000H; APM vol. 3 E.4.1", false},
    {rule_id::osxsave_ospke, "osxsave_ospke",
     "1:ECX[27] (OSXSAVE) = guest CR4.OSXSAVE and 7.0:ECX[4] (OSPKE) = guest CR4.PKE, when XSAVE/PKU are exposed",
     "these bits reflect the OS's control-register setting, not a capability: the host's CR4 is not the guest's",
     "SDM Vol. 2A CPUID leaf 01H ECX[27], leaf 07H ECX[4]", true},
    {rule_id::apic_id, "apic_id", "1:EBX[31:24] = low 8 bits of the vCPU's x2APIC ID; 0xB/0x1F EDX = x2APIC ID",
     "each vCPU must see its own APIC ID", "SDM Vol. 2A CPUID leaf 01H EBX, leaf 0BH EDX", true},
    {rule_id::xsave_sizes, "xsave_sizes",
     "0xD.0:EBX = standard-format size for the guest's XCR0; 0xD.1:EBX = compacted size for XCR0 | IA32_XSS",
     "these sizes follow the currently enabled components (XSETBV, WRMSR IA32_XSS)",
     "SDM Vol. 2A CPUID leaf 0DH; SDM Vol. 1 13.4.3", true},
    {rule_id::pv_send_ipi, "pv_send_ipi",
     "KVM_FEATURE_PV_SEND_IPI (EAX[11] of base+1) withheld when the guest's IPIs are accelerated (policy_config::ipi_accelerated: AVIC or VMX IPI virtualization)",
     "with accelerated IPIs an ICR write is delivered without an exit; the hypercall would always exit and be slower than the path it replaces",
     "Linux Documentation/virt/kvm/x86/cpuid.rst (KVM_FEATURE_PV_SEND_IPI), hypercalls.rst (KVM_HC_SEND_IPI); SDM Vol. 3C chapter 30 (IPI virtualization); APM vol. 2 15.29 (AVIC)", false},
}};

/// The rule with id `id` (the table is indexed by id).
[[nodiscard]] constexpr const rule& rule_for(rule_id id) noexcept { return normalization_rules[static_cast<std::size_t>(id)]; }

/// A feature needs another feature (`requires_feature`, if `has_requirement`) and/or XSAVE
/// state components (which in turn need XSAVE itself).
struct feature_dependency {
  feature f;
  bool has_requirement;
  feature requires_feature;
  x86::xfeatures components;
};

namespace detail {
inline constexpr x86::xfeatures avx_state = x86::xfeatures::sse | x86::xfeatures::avx;
inline constexpr x86::xfeatures avx512_state =
    avx_state | x86::xfeatures::opmask | x86::xfeatures::zmm_hi256 | x86::xfeatures::hi16_zmm;
inline constexpr x86::xfeatures amx_state = x86::xfeatures::xtilecfg | x86::xfeatures::xtiledata;
inline constexpr x86::xfeatures cet_state = x86::xfeatures::cet_u | x86::xfeatures::cet_s;
}  // namespace detail

inline constexpr feature_dependency feature_dependencies[] = {
    {feat::xsaveopt, true, feat::xsave, {}},
    {feat::xsavec, true, feat::xsave, {}},
    {feat::xgetbv1, true, feat::xsave, {}},
    {feat::xsaves, true, feat::xsave, {}},
    {feat::xfd, true, feat::amx_tile, {}},
    {feat::avx, true, feat::xsave, detail::avx_state},
    {feat::avx2, true, feat::avx, detail::avx_state},
    {feat::fma, true, feat::avx, detail::avx_state},
    {feat::f16c, true, feat::avx, detail::avx_state},
    {feat::vaes, true, feat::avx, detail::avx_state},
    {feat::vpclmulqdq, true, feat::avx, detail::avx_state},
    {feat::avx_vnni, true, feat::avx2, detail::avx_state},
    {feat::avx_ifma, true, feat::avx2, detail::avx_state},
    {feat::avx_vnni_int8, true, feat::avx2, detail::avx_state},
    {feat::avx_ne_convert, true, feat::avx2, detail::avx_state},
    {feat::avx_vnni_int16, true, feat::avx2, detail::avx_state},
    {feat::avx512f, true, feat::avx2, detail::avx512_state},
    {feat::avx512dq, true, feat::avx512f, detail::avx512_state},
    {feat::avx512ifma, true, feat::avx512f, detail::avx512_state},
    {feat::avx512pf, true, feat::avx512f, detail::avx512_state},
    {feat::avx512er, true, feat::avx512f, detail::avx512_state},
    {feat::avx512cd, true, feat::avx512f, detail::avx512_state},
    {feat::avx512bw, true, feat::avx512f, detail::avx512_state},
    {feat::avx512vl, true, feat::avx512f, detail::avx512_state},
    {feat::avx512vbmi, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_vbmi2, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_vnni, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_bitalg, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_vpopcntdq, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_4vnniw, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_4fmaps, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_vp2intersect, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_fp16, true, feat::avx512f, detail::avx512_state},
    {feat::avx512_bf16, true, feat::avx512f, detail::avx512_state},
    {feat::mpx, true, feat::xsave, x86::xfeatures::bndregs | x86::xfeatures::bndcsr},
    {feat::amx_tile, true, feat::xsave, detail::amx_state},
    {feat::amx_bf16, true, feat::amx_tile, detail::amx_state},
    {feat::amx_int8, true, feat::amx_tile, detail::amx_state},
    {feat::amx_fp16, true, feat::amx_tile, detail::amx_state},
    {feat::amx_complex, true, feat::amx_tile, detail::amx_state},
    {feat::shstk, true, feat::xsaves, detail::cet_state},
    {feat::ibt, true, feat::xsaves, detail::cet_state},
    {feat::apx_f, true, feat::xsave, x86::xfeatures::apx},
    {feat::osxsave, true, feat::xsave, {}},
    {feat::ospke, true, feat::pku, {}},
    {feat::x2apic, true, feat::apic, {}},
    {feat::tsc_deadline, true, feat::apic, {}},
};

/// State components that follow a feature without requiring XSAVE to have the feature
/// (PKU works without XSAVE, but PKRU is only XSAVE-managed when PKU is exposed).
struct component_owner {
  feature f;
  x86::xfeatures components;
};
inline constexpr component_owner component_owners[] = {
    {feat::pku, x86::xfeatures::pkru},
};

}  // namespace hvkit::cpuid
