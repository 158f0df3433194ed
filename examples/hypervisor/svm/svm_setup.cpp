// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM bring-up (AMD APM Vol. 2, chapter 15): the guest's CPUID
// policy, enabling SVM, the nested page table and the VMCB of a fresh run.
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/cpuid/svm.hpp>
#include <hvkit/emulate/vmcb_context.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/svm/controls.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/event_injection.hpp>
#include <hvkit/svm/exit_code.hpp>
#include <hvkit/svm/exit_info.hpp>
#include <hvkit/svm/ibpb.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/svm/npf.hpp>
#include <hvkit/svm/register_file.hpp>
#include <hvkit/svm/segment.hpp>
#include <hvkit/svm/skip.hpp>
#include <hvkit/svm/tlb.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../hv.hpp"
#include "../core/exit_loop.hpp"
#include "../linux/linux.hpp"
#include "../core/shadow_paging.hpp"

extern "C" void svm_gp_skip();

namespace hv::svm {

// ---- CPUID policy ---------------------------------------------------------------------

/// The guest's CPUID policy: host features pass through except SVM and VMX (no nested
/// virtualization offered), XSAVES (IA32_XSS is not virtualized here) and WAITPKG; the KVM
/// signature with the "realtime" hint, as on VMX.
bool build_policy(core::guest_cpu& g, core::tally& t, const lx::linux_state* for_linux, unsigned cpus) {
  cpuid_ns::table<128> host_cpuid{};
  namespace feat = cpuid_ns::feat;
  if (!cpuid_ns::read_all(cpuid_ns::host_source{}, host_cpuid)) {
    result(t, "cpuid_policy", false, "reason=host_table_full");
    return false;
  }
  cpuid_ns::hypervisor_caps hvc{};
  hvc.passthrough = cpuid_ns::feature_set::all();
  for (const cpuid_ns::feature f : {feat::svm, feat::vmx, feat::xsaves, feat::waitpkg}) hvc.passthrough.reset(f);
  cpuid_ns::policy_config cfg{};
  cfg.hints = cpuid_ns::feature_set{cpuid_ns::kvm::hints::realtime};
  cfg.topo.cores_per_package = cpus;  // a vCPU per processor: N cores in one package
  if (for_linux) cfg.deny |= lx::denied_features();  // the Linux guest's normalization
  if (for_linux) hvc.emulated |= lx::emulated_features(*for_linux);  // PV_SEND_IPI on request (linux/)
  auto p = cpuid_ns::build_policy(host_cpuid, hvc, cfg);
  if (!p) {
    result(t, "cpuid_policy", false, "reason=build_policy_error_%u", static_cast<unsigned>(p.error()));
    return false;
  }
  g.cpuid = p.value();
  // The MSR policy and the guest CPU model: the CPU's own CR4 has no fixed bits under SVM,
  // every defined bit the policy allows may be set.
  const bool consistent = core::complete_guest_cpu(g, x86::cr4::defined);
  const cpuid_ns::regs e1 = g.cpuid.answer(0x80000001, 0, {});
  result(t, "cpuid_policy", consistent && !g.cpuid.has(feat::svm) && ((e1.ecx >> 2) & 1) == 0,
         "kvm_base=0x%x svm_hidden=%d msr_policy_consistent=%d", g.cpuid.kvm_base(),
         ((e1.ecx >> 2) & 1) == 0 ? 1 : 0, consistent ? 1 : 0);
  return true;
}

// ---- the conformance runs' pages --------------------------------------------------------------
conformance_pages take_conformance_pages(core::page_pool& pool) {
  conformance_pages p{};
  p.a1 = &make<sv::vmcb_page>(pool);
  p.a2 = &make<sv::vmcb_page>(pool);
  p.b = &make<sv::vmcb_page>(pool);
  p.msrpm = &take_intercept_all<sv::msr_permission_map>(pool);
  p.iopm = &take_intercept_all<sv::io_permission_map>(pool);
  conformance_npt& n = p.npt;
  for (std::uint64_t** t : {&n.pml4, &n.pdpt, &n.pd, &n.pd_alias, &n.unmap_pt, &n.alias_pdpt, &n.alias_pd, &n.alias_pt,
                            &n.b_pml4, &n.b_pdpt, &n.b_pd})
    *t = pool.take_table();
  p.sched_idt = pool.take_table();  // 2 * 64 entries of the 512
  p.shadow = core::shadow::take(pool, false);
  return p;
}

// ---- bring-up ------------------------------------------------------------------------------
/// RDMSR that survives #GP (svm_gp_skip in the host IDT for the time, which sets ESI): false
/// if it faulted.
static bool rdmsr_safe(std::uint32_t m, std::uint64_t& v) {
  std::uint64_t* const host_idt = current_host_tables().idt;
  const std::uint64_t lo = host_idt[2 * 13], hi = host_idt[2 * 13 + 1];
  const auto h = reinterpret_cast<std::uint64_t>(&svm_gp_skip);
  host_idt[2 * 13] = (h & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((h >> 16) & 0xFFFF) << 48);
  host_idt[2 * 13 + 1] = h >> 32;
  std::uint32_t eax, edx, faulted;
  asm volatile("xor %%esi, %%esi\n\trdmsr" : "=a"(eax), "=d"(edx), "=&S"(faulted) : "c"(m) : "memory");
  v = (std::uint64_t{edx} << 32) | eax;
  host_idt[2 * 13] = lo;
  host_idt[2 * 13 + 1] = hi;
  if (faulted == 0) return true;
  v = 0;
  return false;
}

/// APM 15.4 "Enabling SVM": VM_CR.SVMDIS must be clear; EFER.SVME = 1; VM_HSAVE_PA.
bool enable(svm_host& h, core::tally& t) {
  std::uint64_t vmcr = 0;
  const bool has_vmcr = rdmsr_safe(x86::msr::amd_vm_cr, vmcr);
  const auto e8a = cpuid(0x8000000A);
  h.svm = cpuid_ns::decode_svm({e8a.eax, e8a.ebx, e8a.ecx, e8a.edx});
  const cpuid_ns::svm_info& host_svm = h.svm;
  kprintf("HVKIT INFO svm_revision=%u asids=%u svm_features_edx=0x%x vm_cr=0x%llx\n", host_svm.revision,
          host_svm.nasid, host_svm.features.raw(), (unsigned long long)vmcr);
  if (!has_vmcr) {
    // APM 15.30.1: VM_CR exists on every CPU with SVM. Bochs 2.7 raises #GP on RDMSR of it.
    ++t.errata;
    kprintf("HVKIT ERRATUM vm_cr_msr_not_implemented rdmsr_0xc0010114=#GP\n");
  }
  if (vmcr & (1u << 4)) {
    result(t, "svm_enable", false, "reason=vm_cr_svmdis");
    return false;
  }
  if (host_svm.nasid < 2) {
    result(t, "svm_enable", false, "reason=no_guest_asid nasid=%u", host_svm.nasid);
    return false;
  }
  // SVME, and NXE: nested entries use the host's paging mode, NX needs EFER.NXE (15.25.5).
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  x86::efer efer{rdmsr(x86::msr::ia32_efer)};
  efer |= x86::efer::svme;
  if (nx) efer |= x86::efer::nxe;
  wrmsr(x86::msr::ia32_efer, efer.raw());
  wrmsr(x86::msr::amd_vm_hsave_pa, pa(h.hsave));
  h.asids = sv::asid_allocator{host_svm.nasid};
  const bool clean = host_svm.features.test(cpuid_ns::svm_features::vmcb_clean);
  using F = cpuid_ns::svm_features;
  result(t, "svm_enable", true, "nrips=%u npt=%u decode_assists=%u vmcb_clean=%u flush_by_asid=%u",
         host_svm.features.test(F::nrip_save) ? 1 : 0, host_svm.features.test(F::np) ? 1 : 0,
         host_svm.features.test(F::decode_assists) ? 1 : 0, clean ? 1 : 0,
         host_svm.features.test(F::flush_by_asid) ? 1 : 0);
  return true;
}

/// Nested page table (APM 15.25): the host's 4-level format; guest RAM [16 MiB, 32 MiB)
/// identity-mapped with 2 MiB pages, nothing else (the hypervisor's memory and the MMIO
/// device are not mapped: a guest access is a #NPF). Every nested access is checked as a
/// user access (15.25.5), so U/S = 1 at every level.
void build_npt(conformance_npt& npt) {
  constexpr std::uint64_t p = 1, rw = 2, us = 4, ps = 0x80;
  std::uint64_t *const pml4 = npt.pml4, *const pdpt = npt.pdpt, *const pd = npt.pd, *const pd_alias = npt.pd_alias;
  for (unsigned i = 0; i < 512; ++i) pml4[i] = pdpt[i] = pd[i] = 0;
  pml4[0] = pa(pdpt) | p | rw | us;
  pdpt[0] = pa(pd) | p | rw | us;
  for (std::uint64_t gpa = layout::guest_mem_base; gpa < layout::guest_mem_base + layout::guest_mem_size; gpa += 0x200000)
    pd[gpa >> 21] = gpa | p | rw | us | ps;
  // The PSE-36 alias: GPA 4 GiB + [28 MiB, 32 MiB) -> host [28 MiB, 32 MiB), where the
  // 32-bit guest's 4 MiB pages with PA bit 32 land.
  for (unsigned i = 0; i < 512; ++i) pd_alias[i] = 0;
  pdpt[hc::pse36_alias_gpa >> 30] = pa(pd_alias) | p | rw | us;
  for (std::uint64_t gpa = 0x1C00000; gpa < 0x2000000; gpa += 0x200000) pd_alias[gpa >> 21] = gpa | p | rw | us | ps;
}

/// A new VMCB in the current slot: zeroed, nothing of it cached (APM 15.15); the intercepts
/// every run has (CPUID, I/O and MSRs through the permission maps, SHUTDOWN, the SVM
/// instructions, VMMCALL) with `icpt`'s; the vCPU's ASID with a flush of every ASID's
/// entries at this VMRUN (the nested page table was rebuilt or edited since the last run,
/// 15.16.1); nested paging with `ncr3` (15.25.3). APM 15.5.1 lists the consistency checks
/// VMRUN makes: EFER.SVME set, the VMRUN intercept set, ASID non-zero, ...
void start_vmcb(sv::asid_allocator& asids, current_vmcb& vmcb, sv::intercept_set icpt, const sv::io_permission_map& io,
                const sv::msr_permission_map& msr, std::uint64_t ncr3) {
  std::uint8_t* const bytes = vmcb.cur().view.data();
  for (std::size_t i = 0; i < sv::vmcb_size; ++i) bytes[i] = 0;
  vmcb.cur().tracked.invalidate();  // a new VMCB: nothing may come from the processor's cache (15.15)
  using I = sv::intercept;
  for (I i : {I::cpuid, I::ioio_prot, I::msr_prot, I::shutdown, I::invlpga, I::vmrun, I::vmmcall, I::vmload,
              I::vmsave, I::stgi, I::clgi, I::skinit})
    icpt.set(i);
  icpt.store(vmcb);
  sv::write(vmcb, fld::iopm_base_pa, pa(&io));
  sv::write(vmcb, fld::msrpm_base_pa, pa(&msr));
  asids.assign(vmcb.cur().asid);
  sv::set_asid(vmcb, vmcb.cur().asid.asid, sv::tlb_control::flush_all);
  if (ncr3 == 0) return;  // no nested paging (run --shadow): the guest's CR3 is a shadow root
  sv::write(vmcb, fld::nested_control, sv::nested_control::np_enable::set(std::uint64_t{0}, true));
  sv::write(vmcb, fld::n_cr3, ncr3);
}

/// A flat guest's first state (hv::flat_guest, as the VMX backend's write_flat_guest_state
/// takes it): CS a 64-bit (or 32-bit) code segment, the data segments flat, TR a busy TSS,
/// no LDT, CPL 0, paging with `cr0`/`cr4`/`cr3`, the power-on PAT. Attributes: descriptor
/// bits 47:40 in 7:0 and 55:52 in 11:8 (APM 15.5.1 "segment state"). The vCPU's EFER and MMU
/// context follow the registers.
void write_flat_state(current_vmcb& vmcb, core::vcpu_state& st, const flat_guest& g, x86::cr0 cr0, x86::cr4 cr4,
                      std::uint64_t cr3) {
  namespace at = sv::attrib;
  constexpr std::uint16_t code_rx = 0xB, data_rw = 0x3, tss64_busy = 0xB;  // descriptor types (SDM 3.4.5.1, 3.5)
  const std::uint16_t cs_attr = g.long_mode ? at::g | at::l | at::p | at::s | code_rx    // 64-bit code, DPL 0
                                            : at::g | at::db | at::p | at::s | code_rx;  // 32-bit code, DPL 0
  sv::store_segment(vmcb, sv::segment::cs, {x86::selector{g.cs}, cs_attr, 0xFFFFFFFF, 0});
  for (sv::segment sg : {sv::segment::ss, sv::segment::ds, sv::segment::es, sv::segment::fs, sv::segment::gs})
    sv::store_segment(vmcb, sg, {x86::selector{g.ds}, at::g | at::db | at::p | at::s | data_rw, 0xFFFFFFFF, 0});
  sv::store_segment(vmcb, sv::segment::ldtr, {});
  sv::store_segment(vmcb, sv::segment::tr, {x86::selector{g.tr}, at::p | tss64_busy, 103, g.tss_base});
  sv::write(vmcb, fld::gdtr_limit, static_cast<std::uint32_t>(g.gdt_limit));
  sv::write(vmcb, fld::gdtr_base, g.gdt_base);
  sv::write(vmcb, fld::idtr_limit, static_cast<std::uint32_t>(g.idt_limit));
  sv::write(vmcb, fld::idtr_base, g.idt_base);
  sv::write(vmcb, fld::cpl, 0);
  st.guest_efer = g.efer.raw();
  sv::write(vmcb, fld::efer, g.efer | x86::efer::svme);  // SVME must be set (15.5.1)
  sv::write(vmcb, fld::cr0, cr0);
  sv::write(vmcb, fld::cr3, x86::cr3{cr3});
  sv::write(vmcb, fld::cr4, cr4);
  sv::write(vmcb, fld::dr6, 0xFFFF0FF0);
  sv::write(vmcb, fld::dr7, 0x400);
  sv::write(vmcb, fld::rflags, x86::rflags{0x2});
  sv::write(vmcb, fld::rip, g.rip);
  sv::write(vmcb, fld::rsp, g.rsp);
  sv::write(vmcb, fld::g_pat, 0x0007040600070406ull);  // the power-on PAT (APM Vol. 2, 7.8.2)
  st.mmu = pg::mmu_context::make(cr0, cr4, g.efer, x86::gpa{cr3});
}

/// The VMCB for a fresh run of the conformance guest: 64-bit mode (or the 32-bit guest),
/// flat segments matching its GDT, nested paging, the intercepts of the run.
void setup_vmcb(svm_host& h, const conformance_pages& cp, current_vmcb& vmcb, const hc::guest_header& g,
                const svm_run& r, core::vcpu_state& st) {
  const bool guest32 = r.base.guest_flags & hc::cfg_guest32;
  sv::intercept_set icpt;
  // CR0/CR4 from the run's guest-owned policy. CR4: every write exits (SVM has no CR4 mask;
  // on VMX the bits that feed translation are host-owned) and is done by the emulator with
  // the CR4 bits the CPUID policy allows. Not for the 32-bit guest under nested paging: its
  // CR4.PAE toggles stay native, the PAE check is the CPU's (a test set-up: paging::sync_cr0_role rebuilds the role
  // at the next emulated access, since it compares the whole role with the live registers).
  // Shadow paging (run --shadow --amd, core/shadow_paging.hpp): the same policies under
  // svm::make_cr_intercepts({.npt = false}) (CR0.WP never guest-owned, CR0/CR4 reads exit:
  // the real CR0.WP is 1), and MOV to/from CR3, INVLPG and #PF intercepted (docs/shadow-mmu.md).
  const bool shadow = core::shadow::enabled();
  const sv::cr_intercepts cr = !shadow ? r.cr
                               : r.base.wp_intercepted ? sv::make_cr_intercepts<policy_wp_intercepted>({.npt = false})
                                                       : sv::make_cr_intercepts<policy_wp_guest_owned>({.npt = false});
  cr.apply(icpt);
  if (guest32 && !shadow) icpt.clear(sv::cr_write(4));
  using I = sv::intercept;
  if (shadow)
    for (sv::intercept i : {sv::cr_read(3), sv::cr_write(3), I::invlpg, sv::exception(x86::vector::pf)}) icpt.set(i);
  icpt.set(I::hlt);
  if (r.scheduled) icpt.set(I::intr);  // the scheduled runs: timer interrupts end a slice
  if (r.base.dt_exiting)
    for (I i : {I::idtr_read, I::gdtr_read, I::ldtr_read, I::tr_read, I::idtr_write, I::gdtr_write, I::ldtr_write,
                I::tr_write})
      icpt.set(i);
  start_vmcb(h.asids, vmcb, icpt, *cp.iopm, *cp.msrpm, shadow ? 0 : pa(cp.npt.pml4));
  // V_INTR_MASKING (APM 15.21.1): the host's RFLAGS.IF, not the guest's, masks physical
  // interrupts; with the INTR intercept they exit.
  if (r.scheduled)
    sv::write(vmcb, fld::interrupt_control, sv::interrupt_control::v_intr_masking::set(std::uint64_t{0}, true));
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  const x86::efer efer = guest32 ? x86::efer{} : nx ? x86::efer::lme | x86::efer::lma | x86::efer::nxe
                                                    : x86::efer::lme | x86::efer::lma;
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  const x86::cr4 cr4 = guest32 ? x86::cr4::pse : x86::cr4::pae;  // 32-bit paging with 4 MiB pages
  write_flat_state(vmcb, st, {hc::guest_cs, hc::guest_ds, hc::guest_tr, !guest32, g.tss_base, g.gdt_base, g.gdt_limit, g.idt_base,
                    g.idt_limit, g.stack_top, g.entry, efer},
                   cr0, cr4, layout::guest_boot_pt_gpa);
  if (shadow) {
    // Shadow paging: the real EFER.NXE is 1 (paging::shadow::host_role()) and the guest runs
    // on the shadow root built from its boot tables; run.guest_efer keeps the guest's view.
    sv::write(vmcb, fld::efer, efer | x86::efer::svme | x86::efer::nxe);
    // The 32-bit guest runs on PAE-format shadow tables: the real CR4.PAE is 1, every CR4
    // access exits and the guest sees its own (core::shadow::guest_view_cr4()).
    sv::write(vmcb, fld::cr4, core::shadow::host_cr4(cr4));
    sv::write(vmcb, fld::cr3, x86::cr3{core::shadow::begin(st, *cp.shadow, {cr0, cr4, efer}, x86::cr3{layout::guest_boot_pt_gpa})
                                           .value()});
  }
}


}  // namespace hv::svm

