// SPDX-License-Identifier: MIT
/// @file
/// @brief What a vCPU core calls to run a guest on the shadow MMU (no EPT/NPT): one call per
/// exit kind, each returning what to do next (resume on a host root after a host TLB flush,
/// inject, or the emulated instruction's outcome). Vendor-neutral: the caller reads the exit
/// (VMX: exit qualification / SVM: EXITINFO) and applies the answer (VMCS / VMCB).
///
/// | exit | call | then |
/// |---|---|---|
/// | #PF (exception 14 intercepted) | shadow_page_fault() | `resume`: flush, run on `root`; `inject`: #PF `fault` (CR2 = `fault.linear`); `emulated`: act on `emulated` |
/// | MOV to CR0/CR4/CR3, CLTS, LMSW, WRMSR EFER (evaluated by paging::evaluate_cr_write(..., shadow)) | shadow_cr_write() | `resume` on `root` after `flush`, or `gp`: inject #GP(0) and change nothing |
/// | an emulated instruction that wrote a CR (outcome event::cr_write) | shadow_cr_write() with shadow_cr_outcome() | as above |
/// | INVLPG, INVPCID | paging::shadow::invlpg() / invpcid() | nothing to do (the shadow never holds a stale translation) |
///
/// What the core must intercept and load is the library's shadow-paging CR ownership policy:
/// CR0/CR4 bits outside x86::guest_ownable_cr0/cr4(x86::paging_kind::shadow) (VMX:
/// vmx::make_guest_owned({.ept = false}); SVM: svm::make_cr_intercepts({.npt = false})), MOV
/// to CR3 (VMX "CR3-load exiting"; SVM CR3 write), #PF (VMX exception bitmap bit 14 with
/// PFEC mask = match = 0; SVM exception 14), INVLPG, INVPCID, and writes to IA32_EFER; while
/// the guest runs, the real CR3 is the shadow root, the real CR0/CR4/EFER those of
/// paging::shadow::host_role() (CR0.WP = 1; the guest's SMEP, SMAP, PKE, PKS; LA57 for a
/// 5-level guest; EFER.NXE = 1), the guest keeps its CPL, RFLAGS.AC, PKRU and IA32_PKRS.
/// docs/shadow-mmu.md walks through it with an example.
#pragma once

#include <cstdint>

#include "context.hpp"
#include "outcome.hpp"
#include "platform.hpp"
#include "shadow_write.hpp"
#include "../paging/cr_write.hpp"
#include "../paging/guest_memory.hpp"
#include "../paging/pdptr.hpp"
#include "../paging/role.hpp"
#include "../paging/shadow/fault_answer.hpp"
#include "../paging/shadow/frame_map.hpp"
#include "../paging/shadow/invalidate.hpp"
#include "../paging/shadow/shadow_mmu.hpp"
#include "../paging/walk_result.hpp"
#include "../x86/address.hpp"
#include "../x86/cr3.hpp"
#include "../x86/paging_mode.hpp"
#include "../x86/pfec.hpp"

namespace hvkit::emulate {

/// What the vCPU core does after a shadow-paging exit.
enum class shadow_exit_action : std::uint8_t {
  resume,    ///< apply `flush`, run the guest on host root `root`
  inject,    ///< shadow_page_fault(): inject the guest's #PF `fault`; shadow_cr_write(): #GP(0)
  /// the instruction was emulated: act on `emulated` (store ctx back when done; after
  /// completing a needs_mmio / needs_io, re-run with emulate_on_shadow() and ctx.pending,
  /// not with another shadow_page_fault(): the access is not re-faulted)
  emulated,
};

/// The answer to one shadow-paging exit.
struct shadow_exit {
  shadow_exit_action action = shadow_exit_action::resume;
  paging::shadow::host_flush flush = paging::shadow::host_flush::none;
  x86::hpa root{};           ///< the host root (real CR3) to run the guest on
  paging::walk_fault fault{};///< inject from shadow_page_fault(): the #PF (vector, error code, CR2)
  bool gp = false;           ///< inject from shadow_cr_write(): #GP(0) (a PAE PDPTE with a reserved bit)
  outcome emulated{};        ///< emulated: the emulator's outcome
  paging::shadow::fault_action answer = paging::shadow::fault_action::fixed;  ///< the MMU's #PF answer
  x86::gpa gpa{};            ///< emulated: the guest-physical address of the faulting access
};

/// The guest access behind a host #PF: the hardware error code's W/R, U/S, I/D and SS bits,
/// the guest's RFLAGS, PKRU and IA32_PKRS from `ctx`. A supervisor-mode access at CPL 3 is an
/// implicit one (a GDT/LDT/IDT/TSS access; SDM 4.6.1): it is marked so, since SMAP treats it
/// as if RFLAGS.AC were 0.
[[nodiscard]] constexpr paging::walk_request shadow_fault_request(const context& ctx, x86::gva cr2,
                                                                  x86::pfec error_code) noexcept {
  paging::walk_request r{};
  r.linear = cr2;
  r.access = error_code & (x86::pfec::write | x86::pfec::user | x86::pfec::fetch | x86::pfec::ss);
  if (!error_code.test(x86::pfec::user) && ctx.effective_cpl() == 3) r.access = r.access | x86::pfec::implicit_access;
  r.rflags = ctx.rflags;
  r.pkru = ctx.pkru;
  r.pkrs = ctx.pkrs;
  return r;
}

/// A host #PF at linear address `cr2` with hardware error code `error_code`, taken while the
/// guest ran on the shadow tables; `ctx` holds the guest state (as for emulate()), `ram` the
/// guest's memory (emulate::guest_ram and paging::writable_guest_memory, like flat_ram),
/// `plat` the devices. The MMU's answer (paging::shadow::shadow_mmu::page_fault()) is carried
/// out: `fixed` -> resume; `inject` -> inject; `emulate_protected`, `emulate_access`,
/// `emulate_mmio` -> the instruction at CS:RIP is emulated through emulate_on_shadow() (its
/// writes to guest page tables zap the shadow entries that mirror them).
template <paging::shadow::frame_map Map, class Ram, platform P>
  requires guest_ram<Ram> && paging::writable_guest_memory<Ram>
[[nodiscard]] constexpr shadow_exit shadow_page_fault(paging::shadow::shadow_mmu<Map>& mmu, context& ctx, Ram& ram,
                                                      P& plat, x86::gva cr2, x86::pfec error_code) noexcept {
  shadow_exit e;
  const paging::shadow::fault_answer a = mmu.page_fault(ram, shadow_fault_request(ctx, cr2, error_code));
  e.answer = a.action;
  e.gpa = a.gpa;
  e.flush = a.flush;
  e.root = a.root;
  switch (a.action) {
    case paging::shadow::fault_action::fixed: e.action = shadow_exit_action::resume; break;
    case paging::shadow::fault_action::inject:
      e.action = shadow_exit_action::inject;
      e.fault = a.fault;
      break;
    default: {
      const shadow_emulation em = emulate_on_shadow(mmu, ctx, ram, plat);
      e.action = shadow_exit_action::emulated;
      e.emulated = em.emulated;
      e.flush = paging::shadow::merge(e.flush, em.flush);
      e.root = mmu.root();
      break;
    }
  }
  return e;
}

/// A CR0/CR4/CR3 (or EFER) write that paging::evaluate_cr_write(..., paging_kind::shadow)
/// accepted (`o.fault` none), with `cr3` the guest's CR3 after it: the shadow context for
/// the new state is loaded (a cached root when the address space and role were seen before).
/// With PAE paging the PDPTE registers are loaded from guest memory when the SDM loads them
/// (SDM 4.4.1: MOV to CR3, and a CR0/CR4 write that changes PG, CD, NW, PAE, PGE, PSE or
/// SMEP, reported as mmu_actions::reload_pdptrs); a present PDPTE with a reserved bit makes
/// the write #GP(0) (`inject` with `gp`, nothing changed).
template <paging::shadow::frame_map Map, paging::guest_memory Mem>
[[nodiscard]] constexpr shadow_exit shadow_cr_write(paging::shadow::shadow_mmu<Map>& mmu, const paging::cr_write_outcome& o,
                                                    x86::cr3 cr3, const Mem& mem, unsigned maxphyaddr) noexcept {
  shadow_exit e;
  const bool is_cr3 = o.cr == 3;
  const paging::cpu_role r = is_cr3 ? mmu.role() : paging::make_cpu_role(o.after.cr0, o.after.cr4, o.after.efer);
  paging::pdpte_snapshot p = mmu.pdptes();
  if (r.mode() == x86::paging_mode::pae && (is_cr3 || o.actions.test(paging::mmu_actions::reload_pdptrs))) {
    const auto l = paging::load_pdptrs(is_cr3 ? x86::cr3{o.value} : cr3, mem, maxphyaddr);
    if (!l) {
      e.action = shadow_exit_action::inject;
      e.gp = true;
      e.root = mmu.root();
      return e;
    }
    p = *l;
  }
  const paging::shadow::context_answer c = is_cr3 ? paging::shadow::mov_to_cr3(mmu, o, maxphyaddr, p)
                                                  : paging::shadow::control_registers_written(mmu, o, cr3, maxphyaddr, p);
  e.root = c.root;
  e.flush = c.flush;
  return e;
}

/// The cr_write_outcome of an emulated instruction that wrote a CR (`done` with
/// event::cr_write): `ctx` is the context after it (the emulator already applied the write
/// and its #GP rules); `o.mmu` carries the MMU actions for CR0/CR4. Pass it to
/// shadow_cr_write() with ctx.cr3. The emulator does not load PAE PDPTEs: if shadow_cr_write()
/// answers `gp`, the instruction must not complete (restore the context saved before the
/// emulation and inject #GP(0); SDM 4.4.1).
[[nodiscard]] constexpr paging::cr_write_outcome shadow_cr_outcome(const outcome& o, const context& ctx) noexcept {
  paging::cr_write_outcome w{};
  w.cr = o.reg;
  w.after = paging::cr_state{ctx.cr0, ctx.cr4, ctx.efer};
  w.actions = o.mmu;
  w.value = ctx.cr3.raw();
  w.cr3_noflush = o.cr3_noflush;
  return w;
}

}  // namespace hvkit::emulate
