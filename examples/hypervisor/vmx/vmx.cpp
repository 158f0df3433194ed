// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, VMX backend: the core::backend operations over the current VMCS
// (exit decoding into core::exit_kind, registers, skip, injection, the MSRs and CRs the VMCS
// holds, the emulator's context and write-back, the EPT differentials' hooks) and the VM-exit
// entry point. Every handler is the core's (core/exit_loop.hpp).
#include "../hv.hpp"
#include "vmx_backend.hpp"
#include "../linux/linux_profile.hpp"
#include "../core/shadow_paging.hpp"

namespace hv {
// ---- the library's results --------------------------------------------------------------
// Every helper below is hvkit's (vmx/, emulate/): register file, skip, injection,
// re-injection, contexts. A failing VMREAD/VMWRITE there means the current VMCS is gone:
// the run ends.
void vmx_failed(const hvkit::vmx::vm_fail& f, core::vcpu_state& st) {
  kprintf("HVKIT ERROR VMX instruction failed (VM-instruction error %u, field 0x%x)\n",
          static_cast<unsigned>(f.error), f.field_encoding);
  st.status = run_status::fatal_exit;
}
void must(hvkit::result<void, hvkit::vmx::vm_fail> r, core::vcpu_state& st) {
  if (!r) vmx_failed(r.error(), st);
}


/// #GP(0) (or another hardware exception) into the guest, merged with what is pending.
void inject(vcpu& regs, core::vcpu_state& st, x86::vector vec, std::uint32_t error_code) {
  const auto q = must(hvkit::vmx::inject_exception(regs.backend(), {vec, error_code}), st);
  if (q.verdict == x86::merge_verdict::shutdown) st.status = run_status::triple_fault;
}

/// The guest's CR0/CR4 (read shadow and real value, the VMX fixed bits forced: SDM Vol. 3D
/// A.7, A.8 through vmx::cr_values_for), CR3 and EFER after a CR write the hypervisor carried
/// out (a CR-access exit or an emulated instruction); EFER.LMA follows LME && PG (SDM
/// 10.8.5), the "IA-32e mode guest" entry control with it.
void store_crs(const vmx_host& h, const hvkit::paging::cr_state& before, const hvkit::paging::cr_state& after,
               run_state& st) {
  namespace v = hvkit::vmx;
  const hvkit::vmx::vmx_capabilities& caps = h.caps;
  if (after.cr0.raw() != before.cr0.raw()) {
    // With unrestricted guest CR0.PE and PG are the guest's (SDM Vol. 3C 27.3.1.1).
    const bool unrestricted = v::secondary_proc_based{static_cast<std::uint32_t>(
                                  vmread(fields::secondary_processor_based_controls))}
                                  .test(v::secondary_proc_based::unrestricted_guest) &&
                              v::primary_proc_based{static_cast<std::uint32_t>(vmread(fields::primary_processor_based_controls))}
                                  .test(v::primary_proc_based::activate_secondary_controls);
    const v::cr_vmcs_values cv = v::cr0_values_for(after.cr0, {caps.cr0_fixed0, caps.cr0_fixed1}, unrestricted);
    vmwrite(fields::cr0_read_shadow, cv.read_shadow);
    // Shadow paging: the real CR0.WP is 1 (the shadow entries encode the guest's WP).
    vmwrite(fields::guest_cr0, core::shadow::enabled() ? cv.actual | x86::cr0::wp.raw() : cv.actual);
  }
  if (after.cr4.raw() != before.cr4.raw()) {
    const v::cr_vmcs_values cv = v::cr_values_for(after.cr4.raw(), caps.cr4_fixed0, caps.cr4_fixed1);
    vmwrite(fields::cr4_read_shadow, cv.read_shadow);
    // Shadow paging: the real CR4 has PAE (PAE-format shadow tables outside IA-32e mode,
    // paging::shadow::host_role()); the guest reads its own PAE from the read shadow.
    vmwrite(fields::guest_cr4, core::shadow::enabled() ? core::shadow::host_cr4(x86::cr4{cv.actual}).raw() : cv.actual);
  }
  if (after.efer.raw() != before.efer.raw()) {
    // Shadow paging: the real EFER.NXE is 1 (paging::shadow::host_role()).
    vmwrite(fields::guest_ia32_efer, core::shadow::enabled() ? (after.efer | x86::efer::nxe).raw() : after.efer.raw());
    const v::entry_controls ec{static_cast<std::uint32_t>(vmread(fields::vm_entry_controls))};
    vmwrite(fields::vm_entry_controls, (after.efer.test(x86::efer::lma) ? ec | v::entry_controls::ia32e_mode_guest
                                                                        : ec & ~v::entry_controls::ia32e_mode_guest)
                                           .raw());
    st.guest_efer = after.efer.raw();
    // Entering IA-32e mode with the TR the guest had in real mode (a busy 16-bit TSS, type
    // 3, as after INIT): VM entry into an IA-32e-mode guest requires type 11 (SDM Vol. 3C
    // 27.3.1.2), the processor itself never checks it before the guest's next LTR, which
    // loads a 64-bit TSS. The busy 16-bit type becomes the busy 64-bit one.
    const std::uint64_t tr_ar = vmread(fields::guest_tr_access_rights);
    if (after.efer.test(x86::efer::lma) && (tr_ar & 0xF) == 3) vmwrite(fields::guest_tr_access_rights, (tr_ar & ~0xFull) | 11);
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
bool handle_cr_write_shadow(const vmx_host& h, vcpu& regs, hvkit::vmx::cr_access_qualification q,
                            const hvkit::vmx::cr_context& c, run_state& st);  // vmx/vmx_shadow.cpp
bool handle_cr(const vmx_host& h, vcpu& regs, hvkit::vmx::cr_access_qualification q, run_state& st) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
  auto& vmcs = regs.backend();
  v::cr_context c = must(v::read_cr_context(vmcs, st.cpu->model), st);
  const bool shadow = core::shadow::enabled();
  if (shadow) {
    c.cr3 = core::shadow::guest_cr3(st).raw();  // the guest's CR3, not the shadow root
    c.efer = core::shadow::guest_efer(st);       // the real EFER.NXE is 1
  }
  if (q.type() == acc::mov_from_cr) {
    const v::cr_read_outcome rd = v::evaluate_cr_read(q, c, 0);
    if (!rd.valid) {
      kprintf("HVKIT ERROR unhandled CR read qualification=0x%llx\n", (unsigned long long)q.raw());
      st.status = run_status::fatal_exit;
      return false;
    }
    regs.write(rd.gpr, rd.value);
    must(v::skip_instruction(regs), st);
    return true;
  }
  if (shadow) return handle_cr_write_shadow(h, regs, q, c, st);
  const std::uint64_t value = must(v::cr_source_value(regs, q, c), st);
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, value, hvkit::paging::paging_kind::two_dimensional);
  if (out.cr != 0 && out.cr != 3 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    st.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    ++st.cr_gp_injected;
    inject(regs, st, x86::vector::gp);
    return true;
  }
  const unsigned maxphyaddr = st.cpu->model.maxphyaddr;
  if (out.cr == 3) {
    // MOV to CR3 under PAE paging loads the PDPTEs (SDM 4.4.1).
    const bool pae_paging = c.cr0.test(x86::cr0::pg) && c.cr4.test(x86::cr4::pae) && !c.efer.test(x86::efer::lma);
    if (pae_paging && !v::load_guest_pdptes(vmcs, x86::cr3{out.value}, guest_ram_view(st.ram), maxphyaddr)) {
      ++st.cr_gp_injected;
      inject(regs, st, x86::vector::gp);
      return true;
    }
    vmwrite(fields::guest_cr3, out.value);
    must(v::skip_instruction(regs), st);
    return true;
  }
  const auto applied = v::apply_cr_write_actions(vmcs, st.mmu, out.actions, out.after, x86::cr3{c.cr3}, guest_ram_view(st.ram),
                                                 maxphyaddr, false);
  if (!applied) {
    ++st.cr_gp_injected;  // a PDPTE with a reserved bit: #GP(0), nothing changed
    inject(regs, st, x86::vector::gp);
    return true;
  }
  if (out.actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++st.mmu_resets;
  if (applied.value().mmu_rebuilt) ++st.mmu_refreshes;
  store_crs(h, {c.cr0, c.cr4, c.efer}, out.after, st);
  must(v::skip_instruction(regs), st);
  return true;
}

// ---- one guest page unmapped from EPT until the guest touches it (hc::ept_unmap_once) ----
// The re-injection check: the guest puts an exception handler's stack (IST) on that page,
// so the EPT violation happens while the processor delivers the event (IDT-vectoring
// information valid). The 2 MiB EPT page around it is split into 4 KiB pages for the time.
void ept_unmap_restore(const vmx_host& h, core::check_counters::unmap_check& unmap) {
  h.ept_pd[unmap.gpa >> 21] = unmap.saved_pde;
  unmap.armed = false;
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
}

bool ept_unmap_once(const vmx_host& h, core::check_counters& k, std::uint64_t gpa) {
  namespace v = hvkit::vmx;
  core::check_counters::unmap_check& unmap = k.unmap;
  std::uint64_t* const ept_unmap_pt = h.ept_unmap_pt;
  std::uint64_t* const ept_pd = h.ept_pd;
  if (unmap.armed) ept_unmap_restore(h, unmap);
  if (gpa < layout::guest_mem_base || gpa >= layout::guest_mem_base + layout::guest_mem_size) return false;
  const auto ec = v::ept_capabilities_from(h.caps.ept_vpid_cap, core::host_maxphyaddr());
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
  unmap = {true, gpa & ~0xFFFull, ept_pd[gpa >> 21], 0, 0, 0, unmap.stale_intn, unmap.soft_int_type_for_int3,
           unmap.stale_on_interrupt, unmap.stale_on_stack};
  ept_pd[gpa >> 21] = table.value().raw();
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
  return true;
}

/// The unmapped page was touched: map it back (the re-injection already happened).
bool ept_unmapped_page_hit(const vmx_host& h, core::check_counters& k, const hvkit::vmx::exit_event_actions& events) {
  core::check_counters::unmap_check& unmap = k.unmap;
  if (!unmap.armed || (vmread(fields::guest_physical_address) & ~0xFFFull) != unmap.gpa) return false;
  ept_unmap_restore(h, unmap);
  ++unmap.hits;
  unmap.seen_info = events.reinject.info.raw();
  unmap.seen_length = events.reinject.instruction_length;
  return true;
}

/// hc::ept_unmap_report: hits (bits 7:0), the re-injected event's instruction length
/// (15:8) and VM-entry interruption information (63:32); the error code, if any, the guest
/// sees in its own frame. Resets the count.
std::uint64_t ept_unmap_report(const vmx_host& h, core::check_counters& k) {
  core::check_counters::unmap_check& unmap = k.unmap;
  const std::uint64_t r = (unmap.hits & 0xFF) | (std::uint64_t{unmap.seen_length & 0xFF} << 8) | (unmap.seen_info << 32);
  k.unmap_untouched_at_report = unmap.armed && unmap.hits == 0;
  if (unmap.armed) ept_unmap_restore(h, unmap);
  unmap.hits = 0;
  unmap.seen_info = 0;
  unmap.seen_length = 0;
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
bool is_vmx_instruction(hvkit::vmx::exit_reason r) {
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
bool injection_consistent(vcpu& regs, core::vcpu_state& st) {
  namespace v = hvkit::vmx;
  const v::injected_event e = must(v::read_injection(regs.backend()), st);
  if (!e.valid()) return true;
  const v::injection_error fe = v::check_injection_fields(e);
  const auto state = v::interruptibility_state{static_cast<std::uint32_t>(vmread(fields::guest_interruptibility_state))};
  const auto activity = static_cast<v::activity_state>(vmread(fields::guest_activity_state));
  const bool virtual_nmis = v::pin_based{static_cast<std::uint32_t>(vmread(fields::pin_based_controls))}.test(
      v::pin_based::virtual_nmis);
  const v::entry_state_error se = v::check_entry_state(e, state, activity, must(regs.rflags(), st), virtual_nmis);
  if (fe == v::injection_error::none && se == v::entry_state_error::none) return true;
  kprintf("HVKIT ERROR injection refused before VM entry: interruption_info=0x%x injection_error=%u entry_state_error=%u\n",
          e.info.raw(), static_cast<unsigned>(fe), static_cast<unsigned>(se));
  return false;
}

unsigned guest_cpl() { return (vmread(fields::guest_ss_access_rights) >> 5) & 3; }  // SDM Vol. 3C 25.4.1


}  // namespace hv

using namespace hv;
using namespace hv::vmx;

/// One VM exit: the register file over the current VMCS (GPRs in the block the exit stub
/// filled), the event whose delivery the exit interrupted re-injected first
/// (vmx::complete_exit_events, SDM Vol. 3C 28.2.3-28.2.4), the core's handler, and
/// RSP/RIP/RFLAGS written back before the stub's VMRESUME. `st` is the vCPU's state and its
/// checks, as its run handed them to vmx_enter, and `host` the boot's VMX capabilities and pages
/// (the stub keeps the pointers on the host stack).
extern "C" int hv_handle_exit(guest_regs* block, run_state* vcpu_st, const vmx_host* host) {
  run_state& st = *vcpu_st;
  hvkit::vmx::hw::current_vmcs vmcs;
  const hvkit::vmx::exit_reason_field reason{static_cast<std::uint32_t>(vmread(fields::exit_reason))};
  vcpu regs(vmcs, *block);
  hvkit::vmx::exit_event_actions events{};
  if (!reason.entry_failure()) events = must(hvkit::vmx::complete_exit_events(vmcs, reason.basic()), st);
  vmx_backend b{regs, events, reason, st, *host};
  if (st.cfg == &lx::linux_run) {  // the Linux guest profile (linux/linux.cpp)
    const bool resume = lx::handle_exit(b);
    must(regs.flush(), st);
    return resume && injection_consistent(regs, st) ? 1 : 0;
  }
  core::context c = context_of(st);
  bool resume = core::handle_exit(b, c, core::image_profile{st.cfg ? st.cfg->profile : nullptr});
  must(regs.flush(), st);
  if (resume && st.status == run_status::running && !injection_consistent(regs, st)) st.status = run_status::fatal_exit;
  return resume && st.status == run_status::running ? 1 : 0;  // a VMX failure or a shutdown verdict ends it
}
