// SPDX-License-Identifier: MIT
/// @file
/// @brief The one exit loop of the reference hypervisor and each exit handler written once,
/// over any `core::backend` (core/backend.hpp): CPUID, MSR, CR, hypercalls, MMIO and
/// descriptor-table emulation, the second stage's faults, HLT, triple fault, the VMX/SVM
/// instructions, time slices and failed entries. The vendor decodes the exit and carries out
/// the operations; every decision is made here.
#pragma once

#include <cstdint>

#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/emulate/emulator.hpp>
#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/role_sync.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/msr.hpp>
#include <hvkit/x86/xcr0.hpp>

#include "../hypercall.hpp"
#include "cpu.hpp"
#include "backend.hpp"
#include "profile.hpp"
#include "report.hpp"
#include "shadow_exits.hpp"

namespace hv {
// The differentials of the guest's first stage (differential.cpp): vendor-neutral, they
// read the live paging registers through the backend that is running.
std::uint64_t handle_paging_case(core::context& c, core::guest_regs& r, const core::paging_regs& live);
std::uint64_t handle_paging_case32(core::context& c, core::guest_regs& r, const core::paging_regs& live);
}  // namespace hv

namespace hv::core {

namespace x86 = hvkit::x86;

/// What a guest profile's hook decided about an exit.
enum class hook { pass, resume, stop };
/// What a guest profile's MSR hook decided: not one of its MSRs, done (a read's value in
/// `v`), or #GP(0).
enum class msr_hook { pass, done, gp };

/// The conformance guest's profile: the core handles everything (its hypercall ABI is
/// hypercall.hpp's). A guest profile (linux/linux.cpp) handles what only its guest needs
/// (its own hypercalls, port I/O, platform MSRs) before the core's handlers.
struct conformance_profile {
  template <class B>
  hook exit(B&, context&, const exit_info&) { return hook::pass; }
  msr_hook msr(context&, bool, std::uint32_t, std::uint64_t&) { return msr_hook::pass; }
  void msr_refused(bool, std::uint32_t, std::uint64_t, std::uint64_t) {}
};

/// CPUID: the answer of the guest's CPUID policy, with the dynamic bits (OSXSAVE, OSPKE)
/// from the guest's CR4 as the guest sees it.
template <backend B>
bool handle_cpuid(B& b, context& c) {
  using enum x86::gpr;
  hvkit::cpuid::vcpu_state vs{};
  vs.cr4 = b.crs().crs.cr4;
  if (c.vcpu.guest_xcr0) vs.xcr0 = x86::xfeatures{c.vcpu.guest_xcr0};
  vs.x2apic_id = c.vcpu.x2apic_id;
  const hvkit::cpuid::regs a =
      c.cpuid.answer(static_cast<std::uint32_t>(b.gpr(rax)), static_cast<std::uint32_t>(b.gpr(rcx)), vs);
  b.set_gpr(rax, a.eax);
  b.set_gpr(rbx, a.ebx);
  b.set_gpr(rcx, a.ecx);
  b.set_gpr(rdx, a.edx);
  b.skip();
  return true;
}

/// The MMU actions of a CR or EFER write the guest made through an exit: the vendor applies
/// them with hvkit's neutral executor (MMU context, PDPTEs), then the guest's TLB flush they
/// ask for (paging::tlb_flush_scope_for: the processor did not do it, the hypervisor wrote the
/// register). Counted when the MMU role was rebuilt.
template <backend B>
void apply_mmu_actions(B& b, context& c, hvkit::paging::mmu_actions actions, const hvkit::paging::cr_state& after,
                       x86::cr3 cr3) {
  if (b.apply_mmu_actions(actions, after, cr3)) ++c.checks.mmu_refreshes;
  b.flush_tlb(hvkit::paging::tlb_flush_scope_for(actions));
}

/// A guest WRMSR of EFER: SCE and NXE may change; LME only with paging off (SDM Vol. 3A
/// 10.8.5, APM 3.1.7: #GP when LME changes with CR0.PG set; an application processor sets
/// it on its way to long mode); LMA is read-only. An NXE change feeds the MMU role: paging::cr_write_actions, carried out
/// by the backend. False: #GP(0).
template <backend B>
bool write_efer(B& b, context& c, std::uint64_t v) {
  const guest_crs g = b.crs();
  const bool paging = g.crs.cr0.test(x86::cr0::pg);
  const x86::efer changeable = paging ? x86::efer::sce | x86::efer::nxe : x86::efer::sce | x86::efer::nxe | x86::efer::lme;
  const x86::efer fixed = changeable | x86::efer::lme | x86::efer::lma;
  if ((v & ~fixed.raw()) || (paging && ((v ^ g.crs.efer.raw()) & x86::efer::lme.raw()))) return false;
  hvkit::paging::cr_state after = g.crs;
  after.efer = x86::efer{(g.crs.efer.raw() & ~changeable.raw()) | (v & changeable.raw())};
  const auto actions = hvkit::paging::cr_write_actions(
      g.crs, after, shadow::enabled() ? hvkit::paging::paging_kind::shadow : hvkit::paging::paging_kind::two_dimensional);
  b.write_efer(after);
  if constexpr (shadow::shadow_backend<B>) {
    if (shadow::enabled()) {  // EFER.NXE is in the shadow pages' role (docs/shadow-mmu.md)
      hvkit::paging::cr_write_outcome o{};
      o.after = after;
      o.actions = actions;
      const hvkit::emulate::shadow_exit e = shadow::cr_written(c.vcpu, o, g.cr3);
      b.load_shadow_root(e.root, e.flush);
    }
  }
  if (actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++c.checks.mmu_resets;
  apply_mmu_actions(b, c, actions, after, g.cr3);
  c.vcpu.guest_efer = after.efer.raw();
  return true;
}

/// RDMSR/WRMSR: every access exits. The MSR policy follows the CPUID policy (IA32_PRED_CMD is
/// writable exactly when CPUID.7.0:EDX[26] is advertised, ...): `allow` means the host has
/// the feature too, the access is done on the real MSR. Then EFER, then the MSRs whose guest
/// values the vendor keeps (VMCS guest-state fields, VMCB state-save area); anything else is
/// #GP(0), as on hardware for an MSR the CPU does not have. A guest profile's own MSRs
/// (platform MSRs a real machine has beside the CPU's) come first.
template <backend B, class P = conformance_profile>
bool handle_msr(B& b, context& c, bool write, P&& p = P{}) {
  using enum x86::gpr;
  const auto m = static_cast<std::uint32_t>(b.gpr(rcx));
  std::uint64_t v = (b.gpr(rdx) << 32) | (b.gpr(rax) & 0xFFFFFFFF);
  const std::uint64_t written = v;
  const msr_hook own = p.msr(c, write, m, v);
  const hvkit::cpuid::msr_verdict verdict = write ? c.msrs.write(m, v) : c.msrs.read(m);
  bool ok = own != msr_hook::gp && (own == msr_hook::done || verdict != hvkit::cpuid::msr_verdict::gp);
  if (!ok || own == msr_hook::done) {
  } else if (verdict == hvkit::cpuid::msr_verdict::allow) {
    if (write) wrmsr(m, v);
    else v = rdmsr(m);
  } else if (m == x86::msr::ia32_efer) {
    if (write) ok = write_efer(b, c, v);
    else v = b.crs().crs.efer.raw();
  } else {
    ok = b.state_msr(m, write, v);
  }
  if (!ok) {
    ++c.checks.msr_gp;
    p.msr_refused(write, m, written, b.rip());
    b.inject(x86::vector::gp, 0);
    return true;
  }
  if (!write) {
    b.set_gpr(rax, v & 0xFFFFFFFF);
    b.set_gpr(rdx, v >> 32);
  }
  b.skip();
  return true;
}

/// Emulates the instruction at the guest RIP with hvkit::emulate: the MMU role brought in
/// step with the live CR0 first (paging::sync_cr0_role: CR0.WP may be guest-owned; not in the
/// negative control, which keeps the stale role on purpose), the context and the outcome's
/// write-back are the vendor's. An instruction not emulated (or needing a device access no
/// platform handler took) gets #UD, the architectural default. `plat` takes the instruction's
/// device accesses (the core's platform below; a guest profile may bring its own).
template <backend B, hvkit::emulate::platform P>
bool emulate_instruction(B& b, context& c, const char* why, P& plat) {
  namespace em = hvkit::emulate;
  namespace pg = hvkit::paging;
  em::context ctx{};
  if (!b.read_context(ctx)) return false;
  const em::context before = ctx;
  vcpu_state& v = c.vcpu;
  const pg::cpu_properties props = guest_cpu_properties(v.cpu->model);
  if (!c.cfg().stale_role) {
    switch (pg::sync_cr0_role(v.mmu, ctx.cr0, ctx.cr4, ctx.efer, v.mmu.root())) {
      case pg::role_sync::unchanged: break;
      case pg::role_sync::wp_refreshed: ++c.checks.passthrough_refreshes; break;
      case pg::role_sync::rebuilt: ++c.checks.role_rebuilds; break;
    }
  }
  v.mmu.set_root(x86::cr3_root(ctx.cr3, v.mmu.role().mode(), props.maxphyaddr));
  guest_memory mem = b.memory();
  // Shadow paging: a PAE guest's PDPTE registers are the shadow MMU's (its last CR3 load).
  translator tr{em::walker_translator<pg::flat_memory>{v.mmu, mem.tables, props,
                                                       shadow::enabled() ? shadow::mmu(v).pdptes() : pg::pdpte_snapshot{}},
                &c};
  const em::outcome o = em::emulate(ctx, tr, mem.data, plat);
  ++c.checks.emulated;
  if (o.is_done() && (o.what == em::event::dr_write || o.what == em::event::halt)) {
    kprintf("HVKIT ERROR run=%s emulated instruction with unexpected side effect %u (%s exit)\n", c.cfg().name,
            static_cast<unsigned>(o.what), why);
    v.status = run_status::fatal_exit;
    return false;
  }
  if (o.kind == em::outcome_kind::unsupported &&
      (o.why == em::unsupported_reason::page_table_unbacked || o.why == em::unsupported_reason::fetch_not_ram)) {
    kprintf("HVKIT ERROR run=%s cannot emulate at rip=0x%llx (%s exit): reason %u\n", c.cfg().name,
            (unsigned long long)before.rip, why, static_cast<unsigned>(o.why));
    v.status = run_status::fatal_exit;
    return false;
  }
  if (o.is_exception() && o.vector == x86::vector::pf && c.cfg().stale_role && o.error_code == 0x3 &&
      !before.cr0.test(x86::cr0::wp))
    ++c.checks.stale_wrong_faults;
  switch (b.apply(before, ctx, o)) {
    case applied::done:
      if (o.what == em::event::cr_write) {
        // The CR write is in the VMCS/VMCB; the MMU context follows it (the outcome's actions).
        const pg::cr_state a{ctx.cr0, ctx.cr4, ctx.efer};
        // Shadow paging: the actions of paging_kind::shadow (the outcome's are two-dimensional).
        const pg::mmu_actions acts =
            shadow::enabled() ? pg::cr_write_actions({before.cr0, before.cr4, before.efer}, a, pg::paging_kind::shadow) : o.mmu;
        if (acts.any(pg::mmu_actions::reset_mmu)) ++c.checks.mmu_resets;
        apply_mmu_actions(b, c, o.mmu, a, ctx.cr3);
        v.guest_efer = ctx.efer.raw();
      }
      return v.status == run_status::running;
    case applied::injected: return v.status == run_status::running;
    case applied::shutdown:
      b.report_exit("exception_while_delivering_double_fault", false);
      v.status = run_status::triple_fault;
      return false;
    case applied::not_applied:
      ++c.checks.not_emulable;
      kprintf("HVKIT INFO run=%s not_emulable rip=0x%llx (%s exit) outcome=%u mnemonic=%u: #UD\n", c.cfg().name,
              (unsigned long long)before.rip, why, static_cast<unsigned>(o.kind), static_cast<unsigned>(o.op));
      b.inject(x86::vector::ud, 0);
      return v.status == run_status::running;
  }
  return true;
}

template <backend B>
bool emulate_instruction(B& b, context& c, const char* why) {
  platform plat{{}, &c};
  return emulate_instruction(b, c, why, plat);
}

/// The second stage faulted (EPT violation, #NPF). Guest RAM is all mapped: this is a case of
/// a differential, the page the guest asked to have unmapped (mapped back, the interrupted
/// event re-injected), or the test device / unassigned space, done by the emulator.
template <backend B>
bool handle_memory(B& b, context& c, const char* why) {
  if (b.memory_case()) return true;
  if (b.during_delivery()) {
    b.report_exit("second_stage_fault_during_event_delivery", false);
    c.vcpu.status = run_status::fatal_exit;
    return false;
  }
  if (b.fetch_fault()) {
    b.report_exit("guest_fetch_outside_memory", false);
    c.vcpu.status = run_status::fatal_exit;
    return false;
  }
  return emulate_instruction(b, c, why);
}

/// XSETBV: the guest may set XCR0 to a valid value (SDM Vol. 1 13.3) within the components
/// its CPUID policy enumerates; #GP(0) otherwise, and for an XCR other than 0 or CPL > 0
/// (SDM Vol. 2D XSETBV). The value is loaded into the real XCR0 (the host runs with
/// CR4.OSXSAVE set and never uses the extended state itself).
template <backend B>
bool handle_xsetbv(B& b, context& c) {
  using enum x86::gpr;
  const std::uint64_t v = (b.gpr(rdx) << 32) | (b.gpr(rax) & 0xFFFFFFFF);
  const auto xcr = static_cast<std::uint32_t>(b.gpr(rcx));
  const bool ok = xcr == 0 && b.cpl() == 0 && x86::is_valid_xcr0(x86::xfeatures{v}) &&
                  (v & ~c.cpuid.xcr0_components().raw()) == 0;
  if (!ok) {
    ++c.checks.xsetbv_gp;
    kprintf("HVKIT INFO xsetbv_gp xcr=%u value=0x%llx policy_xcr0=0x%llx\n", xcr, (unsigned long long)v,
            (unsigned long long)c.cpuid.xcr0_components().raw());
    b.inject(x86::vector::gp, 0);
    return true;
  }
  asm volatile("xsetbv" ::"c"(0u), "a"(static_cast<std::uint32_t>(v)), "d"(static_cast<std::uint32_t>(v >> 32)));
  c.vcpu.guest_xcr0 = v;
  ++c.checks.xsetbv_ok;
  b.skip();
  return true;
}

/// VMCALL / VMMCALL: the hypercall ABI of hypercall.hpp, for the guest kernel only (CPL 0).
template <backend B>
bool handle_hypercall(B& b, context& c) {
  using enum x86::gpr;
  guest_regs& r = b.gprs();
  std::uint64_t ret = 0;
  if (b.cpl() != 0) {
    b.set_gpr(rax, ~0ull);
    b.skip();
    return true;
  }
  switch (b.gpr(rax)) {
    case hc::log: guest_log(r); break;
    case hc::mark_begin: c.vcpu.mark = c.vcpu.exits; break;
    case hc::mark_end: {
      char name[64];
      read_guest_string(r[rbx], name, sizeof name);
      print_section(c, name, r[rcx], r[rdx], r[rsi]);
      break;
    }
    case hc::result: guest_result(c, r); break;
    case hc::paging_case: ret = handle_paging_case(c, r, b.paging_regs()); break;
    case hc::paging_case32: ret = handle_paging_case32(c, r, b.paging_regs()); break;
    case hc::ept_arm: ret = b.second_stage_arm(r); break;
    case hc::ept_check: ret = b.second_stage_check(r); break;
    case hc::ept_unmap_once: ret = b.unmap_once(r[rbx]) ? 0 : ~0ull; break;
    case hc::ept_unmap_report: ret = b.unmap_report(); break;
    case hc::spin_more: ret = b.spin_more() ? 1 : 0; break;
    case hc::done:
      c.vcpu.status = run_status::done;
      b.skip();
      return false;
    case hc::unexpected:
      guest_exception(r);
      c.vcpu.status = run_status::fatal_exit;
      return false;
    default: ret = ~0ull; break;  // unknown hypercall: error return, the guest keeps running
  }
  b.set_gpr(rax, ret);
  b.skip();
  return true;
}

/// IN/OUT of a guest_profile's run (core/profile.hpp): the profile's callback owns the ports.
/// A string I/O ends the run. OUT passes the low `size` bytes of RAX; IN writes them (SDM
/// Vol. 2 IN: a 32-bit IN zero-extends into RAX, 8- and 16-bit ones leave the upper bytes).
template <backend B>
bool handle_io(B& b, context& c, const guest_profile& p) {
  const io_access a = b.io();
  if (a.string) {
    b.report_exit("string_io", false);
    c.vcpu.status = run_status::fatal_exit;
    return false;
  }
  const std::uint64_t mask = a.size >= 4 ? 0xFFFFFFFFull : (1ull << (8 * a.size)) - 1;
  const std::uint64_t rax = b.gpr(x86::gpr::rax);
  std::uint64_t value = rax & mask;
  const bool go_on = p.io(c.vcpu, a, value);
  if (a.in) b.set_gpr(x86::gpr::rax, a.size >= 4 ? (value & mask) : ((rax & ~mask) | (value & mask)));
  b.skip();
  return go_on;
}

/// The hook of the runs of the run tables (hypervisor.cpp, svm/svm_runs.cpp): with `g` (the
/// run's run_config::profile) the profile's image was loaded in place of the conformance
/// guest and its port I/O goes to the profile's callback; everything else, and every exit of
/// a conformance run (`g` null), is the core's. One hook type for both keeps one
/// instantiation of handle_exit per backend on the hot path (the conformance runs and the
/// exit-cost rows pay the same: a compare on the exit kind).
struct image_profile {
  const guest_profile* g;
  template <class B>
  hook exit(B& b, context& c, const exit_info& e) {
    if (e.kind != exit_kind::io || !g) return hook::pass;
    return handle_io(b, c, *g) ? hook::resume : hook::stop;
  }
  msr_hook msr(context&, bool, std::uint32_t, std::uint64_t&) { return msr_hook::pass; }
  void msr_refused(bool, std::uint32_t, std::uint64_t, std::uint64_t) {}
};

/// The one exit loop's body: decode, count, the guest profile's hook, the core's handler.
/// True: enter the guest again.
template <backend B, class P = conformance_profile>
bool handle_exit(B& b, context& c, P&& p = P{}) {
  const exit_info e = b.decode();
  vcpu_state& v = c.vcpu;
  ++v.exits.total;
  ++v.exits.by_slot[e.slot < exit_slots ? e.slot : exit_slots - 1];
  ++v.exits.by_kind[static_cast<unsigned>(e.kind)];
  switch (p.exit(b, c, e)) {
    case hook::pass: break;
    case hook::resume: return v.status == run_status::running;
    case hook::stop: return false;
  }
  bool resume = false;
  switch (e.kind) {
    case exit_kind::cpuid: resume = handle_cpuid(b, c); break;
    case exit_kind::msr_read: resume = handle_msr(b, c, false, p); break;
    case exit_kind::msr_write: resume = handle_msr(b, c, true, p); break;
    case exit_kind::xsetbv: resume = handle_xsetbv(b, c); break;
    case exit_kind::cr_access:
    case exit_kind::cr_read: resume = b.cr_access(); break;
    case exit_kind::descriptor_table: resume = emulate_instruction(b, c, e.name); break;
    case exit_kind::hypercall: resume = handle_hypercall(b, c); break;
    case exit_kind::memory: resume = handle_memory(b, c, e.name); break;
    case exit_kind::misconfig:
      if (b.misconfig_case()) return true;  // provoked (EPT differential): retry
      b.report_exit(e.name, false);
      v.status = run_status::fatal_exit;
      return false;
    case exit_kind::virt_instruction:
      // The guest's CPUID offers neither VMX nor SVM: each of their instructions is #UD (SDM
      // Vol. 3C 26.1.2 / APM Vol. 3: they exit unconditionally, and are #UD outside VMX
      // operation / with EFER.SVME clear).
      ++c.checks.virt_ud_injected;
      b.inject(x86::vector::ud, 0);
      resume = true;
      break;
    case exit_kind::preempted:
      v.preempted = true;  // end of a time slice: the scheduler switches, then resumes
      return false;
    case exit_kind::page_fault: resume = handle_shadow_page_fault(b, c); break;  // shadow paging only
    case exit_kind::invlpg: resume = handle_shadow_invlpg(b, c); break;
    case exit_kind::hlt:
      b.report_exit("guest_halted", false);
      v.status = run_status::halted;
      return false;
    case exit_kind::triple_fault:
      b.report_exit("guest_triple_fault", c.cfg().expected == run_status::triple_fault ||
                                              (c.cfg().guest_flags & hc::cfg_hostile_b));
      v.status = run_status::triple_fault;
      return false;
    case exit_kind::entry_failed:
      if (b.entry_failed()) return v.status == run_status::running;
      v.status = run_status::entry_failed;
      return false;
    case exit_kind::io:  // no guest profile took it
    case exit_kind::unhandled:
    case exit_kind::count:
      b.report_exit("unexpected_exit", false);
      v.status = run_status::fatal_exit;
      return false;
  }
  return resume && v.status == run_status::running;
}

}  // namespace hv::core
