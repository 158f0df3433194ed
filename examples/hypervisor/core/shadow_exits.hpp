// SPDX-License-Identifier: MIT
/// @file
/// @brief The shadow-paging exits of the core's exit loop, written once over any backend that
/// models core::shadow::shadow_backend: a host #PF answered by hvkit::emulate::
/// shadow_page_fault() (fix and resume, the guest's own #PF, or the instruction emulated on
/// the shadow tables), and INVLPG (paging::shadow::invlpg(): the shadow never holds a
/// translation the guest's tables do not give, so nothing to drop). A backend without
/// shadow paging never decodes these exits; for it they are unexpected.
#pragma once

#include "cpu.hpp"
#include "report.hpp"
#include "shadow_paging.hpp"

namespace hv::core {

template <backend B>
bool handle_shadow_page_fault(B& b, context& c) {
  namespace em = hvkit::emulate;
  if constexpr (shadow::shadow_backend<B>) {
    em::context ctx{};
    if (!b.read_context(ctx)) return false;
    const em::context before = ctx;
    em::flat_ram ram = guest_ram_data();
    platform plat{{}, &c};
    shadow::stats& s = shadow::counters();
    ++s.faults;
    const em::shadow_exit e = em::shadow_page_fault(shadow::mmu(), ctx, ram, plat, x86::gva{b.page_fault_address()},
                                                    x86::pfec{b.page_fault_error()});
    switch (e.action) {
      case em::shadow_exit_action::resume:
        ++s.fixed;
        b.load_shadow_root(e.root, e.flush);
        // A fix that does not satisfy the access faults again at once: stop and say where
        // instead of looping.
        if (s.last_rip == before.rip && s.last_cr2 == b.page_fault_address()) {
          // The same access faulted again on the entry just fixed: the host check refuses
          // what the guest's allows (seen: a supervisor write with the guest's CR0.WP = 0 to
          // a user page whose key has PKRU.WD = 1, which the real WP = 1 makes fault). The
          // instruction is emulated with the guest's role instead.
          if (s.repeats++ == 0) {
            ++s.refused_fixes;
            const em::shadow_emulation m = em::emulate_on_shadow(shadow::mmu(), ctx, ram, plat);
            b.load_shadow_root(shadow::mmu().root(), m.flush);
            s.last_rip = s.last_cr2 = ~0ull;
            s.repeats = 0;
            switch (b.apply(before, ctx, m.emulated)) {
              case applied::done:
              case applied::injected: return c.vcpu.status == run_status::running;
              case applied::shutdown: c.vcpu.status = run_status::triple_fault; return false;
              case applied::not_applied: break;
            }
            kprintf("HVKIT ERROR run=%s shadow: refused fix not emulable rip=0x%llx\n", c.cfg().name,
                    (unsigned long long)before.rip);
            c.vcpu.status = run_status::fatal_exit;
            return false;
          }
          if (s.repeats > 64) {
            kprintf("HVKIT ERROR run=%s shadow: #PF not resolved rip=0x%llx cr2=0x%llx error=0x%x\n", c.cfg().name,
                    (unsigned long long)before.rip, (unsigned long long)b.page_fault_address(), b.page_fault_error());
            c.vcpu.status = run_status::fatal_exit;
            return false;
          }
        } else {
          s.repeats = 0;
        }
        s.last_rip = before.rip;
        s.last_cr2 = b.page_fault_address();
        return true;
      case em::shadow_exit_action::inject:
        ++s.injected;
        b.inject_page_fault(e.fault.linear.value(), e.fault.error_code.raw());
        return c.vcpu.status == run_status::running;
      case em::shadow_exit_action::emulated:
        ++s.emulated;
        ++c.checks.emulated;
        b.load_shadow_root(e.root, e.flush);
        switch (b.apply(before, ctx, e.emulated)) {
          case applied::done:
          case applied::injected: return c.vcpu.status == run_status::running;
          case applied::shutdown: c.vcpu.status = run_status::triple_fault; return false;
          case applied::not_applied:
            ++c.checks.not_emulable;
            kprintf("HVKIT INFO run=%s shadow: not emulable rip=0x%llx outcome=%u: #UD\n", c.cfg().name,
                    (unsigned long long)before.rip, static_cast<unsigned>(e.emulated.kind));
            b.inject(x86::vector::ud, 0);
            return c.vcpu.status == run_status::running;
        }
    }
    return true;
  } else {
    b.report_exit("page_fault_without_shadow_paging", false);
    c.vcpu.status = run_status::fatal_exit;
    return false;
  }
}

template <backend B>
bool handle_shadow_invlpg(B& b, context& c) {
  if constexpr (shadow::shadow_backend<B>) {
    ++shadow::counters().invlpg;
    b.load_shadow_root(shadow::mmu().root(),
                       hvkit::paging::shadow::invlpg(x86::gva{b.invlpg_address()}));
    b.skip();
    return true;
  } else {
    b.report_exit("invlpg_without_shadow_paging", false);
    c.vcpu.status = run_status::fatal_exit;
    return false;
  }
}

}  // namespace hv::core
