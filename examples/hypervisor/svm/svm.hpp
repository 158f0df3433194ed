// SPDX-License-Identifier: MIT
/// @file
/// @brief The SVM (AMD-V) backend of the reference hypervisor: chosen at boot when CPUID
/// reports SVM (CPUID 8000_0001h:ECX[2]) with nested paging (8000_000Ah:EDX[0]) and no VMX,
/// so one image runs on both vendors (AMD APM Vol. 2, chapter 15).
#pragma once

namespace hv {
namespace core {
struct guest_cpu;
class page_pool;
struct tally;
}  // namespace core
namespace lx {
struct linux_state;
}
}  // namespace hv

namespace hv::svm {

/// The SVM backend is the one the boot runs: SVM with nested paging and no VMX (the choice
/// of hv_main and lx::boot, read from CPUID).
bool active();

/// CPUID says SVM with nested paging is there (APM 15.4 "Enabling SVM").
bool available();
/// The guest CPU `g` of this boot: the CPUID policy (SVM and VMX hidden), the MSR policy derived
/// from it and its model; for_linux (the Linux run): with the Linux guest's deny list
/// (lx::denied_features) and the features the run offers; `cpus` cores in the topology (a vCPU
/// per processor). Its result line counted in `t`.
bool build_policy(core::guest_cpu& g, core::tally& t, const lx::linux_state* for_linux = nullptr, unsigned cpus = 1);
/// Brings SVM up with pages of the boot's `pool`, runs every SVM run of the conformance guest
/// `cpu` (its policy built by build_policy) and counts their results in `t`; false if a run failed.
bool run_all(const core::guest_cpu& cpu, core::page_pool& pool, core::tally& t);
/// The exit code counted in the core's slot `s` (svm_internal.hpp: #NPF in 0x9F) and its
/// APM name (Appendix C, Table C-1), for the "HVKIT EXITS" lines.
unsigned exit_slot_code(unsigned s);
const char* exit_slot_name(unsigned s);

}  // namespace hv::svm
