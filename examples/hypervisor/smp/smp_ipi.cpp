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
// discarded by the processor itself, as the SDM says for VMX non-root operation. Under SVM
// (machine::virtual_sipi) there is no guest wait-for-SIPI state to deliver a real SIPI to:
// the start-up IPI is virtual as well, the target's processor waits outside its guest.
#include "smp.hpp"

#include <hvkit/x86/apic_destination.hpp>
#include <hvkit/x86/apic_icr.hpp>
#include <hvkit/x86/pv_send_ipi.hpp>

namespace hv::smp {

namespace {
namespace apic = hvkit::x86::apic;

/// SVM: the start-up IPI to every destination vCPU that waits for one; the target leaves the
/// wait-for-SIPI state here, so a second SIPI of the protocol finds it running and is
/// discarded, as a processor discards a SIPI it does not wait for (SDM Vol. 3A 9.4.4.1: the
/// second SIPI is ignored by a processor the first one started). The target's processor,
/// outside its guest until then, starts the vCPU at vector << 12 (svm/svm_smp.cpp).
void deliver_virtual_sipi(cpu& t, const apic::ipi_request& ipi) {
  if (!hvkit::x86::sipi_starts(t.mp)) return;
  t.mp = hvkit::x86::mp_state::running;
  __atomic_store_n(&t.pending_sipi, 0x100u | ipi.vector, __ATOMIC_RELEASE);
}

/// The vCPUs an INIT or start-up IPI of `from` reaches. In xAPIC mode the targets' logical
/// IDs are their processors' (not readable from here): a logical-destination INIT or SIPI
/// reaches none and is reported (Linux sends both in physical destination mode).
template <class F>
void for_each_target(cpu& from, const apic::ipi_request& ipi, apic::apic_mode mode, F&& f) {
  if (mode == apic::apic_mode::xapic && ipi.dest_mode == apic::destination_mode::logical &&
      ipi.shorthand == apic::destination_shorthand::none) {
    kprintf("HVKIT SMP vcpu=%u logical-destination INIT/SIPI in xAPIC mode: not delivered\n", from.index);
    return;
  }
  machine& m = *from.m;
  for (unsigned i = 0; i < m.count; ++i) {
    cpu& t = m.cpus[i];
    const apic::apic_identity id{t.apic_id, mode == apic::apic_mode::x2apic ? apic::x2apic_logical_id(t.apic_id) : 0,
                                 apic::xapic_model::flat};
    if (apic::is_destination(ipi, mode, from.apic_id, id)) f(t);
  }
}

/// One IPI of vCPU `from`: INIT applied virtually, with machine::virtual_sipi the start-up
/// IPI too; `send()` issues it on the processor's own APIC otherwise.
template <class Send>
void deliver(cpu& from, const apic::ipi_request& ipi, apic::apic_mode mode, Send&& send) {
  switch (apic::classify(ipi, mode)) {
    case apic::ipi_kind::init:
      for_each_target(from, ipi, mode, [&](cpu& t) {
        ++t.virtual_inits;
        // A vCPU that waits for its SIPI is in the post-INIT state already; INIT of a
        // running vCPU (CPU hot-unplug, a guest reset) would need it stopped first.
        if (t.mp != hvkit::x86::mp_state::wait_for_sipi)
          kprintf("HVKIT SMP vcpu=%u virtual init of a running vcpu from vcpu=%u: not carried out\n", t.index,
                  from.index);
      });
      return;
    case apic::ipi_kind::init_level_deassert: return;  // changes nothing (SDM 11.6.1)
    case apic::ipi_kind::startup:
      ++from.sipis_sent;
      if (from.m->virtual_sipi) {
        for_each_target(from, ipi, mode, [&](cpu& t) { deliver_virtual_sipi(t, ipi); });
        return;
      }
      break;
    default: break;
  }
  send();
}

/// A register of this processor's xAPIC (the machine's xAPIC page: IA32_APIC_BASE).
volatile std::uint32_t& xapic_register(const machine& m, std::uint64_t offset) {
  return *reinterpret_cast<volatile std::uint32_t*>(m.xapic_base + offset);
}
}  // namespace

core::msr_hook icr_write(cpu& from, std::uint64_t v) {
  const auto decoded = apic::decode_x2apic_icr(v);
  if (!decoded) return core::msr_hook::gp;  // reserved bits: #GP(0) (SDM 11.12.1.3)
  ++from.icr_writes;
  deliver(from, decoded.value(), apic::apic_mode::x2apic, [&] { wrmsr(0x830, v); });  // the same IPI, own x2APIC
  return core::msr_hook::done;
}

bool xapic_platform::mmio_read(hvkit::x86::gpa a, unsigned size, std::uint64_t& out) {
  // Reads do not exit (the page is mapped read-only); one that does is done as it is.
  const std::uint64_t base = from->m->xapic_base;
  if (a.value() < base || a.value() + size > base + 0x1000 || size != 4) return foreign = true, false;
  out = xapic_register(*from->m, a.value() - base);
  return true;
}

bool xapic_platform::mmio_write(hvkit::x86::gpa a, unsigned size, std::uint64_t v) {
  // The registers are 32 bits wide at 16-byte offsets (SDM Vol. 3A 11.4.1, Table 11-1).
  const machine& m = *from->m;
  if (a.value() < m.xapic_base || a.value() + size > m.xapic_base + 0x1000 || size != 4) return foreign = true, false;
  const std::uint64_t offset = a.value() - m.xapic_base;
  const auto low = static_cast<std::uint32_t>(v);
  if (offset != 0x300) {
    xapic_register(m, offset) = low;
    return true;
  }
  // The ICR's high half (310H, the destination) was written before, through this platform.
  const apic::ipi_request ipi = apic::decode_xapic_icr(low, xapic_register(m, 0x310));
  ++from->icr_writes;
  ++from->xapic_writes;
  deliver(*from, ipi, apic::apic_mode::xapic, [&] { xapic_register(m, 0x300) = low; });
  return true;
}
static_assert(hvkit::emulate::platform<xapic_platform>);

std::uint64_t send_ipi_hypercall(cpu& from, std::uint64_t a0, std::uint64_t a1, std::uint64_t a2, std::uint64_t a3,
                                 bool long_mode) {
  namespace pv = hvkit::x86::pv_ipi;
  ++from.pv_ipi_calls;
  const auto decoded = pv::decode_send_ipi(a0, a1, a2, a3, long_mode);
  if (!decoded) return pv::return_value(hvkit::unexpected(decoded.error()));
  // The processor's APIC mode is the guest's (IA32_APIC_BASE is passed through): EXTD, bit 10.
  const bool x2apic = (rdmsr(0x1B) >> 10) & 1;
  const apic::apic_mode mode = x2apic ? apic::apic_mode::x2apic : apic::apic_mode::xapic;
  machine& m = *from.m;
  unsigned delivered = 0;
  decoded.value().for_each_destination([&](const apic::ipi_request& r) {
    // Only APIC IDs of this guest's vCPUs are destinations (KVM counts the IPIs delivered).
    bool exists = false;
    for (unsigned i = 0; i < m.count; ++i) exists = exists || m.cpus[i].apic_id == r.destination;
    if (!exists || (!x2apic && r.destination > 0xFF)) return;
    ++delivered;
    deliver(from, r, mode, [&] {
      if (x2apic) {
        wrmsr(0x830, r.to_icr(apic::apic_mode::x2apic));
        return;
      }
      const std::uint32_t high = xapic_register(m, 0x310);  // the guest's own ICR high, kept
      xapic_register(m, 0x310) = r.destination << 24;
      xapic_register(m, 0x300) = static_cast<std::uint32_t>(r.to_icr(apic::apic_mode::xapic));
      xapic_register(m, 0x310) = high;
    });
  });
  from.pv_ipi_targets += delivered;
  return pv::return_value(delivered);
}

}  // namespace hv::smp
