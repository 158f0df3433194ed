// SPDX-License-Identifier: MIT
/// @file
/// @brief The reference hypervisor hosting an unmodified Linux kernel (linux.cpp).
///
/// GRUB loads the hypervisor with the multiboot command line "linux <kernel command line>"
/// and two modules, the kernel's bzImage and the initramfs. The hypervisor then starts the
/// kernel through the Linux 64-bit boot protocol in VMX non-root operation (or as an SVM
/// guest) instead of running its conformance guests, and logs on Bochs' port 0xE9 (COM1 is the guest's).
#pragma once

#include <cstdint>

#include <hvkit/cpuid/features.hpp>
#include <hvkit/vmx/register_file.hpp>

#include "../vmx/vmx_glue.hpp"


namespace hv {
struct vmx_backend;
}

namespace hv::lx {

/// True when the multiboot command line asks for the Linux guest (checked before the
/// hypervisor touches COM1, which then belongs to the guest).
bool requested();
/// Boots the Linux guest and reports; never returns (ends the machine).
[[noreturn]] void boot(core::guest_cpu& cpu);
/// The Linux guest's run (linux_profile.hpp): boot()'s, reached by every vCPU through its
/// vcpu_data::run.
struct linux_state;
/// The Linux guest's VM exits on VMX: the core's exit loop with the Linux guest profile
/// (vmx/vmx_linux.cpp; svm/svm.cpp does the same for SVM); true resumes the guest.
bool handle_exit(vmx_backend& b);

/// What the Linux guest profile keeps per vCPU (smp::cpu::lx): the CR0.WP sections the
/// hvkit_wp module runs on this vCPU, and the vCPU's MTRRs and IA32_MISC_ENABLE.
struct vcpu_data {
  bool wp_intercepted;
  std::uint64_t wp_mark;
  std::uint64_t wp_toggles[2], wp_exits[2], wp_mismatch[2];
  bool wp_seen[2];
  bool mtrr_loaded;
  std::uint64_t mtrr_def_type, mtrr_fixed[11], mtrr_var[32];
  std::uint64_t misc_enable;
  std::uint64_t msr_emulated;
  linux_state* run;  ///< the Linux run this vCPU belongs to (set before the vCPU starts)
};

/// The Linux guest's CPUID normalization, both vendors: the features whose MSRs or devices
/// this hypervisor does not virtualize (docs/linux-guest.md has each reason).
hvkit::cpuid::feature_set denied_features();

/// The KVM paravirtual features this hypervisor implements for the Linux run `ls`, both
/// vendors: KVM_FEATURE_PV_SEND_IPI when "hvkit.pv_send_ipi" is on the kernel command line
/// (run --linux --pv-send-ipi; KVM_HC_SEND_IPI, smp/smp_ipi.cpp), else none.
hvkit::cpuid::feature_set emulated_features(const linux_state& ls);

/// Hypercalls of the Linux guest (VMCALL or VMMCALL, CPL 0 only: the hvkit_wp kernel module).
/// RAX = number; KVM's numbers are small, these carry "hv" in bits 31:16.
enum : std::uint64_t {
  hc_wp_begin = 0x68760001,  ///< RBX = 1: CR0.WP intercepted, 0: guest-owned. Snapshots the CR-exit count.
  hc_wp_end = 0x68760002,    ///< RBX = toggles, RCX = guest-side mismatches, RDX = the timed loop's TSC (0: none). RAX = CR exits since begin.
};

}  // namespace hv::lx
