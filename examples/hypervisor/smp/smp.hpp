// SPDX-License-Identifier: MIT
/// @file
/// @brief The reference hypervisor on every processor of the machine (docs/smp.md, "The
/// reference hypervisor"): the processors the firmware's ACPI MADT lists, each started by the
/// hypervisor's bootstrap processor with INIT and SIPI into a real-mode trampoline below
/// 1 MiB (smp/smp_boot.cpp), each in VMX root operation with its own VMXON region, VMCS,
/// stack and vCPU (VMX), or with EFER.SVME, its own host save area and VMCB (SVM). One vCPU
/// per physical processor; the guest starts its own application processors with INIT and
/// SIPI, virtualized (vmx/vmx_smp.cpp; svm/svm_smp.cpp).
///
/// Per-CPU data is reached without a global: the `machine` and every processor's `cpu` are
/// taken from the boot's page pool (core/page_pool.hpp) by start_processors(); an AP gets its
/// `cpu` from its start block in low memory (the trampoline's data: its stack and the `cpu`,
/// passed to hv_ap_entry in RDI), and every processor then keeps it in its GS base
/// (IA32_GS_BASE, and the VMCS host GS base, which VM exit loads, SDM Vol. 3C 28.5.2): GS:[0]
/// is the `cpu` (its first member points to itself, `this_cpu`), the `machine` is reached from
/// there. What a vendor keeps per processor beyond `cpu` (SVM: svm::cpu_state) it takes from
/// the pool in start_processors()'s `attach`, before the processor starts.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hvkit/emulate/platform.hpp>
#include <hvkit/vmx/vmcs_lifecycle.hpp>
#include <hvkit/x86/init_sipi.hpp>

#include "../core/exit_loop.hpp"
#include "../core/page_pool.hpp"
#include "../core/scheduler.hpp"
#include "../hv.hpp"
#include "../linux/linux.hpp"

namespace hv::svm {
struct cpu_state;  // an SVM processor's VMCB, host save areas, ASIDs (svm/svm_smp.cpp)
}

namespace hv::smp {

inline constexpr unsigned max_cpus = 8;
/// The AP trampoline's page (SIPI vector 0x10: CS = 1000H, IP = 0; SDM Vol. 3A 9.4.4.1). Below
/// the Linux guest's boot structures at 0x20000 and above its GDT/boot_params/command line.
inline constexpr std::uint64_t trampoline_base = 0x10000;

/// A test-and-set spinlock (LOCK XCHG: SDM Vol. 3A 9.1.2.1, XCHG with memory is locked).
struct spinlock {
  volatile std::uint32_t word = 0;
  void lock() noexcept {
    while (__atomic_exchange_n(&word, 1u, __ATOMIC_ACQUIRE) != 0) asm volatile("pause");
  }
  void unlock() noexcept { __atomic_store_n(&word, 0u, __ATOMIC_RELEASE); }
};

struct machine;

/// The second guest of every processor (smp/second_guest.cpp): another VM, with two control
/// blocks (VMCSs or VMCBs) per processor, run for one short slice each every
/// `second_guest_period` exits of the Linux vCPU (Linux, B1, B2, Linux: two cross-guest
/// switches and one within guest 2), so that each processor's IBPB tracker sees switches
/// between guests (docs/smp.md, "IBPB per processor").
struct second_guest_state {
  guest_regs regs[2];
  std::uint64_t slices[2];    ///< slices B1 and B2 ran (each ends at its VMCALL/VMMCALL)
  std::uint64_t excursions;   ///< Linux -> B1 -> B2 -> Linux rounds
  std::uint64_t unexpected;   ///< slices that ended with another exit (reported, the check fails)
  std::uint64_t unexpected_reason;
  std::uint64_t countdown;    ///< Linux exits until the next excursion
  bool ready;                 ///< the control blocks are set up
  bool failed;                ///< an entry failed: no more excursions
  volatile std::uint32_t seq; ///< odd while this processor changes its counts (see report)
};
inline constexpr std::uint64_t second_guest_period = 512;
/// Guest 2's RAM (hypervisor memory the Linux guest's second stage does not map): its 4-level
/// page tables (one 2 MiB page at GPA 0), its code and its counters, GPA 0 to 5 * 4 KiB; and
/// its second stage, four tables of the same 4-level shape for EPT and NPT, mapping those
/// five pages (built by the BSP, shared by every processor).
inline constexpr unsigned second_guest_pages = 5;
inline constexpr std::uint64_t second_guest_code_gpa = 0x3000, second_guest_counters_gpa = 0x4000;
struct second_guest_memory {
  alignas(4096) std::uint8_t ram[second_guest_pages][4096];
  alignas(4096) std::uint64_t second_stage[4][512];
  std::uint64_t root;  ///< the EPTP or nCR3 of guest 2
};
/// Guest 2's identity in the IBPB trackers (the Linux guest is guest 1).
inline constexpr std::uint32_t second_guest_vm = 2;

/// Where a processor is in its bring-up.
enum class cpu_phase : std::uint32_t { off, long_mode, virt_on, guest, failed, stopped };

/// One physical processor and the vCPU it runs.
struct cpu {
  cpu* self;  ///< at offset 0: GS:[0] (this_cpu)
  machine* m;
  unsigned index;
  std::uint32_t apic_id;
  volatile cpu_phase phase;
  /// The vCPU's MP state (x86/init_sipi.hpp): the guest's BSP runs, its APs wait for a SIPI.
  volatile hvkit::x86::mp_state mp;
  /// SVM (machine::virtual_sipi): the start-up IPI another vCPU sent this one while it
  /// waited, 100H | vector, 0 none; the processor, outside its guest until then, starts the
  /// vCPU with it (svm/svm_smp.cpp). Start-up IPIs the hypervisor applied so.
  volatile std::uint32_t pending_sipi;
  std::uint64_t sipis_applied;
  std::uint64_t init_exits, sipi_exits, sipi_vector;
  /// The SIPI exit was this vCPU's last exit: it has not left its start-up state yet.
  bool just_started;
  /// INIT exits right after a SIPI exit, before the vCPU ran: the INIT Bochs held pending
  /// through the wait-for-SIPI state (docs/smp.md, erratum bochs_init_after_sipi); dropped.
  std::uint64_t held_inits;
  /// The guest's ICR writes on this vCPU, the start-up IPIs among them, and the INITs
  /// other vCPUs sent to this one (smp/smp_ipi.cpp).
  std::uint64_t icr_writes, sipis_sent, virtual_inits;
  /// ICR writes through the write-protected xAPIC page (xapic_platform).
  std::uint64_t xapic_writes;
  /// KVM_HC_SEND_IPI hypercalls of this vCPU and the IPIs they delivered.
  std::uint64_t pv_ipi_calls, pv_ipi_targets;
  /// This processor's IBPB tracker (the library's svm::physical_cpu, vmx::physical_cpu): the
  /// barriers it decided, and the VMCB/VMCS switches it saw, within one guest and between guests.
  std::uint64_t ibpb_barriers, switches_same_guest, switches_cross_guest;
  std::uint64_t last_block;  ///< the control block loaded last on this processor (0: none yet)
  std::uint32_t last_vm;     ///< ... and its guest
  /// The second guest's control blocks on this processor and its counts.
  second_guest_state sg;
  /// VMX: the lifecycle model of this processor's VMCSs with its IBPB tracker (a real IBPB
  /// when the host enumerates it), the Linux vCPU's VMCS and the second guest's two; the run
  /// state vmx_enter and the exit stub carry for the second guest's entries.
  hvkit::vmx::physical_cpu<core::counting_barrier> vmx_pcpu{0, hvkit::x86::ibpb_policy::skip_same_guest, {}};
  hvkit::vmx::vmcs_state vmcs_linux{}, vmcs_sg[2]{};
  run_state sg_st;
  /// Exits whose saved interruptibility state said "blocking by SMI" outside SMM (Bochs,
  /// after the wait-for-SIPI state; erratum bochs_smi_blocking_after_sipi): cleared.
  std::uint64_t smi_blocking_cleared;
  std::uint64_t tsc_started;  ///< host TSC when the guest's SIPI started this vCPU
  /// The vCPU (core::vcpu_state), its check counters and VMX CR masks.
  run_state st;
  /// What the Linux guest profile keeps per vCPU.
  lx::vcpu_data lx;
  /// SVM: this processor's VMCB, host save areas and ASID allocator (pages of the boot's pool:
  /// set by the vendor's `attach` of start_processors, before the processor starts).
  svm::cpu_state* svm;
  alignas(4096) std::uint8_t vmxon[4096];
  alignas(4096) std::uint8_t vmcs[4096];
  alignas(4096) std::uint8_t sg_vmcs[2][4096];  ///< VMX: the second guest's VMCSs
  alignas(16) std::uint8_t stack[32768];
};

/// The xAPIC page of an IA32_APIC_BASE value: bits MAXPHYADDR-1:12 (SDM Vol. 3A 11.4.4,
/// Figure 11-5; the bits above MAXPHYADDR are reserved, so 51:12 is enough here).
[[nodiscard]] constexpr std::uint64_t xapic_page_of(std::uint64_t ia32_apic_base) noexcept {
  return ia32_apic_base & 0x000F'FFFF'FFFF'F000ull;
}

/// Every processor the hypervisor runs on.
struct machine {
  cpu* cpus;
  unsigned count;
  /// The local APICs' xAPIC page, from the BSP's IA32_APIC_BASE at start (the firmware's; the
  /// MSR is passed through to the guest, so it is the guest's base too). Not the default
  /// FEE00000H by assumption: the hypervisor's own INIT/SIPI, the guest's write-protected
  /// xAPIC page and its emulated writes all use it. A guest that moved its APIC base later
  /// (WRMSR 1BH is not intercepted; Linux does not move it) would leave the page behind.
  std::uint64_t xapic_base;
  /// What every AP runs once in VMX root operation (SVM enabled); set (before `go`) by the
  /// BSP once the shared state (EPT or NPT, policies, bitmaps) is built.
  void (*ap_run)(cpu&);  ///< does not return
  /// What every AP runs first: VMX root operation or SVM enabled on it (start_processors).
  bool (*ap_enable)(cpu&);
  /// SVM: no guest wait-for-SIPI state, so the guest's start-up IPI is not sent on the
  /// physical APIC but given to the target's `cpu` (smp/smp_ipi.cpp).
  bool virtual_sipi;
  /// The guest's xAPIC page is mapped read-only by the second stage: its writes are #NPF exits
  /// for xapic_platform (a processor without x2APIC, where the ICR is a memory register).
  bool xapic_write_protected;
  second_guest_memory sg;  ///< guest 2 (smp/second_guest.cpp)
  volatile std::uint32_t go;
  volatile std::uint32_t finished;  ///< the first processor whose vCPU stopped reports
  spinlock lock;              ///< the shared parts of a guest profile (its log line)
  const host_tables* host;    ///< the BSP's GDT, IDT and TSS, which every AP loads (hv_ap_entry)
};

/// This processor's `cpu` (GS:[0]).
[[nodiscard]] inline cpu& this_cpu() noexcept {
  cpu* c;
  asm volatile("mov %%gs:0, %0" : "=r"(c));
  return *c;
}

/// The bootstrap processor: finds the processors in the ACPI MADT (enabled local APICs),
/// takes the `machine` and a `cpu` per processor from `pool`, gives each processor what
/// `attach` takes for it from `pool` (a vendor's per-processor pages; null: nothing), sets up
/// its own `cpu` (index 0, GS base) and starts every other processor with INIT-SIPI-SIPI (SDM
/// Vol. 3A 9.4.4.1); each runs `ap_main`, `enable` (VMX root operation, or SVM enabled) and
/// then waits for `go`. Returns the machine (count >= 1). Once per boot.
machine& start_processors(core::page_pool& pool, bool (*enable)(cpu&),
                          void (*attach)(cpu&, core::page_pool&) = nullptr);
/// An AP's work after its start: `enable`, wait for go, then its vCPU (smp/smp_boot.cpp).
[[noreturn]] void ap_main(cpu& c);

// ---- VMX (vmx/vmx_smp.cpp) ------------------------------------------------------------------
/// VMX root operation on this processor with its own VMXON region (SDM Vol. 3C 24.7).
bool vmx_on(cpu& c);
/// VMCLEAR + VMPTRLD of the processor's VMCS (SDM Vol. 3C 25.11.3).
bool load_vmcs(cpu& c);
/// The guest state of x86::reset_state in the current VMCS (real mode: unrestricted guest),
/// with the activity state; the vCPU's EFER and MMU context follow.
void write_reset_state(cpu& c, const hvkit::x86::reset_state& s, hvkit::vmx::activity_state a);
/// The INIT (reason 3) and SIPI (reason 4) exits of the vCPU (SDM Vol. 3C 26.2), through
/// vmx::on_exit: INIT loads the post-INIT state and waits for a SIPI, SIPI starts the vCPU at
/// vector << 12. False: not an INIT/SIPI exit.
bool handle_init_sipi(cpu& c, hvkit::vmx::exit_reason r);
/// Before VM entry of an AP's vCPU: "blocking by SMI" (interruptibility bit 2) is cleared
/// outside SMM, where VM entry refuses it (SDM Vol. 3C 27.3.1.5).
void fix_smi_blocking(cpu& c);

/// A guest WRMSR to the x2APIC ICR (830H) on vCPU `from` (smp/smp_ipi.cpp): INIT applied to
/// the target vCPUs, with machine::virtual_sipi the start-up IPI too, every other IPI sent
/// on the physical x2APIC; #GP for reserved bits.
core::msr_hook icr_write(cpu& from, std::uint64_t v);

/// The guest's writes to its xAPIC page (machine::xapic_write_protected: the second stage maps
/// it read-only), executed by hvkit::emulate with this platform: an ICR write as icr_write()
/// does it, every other register written on the processor's own xAPIC (smp/smp_ipi.cpp).
/// `foreign`: the instruction touched another device address (not emulated).
struct xapic_platform : hvkit::emulate::null_platform {
  cpu* from;
  bool foreign = false;
  bool mmio_read(hvkit::x86::gpa a, unsigned size, std::uint64_t& out);
  bool mmio_write(hvkit::x86::gpa a, unsigned size, std::uint64_t v);
};

/// KVM_HC_SEND_IPI (a0..a3 = RBX, RCX, RDX, RSI) of vCPU `from`: decoded by
/// x86::pv_ipi::decode_send_ipi, each destination delivered as the ICR write of the same IPI
/// would be; RAX's value (the count delivered, or -KVM_EINVAL). `long_mode`: the caller's
/// 64-bit mode (its bitmap words are 64 bits wide).
std::uint64_t send_ipi_hypercall(cpu& from, std::uint64_t a0, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3,
                                 bool long_mode);

// ---- the second guest (smp/second_guest.cpp) ------------------------------------------------
/// Writes guest 2's page tables and code: `inc qword [rbx]` then VMCALL (VMX) or VMMCALL
/// (SVM); RBX = its counter for (processor, block). Once, by the BSP, before `go`; the
/// vendor builds m.sg.second_stage and m.sg.root (vmx_second_guest_ept, svm's).
void second_guest_init(machine& m, bool vmx);
/// VMX: guest 2's EPT over its five pages, m.sg.root its EPTP (vmx/vmx_smp.cpp).
bool vmx_second_guest_ept(machine& m);
/// The counter guest 2 increments in block `j` of processor `c` (its GPA, and the value).
std::uint64_t second_guest_counter_gpa(const cpu& c, unsigned j);
std::uint64_t second_guest_counter(const cpu& c, unsigned j);
/// Counts a Linux exit; true when an excursion is due on this processor.
bool second_guest_due(cpu& c);
/// The IBPB-switch bookkeeping of one control-block load on `c`: identity (block, guest).
void note_control_block_switch(cpu& c, std::uint64_t block, std::uint32_t vm);
/// Each processor's IBPB line and the check: barriers = 1 + cross-guest switches
/// (skip_same_guest), every processor with same- and cross-guest switches, guest 2's counters
/// equal to its slices, no unexpected exit (counted in `t`, the boot's results).
void report_ibpb(machine& m, core::tally& t);
/// VMX: one excursion on this processor from a Linux exit (vmx/vmx_smp.cpp); the Linux
/// VMCS is current again afterwards, its registers already flushed.
void vmx_second_guest_excursion(cpu& c);
/// VMX: an exit of the second guest (the exit stub's run_state is c.sg_st): recorded, the
/// entry returns (false).
bool vmx_second_guest_exit(cpu& c, std::uint32_t basic_reason);

/// The core::context of this processor's vCPU (its CPUID and MSR policies: the vCPU's guest CPU).
[[nodiscard]] inline core::context context_of(cpu& c) { return {c.st, c.st, c.st.cpu->cpuid, c.st.cpu->msrs}; }

}  // namespace hv::smp
