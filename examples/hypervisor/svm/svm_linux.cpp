// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, the Linux guest's SVM part (linux/linux.cpp is the vendor-
// neutral rest, vmx/vmx_linux.cpp the VMX one): the identity nested page table, the MSR and
// I/O permission maps, the VMCB for the kernel's 64-bit entry and the VMRUN loop. Exits go
// through the core's exit loop with the Linux guest profile (svm.cpp's handle_exit).
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/paging/pte.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/init_sipi.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../linux/linux_profile.hpp"
#include "../smp/smp.hpp"
#include "svm_smp.hpp"

namespace hv::svm {

unsigned exit_slot_code(unsigned s) { return s == 0x9F ? sv::raw(exit_code::npf) : s; }

}  // namespace hv::svm

namespace hv::lx {

/// The Linux guest's nested page table and its MSR and I/O permission maps, which every vCPU's
/// VMCB points at: taken from the boot's page pool once (prepare_svm), reached through the run
/// (linux_state::svm_part).
struct svm_pages {
  // ---- the nested page table: identity over guest RAM, the low megabyte and MMIO ----------
  // The host's 4-level format (APM 15.25.5); every nested access is a user access, so U/S = 1
  // at every level. No memory type is set: PAT index 0 (write-back) combined with the host's
  // MTRRs, which make MMIO uncacheable (15.25.8).
  alignas(4096) std::uint64_t npt_l4[512];
  alignas(4096) std::uint64_t npt_l3[512];
  alignas(4096) std::uint64_t npt_l2[4][512];
  alignas(4096) std::uint64_t npt_l1_low[512];   // [0, 2 MiB) in 4 KiB pages: only [0, 1 MiB) mapped
  alignas(4096) std::uint64_t npt_l1_apic[512];  // the 2 MiB around the xAPIC page, in 4 KiB pages
  hvkit::svm::msr_permission_map msrpm = hvkit::svm::msr_permission_map::intercept_all();
  hvkit::svm::io_permission_map iopm = hvkit::svm::io_permission_map::intercept_none();
};

namespace {

namespace sv = hvkit::svm;
namespace fld = hvkit::svm::fields;

/// The identity nested page table; `xapic_read_only`: the local APIC's page (`xapic`, from
/// IA32_APIC_BASE, SDM Vol. 3A 11.4.4) readable but not writable, so that each guest write to
/// an xAPIC register is a #NPF (APM 15.25.6) the hypervisor emulates (smp/smp_ipi.cpp). False
/// if that page is outside the table's 4 GiB.
bool build_linux_npt(svm_pages& p, bool xapic_read_only, std::uint64_t xapic) {
  using pg::pte;
  const pte urw = pte::present | pte::writable | pte::user;
  auto table = [&](const void* next) { return pte::make(x86::gpa{svm::pa(next)}, urw).raw(); };
  for (auto& e : p.npt_l4) e = 0;
  for (auto& e : p.npt_l3) e = 0;
  for (auto& t : p.npt_l2)
    for (auto& e : t) e = 0;
  p.npt_l4[0] = table(p.npt_l3);
  for (unsigned g = 0; g < 4; ++g) p.npt_l3[g] = table(p.npt_l2[g]);
  p.npt_l2[0][0] = table(p.npt_l1_low);
  for (std::uint64_t a = 0; a < 512 * 0x1000; a += 0x1000)
    p.npt_l1_low[a >> 12] = a < hidden_base ? pte::make(x86::gpa{a}, urw).raw() : 0;
  for (std::uint64_t a = hidden_end; a < second_stage_end; a += 2 * mib)
    p.npt_l2[a >> 30][(a >> 21) & 511] = pte::make_large(x86::gpa{a}, x86::page_size_2m, urw).raw();
  if (!xapic_read_only) return true;
  if (xapic >= 4 * 1024 * mib) return false;
  const std::uint64_t region = xapic & ~(2 * mib - 1);
  for (std::uint64_t i = 0; i < 512; ++i) {
    const std::uint64_t a = region + (i << 12);
    p.npt_l1_apic[i] = pte::make(x86::gpa{a}, a == xapic ? pte::present | pte::user : urw).raw();
  }
  p.npt_l2[region >> 30][(region >> 21) & 511] = table(p.npt_l1_apic);
  return true;
}

// ---- the permission maps -------------------------------------------------------------------
/// Every MSR exits except lx::msrs_passed_through (VMLOAD/VMSAVE move their guest values,
/// APM 15.5.2), reads of lx::msrs_read_passed_through, TSC reads and the x2APIC registers when the policy offers x2APIC (the local
/// APIC is passed through). PAT exits: the core reads and writes the VMCB's G_PAT, which is
/// the guest's PAT under nested paging (15.25.8). Only lx::io_intercepts of the ports exit.
void build_maps(const linux_state& ls) {
  sv::msr_permission_map& linux_msrpm = ls.svm_part->msrpm;
  sv::io_permission_map& linux_iopm = ls.svm_part->iopm;
  for (std::uint32_t m : msrs_passed_through) static_cast<void>(linux_msrpm.pass_through(m));
  for (std::uint32_t m : msrs_read_passed_through) static_cast<void>(linux_msrpm.set_intercept(m, sv::msr_access::read, false));
  static_cast<void>(linux_msrpm.set_intercept(0x10, sv::msr_access::read, false));  // TSC reads
  if (ls.cpu->cpuid.has(cpuid_ns::feat::x2apic))
    for (std::uint32_t m = 0x800; m <= 0x8FF; ++m) static_cast<void>(linux_msrpm.pass_through(m));
  // ... except writes of the x2APIC ICR: the guest's IPIs (smp/smp_ipi.cpp).
  static_cast<void>(linux_msrpm.set_intercept(0x830, sv::msr_access::write, true));
  for (std::uint16_t port : io_intercepts) linux_iopm.set_intercept(port, true);
}

/// The VMCB for the boot protocol's 64-bit entry, the same state the VMX part enters with:
/// __BOOT_CS 0x10, __BOOT_DS 0x18, a TSS at 0x20, the identity page tables, RIP = startup_64,
/// interrupts off. CR0.WP guest-owned (no CR0 write intercept under nested paging, APM
/// 15.9.1, svm::make_cr_intercepts), CR4 writes emulated; XSETBV exits (checked against the
/// policy's XCR0). No INTR intercept and V_INTR_MASKING clear: physical interrupts go to the
/// guest through its own IDT and RFLAGS.IF (15.21.1), as the devices are the guest's. No HLT
/// intercept: the guest's idle HLT waits for its own interrupts. INIT intercepted (svm/svm_smp.cpp).
/// An application processor's VMCB gets its guest state from the guest's start-up IPI.
/// Shadow paging (run --linux --shadow --amd, one processor): no nested paging, the intercepts
/// of svm::make_cr_intercepts({.npt = false}) (every CR0 write, CR0/CR4 reads: the real CR0.WP
/// is 1) and MOV to/from CR3, INVLPG and #PF, as for the conformance guest (svm_setup.cpp).
void setup_linux_vmcb(smp::cpu& c, linux_state& ls, bool ap) {
  svm::current_vmcb vmcb{&c.svm->slot};  // this processor's vCPU
  const bool shadow = core::shadow::enabled();
  const sv::cr_intercepts cr = shadow ? sv::make_cr_intercepts<policy_wp_guest_owned>({.npt = false})
                                      : sv::make_cr_intercepts<policy_wp_guest_owned>({.npt = true});
  sv::intercept_set icpt;
  cr.apply(icpt);
  icpt.set(sv::intercept::xsetbv);
  icpt.set(sv::init_intercept);
  if (shadow)
    for (sv::intercept i : {sv::cr_read(3), sv::cr_write(3), sv::intercept::invlpg, sv::exception(x86::vector::pf)})
      icpt.set(i);
  const svm_pages& maps = *ls.svm_part;
  svm::start_vmcb(c.svm->host->asids, vmcb, icpt, maps.iopm, maps.msrpm, shadow ? 0 : svm::pa(maps.npt_l4));
  if (ap) return;
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  const x86::efer efer = x86::efer::lme | x86::efer::lma;
  svm::write_flat_state(vmcb, this_state(ls), {0x10, 0x18, 0x20, true, tss_gpa, gdt_gpa, 6 * 8 - 1, 0, 0, 0, kernel_gpa + 0x200, efer},
                        cr0, x86::cr4::pae, page_tables_gpa);
  if (shadow) {  // the real EFER.NXE is 1 (paging::shadow::host_role()), CR3 the shadow root
    core::shadow::use_linux_guest(*ls.shadow, hidden_base, hidden_end, second_stage_end);
    sv::write(vmcb, fld::efer, efer | x86::efer::svme | x86::efer::nxe);
    sv::write(vmcb, fld::cr3, x86::cr3{core::shadow::begin(this_state(ls), *ls.shadow, {cr0, x86::cr4::pae, efer}, x86::cr3{page_tables_gpa}).value()});
  }
}

/// QEMU 7.2 TCG erratum (docs/linux-guest.md): with the XSETBV intercept set (VMCB offset
/// 010h bit 13, APM Vol. 2 Table B-1; exit code 8Dh) the guest's XSETBV does not exit: the
/// processor executes it and the guest's XCR0 changes behind the hypervisor's back. Bochs
/// exits as the APM says. Seen at the next exit: the real XCR0 (the host runs with the
/// guest's, it never uses extended state itself) differs from the one the hypervisor
/// answered CPUID with. The hypervisor then takes the real one (the guest's CPUID 0Dh and
/// OSXSAVE answers follow it); the first case is printed, every case counted (in the run's
/// state, ls). Only a CPUID exit answers from that view: the XGETBV is done there (and once
/// when the run ends), not at every exit.
void notice_xcr0_change(svm::current_vmcb& vmcb, linux_state& ls, run_state& st) {
  std::uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  const std::uint64_t real = (std::uint64_t{hi} << 32) | lo, seen = st.guest_xcr0 ? st.guest_xcr0 : 1;
  if (real == seen) return;
  if (ls.xsetbv_not_intercepted++ == 0) {
    ++st.results->errata;
    kprintf("HVKIT ERRATUM xsetbv_intercept_not_taken xcr0=0x%llx hypervisor_view=0x%llx xsetbv_exits=%llu "
            "exitcode=0x%llx rip=0x%llx (expected: #VMEXIT 0x8d at the XSETBV)\n",
            (unsigned long long)real, (unsigned long long)seen,
            (unsigned long long)st.exits.by_slot[sv::raw(svm::exit_code::xsetbv)],
            (unsigned long long)sv::read(vmcb, fld::exit_code), (unsigned long long)sv::read(vmcb, fld::rip));
  }
  st.guest_xcr0 = real;
}

/// The vCPU of processor `c` until it stops: VMRUN, #VMEXIT through the core's exit loop.
void vmrun_loop(smp::cpu& c) {
  linux_state& ls = *c.lx.run;
  svm::current_vmcb vmcb{&c.svm->slot};  // this processor's vCPU
  run_state& run = c.st;
  const bool xsave = (cpuid(1).ecx >> 26) & 1;  // every processor set CR4.OSXSAVE then
  while (run.status == run_status::running) {
    // VMRUN loads the guest's CR2 from the VMCB (APM 15.5.1); Bochs 2.7 does not (the
    // conformance runs report it as an erratum): the real CR2 is the guest's.
    write_cr2(sv::read(vmcb, fld::cr2));
    svm::prepare_vmrun(c);
    svm::vmrun_on(c);
    if (xsave && sv::read(vmcb, fld::exit_code) == sv::raw(svm::exit_code::cpuid)) notice_xcr0_change(vmcb, ls, run);
    if (c.index != 0 && run.exits.total < 24)  // an AP's way from its SIPI to long mode, for the log
      kprintf("HVKIT SMP vcpu=%u exit code=0x%llx info1=0x%llx rip=0x%llx cs=0x%llx efer=0x%llx cr0=0x%llx "
              "icpt=0x%llx rax=0x%llx rcx=0x%llx\n",
              c.index, (unsigned long long)sv::read(vmcb, fld::exit_code), (unsigned long long)sv::read(vmcb, fld::exit_info_1),
              (unsigned long long)sv::read(vmcb, fld::rip), (unsigned long long)vmcb.load(0x400, 2),
              (unsigned long long)sv::read(vmcb, fld::efer), (unsigned long long)sv::read(vmcb, fld::cr0),
              (unsigned long long)vmcb.load(0x10, 4), (unsigned long long)sv::read(vmcb, fld::rax),
              (unsigned long long)run.regs[x86::gpr::rcx]);
    const bool resume = svm::handle_exit(*c.svm->host, vmcb, run.regs, run, nullptr, nullptr, &ls);
    // RAX lives in the VMCB (a handler may have written it there); vmrun() copies the
    // register block's into the VMCB.
    run.regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
    if (!resume) break;
    // Guest 2 on this processor now and then (smp/second_guest.cpp).
    if (ls.m->count > 1 && smp::second_guest_due(c)) svm::second_guest_excursion(c);
  }
  if (xsave) notice_xcr0_change(vmcb, ls, run);
}

void start_vcpu_state(smp::cpu& c) {
  c.lx.misc_enable = misc_enable_value;
  c.st.cfg = &linux_run;
  c.st.results = c.lx.run->results;
  c.st.cpu = c.lx.run->cpu;
  c.st.status = run_status::running;
  c.st.guest_xcr0 = 1;
  c.st.x2apic_id = c.apic_id;
}

/// An application processor's vCPU (svm/svm_smp.cpp): its VMCB, then outside the guest until
/// the guest's start-up IPI, then the post-INIT state with the SIPI applied and the guest.
[[noreturn]] void run_ap(smp::cpu& c) {
  linux_state& ls = *c.lx.run;
  start_vcpu_state(c);
  svm::start_cpu(c);
  c.st.status = run_status::running;
  ls.m->lock.lock();  // start_vmcb takes an ASID from the shared allocator (replaced per processor)
  setup_linux_vmcb(c, ls, true);
  ls.m->lock.unlock();
  c.phase = smp::cpu_phase::guest;
  c.sipi_vector = svm::wait_for_sipi(c);
  ++c.sipis_applied;
  c.tsc_started = rdtsc();
  // Power-on state (Table 10-1 RESET column: CR0 60000010H), then INIT, then the SIPI.
  const std::uint32_t signature = ls.cpu->cpuid.answer(1, 0, {}).eax;
  const x86::reset_state power_on = x86::state_after_reset(signature);
  x86::reset_state s = x86::state_after_init(signature, power_on.cr0_value, power_on.efer_value);
  x86::apply_sipi(s, static_cast<std::uint8_t>(c.sipi_vector));
  // TR: a busy 32-bit TSS (type 11) instead of the busy 16-bit one (type 3) of the post-INIT
  // state. The guest's trampoline sets CR0.PG with EFER.LME before any LTR, and Bochs 2.7
  // refuses to activate long mode with a 16-bit TSS in TR on its AMD model too (the SDM's rule
  // for MOV to CR0, Vol. 2B: #GP "if ... the TR register references a 16-bit TSS"; measured:
  // "SetCR0: attempt to enter x86-64 long mode with TSS286 in TR", the AP's MOV CR0 at
  // 9A052H faulted and the vCPU triple-faulted). The processor looks at TR's type only there
  // and at the guest's LTR; the VMX AP gets the same type at its CR0.PG exit (vmx/vmx.cpp).
  s.tr.access_rights = 0x8B;
  svm::write_reset_state(c, s);
  kprintf("HVKIT SMP vcpu=%u sipi vector=0x%llx (virtual: applied to the VMCB)\n", c.index,
          (unsigned long long)c.sipi_vector);
  vmrun_loop(c);
  finish(ls, c.index);
}

}  // namespace

bool prepare_svm(linux_state& ls, core::guest_cpu& cpu) {
  // Every processor: started now with its SVM state from the boot's pool (svm::attach), each
  // enables SVM and waits for `go`.
  smp::machine& m = smp::start_processors(*ls.pool, svm::enable_ap, svm::attach);
  m.virtual_sipi = true;
  ls.m = &m;
  // The SVM host of the boot (the bootstrap processor's features, the ASIDs the VMCBs start
  // with), from the pool, which every processor's SVM state points at.
  svm::svm_host& host = svm::make<svm::svm_host>(*ls.pool, *ls.pool);
  for (unsigned i = 0; i < m.count; ++i) {  // before any AP runs its vCPU
    m.cpus[i].lx.run = &ls;
    m.cpus[i].svm->host = &host;
  }
  smp::cpu& bsp = m.cpus[0];
  start_vcpu_state(bsp);
  // More than one vCPU on a processor without x2APIC: the ICR is an xAPIC register.
  m.xapic_write_protected = m.count > 1 && ((cpuid(1).ecx >> 21) & 1) == 0;
  ls.svm_part = ::new (ls.pool->take_bytes(sizeof(svm_pages), alignof(svm_pages))) svm_pages{};
  const bool ok = svm::build_policy(cpu, *ls.results, &ls, m.count) && svm::enable(host, *ls.results) &&
                  build_linux_npt(*ls.svm_part, m.xapic_write_protected, m.xapic_base);
  if (m.xapic_write_protected) kprintf("HVKIT SMP xapic_base=0x%llx write_protected=1\n", (unsigned long long)m.xapic_base);
  if (ok) svm::start_cpu(bsp);
  if (ok && m.count > 1) {  // guest 2 on every processor (smp/second_guest.cpp)
    smp::second_guest_init(m, false);
    svm::second_guest_npt(m);
  }
  return ok;
}

bool enter_svm(linux_state& ls) {
  smp::machine& m = *ls.m;
  smp::cpu& bsp = m.cpus[0];
  build_maps(ls);
  setup_linux_vmcb(bsp, ls, false);
  const svm::svm_host& host = *bsp.svm->host;
  kprintf("HVKIT LINUX svm cr0_write_intercept=%s cr4_write_intercept=1 decode_assists=%u nrip_save=%u\n",
          core::shadow::enabled() ? "all(shadow)" : "none", host.has(cpuid_ns::svm_features::decode_assists) ? 1 : 0,
          host.has(cpuid_ns::svm_features::nrip_save) ? 1 : 0);
  // The APs: their VMCBs, each processor waiting for its vCPU's start-up IPI.
  m.ap_run = run_ap;
  __atomic_store_n(&m.go, 1u, __ATOMIC_RELEASE);
  for (unsigned i = 1; i < m.count; ++i)
    while (m.cpus[i].phase != smp::cpu_phase::guest && m.cpus[i].phase != smp::cpu_phase::failed) asm volatile("pause");
  bsp.phase = smp::cpu_phase::guest;
  vmrun_loop(bsp);
  if (ls.xsetbv_not_intercepted)
    kprintf("HVKIT INFO linux xcr0_changes_without_xsetbv_exit=%llu\n", (unsigned long long)ls.xsetbv_not_intercepted);
  return true;
}

}  // namespace hv::lx
