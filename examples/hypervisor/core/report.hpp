// SPDX-License-Identifier: MIT
/// @file
/// @brief The vendor-neutral pieces of the core that are not templates (core/core.cpp):
/// reporting, guest memory, the MMIO test device, the measured sections and the per-run
/// result lines that both backends print the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hvkit/cpuid/guest_cpu_model.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/emulate/context.hpp>
#include <hvkit/emulate/platform.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/walker.hpp>

#include "../console.hpp"
#include "../layout.hpp"
#include "state.hpp"

namespace hv {

// ---- reporting (util.cpp) ---------------------------------------------------------------
namespace core {
/// The boot's results: what "HVKIT SUMMARY" and "HVKIT DONE" are computed from. One per boot,
/// the boot entry's (hv_main, lx::boot), reached through the run's checks
/// (check_counters::tally) or handed to the bring-up code by reference.
struct tally {
  int pass, fail;
  int errata;  ///< distinct CPU errata met (each counted once, when first seen)
};
}  // namespace core
bool str_eq(const char* a, const char* b);
/// Prints one "HVKIT RESULT <name> PASS|FAIL <details>" line and counts it in `t`.
void result(core::tally& t, const char* name, bool pass, const char* fmt = nullptr, ...)
    __attribute__((format(printf, 4, 5)));
/// Prints milli-units as "<int>.<3 digits>".
struct milli {
  unsigned long long whole, frac;
};
milli ratio(std::uint64_t num, std::uint64_t den);
bool read_guest_string(std::uint64_t gpa, char* buf, std::size_t size);

}  // namespace hv

namespace hv::core {

const char* status_name(run_status s);
/// "<prefix><name>" into `out`, cut to fit.
template <std::size_t N>
void join(char (&out)[N], const char* a, const char* b, const char* c = "") {
  std::size_t n = 0;
  for (const char* s : {a, b, c})
    for (const char* p = s; *p && n < N - 1; ++p) out[n++] = *p;
  out[n] = '\0';
}

// ---- guest memory ---------------------------------------------------------------------------
/// Guest RAM `r` (the vCPU's, vcpu_state::ram) as hvkit::paging sees it: both second stages
/// (EPT, NPT) are identity maps of it; anything outside is "unbacked" for the walker.
hvkit::paging::flat_memory guest_ram_view(const guest_ram_range& r);
/// Guest RAM `r` for the emulator's data accesses.
hvkit::emulate::flat_ram guest_ram_data(const guest_ram_range& r);
/// `size` bytes of guest RAM `r` at `gpa`, or nullptr if they are not all inside it.
std::uint8_t* guest_ram(const guest_ram_range& r, std::uint64_t gpa, std::uint64_t size);
/// MAXPHYADDR and 1-GByte pages of the guest CPU model `m` (the walker's view of the guest).
hvkit::paging::cpu_properties guest_cpu_properties(const hvkit::cpuid::guest_cpu_model& m);
/// The host processor's MAXPHYADDR (CPUID.80000008H:EAX[7:0], 36 without the leaf: SDM 4.1.4):
/// the width of the hypervisor's own addresses, its EPT/NPT entries and VMCS/VMCB pointers.
unsigned host_maxphyaddr();

/// The guest CPU model of the guest's CPUID policy (hvkit's one copy of the CR4/EFER gates and
/// of MAXPHYADDR: cpuid::make_guest_cpu_model), its CR4 bits limited to `cpu`, those the
/// processor lets a guest have (VMX: IA32_VMX_CR4_FIXED1, SDM Vol. 3D A.8; SVM: every defined bit).
hvkit::cpuid::guest_cpu_model guest_cpu_model(const hvkit::cpuid::policy& policy, hvkit::x86::cr4 cpu);
/// The rest of the guest CPU `g` once its CPUID policy is built: the MSR policy derived from it
/// and its model (CR4 bits limited to `cpu`); true if the two policies are consistent
/// (cpuid::check_consistency).
bool complete_guest_cpu(guest_cpu& g, hvkit::x86::cr4 cpu);

// ---- the MMIO test device and unassigned guest-physical space ----------------------------
std::uint64_t device_read(context& c, std::uint64_t offset, unsigned size);
void device_write(context& c, std::uint64_t offset, unsigned size, std::uint64_t v);

/// The emulator's platform: the test device, and every other non-RAM guest-physical address
/// as unassigned (reads all ones, writes dropped; the first four of each logged).
struct platform : hvkit::emulate::null_platform {
  context* c;
  bool mmio_read(hvkit::x86::gpa a, unsigned size, std::uint64_t& out);
  bool mmio_write(hvkit::x86::gpa a, unsigned size, std::uint64_t v);
};

/// The translator the emulator walks guest page tables with: emulate::walker_translator over
/// the run's mmu_context, with the CR0.WP passthrough refresh counted, or skipped in the
/// negative-control run (the stale role of the KVM bug).
struct translator {
  hvkit::emulate::walker_translator<hvkit::paging::flat_memory> inner;
  context* c;
  bool refresh_passthrough_bits(hvkit::x86::cr0 live);
  hvkit::paging::walk_result walk(const hvkit::paging::walk_request& req) { return inner.walk(req); }
};

// ---- hypercalls and the measured sections ------------------------------------------------
/// hc::mark_end: the section's exits since hc::mark_begin against what the run expects.
void print_section(context& c, const char* name, std::uint64_t ops, std::uint64_t guest_mismatch,
                   std::uint64_t guest_tsc);
/// hc::result: a guest check's verdict as a result line (or evidence, or an erratum).
void guest_result(context& c, const guest_regs& r);
/// hc::log.
void guest_log(const guest_regs& r);
/// hc::unexpected.
void guest_exception(const guest_regs& r);

// ---- the end of a run -----------------------------------------------------------------------
/// The results every run prints the same way on both vendors: device and MMU counts, the
/// paging differentials, the negative control and the MMU sync, the run's status.
/// `nested_pdptes`: MOV to CR3 loads no PDPTEs (SVM nested paging), a reserved PDPTE is the
/// walk's #PF.
void report_run(context& c, bool nested_pdptes);
/// The run's status against the expected one ("run.<name>"), and the hypervisor's image
/// untouched (the second stage does not map it). Printed last; true if as expected.
bool report_status(context& c);

}  // namespace hv::core
