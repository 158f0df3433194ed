// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the guest's x2APIC ICR writes (WRMSR 830H), intercepted.
//
// The guest's local APIC is the processor's own, passed through, except for this one
// register: every IPI the guest sends is an MSR-write exit, decoded into the library's
// ipi_request (x86/apic_icr.hpp) and sent by the hypervisor with the same ICR value on the
// same (physical) APIC, with one exception, INIT. Why the INIT is not sent: Bochs 2.7 keeps
// an INIT that arrives in VMX non-root operation pending after the INIT VM exit, so every
// later VM entry of that processor exits again with reason 3 (measured: 19156 INIT exits in
// a row, the AP never ran; docs/smp.md, erratum bochs_init_stays_pending); and while the
// vCPU waits for a SIPI, Bochs holds the INIT back and delivers it after the SIPI. The SDM
// consumes the INIT with its VM exit (SDM Vol. 3C 26.2: "INIT signals cause VM exits. A
// logical processor performs none of the operations normally associated with these
// events."). So the INIT is virtual: the hypervisor applies it to the target vCPU (post-INIT
// state, wait-for-SIPI); the start-up IPI is sent for real and becomes the target's SIPI
// exit (vmx/vmx_smp.cpp), which starts the vCPU; a SIPI to a vCPU not waiting for one is
// discarded by the processor itself, as the SDM says for VMX non-root operation.
#include "smp.hpp"

#include <hvkit/x86/apic_destination.hpp>
#include <hvkit/x86/apic_icr.hpp>

namespace hv::smp {

core::msr_hook icr_write(cpu& from, std::uint64_t v) {
  namespace apic = hvkit::x86::apic;
  const auto decoded = apic::decode_x2apic_icr(v);
  if (!decoded) return core::msr_hook::gp;  // reserved bits: #GP(0) (SDM 11.12.1.3)
  const apic::ipi_request ipi = decoded.value();
  ++from.icr_writes;
  switch (apic::classify(ipi, apic::apic_mode::x2apic)) {
    case apic::ipi_kind::init: {
      machine& m = *from.m;
      for (unsigned i = 0; i < m.count; ++i) {
        cpu& t = m.cpus[i];
        const apic::apic_identity id{t.apic_id, apic::x2apic_logical_id(t.apic_id), apic::xapic_model::flat};
        if (!apic::is_destination(ipi, apic::apic_mode::x2apic, from.apic_id, id)) continue;
        ++t.virtual_inits;
        // A vCPU that waits for its SIPI is in the post-INIT state already; INIT of a
        // running vCPU (CPU hot-unplug, a guest reset) would need it stopped first.
        if (t.mp != hvkit::x86::mp_state::wait_for_sipi)
          kprintf("HVKIT SMP vcpu=%u virtual init of a running vcpu from vcpu=%u: not carried out\n", t.index,
                  from.index);
      }
      return core::msr_hook::done;
    }
    case apic::ipi_kind::init_level_deassert: return core::msr_hook::done;  // changes nothing (SDM 11.6.1)
    case apic::ipi_kind::startup: ++from.sipis_sent; break;
    default: break;
  }
  wrmsr(0x830, v);  // the same IPI on the processor's own x2APIC
  return core::msr_hook::done;
}

}  // namespace hv::smp
