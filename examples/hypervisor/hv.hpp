// SPDX-License-Identifier: MIT
/// @file
/// @brief Shared state and declarations of the reference hypervisor's translation units:
/// hypervisor.cpp (runs, main), core/ (the vendor-neutral exit loop and handlers),
/// vmx/vmx_setup.cpp (VMX bring-up, VMCS), vmx/vmx.cpp (the VMX backend of the core),
/// differential.cpp (the CPU-as-oracle runs), vmx/scheduler.cpp (the VMX vendor of
/// core/scheduler.hpp's two guests and the IBPB policy), util.cpp (reporting); svm/ is the
/// SVM backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hvkit/emulate/context.hpp>
#include <hvkit/emulate/emulator.hpp>
#include <hvkit/emulate/outcome.hpp>
#include <hvkit/emulate/platform.hpp>
#include <hvkit/emulate/vmcs_context.hpp>
#include <hvkit/cpuid/features.hpp>
#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/kvm.hpp>
#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/vmx/capabilities.hpp>
#include <hvkit/vmx/controls.hpp>
#include <hvkit/vmx/cr_access.hpp>
#include <hvkit/vmx/cr_mask.hpp>
#include <hvkit/vmx/cr_write_apply.hpp>
#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/ept_entry.hpp>
#include <hvkit/vmx/exit_qualification.hpp>
#include <hvkit/vmx/exit_reason.hpp>
#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/guest_context.hpp>
#include <hvkit/vmx/ibpb.hpp>
#include <hvkit/vmx/register_file.hpp>
#include <hvkit/vmx/reinjection.hpp>
#include <hvkit/vmx/skip.hpp>
#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/xcr0.hpp>
#include <hvkit/x86/rflags.hpp>
#include <hvkit/x86/address.hpp>
#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/guest_owned.hpp>
#include <hvkit/x86/msr.hpp>
#include <hvkit/x86/pfec.hpp>

#include "console.hpp"
#include "hypercall.hpp"
#include "layout.hpp"

#include "vmx/vmx_glue.hpp"
#include "core/backend.hpp"
#include "core/page_pool.hpp"
#include "core/report.hpp"
#include "core/state.hpp"


namespace hv {
struct vmx_host;
}

extern "C" {
extern const unsigned char guest_blob_start[], guest_blob_end[];
extern const unsigned char guest32_blob_start[], guest32_blob_end[];
extern const std::uint64_t host_isr_table[32];
extern std::uint32_t boot_multiboot_magic;
/// Enters the guest of `st` with the registers `regs` (its own, or a second VMCS's); every exit
/// is hv_handle_exit(regs, st, host) until it says stop.
int vmx_enter(hv::vmx::guest_regs* regs, int launched, hv::core::run_state* st, const hv::vmx_host* host);
void vmx_exit_stub();
[[noreturn]] void hv_main();
int hv_handle_exit(hv::vmx::guest_regs* regs, hv::core::run_state* st, const hv::vmx_host* host);
[[noreturn]] void hv_host_exception(const std::uint64_t* frame);
}

namespace hv {

using namespace vmx;
namespace em = hvkit::emulate;
namespace pg = hvkit::paging;
namespace cpuid_ns = hvkit::cpuid;

namespace x86 = hvkit::x86;
// ---- configuration ----------------------------------------------------------------------
/// Guest-owned CR bits come from hvkit's policy (x86/guest_owned.hpp): a guest_owned_set
/// that would hand the guest a bit feeding the MMU role other than CR0.WP does not compile.
/// With EPT the guest owns CR0.TS and CR0.WP and the CR4 bits that never affect
/// translation; every other bit (CR4.VMXE in particular) is host-owned. A bit clear in the
/// guest/host mask is guest-owned (SDM Vol. 3C 25.6.6).
using policy_wp_guest_owned = x86::guest_owned_set<x86::cr0::ts | x86::cr0::wp,
                                                   x86::cr4_possible_guest_owned>;
/// The configuration switch: the same policy with CR0.WP intercepted, so every WP toggle is
/// a CR-access exit (SDM Vol. 3C 26.1.3: MOV to CR0 exits when it would change a bit set
/// in the mask away from the read shadow).
using policy_wp_intercepted = x86::guest_owned_set<x86::cr0::ts, x86::cr4_possible_guest_owned>;

using core::run_config;
using core::run_status;

// ---- the host's tables and VMX pages (vmx/vmx_setup.cpp) ------------------------------
/// The hypervisor's GDT (0x08 code, 0x10 data, 0x18 a 64-bit TSS), IDT (vectors 0-31) and TSS:
/// taken once per boot from the boot's page pool (setup_host_tables). The GDT is first, so
/// that a processor finds the block through its GDTR (current_host_tables()).
struct host_tables {
  std::uint64_t gdt[6];
  std::uint64_t idt[64];
  std::uint8_t tss[104];
};
static_assert(offsetof(host_tables, idt) % 16 == 0 && offsetof(host_tables, tss) % 16 == 0);

/// VMX on this boot: the capability MSRs, read once (hvkit::vmx::vmx_capabilities: TRUE_* and
/// secondary/EPT MSRs only where the architecture says they exist, SDM Vol. 3D A.1-A.10), and
/// the conformance boot's pages, taken from its pool (take_vmx_pages; nullptr in the Linux
/// boot, whose EPT is its own). Built by the boot entry at bring-up, handed down by reference;
/// every VM exit gets it from vmx_enter.
struct vmx_host {
  hvkit::vmx::vmx_capabilities caps;
  std::uint8_t* vmxon;
  std::uint8_t* vmcs;     ///< guest A
  std::uint8_t* vmcs_a2;  ///< guest A, second VMCS (vmcs02 stand-in)
  std::uint8_t* vmcs_b;   ///< guest B
  /// Guest RAM's identity EPT (build_ept) and the PSE-36 alias: GPA 4 GiB + [28 MiB, 32 MiB)
  /// -> HPA 28 MiB.
  std::uint64_t *ept_pml4, *ept_pdpt, *ept_pd, *ept_pd_alias;
  std::uint64_t eptp;
  /// Guest B's EPT: GPA 16 MiB (2 MiB) -> HPA 48 MiB (vmx/scheduler.cpp).
  std::uint64_t *ept_b_pml4, *ept_b_pdpt, *ept_b_pd;
  /// The 4-KByte split of one 2-MByte page (vmx/vmx.cpp, hc::ept_unmap_once).
  std::uint64_t* ept_unmap_pt;
  /// The EPT differential's alias of the scratch area (differential.cpp).
  std::uint64_t *ept_alias_pdpt, *ept_alias_pd, *ept_alias_pt;
  /// Shadow paging (run --shadow): the conformance vCPU's shadow MMU (core/shadow_paging.hpp).
  core::shadow::vcpu_mmu* shadow;
};

// ---- the guest CPU and the runs ------------------------------------------------------------
// The boot's guest CPU (core::guest_cpu: the CPUID policy, the MSR policy derived from it, one
// source for both, docs/background.md §2, and the guest CPU model) is hv_main's (or
// lx::boot's), handed by reference to the builders and to every vCPU (vcpu_state::cpu).

/// One vCPU's state and its checks' counters (core/state.hpp), owned by the run that runs it.
using core::run_state;
/// The vCPU and the checks of a run that owns `st` (with its guest CPU's CPUID and MSR policies).
inline core::context context_of(run_state& st) { return {st, st, st.cpu->cpuid, st.cpu->msrs}; }


struct run_summary {
  bool ok;
  std::uint64_t toggles, cr_exits, mismatch, tsc;
};

/// The guest's registers for one exit: GPRs in the stub's save area, RSP/RIP/RFLAGS in the
/// current VMCS (hvkit::vmx::register_file).
using vcpu = hvkit::vmx::register_file<hvkit::vmx::hw::current_vmcs>;

// ---- helpers ---------------------------------------------------------------------------
/// VMWRITE through hvkit::vmx (typed field, hardware backend). Values are computed in
/// 64 bits here; the narrowing to the field's own width is explicit and checked.
template <std::uint32_t E>
void vmwrite(hvkit::vmx::field<E> f, std::uint64_t v) {
  using T = typename hvkit::vmx::field<E>::value_type;
  if (v & ~hvkit::vmx::value_mask(E))
    kprintf("HVKIT ERROR vmwrite field=0x%x value=0x%llx does not fit the field\n", E, (unsigned long long)v);
  hvkit::vmx::hw::current_vmcs vmcs;
  auto r = hvkit::vmx::vmwrite(vmcs, f, static_cast<T>(v));
  if (!r)
    kprintf("HVKIT ERROR vmwrite field=0x%x value=0x%llx failed (VM-instruction error %u)\n", E,
            (unsigned long long)v, static_cast<unsigned>(r.error().error));
}

// ---- VMX bring-up and the VMCS (vmx/vmx_setup.cpp) ----------------------------------------
namespace lx {
struct linux_state;
}
/// The host tables, taken from `pool` and loaded (with TR): once per boot, by its entry.
host_tables& setup_host_tables(core::page_pool& pool);
/// GDTR, IDTR, the segment registers and (load_tr) TR from `t`.
void load_host_tables(const host_tables& t, bool load_tr);
/// The host tables this processor uses (its GDTR's base: load_host_tables() loaded it, and
/// every VM exit loads it again from the VMCS host-state area, SDM Vol. 3C 28.5.2).
host_tables& current_host_tables();
/// The capability MSRs into `h` (printed).
void read_capabilities(vmx_host& h);
/// The conformance boot's VMXON region, VMCSs and EPT tables, from `pool`.
void take_vmx_pages(vmx_host& h, core::page_pool& pool);
/// The guest CPU `g` of this boot: for_linux (the Linux run) the Linux guest's policy
/// (linux/linux.cpp), with the features that policy denies and those the run offers; cpus: the vCPUs (CPUID topology: that many cores in one package).
bool build_cpuid_policy(core::tally& t, const vmx_host& h, core::guest_cpu& g,
                        const lx::linux_state* for_linux = nullptr, unsigned cpus = 1);
bool enable_vmx(core::tally& t, const vmx_host& h);
bool build_ept(core::tally& t, vmx_host& h);
/// The conformance guest's image (or the 32-bit guest's, or `profile`'s in its place); a
/// profile's header is written to `profile_header`.
const hc::guest_header* load_guest(core::tally& t, hc::guest_header& profile_header, bool guest32 = false,
                                   const core::guest_profile* profile = nullptr);
bool setup_vmcs(const vmx_host& h, const hc::guest_header& g, core::run_state& vs);
/// Pieces of a VMCS both guests (the conformance guest, the Linux guest) fill the same way.
void write_common_controls(std::uint64_t eptp);
/// A control word adjusted to the CPU's capabilities (vmx::adjust_controls).
template <class C>
using vmx_controls = hvkit::result<C, hvkit::vmx::control_error<C>>;
/// The five control words, each checked (a required bit the CPU lacks is reported as a
/// failed vmcs_controls result: false), written, then write_common_controls(eptp).
bool write_controls(core::tally& t, const vmx_controls<hvkit::vmx::pin_based>& pin, const vmx_controls<hvkit::vmx::primary_proc_based>& proc,
                    const vmx_controls<hvkit::vmx::secondary_proc_based>& proc2,
                    const vmx_controls<hvkit::vmx::exit_controls>& exitc,
                    const vmx_controls<hvkit::vmx::entry_controls>& entry, std::uint64_t eptp);
bool write_guest_crs(const vmx_host& h, const hvkit::vmx::guest_owned_bits& owned, x86::cr0 cr0, x86::cr4 cr4, std::uint64_t cr3);
/// The host state (of the processor that runs it: its host tables, CRs, EFER, PAT).
void write_host_state(bool with_pat);
/// A flat protected-mode or long-mode guest's first state.
struct flat_guest {
  std::uint16_t cs, ds, tr;
  bool long_mode;
  std::uint64_t tss_base, gdt_base, gdt_limit, idt_base, idt_limit, rsp, rip;
  x86::efer efer;
};
void write_flat_guest_state(const flat_guest& g);
hvkit::paging::cr_state current_cr_state();

// ---- the Linux guest's VMX part (vmx/vmx_linux.cpp) ---------------------------------------
namespace smp {
struct cpu;
}
/// The Linux boot's VMX capabilities, as processor `c` reaches them.
const vmx_host& vmx_host_of(const smp::cpu& c);

// ---- the VMX backend (vmx/vmx.cpp) -------------------------------------------------------------------
void report_exit(const char* what, bool expected = false);
unsigned guest_cpl();
using core::guest_cpu_properties;
using core::guest_ram;
using core::guest_ram_view;

// ---- the CPU as the oracle (differential.cpp) -------------------------------------------
/// The guest's paging registers at an exit (core::backend::paging_regs()).
using guest_paging_regs = core::paging_regs;
/// The VMX backend's: from the current VMCS.
guest_paging_regs vmcs_paging_regs(const core::vcpu_state& st);
void handle_ept_arm(const vmx_host& h, core::check_counters& k, const cpuid_ns::guest_cpu_model& model, guest_regs& r);
std::uint64_t handle_ept_check(const vmx_host& h, core::check_counters& k, guest_regs& r);
bool ept_case_violation(const vmx_host& h, core::check_counters& k);
bool ept_case_misconfig(const vmx_host& h, core::check_counters& k);
void ept_scratch_split(const vmx_host& h, bool on);

// ---- the CPU as the oracle for the VM-entry checks (vmx/entry_diff.cpp) ---------------------
bool entry_diff_run(core::tally& t, const vmx_host& h, core::page_pool& pool, const core::guest_cpu& cpu);
/// What hvkit::vmx::check_vm_entry says about the current VMCS: the failing check, its SDM
/// section and the fields involved (printed when a VM entry fails).
void print_vm_entry_diagnosis(const vmx_host& h, const char* context);

// ---- two guests and IBPB (core/scheduler.hpp over vmx/scheduler.cpp) ---------------------
int run_scheduled(const vmx_host& h, const hc::guest_header& g, run_state& st);

}  // namespace hv
