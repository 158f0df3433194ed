// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, VMX on every processor (smp/smp.hpp): VMX root operation per
// processor, the reset-state guest of an application processor's vCPU, and its INIT and
// SIPI exits.
//
// The guest's local APIC is the processor's own (passed through: xAPIC page mapped by EPT,
// x2APIC MSRs not intercepted), so the guest's INIT and start-up IPIs are real ones. They
// reach the target processor in VMX non-root operation, where they are VM exits, never
// acted on by the processor (SDM Vol. 3C 26.2: "INIT signals cause VM exits. A logical
// processor performs none of the operations normally associated with these events."
// "SIPIs cause VM exits. If a logical processor is not in the wait-for-SIPI activity state
// when a SIPI arrives, no VM exit occurs and the SIPI is discarded."). An AP's vCPU is
// entered in the wait-for-SIPI activity state (IA32_VMX_MISC[8]); its INIT exit loads the
// post-INIT state (x86::state_after_init) and waits again, its SIPI exit loads the start-up
// state (x86::apply_sipi) and makes it active: the SDM's MP protocol, applied by the
// hypervisor to the vCPU instead of by the processor to itself.
#include "../smp/smp.hpp"

#include <hvkit/vmx/capabilities.hpp>
#include <hvkit/vmx/cr_access.hpp>
#include <hvkit/vmx/init_sipi.hpp>

namespace hv::smp {

bool vmx_on(cpu& c) {
  // SDM Vol. 3C 24.7: IA32_FEATURE_CONTROL (per processor), the CR0/CR4 fixed bits, VMXON.
  std::uint64_t fc = rdmsr(x86::msr::ia32_feature_control);
  if ((fc & feature_control_lock) == 0) wrmsr(x86::msr::ia32_feature_control, fc | feature_control_lock | feature_control_vmxon_outside_smx);
  else if ((fc & feature_control_vmxon_outside_smx) == 0) return false;
  write_cr0((read_cr0() | caps.cr0_fixed0) & caps.cr0_fixed1);
  write_cr4((read_cr4() | caps.cr4_fixed0 | x86::cr4::vmxe.raw()) & caps.cr4_fixed1);
  // The guest's XSETBV is executed on the host: CR4.OSXSAVE there.
  if ((cpuid(1).ecx >> 26) & 1) write_cr4(read_cr4() | x86::cr4::osxsave.raw());
  *reinterpret_cast<std::uint32_t*>(c.vmxon) = vcaps.revision_id();
  return hvkit::vmx::hw::vmxon(x86::hpa{reinterpret_cast<std::uint64_t>(c.vmxon)}).has_value();
}

bool load_vmcs(cpu& c) {
  const std::uint64_t vmcs = reinterpret_cast<std::uint64_t>(c.vmcs);
  *reinterpret_cast<std::uint32_t*>(c.vmcs) = vcaps.revision_id();
  return hvkit::vmx::hw::vmclear(x86::hpa{vmcs}) && hvkit::vmx::hw::vmptrld(x86::hpa{vmcs});
}

void write_reset_state(cpu& c, const x86::reset_state& s, hvkit::vmx::activity_state a) {
  namespace v = hvkit::vmx;
  auto seg = [](auto sel, auto base, auto limit, auto ar, const x86::segment_value& sv) {
    vmwrite(sel, sv.selector);
    vmwrite(base, sv.base);
    vmwrite(limit, sv.limit);
    vmwrite(ar, sv.access_rights);
  };
  seg(fields::guest_cs_selector, fields::guest_cs_base, fields::guest_cs_limit, fields::guest_cs_access_rights, s.cs);
  seg(fields::guest_ss_selector, fields::guest_ss_base, fields::guest_ss_limit, fields::guest_ss_access_rights, s.ss);
  seg(fields::guest_ds_selector, fields::guest_ds_base, fields::guest_ds_limit, fields::guest_ds_access_rights, s.ds);
  seg(fields::guest_es_selector, fields::guest_es_base, fields::guest_es_limit, fields::guest_es_access_rights, s.es);
  seg(fields::guest_fs_selector, fields::guest_fs_base, fields::guest_fs_limit, fields::guest_fs_access_rights, s.fs);
  seg(fields::guest_gs_selector, fields::guest_gs_base, fields::guest_gs_limit, fields::guest_gs_access_rights, s.gs);
  seg(fields::guest_ldtr_selector, fields::guest_ldtr_base, fields::guest_ldtr_limit, fields::guest_ldtr_access_rights, s.ldtr);
  seg(fields::guest_tr_selector, fields::guest_tr_base, fields::guest_tr_limit, fields::guest_tr_access_rights, s.tr);
  vmwrite(fields::guest_gdtr_base, s.gdtr.base);
  vmwrite(fields::guest_gdtr_limit, s.gdtr.limit);
  vmwrite(fields::guest_idtr_base, s.idtr.base);
  vmwrite(fields::guest_idtr_limit, s.idtr.limit);
  // CR0/CR4: the guest's values in the read shadows, the VMX fixed bits forced in the real
  // ones, PE and PG excepted with unrestricted guest (SDM Vol. 3C 27.3.1.1).
  const v::cr_vmcs_values cr0 = v::cr0_values_for(s.cr0_value, {caps.cr0_fixed0, caps.cr0_fixed1}, true);
  const v::cr_vmcs_values cr4 = v::cr_values_for(s.cr4_value.raw(), caps.cr4_fixed0, caps.cr4_fixed1);
  vmwrite(fields::guest_cr0, cr0.actual);
  vmwrite(fields::cr0_read_shadow, cr0.read_shadow);
  vmwrite(fields::guest_cr4, cr4.actual);
  vmwrite(fields::cr4_read_shadow, cr4.read_shadow);
  vmwrite(fields::guest_cr3, s.cr3);
  vmwrite(fields::guest_dr7, s.dr7);
  vmwrite(fields::guest_ia32_debugctl, 0);
  vmwrite(fields::guest_rsp, 0);
  vmwrite(fields::guest_rip, s.rip);
  vmwrite(fields::guest_rflags, s.rflags);
  vmwrite(fields::guest_pending_debug_exceptions, 0);
  vmwrite(fields::guest_interruptibility_state, 0);
  vmwrite(fields::guest_activity_state, static_cast<std::uint32_t>(a));
  vmwrite(fields::guest_ia32_efer, s.efer_value.raw());
  const v::entry_controls ec{static_cast<std::uint32_t>(vmread(fields::vm_entry_controls))};
  vmwrite(fields::vm_entry_controls, (s.efer_value.test(x86::efer::lma) ? ec | v::entry_controls::ia32e_mode_guest
                                                                        : ec & ~v::entry_controls::ia32e_mode_guest)
                                         .raw());
  // Table 10-1: the general-purpose registers are 0 but EDX (the processor signature).
  c.st.regs = guest_regs{};
  c.st.regs[x86::gpr::rdx] = s.rdx;
  c.st.guest_efer = s.efer_value.raw();
  c.st.mmu = hvkit::paging::mmu_context::make(s.cr0_value, s.cr4_value, s.efer_value, x86::gpa{s.cr3});
}

namespace {
/// The state the vCPU got from its last INIT (the SIPI starts from it).
x86::reset_state after_init_of(cpu& c) {
  const std::uint32_t signature = guest_policy.answer(1, 0, {}).eax;
  const std::uint64_t mask = vmread(fields::cr0_guest_host_mask);
  const x86::cr0 cr0{(vmread(fields::guest_cr0) & ~mask) | (vmread(fields::cr0_read_shadow) & mask)};
  static_cast<void>(c);
  return x86::state_after_init(signature, cr0, x86::efer{vmread(fields::guest_ia32_efer)});
}
}  // namespace

bool handle_init_sipi(cpu& c, hvkit::vmx::exit_reason r) {
  namespace v = hvkit::vmx;
  switch (v::on_exit(r, c.index == 0)) {
    case v::init_sipi_action::none: return false;
    case v::init_sipi_action::enter_wait_for_sipi:
      if (c.just_started && vmread(fields::guest_rip) == 0 &&
          vmread(fields::guest_cs_selector) == (c.sipi_vector << 8)) {
        // The guest's INIT arrived before its SIPI (the MP protocol's order), while this
        // vCPU waited for a SIPI; Bochs 2.7 holds an INIT pending in the wait-for-SIPI
        // state and delivers it once the SIPI has started the vCPU. The vCPU has not run
        // an instruction since: the INIT belongs before the SIPI, where it changes nothing
        // (the vCPU was in the post-INIT state). Dropped, counted.
        ++c.held_inits;
        // The INIT exit also saved the interruptibility state Bochs keeps while waiting for
        // a SIPI (blocking by SMI and by NMI, 0xC), which VM entry refuses outside SMM (SDM
        // Vol. 3C 27.3.1.5): the start-up state is written again, as the SIPI left it.
        x86::reset_state started = after_init_of(c);
        x86::apply_sipi(started, static_cast<std::uint8_t>(c.sipi_vector));
        const std::uint64_t saved_interruptibility = vmread(fields::guest_interruptibility_state);
        write_reset_state(c, started, v::activity_state::active);
        kprintf("HVKIT SMP vcpu=%u init after its sipi dropped: activity=%llu interruptibility=0x%llx rflags=0x%llx "
                "cs_ar=0x%llx\n", c.index, (unsigned long long)vmread(fields::guest_activity_state),
                (unsigned long long)saved_interruptibility,
                (unsigned long long)vmread(fields::guest_rflags), (unsigned long long)vmread(fields::guest_cs_access_rights));
        return true;
      }
      ++c.init_exits;
      write_reset_state(c, after_init_of(c), v::activity_state::wait_for_sipi);
      c.mp = x86::on_init(false);
      return true;
    case v::init_sipi_action::start_at_sipi_vector: {
      ++c.sipi_exits;
      x86::reset_state s = after_init_of(c);
      c.sipi_vector = v::sipi_vector(vmread(fields::exit_qualification));
      x86::apply_sipi(s, static_cast<std::uint8_t>(c.sipi_vector));
      write_reset_state(c, s, v::activity_state::active);
      c.mp = x86::mp_state::running;
      c.tsc_started = rdtsc();
      c.just_started = true;
      kprintf("HVKIT SMP vcpu=%u sipi vector=0x%llx inits=%llu sipis=%llu\n", c.index,
              (unsigned long long)c.sipi_vector, (unsigned long long)c.init_exits, (unsigned long long)c.sipi_exits);
      return true;
    }
    case v::init_sipi_action::restart_at_reset:
      // INIT of the guest's bootstrap processor: a guest reset, which this hypervisor does
      // not carry out (it ends the run, as a reset through the reset ports does).
      kprintf("HVKIT SMP vcpu=%u init of the guest's bootstrap processor\n", c.index);
      return false;
  }
  return false;
}

void fix_smi_blocking(cpu& c) {
  // Bochs 2.7 enters the wait-for-SIPI state with SMI and NMI masked and, once a SIPI exit
  // started the vCPU, saves "blocking by SMI" and "blocking by NMI" (0xC) at its later exits
  // (measured: the AP's first exit after its SIPI, at RIP 1098H of Linux's trampoline, then
  // VM entry failed with reason 33). The guest is never in SMM here, so blocking by SMI is
  // impossible for it: cleared (blocking by NMI is left to the guest's next IRET).
  if (c.index == 0 || c.sipi_exits == 0) return;
  const std::uint64_t s = vmread(fields::guest_interruptibility_state);
  if (s & 4u) {
    vmwrite(fields::guest_interruptibility_state, s & ~std::uint64_t{4});
    ++c.smi_blocking_cleared;
  }
}

}  // namespace hv::smp
