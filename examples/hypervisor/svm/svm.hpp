// SPDX-License-Identifier: MIT
/// @file
/// @brief The SVM (AMD-V) backend of the reference hypervisor: chosen at boot when CPUID
/// reports SVM (CPUID 8000_0001h:ECX[2]) with nested paging (8000_000Ah:EDX[0]) and no VMX,
/// so one image runs on both vendors (AMD APM Vol. 2, chapter 15).
#pragma once

namespace hv {
namespace core {
struct guest_cpu;
}
}

namespace hv::svm {

/// The SVM backend is the one running (set by run_all()).
bool active();

/// CPUID says SVM with nested paging is there (APM 15.4 "Enabling SVM").
bool available();
/// Brings SVM up, runs every SVM run and prints their results; false if a run failed.
bool run_all(core::guest_cpu& cpu);
/// The VMRUN consistency-check differential (vmrun_diff.cpp): hvkit's checks against the CPU.
bool vmrun_diff_run();
/// The exit code counted in the core's slot `s` (svm_internal.hpp: #NPF in 0x9F) and its
/// APM name (Appendix C, Table C-1), for the "HVKIT EXITS" lines.
unsigned exit_slot_code(unsigned s);
const char* exit_slot_name(unsigned s);
/// An EXITCODE of 0xFFFF_FFFF (QEMU TCG's 32-bit VMEXIT_INVALID, svm.cpp): counted as that
/// erratum, returned as the APM's -1.
unsigned long long note_exitcode_32bit(unsigned long long raw);

}  // namespace hv::svm
