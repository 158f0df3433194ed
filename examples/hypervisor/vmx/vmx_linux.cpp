// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, the Linux guest's VMX part (linux/linux.cpp is the vendor-
// neutral rest): the identity EPT, the MSR and I/O bitmaps, the VMCS for the kernel's 64-bit
// entry and the VM entries. Exits go through the core's exit loop with the Linux guest
// profile (linux/linux_profile.hpp).
#include "../linux/linux_profile.hpp"

#include <hvkit/vmx/io_bitmap.hpp>
#include <hvkit/vmx/msr_bitmap.hpp>

#include "vmx_backend.hpp"
#include "../smp/smp.hpp"
#include <hvkit/vmx/init_sipi.hpp>

namespace hv::lx {

/// The Linux guest's EPT and its MSR and I/O bitmaps, which every vCPU's VMCS points at: taken
/// from the boot's page pool once (prepare_vmx), reached through the run (linux_state::vmx_part).
struct vmx_pages {
  // ---- EPT: identity over guest RAM, the low megabyte and MMIO; the hypervisor unmapped ----
  alignas(4096) std::uint64_t ept_l4[512];
  alignas(4096) std::uint64_t ept_l3[512];
  alignas(4096) std::uint64_t ept_l2[4][512];
  alignas(4096) std::uint64_t ept_l1_low[512];  // [0, 2 MiB) in 4 KiB pages: only [0, 1 MiB) mapped
  hvkit::vmx::msr_bitmap msr = hvkit::vmx::msr_bitmap::all_exit();
  hvkit::vmx::io_bitmaps io{};
  std::uint64_t eptp;
  vmx_host host;  ///< the capabilities (read_capabilities; no conformance pages)
};

namespace {

/// Memory type of the 2 MiB (or 4 KiB) frame at `a`: write-back if the firmware's map says
/// RAM, ACPI or NVS there, uncacheable otherwise (MMIO). With EPT the EPT memory type takes
/// the place of the MTRRs (SDM Vol. 3C 29.3.7.2).
hvkit::paging::ept_memory_type frame_type(const boot_info& b, std::uint64_t a, std::uint64_t size) {
  return ram_like(b, a, size) ? hvkit::paging::ept_memory_type::wb : hvkit::paging::ept_memory_type::uc;
}

bool build_linux_ept(const linux_state& ls) {
  namespace v = hvkit::vmx;
  vmx_pages& p = *ls.vmx_part;
  const auto ec = v::ept_capabilities_from(p.host.caps.ept_vpid_cap, core::host_maxphyaddr());
  const v::ept_permissions rwx{true, true, true, false};
  auto table = [&](const void* next) {
    return v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(next)}, rwx, ec);
  };
  auto l4 = table(p.ept_l3);
  auto eptp = v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(p.ept_l4)}, hvkit::paging::ept_memory_type::wb, 4,
                           false, ec);
  if (!l4 || !eptp) return false;
  p.ept_l4[0] = l4.value().raw();
  for (int g = 0; g < 4; ++g) {
    auto l3 = table(p.ept_l2[g]);
    if (!l3) return false;
    p.ept_l3[g] = l3.value().raw();
  }
  auto low = table(p.ept_l1_low);
  if (!low) return false;
  p.ept_l2[0][0] = low.value().raw();
  for (std::uint64_t a = 0; a < hidden_base; a += 0x1000) {
    auto leaf = v::make_ept_leaf(x86::hpa{a}, v::ept_level::pte, rwx, frame_type(ls.boot, a, 0x1000), ec, false);
    if (!leaf) return false;
    p.ept_l1_low[a >> 12] = leaf.value().raw();
  }
  for (std::uint64_t a = hidden_end; a < second_stage_end; a += 2 * mib) {
    auto leaf = v::make_ept_leaf(x86::hpa{a}, v::ept_level::pde, rwx, frame_type(ls.boot, a, 2 * mib), ec, false);
    if (!leaf) return false;
    p.ept_l2[a >> 30][(a >> 21) & 511] = leaf.value().raw();
  }
  p.eptp = eptp.value().raw();
  return true;
}

// ---- MSR and I/O bitmaps ----------------------------------------------------------------
void build_bitmaps(const linux_state& ls) {
  hvkit::vmx::msr_bitmap& msr_bits = ls.vmx_part->msr;
  hvkit::vmx::io_bitmaps& io_bits = ls.vmx_part->io;
  namespace m = x86::msr;
  // No exit: state the VMCS switches (FS/GS base, SYSENTER, PAT with the load/save PAT
  // controls) or the host never uses (the SYSCALL MSRs, KERNEL_GS_BASE); the local APIC,
  // which is passed through with its device (APIC base reads, x2APIC registers when the
  // policy offers x2APIC, TSC deadline when it offers that).
  for (std::uint32_t msr : msrs_passed_through) static_cast<void>(msr_bits.pass_through(msr));
  for (std::uint32_t msr : msrs_read_passed_through)
    static_cast<void>(msr_bits.set_intercept(msr, hvkit::vmx::msr_access::read, false));
  static_cast<void>(msr_bits.pass_through(m::ia32_pat));
  static_cast<void>(msr_bits.set_intercept(0x10, hvkit::vmx::msr_access::read, false));  // IA32_TSC reads
  if (ls.cpu->msrs.tsc_deadline) static_cast<void>(msr_bits.pass_through(m::ia32_tsc_deadline));
  if (ls.cpu->cpuid.has(cpuid_ns::feat::x2apic))
    for (std::uint32_t msr = 0x800; msr <= 0x8FF; ++msr) static_cast<void>(msr_bits.pass_through(msr));
  // ... except writes of the x2APIC ICR: the guest's IPIs (smp/smp_ipi.cpp).
  static_cast<void>(msr_bits.set_intercept(0x830, hvkit::vmx::msr_access::write, true));
  for (std::uint16_t port : io_intercepts) io_bits.set_intercept(port, true);
}

/// A VM entry of vCPU `c` that failed (rc 1: VMfailInvalid, 2: VMfailValid; 0: the run
/// ended by an exit): reported, the run's end reason set.
void report_entry_failure(linux_state& ls, const smp::cpu& c, int rc) {
  if (rc == 0) return;
  kprintf("HVKIT ERROR linux: VM entry failed on cpu %u (%s, VM-instruction error %llu)\n", c.index,
          rc == 1 ? "VMfailInvalid" : "VMfailValid", (unsigned long long)(rc == 2 ? vmread(fields::vm_instruction_error) : 0));
  ls.end_reason = "vm_entry_failed";
}

// ---- the VMCS for the kernel's 64-bit entry ----------------------------------------------
/// The current VMCS for vCPU `c`: the BSP's at the kernel's 64-bit entry, an AP's in the
/// post-INIT state waiting for a SIPI (unrestricted guest: its SIPI starts it in real mode).
bool setup_linux_vmcs(smp::cpu& c) {
  namespace v = hvkit::vmx;
  const vmx_host& h = vmx_host_of(c);
  const hvkit::vmx::vmx_capabilities& vcaps = h.caps;
  const bool ap = c.index != 0;
  // Shadow paging (run --linux --shadow, one vCPU): no EPT; every #PF, CR3 access and INVLPG
  // exits (docs/shadow-mmu.md, "Integration"), as for the conformance guest (vmx_setup.cpp).
  const bool shadow = core::shadow::enabled();
  const auto pin = v::adjust_controls(vcaps.pin_caps(), v::pin_based{});
  const auto proc = v::adjust_controls(
      vcaps.primary_caps(), v::primary_proc_based::use_msr_bitmaps | v::primary_proc_based::use_io_bitmaps |
                                v::primary_proc_based::activate_secondary_controls |
                                (shadow ? v::primary_proc_based::cr3_load_exiting | v::primary_proc_based::cr3_store_exiting |
                                              v::primary_proc_based::invlpg_exiting
                                        : v::primary_proc_based{}));
  const auto ept = shadow ? v::secondary_proc_based{} : v::secondary_proc_based::enable_ept;
  const auto proc2 = v::adjust_controls(vcaps.secondary_caps(),
                                        ap ? ept | v::secondary_proc_based::unrestricted_guest : ept);
  const auto exitc = v::adjust_controls(vcaps.exit_caps(), v::exit_controls::host_address_space_size |
                                                               v::exit_controls::save_ia32_efer |
                                                               v::exit_controls::load_ia32_efer |
                                                               v::exit_controls::save_ia32_pat |
                                                               v::exit_controls::load_ia32_pat);
  const auto entry = v::adjust_controls(vcaps.entry_caps(), (ap ? v::entry_controls{} : v::entry_controls::ia32e_mode_guest) |
                                                                v::entry_controls::load_ia32_efer |
                                                                v::entry_controls::load_ia32_pat);
  const vmx_pages& maps = *c.lx.run->vmx_part;
  if (!write_controls(*c.st.results, pin, proc, proc2, exitc, entry, maps.eptp)) return false;
  vmwrite(fields::msr_bitmap, reinterpret_cast<std::uint64_t>(maps.msr.bytes().data()));
  vmwrite(fields::io_bitmap_a, reinterpret_cast<std::uint64_t>(maps.io.a().data()));
  vmwrite(fields::io_bitmap_b, reinterpret_cast<std::uint64_t>(maps.io.b().data()));
  // With shadow paging every #PF exits (PFEC mask = match = 0, SDM Vol. 3C 26.2).
  if (shadow) vmwrite(fields::exception_bitmap, 1u << 14);

  // CR0/CR4: the guest-owned policy (CR0.TS, CR0.WP, and the CR4 bits that never affect
  // translation, CET among them, as far as the guest may set them).
  const v::cr_mask_features features{!shadow, c.st.cpu->model.cr4_allowed};
  const v::guest_owned_bits owned = v::make_guest_owned<policy_wp_guest_owned>(features);
  const x86::cr0 guest_cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  if (!write_guest_crs(h, owned, guest_cr0, x86::cr4::pae, page_tables_gpa)) {
    kprintf("HVKIT ERROR linux: a VMX fixed CR bit would be guest-owned\n");
    return false;
  }
  if (!ap)
    kprintf("HVKIT LINUX cr0_guest_host_mask=0x%016llx cr4_guest_host_mask=0x%016llx\n",
            (unsigned long long)owned.cr0_mask(), (unsigned long long)owned.cr4_mask());

  // Host state as for the conformance runs, with PAT (the exit controls load it); GS base
  // = this processor's smp::cpu (smp::this_cpu after every exit).
  write_host_state(true);
  vmwrite(fields::host_gs_base, reinterpret_cast<std::uint64_t>(&c));
  if (ap) {
    // Power-on state (Table 10-1 RESET column: CR0 60000010H), then as after INIT: the
    // vCPU waits for the guest's SIPI (IA32_VMX_MISC[8]: the activity state is enterable).
    const std::uint32_t signature = c.st.cpu->cpuid.answer(1, 0, {}).eax;
    const x86::reset_state power_on = x86::state_after_reset(signature);
    smp::write_reset_state(c, x86::state_after_init(signature, power_on.cr0_value, power_on.efer_value),
                           hvkit::vmx::activity_state::wait_for_sipi);
    vmwrite(fields::guest_ia32_sysenter_cs, 0);
    vmwrite(fields::guest_ia32_sysenter_esp, 0);
    vmwrite(fields::guest_ia32_sysenter_eip, 0);
    vmwrite(fields::vmcs_link_pointer, ~0ull);
    vmwrite(fields::guest_ia32_pat, 0x0007040600070406ull);
    return true;
  }
  // Guest state: the boot protocol's 64-bit entry (__BOOT_CS 0x10, __BOOT_DS 0x18, a TSS at
  // 0x20; RIP = startup_64, interrupts off as the protocol requires).
  write_flat_guest_state({0x10, 0x18, 0x20, true, tss_gpa, gdt_gpa, 6 * 8 - 1, 0, 0, 0, kernel_gpa + 0x200,
                          x86::efer::lme | x86::efer::lma});
  vmwrite(fields::guest_ia32_pat, 0x0007040600070406ull);  // the power-on PAT (SDM Vol. 3A 13.12.4)
  c.st.guest_efer = (x86::efer::lme | x86::efer::lma).raw();
  c.st.mmu = hvkit::paging::mmu_context::make(guest_cr0, x86::cr4::pae, x86::efer::lme | x86::efer::lma,
                                              x86::gpa{page_tables_gpa});
  if (shadow) {
    // The guest runs on the shadow root built from the boot tables; the real EFER.NXE is 1
    // (paging::shadow::host_role()), the guest's EFER is the shadow MMU's.
    core::shadow::use_linux_guest(*c.lx.run->shadow, hidden_base, hidden_end, second_stage_end);
    vmwrite(fields::guest_ia32_efer, (x86::efer::lme | x86::efer::lma | x86::efer::nxe).raw());
    vmwrite(fields::guest_cr3, core::shadow::begin(c.st, *c.lx.run->shadow, {guest_cr0, x86::cr4::pae, x86::efer::lme | x86::efer::lma},
                                                   x86::cr3{page_tables_gpa})
                                   .value());
  }
  return true;
}

/// An AP's vCPU: its VMCS (waiting for the guest's SIPI), then the guest until it stops.
[[noreturn]] void run_ap(smp::cpu& c) {
  linux_state& ls = *c.lx.run;
  c.lx.misc_enable = misc_enable_value;
  c.st.cfg = &linux_run;
  c.st.results = ls.results;
  c.st.cpu = ls.cpu;
  c.st.status = run_status::running;
  c.st.guest_xcr0 = 1;
  c.st.x2apic_id = c.apic_id;
  if (!smp::load_vmcs(c) || !setup_linux_vmcs(c)) {
    kprintf("HVKIT ERROR linux: the VMCS of cpu %u\n", c.index);
    c.phase = smp::cpu_phase::failed;
    for (;;) asm volatile("cli; hlt");
  }
  c.phase = smp::cpu_phase::guest;
  const int rc = ::vmx_enter(&c.st.regs, 0, &c.st, &vmx_host_of(c));
  report_entry_failure(ls, c, rc);
  finish(ls, c.index);
}

}  // namespace

bool handle_exit(vmx_backend& b) {
  smp::cpu& cpu = smp::this_cpu();
  // An exit of guest 2, the second guest of this processor (smp/second_guest.cpp).
  if (&b.st != &cpu.st) return smp::vmx_second_guest_exit(cpu, b.reason.basic_raw());
  // The guest's INIT and SIPI to this vCPU (vmx/vmx_smp.cpp).
  if (!b.reason.entry_failure() && smp::handle_init_sipi(cpu, b.reason.basic())) return true;
  cpu.just_started = false;
  if (cpu.index != 0 && cpu.st.exits.total < 24)  // an AP's way from its SIPI to long mode, for the log
    kprintf("HVKIT SMP vcpu=%u exit reason=%u rip=0x%llx qualification=0x%llx rax=0x%llx rcx=0x%llx rdx=0x%llx\n",
            cpu.index, b.reason.basic_raw(), (unsigned long long)vmread(fields::guest_rip),
            (unsigned long long)vmread(fields::exit_qualification), (unsigned long long)b.regs.gprs()[x86::gpr::rax],
            (unsigned long long)b.regs.gprs()[x86::gpr::rcx], (unsigned long long)b.regs.gprs()[x86::gpr::rdx]);
  vmx_backend mine{b.regs, b.events, b.reason, cpu.st, b.host};
  core::context c = smp::context_of(cpu);
  const bool resume = core::handle_exit(mine, c, linux_profile{*cpu.lx.run});
  smp::fix_smi_blocking(cpu);
  if (resume && cpu.lx.run->m->count > 1 && smp::second_guest_due(cpu)) {
    must(b.regs.flush(), cpu.st);  // the Linux VMCS's registers, before another VMCS is current
    smp::vmx_second_guest_excursion(cpu);
  }
  return resume;
}

}  // namespace hv::lx

const hv::vmx_host& hv::vmx_host_of(const smp::cpu& c) { return c.lx.run->vmx_part->host; }

namespace hv::lx {

bool prepare_vmx(linux_state& ls, core::guest_cpu& cpu) {
  ls.vmx_part = ::new (ls.pool->take_bytes(sizeof(vmx_pages), alignof(vmx_pages))) vmx_pages{};
  read_capabilities(ls.vmx_part->host);
  const hvkit::vmx::vmx_capabilities& vcaps = ls.vmx_part->host.caps;
  // Every processor: started now, each waits in VMX root operation for `go`.
  smp::machine& m = smp::start_processors(*ls.pool, smp::vmx_on);
  smp::cpu& bsp = m.cpus[0];
  ls.m = &m;
  for (unsigned i = 0; i < m.count; ++i) m.cpus[i].lx.run = &ls;  // before any AP runs its vCPU
  bsp.lx.misc_enable = misc_enable_value;
  bsp.st.cfg = &linux_run;
  bsp.st.results = ls.results;
  bsp.st.cpu = &cpu;
  bsp.st.status = run_status::running;
  bsp.st.guest_xcr0 = 1;
  bsp.st.x2apic_id = bsp.apic_id;
  const bool wfs = hvkit::vmx::activity_state_supported(vcaps.misc, hvkit::vmx::activity_state::wait_for_sipi);
  kprintf("HVKIT SMP vmx_misc=0x%llx wait_for_sipi=%d\n", (unsigned long long)vcaps.misc, wfs ? 1 : 0);
  bool ok = build_cpuid_policy(*ls.results, ls.vmx_part->host, cpu, &ls, m.count) && smp::vmx_on(bsp) &&
            build_linux_ept(ls);
  if (ok && m.count > 1) {  // guest 2 on every processor (smp/second_guest.cpp)
    smp::second_guest_init(m, true);
    // Guest 2's exits reach the exit stub with c.sg_st: the Linux profile's handle_exit (above)
    // tells them from the Linux vCPU's by that state.
    for (unsigned i = 0; i < m.count; ++i) {
      m.cpus[i].sg_st.cfg = &linux_run;
      m.cpus[i].sg_st.results = ls.results;
    }
    ok = smp::vmx_second_guest_ept(m);
  }
  if (ok) result(*ls.results, "vmx_enable", true, "revision=0x%x cpus=%u", vcaps.revision_id(), m.count);
  if (ok && m.count > 1 && core::shadow::enabled()) {  // one shadow MMU: one vCPU (core/shadow_paging.hpp)
    kprintf("HVKIT ERROR linux: shadow paging runs one vCPU, not %u\n", m.count);
    ok = false;
  }
  if (ok && m.count > 1 && !wfs) {
    kprintf("HVKIT ERROR linux: SMP needs the wait-for-SIPI activity state (IA32_VMX_MISC[8])\n");
    ok = false;
  }
  return ok;
}

bool enter_vmx(linux_state& ls) {
  smp::machine& m = *ls.m;
  smp::cpu& bsp = m.cpus[0];
  build_bitmaps(ls);
  if (!smp::load_vmcs(bsp) || !setup_linux_vmcs(bsp)) return false;
  if (vmx_host_of(bsp).caps.ept_vpid_cap & (1ull << 26)) static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  // The APs: their VMCS and the wait-for-SIPI guest, before the guest's BSP can send INIT.
  m.ap_run = run_ap;
  __atomic_store_n(&m.go, 1u, __ATOMIC_RELEASE);
  for (unsigned i = 1; i < m.count; ++i)
    while (m.cpus[i].phase != smp::cpu_phase::guest && m.cpus[i].phase != smp::cpu_phase::failed) asm volatile("pause");
  bsp.phase = smp::cpu_phase::guest;
  const int rc = ::vmx_enter(&bsp.st.regs, 0, &bsp.st, &vmx_host_of(bsp));
  report_entry_failure(ls, bsp, rc);
  return rc == 0;
}

}  // namespace hv::lx
