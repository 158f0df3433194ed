// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM on every processor (smp/smp.hpp): each processor enables
// SVM with its own host save area, runs its own VMCB with an ASID of its own allocator, and
// an application processor's vCPU is started by the guest's start-up IPI.
//
// SVM has no guest wait-for-SIPI state (AMD APM Vol. 2 15.17 and the INIT intercept, Table
// B-1; svm/init_sipi.hpp): an AP's processor stays outside its guest, in the hypervisor,
// until the guest's BSP sends the AP's vCPU a start-up IPI. That ICR write is intercepted
// (smp/smp_ipi.cpp, machine::virtual_sipi), the target's `pending_sipi` set; the target's
// processor then loads the state x86/init_sipi.hpp gives after INIT and SIPI (real mode,
// CS = vector << 8, base vector << 12, IP 0) into its VMCB and enters the guest there. Real
// mode is a legal guest state under nested paging (APM 15.25.3: with nested paging the guest
// may run with paging disabled, CR0.PG = 0, including real mode).
//
// Every VMCB has the INIT intercept (APM 15.17: a physical INIT in a guest with the intercept
// set is #VMEXIT(INIT), exit code 63h, instead of the processor's INIT under the hypervisor);
// the guest's INITs never reach a physical APIC here, so none is expected.
#include "svm_internal.hpp"

#include <hvkit/svm/init_sipi.hpp>
#include <hvkit/svm/segment.hpp>
#include <hvkit/svm/skip.hpp>
#include <hvkit/svm/vcpu_asid.hpp>

#include "../linux/linux_profile.hpp"
#include "../smp/smp.hpp"
#include "svm_smp.hpp"

extern "C" void svm_vmrun(hv::vmx::guest_regs* regs, std::uint64_t vmcb_pa, std::uint64_t host_save_pa,
                          std::uint64_t host_if);

namespace hv::svm {

void attach(smp::cpu& c, core::page_pool& pool) { c.svm = &make<cpu_state>(pool); }

bool enable_ap(smp::cpu&) {
  // APM 15.4 "Enabling SVM", on this processor: EFER.SVME (and NXE: nested entries use the
  // host's paging mode, 15.25.5); its own VM_HSAVE_PA (15.30.4: per processor) when its
  // cpu_state is there (start_cpu).
  const auto e81 = cpuid(0x80000001);
  if (((e81.ecx >> 2) & 1) == 0) return false;
  x86::efer efer{rdmsr(x86::msr::ia32_efer)};
  efer |= x86::efer::svme;
  if ((e81.edx >> 20) & 1) efer |= x86::efer::nxe;
  wrmsr(x86::msr::ia32_efer, efer.raw());
  // The guest's XSETBV is executed on the host: CR4.OSXSAVE here too.
  if ((cpuid(1).ecx >> 26) & 1) write_cr4(read_cr4() | x86::cr4::osxsave.raw());
  return true;
}

void start_cpu(smp::cpu& c) {
  cpu_state& s = *c.svm;
  const cpuid_ns::svm_info& host_svm = s.host->svm;
  wrmsr(x86::msr::amd_vm_hsave_pa, pa(s.hsave));
  const bool clean = host_svm.features.test(cpuid_ns::svm_features::vmcb_clean);
  s.slot.tracked = sv::clean_tracker<sv::vmcb_view>{s.slot.view, clean};
  s.pcpu = sv::physical_cpu<counted_ibpb>{c.index, host_svm.nasid,
                                          host_svm.features.test(cpuid_ns::svm_features::flush_by_asid),
                                          sv::ibpb_policy::skip_same_guest,
                                          counted_ibpb{&c.ibpb_barriers, ((cpuid(0x80000008).ebx >> 12) & 1) != 0}};
  s.asid = {};
  s.last = nullptr;
}

void write_reset_state(smp::cpu& c, const x86::reset_state& s) {
  // Attributes: the VMX access-rights layout of x86::reset_state compressed into the VMCB's
  // 12 bits (APM 15.5.1 "segment state"; svm/segment.hpp).
  current_vmcb vmcb{&c.svm->slot};  // this processor's vCPU
  auto seg = [&vmcb](sv::segment sg, const x86::segment_value& v) {
    sv::store_segment(vmcb, sg, {x86::selector{v.selector}, sv::from_access_rights_layout(v.access_rights), v.limit,
                                 v.base});
  };
  seg(sv::segment::cs, s.cs);
  seg(sv::segment::ss, s.ss);
  seg(sv::segment::ds, s.ds);
  seg(sv::segment::es, s.es);
  seg(sv::segment::fs, s.fs);
  seg(sv::segment::gs, s.gs);
  seg(sv::segment::ldtr, s.ldtr);
  seg(sv::segment::tr, s.tr);
  sv::write(vmcb, fld::gdtr_base, s.gdtr.base);
  sv::write(vmcb, fld::gdtr_limit, static_cast<std::uint32_t>(s.gdtr.limit));
  sv::write(vmcb, fld::idtr_base, s.idtr.base);
  sv::write(vmcb, fld::idtr_limit, static_cast<std::uint32_t>(s.idtr.limit));
  sv::write(vmcb, fld::cpl, 0);
  // The VMCB's CR0 is the guest's own (no fixed bits under SVM); EFER with SVME, which
  // VMRUN requires (15.5.1) and the guest never sees (guest_efer()).
  sv::write(vmcb, fld::cr0, s.cr0_value);
  sv::write(vmcb, fld::cr3, x86::cr3{s.cr3});
  sv::write(vmcb, fld::cr4, s.cr4_value);
  sv::write(vmcb, fld::cr2, s.cr2);
  sv::write(vmcb, fld::efer, s.efer_value | x86::efer::svme);
  sv::write(vmcb, fld::dr6, s.dr6);
  sv::write(vmcb, fld::dr7, s.dr7);
  sv::write(vmcb, fld::rflags, x86::rflags{s.rflags});
  sv::write(vmcb, fld::rip, s.rip);
  sv::write(vmcb, fld::rsp, 0);
  sv::write(vmcb, fld::rax, 0);
  sv::write(vmcb, fld::g_pat, 0x0007040600070406ull);  // the power-on PAT (APM Vol. 2, 7.8.2)
  // Table 10-1: the general-purpose registers are 0 but EDX (the processor signature).
  c.st.regs = guest_regs{};
  c.st.regs[x86::gpr::rdx] = s.rdx;
  c.st.guest_efer = s.efer_value.raw();
  c.st.mmu = pg::mmu_context::make(s.cr0_value, s.cr4_value, s.efer_value, x86::gpa{s.cr3});
}

std::uint32_t wait_for_sipi(smp::cpu& c) {
  std::uint32_t v;
  while ((v = __atomic_load_n(&c.pending_sipi, __ATOMIC_ACQUIRE)) == 0) asm volatile("pause");
  return v & 0xFF;
}

namespace {
/// Before a VMRUN of `slot` (identity `id`) on processor `c`: the library's per-processor
/// ASID allocator and IBPB tracker (svm/vcpu_asid.hpp) decide the ASID, TLB_CONTROL and the
/// barrier; the switch is counted (same guest or another one).
void prepare(smp::cpu& c, vmcb_slot& slot, sv::vcpu_asid& asid, const sv::vmcb_identity& id) {
  cpu_state& s = *c.svm;
  smp::note_control_block_switch(c, id.vmcb, id.vm);
  const sv::vmrun_setup su = s.pcpu.prepare_vmrun(asid, id);
  const auto pending = static_cast<sv::tlb_control>(sv::read(slot.view, fld::tlb_control));
  sv::set_asid(slot.tracked, su.asid, su.control == sv::tlb_control::do_nothing ? pending : su.control);
  if (su.clear_clean_bits) slot.tracked.invalidate();
}
}  // namespace

void prepare_vmrun(smp::cpu& c) {
  cpu_state& s = *c.svm;
  prepare(c, s.slot, s.asid, {pa(s.slot.page), 1, c.index});  // guest 1 (Linux), vCPU c.index
}

void vmrun_on(smp::cpu& c) {
  cpu_state& s = *c.svm;
  vmrun(c.st.regs, s.slot, s.host_save, s.last);
}

void second_guest_npt(smp::machine& m) {
  // The host's 4-level format (APM 15.25.5), every level user and writable (nested accesses
  // are user accesses): PML4 -> PDPT -> PD -> PT, guest 2's five pages.
  using pg::pte;
  const pte urw = pte::present | pte::writable | pte::user;
  auto& t = m.sg.second_stage;
  for (auto& table : t)
    for (auto& e : table) e = 0;
  for (unsigned level = 0; level < 3; ++level) t[level][0] = pte::make(x86::gpa{pa(t[level + 1])}, urw).raw();
  for (unsigned i = 0; i < smp::second_guest_pages; ++i) t[3][i] = pte::make(x86::gpa{pa(m.sg.ram[i])}, urw).raw();
  m.sg.root = pa(t[0]);
}

void second_guest_excursion(smp::cpu& c) {
  cpu_state& s = *c.svm;
  smp::second_guest_state& sg = c.sg;
  if (!sg.ready) {
    // Guest 2's VMCBs start as a copy of this processor's Linux VMCB taken while the Linux
    // vCPU is in 64-bit mode (its intercepts, permission maps and segment state: a valid
    // 64-bit guest, APM 15.5.1), then guest 2's own CR3 (its page tables at GPA 0), nested
    // CR3, RSP, RFLAGS (IF = 0) and no event or interrupt shadow.
    if (sv::ip_width_of(s.slot.view) != x86::ip_width::w64) return;
    for (unsigned j = 0; j < 2; ++j) {
      s.sg_page[j] = s.page;
      vmcb_slot& b = s.sg_slot[j];
      sv::write(b.tracked, fld::cr3, x86::cr3{0});
      sv::write(b.tracked, fld::n_cr3, c.m->sg.root);
      sv::write(b.tracked, fld::rsp, 0);
      sv::write(b.tracked, fld::rflags, x86::rflags{0x2});
      sv::write(b.tracked, fld::event_injection, 0);
      sv::write(b.tracked, fld::interrupt_state, 0);
      s.sg_asid[j] = {};
    }
    sg.ready = true;
  }
  __atomic_store_n(&sg.seq, sg.seq + 1, __ATOMIC_RELEASE);  // odd: counts changing
  for (unsigned j = 0; j < 2; ++j) {
    vmcb_slot& b = s.sg_slot[j];
    prepare(c, b, s.sg_asid[j], {pa(b.page), smp::second_guest_vm, c.index * 2 + j});
    sv::write(b.tracked, fld::rip, smp::second_guest_code_gpa);  // every slice from the start
    sg.regs[j][x86::gpr::rbx] = smp::second_guest_counter_gpa(c, j);
    if (s.last != &b) b.tracked.invalidate();  // clean bits count only for the VMCB run last
    b.tracked.prepare_vmrun();
    s.last = &b;
    svm_vmrun(&sg.regs[j], pa(b.page), pa(s.host_save), 0);
    const std::uint64_t code = sv::read(b.view, fld::exit_code);
    if (code != sv::raw(exit_code::vmmcall)) {
      ++sg.unexpected;
      sg.unexpected_reason = code;
    }
    ++sg.slices[j];
  }
  ++sg.excursions;
  __atomic_store_n(&sg.seq, sg.seq + 1, __ATOMIC_RELEASE);
}

}  // namespace hv::svm
