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
namespace x86 = hvkit::x86;

template <backend B>
bool handle_shadow_page_fault(B& b, context& c) {
  namespace em = hvkit::emulate;
  if constexpr (shadow::shadow_backend<B>) {
    em::context ctx{};
    if (!b.read_context(ctx)) return false;
    const em::context before = ctx;
    em::flat_ram ram = guest_ram_data(c.vcpu.ram);
    platform plat{{}, &c};
    shadow::stats& s = shadow::counters(c.vcpu);
    ++s.faults;
    const em::shadow_exit e = em::shadow_page_fault(shadow::mmu(c.vcpu), ctx, ram, plat, x86::gva{b.page_fault_address()},
                                                    x86::pfec{b.page_fault_error()});
    if (shadow::mmu(c.vcpu).cache().used() > s.peak_pages) s.peak_pages = shadow::mmu(c.vcpu).cache().used();
    const std::uint64_t cr2 = b.page_fault_address();
    const std::uint32_t error = b.page_fault_error();
    switch (e.action) {
      case em::shadow_exit_action::resume: {
        ++s.fixed;
        b.load_shadow_root(e.root, e.flush);
        // The MMU answers `fixed` only after checking the new host entry with the host's role
        // (paging::shadow::host_role()), so the same #PF as the very next exit means the CPU
        // disagrees with that SDM check. Only consecutive exits count: the same instruction
        // and address fault again legitimately after a context switch (an event delivered
        // through the same stack page, a differential case run again at the same address).
        const std::uint64_t exit_no = c.vcpu.exits.total;
        const bool same = s.last_exit + 1 == exit_no && s.last_rip == before.rip && s.last_cr2 == cr2 &&
                          s.last_error == error;
        s.last_exit = exit_no;
        s.last_rip = before.rip;
        s.last_cr2 = cr2;
        s.last_error = error;
        if (!same) return true;
        s.last_exit = 0;
        if (s.refused++ == 0) {
          // Seen on Bochs 2.7 (docs/shadow-mmu.md, "Bochs"): a supervisor-mode write to a
          // supervisor-mode address (host leaf U/S = 0 under U/S = 1 non-leaf entries) whose
          // protection key has PKRU.WD = 1 faults with PK; SDM 4.6.2 applies PKRU to user-mode
          // addresses only. The guest gets the SDM's verdict: the instruction is emulated.
          ++c.checks.results->errata;
          kprintf("HVKIT ERRATUM shadow_fix_refused_by_cpu.%s rip=0x%llx cr2=0x%llx error=0x%x cr0=0x%llx cr4=0x%llx "
                  "rflags=0x%llx cpl=%u pkru=0x%x\n",
                  c.cfg().name, (unsigned long long)before.rip, (unsigned long long)cr2, error,
                  (unsigned long long)before.cr0.raw(), (unsigned long long)before.cr4.raw(),
                  (unsigned long long)before.rflags.raw(), before.effective_cpl(), before.pkru);
          shadow::print_walks(c.vcpu, cr2, x86::pfec{error} & (x86::pfec::write | x86::pfec::user | x86::pfec::fetch), before.pkru);
        }
        if (b.during_delivery()) {  // an access of the event delivery is not the instruction's
          kprintf("HVKIT ERROR run=%s shadow: fix refused during event delivery rip=0x%llx cr2=0x%llx error=0x%x\n",
                  c.cfg().name, (unsigned long long)before.rip, (unsigned long long)cr2, error);
          c.vcpu.status = run_status::fatal_exit;
          return false;
        }
        const em::shadow_emulation m = em::emulate_on_shadow(shadow::mmu(c.vcpu), ctx, ram, plat);
        b.load_shadow_root(shadow::mmu(c.vcpu).root(), m.flush);
        ++c.checks.emulated;
        switch (b.apply(before, ctx, m.emulated)) {
          case applied::done:
          case applied::injected: return c.vcpu.status == run_status::running;
          case applied::shutdown: c.vcpu.status = run_status::triple_fault; return false;
          case applied::not_applied: break;
        }
        kprintf("HVKIT ERROR run=%s shadow: refused fix not emulable rip=0x%llx outcome=%u\n", c.cfg().name,
                (unsigned long long)before.rip, static_cast<unsigned>(m.emulated.kind));
        c.vcpu.status = run_status::fatal_exit;
        return false;
      }
      case em::shadow_exit_action::inject:
        ++s.injected;
        b.inject_page_fault(e.fault.linear.value(), e.fault.error_code.raw());
        return c.vcpu.status == run_status::running;
      case em::shadow_exit_action::emulated:
        if (b.during_delivery()) {
          // The access belongs to an event delivery (IDT, stack, TSS), not to the instruction at
          // RIP: it cannot be emulated as that instruction. Not seen with the conformance guest.
          kprintf("HVKIT ERROR run=%s shadow: access during event delivery needs emulation rip=0x%llx cr2=0x%llx "
                  "error=0x%x answer=%u\n",
                  c.cfg().name, (unsigned long long)before.rip, (unsigned long long)cr2, error,
                  static_cast<unsigned>(e.answer));
          c.vcpu.status = run_status::fatal_exit;
          return false;
        }
        ++s.emulated;
        ++c.checks.emulated;
        b.load_shadow_root(e.root, e.flush);
        switch (b.apply(before, ctx, e.emulated)) {
          case applied::done:
          case applied::injected: return c.vcpu.status == run_status::running;
          case applied::shutdown: c.vcpu.status = run_status::triple_fault; return false;
          case applied::not_applied: {
            // A write to a write-protected guest table frame with an instruction the emulator
            // does not have (Linux: LOCK XADD on a freed page-table page reused for data):
            // the frame stops being mirrored and the CPU executes the instruction itself. Once
            // per instruction: the same RIP unprotecting again at once (the write's own walk
            // protects the frame again) falls through to #UD.
            const std::uint64_t exit_no = c.vcpu.exits.total;
            if (e.answer == hvkit::paging::shadow::fault_action::emulate_protected &&
                e.emulated.kind == em::outcome_kind::unsupported && e.emulated.why == em::unsupported_reason::instruction &&
                !(s.unprotect_rip == before.rip && exit_no - s.unprotect_exit <= 2)) {
              ++s.unprotected;
              s.unprotect_rip = before.rip;
              s.unprotect_exit = exit_no;
              // unprotect() first: it rebuilds the root if that frame held the root's table.
              const hvkit::paging::shadow::host_flush f = shadow::mmu(c.vcpu).unprotect(x86::gpa_to_gfn(e.gpa));
              b.load_shadow_root(shadow::mmu(c.vcpu).root(), f);
              return c.vcpu.status == run_status::running;
            }
          }
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
    ++shadow::counters(c.vcpu).invlpg;
    b.load_shadow_root(shadow::mmu(c.vcpu).root(),
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
