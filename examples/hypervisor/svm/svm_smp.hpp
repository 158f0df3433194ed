// SPDX-License-Identifier: MIT
/// @file
/// @brief The SVM backend on every processor (svm/svm_smp.cpp): what one processor owns
/// (its VMCB, VM_HSAVE_PA area, the host's VMSAVE area, its ASID allocator and IBPB
/// tracker) and the start of an application processor's vCPU by the guest's start-up IPI.
/// Internal to examples/hypervisor/svm.
#pragma once

#include <cstdint>

#include <hvkit/svm/vcpu_asid.hpp>
#include <hvkit/x86/init_sipi.hpp>

#include "svm_internal.hpp"

namespace hv::smp {
struct cpu;
}

namespace hv::svm {

/// The IBPB barrier of a processor's tracker (svm::physical_cpu decides when): counted, and a
/// real WRMSR to IA32_PRED_CMD where CPUID Fn8000_0008:EBX[12] enumerates IBPB.
struct counted_ibpb {
  std::uint64_t* count = nullptr;
  bool real = false;
  void operator()() const noexcept {
    if (count) ++*count;
    if (real) hvkit::x86::pred_cmd_barrier{}();
  }
};

/// One processor under SVM: pages of the boot's pool, given to the processor (smp::cpu::svm)
/// by the bootstrap processor before the processor runs its vCPU.
struct cpu_state {
  svm_host* host = nullptr;  ///< the boot's SVM host: the features, the ASIDs the VMCBs start with
  sv::vmcb_page page{};
  alignas(4096) std::uint8_t hsave[4096]{};      ///< VM_HSAVE_PA: what VMRUN saves of the host
  alignas(4096) std::uint8_t host_save[4096]{};  ///< VMSAVE/VMLOAD of the host's own state
  vmcb_slot slot;
  sv::physical_cpu<counted_ibpb> pcpu{0, 2, false, sv::ibpb_policy::skip_same_guest};
  sv::vcpu_asid asid{};
  const vmcb_slot* last = nullptr;  ///< the VMCB this processor ran last
  /// Guest 2's two VMCBs on this processor and their ASIDs (smp/second_guest.cpp).
  sv::vmcb_page sg_page[2]{};
  vmcb_slot sg_slot[2];
  sv::vcpu_asid sg_asid[2]{};
  constexpr cpu_state() noexcept : slot(page), sg_slot{vmcb_slot{sg_page[0]}, vmcb_slot{sg_page[1]}} {}
  cpu_state(const cpu_state&) = delete;
  cpu_state& operator=(const cpu_state&) = delete;
};

/// A cpu_state for `c` from `pool`, set in c.svm: smp::start_processors' `attach`, on the
/// bootstrap processor before `c` starts (prepare_svm sets its `host` before `go`).
void attach(smp::cpu& c, core::page_pool& pool);
/// An application processor at its start: SVM enabled (APM 15.4).
bool enable_ap(smp::cpu& c);
/// After the BSP's svm::enable() (the host's SVM features known), on processor `c`: its own
/// host save area (VM_HSAVE_PA is per processor, APM 15.30.4), clean-bit tracker, ASID
/// allocator and IBPB tracker.
void start_cpu(smp::cpu& c);
/// The register state `s` (x86::reset_state, e.g. after INIT and SIPI) in the current VMCB
/// and the vCPU's core state.
void write_reset_state(smp::cpu& c, const x86::reset_state& s);
/// Waits outside the guest until another vCPU's start-up IPI arrives; its vector.
std::uint32_t wait_for_sipi(smp::cpu& c);
/// Before each VMRUN: the ASID and TLB_CONTROL from this processor's allocator, the IBPB
/// decision of its tracker (svm/vcpu_asid.hpp).
void prepare_vmrun(smp::cpu& c);
/// One VMRUN of the processor's VMCB.
void vmrun_on(smp::cpu& c);
/// Guest 2's nested page table over its five pages (smp/second_guest.cpp), m.sg.root its nCR3.
void second_guest_npt(smp::machine& m);
/// One excursion of processor `c` into guest 2 (B1, B2, one slice each) after a Linux exit; the
/// next prepare_vmrun/vmrun_on is the Linux vCPU's again.
void second_guest_excursion(smp::cpu& c);

}  // namespace hv::svm
