// SPDX-License-Identifier: MIT
/// @file
/// @brief VM-execution, VM-exit and VM-entry controls as typed flag sets, every bit named
/// (SDM Vol. 3C 25.6.1, 25.6.2, 25.7.1, 25.8.1).
#pragma once

#include <cstdint>

#include "../x86/flags.hpp"

namespace hvkit::vmx {

/// Pin-based VM-execution controls (SDM 25.6.1, Table 25-5).
class pin_based : public x86::flags<pin_based, std::uint32_t> {
 public:
  using flags::flags;
  static const pin_based external_interrupt_exiting;  ///< 0
  static const pin_based nmi_exiting;                 ///< 3
  static const pin_based virtual_nmis;                ///< 5
  static const pin_based activate_preemption_timer;   ///< 6
  static const pin_based process_posted_interrupts;   ///< 7
  /// Bits 1, 2, 4: the default1 class (SDM A.3.1).
  static const pin_based default1;
};
inline constexpr pin_based pin_based::external_interrupt_exiting = pin_based::bit(0);
inline constexpr pin_based pin_based::nmi_exiting = pin_based::bit(3);
inline constexpr pin_based pin_based::virtual_nmis = pin_based::bit(5);
inline constexpr pin_based pin_based::activate_preemption_timer = pin_based::bit(6);
inline constexpr pin_based pin_based::process_posted_interrupts = pin_based::bit(7);
inline constexpr pin_based pin_based::default1 = pin_based{0x16};

/// Primary processor-based VM-execution controls (SDM 25.6.2, Table 25-6).
class primary_proc_based : public x86::flags<primary_proc_based, std::uint32_t> {
 public:
  using flags::flags;
  static const primary_proc_based interrupt_window_exiting;     ///< 2
  static const primary_proc_based use_tsc_offsetting;           ///< 3
  static const primary_proc_based hlt_exiting;                  ///< 7
  static const primary_proc_based invlpg_exiting;               ///< 9
  static const primary_proc_based mwait_exiting;                ///< 10
  static const primary_proc_based rdpmc_exiting;                ///< 11
  static const primary_proc_based rdtsc_exiting;                ///< 12
  static const primary_proc_based cr3_load_exiting;             ///< 15
  static const primary_proc_based cr3_store_exiting;            ///< 16
  static const primary_proc_based activate_tertiary_controls;   ///< 17
  static const primary_proc_based cr8_load_exiting;             ///< 19
  static const primary_proc_based cr8_store_exiting;            ///< 20
  static const primary_proc_based use_tpr_shadow;               ///< 21
  static const primary_proc_based nmi_window_exiting;           ///< 22
  static const primary_proc_based mov_dr_exiting;               ///< 23
  static const primary_proc_based unconditional_io_exiting;     ///< 24
  static const primary_proc_based use_io_bitmaps;               ///< 25
  static const primary_proc_based monitor_trap_flag;            ///< 27
  static const primary_proc_based use_msr_bitmaps;              ///< 28
  static const primary_proc_based monitor_exiting;              ///< 29
  static const primary_proc_based pause_exiting;                ///< 30
  static const primary_proc_based activate_secondary_controls;  ///< 31
  /// Bits 1, 4-6, 8, 13-16, 26: the default1 class (SDM A.3.2).
  static const primary_proc_based default1;
};
inline constexpr primary_proc_based primary_proc_based::interrupt_window_exiting = bit(2);
inline constexpr primary_proc_based primary_proc_based::use_tsc_offsetting = bit(3);
inline constexpr primary_proc_based primary_proc_based::hlt_exiting = bit(7);
inline constexpr primary_proc_based primary_proc_based::invlpg_exiting = bit(9);
inline constexpr primary_proc_based primary_proc_based::mwait_exiting = bit(10);
inline constexpr primary_proc_based primary_proc_based::rdpmc_exiting = bit(11);
inline constexpr primary_proc_based primary_proc_based::rdtsc_exiting = bit(12);
inline constexpr primary_proc_based primary_proc_based::cr3_load_exiting = bit(15);
inline constexpr primary_proc_based primary_proc_based::cr3_store_exiting = bit(16);
inline constexpr primary_proc_based primary_proc_based::activate_tertiary_controls = bit(17);
inline constexpr primary_proc_based primary_proc_based::cr8_load_exiting = bit(19);
inline constexpr primary_proc_based primary_proc_based::cr8_store_exiting = bit(20);
inline constexpr primary_proc_based primary_proc_based::use_tpr_shadow = bit(21);
inline constexpr primary_proc_based primary_proc_based::nmi_window_exiting = bit(22);
inline constexpr primary_proc_based primary_proc_based::mov_dr_exiting = bit(23);
inline constexpr primary_proc_based primary_proc_based::unconditional_io_exiting = bit(24);
inline constexpr primary_proc_based primary_proc_based::use_io_bitmaps = bit(25);
inline constexpr primary_proc_based primary_proc_based::monitor_trap_flag = bit(27);
inline constexpr primary_proc_based primary_proc_based::use_msr_bitmaps = bit(28);
inline constexpr primary_proc_based primary_proc_based::monitor_exiting = bit(29);
inline constexpr primary_proc_based primary_proc_based::pause_exiting = bit(30);
inline constexpr primary_proc_based primary_proc_based::activate_secondary_controls = bit(31);
inline constexpr primary_proc_based primary_proc_based::default1 = primary_proc_based{0x0401'e172};

/// Secondary processor-based VM-execution controls (SDM 25.6.2, Table 25-7). No default1 bits.
class secondary_proc_based : public x86::flags<secondary_proc_based, std::uint32_t> {
 public:
  using flags::flags;
  static const secondary_proc_based virtualize_apic_accesses;       ///< 0
  static const secondary_proc_based enable_ept;                     ///< 1
  static const secondary_proc_based descriptor_table_exiting;       ///< 2
  static const secondary_proc_based enable_rdtscp;                  ///< 3
  static const secondary_proc_based virtualize_x2apic_mode;         ///< 4
  static const secondary_proc_based enable_vpid;                    ///< 5
  static const secondary_proc_based wbinvd_exiting;                 ///< 6
  static const secondary_proc_based unrestricted_guest;             ///< 7
  static const secondary_proc_based apic_register_virtualization;   ///< 8
  static const secondary_proc_based virtual_interrupt_delivery;     ///< 9
  static const secondary_proc_based pause_loop_exiting;             ///< 10
  static const secondary_proc_based rdrand_exiting;                 ///< 11
  static const secondary_proc_based enable_invpcid;                 ///< 12
  static const secondary_proc_based enable_vm_functions;            ///< 13
  static const secondary_proc_based vmcs_shadowing;                 ///< 14
  static const secondary_proc_based enable_encls_exiting;           ///< 15
  static const secondary_proc_based rdseed_exiting;                 ///< 16
  static const secondary_proc_based enable_pml;                     ///< 17
  static const secondary_proc_based ept_violation_ve;               ///< 18
  static const secondary_proc_based conceal_vmx_from_pt;            ///< 19
  static const secondary_proc_based enable_xsaves_xrstors;          ///< 20
  static const secondary_proc_based pasid_translation;              ///< 21
  static const secondary_proc_based mode_based_execute_control;     ///< 22
  static const secondary_proc_based sub_page_write_permissions;     ///< 23
  static const secondary_proc_based pt_uses_guest_physical;         ///< 24
  static const secondary_proc_based use_tsc_scaling;                ///< 25
  static const secondary_proc_based enable_user_wait_pause;         ///< 26
  static const secondary_proc_based enable_pconfig;                 ///< 27
  static const secondary_proc_based enable_enclv_exiting;           ///< 28
  static const secondary_proc_based vmm_bus_lock_detection;         ///< 30
  static const secondary_proc_based instruction_timeout;            ///< 31
};
inline constexpr secondary_proc_based secondary_proc_based::virtualize_apic_accesses = bit(0);
inline constexpr secondary_proc_based secondary_proc_based::enable_ept = bit(1);
inline constexpr secondary_proc_based secondary_proc_based::descriptor_table_exiting = bit(2);
inline constexpr secondary_proc_based secondary_proc_based::enable_rdtscp = bit(3);
inline constexpr secondary_proc_based secondary_proc_based::virtualize_x2apic_mode = bit(4);
inline constexpr secondary_proc_based secondary_proc_based::enable_vpid = bit(5);
inline constexpr secondary_proc_based secondary_proc_based::wbinvd_exiting = bit(6);
inline constexpr secondary_proc_based secondary_proc_based::unrestricted_guest = bit(7);
inline constexpr secondary_proc_based secondary_proc_based::apic_register_virtualization = bit(8);
inline constexpr secondary_proc_based secondary_proc_based::virtual_interrupt_delivery = bit(9);
inline constexpr secondary_proc_based secondary_proc_based::pause_loop_exiting = bit(10);
inline constexpr secondary_proc_based secondary_proc_based::rdrand_exiting = bit(11);
inline constexpr secondary_proc_based secondary_proc_based::enable_invpcid = bit(12);
inline constexpr secondary_proc_based secondary_proc_based::enable_vm_functions = bit(13);
inline constexpr secondary_proc_based secondary_proc_based::vmcs_shadowing = bit(14);
inline constexpr secondary_proc_based secondary_proc_based::enable_encls_exiting = bit(15);
inline constexpr secondary_proc_based secondary_proc_based::rdseed_exiting = bit(16);
inline constexpr secondary_proc_based secondary_proc_based::enable_pml = bit(17);
inline constexpr secondary_proc_based secondary_proc_based::ept_violation_ve = bit(18);
inline constexpr secondary_proc_based secondary_proc_based::conceal_vmx_from_pt = bit(19);
inline constexpr secondary_proc_based secondary_proc_based::enable_xsaves_xrstors = bit(20);
inline constexpr secondary_proc_based secondary_proc_based::pasid_translation = bit(21);
inline constexpr secondary_proc_based secondary_proc_based::mode_based_execute_control = bit(22);
inline constexpr secondary_proc_based secondary_proc_based::sub_page_write_permissions = bit(23);
inline constexpr secondary_proc_based secondary_proc_based::pt_uses_guest_physical = bit(24);
inline constexpr secondary_proc_based secondary_proc_based::use_tsc_scaling = bit(25);
inline constexpr secondary_proc_based secondary_proc_based::enable_user_wait_pause = bit(26);
inline constexpr secondary_proc_based secondary_proc_based::enable_pconfig = bit(27);
inline constexpr secondary_proc_based secondary_proc_based::enable_enclv_exiting = bit(28);
inline constexpr secondary_proc_based secondary_proc_based::vmm_bus_lock_detection = bit(30);
inline constexpr secondary_proc_based secondary_proc_based::instruction_timeout = bit(31);

/// Tertiary processor-based VM-execution controls, 64 bits (SDM 25.6.2, Table 25-8).
class tertiary_proc_based : public x86::flags<tertiary_proc_based, std::uint64_t> {
 public:
  using flags::flags;
  static const tertiary_proc_based loadiwkey_exiting;          ///< 0
  static const tertiary_proc_based enable_hlat;                ///< 1
  static const tertiary_proc_based ept_paging_write_control;   ///< 2
  static const tertiary_proc_based guest_paging_verification;  ///< 3
  static const tertiary_proc_based ipi_virtualization;         ///< 4
  static const tertiary_proc_based virtualize_ia32_spec_ctrl;  ///< 7
};
inline constexpr tertiary_proc_based tertiary_proc_based::loadiwkey_exiting = bit(0);
inline constexpr tertiary_proc_based tertiary_proc_based::enable_hlat = bit(1);
inline constexpr tertiary_proc_based tertiary_proc_based::ept_paging_write_control = bit(2);
inline constexpr tertiary_proc_based tertiary_proc_based::guest_paging_verification = bit(3);
inline constexpr tertiary_proc_based tertiary_proc_based::ipi_virtualization = bit(4);
inline constexpr tertiary_proc_based tertiary_proc_based::virtualize_ia32_spec_ctrl = bit(7);

/// Primary VM-exit controls (SDM 25.7.1, Table 25-13).
class exit_controls : public x86::flags<exit_controls, std::uint32_t> {
 public:
  using flags::flags;
  static const exit_controls save_debug_controls;             ///< 2
  static const exit_controls host_address_space_size;         ///< 9
  static const exit_controls load_ia32_perf_global_ctrl;      ///< 12
  static const exit_controls acknowledge_interrupt_on_exit;   ///< 15
  static const exit_controls save_ia32_pat;                   ///< 18
  static const exit_controls load_ia32_pat;                   ///< 19
  static const exit_controls save_ia32_efer;                  ///< 20
  static const exit_controls load_ia32_efer;                  ///< 21
  static const exit_controls save_preemption_timer;           ///< 22
  static const exit_controls clear_ia32_bndcfgs;              ///< 23
  static const exit_controls conceal_vmx_from_pt;             ///< 24
  static const exit_controls clear_ia32_rtit_ctl;             ///< 25
  static const exit_controls clear_ia32_lbr_ctl;              ///< 26
  static const exit_controls clear_uinv;                      ///< 27
  static const exit_controls load_cet_state;                  ///< 28
  static const exit_controls load_pkrs;                       ///< 29
  static const exit_controls save_ia32_perf_global_ctrl;      ///< 30
  static const exit_controls activate_secondary_controls;     ///< 31
  /// Bits 0-8, 10, 11, 13, 14, 16, 17: the default1 class (SDM A.4.1).
  static const exit_controls default1;
};
inline constexpr exit_controls exit_controls::save_debug_controls = bit(2);
inline constexpr exit_controls exit_controls::host_address_space_size = bit(9);
inline constexpr exit_controls exit_controls::load_ia32_perf_global_ctrl = bit(12);
inline constexpr exit_controls exit_controls::acknowledge_interrupt_on_exit = bit(15);
inline constexpr exit_controls exit_controls::save_ia32_pat = bit(18);
inline constexpr exit_controls exit_controls::load_ia32_pat = bit(19);
inline constexpr exit_controls exit_controls::save_ia32_efer = bit(20);
inline constexpr exit_controls exit_controls::load_ia32_efer = bit(21);
inline constexpr exit_controls exit_controls::save_preemption_timer = bit(22);
inline constexpr exit_controls exit_controls::clear_ia32_bndcfgs = bit(23);
inline constexpr exit_controls exit_controls::conceal_vmx_from_pt = bit(24);
inline constexpr exit_controls exit_controls::clear_ia32_rtit_ctl = bit(25);
inline constexpr exit_controls exit_controls::clear_ia32_lbr_ctl = bit(26);
inline constexpr exit_controls exit_controls::clear_uinv = bit(27);
inline constexpr exit_controls exit_controls::load_cet_state = bit(28);
inline constexpr exit_controls exit_controls::load_pkrs = bit(29);
inline constexpr exit_controls exit_controls::save_ia32_perf_global_ctrl = bit(30);
inline constexpr exit_controls exit_controls::activate_secondary_controls = bit(31);
inline constexpr exit_controls exit_controls::default1 = exit_controls{0x0003'6dff};

/// Secondary VM-exit controls, 64 bits (VMCS field 0x2044; used when primary exit control
/// bit 31 is 1, SDM 25.7.1). Only the FRED bits are named.
class secondary_exit_controls : public x86::flags<secondary_exit_controls, std::uint64_t> {
 public:
  using flags::flags;
  static const secondary_exit_controls save_ia32_fred;  ///< 0
  static const secondary_exit_controls load_ia32_fred;  ///< 1
};
inline constexpr secondary_exit_controls secondary_exit_controls::save_ia32_fred = bit(0);
inline constexpr secondary_exit_controls secondary_exit_controls::load_ia32_fred = bit(1);

/// VM-entry controls (SDM 25.8.1, Table 25-15).
class entry_controls : public x86::flags<entry_controls, std::uint32_t> {
 public:
  using flags::flags;
  static const entry_controls load_debug_controls;          ///< 2
  static const entry_controls ia32e_mode_guest;             ///< 9
  static const entry_controls entry_to_smm;                 ///< 10
  static const entry_controls deactivate_dual_monitor;      ///< 11
  static const entry_controls load_ia32_perf_global_ctrl;   ///< 13
  static const entry_controls load_ia32_pat;                ///< 14
  static const entry_controls load_ia32_efer;               ///< 15
  static const entry_controls load_ia32_bndcfgs;            ///< 16
  static const entry_controls conceal_vmx_from_pt;          ///< 17
  static const entry_controls load_ia32_rtit_ctl;           ///< 18
  static const entry_controls load_uinv;                    ///< 19
  static const entry_controls load_cet_state;               ///< 20
  static const entry_controls load_guest_ia32_lbr_ctl;      ///< 21
  static const entry_controls load_pkrs;                    ///< 22
  static const entry_controls load_ia32_fred;               ///< 23 (FRED)
  /// Bits 0-8, 12: the default1 class (SDM A.5).
  static const entry_controls default1;
};
inline constexpr entry_controls entry_controls::load_debug_controls = bit(2);
inline constexpr entry_controls entry_controls::ia32e_mode_guest = bit(9);
inline constexpr entry_controls entry_controls::entry_to_smm = bit(10);
inline constexpr entry_controls entry_controls::deactivate_dual_monitor = bit(11);
inline constexpr entry_controls entry_controls::load_ia32_perf_global_ctrl = bit(13);
inline constexpr entry_controls entry_controls::load_ia32_pat = bit(14);
inline constexpr entry_controls entry_controls::load_ia32_efer = bit(15);
inline constexpr entry_controls entry_controls::load_ia32_bndcfgs = bit(16);
inline constexpr entry_controls entry_controls::conceal_vmx_from_pt = bit(17);
inline constexpr entry_controls entry_controls::load_ia32_rtit_ctl = bit(18);
inline constexpr entry_controls entry_controls::load_uinv = bit(19);
inline constexpr entry_controls entry_controls::load_cet_state = bit(20);
inline constexpr entry_controls entry_controls::load_guest_ia32_lbr_ctl = bit(21);
inline constexpr entry_controls entry_controls::load_pkrs = bit(22);
inline constexpr entry_controls entry_controls::load_ia32_fred = bit(23);
inline constexpr entry_controls entry_controls::default1 = entry_controls{0x0000'11ff};

}  // namespace hvkit::vmx
