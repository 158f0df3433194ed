// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, VMX backend: the core::backend operations over the current VMCS
// (exit decoding into core::exit_kind, registers, skip, injection, the MSRs and CRs the VMCS
// holds, the emulator's context and write-back, the EPT differentials' hooks) and the VM-exit
// entry point. Every handler is the core's (core/exit_loop.hpp).
#include "hv.hpp"
#include "core/exit_loop.hpp"
#include "core/shadow_paging.hpp"
#include "linux/linux.hpp"

namespace hv {
// ---- the library's results --------------------------------------------------------------
// Every helper below is hvkit's (vmx/, emulate/): register file, skip, injection,
// re-injection, contexts. A failing VMREAD/VMWRITE there means the current VMCS is gone:
// the run ends.
void vmx_failed(const hvkit::vmx::vm_fail& f) {
  kprintf("HVKIT ERROR VMX instruction failed (VM-instruction error %u, field 0x%x)\n",
          static_cast<unsigned>(f.error), f.field_encoding);
  run.status = run_status::fatal_exit;
}
template <class T>
T must(hvkit::result<T, hvkit::vmx::vm_fail> r) {
  if (r) return r.value();
  vmx_failed(r.error());
  return T{};
}
void must(hvkit::result<void, hvkit::vmx::vm_fail> r) {
  if (!r) vmx_failed(r.error());
}

/// What the VMCS does not hold about the guest: the properties its CPUID policy decides.
/// The guest's CPUID-derived properties: constant once the policy is built (before the first
/// guest entry), so computed at the first exit and kept (every CR-context read on the exit
/// path, e.g. CPUID's CR4, needs them; recomputing cost about 100 instructions per exit).
const hvkit::vmx::guest_cpu_config& guest_config() {
  static hvkit::vmx::guest_cpu_config cfg;
  static bool done = false;
  if (!done) {
    cfg = {guest_cr4_allowed(), guest_cpu_properties().maxphyaddr, guest_policy.has(cpuid_ns::feat::lam)};
    done = true;
  }
  return cfg;
}

/// #GP(0) (or another hardware exception) into the guest, merged with what is pending.
void inject(vcpu& regs, x86::vector vec, std::uint32_t error_code = 0) {
  const auto q = must(hvkit::vmx::inject_exception(regs.backend(), {vec, error_code}));
  if (q.verdict == x86::merge_verdict::shutdown) run.status = run_status::triple_fault;
}

/// The guest's CR0/CR4 (read shadow and real value, the VMX fixed bits forced: SDM Vol. 3D
/// A.7, A.8 through vmx::cr_values_for), CR3 and EFER after a CR write the hypervisor carried
/// out (a CR-access exit or an emulated instruction); EFER.LMA follows LME && PG (SDM
/// 10.8.5), the "IA-32e mode guest" entry control with it.
void store_crs(const hvkit::paging::cr_state& before, const hvkit::paging::cr_state& after) {
  namespace v = hvkit::vmx;
  if (after.cr0.raw() != before.cr0.raw()) {
    const v::cr_vmcs_values cv = v::cr_values_for(after.cr0.raw(), caps.cr0_fixed0, caps.cr0_fixed1);
    vmwrite(fields::cr0_read_shadow, cv.read_shadow);
    // Shadow paging: the real CR0.WP is 1 (the shadow entries encode the guest's WP).
    vmwrite(fields::guest_cr0, core::shadow::enabled() ? cv.actual | x86::cr0::wp.raw() : cv.actual);
  }
  if (after.cr4.raw() != before.cr4.raw()) {
    const v::cr_vmcs_values cv = v::cr_values_for(after.cr4.raw(), caps.cr4_fixed0, caps.cr4_fixed1);
    vmwrite(fields::cr4_read_shadow, cv.read_shadow);
    vmwrite(fields::guest_cr4, cv.actual);
  }
  if (after.efer.raw() != before.efer.raw()) {
    vmwrite(fields::guest_ia32_efer, core::shadow::enabled() ? (after.efer | x86::efer::nxe).raw() : after.efer.raw());
    const v::entry_controls ec{static_cast<std::uint32_t>(vmread(fields::vm_entry_controls))};
    vmwrite(fields::vm_entry_controls, (after.efer.test(x86::efer::lma) ? ec | v::entry_controls::ia32e_mode_guest
                                                                        : ec & ~v::entry_controls::ia32e_mode_guest)
                                           .raw());
    run.guest_efer = after.efer.raw();
  }
}

// ---- exit handlers -------------------------------------------------------------------------
/// CR-access exit (reason 28), qualification decoded by vmx::cr_access_qualification (SDM Vol. 3C
/// 28.2.1, Table 28-3). The guest-visible CR state comes from vmx::read_cr_context; writes
/// (MOV to CR0/CR3/CR4, CLTS, LMSW) go through vmx::evaluate_cr_write (the architectural
/// #GP checks, the new value, the MMU actions), MOV from CR3 through vmx::evaluate_cr_read.
/// A fault is #GP(0) and changes nothing. The MMU actions are carried out by
/// vmx::apply_cr_write_actions (PAE PDPTEs into the VMCS, the permission table refreshed on
/// a WP toggle, never a reset). vmx::cr_values_for gives the read shadow and the real value
/// with the VMX fixed bits forced (SDM Vol. 3D A.7, A.8).
bool handle_cr_shadow(vcpu& regs, hvkit::vmx::cr_access_qualification q);  // vmx_shadow.cpp
bool handle_cr(vcpu& regs, hvkit::vmx::cr_access_qualification q) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
  if (core::shadow::enabled()) return handle_cr_shadow(regs, q);
  auto& vmcs = regs.backend();
  const v::cr_context c = must(v::read_cr_context(vmcs, guest_config()));
  if (q.type() == acc::mov_from_cr) {
    const v::cr_read_outcome rd = v::evaluate_cr_read(q, c, 0);
    if (!rd.valid) {
      kprintf("HVKIT ERROR unhandled CR read qualification=0x%llx\n", (unsigned long long)q.raw());
      run.status = run_status::fatal_exit;
      return false;
    }
    regs.write(rd.gpr, rd.value);
    must(v::skip_instruction(regs));
    return true;
  }
  const std::uint64_t value = must(v::cr_source_value(regs, q, c));
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, value, hvkit::paging::paging_kind::two_dimensional);
  if (out.cr != 0 && out.cr != 3 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    run.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    ++run.cr_gp_injected;
    inject(regs, x86::vector::gp);
    return true;
  }
  const unsigned maxphyaddr = guest_cpu_properties().maxphyaddr;
  if (out.cr == 3) {
    // MOV to CR3 under PAE paging loads the PDPTEs (SDM 4.4.1).
    const bool pae_paging = c.cr0.test(x86::cr0::pg) && c.cr4.test(x86::cr4::pae) && !c.efer.test(x86::efer::lma);
    if (pae_paging && !v::load_guest_pdptes(vmcs, x86::cr3{out.value}, guest_ram_view(), maxphyaddr)) {
      ++run.cr_gp_injected;
      inject(regs, x86::vector::gp);
      return true;
    }
    vmwrite(fields::guest_cr3, out.value);
    must(v::skip_instruction(regs));
    return true;
  }
  const auto applied = v::apply_cr_write_actions(vmcs, run.mmu, out.actions, out.after, x86::cr3{c.cr3}, guest_ram_view(),
                                                 maxphyaddr, false);
  if (!applied) {
    ++run.cr_gp_injected;  // a PDPTE with a reserved bit: #GP(0), nothing changed
    inject(regs, x86::vector::gp);
    return true;
  }
  if (out.actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++run.mmu_resets;
  if (applied.value().mmu_rebuilt) ++run.mmu_refreshes;
  store_crs({c.cr0, c.cr4, c.efer}, out.after);
  must(v::skip_instruction(regs));
  return true;
}

// ---- one guest page unmapped from EPT until the guest touches it (hc::ept_unmap_once) ----
// The re-injection check: the guest puts an exception handler's stack (IST) on that page,
// so the EPT violation happens while the processor delivers the event (IDT-vectoring
// information valid). The 2 MiB EPT page around it is split into 4 KiB pages for the time.
alignas(4096) std::uint64_t ept_unmap_pt[512];
struct unmap_state {
  bool armed = false;
  std::uint64_t gpa = 0, saved_pde = 0;
  std::uint64_t hits = 0;
  hvkit::vmx::injected_event seen{};  // what was re-injected at the hit
};
constinit unmap_state unmap{};

void ept_unmap_restore() {
  ept_pd[unmap.gpa >> 21] = unmap.saved_pde;
  unmap.armed = false;
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
}

bool ept_unmap_once(std::uint64_t gpa) {
  namespace v = hvkit::vmx;
  if (unmap.armed) ept_unmap_restore();
  if (gpa < layout::guest_mem_base || gpa >= layout::guest_mem_base + layout::guest_mem_size) return false;
  const auto ec = v::ept_capabilities_from(vcaps.ept_vpid_cap);
  const v::ept_permissions rwx{true, true, true, false};
  const std::uint64_t region = gpa & ~0x1FFFFFull;
  for (std::uint64_t i = 0; i < 512; ++i) {
    auto leaf = v::make_ept_leaf(x86::hpa{region + (i << 12)}, v::ept_level::pte, rwx,
                                 hvkit::paging::ept_memory_type::wb, ec);
    if (!leaf) return false;
    ept_unmap_pt[i] = leaf.value().raw();
  }
  ept_unmap_pt[(gpa >> 12) & 511] = 0;  // not present
  auto table = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_unmap_pt)}, rwx, ec);
  if (!table) return false;
  unmap = {true, gpa & ~0xFFFull, ept_pd[gpa >> 21], 0, {}};
  ept_pd[gpa >> 21] = table.value().raw();
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  return true;
}

/// The unmapped page was touched: map it back (the re-injection already happened).
bool ept_unmapped_page_hit(const hvkit::vmx::exit_event_actions& events) {
  if (!unmap.armed || (vmread(fields::guest_physical_address) & ~0xFFFull) != unmap.gpa) return false;
  ept_unmap_restore();
  ++unmap.hits;
  unmap.seen = events.reinject;
  return true;
}

/// hc::ept_unmap_report: hits (bits 7:0), the re-injected event's instruction length
/// (15:8) and VM-entry interruption information (63:32); the error code, if any, the guest
/// sees in its own frame. Resets the count.
std::uint64_t ept_unmap_report() {
  const std::uint64_t r = (unmap.hits & 0xFF) | (std::uint64_t{unmap.seen.instruction_length & 0xFF} << 8) |
                          (std::uint64_t{unmap.seen.info.raw()} << 32);
  run.unmap_untouched_at_report = unmap.armed && unmap.hits == 0;
  if (unmap.armed) ept_unmap_restore();
  unmap.hits = 0;
  unmap.seen = {};
  return r;
}


/// Prints the exit that ended a run; `expected` (a hostile run meant to end this way) makes
/// it information instead of an error.
void report_exit(const char* what, bool expected) {
  kprintf("HVKIT %s %s: reason=%llu qualification=0x%llx rip=0x%llx gpa=0x%llx intr_info=0x%llx\n",
          expected ? "INFO expected" : "ERROR", what,
          (unsigned long long)(vmread(fields::exit_reason) & 0xFFFF),
          (unsigned long long)vmread(fields::exit_qualification), (unsigned long long)vmread(fields::guest_rip),
          (unsigned long long)vmread(fields::guest_physical_address),
          (unsigned long long)vmread(fields::vm_exit_interruption_info));
}


const char* vmx::reason_name(std::uint32_t r) {
  return hvkit::vmx::exit_reason_name(static_cast<hvkit::vmx::exit_reason>(r));
}


/// The VMX instructions: the guest's CPUID does not offer VMX, so each is #UD (SDM Vol. 3C
/// 26.1.2: they exit unconditionally in VMX non-root operation; Vol. 2C: #UD outside VMX
/// operation).
constexpr bool is_vmx_instruction(hvkit::vmx::exit_reason r) {
  using R = hvkit::vmx::exit_reason;
  switch (r) {
    case R::vmclear: case R::vmlaunch: case R::vmptrld: case R::vmptrst: case R::vmread: case R::vmresume:
    case R::vmwrite: case R::vmxoff: case R::vmxon: case R::invept: case R::invvpid: case R::vmfunc:
      return true;
    default: return false;
  }
}


/// Before VMRESUME: an event set up for injection must pass the checks VM entry makes on the
/// event-injection fields (SDM Vol. 3C 27.2.1.3) and on the event against interruptibility
/// and activity state (27.3.1.5); a combination VM entry would refuse is reported with its
/// typed error instead of a failed VM entry.
bool injection_consistent(vcpu& regs) {
  namespace v = hvkit::vmx;
  const v::injected_event e = must(v::read_injection(regs.backend()));
  if (!e.valid()) return true;
  const v::injection_error fe = v::check_injection_fields(e);
  const auto state = v::interruptibility_state{static_cast<std::uint32_t>(vmread(fields::guest_interruptibility_state))};
  const auto activity = static_cast<v::activity_state>(vmread(fields::guest_activity_state));
  const bool virtual_nmis = v::pin_based{static_cast<std::uint32_t>(vmread(fields::pin_based_controls))}.test(
      v::pin_based::virtual_nmis);
  const v::entry_state_error se = v::check_entry_state(e, state, activity, must(regs.rflags()), virtual_nmis);
  if (fe == v::injection_error::none && se == v::entry_state_error::none) return true;
  kprintf("HVKIT ERROR injection refused before VM entry: interruption_info=0x%x injection_error=%u entry_state_error=%u\n",
          e.info.raw(), static_cast<unsigned>(fe), static_cast<unsigned>(se));
  return false;
}

unsigned guest_cpl() { return (vmread(fields::guest_ss_access_rights) >> 5) & 3; }  // SDM Vol. 3C 25.4.1

/// The core::backend over the current VMCS: GPRs in the stub's block, RSP/RIP/RFLAGS through
/// the register file (vmx::register_file, flushed before VM entry).
struct vmx_backend {
  vcpu& regs;
  const hvkit::vmx::exit_event_actions& events;
  hvkit::vmx::exit_reason_field reason;

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
      case R::ept_violation: return {K::memory, slot, "ept_violation"};
      case R::ept_misconfiguration: return {K::misconfig, slot, "ept_misconfiguration"};
      case R::hlt: return {K::hlt, slot, "hlt"};
      case R::io_instruction: return {K::io, slot, "io_instruction"};
      case R::triple_fault: return {K::triple_fault, slot, "triple_fault"};
      case R::preemption_timer: return {K::preempted, slot, "preemption_timer"};
      default: return {K::unhandled, slot, reason_name(basic)};
    }
  }
  std::uint64_t gpr(x86::gpr r) { return must(regs.read(r)); }
  void set_gpr(x86::gpr r, std::uint64_t v) { regs.write(r, v); }
  guest_regs& gprs() { return regs.gprs(); }
  unsigned cpl() { return guest_cpl(); }
  core::guest_crs crs() {
    const hvkit::vmx::cr_context c = must(hvkit::vmx::read_cr_context(regs.backend(), guest_config()));
    if (core::shadow::enabled()) return {{c.cr0, c.cr4, core::shadow::guest_efer()}, core::shadow::guest_cr3()};
    return {{c.cr0, c.cr4, c.efer}, x86::cr3{c.cr3}};
  }
  void skip() { must(hvkit::vmx::skip_instruction(regs)); }
  void inject(x86::vector v, std::uint32_t error_code) { hv::inject(regs, v, error_code); }
  void report_exit(const char* what, bool expected) { hv::report_exit(what, expected); }

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
  bool apply_mmu_actions(hvkit::paging::mmu_actions actions, const hvkit::paging::cr_state& after, x86::cr3 cr3) {
    const auto applied = hvkit::vmx::apply_cr_write_actions(regs.backend(), run.mmu, actions, after, cr3,
                                                            guest_ram_view(), guest_cpu_properties().maxphyaddr, false);
    return applied && applied.value().mmu_rebuilt;
  }

  /// I/O instruction exit qualification, SDM Vol. 3C 28.2.1 Table 28-5.
  core::io_access io() const {
    const hvkit::vmx::io_qualification q{vmread(fields::exit_qualification)};
    return {q.port(), q.size(), q.in(), q.string()};
  }
  bool cr_access() {
    return handle_cr(regs, hvkit::vmx::cr_access_qualification{vmread(fields::exit_qualification)});
  }
  bool entry_failed() {
    // SDM Vol. 3C 27.8 "VM-Entry Failures During or After Loading Guest State".
    hv::report_exit("vm_entry_failed");
    print_vm_entry_diagnosis(run.cfg->name);
    return false;
  }

  bool read_context(em::context& ctx) {
    ctx = must(em::read_emulation_context(regs.backend(), regs, guest_config()));
    if (core::shadow::enabled()) {  // the real CR3 is the shadow root, the real EFER.NXE 1
      ctx.cr3 = core::shadow::guest_cr3();
      ctx.efer = core::shadow::guest_efer();
      // The shadow MMU checks protection keys with the guest's PKRU, which is the real one
      // (the host never writes it); RDPKRU needs CR4.PKE, which the host sets only here.
      if (ctx.cr4.test(x86::cr4::pke)) {
        std::uint64_t cr4, tmp;
        std::uint32_t pkru, edx;
        asm volatile("mov %%cr4, %0" : "=r"(cr4));
        tmp = cr4 | x86::cr4::pke.raw();
        asm volatile("mov %0, %%cr4" ::"r"(tmp) : "memory");
        asm volatile("rdpkru" : "=a"(pkru), "=d"(edx) : "c"(0));
        asm volatile("mov %0, %%cr4" ::"r"(cr4) : "memory");
        ctx.pkru = pkru;
      }
    }
    return run.status == run_status::running;
  }
  /// emulate::apply_emulation (registers, RIP, segments, the interrupt shadow, single step;
  /// an exception injected, merged with a pending event); a CR write into the VMCS.
  core::applied apply(const em::context& before, const em::context& after, const em::outcome& o) {
    const em::applied_outcome a = must(em::apply_emulation(regs.backend(), regs, before, after, o));
    using k = em::applied_outcome::kind_type;
    switch (a.kind) {
      case k::done:
        if (o.what == em::event::cr_write) {
          store_crs({before.cr0, before.cr4, before.efer}, {after.cr0, after.cr4, after.efer});
          if (core::shadow::enabled()) {
            const auto e = core::shadow::cr_written(em::shadow_cr_outcome(o, after), after.cr3);
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

  bool memory_case() { return ept_case_violation() || ept_unmapped_page_hit(events); }
  bool during_delivery() const { return events.reinject.valid(); }
  bool fetch_fault() const {
    return hvkit::vmx::ept_violation_qualification{vmread(fields::exit_qualification)}.fetch();
  }
  bool misconfig_case() { return ept_case_misconfig(); }
  std::uint64_t second_stage_arm(guest_regs& r) {
    handle_ept_arm(r);
    return 0;
  }
  std::uint64_t second_stage_check(guest_regs& r) { return handle_ept_check(r); }
  bool unmap_once(std::uint64_t gpa) { return ept_unmap_once(gpa); }
  std::uint64_t unmap_report() { return ept_unmap_report(); }
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
    hv::inject(regs, x86::vector::pf, code);
  }
};
static_assert(core::backend<vmx_backend>);
static_assert(core::shadow::shadow_backend<vmx_backend>);

core::context run_context() { return {run, run, guest_policy, guest_msrs}; }

/// RDMSR/WRMSR for the Linux guest profile (linux/linux.cpp): the core's handler.
bool handle_msr(vcpu& regs, bool write) {
  const hvkit::vmx::exit_event_actions none{};
  vmx_backend b{regs, none, hvkit::vmx::exit_reason_field{0}};
  core::context c = run_context();
  return core::handle_msr(b, c, write);
}

}  // namespace hv

using namespace hv;
using namespace hv::vmx;

/// One VM exit: the register file over the current VMCS (GPRs in the block the exit stub
/// filled), the event whose delivery the exit interrupted re-injected first
/// (vmx::complete_exit_events, SDM Vol. 3C 28.2.3-28.2.4), the core's handler, and
/// RSP/RIP/RFLAGS written back before the stub's VMRESUME.
extern "C" int hv_handle_exit(guest_regs* block) {
  hvkit::vmx::hw::current_vmcs vmcs;
  const hvkit::vmx::exit_reason_field reason{static_cast<std::uint32_t>(vmread(fields::exit_reason))};
  vcpu regs(vmcs, *block);
  hvkit::vmx::exit_event_actions events{};
  if (!reason.entry_failure()) events = must(hvkit::vmx::complete_exit_events(vmcs, reason.basic()));
  if (lx::active) {  // the Linux guest (linux/linux.cpp)
    const std::uint32_t basic = reason.basic_raw();
    run.exits.total++;
    run.exits.by_slot[basic < exit_reason_slots ? basic : exit_reason_slots - 1]++;
    const int lrc = lx::handle_exit(regs, basic);
    must(regs.flush());
    return lrc != 0 && injection_consistent(regs) ? 1 : 0;
  }
  vmx_backend b{regs, events, reason};
  core::context c = run_context();
  bool resume = core::handle_exit(b, c);
  must(regs.flush());
  if (resume && run.status == run_status::running && !injection_consistent(regs)) run.status = run_status::fatal_exit;
  return resume && run.status == run_status::running ? 1 : 0;  // a VMX failure or a shutdown verdict ends it
}
