// SPDX-License-Identifier: MIT
/// @file
/// @brief Model-specific register indices hypervisors need, with the bits they use
/// (SDM Vol. 4, Chapter 2; AMD APM vol. 2 Appendix A).
#pragma once

#include <cstdint>

namespace hvkit::x86::msr {

// Architectural IA32_* MSRs (SDM Vol. 4, Table 2-2).
inline constexpr std::uint32_t ia32_p5_mc_addr = 0x0;
inline constexpr std::uint32_t ia32_p5_mc_type = 0x1;
inline constexpr std::uint32_t ia32_tsc = 0x10;
inline constexpr std::uint32_t ia32_platform_id = 0x17;
inline constexpr std::uint32_t ia32_apic_base = 0x1b;
inline constexpr std::uint32_t ia32_feature_control = 0x3a;
inline constexpr std::uint32_t ia32_tsc_adjust = 0x3b;
inline constexpr std::uint32_t ia32_spec_ctrl = 0x48;
inline constexpr std::uint32_t ia32_pred_cmd = 0x49;
inline constexpr std::uint32_t ia32_bios_sign_id = 0x8b;
inline constexpr std::uint32_t ia32_mtrrcap = 0xfe;
inline constexpr std::uint32_t ia32_arch_capabilities = 0x10a;
inline constexpr std::uint32_t ia32_flush_cmd = 0x10b;
inline constexpr std::uint32_t ia32_tsx_ctrl = 0x122;
inline constexpr std::uint32_t ia32_sysenter_cs = 0x174;
inline constexpr std::uint32_t ia32_sysenter_esp = 0x175;
inline constexpr std::uint32_t ia32_sysenter_eip = 0x176;
inline constexpr std::uint32_t ia32_mcg_cap = 0x179;
inline constexpr std::uint32_t ia32_mcg_status = 0x17a;
inline constexpr std::uint32_t ia32_misc_enable = 0x1a0;
inline constexpr std::uint32_t ia32_debugctl = 0x1d9;
inline constexpr std::uint32_t ia32_mtrr_physbase0 = 0x200;
inline constexpr std::uint32_t ia32_mtrr_physmask0 = 0x201;
inline constexpr std::uint32_t ia32_mtrr_fix64k_00000 = 0x250;
inline constexpr std::uint32_t ia32_pat = 0x277;
inline constexpr std::uint32_t ia32_mtrr_def_type = 0x2ff;
inline constexpr std::uint32_t ia32_perf_global_ctrl = 0x38f;

// VMX capability MSRs (SDM Vol. 3 Appendix A).
inline constexpr std::uint32_t ia32_vmx_basic = 0x480;
inline constexpr std::uint32_t ia32_vmx_pinbased_ctls = 0x481;
inline constexpr std::uint32_t ia32_vmx_procbased_ctls = 0x482;
inline constexpr std::uint32_t ia32_vmx_exit_ctls = 0x483;
inline constexpr std::uint32_t ia32_vmx_entry_ctls = 0x484;
inline constexpr std::uint32_t ia32_vmx_misc = 0x485;
inline constexpr std::uint32_t ia32_vmx_cr0_fixed0 = 0x486;
inline constexpr std::uint32_t ia32_vmx_cr0_fixed1 = 0x487;
inline constexpr std::uint32_t ia32_vmx_cr4_fixed0 = 0x488;
inline constexpr std::uint32_t ia32_vmx_cr4_fixed1 = 0x489;
inline constexpr std::uint32_t ia32_vmx_vmcs_enum = 0x48a;
inline constexpr std::uint32_t ia32_vmx_procbased_ctls2 = 0x48b;
inline constexpr std::uint32_t ia32_vmx_ept_vpid_cap = 0x48c;
inline constexpr std::uint32_t ia32_vmx_true_pinbased_ctls = 0x48d;
inline constexpr std::uint32_t ia32_vmx_true_procbased_ctls = 0x48e;
inline constexpr std::uint32_t ia32_vmx_true_exit_ctls = 0x48f;
inline constexpr std::uint32_t ia32_vmx_true_entry_ctls = 0x490;
inline constexpr std::uint32_t ia32_vmx_vmfunc = 0x491;
inline constexpr std::uint32_t ia32_vmx_procbased_ctls3 = 0x492;
inline constexpr std::uint32_t ia32_vmx_exit_ctls2 = 0x493;

// CET, protection keys, XSAVE supervisor state, TSC deadline.
inline constexpr std::uint32_t ia32_u_cet = 0x6a0;
inline constexpr std::uint32_t ia32_s_cet = 0x6a2;
inline constexpr std::uint32_t ia32_pl0_ssp = 0x6a4;
inline constexpr std::uint32_t ia32_pl1_ssp = 0x6a5;
inline constexpr std::uint32_t ia32_pl2_ssp = 0x6a6;
inline constexpr std::uint32_t ia32_pl3_ssp = 0x6a7;
inline constexpr std::uint32_t ia32_interrupt_ssp_table_addr = 0x6a8;
inline constexpr std::uint32_t ia32_tsc_deadline = 0x6e0;
inline constexpr std::uint32_t ia32_pkrs = 0x6e1;
inline constexpr std::uint32_t ia32_xss = 0xda0;

// x2APIC registers (SDM 11.12.1.2, Table 11-6): MSRs 0x800-0xBFF are "architecturally
// reserved and dedicated for accessing APIC registers in x2APIC mode"; an address there that
// Table 11-6 does not list #GPs, and so does any of them outside x2APIC mode (11.12.2).
inline constexpr std::uint32_t x2apic_first = 0x800;
inline constexpr std::uint32_t x2apic_last = 0xbff;
/// The part of that range VMX APIC virtualization covers: with "virtualize x2APIC mode",
/// RDMSR/WRMSR of 0x800-0x8FF are virtualized (SDM Vol. 3C 30.5).
inline constexpr std::uint32_t x2apic_virtualized_last = 0x8ff;
inline constexpr std::uint32_t x2apic_id = 0x802;
inline constexpr std::uint32_t x2apic_version = 0x803;
inline constexpr std::uint32_t x2apic_tpr = 0x808;
inline constexpr std::uint32_t x2apic_ppr = 0x80a;
inline constexpr std::uint32_t x2apic_eoi = 0x80b;
inline constexpr std::uint32_t x2apic_ldr = 0x80d;
inline constexpr std::uint32_t x2apic_sivr = 0x80f;
inline constexpr std::uint32_t x2apic_isr0 = 0x810;
inline constexpr std::uint32_t x2apic_tmr0 = 0x818;
inline constexpr std::uint32_t x2apic_irr0 = 0x820;
inline constexpr std::uint32_t x2apic_esr = 0x828;
inline constexpr std::uint32_t x2apic_lvt_cmci = 0x82f;
inline constexpr std::uint32_t x2apic_icr = 0x830;
inline constexpr std::uint32_t x2apic_lvt_timer = 0x832;
inline constexpr std::uint32_t x2apic_lvt_thermal = 0x833;
inline constexpr std::uint32_t x2apic_lvt_pmi = 0x834;
inline constexpr std::uint32_t x2apic_lvt_lint0 = 0x835;
inline constexpr std::uint32_t x2apic_lvt_lint1 = 0x836;
inline constexpr std::uint32_t x2apic_lvt_error = 0x837;
inline constexpr std::uint32_t x2apic_timer_initial_count = 0x838;
inline constexpr std::uint32_t x2apic_timer_current_count = 0x839;
inline constexpr std::uint32_t x2apic_timer_divide = 0x83e;
inline constexpr std::uint32_t x2apic_self_ipi = 0x83f;
[[nodiscard]] constexpr bool is_x2apic(std::uint32_t index) noexcept { return index >= x2apic_first && index <= x2apic_last; }

// Extended (AMD-originated, architectural on Intel) MSRs.
inline constexpr std::uint32_t ia32_efer = 0xc0000080;
inline constexpr std::uint32_t ia32_star = 0xc0000081;
inline constexpr std::uint32_t ia32_lstar = 0xc0000082;
inline constexpr std::uint32_t ia32_cstar = 0xc0000083;
inline constexpr std::uint32_t ia32_fmask = 0xc0000084;
inline constexpr std::uint32_t ia32_fs_base = 0xc0000100;
inline constexpr std::uint32_t ia32_gs_base = 0xc0000101;
inline constexpr std::uint32_t ia32_kernel_gs_base = 0xc0000102;
inline constexpr std::uint32_t ia32_tsc_aux = 0xc0000103;

// AMD SVM and speculation-control MSRs (AMD APM vol. 2, 15.30; AMD speculation whitepapers).
inline constexpr std::uint32_t amd_vm_cr = 0xc0010114;
inline constexpr std::uint32_t amd_vm_hsave_pa = 0xc0010117;
inline constexpr std::uint32_t amd_virt_spec_ctrl = 0xc001011f;

/// IA32_FEATURE_CONTROL bits (SDM Vol. 4, Table 2-2; Vol. 3 24.7).
namespace feature_control {
inline constexpr std::uint64_t lock = 1u << 0;
inline constexpr std::uint64_t vmxon_in_smx = 1u << 1;
inline constexpr std::uint64_t vmxon_outside_smx = 1u << 2;
inline constexpr std::uint64_t sgx_launch_control = 1u << 17;
inline constexpr std::uint64_t sgx_enable = 1u << 18;
inline constexpr std::uint64_t lmce = 1u << 20;
}  // namespace feature_control

/// IA32_SPEC_CTRL bits (Intel speculative-execution side-channel documentation).
namespace spec_ctrl {
inline constexpr std::uint64_t ibrs = 1u << 0;
inline constexpr std::uint64_t stibp = 1u << 1;
inline constexpr std::uint64_t ssbd = 1u << 2;
inline constexpr std::uint64_t ipred_dis_u = 1u << 3;
inline constexpr std::uint64_t ipred_dis_s = 1u << 4;
inline constexpr std::uint64_t rrsba_dis_u = 1u << 5;
inline constexpr std::uint64_t rrsba_dis_s = 1u << 6;
inline constexpr std::uint64_t psfd = 1u << 7;
inline constexpr std::uint64_t ddpd_u = 1u << 8;
inline constexpr std::uint64_t bhi_dis_s = 1u << 10;
}  // namespace spec_ctrl

/// IA32_PRED_CMD bits (write-only command MSR).
namespace pred_cmd {
inline constexpr std::uint64_t ibpb = 1u << 0;  ///< indirect branch prediction barrier
inline constexpr std::uint64_t sbpb = 1u << 7;  ///< AMD selective branch predictor barrier
}  // namespace pred_cmd

/// IA32_FLUSH_CMD bits (write-only command MSR).
namespace flush_cmd {
inline constexpr std::uint64_t l1d_flush = 1u << 0;
}  // namespace flush_cmd

/// IA32_ARCH_CAPABILITIES bits (SDM Vol. 4, Table 2-2).
namespace arch_capabilities {
inline constexpr std::uint64_t rdcl_no = 1u << 0;
inline constexpr std::uint64_t ibrs_all = 1u << 1;
inline constexpr std::uint64_t rsba = 1u << 2;
inline constexpr std::uint64_t skip_l1dfl_vmentry = 1u << 3;
inline constexpr std::uint64_t ssb_no = 1u << 4;
inline constexpr std::uint64_t mds_no = 1u << 5;
inline constexpr std::uint64_t if_pschange_mc_no = 1u << 6;
inline constexpr std::uint64_t tsx_ctrl = 1u << 7;
inline constexpr std::uint64_t taa_no = 1u << 8;
}  // namespace arch_capabilities

}  // namespace hvkit::x86::msr

namespace hvkit::x86 {
/// An RDMSR or a WRMSR: what the VMX MSR bitmap and the SVM MSR permission map distinguish.
enum class msr_access : std::uint8_t { read, write };
}  // namespace hvkit::x86
