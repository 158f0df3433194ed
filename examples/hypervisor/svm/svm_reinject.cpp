// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend: the event whose delivery an exit interrupted
// (EXITINTINFO, APM 15.7.2) re-injected through EVENTINJ, with the Bochs and QEMU errata of
// that field corrected, and the re-injection check's one guest page unmapped from the nested
// page table (hc::ept_unmap_once).
#include "svm_internal.hpp"

#include <hvkit/emulate/vmcb_context.hpp>
#include <hvkit/svm/event_injection.hpp>
#include <hvkit/vmx/event_injection.hpp>

#include "../core/cpu.hpp"
#include "../core/report.hpp"
#include "../core/shadow_paging.hpp"

namespace hv::svm {

// ---- one guest page unmapped from the nested page table (hc::ept_unmap_once) ---------------
// The re-injection check: the guest puts an exception handler's stack (IST) on that page, so
// the #NPF happens while the processor delivers the event (EXITINTINFO valid, APM 15.7.2).
// The 2 MiB nested page around it is split into 4 KiB pages meanwhile (conformance_npt::unmap_pt).
// Its state is the run's (core::check_counters::unmap): seen_info the re-injected event in the
// VMX layout the guest's check reads; stale_intn the Bochs erratum (EXITINTINFO of an INT n
// delivery was another event), soft_int_type_for_int3 the QEMU one (INT3/INTO reported as TYPE
// 4), stale_on_interrupt the Bochs one (EXITINTINFO of an interrupt's delivery was another event).
using unmap_state = core::check_counters::unmap_check;

void npt_unmap_restore(conformance_npt& npt, current_vmcb& vmcb, unmap_state& unmap) {
  npt.pd[unmap.gpa >> 21] = unmap.saved_pde;
  unmap.armed = false;
  set_tlb_control(vmcb, sv::tlb_control::flush_all);
}

bool npt_unmap_once(conformance_npt& npt, current_vmcb& vmcb, core::check_counters& k, std::uint64_t gpa) {
  unmap_state& unmap = k.unmap;
  if (unmap.armed) npt_unmap_restore(npt, vmcb, unmap);
  std::uint64_t* const npt_unmap_pt = npt.unmap_pt;
  if (gpa < layout::guest_mem_base || gpa >= layout::guest_mem_base + layout::guest_mem_size) return false;
  const std::uint64_t region2m = gpa & ~0x1FFFFFull;
  for (std::uint64_t i = 0; i < 512; ++i) npt_unmap_pt[i] = (region2m + (i << 12)) | 7;
  npt_unmap_pt[(gpa >> 12) & 511] = 0;
  unmap.armed = true;
  unmap.gpa = gpa & ~0xFFFull;
  unmap.saved_pde = npt.pd[gpa >> 21];
  npt.pd[gpa >> 21] = pa(npt_unmap_pt) | 7;
  set_tlb_control(vmcb, sv::tlb_control::flush_all);
  return true;
}

/// The highest vector in service at this processor's local APIC (passed through to the
/// guest: xAPIC at IA32_APIC_BASE, identity-mapped, or the x2APIC MSRs; ISR at 100H-170H /
/// 810H-817H, SDM Vol. 3A 11.8.4, Table 11-1, 11.12.1.2), or -1.
int in_service_vector() {
  const std::uint64_t base = hv::rdmsr(0x1B);
  const bool x2apic = (base >> 10) & 1;
  for (int i = 7; i >= 0; --i) {
    const std::uint32_t isr =
        x2apic ? static_cast<std::uint32_t>(hv::rdmsr(0x810u + static_cast<unsigned>(i)))
               : *reinterpret_cast<volatile const std::uint32_t*>((base & 0xF'FFFF'F000ull) + 0x100u + 0x10u * i);
    if (isr != 0) return 32 * i + 31 - __builtin_clz(isr);
  }
  return -1;
}

/// EXITINTINFO `ii` is a software event (INT n: type 4; INT3, INTO: type 3 vectors 3 and 4,
/// or type 4 as QEMU reports them) and that instruction is at the guest RIP.
bool software_event_at_rip(current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st, sv::event_info ii) {
  const bool soft = ii.type() == sv::event_type::soft_int ||
                    (ii.type() == sv::event_type::exception && (ii.vector() == 3 || ii.vector() == 4));
  if (!soft) return false;
  const auto in = instruction_at_rip(vmcb, regs, st);
  if (!in) return false;
  switch (in->op) {
    case em::mnemonic::int_n: return ii.type() == sv::event_type::soft_int && in->imm == ii.vector();
    case em::mnemonic::int3: return ii.vector() == 3;
    case em::mnemonic::into: return ii.vector() == 4;
    default: return false;
  }
}

/// The unmapped page was touched while an event was delivered: map it back and re-inject
/// the event (handle_exit copied EXITINTINFO into EVENTINJ; it is written again here, with
/// the Bochs correction below). A software interrupt
/// (type 4) or a software exception (INT3, INTO: type 3, vectors 3 and 4) returns after its
/// instruction: the guest's RIP becomes NRIP (15.7.1) before the injection, since the
/// processor pushes the VMCB's RIP. The report gives the event in the VMX layout (SDM Vol. 3C
/// 25.8.3: type 6 software exception, 4 software interrupt, 3 hardware exception) with the
/// instruction length NRIP - RIP for software events, so one guest check serves both vendors.
/// The event whose delivery the exit interrupted (EXITINTINFO), corrected for the errata
/// below and written into EVENTINJ with the RIP advance a software event needs (a software
/// interrupt, type 4, or INT3/INTO, type 3 vectors 3 and 4, returns after its instruction:
/// the guest's RIP becomes NRIP, 15.7.1, since the processor pushes the VMCB's RIP). Returns
/// the event (kind none when nothing was interrupted) and the RIP advance.
reinjected reinject_interrupted_event(const svm_host& h, current_vmcb& vmcb, guest_regs& regs,
                                      const core::vcpu_state& st, core::check_counters& k) {
  core::tally& t = *k.results;
  unmap_state& unmap = k.unmap;
  sv::event_info ii{sv::read(vmcb, fld::exit_int_info)};
  const std::uint64_t rip = sv::read(vmcb, fld::rip);
  // Bochs 2.7 erratum (docs/hypervisor.md): a #NPF (or, under shadow paging, a #PF) while
  // delivering INT n reports, in EXITINTINFO, the last exception it delivered instead of the
  // INT n (APM 15.7.2: vector n, type 4). The instruction at the guest RIP tells (the
  // guest's code is identity-mapped): CD ib is INT n; the event is re-injected as what the
  // guest executed, and counted.
  if (const std::uint8_t* code = guest_ram(st.ram, rip, 2); code && code[0] == 0xCD && ii.valid() &&
                                                    !(ii.type() == sv::event_type::soft_int && ii.vector() == code[1])) {
    ++unmap.stale_intn;
    kprintf("HVKIT INFO run=%s exitintinfo=0x%llx at INT 0x%x: re-injected as INT 0x%x\n", st.cfg->name,
            (unsigned long long)ii.raw(), code[1], code[1]);
    ii = sv::event_info::make(code[1], sv::event_type::soft_int, false);
  }
  // Bochs 2.7 erratum, the same when the #PF (shadow paging) hits the delivery's stack push
  // instead of the IDT gate (below), so no gate tells the vector: EXITINTINFO is the last
  // exception Bochs delivered or injected, not the external interrupt it was delivering (APM
  // 15.7.2). Seen with the shadow MMU's write flooding, which zaps the table mapping the
  // kernel stack: 0x80000303 (an INT3 of Linux's text patching) at the RET after
  // native_set_pte's MOV, CR2 = RSP - 16; re-injected as that #BP, Linux's INT3 handler,
  // finding no INT3 at RIP - 1, moved RIP back one byte into the MOV and the kernel took #UD
  // at native_set_pte+2. EXITINTINFO is exact when it is the event injected at that VMRUN
  // and the guest has not run since (RIP and RSP as entered), or a software event whose
  // instruction is at RIP. Otherwise, when the guest could take an interrupt (RFLAGS.IF = 1,
  // no interrupt shadow) and its local APIC has one in service, that interrupt is the one
  // being delivered: the processor acknowledged it before the delivery (IRR to ISR), and it
  // is the highest vector in service, since an interrupt is accepted only above the
  // processor priority (SDM Vol. 3A 11.8.3, 11.8.4). It is re-injected with type 0. A stale
  // software event with no interrupt in service is dropped; any other event is an exception
  // the guest raised itself, re-injected as reported. Counted, the first 8 printed.
  const bool shadow_pf = ii.valid() && core::shadow::enabled() &&
                         sv::read(vmcb, fld::exit_code) == sv::raw(sv::exception_exit(14));
  const std::uint64_t idt_base = sv::read(vmcb, fld::idtr_base), fault_la = sv::read(vmcb, fld::exit_info_2);
  if (shadow_pf && !(fault_la >= idt_base && fault_la - idt_base <= sv::read(vmcb, fld::idtr_limit))) {
    const vmcb_slot& s = vmcb.cur();
    const bool entered =
        ii.raw() == s.entry_eventinj && rip == s.entry_rip && sv::read(vmcb, fld::rsp) == s.entry_rsp;
    if (!entered && !software_event_at_rip(vmcb, regs, st, ii)) {
      const int v = in_service_vector();
      const bool open = (sv::read(vmcb, fld::rflags) & x86::rflags::if_.raw()) != 0 &&
                        (sv::read(vmcb, fld::interrupt_state) & 1u) == 0;
      const bool soft = ii.type() == sv::event_type::soft_int ||
                        (ii.type() == sv::event_type::exception && (ii.vector() == 3 || ii.vector() == 4));
      if ((v >= 32 && open) || soft) {
        if (unmap.stale_on_stack++ == 0) ++t.errata;
        if (unmap.stale_on_stack <= 8)
          kprintf("HVKIT ERRATUM exitintinfo_stale_on_delivery_push.%s exitintinfo=0x%llx rip=0x%llx cr2=0x%llx "
                  "rsp=0x%llx in_service=%d if=%u count=%llu: %s\n",
                  st.cfg->name, (unsigned long long)ii.raw(), (unsigned long long)rip, (unsigned long long)fault_la,
                  (unsigned long long)sv::read(vmcb, fld::rsp), v, open ? 1u : 0u,
                  (unsigned long long)unmap.stale_on_stack,
                  v >= 32 && open ? "the interrupt in service re-injected" : "nothing injected");
        if (!(v >= 32 && open)) {
          sv::write(vmcb, fld::event_injection, 0);
          return {};
        }
        ii = sv::event_info::make(static_cast<std::uint8_t>(v), sv::event_type::intr, false);
      }
    }
  }
  // Bochs 2.7 erratum, the same for other events (docs/shadow-mmu.md): a #PF (shadow paging)
  // on the IDT gate while delivering an event reports, in EXITINTINFO, the last exception
  // delivered (0x80000303, an INT3 of Linux's text patching) instead of that event (APM
  // 15.7.2). The gate the CPU read tells the event's vector: 32-255 that is not an INT n at
  // RIP (above) is a physical interrupt, re-injected with type 0; 2 is the NMI; any other is
  // an exception of the instruction at RIP, which raises it again when it is executed again
  // (nothing is injected). Counted, the first case printed, each kind in the log.
  if (ii.valid() && core::shadow::enabled() && sv::read(vmcb, fld::exit_code) == sv::raw(sv::exception_exit(14))) {
    const std::uint64_t cr2 = sv::read(vmcb, fld::exit_info_2), idt = sv::read(vmcb, fld::idtr_base);
    const std::uint64_t limit = sv::read(vmcb, fld::idtr_limit);
    const unsigned gate = (sv::read(vmcb, fld::efer) & x86::efer::lma.raw()) ? 16 : 8;
    if (cr2 >= idt && cr2 - idt <= limit) {
      const std::uint64_t v = (cr2 - idt) / gate;
      if (v != ii.vector() && ii.type() != sv::event_type::soft_int) {
        if (unmap.stale_on_interrupt++ == 0) ++t.errata;
        if (unmap.stale_on_interrupt <= 8)
          kprintf("HVKIT ERRATUM exitintinfo_stale_on_event_delivery.%s exitintinfo=0x%llx rip=0x%llx cr2=0x%llx "
                  "idtr_base=0x%llx gate_vector=0x%llx count=%llu\n",
                  st.cfg->name, (unsigned long long)ii.raw(), (unsigned long long)rip, (unsigned long long)cr2,
                  (unsigned long long)idt, (unsigned long long)v, (unsigned long long)unmap.stale_on_interrupt);
        if (v >= 32) {
          ii = sv::event_info::make(static_cast<std::uint8_t>(v), sv::event_type::intr, false);
        } else if (v == 2) {
          ii = sv::event_info::make(2, sv::event_type::nmi, false);
        } else {
          sv::write(vmcb, fld::event_injection, 0);
          return {};
        }
      }
    }
  }
  // QEMU 7.2 TCG erratum (docs/hypervisor.md): EXITINTINFO of an INT3 or INTO delivery has
  // TYPE 4 (software interrupt) instead of 3 (APM 15.7.2 / 15.20: TYPE 4 is INTn only; #BP and
  // #OF are exceptions, TYPE 3). Recognized by the instruction at RIP (CC or CE, decoded),
  // re-injected as the exception, counted.
  if (ii.valid() && ii.type() == sv::event_type::soft_int && (ii.vector() == 3 || ii.vector() == 4)) {
    if (const auto in = instruction_at_rip(vmcb, regs, st);
        in && (in->op == em::mnemonic::int3 || in->op == em::mnemonic::into)) {
      if (unmap.soft_int_type_for_int3++ == 0) {
        ++t.errata;
        kprintf("HVKIT ERRATUM exitintinfo_int3_into_as_soft_int.%s exitintinfo=0x%llx rip=0x%llx\n", st.cfg->name,
                (unsigned long long)ii.raw(), (unsigned long long)rip);
      }
      ii = sv::event_info::make(ii.vector(), sv::event_type::exception, false);
    }
  }
  if (!ii.valid()) return {};
  // The event as the vendor-neutral x86::event (svm::to_event: TYPE 3 #BP/#OF are INT3/INTO),
  // an instruction event with its length nRIP - RIP; svm::to_eventinj gives it back with the
  // RIP advance that makes it return past its instruction, write_injection applies both.
  x86::event e = sv::to_event(ii);
  if (x86::is_instruction_event(e.kind)) e.instruction_length = static_cast<std::uint8_t>(instruction_length(h, vmcb, regs, st));
  const sv::injection inj = sv::to_eventinj(e);
  sv::write_injection(vmcb, inj);
  return {e, inj.rip_advance, true};
}

/// The unmapped page was touched while an event was delivered: map it back and re-inject
/// the event (handle_exit copied EXITINTINFO into EVENTINJ; it is written again here, with
/// the Bochs correction, by reinject_interrupted_event). The report gives the event in the
/// VMX layout (SDM Vol. 3C 25.8.3: type 6 software exception, 4 software interrupt, 3
/// hardware exception) with the instruction length NRIP - RIP for software events, so one
/// guest check serves both vendors.
bool npt_unmapped_page_hit(const svm_host& h, conformance_npt& npt, current_vmcb& vmcb, guest_regs& regs,
                           const core::vcpu_state& st, core::check_counters& k) {
  unmap_state& unmap = k.unmap;
  if (!unmap.armed || (sv::read(vmcb, fld::exit_info_2) & ~0xFFFull) != unmap.gpa) return false;
  npt_unmap_restore(npt, vmcb, unmap);
  ++unmap.hits;
  const reinjected r = reinject_interrupted_event(h, vmcb, regs, st, k);
  if (!r.valid) return true;
  unmap.seen_length = r.rip_advance;
  unmap.seen_info = hvkit::vmx::from_event(r.e).info.raw();
  return true;
}

std::uint64_t npt_unmap_report(conformance_npt& npt, current_vmcb& vmcb, core::check_counters& k) {
  unmap_state& unmap = k.unmap;
  const std::uint64_t r = (unmap.hits & 0xFF) | (std::uint64_t{unmap.seen_length & 0xFF} << 8) | (unmap.seen_info << 32);
  k.unmap_untouched_at_report = unmap.armed && unmap.hits == 0;
  if (unmap.armed) npt_unmap_restore(npt, vmcb, unmap);
  unmap.hits = 0;
  unmap.seen_info = 0;
  unmap.seen_length = 0;
  return r;
}

}  // namespace hv::svm
