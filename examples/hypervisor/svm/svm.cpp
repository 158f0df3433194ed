// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend (AMD APM Vol. 2, chapter 15): SVM bring-up, the
// nested page table, the VMCB, the VMRUN loop, exit handling and the SVM runs of the
// conformance guest. The guest, its hypercall ABI (VMMCALL instead of VMCALL), the MMIO test
// device, the CPUID/MSR policy and the emulator are the ones the VMX backend uses; the SVM
// vocabulary (typed VMCB, intercepts, permission maps, exit decoding, event injection, ASIDs,
// clean bits, IBPB, the NPT stage of the nested walk) is hvkit's include/svm/ and paging/.
//
// Without decode assists (Bochs 2.7 has none) a CR-write or descriptor-table exit says
// which instruction kind exited but not its operands: the instruction at the guest RIP is
// decoded and executed by hvkit::emulate, as an MMIO access after a nested page fault is.
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/cpuid/svm.hpp>
#include <hvkit/emulate/vmcb_context.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/svm/controls.hpp>
#include <hvkit/svm/cr_write_apply.hpp>
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
#include "../linux/linux_profile.hpp"
#include "../core/shadow_paging.hpp"

extern "C" {
void svm_vmrun(hv::vmx::guest_regs* regs, std::uint64_t vmcb_pa, std::uint64_t host_save_pa, std::uint64_t host_if);
}

namespace hv::svm {

std::uint64_t pa(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
/// TLB_CONTROL for the next VMRUN (APM 15.16.1).
void set_tlb_control(current_vmcb& vmcb, sv::tlb_control c) {
  sv::write(vmcb, fld::tlb_control, static_cast<std::uint8_t>(c));
}

// ---- events ------------------------------------------------------------------------------
/// An exception into the guest through EVENTINJ (APM 15.20), merged with an event whose
/// delivery the exit interrupted (EXITINTINFO, already copied into EVENTINJ) by the double-
/// fault rules (svm::inject_exception; SDM 6.15 / APM 8.2.9). A shutdown verdict is a triple
/// fault of the guest.
void inject(current_vmcb& vmcb, core::vcpu_state& st, x86::vector vec, std::uint32_t error_code) {
  const bool protected_mode = sv::read_typed(vmcb, fld::cr0).test(x86::cr0::pe);
  if (sv::inject_exception(vmcb, {vec, error_code}, protected_mode) == x86::merge_verdict::shutdown)
    st.status = run_status::triple_fault;
}

/// NRIP save (CPUID Fn8000_000A EDX[3]): the #VMEXIT writes the next instruction's address
/// into nRIP (VMCB 0C8h) for the intercepts of APM 15.7.1. Without it the field is never
/// written and must never be read: the length comes from emulate's decoder instead.
bool nrip_save(const svm_host& h) { return h.has(cpuid_ns::svm_features::nrip_save); }

/// Past an instruction that exited (CPUID, RDMSR/WRMSR, VMMCALL): RIP = nRIP with NRIP save
/// (APM 15.7.1), else RIP + the decoded length in the code segment's width; the interrupt
/// shadow ends, a single-step trap is #DB (svm::skip_to_next_rip / svm::skip_instruction).
/// IA32_DEBUGCTL is not virtualized for the guest (its accesses are #GP): BTF is 0.
void skip_instruction(const svm_host& h, current_vmcb& vmcb, guest_regs& regs, core::vcpu_state& st) {
  sv::skip_effects fx;
  if (nrip_save(h)) {
    fx = sv::skip_to_next_rip(vmcb, 0);
  } else {
    const unsigned len = instruction_length(h, vmcb, regs, st);
    if (len == 0) {
      const auto in = instruction_at_rip(vmcb, regs, st);
      kprintf("HVKIT ERROR cannot decode the exiting instruction at rip=0x%llx: outcome=%u vector=%u why=%u cr0=0x%llx "
              "cr4=0x%llx efer=0x%llx cr3=0x%llx\n",
              (unsigned long long)sv::read(vmcb, fld::rip), in ? 0u : static_cast<unsigned>(in.error().kind),
              in ? 0u : static_cast<unsigned>(in.error().vector), in ? 0u : static_cast<unsigned>(in.error().why),
              (unsigned long long)sv::read(vmcb, fld::cr0), (unsigned long long)sv::read(vmcb, fld::cr4),
              (unsigned long long)sv::read(vmcb, fld::efer), (unsigned long long)sv::read(vmcb, fld::cr3));
      st.status = run_status::fatal_exit;
      return;
    }
    fx = sv::skip_instruction(vmcb, len, 0);
  }
  if (fx.single_step && fx.verdict == x86::merge_verdict::shutdown) st.status = run_status::triple_fault;
}

// ---- the emulator on a VMCB ----------------------------------------------------------------
/// The guest's registers at this exit: RAX and RSP from the VMCB, the others from the block
/// the VMRUN stub saved (svm::register_file).
using vcpu = sv::register_file<current_vmcb>;

/// The guest's EFER: the VMCB's without SVME, which is the host's (APM 15.5.1).
x86::efer guest_efer(current_vmcb& vmcb) { return sv::read_typed(vmcb, fld::efer).without(x86::efer::svme); }

/// The emulator's context from the VMCB (emulate/vmcb_context.hpp) with the vCPU's guest CPU
/// model's MAXPHYADDR, LAM and CR4 bits.
em::context read_context(current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st) {
  const vcpu rf{vmcb, regs};
  return em::read_emulation_context(vmcb, rf, st.cpu->model);
}

void report_exit(current_vmcb& vmcb, const char* what, bool expected) {
  kprintf("HVKIT %s %s: exitcode=0x%llx exitinfo1=0x%llx exitinfo2=0x%llx rip=0x%llx exitintinfo=0x%llx\n",
          expected ? "INFO expected" : "ERROR", what, (unsigned long long)sv::read(vmcb, fld::exit_code),
          (unsigned long long)sv::read(vmcb, fld::exit_info_1), (unsigned long long)sv::read(vmcb, fld::exit_info_2),
          (unsigned long long)sv::read(vmcb, fld::rip), (unsigned long long)sv::read(vmcb, fld::exit_int_info));
}

hvkit::result<em::instruction, em::outcome> instruction_at_rip(current_vmcb& vmcb, guest_regs& regs,
                                                               const core::vcpu_state& st) {
  em::context ctx = read_context(vmcb, regs, st);
  const bool shadow = core::shadow::enabled();
  if (shadow) {
    // Shadow paging: the real CR3 is the shadow root, the real CR0.WP, CR4.PAE and EFER.NXE
    // the host role's; the fetch walks the guest's own tables with its own registers.
    ctx.cr0 = core::shadow::guest_cr0(st);
    ctx.cr4 = core::shadow::guest_view_cr4(st, ctx.cr4);
    ctx.cr3 = core::shadow::guest_cr3(st);
    ctx.efer = core::shadow::guest_efer(st);
  }
  const pg::cpu_properties props = guest_cpu_properties(st.cpu->model);
  // The live paging mode (the run's MMU context may lag behind a guest-owned CR0.WP/PG).
  pg::mmu_context mmu = pg::mmu_context::make(ctx.cr0, ctx.cr4, ctx.efer, x86::gpa{});
  mmu.set_root(x86::cr3_root(ctx.cr3, mmu.role().mode(), props.maxphyaddr));
  pg::flat_memory tables = guest_ram_view(st.ram);
  em::flat_ram ram = core::guest_ram_data(st.ram);
  // PAE under nested paging: no PDPTE registers, the walk reads the PDPTEs from memory
  // (APM 15.25.10): the four entries as they are now.
  // A PDPTE with a reserved bit is taken as it is: the walk through it faults (#PF RSVD),
  // walks through the other three do not.
  pg::pdpte_snapshot pdptes{};
  if (shadow && mmu.role().mode() == x86::paging_mode::pae) {
    pdptes = core::shadow::mmu(st).pdptes();  // the guest's PDPTE registers (its last CR3 load, SDM 4.4.1)
  } else if (mmu.role().mode() == x86::paging_mode::pae) {
    pdptes.pdpt = x86::cr3_root(ctx.cr3, x86::paging_mode::pae, props.maxphyaddr);
    pdptes.loaded = true;
    for (unsigned i = 0; i < 4; ++i) {
      const auto v = tables.read64(pdptes.pdpt + 8u * i);
      pdptes.loaded = pdptes.loaded && v.has_value();
      pdptes.entries[i] = v ? *v : 0;
    }
  }
  em::walker_translator<pg::flat_memory> tr{mmu, tables, props, pdptes};
  return em::fetch_instruction(ctx, tr, ram);
}

/// The length of the instruction at the guest RIP (at an intercept that reports none):
/// nRIP - RIP with NRIP save, else fetched and decoded through the guest's paging by
/// emulate::fetch_instruction (0 when the fetch faults: a host-side problem, fatal).
unsigned instruction_length(const svm_host& h, current_vmcb& vmcb, guest_regs& regs, const core::vcpu_state& st) {
  if (nrip_save(h)) return static_cast<unsigned>(sv::read(vmcb, fld::next_rip) - sv::read(vmcb, fld::rip));
  const auto in = instruction_at_rip(vmcb, regs, st);
  return in ? in->length : 0;
}

/// QEMU 7.2 TCG erratum (docs/hypervisor.md, SVM errata): a guest MOV to CR3 with a bit at or
/// above MAXPHYADDR set in long mode ends in #VMEXIT with VMEXIT_INVALID (exit code -1)
/// instead of #GP(0) in the guest (APM Vol. 2 3.1.2 / Vol. 3 "MOV CRn": a reserved CR3 bit is
/// #GP(0); VMEXIT_INVALID is only VMRUN's consistency-check failure, 15.5.1). Recognized
/// narrowly: the guest had run (not the first exit of the VMCB), long mode, the instruction
/// at RIP is MOV to CR3 and its source has a bit at or above MAXPHYADDR. The guest gets the
/// #GP(0) the architecture gives it; the first case is printed, every case counted (in `h`,
/// for the boot: run_all reports the erratum once for all runs).
bool qemu_mov_cr3_invalid_erratum(svm_host& h, current_vmcb& vmcb, guest_regs& regs, core::vcpu_state& st,
                                  std::uint64_t exits_before) {
  if (exits_before == 0 || !guest_efer(vmcb).test(x86::efer::lma)) return false;
  const auto in = instruction_at_rip(vmcb, regs, st);
  if (!in || in->op != em::mnemonic::mov_to_cr || in->dst.reg != 3) return false;
  const std::uint64_t value = vcpu{vmcb, regs}.read(in->src.reg);
  const unsigned maxpa = st.cpu->model.maxphyaddr;
  if (maxpa >= 64 || (value >> maxpa) == 0) return false;
  if (h.qemu_cr3_errata++ == 0)
    kprintf("HVKIT ERRATUM mov_cr3_reserved_bit_vmexit_invalid rip=0x%llx cr3_source=0x%llx maxphyaddr=%u "
            "exitcode=0x%llx (expected #GP(0) in the guest)\n",
            (unsigned long long)sv::read(vmcb, fld::rip), (unsigned long long)value, maxpa,
            (unsigned long long)sv::read(vmcb, fld::exit_code));
  inject(vmcb, st, x86::vector::gp, 0);
  return true;
}



// ---- exit handlers -------------------------------------------------------------------------

/// The MSRs whose guest values live in the VMCB state-save area (APM Table B-2; VMLOAD and
/// VMSAVE move FS/GS base, KernelGsBase, STAR/LSTAR/CSTAR/SFMASK and SYSENTER_*): read or
/// write one. False for any other MSR.
template <class F>
bool vmcb_msr_field(current_vmcb& vmcb, F f, bool write, std::uint64_t& v) {
  if (write) sv::write(vmcb, f, v);
  else v = sv::read(vmcb, f);
  return true;
}
bool vmcb_msr(current_vmcb& vmcb, std::uint32_t m, bool write, std::uint64_t& v) {
  switch (m) {
    case x86::msr::ia32_fs_base: return vmcb_msr_field(vmcb, fld::fs_base, write, v);
    case x86::msr::ia32_gs_base: return vmcb_msr_field(vmcb, fld::gs_base, write, v);
    case x86::msr::ia32_sysenter_cs: return vmcb_msr_field(vmcb, fld::sysenter_cs, write, v);
    case x86::msr::ia32_sysenter_esp: return vmcb_msr_field(vmcb, fld::sysenter_esp, write, v);
    case x86::msr::ia32_sysenter_eip: return vmcb_msr_field(vmcb, fld::sysenter_eip, write, v);
    case x86::msr::ia32_star: return vmcb_msr_field(vmcb, fld::star, write, v);
    case x86::msr::ia32_lstar: return vmcb_msr_field(vmcb, fld::lstar, write, v);
    case x86::msr::ia32_cstar: return vmcb_msr_field(vmcb, fld::cstar, write, v);
    case x86::msr::ia32_fmask: return vmcb_msr_field(vmcb, fld::sfmask, write, v);
    case x86::msr::ia32_kernel_gs_base: return vmcb_msr_field(vmcb, fld::kernel_gs_base, write, v);
    case x86::msr::ia32_pat: return vmcb_msr_field(vmcb, fld::g_pat, write, v);
    default: return false;
  }
}


/// QEMU 7.2 TCG erratum: it writes VMEXIT_INVALID (-1) as the 32-bit 0xFFFF_FFFF, its upper
/// half of EXITCODE 0 (APM Vol. 2 Appendix C: EXITCODE is 64 bits, VMEXIT_INVALID is -1).
/// Read as -1, counted (in `h`; the erratum once in `t`), the first case printed.
std::uint64_t note_exitcode_32bit(svm_host& h, core::tally& t, std::uint64_t raw) {
  if (h.exitcode_32bit_errata++ == 0) {
    ++t.errata;
    kprintf("HVKIT ERRATUM vmexit_invalid_exitcode_32bit exitcode=0x%llx (APM Appendix C: -1, 64 bits)\n",
            (unsigned long long)raw);
  }
  return sv::raw(exit_code::invalid);
}
exit_code read_exit_code(svm_host& h, core::tally& t, current_vmcb& vmcb) {
  const std::uint64_t raw = sv::read(vmcb, fld::exit_code);
  if (raw != 0xFFFF'FFFFull) return static_cast<exit_code>(raw);
  return static_cast<exit_code>(note_exitcode_32bit(h, t, raw));
}

namespace {  // internal: the exit path below is its only user, so the core inlines into it

/// The core::backend over the current VMCB: RAX and RSP in the VMCB, the other GPRs in the
/// block the VMRUN stub saved (svm::register_file). Without decode assists (Bochs 2.7 has
/// none) a CR-write or descriptor-table exit names the instruction class but not its
/// operands: the emulator decodes and executes the instruction at the guest RIP.
struct svm_backend {
  svm_host& host;      ///< the processor's SVM features and counts
  current_vmcb& vmcb;  ///< the vCPU's VMCB
  guest_regs& regs;
  core::context& c;
  conformance_npt* npt;  ///< the conformance guest's nested tables, if it is that guest
  npt_diff_state* nd;    ///< the run's NPT differential, if it has one
  exit_code code = exit_code::invalid;

  core::exit_info decode() {
    using K = core::exit_kind;
    code = read_exit_code(host, *c.checks.results, vmcb);
    const unsigned s = slot(code);
    const char* n = sv::name(code);
    if (sv::is_cr_write(code)) return {K::cr_access, s, n};
    if (core::shadow::enabled()) {  // the intercepts of shadow paging (svm_setup.cpp)
      if (sv::is_cr_read(code)) return {K::cr_read, s, n};
      if (code == sv::exception_exit(14)) return {K::page_fault, s, n};
      if (code == exit_code::invlpg) return {K::invlpg, s, n};
    }
    using enum sv::exit_code;
    switch (code) {
      case vmmcall: return {K::hypercall, s, n};
      case xsetbv: return {K::xsetbv, s, n};
      case ioio: return {K::io, s, n};
      case cpuid: return {K::cpuid, s, n};
      case msr: return {sv::msr_is_write(sv::read(vmcb, fld::exit_info_1)) ? K::msr_write : K::msr_read, s, n};
      case cr0_sel_write: return {K::cr_access, s, n};
      case idtr_read: case gdtr_read: case ldtr_read: case tr_read:
      case idtr_write: case gdtr_write: case ldtr_write: case tr_write: return {K::descriptor_table, s, n};
      case npf: return {K::memory, s, "npf"};
      case vmrun: case vmload: case vmsave: case stgi: case clgi: case skinit: case invlpga:
        return {K::virt_instruction, s, n};
      case intr: return {K::preempted, s, n};
      case hlt: return {K::hlt, s, n};
      case shutdown: return {K::triple_fault, s, n};
      case invalid: return {K::entry_failed, s, n};
      default: return {K::unhandled, s, n};
    }
  }
  std::uint64_t gpr(x86::gpr r) const { return vcpu{vmcb, regs}.read(r); }
  std::uint64_t rip() const { return sv::read(vmcb, fld::rip); }
  void set_gpr(x86::gpr r, std::uint64_t v) {
    vcpu rf{vmcb, regs};
    rf.write(r, v);
  }
  guest_regs& gprs() { return regs; }
  unsigned cpl() const { return static_cast<unsigned>(sv::read(vmcb, fld::cpl)); }
  core::paging_regs paging_regs() { return live_paging_regs(vmcb, c.vcpu); }
  bool in_64bit_mode() const { return sv::ip_width_of(vmcb) == x86::ip_width::w64; }  // EFER.LMA, CS.L
  core::guest_crs crs() const {
    if (core::shadow::enabled())
      return {{shadow_guest_cr0(), core::shadow::guest_view_cr4(c.vcpu, sv::read_typed(vmcb, fld::cr4)),
               core::shadow::guest_efer(c.vcpu)},
              core::shadow::guest_cr3(c.vcpu)};
    return {{sv::read_typed(vmcb, fld::cr0), sv::read_typed(vmcb, fld::cr4), guest_efer(vmcb)}, sv::read_typed(vmcb, fld::cr3)};
  }
  void skip() { skip_instruction(host, vmcb, regs, c.vcpu); }
  void inject(x86::vector v, std::uint32_t error_code) { svm::inject(vmcb, c.vcpu, v, error_code); }
  void report_exit(const char* what, bool expected) { svm::report_exit(vmcb, what, expected); }
  /// CR0.WP intercepted: the selective CR0 write intercept (a write changing a bit other
  /// than TS or MP exits, APM 15.9.1); guest-owned: none (under nested paging).
  void set_cr0_wp_intercept(bool intercept) {
    sv::set_intercept(vmcb, sv::intercept::cr0_selective_write, intercept);
  }

  bool state_msr(std::uint32_t m, bool write, std::uint64_t& v) { return vmcb_msr(vmcb, m, write, v); }
  void write_efer(const pg::cr_state& after) {
    // Shadow paging: the real EFER.NXE is 1 (paging::shadow::host_role()).
    sv::write(vmcb, fld::efer, after.efer | x86::efer::svme | (core::shadow::enabled() ? x86::efer::nxe : x86::efer{}));
  }
  /// svm::apply_cr_write_actions, the SVM adapter of paging::apply_mmu_actions. Nested paging:
  /// no PDPTE registers, the walk reads the PDPTEs from memory (APM 15.25.10), so no reload.
  bool apply_mmu_actions(pg::mmu_actions actions, const pg::cr_state& after, x86::cr3 cr3) {
    const auto applied = sv::apply_cr_write_actions(c.vcpu.mmu, actions.without(pg::mmu_actions::reload_pdptrs), after,
                                                    cr3, memory().tables, c.vcpu.cpu->model.maxphyaddr,
                                                    flush_by_asid());
    return applied && applied.value().mmu_rebuilt;
  }
  /// NPT: the identity map of guest RAM (svm_setup.cpp; the Linux guest's RAM range set by its
  /// profile, vcpu_state::ram).
  core::guest_memory memory() const { return {core::guest_ram_view(c.vcpu.ram), core::guest_ram_data(c.vcpu.ram)}; }
  /// The guest's ASID at the next VMRUN (TLB_CONTROL 03h), or the whole TLB without
  /// FlushByAsid (01h, APM 15.16.1); a flush already asked for is not weakened.
  void flush_tlb(pg::tlb_flush_scope scope) {
    if (scope == pg::tlb_flush_scope::none) return;
    if (static_cast<sv::tlb_control>(sv::read(vmcb, fld::tlb_control)) == sv::tlb_control::flush_all) return;
    set_tlb_control(vmcb, sv::flush_guest(flush_by_asid()));
  }
  bool flush_by_asid() const { return host.has(cpuid_ns::svm_features::flush_by_asid); }

  core::io_access io() const {
    const sv::ioio_info q{sv::read(vmcb, fld::exit_info_1)};
    return {q.port(), static_cast<std::uint8_t>(q.size()), q.in(), q.string()};
  }
  bool cr_access() { return core::emulate_instruction(*this, c, sv::name(code)); }
  bool entry_failed() {
    if (qemu_mov_cr3_invalid_erratum(host, vmcb, regs, c.vcpu, c.vcpu.exits.total - 1)) return true;
    svm::report_exit(vmcb, "vmrun_consistency_check_failed");
    return false;
  }

  bool read_context(em::context& ctx) {
    ctx = svm::read_context(vmcb, regs, c.vcpu);
    if (core::shadow::enabled()) {  // the real CR3 is the shadow root, the real CR0.WP, CR4.PAE and EFER.NXE 1
      ctx.cr0 = shadow_guest_cr0();
      ctx.cr4 = core::shadow::guest_view_cr4(c.vcpu, ctx.cr4);
      ctx.cr3 = core::shadow::guest_cr3(c.vcpu);
      ctx.efer = core::shadow::guest_efer(c.vcpu);
      ctx.pkru = core::shadow::guest_pkru(ctx.cr4);
    }
    return true;
  }
  /// emulate/vmcb_context.hpp writes a `done` instruction back; an exception goes into
  /// EVENTINJ (CR2 for #PF into the VMCB, which VMRUN loads).
  core::applied apply(const em::context& before, const em::context& after, const em::outcome& o) {
    switch (o.kind) {
      case em::outcome_kind::exception:
        if (o.vector == x86::vector::pf) sv::write(vmcb, fld::cr2, o.cr2);
        svm::inject(vmcb, c.vcpu, o.vector, o.error_code);
        return c.vcpu.status == run_status::triple_fault ? core::applied::shutdown : core::applied::injected;
      case em::outcome_kind::needs_io:
      case em::outcome_kind::needs_mmio:
      case em::outcome_kind::unsupported: return core::applied::not_applied;
      case em::outcome_kind::done: break;
    }
    em::shadow_exit e{};
    if (core::shadow::enabled() && o.what == em::event::cr_write) {
      // Before anything is written: a PAE PDPTE with a reserved bit makes the CR write #GP(0)
      // with nothing changed (SDM 4.4.1; the shadow MMU loads the guest's PDPTEs, the
      // emulator does not).
      e = core::shadow::cr_written(c.vcpu, em::shadow_cr_outcome(o, after), after.cr3);
      if (e.action == em::shadow_exit_action::inject) {
        svm::inject(vmcb, c.vcpu, x86::vector::gp, 0);
        return c.vcpu.status == run_status::triple_fault ? core::applied::shutdown : core::applied::injected;
      }
    }
    vcpu rf{vmcb, regs};
    em::write_emulation_context(vmcb, rf, before, after, o);
    if (core::shadow::enabled() && o.what == em::event::cr_write) {
      // The guest's CR0/CR3/EFER went into the VMCB: the real ones are the shadow MMU's.
      sv::write(vmcb, fld::cr0, after.cr0 | x86::cr0::wp);
      sv::write(vmcb, fld::cr4, core::shadow::host_cr4(after.cr4));
      sv::write(vmcb, fld::efer, after.efer | x86::efer::svme | x86::efer::nxe);
      load_shadow_root(e.root, e.flush);
    }
    return core::applied::done;
  }

  bool memory_case() {
    return npt && ((nd && npt_case_npf(*npt, vmcb, *nd)) || npt_unmapped_page_hit(host, *npt, vmcb, regs, c.vcpu, c.checks));
  }
  bool during_delivery() const { return sv::event_info{sv::read(vmcb, fld::exit_int_info)}.valid(); }
  bool fetch_fault() const {
    return sv::decode_npf(sv::read(vmcb, fld::exit_info_1), sv::read(vmcb, fld::exit_info_2)).error.is_fetch();
  }
  bool misconfig_case() { return false; }
  std::uint64_t second_stage_arm(guest_regs& r) {
    if (npt && nd) npt_arm(*npt, vmcb, *nd, c.vcpu.cpu->model, r);
    return 0;
  }
  std::uint64_t second_stage_check(guest_regs& r) {
    return npt && nd ? npt_check(*npt, vmcb, *nd, r, *c.checks.results) : 0;
  }
  bool unmap_once(std::uint64_t gpa) { return npt && npt_unmap_once(*npt, vmcb, c.checks, gpa); }
  std::uint64_t unmap_report() { return npt ? npt_unmap_report(*npt, vmcb, c.checks) : 0; }
  bool spin_more() { return c.vcpu.spin_more; }

  // ---- shadow paging (core::shadow::shadow_backend) ----
  /// The guest's CR0: the VMCB's (TS/MP may change without an exit under the selective
  /// intercept) with the guest's WP (the real one is 1).
  x86::cr0 shadow_guest_cr0() const {
    const x86::cr0 real = sv::read_typed(vmcb, fld::cr0);
    return core::shadow::guest_cr0(c.vcpu).test(x86::cr0::wp) ? real : real.without(x86::cr0::wp);
  }
  /// #PF intercept: EXITINFO1 the error code, EXITINFO2 the faulting address (APM 15.12).
  std::uint64_t page_fault_address() const { return sv::read(vmcb, fld::exit_info_2); }
  std::uint32_t page_fault_error() const { return static_cast<std::uint32_t>(sv::read(vmcb, fld::exit_info_1)); }
  /// INVLPG intercept: the linear address is in EXITINFO1 only with decode assists (APM
  /// 15.33.1; Bochs 2.7 has none). The shadow MMU needs none (paging::shadow::invlpg()).
  std::uint64_t invlpg_address() const {
    return host.has(cpuid_ns::svm_features::decode_assists) ? sv::read(vmcb, fld::exit_info_1) : 0;
  }
  /// The real CR3 = the shadow root; a flush of the guest's ASID (or the whole TLB without
  /// FlushByAsid) at the next VMRUN when the shadow tables changed (svm::flush_guest, APM 15.16).
  void load_shadow_root(x86::hpa root, pg::shadow::host_flush f) {
    sv::write(vmcb, fld::cr3, x86::cr3{root.value()});
    if (f != pg::shadow::host_flush::none) flush_tlb(pg::tlb_flush_scope::all);
  }
  void inject_page_fault(std::uint64_t cr2, std::uint32_t code) {
    sv::write(vmcb, fld::cr2, cr2);  // VMRUN loads CR2 from the VMCB (APM 15.5.1)
    svm::inject(vmcb, c.vcpu, x86::vector::pf, code);
  }
};
static_assert(core::backend<svm_backend>);
static_assert(core::shadow::shadow_backend<svm_backend>);

}  // namespace

/// One #VMEXIT: TLB_CONTROL back to nothing, the event whose delivery the exit interrupted
/// re-injected (APM 15.7.2; EXITINTINFO has the EVENTINJ layout) unless a handler replaces or
/// merges it, then the core's exit loop. True: run the guest again.
bool handle_exit(svm_host& h, current_vmcb& vmcb, guest_regs& regs, run_state& st, conformance_npt* npt,
                 npt_diff_state* nd, lx::linux_state* linux) {
  set_tlb_control(vmcb, sv::tlb_control::do_nothing);
  const sv::event_info intinfo{sv::read(vmcb, fld::exit_int_info)};
  sv::write(vmcb, fld::event_injection, intinfo.valid() ? intinfo.raw() : std::uint64_t{0});
  // Shadow paging: a #PF taken while an event was delivered (the IDT, the stack): the event
  // again, corrected and with its RIP advance, as for the NPT differential's unmapped page.
  if (intinfo.valid() && core::shadow::enabled() && read_exit_code(h, *st.results, vmcb) == sv::exception_exit(14))
    reinject_interrupted_event(h, vmcb, regs, st, st);
  core::context c = context_of(st);
  svm_backend b{h, vmcb, regs, c, npt, nd};
  if (linux) return core::handle_exit(b, c, lx::linux_profile{*linux});  // the Linux guest (linux/)
  return core::handle_exit(b, c, core::image_profile{st.cfg ? st.cfg->profile : nullptr});
}

/// One VMRUN of the current VMCB: RAX from the register block into the VMCB (VMRUN loads it
/// from there, 15.5.1), VMCB_CLEAN from the tracker, and RAX back into the block afterwards.
void vmrun(svm_host& h, current_vmcb& vmcb, guest_regs& regs) {
  vmrun(regs, *vmcb.slot, h.host_save, h.last_run, h.host_interrupts);
}

void vmrun(guest_regs& regs, vmcb_slot& s, std::uint8_t* host_save, const vmcb_slot*& last, bool host_if) {
  current_vmcb vmcb{&s};
  sv::write(vmcb, fld::rax, regs[x86::gpr::rax]);
#ifdef HVKIT_HV_SHADOW
  s.entry_eventinj = sv::read(vmcb, fld::event_injection);
  s.entry_rip = sv::read(vmcb, fld::rip);
  s.entry_rsp = sv::read(vmcb, fld::rsp);
#endif
  if (last != &s) s.tracked.invalidate();
  s.tracked.prepare_vmrun();
  last = &s;
  svm_vmrun(&regs, pa(s.page), pa(host_save), host_if ? 1 : 0);
  regs[x86::gpr::rax] = sv::read(vmcb, fld::rax);
}

}  // namespace hv::svm
