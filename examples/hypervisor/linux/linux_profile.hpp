// SPDX-License-Identifier: MIT
/// @file
/// @brief The Linux guest profile over the core's exit loop (core/exit_loop.hpp), written once
/// for both vendors: the guest-physical layout, the run's state, the profile's exit, MSR and
/// I/O hooks, and what each vendor's part provides (vmx/vmx_linux.cpp, svm/svm_linux.cpp).
/// Internal to examples/hypervisor.
#pragma once

#include <cstdint>

#include <hvkit/x86/pv_send_ipi.hpp>

#include "../hv.hpp"
#include "../core/exit_loop.hpp"
#include "../core/page_pool.hpp"
#include "linux.hpp"
#include "../smp/smp.hpp"

namespace hv::lx {

// ---- guest-physical layout ------------------------------------------------------------
inline constexpr std::uint64_t mib = 0x100000;
/// The hypervisor's memory: never guest RAM, never mapped by the guest's EPT or NPT.
inline constexpr std::uint64_t hidden_base = mib, hidden_end = 16 * mib;
static_assert(hidden_end == layout::guest_mem_base, "linker.ld keeps the hypervisor image below 16 MiB");
// Low-memory structures the hypervisor writes for the kernel's first instruction (the
// kernel copies boot_params and the command line early, and builds its own GDT and page
// tables).
inline constexpr std::uint64_t gdt_gpa = 0x6000, tss_gpa = 0x6800, boot_params_gpa = 0x7000, cmdline_gpa = 0x8000;
inline constexpr std::uint64_t page_tables_gpa = 0x20000;  // PML4, PDPT, 4 PDs: identity map of 4 GiB
inline constexpr std::uint64_t kernel_gpa = 16 * mib;        // LOAD_PHYSICAL_ADDR of x86-64 kernels
/// The second stage (EPT or NPT) maps [0, hidden_base) and [hidden_end, second_stage_end).
inline constexpr std::uint64_t second_stage_end = 4ull << 30;

/// Ports the hypervisor intercepts; every other port goes to the device (passed through).
///   0xE9: the guest's own log lines (its /init marks phases there): the hypervisor prints
///         them as "HVKIT GUEST <line>" so its channel stays one stream.
///   0x8900: Bochs' shutdown port: the guest's power-off ends the run with the summary.
///   0x64, 0x92, 0xCF9: the reset controls (keyboard controller pulse, fast A20/INIT port,
///         PCI reset control): a guest reboot ends the run instead of resetting the machine.
inline constexpr std::uint16_t io_intercepts[] = {0xE9, 0x8900, 0x64, 0x92, 0xCF9};
/// The MSRs neither vendor intercepts: state the VMCS switches or VMLOAD/VMSAVE move (FS/GS
/// base, KERNEL_GS_BASE, the SYSCALL and SYSENTER MSRs).
inline constexpr std::uint32_t msrs_passed_through[] = {
    x86::msr::ia32_fs_base,      x86::msr::ia32_gs_base,      x86::msr::ia32_kernel_gs_base, x86::msr::ia32_star,
    x86::msr::ia32_lstar,        x86::msr::ia32_cstar,        x86::msr::ia32_fmask,          x86::msr::ia32_sysenter_cs,
    x86::msr::ia32_sysenter_esp, x86::msr::ia32_sysenter_eip};
/// The MSRs whose reads neither vendor intercepts but whose writes exit: the local APIC base
/// (the APIC is passed through with its device; a write is checked and then done on the real
/// MSR by platform_msr, so that a guest cannot move the page the hypervisor uses or enter a
/// mode its CPUID policy hides).
inline constexpr std::uint32_t msrs_read_passed_through[] = {x86::msr::ia32_apic_base};

// ---- what GRUB handed over (multiboot v1 information, Multiboot Specification 0.6.96, 3.3) --
struct module_info {
  std::uint64_t start, end;
};
struct memory_range {
  std::uint64_t base, length;
  std::uint32_t type;  // e820 types: 1 RAM, 2 reserved, 3 ACPI, 4 NVS, 5 unusable
};
/// The hypervisor's copy of GRUB's structures, which may lie anywhere in low memory (the
/// guest's): its command line, the modules (bzImage, initramfs), the firmware's memory map.
struct boot_info {
  char cmdline[1024];
  module_info modules[4];
  unsigned module_count;
  memory_range host_map[64];
  unsigned host_map_count;
};

/// True if the frame [a, a + size) overlaps RAM, ACPI or NVS in the firmware's map
/// (write-back); false for everything else (MMIO, holes: uncacheable).
bool ram_like(const boot_info& b, std::uint64_t a, std::uint64_t size);
/// The end of the highest RAM range below second_stage_end in the firmware's map.
std::uint64_t ram_end(const boot_info& b);
/// The guest's run (CR0.WP guest-owned until the hvkit_wp module asks otherwise).
inline constexpr run_config linux_run{"linux", false, false, 0, run_status::done};

// ---- the run's state --------------------------------------------------------------------
/// Each vendor's pages of the Linux guest that every vCPU's VMCS or VMCB points at (the second
/// stage, the MSR and I/O permission maps), taken from the boot's page pool by its prepare_*().
struct vmx_pages;  // vmx/vmx_linux.cpp
struct svm_pages;  // svm/svm_linux.cpp

struct linux_state {
  // The boot's, created by boot() and handed down with the run: its page pool (the vendor's
  // second stage and permission maps, the processors' blocks: smp::start_processors), its
  // results (every vCPU's check_counters::results; the SUMMARY line), what GRUB handed over.
  core::page_pool* pool;
  core::tally* results;
  boot_info boot;
  vmx_pages* vmx_part;
  svm_pages* svm_part;
  /// Shadow paging (run --linux --shadow): the vCPU's shadow MMU, from the boot's pool (boot()).
  core::shadow::vcpu_mmu* shadow;
  core::exit_counters at_mark;  // exits when the guest reached its shell prompt
  bool marked;
  std::uint64_t tsc_start, tsc_mark;
  std::uint64_t msr_gp_logged;
  std::uint64_t io_exits;
  unsigned shutdown_word_matched;  // characters of "Shutdown" seen in a row on port 0x8900
  std::uint64_t xsetbv_not_intercepted;  // SVM: XCR0 changes found without an XSETBV exit (svm/svm_linux.cpp)
  bool shutdown, reset;
  bool intel;  // the CPU vendor (the platform MSRs differ)
  bool vmx;    // the backend that runs the guest
  bool pv_send_ipi;  // KVM_FEATURE_PV_SEND_IPI offered (emulated_features())
  const char* end_reason;
  // The CR0.WP toggles, the MTRRs the guest sees (a copy of the host's, the guest's writes
  // kept; with EPT the EPT memory type, not the MTRRs, decides: SDM Vol. 3C 29.3.7.2) and
  // IA32_MISC_ENABLE are per vCPU (lx::vcpu_data): each processor's smp::cpu (a vCPU per
  // processor on either backend, smp/smp.hpp; m set), `solo` before m is set (its state
  // `solo_st`, owned by boot()). The whole is boot()'s, handed down by reference and reached
  // by each vCPU through vcpu_data::run.
  smp::machine* m;
  const core::guest_cpu* cpu;  // the boot's guest CPU (boot()'s argument), every vCPU's
  vcpu_data solo;
  run_state* solo_st;
  std::uint64_t amd_platform[4];  // AMD SYSCFG, HWCR, NB_CFG, INT_PENDING_MSG (platform_msr)
  char line[1024];
  unsigned line_len;
};

/// IA32_MISC_ENABLE as every vCPU reads it: fast strings, no BTS, no PEBS (SDM Vol. 4 Table 2-2).
inline constexpr std::uint64_t misc_enable_value = 1u | (1u << 11) | (1u << 12);

/// The vCPU this processor runs: its Linux profile data and its core state.
inline vcpu_data& this_vcpu(linux_state& ls) { return ls.m ? smp::this_cpu().lx : ls.solo; }
inline run_state& this_state(linux_state& ls) { return ls.m ? smp::this_cpu().st : *ls.solo_st; }
inline unsigned this_index(const linux_state& ls) { return ls.m ? smp::this_cpu().index : 0; }

inline std::uint64_t cr_exits_now(linux_state& ls) { return this_state(ls).exits.of(core::exit_kind::cr_access); }

/// The end of the run, on the processor whose vCPU stopped (the first one; any other that
/// stops later halts): every vCPU's numbers, the checks, the verdict.
[[noreturn]] void finish(linux_state& ls, unsigned cpu_index);

/// The MSRs this hypervisor implements itself for the Linux guest, beyond the MSR policy.
core::msr_hook platform_msr(linux_state& ls, bool write, std::uint32_t m, std::uint64_t& v);
/// One byte of the guest's port-0xE9 channel.
void guest_log_char(linux_state& ls, char c);

// ---- the profile's exit hooks ----------------------------------------------------------
/// I/O exits (only the intercepted ports; the access decoded by the backend).
template <core::backend B>
core::hook linux_io(linux_state& ls, B& b) {
  ++ls.io_exits;
  const core::io_access io = b.io();
  const unsigned size = io.size;
  const bool in = io.in;
  const std::uint16_t port = io.port;
  if (io.string) {  // INS/OUTS to an intercepted port: not emulated, the instruction is skipped
    kprintf("HVKIT LINUX io_string_skipped port=0x%x\n", port);
    b.skip();
    return core::hook::resume;
  }
  const std::uint32_t mask = size == 4 ? 0xFFFFFFFFu : (1u << (8 * size)) - 1;
  const auto value = static_cast<std::uint32_t>(b.gpr(x86::gpr::rax)) & mask;
  if (!in) {
    const bool reset = (port == 0x64 && size == 1 && value == 0xFE) || (port == 0x92 && size == 1 && (value & 1)) ||
                       (port == 0xCF9 && size == 1 && (value & 4));
    if (reset) {
      kprintf("HVKIT LINUX guest_reset port=0x%x value=0x%x\n", port, value);
      ls.reset = true;
      ls.end_reason = "guest_reset";
      return core::hook::stop;
    }
    if (port == 0xE9) {  // one line buffer for every vCPU
      if (ls.m) ls.m->lock.lock();
      guest_log_char(ls, static_cast<char>(value));
      if (ls.m) ls.m->lock.unlock();
      b.skip();
      return core::hook::resume;
    }
    if (port == 0x8900) {
      static constexpr char word[] = "Shutdown";
      unsigned& matched = ls.shutdown_word_matched;
      matched = (static_cast<char>(value) == word[matched]) ? matched + 1 : (static_cast<char>(value) == 'S' ? 1 : 0);
      if (matched == 8) {
        ls.shutdown = true;
        ls.end_reason = "guest_shutdown";
        return core::hook::stop;
      }
      b.skip();
      return core::hook::resume;
    }
  }
  // Passed through as it would have been without the intercept (0x64 status reads, PCI
  // configuration accesses that include 0xCF9, ...).
  std::uint32_t got = 0;
  if (in) {
    if (port == 0xE9 || port == 0x8900) got = mask;  // nothing there for the guest
    else if (size == 1) { std::uint8_t b; asm volatile("inb %1, %0" : "=a"(b) : "Nd"(port)); got = b; }
    else if (size == 2) { std::uint16_t w; asm volatile("inw %1, %0" : "=a"(w) : "Nd"(port)); got = w; }
    else { std::uint32_t d; asm volatile("inl %1, %0" : "=a"(d) : "Nd"(port)); got = d; }
    b.set_gpr(x86::gpr::rax, (size == 4) ? got : ((b.gpr(x86::gpr::rax) & ~static_cast<std::uint64_t>(mask)) | got));
  } else {
    if (size == 1) asm volatile("outb %b0, %1" ::"a"(value), "Nd"(port));
    else if (size == 2) asm volatile("outw %w0, %1" ::"a"(value), "Nd"(port));
    else asm volatile("outl %0, %1" ::"a"(value), "Nd"(port));
  }
  b.skip();
  return core::hook::resume;
}

/// The Linux guest's hypercalls (hc_wp_begin/hc_wp_end of the hvkit_wp module), KVM's
/// -KVM_ENOSYS for anything else and for CPL > 0.
template <core::backend B>
core::hook linux_hypercall(linux_state& ls, B& b) {
  if (b.cpl() != 0) {  // hypercalls are for the guest kernel only
    b.set_gpr(x86::gpr::rax, static_cast<std::uint64_t>(-1000));  // KVM's -KVM_ENOSYS
    b.skip();
    return core::hook::resume;
  }
  vcpu_data& d = this_vcpu(ls);
  switch (b.gpr(x86::gpr::rax)) {
    case hc_wp_begin:
      // Shadow paging: CR0.WP is in the shadow pages' role and the real CR0.WP is 1, so WP
      // stays intercepted (x86::guest_ownable_cr0(paging_kind::shadow)); RAX = 1 says so.
      d.wp_intercepted = b.gpr(x86::gpr::rbx) != 0;
      if (!core::shadow::enabled()) b.set_cr0_wp_intercept(d.wp_intercepted);
      d.wp_mark = cr_exits_now(ls);
      b.set_gpr(x86::gpr::rax, core::shadow::enabled() ? 1 : 0);
      break;
    case hc_wp_end: {
      const unsigned k = d.wp_intercepted ? 1 : 0;
      d.wp_toggles[k] = b.gpr(x86::gpr::rbx);
      d.wp_mismatch[k] = b.gpr(x86::gpr::rcx);
      d.wp_exits[k] = cr_exits_now(ls) - d.wp_mark;
      d.wp_seen[k] = true;
      const std::uint64_t tsc = b.gpr(x86::gpr::rdx), n = d.wp_toggles[k] ? d.wp_toggles[k] : 1;
      const char* mode = k ? "intercepted" : "guest_owned";
      if (tsc != 0)
        kprintf("HVKIT LINUX wp cpu=%u mode=%s toggles=%llu cr_exits=%llu guest_mismatches=%llu tsc=%llu "
                "tsc_per_toggle=%llu.%llu\n",
                this_index(ls), mode, (unsigned long long)d.wp_toggles[k], (unsigned long long)d.wp_exits[k],
                (unsigned long long)d.wp_mismatch[k], (unsigned long long)tsc, (unsigned long long)(tsc / n),
                (unsigned long long)(tsc % n * 10 / n));
      else  // RDX = 0: no timed loop (the ssdd module, examples/ssdd-wp): no TSC fields
        kprintf("HVKIT LINUX wp cpu=%u mode=%s toggles=%llu cr_exits=%llu guest_mismatches=%llu\n", this_index(ls),
                mode, (unsigned long long)d.wp_toggles[k], (unsigned long long)d.wp_exits[k],
                (unsigned long long)d.wp_mismatch[k]);
      b.set_gpr(x86::gpr::rax, d.wp_exits[k]);
      d.wp_intercepted = false;
      if (!core::shadow::enabled()) b.set_cr0_wp_intercept(false);
      break;
    }
    case hvkit::x86::pv_ipi::kvm_hc_send_ipi:
      // KVM_HC_SEND_IPI, only when KVM_FEATURE_PV_SEND_IPI is offered (smp/smp_ipi.cpp).
      if (ls.m && ls.pv_send_ipi) {
        // The bitmap words are 64 bits wide for a caller in 64-bit mode (EFER.LMA and CS.L),
        // 32 bits otherwise, compatibility mode included (KVM's hypercall ABI).
        using enum x86::gpr;
        b.set_gpr(rax, smp::send_ipi_hypercall(smp::this_cpu(), b.gpr(rbx), b.gpr(rcx), b.gpr(rdx), b.gpr(rsi),
                                               b.in_64bit_mode()));
        break;
      }
      [[fallthrough]];
    default:
      b.set_gpr(x86::gpr::rax, static_cast<std::uint64_t>(-1000));  // unknown hypercall: -KVM_ENOSYS, as KVM answers
  }
  b.skip();
  return core::hook::resume;
}


/// An exit that ends the Linux run: named in the hypervisor's log with the vendor's report
/// (an error unless `contained`: the guest's own end, which the hypervisor survives).
template <core::backend B>
void report(B& b, const char* what, bool contained = false) {
  kprintf("HVKIT LINUX exit %s rip=0x%llx\n", what, (unsigned long long)b.rip());
  b.report_exit(what, contained);
}

/// The Linux guest as a profile over the core (core/exit_loop.hpp): its own hypercalls and
/// port I/O, its platform MSRs before the MSR policy, and an end to the run on anything a
/// kernel should not do here (a second-stage fault: every guest-physical address it may use
/// is mapped; a triple fault: reported, the host survives). CPUID, the MSR policy, CR
/// accesses, XSETBV and the VMX/SVM instructions (#UD: the guest's CPUID offers neither) are
/// the core's.
struct linux_profile {
  linux_state& ls;  ///< the Linux run (boot()'s)
  template <core::backend B>
  core::hook exit(B& b, core::context& c, const core::exit_info& e) {
    using K = core::exit_kind;
    switch (e.kind) {
      case K::io: return linux_io(ls, b);
      case K::hypercall: return linux_hypercall(ls, b);
      case K::cpuid: case K::msr_read: case K::msr_write: case K::xsetbv: case K::virt_instruction:
        return core::hook::pass;
      case K::page_fault: case K::invlpg: case K::cr_read:  // shadow paging (run --linux --shadow)
        return core::hook::pass;
      case K::cr_access:
        if (b.cr_access()) return core::hook::resume;
        ls.end_reason = "cr_access_not_handled";
        return core::hook::stop;
      case K::triple_fault:
        // The guest is dead; the hypervisor is not: report and end the run (SDM Vol. 3C
        // 27.2: a triple fault in VMX non-root operation is a VM exit; APM 15.13: the
        // SHUTDOWN intercept).
        report(b, "guest_triple_fault", true);
        ls.end_reason = "guest_triple_fault";
        c.vcpu.status = core::run_status::triple_fault;
        return core::hook::stop;
      case K::memory:
        // The guest's write to its read-only xAPIC page (smp/smp_ipi.cpp): emulated.
        if (ls.m && ls.m->xapic_write_protected) {
          smp::xapic_platform plat{{}, &smp::this_cpu()};
          const bool resume = core::emulate_instruction(b, c, e.name, plat);
          if (!plat.foreign) return resume ? core::hook::resume : core::hook::stop;
        }
        [[fallthrough]];
      case K::misconfig:
        report(b, e.name);
        ls.end_reason = "second_stage_fault";
        return core::hook::stop;
      default:
        report(b, e.kind == K::entry_failed ? "vm_entry_failed" : "unexpected_exit");
        ls.end_reason = "unexpected_exit";
        return core::hook::stop;
    }
  }
  core::msr_hook msr(core::context&, bool write, std::uint32_t m, std::uint64_t& v) { return platform_msr(ls, write, m, v); }
  void msr_refused(bool write, std::uint32_t m, std::uint64_t v, std::uint64_t rip) {
    if (ls.msr_gp_logged++ < 40)
      kprintf("HVKIT LINUX msr_gp %s 0x%x value=0x%llx rip=0x%llx\n", write ? "wrmsr" : "rdmsr", m,
              (unsigned long long)(write ? v : 0), (unsigned long long)rip);
  }
};

// ---- each vendor's part ----------------------------------------------------------------
/// VMX (vmx/vmx_linux.cpp): every processor started (smp/smp.hpp, ls.m), the CPUID policy,
/// VMXON, the guest's EPT (before the kernel is loaded); then the bitmaps, each vCPU's VMCS
/// (the APs' waiting for the guest's SIPI) and the BSP's VM entries until the run ends
/// (false: the entry failed, ls.end_reason says why).
bool prepare_vmx(linux_state& ls, core::guest_cpu& cpu);
bool enter_vmx(linux_state& ls);
/// SVM (svm/svm_linux.cpp): the same with EFER.SVME, the nested page table, the permission
/// maps and the VMCB.
bool prepare_svm(linux_state& ls, core::guest_cpu& cpu);
bool enter_svm(linux_state& ls);
/// The exits by the vendor's slot, "HVKIT EXITS <phase> <code> <name> <count>" lines.
void print_exits(const char* phase, const core::exit_counters& c, unsigned (*code)(unsigned),
                 const char* (*name)(unsigned));

}  // namespace hv::lx
