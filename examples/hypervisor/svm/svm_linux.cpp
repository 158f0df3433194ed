// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, the Linux guest's SVM part (linux/linux.cpp is the vendor-
// neutral rest, vmx/vmx_linux.cpp the VMX one): the identity nested page table, the MSR and
// I/O permission maps, the VMCB for the kernel's 64-bit entry and the VMRUN loop. Exits go
// through the core's exit loop with the Linux guest profile (svm.cpp's handle_exit).
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/paging/pte.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>
#include <hvkit/svm/vmcb.hpp>

#include "../linux/linux_profile.hpp"

namespace hv::svm {

unsigned exit_slot_code(unsigned s) { return s == 0x9F ? sv::raw(exit_code::npf) : s; }

}  // namespace hv::svm

namespace hv::lx {

namespace {

namespace sv = hvkit::svm;
namespace fld = hvkit::svm::fields;
using svm::vmcb;

// ---- the nested page table: identity over guest RAM, the low megabyte and MMIO ----------
// The host's 4-level format (APM 15.25.5); every nested access is a user access, so U/S = 1
// at every level. No memory type is set: PAT index 0 (write-back) combined with the host's
// MTRRs, which make MMIO uncacheable (15.25.8).
alignas(4096) std::uint64_t npt_l4[512];
alignas(4096) std::uint64_t npt_l3[512];
alignas(4096) std::uint64_t npt_l2[4][512];
alignas(4096) std::uint64_t npt_l1_low[512];  // [0, 2 MiB) in 4 KiB pages: only [0, 1 MiB) mapped

void build_linux_npt() {
  using pg::pte;
  const pte urw = pte::present | pte::writable | pte::user;
  auto table = [&](const void* next) { return pte::make(x86::gpa{svm::pa(next)}, urw).raw(); };
  for (auto& e : npt_l4) e = 0;
  for (auto& e : npt_l3) e = 0;
  for (auto& t : npt_l2)
    for (auto& e : t) e = 0;
  npt_l4[0] = table(npt_l3);
  for (unsigned g = 0; g < 4; ++g) npt_l3[g] = table(npt_l2[g]);
  npt_l2[0][0] = table(npt_l1_low);
  for (std::uint64_t a = 0; a < 512 * 0x1000; a += 0x1000)
    npt_l1_low[a >> 12] = a < hidden_base ? pte::make(x86::gpa{a}, urw).raw() : 0;
  for (std::uint64_t a = hidden_end; a < second_stage_end; a += 2 * mib)
    npt_l2[a >> 30][(a >> 21) & 511] = pte::make_large(x86::gpa{a}, x86::page_size_2m, urw).raw();
}

// ---- the permission maps -------------------------------------------------------------------
constinit sv::msr_permission_map linux_msrpm = sv::msr_permission_map::intercept_all();
constinit sv::io_permission_map linux_iopm = sv::io_permission_map::intercept_none();

/// Every MSR exits except lx::msrs_passed_through (VMLOAD/VMSAVE move their guest values,
/// APM 15.5.2), TSC reads and the x2APIC registers when the policy offers x2APIC (the local
/// APIC is passed through). PAT exits: the core reads and writes the VMCB's G_PAT, which is
/// the guest's PAT under nested paging (15.25.8). Only lx::io_intercepts of the ports exit.
void build_maps() {
  for (std::uint32_t m : msrs_passed_through) static_cast<void>(linux_msrpm.pass_through(m));
  static_cast<void>(linux_msrpm.set_intercept(0x10, sv::msr_access::read, false));  // TSC reads
  if (guest_policy.has(cpuid_ns::feat::x2apic))
    for (std::uint32_t m = 0x800; m <= 0x8FF; ++m) static_cast<void>(linux_msrpm.pass_through(m));
  for (std::uint16_t port : io_intercepts) linux_iopm.set_intercept(port, true);
}

/// The VMCB for the boot protocol's 64-bit entry, the same state the VMX part enters with:
/// __BOOT_CS 0x10, __BOOT_DS 0x18, a TSS at 0x20, the identity page tables, RIP = startup_64,
/// interrupts off. CR0.WP guest-owned (no CR0 write intercept under nested paging, APM
/// 15.9.1, svm::make_cr_intercepts), CR4 writes emulated; XSETBV exits (checked against the
/// policy's XCR0). No INTR intercept and V_INTR_MASKING clear: physical interrupts go to the
/// guest through its own IDT and RFLAGS.IF (15.21.1), as the devices are the guest's. No HLT
/// intercept: the guest's idle HLT waits for its own interrupts.
/// Shadow paging (run --linux --shadow --amd): no nested paging, the intercepts of
/// svm::make_cr_intercepts({.npt = false}) (every CR0 write, CR0/CR4 reads: the real CR0.WP
/// is 1) and MOV to/from CR3, INVLPG and #PF, as for the conformance guest (svm_setup.cpp).
void setup_linux_vmcb() {
  const bool shadow = core::shadow::enabled();
  const sv::cr_intercepts cr = shadow ? sv::make_cr_intercepts<policy_wp_guest_owned>({.npt = false})
                                      : sv::make_cr_intercepts<policy_wp_guest_owned>({.npt = true});
  sv::intercept_set icpt;
  cr.apply(icpt);
  icpt.set(sv::intercept::xsetbv);
  if (shadow)
    for (sv::intercept i : {sv::cr_read(3), sv::cr_write(3), sv::intercept::invlpg, sv::exception(x86::vector::pf)})
      icpt.set(i);
  svm::start_vmcb(icpt, linux_iopm, linux_msrpm, shadow ? 0 : svm::pa(npt_l4));
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  const x86::efer efer = x86::efer::lme | x86::efer::lma;
  svm::write_flat_state(this_state(), {0x10, 0x18, 0x20, true, tss_gpa, gdt_gpa, 6 * 8 - 1, 0, 0, 0, kernel_gpa + 0x200, efer},
                        cr0, x86::cr4::pae, page_tables_gpa);
  if (shadow) {  // the real EFER.NXE is 1 (paging::shadow::host_role()), CR3 the shadow root
    core::shadow::use_linux_guest(hidden_base, hidden_end, second_stage_end);
    sv::write(vmcb, fld::efer, efer | x86::efer::svme | x86::efer::nxe);
    sv::write(vmcb, fld::cr3, x86::cr3{core::shadow::begin({cr0, x86::cr4::pae, efer}, x86::cr3{page_tables_gpa}).value()});
  }
}

/// QEMU 7.2 TCG erratum (docs/linux-guest.md): with the XSETBV intercept set (VMCB offset
/// 010h bit 13, APM Vol. 2 Table B-1; exit code 8Dh) the guest's XSETBV does not exit: the
/// processor executes it and the guest's XCR0 changes behind the hypervisor's back. Bochs
/// exits as the APM says. Seen at the next exit: the real XCR0 (the host runs with the
/// guest's, it never uses extended state itself) differs from the one the hypervisor
/// answered CPUID with. The hypervisor then takes the real one (the guest's CPUID 0Dh and
/// OSXSAVE answers follow it); the first case is printed, every case counted.
std::uint64_t xsetbv_not_intercepted = 0;
void notice_xcr0_change() {
  std::uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  run_state& st = this_state();
  const std::uint64_t real = (std::uint64_t{hi} << 32) | lo, seen = st.guest_xcr0 ? st.guest_xcr0 : 1;
  if (real == seen) return;
  if (xsetbv_not_intercepted++ == 0) {
    ++results_errata;
    kprintf("HVKIT ERRATUM xsetbv_intercept_not_taken xcr0=0x%llx hypervisor_view=0x%llx xsetbv_exits=%llu "
            "exitcode=0x%llx rip=0x%llx (expected: #VMEXIT 0x8d at the XSETBV)\n",
            (unsigned long long)real, (unsigned long long)seen,
            (unsigned long long)st.exits.by_slot[sv::raw(svm::exit_code::xsetbv)],
            (unsigned long long)sv::read(vmcb, fld::exit_code), (unsigned long long)sv::read(vmcb, fld::rip));
  }
  st.guest_xcr0 = real;
}

}  // namespace

bool prepare_svm() {
  vmcb.slot = &svm::vmcb_a1;
  return svm::build_policy(true) && svm::enable() && (build_linux_npt(), true);
}

bool enter_svm() {
  build_maps();
  setup_linux_vmcb();
  kprintf("HVKIT LINUX svm cr0_write_intercept=%s cr4_write_intercept=1 decode_assists=%u nrip_save=%u\n",
          core::shadow::enabled() ? "all(shadow)" : "none",
          svm::host_svm.features.test(cpuid_ns::svm_features::decode_assists) ? 1 : 0,
          svm::host_svm.features.test(cpuid_ns::svm_features::nrip_save) ? 1 : 0);
  const bool xsave = (cpuid(1).ecx >> 26) & 1;  // boot() set CR4.OSXSAVE on the host then
  run_state& st = this_state();
  while (st.status == run_status::running) {
    // VMRUN loads the guest's CR2 from the VMCB (APM 15.5.1); Bochs 2.7 does not (the
    // conformance runs report it as an erratum): the real CR2 is the guest's.
    write_cr2(sv::read(vmcb, fld::cr2));
    svm::vmrun(st.regs);
    if (xsave) notice_xcr0_change();
    const bool resume = svm::handle_exit(st.regs, st);
    // RAX lives in the VMCB (a handler may have written it there); vmrun() copies the
    // register block's into the VMCB.
    st.regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
    if (!resume) break;
  }
  if (xsetbv_not_intercepted)
    kprintf("HVKIT INFO linux xcr0_changes_without_xsetbv_exit=%llu\n", (unsigned long long)xsetbv_not_intercepted);
  return true;
}

}  // namespace hv::lx
