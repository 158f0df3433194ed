// SPDX-License-Identifier: MIT
/// @file
/// @brief The VMX backend of the core (core/backend.hpp): core::backend over the current VMCS,
/// used by the conformance runs (vmx/vmx.cpp) and the Linux guest profile (linux/linux.cpp).
#pragma once

#include <hvkit/vmx/exit_qualification.hpp>
#include <hvkit/vmx/guest_mode.hpp>

#include "../core/exit_loop.hpp"
#include "../core/shadow_paging.hpp"
#include "../hv.hpp"

namespace hv {

// vmx/vmx.cpp
/// A failing VMREAD/VMWRITE means the current VMCS is gone: reported, the run ends.
void vmx_failed(const hvkit::vmx::vm_fail& f, core::vcpu_state& st);
template <class T>
T must(hvkit::result<T, hvkit::vmx::vm_fail> r, core::vcpu_state& st) {
  if (r) return r.value();
  vmx_failed(r.error(), st);
  return T{};
}
void must(hvkit::result<void, hvkit::vmx::vm_fail> r, core::vcpu_state& st);
void inject(vcpu& regs, core::vcpu_state& st, x86::vector vec, std::uint32_t error_code = 0);
void store_crs(const vmx_host& h, const hvkit::paging::cr_state& before, const hvkit::paging::cr_state& after,
               run_state& st);
bool handle_cr(const vmx_host& h, vcpu& regs, hvkit::vmx::cr_access_qualification q, run_state& st);
bool ept_unmapped_page_hit(const vmx_host& h, core::check_counters& k, const hvkit::vmx::exit_event_actions& events);
bool ept_unmap_once(const vmx_host& h, core::check_counters& k, std::uint64_t gpa);
std::uint64_t ept_unmap_report(const vmx_host& h, core::check_counters& k);
bool is_vmx_instruction(hvkit::vmx::exit_reason r);

/// The core::backend over the current VMCS: GPRs in the stub's block, RSP/RIP/RFLAGS through
/// the register file (vmx::register_file, flushed before VM entry).
struct vmx_backend {
  vcpu& regs;
  const hvkit::vmx::exit_event_actions& events;
  hvkit::vmx::exit_reason_field reason;
  /// The vCPU this exit belongs to and its checks (the run's; the Linux guest: this
  /// processor's, smp/smp.hpp).
  run_state& st;
  /// The boot's VMX capabilities and pages (vmx_enter's).
  const vmx_host& host;

  core::exit_info decode() const {
    using R = hvkit::vmx::exit_reason;
    using K = core::exit_kind;
    const std::uint32_t basic = reason.basic_raw();
    const unsigned slot = basic < exit_reason_slots ? basic : exit_reason_slots - 1;
    if (reason.entry_failure()) return {K::entry_failed, slot, "vm_entry_failed"};
    const R r = reason.basic();
    if (is_vmx_instruction(r)) return {K::virt_instruction, slot, reason_name(basic)};
    switch (r) {
      case R::exception_or_nmi:  // only #PF exits (the exception bitmap of shadow paging)
        if (core::shadow::enabled()) return {K::page_fault, slot, "page_fault"};
        return {K::unhandled, slot, reason_name(basic)};
      case R::invlpg: return {core::shadow::enabled() ? K::invlpg : K::unhandled, slot, "invlpg"};
      case R::cpuid: return {K::cpuid, slot, "cpuid"};
      case R::rdmsr: return {K::msr_read, slot, "rdmsr"};
      case R::wrmsr: return {K::msr_write, slot, "wrmsr"};
      case R::cr_access: return {K::cr_access, slot, "cr_access"};
      case R::ldtr_tr_access: return {K::descriptor_table, slot, "ldtr_tr"};
      case R::gdtr_idtr_access: return {K::descriptor_table, slot, "gdtr_idtr"};
      case R::vmcall: return {K::hypercall, slot, "vmcall"};
      case R::xsetbv: return {K::xsetbv, slot, "xsetbv"};
      case R::io_instruction: return {K::io, slot, "io_instruction"};
      case R::ept_violation: return {K::memory, slot, "ept_violation"};
      case R::ept_misconfiguration: return {K::misconfig, slot, "ept_misconfiguration"};
      case R::hlt: return {K::hlt, slot, "hlt"};
      case R::triple_fault: return {K::triple_fault, slot, "triple_fault"};
      case R::preemption_timer: return {K::preempted, slot, "preemption_timer"};
      default: return {K::unhandled, slot, reason_name(basic)};
    }
  }
  std::uint64_t gpr(x86::gpr r) { return must(regs.read(r), st); }
  std::uint64_t rip() { return must(regs.rip(), st); }
  void set_gpr(x86::gpr r, std::uint64_t v) { regs.write(r, v); }
  guest_regs& gprs() { return regs.gprs(); }
  unsigned cpl() { return guest_cpl(); }
  core::paging_regs paging_regs() { return vmcs_paging_regs(st); }
  bool in_64bit_mode() { return must(hvkit::vmx::guest_in_64bit_mode(regs.backend()), st); }
  core::guest_crs crs() {
    const hvkit::vmx::cr_context c = must(hvkit::vmx::read_cr_context(regs.backend(), st.cpu->model), st);
    if (core::shadow::enabled()) return {{c.cr0, c.cr4, core::shadow::guest_efer(st)}, core::shadow::guest_cr3(st)};
    return {{c.cr0, c.cr4, c.efer}, x86::cr3{c.cr3}};
  }
  void skip() { must(hvkit::vmx::skip_instruction(regs), st); }
  void inject(x86::vector v, std::uint32_t error_code) { hv::inject(regs, st, v, error_code); }
  void report_exit(const char* what, bool expected) { hv::report_exit(what, expected); }
  /// CR0.WP guest-owned or intercepted (SDM Vol. 3C 25.6.6): with WP in the guest/host mask
  /// the read shadow's WP must be the guest's current WP, so that nothing changes for the guest.
  void set_cr0_wp_intercept(bool intercept) {
    const std::uint64_t wp = x86::cr0::wp.raw();
    std::uint64_t mask = vmread(fields::cr0_guest_host_mask);
    std::uint64_t shadow = vmread(fields::cr0_read_shadow);
    if (intercept) {
      shadow = (shadow & ~wp) | (vmread(fields::guest_cr0) & wp);
      mask |= wp;
    } else {
      mask &= ~wp;
    }
    vmwrite(fields::cr0_read_shadow, shadow);
    vmwrite(fields::cr0_guest_host_mask, mask);
  }

  /// The MSRs whose guest values the VMCS guest-state area holds (SDM Vol. 3C 25.4.1), and
  /// those the host does not use, whose guest values live in the real MSRs.
  bool state_msr(std::uint32_t m, bool write, std::uint64_t& v) {
    namespace msr = x86::msr;
    switch (m) {
      case msr::ia32_fs_base: return vmcs_msr(fields::guest_fs_base, write, v);
      case msr::ia32_gs_base: return vmcs_msr(fields::guest_gs_base, write, v);
      case msr::ia32_sysenter_cs: return vmcs_msr(fields::guest_ia32_sysenter_cs, write, v);
      case msr::ia32_sysenter_esp: return vmcs_msr(fields::guest_ia32_sysenter_esp, write, v);
      case msr::ia32_sysenter_eip: return vmcs_msr(fields::guest_ia32_sysenter_eip, write, v);
      case msr::ia32_pat:
        if (write) return false;
        v = rdmsr(m);
        return true;
      case msr::ia32_star: case msr::ia32_lstar: case msr::ia32_cstar: case msr::ia32_fmask:
      case msr::ia32_kernel_gs_base:
        if (write) wrmsr(m, v);
        else v = rdmsr(m);
        return true;
      default: return false;
    }
  }
  template <std::uint32_t E>
  static bool vmcs_msr(hvkit::vmx::field<E> f, bool write, std::uint64_t& v) {
    if (write) vmwrite(f, v);
    else v = vmread(f);
    return true;
  }
  void write_efer(const hvkit::paging::cr_state& after) {
    // Shadow paging: the real EFER.NXE is 1 (paging::shadow::host_role()).
    vmwrite(fields::guest_ia32_efer, core::shadow::enabled() ? (after.efer | x86::efer::nxe).raw() : after.efer.raw());
  }
  /// vmx::apply_cr_write_actions, the VMX adapter of paging::apply_mmu_actions: the PDPTEs
  /// into GUEST_PDPTE0-3 (SDM Vol. 3C 27.3.2.4), VPIDs off.
  bool apply_mmu_actions(hvkit::paging::mmu_actions actions, const hvkit::paging::cr_state& after, x86::cr3 cr3) {
    const auto applied = hvkit::vmx::apply_cr_write_actions(regs.backend(), st.mmu, actions, after, cr3,
                                                            memory().tables, st.cpu->model.maxphyaddr, false);
    return applied && applied.value().mmu_rebuilt;
  }
  /// EPT: the identity map of guest RAM (vmx_setup.cpp build_ept; the Linux guest's RAM range
  /// set by its profile, vcpu_state::ram).
  core::guest_memory memory() const { return {core::guest_ram_view(st.ram), core::guest_ram_data(st.ram)}; }
  /// VPIDs are off: every VM entry and exit invalidates the linear and combined mappings of
  /// VPID 0 (SDM Vol. 3C 29.4.3.1), so the entry after this exit is the flush.
  void flush_tlb(hvkit::paging::tlb_flush_scope) {}

  core::io_access io() const {
    const hvkit::vmx::io_qualification q{vmread(fields::exit_qualification)};
    return {q.port(), static_cast<std::uint8_t>(q.size()), q.in(), q.string()};
  }
  bool cr_access() {
    return handle_cr(host, regs, hvkit::vmx::cr_access_qualification{vmread(fields::exit_qualification)}, st);
  }
  bool entry_failed() {
    // SDM Vol. 3C 27.8 "VM-Entry Failures During or After Loading Guest State".
    hv::report_exit("vm_entry_failed");
    print_vm_entry_diagnosis(host, st.cfg->name);
    return false;
  }

  bool read_context(em::context& ctx) {
    ctx = must(em::read_emulation_context(regs.backend(), regs, st.cpu->model), st);
    if (core::shadow::enabled()) {  // the real CR3 is the shadow root, the real EFER.NXE 1
      ctx.cr3 = core::shadow::guest_cr3(st);
      ctx.efer = core::shadow::guest_efer(st);
      ctx.pkru = core::shadow::guest_pkru(ctx.cr4);
    }
    return st.status == run_status::running;
  }
  /// emulate::apply_emulation (registers, RIP, segments, the interrupt shadow, single step;
  /// an exception injected, merged with a pending event); a CR write into the VMCS.
  core::applied apply(const em::context& before, const em::context& after, const em::outcome& o) {
    const em::applied_outcome a = must(em::apply_emulation(regs.backend(), regs, before, after, o), st);
    using k = em::applied_outcome::kind_type;
    switch (a.kind) {
      case k::done:
        if (o.what == em::event::cr_write) {
          store_crs(host, {before.cr0, before.cr4, before.efer}, {after.cr0, after.cr4, after.efer}, st);
          if (core::shadow::enabled()) {
            const auto e = core::shadow::cr_written(st, em::shadow_cr_outcome(o, after), after.cr3);
            load_shadow_root(e.root, e.flush);
          } else if (after.cr3.raw() != before.cr3.raw()) {
            vmwrite(fields::guest_cr3, after.cr3.raw());
          }
        }
        return core::applied::done;
      case k::injected:
        // VM entry does not load CR2 (SDM Vol. 3C 27.3.2): the guest sees the real one.
        if (a.load_cr2) write_cr2(a.cr2);
        return core::applied::injected;
      case k::shutdown: return core::applied::shutdown;
      case k::needs_access:
      case k::unsupported: return core::applied::not_applied;
    }
    return core::applied::not_applied;
  }

  bool memory_case() { return ept_case_violation(host, st) || ept_unmapped_page_hit(host, st, events); }
  bool during_delivery() const { return events.reinject.valid(); }
  bool fetch_fault() const {
    return hvkit::vmx::ept_violation_qualification{vmread(fields::exit_qualification)}.fetch();
  }
  bool misconfig_case() { return ept_case_misconfig(host, st); }
  std::uint64_t second_stage_arm(guest_regs& r) {
    handle_ept_arm(host, st, st.cpu->model, r);
    return 0;
  }
  std::uint64_t second_stage_check(guest_regs& r) { return handle_ept_check(host, st, r); }
  bool unmap_once(std::uint64_t gpa) { return ept_unmap_once(host, st, gpa); }
  std::uint64_t unmap_report() { return ept_unmap_report(host, st); }
  bool spin_more() { return false; }  // the VMX two-guest runs: the fixed spins are enough

  // ---- shadow paging (core::shadow::shadow_backend) ----
  /// #PF exit: CR2 in the exit qualification, the error code in the VM-exit
  /// interruption error code (SDM Vol. 3C 28.2.1, 28.2.2).
  std::uint64_t page_fault_address() const { return vmread(fields::exit_qualification); }
  std::uint32_t page_fault_error() const {
    return static_cast<std::uint32_t>(vmread(fields::vm_exit_interruption_error_code));
  }
  std::uint64_t invlpg_address() const { return vmread(fields::exit_qualification); }
  /// VPID is off: every VM entry and exit invalidates the (VPID 0) linear mappings (SDM Vol.
  /// 3C 29.4.3.3), so no flush is needed beyond the entry itself.
  void load_shadow_root(x86::hpa root, hvkit::paging::shadow::host_flush) { vmwrite(fields::guest_cr3, root.value()); }
  void inject_page_fault(std::uint64_t cr2, std::uint32_t code) {
    write_cr2(cr2);  // VM entry does not load CR2 (SDM Vol. 3C 27.3.2)
    hv::inject(regs, st, x86::vector::pf, code);
  }
};
static_assert(core::backend<vmx_backend>);
static_assert(core::shadow::shadow_backend<vmx_backend>);

}  // namespace hv
