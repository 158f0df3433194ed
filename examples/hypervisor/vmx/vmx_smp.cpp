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
  // SDM Vol. 3C 24.7: IA32_FEATURE_CONTROL (per processor), the CR0/CR4 fixed bits, VMXON:
  // this processor's own capability MSRs (an AP runs this before it is given the run).
  const auto caps = hvkit::vmx::vmx_capabilities::read([](std::uint32_t m) { return rdmsr(m); });
  std::uint64_t fc = rdmsr(x86::msr::ia32_feature_control);
  if ((fc & feature_control_lock) == 0) wrmsr(x86::msr::ia32_feature_control, fc | feature_control_lock | feature_control_vmxon_outside_smx);
  else if ((fc & feature_control_vmxon_outside_smx) == 0) return false;
  write_cr0((read_cr0() | caps.cr0_fixed0) & caps.cr0_fixed1);
  write_cr4((read_cr4() | caps.cr4_fixed0 | x86::cr4::vmxe.raw()) & caps.cr4_fixed1);
  // The guest's XSETBV is executed on the host: CR4.OSXSAVE there.
  if ((cpuid(1).ecx >> 26) & 1) write_cr4(read_cr4() | x86::cr4::osxsave.raw());
  *reinterpret_cast<std::uint32_t*>(c.vmxon) = caps.revision_id();
  return hvkit::vmx::hw::vmxon(x86::hpa{reinterpret_cast<std::uint64_t>(c.vmxon)}).has_value();
}

bool load_vmcs(cpu& c) {
  namespace v = hvkit::vmx;
  const std::uint64_t vmcs = reinterpret_cast<std::uint64_t>(c.vmcs);
  *reinterpret_cast<std::uint32_t*>(c.vmcs) = vmx_host_of(c).caps.revision_id();
  // The processor's lifecycle model and IBPB tracker (vmx/vmcs_lifecycle.hpp): a real IBPB
  // (IA32_PRED_CMD) where CPUID.(EAX=07H,ECX=0):EDX[26] enumerates it, counted either way. The
  // Linux vCPU's VMCS is guest 1's; its first entry (vmx_enter's VMLAUNCH) follows at once.
  const bool ibpb = (cpuid(7, 0).edx >> 26) & 1;
  c.vmx_pcpu = v::physical_cpu<core::counting_barrier>{c.index, v::ibpb_policy::skip_same_guest,
                                                       core::counting_barrier{&c.ibpb_barriers, ibpb}};
  c.vmcs_linux = v::vmcs_state{vmcs};
  if (!c.vmx_pcpu.clear(c.vmcs_linux) || !c.vmx_pcpu.load(c.vmcs_linux, 1, c.index) || !c.vmx_pcpu.enter(c.vmcs_linux))
    return false;
  note_control_block_switch(c, vmcs, 1);
  return v::hw::vmclear(x86::hpa{vmcs}) && v::hw::vmptrld(x86::hpa{vmcs});
}

bool vmx_second_guest_ept(machine& m) {
  // 4-level EPT (SDM Vol. 3C 29.3.2): PML4 -> PDPT -> PD -> PT, guest 2's five pages RWX, WB.
  namespace v = hvkit::vmx;
  const auto ec = v::ept_capabilities_from(vmx_host_of(m.cpus[0]).caps.ept_vpid_cap);
  const v::ept_permissions rwx{true, true, true, false};
  constexpr auto wb = hvkit::paging::ept_memory_type::wb;
  auto& t = m.sg.second_stage;
  for (auto& table : t)
    for (auto& e : table) e = 0;
  auto addr = [](const void* p) { return x86::hpa{reinterpret_cast<std::uint64_t>(p)}; };
  for (unsigned level = 0; level < 3; ++level) {
    auto e = v::make_ept_table_entry(addr(t[level + 1]), rwx, ec);
    if (!e) return false;
    t[level][0] = e.value().raw();
  }
  for (unsigned i = 0; i < second_guest_pages; ++i) {
    auto leaf = v::make_ept_leaf(addr(m.sg.ram[i]), v::ept_level::pte, rwx, wb, ec);
    if (!leaf) return false;
    t[3][i] = leaf.value().raw();
  }
  auto eptp = v::make_eptp(addr(t[0]), wb, 4, false, ec);
  if (!eptp) return false;
  m.sg.root = eptp.value().raw();
  return true;
}

namespace {
/// The current VMCS as guest 2's control block on processor `c`: 64-bit mode on its own page
/// tables (CR3 = GPA 0) and EPT, RFLAGS.IF = 0, every I/O and MSR access exiting, the host
/// state of this processor (GS base: its `cpu`).
bool setup_second_guest_vmcs(cpu& c) {
  namespace v = hvkit::vmx;
  const vmx_host& h = vmx_host_of(c);
  const hvkit::vmx::vmx_capabilities& vcaps = h.caps;
  const auto pin = v::adjust_controls(vcaps.pin_caps(), v::pin_based{});
  const auto proc = v::adjust_controls(vcaps.primary_caps(), v::primary_proc_based::unconditional_io_exiting |
                                                                 v::primary_proc_based::activate_secondary_controls);
  const auto proc2 = v::adjust_controls(vcaps.secondary_caps(), v::secondary_proc_based::enable_ept);
  const auto exitc = v::adjust_controls(vcaps.exit_caps(), v::exit_controls::host_address_space_size |
                                                               v::exit_controls::save_ia32_efer | v::exit_controls::load_ia32_efer |
                                                               v::exit_controls::save_ia32_pat | v::exit_controls::load_ia32_pat);
  const auto entry = v::adjust_controls(vcaps.entry_caps(), v::entry_controls::ia32e_mode_guest | v::entry_controls::load_ia32_efer |
                                                                v::entry_controls::load_ia32_pat);
  if (!write_controls(*c.st.results, pin, proc, proc2, exitc, entry, c.m->sg.root)) return false;
  const v::guest_owned_bits owned = v::make_guest_owned<policy_wp_guest_owned>(v::cr_mask_features{true, c.st.cpu->model.cr4_allowed});
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  if (!write_guest_crs(h, owned, cr0, x86::cr4::pae, 0)) return false;
  write_host_state(true);
  vmwrite(fields::host_gs_base, reinterpret_cast<std::uint64_t>(&c));
  write_flat_guest_state({0x10, 0x18, 0x20, true, 0, 0, 0x2F, 0, 0, 0, second_guest_code_gpa,
                          x86::efer::lme | x86::efer::lma});
  vmwrite(fields::guest_ia32_pat, 0x0007040600070406ull);
  return true;
}
}  // namespace

void vmx_second_guest_excursion(cpu& c) {
  namespace v = hvkit::vmx;
  second_guest_state& sg = c.sg;
  __atomic_store_n(&sg.seq, sg.seq + 1, __ATOMIC_RELEASE);  // odd: counts changing
  bool ok = true;
  for (unsigned j = 0; j < 2 && ok; ++j) {
    v::vmcs_state& b = c.vmcs_sg[j];
    const x86::hpa block{reinterpret_cast<std::uint64_t>(c.sg_vmcs[j])};
    if (!sg.ready) {  // first use: a clear VMCS (SDM Vol. 3C 25.11.3)
      *reinterpret_cast<std::uint32_t*>(c.sg_vmcs[j]) = vmx_host_of(c).caps.revision_id();
      b = v::vmcs_state{block.value()};
      ok = c.vmx_pcpu.clear(b).has_value() && v::hw::vmclear(block);
    }
    // VMPTRLD through the model: the IBPB decision of this processor's tracker.
    ok = ok && c.vmx_pcpu.load(b, second_guest_vm, c.index * 2 + j).has_value() && v::hw::vmptrld(block);
    if (!ok) break;
    note_control_block_switch(c, block.value(), second_guest_vm);
    if (!sg.ready && !setup_second_guest_vmcs(c)) {
      ok = false;
      break;
    }
    vmwrite(fields::guest_rip, second_guest_code_gpa);  // every slice from the start
    // ... with no blocking: on an AP's processor Bochs 2.7 saves "blocking by SMI" and "by
    // NMI" (0CH) at every exit, guest 2's as well (erratum bochs_smi_blocking_after_sipi;
    // measured: its VMRESUMEs failed with exit reason 33, SDM Vol. 3C 27.3.1.5), counted.
    if (vmread(fields::guest_interruptibility_state) & 4u) ++c.smi_blocking_cleared;
    vmwrite(fields::guest_interruptibility_state, 0);
    sg.regs[j][x86::gpr::rbx] = second_guest_counter_gpa(c, j);
    const auto entry = c.vmx_pcpu.enter(b);
    const int rc = entry ? ::vmx_enter(&sg.regs[j], entry.value() == v::vmx_instruction::vmresume ? 1 : 0, &c.sg_st,
                                    &vmx_host_of(c))
                        : 1;
    if (rc != 0) {
      kprintf("HVKIT ERROR smp cpu=%u: entry of guest 2's block %u failed (rc=%d, VM-instruction error %llu)\n",
              c.index, j, rc, (unsigned long long)(rc == 2 ? vmread(fields::vm_instruction_error) : 0));
      ok = false;
      break;
    }
    ++sg.slices[j];
  }
  sg.ready = true;
  // Back to the Linux vCPU's VMCS (launched: the stub's VMRESUME continues it).
  const x86::hpa linux_vmcs{c.vmcs_linux.id};
  if (!c.vmx_pcpu.load(c.vmcs_linux, 1, c.index) || !v::hw::vmptrld(linux_vmcs))
    kprintf("HVKIT ERROR smp cpu=%u: VMPTRLD of the Linux VMCS after guest 2\n", c.index);
  note_control_block_switch(c, linux_vmcs.value(), 1);
  if (!ok) sg.failed = true;
  ++sg.excursions;
  __atomic_store_n(&sg.seq, sg.seq + 1, __ATOMIC_RELEASE);
}

bool vmx_second_guest_exit(cpu& c, std::uint32_t basic_reason) {
  if (basic_reason != static_cast<std::uint32_t>(hvkit::vmx::exit_reason::vmcall)) {
    ++c.sg.unexpected;
    c.sg.unexpected_reason = basic_reason;
  }
  return false;  // the slice is over: vmx_enter returns to the excursion
}

void write_reset_state(cpu& c, const x86::reset_state& s, hvkit::vmx::activity_state a) {
  namespace v = hvkit::vmx;
  const hvkit::vmx::vmx_capabilities& caps = vmx_host_of(c).caps;
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
  const std::uint32_t signature = c.st.cpu->cpuid.answer(1, 0, {}).eax;
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
