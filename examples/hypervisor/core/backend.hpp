// SPDX-License-Identifier: MIT
/// @file
/// @brief The `backend` concept: what the vendor-neutral core (exit loop and handlers,
/// core/exit_loop.hpp) needs from a vendor. A VMX backend (vmx/vmx_backend.hpp) and an SVM
/// backend (svm/svm.cpp) model it over the current VMCS and VMCB; the core never
/// names a VMCS field or a VMCB offset.
#pragma once

#include <concepts>
#include <cstdint>

#include <hvkit/emulate/context.hpp>
#include <hvkit/emulate/outcome.hpp>
#include <hvkit/emulate/platform.hpp>
#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/cr_write_apply.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/rflags.hpp>
#include <hvkit/x86/vector.hpp>
#include <hvkit/x86/gpr.hpp>

#include "state.hpp"

namespace hv::core {

/// One decoded exit: the vendor-neutral kind and the vendor's counter slot and name.
struct exit_info {
  exit_kind kind;
  unsigned slot;     ///< the vendor's counter slot (VMX basic reason, SVM folded exit code)
  const char* name;  ///< the vendor's name of the exit (for reports)
};

/// An intercepted port access (SDM Vol. 3C Table 28-5 exit qualification; APM 15.10.2
/// EXITINFO1).
struct io_access {
  std::uint16_t port;
  std::uint8_t size;  ///< 1, 2 or 4
  bool in;
  bool string;
};

/// What applying an emulation outcome did (the vendor writes the registers, segments, CRs
/// and the event; the core counts and reports).
enum class applied { done, injected, shutdown, not_applied };

/// The guest's control registers as the guest sees them (read shadows on VMX, the VMCB's
/// values without SVME on SVM) and CR3.
struct guest_crs {
  hvkit::paging::cr_state crs;
  hvkit::x86::cr3 cr3;
};

/// The guest's paging registers at this exit as the CPU uses them (for the paging
/// differentials, differential.cpp): the vendor reads them where it keeps them.
struct paging_regs {
  hvkit::x86::cr0 cr0;
  hvkit::x86::cr4 cr4;
  hvkit::x86::efer efer;
  hvkit::x86::cr3 cr3;
  hvkit::x86::rflags rflags;
};

/// Guest-physical memory as the vendor's second stage maps it (EPT, NPT: identity maps of guest
/// RAM): the page tables the walker reads and the bytes the emulator reads and writes.
struct guest_memory {
  hvkit::paging::flat_memory tables;
  hvkit::emulate::flat_ram data;
};

// clang-format off
template <class B>
concept backend = requires(B& b, hvkit::x86::gpr r, std::uint64_t v, std::uint64_t& out, hvkit::x86::vector vec,
                           std::uint32_t code, bool flag, const char* what, hvkit::emulate::context& ctx,
                           const hvkit::emulate::context& cctx, const hvkit::emulate::outcome& o,
                           hvkit::paging::mmu_actions actions, const hvkit::paging::cr_state& crs,
                           hvkit::x86::cr3 cr3, guest_regs& gprs, hvkit::paging::tlb_flush_scope scope) {
  // ---- the exit and the guest's registers ----
  { b.decode() } -> std::same_as<exit_info>;          ///< what this exit is
  { b.gpr(r) } -> std::same_as<std::uint64_t>;
  { b.rip() } -> std::same_as<std::uint64_t>;
  b.set_gpr(r, v);
  { b.gprs() } -> std::same_as<guest_regs&>;          ///< the block the stub saved (hypercall arguments)
  { b.cpl() } -> std::same_as<unsigned>;
  { b.in_64bit_mode() } -> std::same_as<bool>;        ///< IA-32e mode with CS.L = 1 (SDM Vol. 3A 5.2.1)
  { b.crs() } -> std::same_as<guest_crs>;             ///< guest-visible CR0/CR4/EFER and CR3
  { b.paging_regs() } -> std::same_as<paging_regs>;   ///< the paging registers the CPU walks with
  // ---- acting on the guest ----
  b.skip();                                           ///< RIP past the exiting instruction
  b.inject(vec, code);                                ///< an exception, merged with a pending event
  b.report_exit(what, flag);                          ///< the exit that ended a run (or is unexpected)
  b.set_cr0_wp_intercept(flag);                       ///< CR0.WP writes exit (true) or are the guest's
  // ---- state the vendor keeps: MSRs, EFER, the MMU actions of a paging change ----
  { b.state_msr(code, flag, out) } -> std::same_as<bool>;  ///< MSRs held in the VMCS/VMCB
  b.write_efer(crs);                                  ///< the new guest EFER into the VMCS/VMCB
  /// The MMU actions of a CR/EFER write (paging::cr_write_actions) by hvkit's neutral executor
  /// (paging::apply_mmu_actions, through the vendor's adapter: the PDPTEs go where the vendor
  /// keeps them); true: the MMU role was rebuilt.
  { b.apply_mmu_actions(actions, crs, cr3) } -> std::same_as<bool>;
  // ---- guest memory and the TLB ----
  { b.memory() } -> std::same_as<guest_memory>;       ///< guest-physical memory through the second stage
  b.flush_tlb(scope);                                 ///< the guest's TLB flush a write needs (SDM 4.10.4.1)
  // ---- exits the vendor decodes itself ----
  { b.io() } -> std::same_as<io_access>;              ///< the port access of an io exit
  { b.cr_access() } -> std::same_as<bool>;            ///< CR exit (VMX qualification; SVM: emulated)
  { b.entry_failed() } -> std::same_as<bool>;         ///< diagnosed; true: an erratum handled, resume
  // ---- the emulator ----
  { b.read_context(ctx) } -> std::same_as<bool>;
  { b.apply(cctx, ctx, o) } -> std::same_as<applied>;
  // ---- the differentials' hooks ----
  { b.memory_case() } -> std::same_as<bool>;          ///< a provoked EPT/NPT case or the unmapped page: retry
  { b.during_delivery() } -> std::same_as<bool>;      ///< the memory exit interrupted an event delivery
  { b.fetch_fault() } -> std::same_as<bool>;          ///< the memory exit was an instruction fetch
  { b.misconfig_case() } -> std::same_as<bool>;       ///< a provoked EPT misconfiguration: retry
  { b.second_stage_arm(gprs) } -> std::same_as<std::uint64_t>;
  { b.second_stage_check(gprs) } -> std::same_as<std::uint64_t>;
  { b.unmap_once(v) } -> std::same_as<bool>;
  { b.unmap_report() } -> std::same_as<std::uint64_t>;
  { b.spin_more() } -> std::same_as<bool>;
};
// clang-format on

}  // namespace hv::core
