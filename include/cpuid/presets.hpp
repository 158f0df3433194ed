// SPDX-License-Identifier: MIT
/// @file
/// @brief Starting points for `hypervisor_caps`: features a VMX/SVM hypervisor can pass
/// through without emulating anything, and the APIC features a virtual APIC provides.
///
/// The pass-through set holds instruction-set extensions and architectural bits that need
/// no hypervisor code beyond saving the guest's registers and XSAVE state (which the
/// XSAVE components of `hypervisor_caps` govern). It deliberately leaves out what needs
/// VMCS/VMCB controls or emulation: VMX/SVM, MONITOR/MWAIT, PCID/INVPCID, RDTSCP/RDPID,
/// XSAVES (IA32_XSS), PKS, CET, PT, SGX, the PMU, WAITPKG, TSC_ADJUST, UMIP, LA57, and
/// the speculation-control bits (SPEC_CTRL, STIBP, SSBD, FLUSH_L1D, ARCH_CAPABILITIES,
/// IBPB), whose MSRs the hypervisor must back (msr_policy.hpp): add those deliberately.
#pragma once

#include "features.hpp"

namespace hvkit::cpuid::presets {

inline constexpr feature_set instruction_set_passthrough{
    // CPUID.1:ECX / EDX
    feat::sse3, feat::pclmulqdq, feat::ssse3, feat::fma, feat::cx16, feat::sse4_1, feat::sse4_2, feat::movbe,
    feat::popcnt, feat::aes, feat::xsave, feat::avx, feat::f16c, feat::rdrand,
    feat::fpu, feat::vme, feat::de, feat::pse, feat::tsc, feat::msr, feat::pae, feat::mce, feat::cx8, feat::apic,
    feat::sep, feat::mtrr, feat::pge, feat::mca, feat::cmov, feat::pat, feat::pse36, feat::clflush, feat::mmx,
    feat::fxsr, feat::sse, feat::sse2,
    // CPUID.7.0
    feat::fsgsbase, feat::bmi1, feat::avx2, feat::fdp_excptn_only, feat::smep, feat::bmi2, feat::erms,
    feat::zero_fcs_fds, feat::avx512f, feat::avx512dq, feat::rdseed, feat::adx, feat::smap, feat::avx512ifma,
    feat::clflushopt, feat::clwb, feat::avx512cd, feat::sha_ni, feat::avx512bw, feat::avx512vl, feat::avx512vbmi,
    feat::avx512_vbmi2, feat::gfni, feat::vaes, feat::vpclmulqdq, feat::avx512_vnni, feat::avx512_bitalg,
    feat::avx512_vpopcntdq, feat::movdiri, feat::movdir64b, feat::fsrm, feat::avx512_vp2intersect, feat::md_clear,
    feat::serialize, feat::avx512_fp16,
    // CPUID.7.1
    feat::avx_vnni, feat::avx512_bf16, feat::fzrm, feat::fsrs, feat::fsrc, feat::avx_ifma, feat::avx_vnni_int8,
    feat::avx_ne_convert, feat::avx_vnni_int16,
    // CPUID.0xD.1
    feat::xsaveopt, feat::xsavec, feat::xgetbv1,
    // CPUID.0x80000001
    feat::lahf_lm, feat::abm, feat::sse4a, feat::misalignsse, feat::prefetchw, feat::syscall, feat::nx,
    feat::mmxext, feat::fxsr_opt, feat::pdpe1gb, feat::lm,
    // CPUID.0x80000008:EBX, 0x80000021:EAX (no MSR behind them)
    feat::clzero, feat::xsaveerptr, feat::wbnoinvd, feat::no_nested_data_bp, feat::lfence_rdtsc,
    feat::null_sel_clr_base};

/// What a hypervisor with a virtual local APIC (timer included) emulates.
inline constexpr feature_set virtual_apic{feat::x2apic, feat::tsc_deadline, feat::arat};

}  // namespace hvkit::cpuid::presets
