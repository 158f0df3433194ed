// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: VM-exit handlers (one overload per exit reason, dispatched by vmx::dispatch_exit), emulation through hvkit::emulate, the MMIO test device and the hypercalls.
#include "hv.hpp"
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
hvkit::vmx::guest_cpu_config guest_config() {
  return {guest_cr4_allowed(), guest_cpu_properties().maxphyaddr, guest_policy.has(cpuid_ns::feat::lam)};
}

/// #GP(0) (or another hardware exception) into the guest, merged with what is pending.
void inject(vcpu& regs, x86::vector vec, std::uint32_t error_code = 0) {
  const auto q = must(hvkit::vmx::inject_exception(regs.backend(), {vec, error_code}));
  if (q.verdict == x86::merge_verdict::shutdown) run.status = run_status::triple_fault;
}

// ---- exit handlers -------------------------------------------------------------------------
/// CR-access exit (reason 28), qualification decoded by vmx::dispatch_exit (SDM Vol. 3C
/// 28.2.1, Table 28-3). The guest-visible CR state comes from vmx::read_cr_context; writes
/// (MOV to CR0/CR3/CR4, CLTS, LMSW) go through vmx::evaluate_cr_write (the architectural
/// #GP checks, the new value, the MMU actions), MOV from CR3 through vmx::evaluate_cr_read.
/// A fault is #GP(0) and changes nothing. The MMU actions are carried out by
/// vmx::apply_cr_write_actions (PAE PDPTEs into the VMCS, the permission table refreshed on
/// a WP toggle, never a reset). vmx::cr_values_for gives the read shadow and the real value
/// with the VMX fixed bits forced (SDM Vol. 3D A.7, A.8).
bool handle_cr(vcpu& regs, hvkit::vmx::cr_access_qualification q) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
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
  if (out.cr == 0) {
    const v::cr_vmcs_values cv = v::cr_values_for(out.after.cr0.raw(), caps.cr0_fixed0, caps.cr0_fixed1);
    vmwrite(fields::cr0_read_shadow, cv.read_shadow);
    vmwrite(fields::guest_cr0, cv.actual);
  } else {
    const v::cr_vmcs_values cv = v::cr_values_for(out.after.cr4.raw(), caps.cr4_fixed0, caps.cr4_fixed1);
    vmwrite(fields::cr4_read_shadow, cv.read_shadow);
    vmwrite(fields::guest_cr4, cv.actual);
  }
  if (out.after.efer.raw() != c.efer.raw()) {
    // EFER.LMA follows LME && PG (SDM 10.8.5); the "IA-32e mode guest" entry control with it.
    vmwrite(fields::guest_ia32_efer, out.after.efer.raw());
    const v::entry_controls ec{static_cast<std::uint32_t>(vmread(fields::vm_entry_controls))};
    vmwrite(fields::vm_entry_controls, (out.after.efer.test(x86::efer::lma) ? ec | v::entry_controls::ia32e_mode_guest
                                                                         : ec & ~v::entry_controls::ia32e_mode_guest)
                                           .raw());
    run.guest_efer = out.after.efer.raw();
  }
  must(v::skip_instruction(regs));
  return true;
}

/// CPUID exit: the answer of the guest's hvkit::cpuid policy, with the dynamic bits
/// (OSXSAVE, OSPKE) from the guest's CR4 as the guest sees it.
void handle_cpuid(vcpu& regs) {
  using enum x86::gpr;
  auto& g = regs.gprs();
  cpuid_ns::vcpu_state vs{};
  vs.cr4 = must(hvkit::vmx::read_guest_visible_cr4(regs.backend()));
  const cpuid_ns::regs a = guest_policy.answer(static_cast<std::uint32_t>(g[rax]), static_cast<std::uint32_t>(g[rcx]), vs);
  g[rax] = a.eax;
  g[rbx] = a.ebx;
  g[rcx] = a.ecx;
  g[rdx] = a.edx;
  must(hvkit::vmx::skip_instruction(regs));
}

/// RDMSR/WRMSR: every access exits (no MSR bitmap). The MSR policy follows the CPUID
/// policy: IA32_PRED_CMD is writable exactly when CPUID.7.0:EDX[26] (IBRS/IBPB) is
/// advertised; unknown MSRs raise #GP(0) as on hardware.
bool handle_msr(vcpu& regs, bool write) {
  using enum x86::gpr;
  auto& g = regs.gprs();
  auto m = static_cast<std::uint32_t>(g[rcx]);
  std::uint64_t v = (g[rdx] << 32) | (g[rax] & 0xFFFFFFFF);
  bool ok = true;
  // MSRs the CPUID-derived policy decides (PRED_CMD, SPEC_CTRL, FLUSH_CMD, ...).
  const cpuid_ns::msr_verdict verdict = write ? guest_msrs.write(m, v) : guest_msrs.read(m);
  if (verdict == cpuid_ns::msr_verdict::gp) {
    inject(regs, x86::vector::gp);
    return true;
  }
  if (verdict == cpuid_ns::msr_verdict::allow) {
    // Allowed means the host has the feature too (the policy only passes host features
    // through): perform the access on the real MSR.
    if (write) {
      wrmsr(m, v);
    } else {
      v = rdmsr(m);
      g[rax] = v & 0xFFFFFFFF;
      g[rdx] = v >> 32;
    }
    must(hvkit::vmx::skip_instruction(regs));
    return true;
  }
  if (!write) {
    switch (m) {
      case x86::msr::ia32_efer: v = vmread(fields::guest_ia32_efer); break;
      case x86::msr::ia32_fs_base: v = vmread(fields::guest_fs_base); break;
      case x86::msr::ia32_gs_base: v = vmread(fields::guest_gs_base); break;
      case x86::msr::ia32_sysenter_cs: v = vmread(fields::guest_ia32_sysenter_cs); break;
      case x86::msr::ia32_sysenter_esp: v = vmread(fields::guest_ia32_sysenter_esp); break;
      case x86::msr::ia32_sysenter_eip: v = vmread(fields::guest_ia32_sysenter_eip); break;
      case x86::msr::ia32_pat: v = rdmsr(x86::msr::ia32_pat); break;
      case x86::msr::ia32_star: case x86::msr::ia32_lstar: case x86::msr::ia32_cstar: case x86::msr::ia32_fmask: case x86::msr::ia32_kernel_gs_base:
        v = rdmsr(m);  // not used by the host: the guest's values live in the real MSRs
        break;
      default: ok = false;
    }
    if (ok) {
      g[rax] = v & 0xFFFFFFFF;
      g[rdx] = v >> 32;
    }
  } else {
    switch (m) {
      case x86::msr::ia32_efer: {
        // SCE and NXE may change; LME may not change while paging is on; LMA is read-only.
        std::uint64_t changeable = efer_sce | efer_nxe;
        std::uint64_t cur = vmread(fields::guest_ia32_efer);
        if ((v & ~(changeable | efer_lme | efer_lma)) || ((v ^ cur) & efer_lme)) {
          ok = false;
        } else {
          // An NXE change feeds the MMU role: paging::cr_write_actions, carried out by vmx/.
          const hvkit::vmx::cr_context c = must(hvkit::vmx::read_cr_context(regs.backend(), guest_config()));
          const hvkit::paging::cr_state before{c.cr0, c.cr4, c.efer};
          hvkit::paging::cr_state after = before;
          after.efer = x86::efer{(cur & ~changeable) | (v & changeable)};
          const auto actions = hvkit::paging::cr_write_actions(before, after, hvkit::paging::paging_kind::two_dimensional);
          vmwrite(fields::guest_ia32_efer, after.efer.raw());
          if (actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++run.mmu_resets;
          const auto applied = hvkit::vmx::apply_cr_write_actions(regs.backend(), run.mmu, actions, after, x86::cr3{c.cr3},
                                                                  guest_ram_view(), guest_cpu_properties().maxphyaddr, false);
          if (applied && applied.value().mmu_rebuilt) ++run.mmu_refreshes;
        }
        run.guest_efer = vmread(fields::guest_ia32_efer);
        break;
      }
      case x86::msr::ia32_fs_base: vmwrite(fields::guest_fs_base, v); break;
      case x86::msr::ia32_gs_base: vmwrite(fields::guest_gs_base, v); break;
      case x86::msr::ia32_sysenter_cs: vmwrite(fields::guest_ia32_sysenter_cs, v); break;
      case x86::msr::ia32_sysenter_esp: vmwrite(fields::guest_ia32_sysenter_esp, v); break;
      case x86::msr::ia32_sysenter_eip: vmwrite(fields::guest_ia32_sysenter_eip, v); break;
      case x86::msr::ia32_star: case x86::msr::ia32_lstar: case x86::msr::ia32_cstar: case x86::msr::ia32_fmask: case x86::msr::ia32_kernel_gs_base:
        wrmsr(m, v);
        break;
      default: ok = false;
    }
  }
  if (!ok) {
    inject(regs, x86::vector::gp);
    return true;
  }
  must(hvkit::vmx::skip_instruction(regs));
  return true;
}

// ---- guest memory and the emulator ---------------------------------------------------
/// Guest RAM as hvkit::paging sees it: EPT is an identity map, so guest-physical
/// [guest_mem_base, +guest_mem_size) is also host memory at the same address. Anything
/// outside is "unbacked" for the walker: a guest page table there is reported, never read.
hvkit::paging::flat_memory guest_ram_view() {
  return {reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
          x86::gpa{layout::guest_mem_base}};
}
std::uint8_t* guest_ram(std::uint64_t gpa, std::uint64_t size) {
  if (gpa < layout::guest_mem_base || size > layout::guest_mem_size ||
      gpa - layout::guest_mem_base > layout::guest_mem_size - size)
    return nullptr;
  return reinterpret_cast<std::uint8_t*>(gpa);
}

hvkit::paging::cpu_properties guest_cpu_properties() {
  static hvkit::paging::cpu_properties props{};
  static bool done = false;
  if (!done) {
    bool ext8 = cpuid(0x80000000).eax >= 0x80000008;
    props.maxphyaddr = ext8 ? (cpuid(0x80000008).eax & 0xFF) : 36;
    props.gbpages = (cpuid(0x80000001).edx >> 26) & 1;
    done = true;
  }
  return props;
}

unsigned guest_cpl() { return (vmread(fields::guest_ss_access_rights) >> 5) & 3; }  // SDM Vol. 3C 25.4.1

// ---- the MMIO test device and unassigned guest-physical space --------------------------
std::uint64_t device_read(std::uint64_t offset, unsigned size) {
  mmio_device& d = run.device;
  d.regs[0] = layout::mmio_device_id;
  std::uint64_t v = 0;
  for (unsigned k = 0; k < size; ++k) {
    std::uint64_t o = offset + k;
    std::uint64_t byte = o < sizeof d.regs ? (d.regs[o / 8] >> (8 * (o % 8))) & 0xFF : 0;
    v |= byte << (8 * k);
  }
  d.regs[3] = ++run.device_reads;
  return v;
}

void device_write(std::uint64_t offset, unsigned size, std::uint64_t v) {
  mmio_device& d = run.device;
  for (unsigned k = 0; k < size; ++k) {
    std::uint64_t o = offset + k;
    if (o >= 8 && o < 16) {  // only the scratch register is writable
      unsigned sh = 8 * (o % 8);
      d.regs[1] = (d.regs[1] & ~(0xFFull << sh)) | (((v >> (8 * k)) & 0xFF) << sh);
    }
  }
  d.regs[2] = ++run.device_writes;
}


/// The emulator's platform: the test device, and every other non-RAM guest-physical
/// address as unassigned (reads all ones, writes dropped). Ports, CPUID and MSRs are not
/// routed through the emulator here (their exits are handled directly).
struct hv_platform : em::null_platform {
  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size) {
      out = device_read(g - layout::mmio_device_gpa, size);
    } else {
      out = size >= 8 ? ~0ull : ((1ull << (8 * size)) - 1);
      if (++run.unassigned_reads <= 4)
        kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx read(all-ones) size=%u\n", run.cfg->name,
                (unsigned long long)g, size);
    }
    return true;
  }
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    std::uint64_t g = a.value();
    if (g >= layout::mmio_device_gpa && g < layout::mmio_device_gpa + layout::mmio_device_size) {
      device_write(g - layout::mmio_device_gpa, size, v);
    } else if (++run.unassigned_writes <= 4) {
      kprintf("HVKIT INFO run=%s unassigned_access gpa=0x%llx write(dropped) size=%u\n", run.cfg->name,
              (unsigned long long)g, size);
    }
    return true;
  }
};
static_assert(em::platform<hv_platform>);

/// The translator the emulator walks guest page tables with: emulate::walker_translator over
/// the run's mmu_context. Its refresh_passthrough_bits() re-syncs CR0.WP from the live CR0
/// before every translation; the negative-control run skips that refresh, which is the
/// KVM bug (a role cached at the last CR exit).
struct hv_translator {
  em::walker_translator<pg::flat_memory> inner;
  bool stale;
  bool refresh_passthrough_bits(x86::cr0 live) {
    if (stale) return false;
    bool changed = inner.refresh_passthrough_bits(live);
    if (changed) ++run.passthrough_refreshes;
    return changed;
  }
  pg::walk_result walk(const pg::walk_request& req) { return inner.walk(req); }
};
static_assert(em::translator<hv_translator>);

/// Emulates the instruction at the guest RIP with hvkit::emulate: the context from the VMCS
/// and the register file (emulate::read_emulation_context), the outcome applied back by
/// emulate::apply_emulation (registers, RIP, interrupt shadow, single step; an exception
/// injected, merged with a pending event, and CR2 loaded for #PF). An instruction not
/// emulated (or needing a device access no platform handler took) gets #UD, the
/// architectural default.
bool emulate_instruction(vcpu& regs, const char* why) {
  em::context ctx = must(em::read_emulation_context(regs.backend(), regs, guest_config()));
  if (run.status != run_status::running) return false;
  const em::context before = ctx;
  const pg::cpu_properties props = guest_cpu_properties();
  run.mmu.set_root(x86::cr3_root(ctx.cr3, run.mmu.role().mode(), props.maxphyaddr));
  pg::flat_memory tables = guest_ram_view();
  em::flat_ram ram{reinterpret_cast<std::uint8_t*>(layout::guest_mem_base), layout::guest_mem_size,
                   x86::gpa{layout::guest_mem_base}};
  hv_translator tr{em::walker_translator<pg::flat_memory>{run.mmu, tables, props}, run.cfg->stale_role};
  hv_platform plat;
  const em::outcome o = em::emulate(ctx, tr, ram, plat);
  ++run.emulated;
  if (o.is_done() && (o.what == em::event::cr_write || o.what == em::event::dr_write || o.what == em::event::halt)) {
    kprintf("HVKIT ERROR run=%s emulated instruction with unexpected side effect %u (%s exit)\n", run.cfg->name,
            static_cast<unsigned>(o.what), why);
    run.status = run_status::fatal_exit;
    return false;
  }
  if (o.kind == em::outcome_kind::unsupported &&
      (o.why == em::unsupported_reason::page_table_unbacked || o.why == em::unsupported_reason::fetch_not_ram)) {
    kprintf("HVKIT ERROR run=%s cannot emulate at rip=0x%llx (%s exit): reason %u\n", run.cfg->name,
            (unsigned long long)before.rip, why, static_cast<unsigned>(o.why));
    run.status = run_status::fatal_exit;
    return false;
  }
  if (o.is_exception() && o.vector == x86::vector::pf && run.cfg->stale_role && o.error_code == 0x3 &&
      !before.cr0.test(x86::cr0::wp))
    ++run.stale_wrong_faults;
  const em::applied_outcome a = must(em::apply_emulation(regs.backend(), regs, before, ctx, o));
  using k = em::applied_outcome::kind_type;
  switch (a.kind) {
    case k::done: return true;
    case k::injected:
      // VM entry does not load CR2 (SDM Vol. 3C 27.3.2): the guest sees the real one.
      if (a.load_cr2) write_cr2(a.cr2);
      return true;
    case k::shutdown:
      report_exit("exception_while_delivering_double_fault");
      run.status = run_status::triple_fault;
      return false;
    case k::needs_access:
    case k::unsupported:
      ++run.not_emulable;
      kprintf("HVKIT INFO run=%s not_emulable rip=0x%llx (%s exit) outcome=%u mnemonic=%u: #UD\n", run.cfg->name,
              (unsigned long long)before.rip, why, static_cast<unsigned>(o.kind), static_cast<unsigned>(o.op));
      inject(regs, x86::vector::ud);
      return true;
  }
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
// The last hc::ept_unmap_report found the page still unmapped, never touched through an
// exit: the event delivery the guest saw then was the CPU's alone, so the guest's next
// result (its re-injection check) may report a deviation as the CPU's erratum.
bool unmap_untouched_at_report = false;

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
  unmap_untouched_at_report = unmap.armed && unmap.hits == 0;
  if (unmap.armed) ept_unmap_restore();
  unmap.hits = 0;
  unmap.seen = {};
  return r;
}

/// EPT violation (reason 48); exit qualification: SDM Vol. 3C 28.2.1, Table 28-7. Guest
/// RAM is all mapped, so this is an access to the test device or to unassigned space (the
/// emulator redoes the access against hv_platform), a case of the EPT differential, or the
/// page the guest asked to have unmapped (hc::ept_unmap_once): mapped back, and the event
/// whose delivery touched it was already re-injected by vmx::complete_exit_events.
bool handle_ept_violation(vcpu& regs, const hvkit::vmx::exit_event_actions& events) {
  if (ept_case_violation()) return true;  // a provoked one (EPT differential): retry
  if (ept_unmapped_page_hit(events)) return true;
  if (events.reinject.valid()) {
    report_exit("ept_violation_during_event_delivery");
    run.status = run_status::fatal_exit;
    return false;
  }
  if (hvkit::vmx::ept_violation_qualification{vmread(fields::exit_qualification)}.fetch()) {
    report_exit("guest_fetch_outside_memory");
    run.status = run_status::fatal_exit;
    return false;
  }
  return emulate_instruction(regs, "ept_violation");
}

void print_section(const char* name, std::uint64_t ops, std::uint64_t guest_mismatch, std::uint64_t guest_tsc) {
  counters d{};
  d.total = run.exits.total - run.mark.total - 1;  // minus this mark_end VMCALL
  for (unsigned i = 0; i < exit_reason_slots; ++i) d.by_reason[i] = run.exits.by_reason[i] - run.mark.by_reason[i];
  d.by_reason[static_cast<unsigned>(hvkit::vmx::exit_reason::vmcall)] -= 1;
  std::uint64_t cr = d.by_reason[static_cast<unsigned>(hvkit::vmx::exit_reason::cr_access)];
  std::uint64_t expect = run.cfg->wp_intercepted ? ops : 0;
  bool pass = cr == expect && d.total == expect && guest_mismatch == 0;
  milli per = ratio(cr, ops);
  milli tsc_per = ratio(guest_tsc, ops);
  char check[64];
  {
    // "<section>.<run>"
    std::size_t n = 0;
    for (const char* p = name; *p && n < 40; ++p) check[n++] = *p;
    check[n++] = '.';
    for (const char* p = run.cfg->name; *p && n < 62; ++p) check[n++] = *p;
    check[n] = '\0';
  }
  result(check, pass, "toggles=%llu cr_exits=%llu all_exits=%llu exits_per_toggle=%llu.%03llu expected=%llu guest_mismatches=%llu tsc_per_toggle=%llu.%03llu",
         (unsigned long long)ops, (unsigned long long)cr, (unsigned long long)d.total, per.whole, per.frac,
         (unsigned long long)expect, (unsigned long long)guest_mismatch, tsc_per.whole, tsc_per.frac);
  if (name[0] == 'w' && name[1] == 'p' && name[3] == 't') {  // "wp_toggle": kept for the comparison
    run.wp_seen = true;
    run.wp_toggles = ops;
    run.wp_cr_exits = cr;
    run.wp_mismatch = guest_mismatch;
    run.wp_tsc = guest_tsc;
  }
}

bool handle_vmcall(vcpu& regs) {
  using enum x86::gpr;
  auto& r = regs.gprs();
  char name[64];
  // Hypercalls are for the guest kernel only (CPL 0: SS.DPL, SDM Vol. 3C 25.4.1).
  if (((vmread(fields::guest_ss_access_rights) >> 5) & 3) != 0) {
    r[rax] = ~0ull;
    must(hvkit::vmx::skip_instruction(regs));
    return true;
  }
  switch (r[rax]) {
    case hc::log: {
      char buf[160];
      read_guest_string(r[rbx], buf, sizeof buf);
      kprintf("guest: %s\n", buf);
      break;
    }
    case hc::mark_begin:
      run.mark = run.exits;
      break;
    case hc::mark_end:
      read_guest_string(r[rbx], name, sizeof name);
      print_section(name, r[rcx], r[rdx], r[rsi]);
      break;
    case hc::result: {
      read_guest_string(r[rbx], name, sizeof name);
      char check[80];
      std::size_t n = 0;
      for (const char* p = name; *p && n < 60; ++p) check[n++] = *p;
      check[n++] = '.';
      for (const char* p = run.cfg->name; *p && n < 78; ++p) check[n++] = *p;
      check[n] = '\0';
      if (run.cfg->stale_role) {
        // Negative control: the guest's verdicts are evidence, not results.
        kprintf("HVKIT INFO run=%s guest_check=%s guest_verdict=%s a=0x%llx b=0x%llx\n", run.cfg->name, name,
                r[rcx] == hc::result_pass ? "PASS" : "FAIL", (unsigned long long)r[rdx], (unsigned long long)r[rsi]);
        if (str_eq(name, "ltr_ro_gdt_wp0_ok")) {
          run.neg_wp0_seen = true;
          run.neg_wp0_result = r[rcx];
        }
      } else if (r[rcx] == hc::result_erratum && (!run.cfg->dt_exiting || unmap_untouched_at_report)) {
        // Only runs where the CPU executes the instruction itself may report an erratum, and
        // a re-injection check whose event never reached the hypervisor.
        ++results_errata;
        kprintf("HVKIT ERRATUM %s a=0x%llx b=0x%llx\n", check, (unsigned long long)r[rdx],
                (unsigned long long)r[rsi]);
      } else {
        result(check, r[rcx] == hc::result_pass, "a=0x%llx b=0x%llx", (unsigned long long)r[rdx],
               (unsigned long long)r[rsi]);
      }
      unmap_untouched_at_report = false;
      break;
    }
    case hc::paging_case:
      r[rax] = handle_paging_case(r);
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::paging_case32:
      r[rax] = handle_paging_case32(r);
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::ept_arm:
      handle_ept_arm(r);
      r[rax] = 0;
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::ept_check:
      r[rax] = handle_ept_check(r);
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::ept_unmap_once:
      r[rax] = ept_unmap_once(r[rbx]) ? 0 : ~0ull;
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::ept_unmap_report:
      r[rax] = ept_unmap_report();
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::spin_more:  // the VMX two-guest runs: the fixed spins are enough
      r[rax] = 0;
      must(hvkit::vmx::skip_instruction(regs));
      return true;
    case hc::done:
      run.status = run_status::done;
      must(hvkit::vmx::skip_instruction(regs));
      return false;
    case hc::unexpected:
      kprintf("HVKIT ERROR guest exception vector=%llu error=0x%llx rip=0x%llx cr2=0x%llx\n",
              (unsigned long long)r[rbx], (unsigned long long)r[rcx], (unsigned long long)r[rdx],
              (unsigned long long)r[rsi]);
      run.status = run_status::fatal_exit;
      return false;
    default:
      r[rax] = ~0ull;  // unknown hypercall: error return, the guest keeps running
      must(hvkit::vmx::skip_instruction(regs));
      return true;
  }
  r[rax] = 0;
  must(hvkit::vmx::skip_instruction(regs));
  return true;
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

/// The exit handler for hvkit::vmx::dispatch_exit: one overload per handled basic exit
/// reason, chosen at compile time (one switch, no function pointers or virtual calls).
/// Each returns 1 to resume the guest, 0 to end the run.
struct exit_handler {
  using result_type = int;
  vcpu& regs;
  const hvkit::vmx::exit_event_actions& events;

  template <class B>
  int operator()(hvkit::vmx::cr_access_exit e, B&) { return handle_cr(regs, e.qualification) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::cpuid>, B&) { handle_cpuid(regs); return 1; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::vmcall>, B&) { return handle_vmcall(regs) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::rdmsr>, B&) { return handle_msr(regs, false) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::wrmsr>, B&) { return handle_msr(regs, true) ? 1 : 0; }
  template <hvkit::vmx::exit_reason R, class B>
    requires(is_vmx_instruction(R))
  int operator()(hvkit::vmx::exit_tag<R>, B&) {
    ++run.vmx_ud_injected;
    inject(regs, x86::vector::ud);
    return 1;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ldtr_tr_access>, B&) {
    return emulate_instruction(regs, "ldtr_tr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::gdtr_idtr_access>, B&) {
    return emulate_instruction(regs, "gdtr_idtr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ept_violation>, B&) {
    return handle_ept_violation(regs, events) ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ept_misconfiguration>, B&) {
    if (ept_case_misconfig()) return 1;  // provoked (EPT differential): retry
    report_exit("ept_misconfiguration");
    run.status = run_status::fatal_exit;
    return 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::hlt>, B&) {
    report_exit("guest_halted");
    run.status = run_status::halted;
    return 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::triple_fault>, B&) {
    report_exit("guest_triple_fault",
                run.cfg->expected == run_status::triple_fault || (run.cfg->guest_flags & hc::cfg_hostile_b));
    run.status = run_status::triple_fault;
    return 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::preemption_timer>, B&) {
    run.preempted = true;  // end of a time slice: the scheduler switches VMCS
    return 0;
  }
  template <class B>
  int entry_failed(hvkit::vmx::exit_reason_field, B&) {
    // SDM Vol. 3C 27.8 "VM-Entry Failures During or After Loading Guest State".
    report_exit("vm_entry_failed");
    print_vm_entry_diagnosis(run.cfg->name);
    run.status = run_status::entry_failed;
    return 0;
  }
  template <class B>
  int unhandled(hvkit::vmx::exit_reason_field, B&) {
    report_exit("unexpected_exit");
    run.status = run_status::fatal_exit;
    return 0;
  }
};

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

}  // namespace hv

using namespace hv;
using namespace hv::vmx;

/// One VM exit: the register file over the current VMCS (GPRs in the block the exit stub
/// filled), the event whose delivery the exit interrupted re-injected first
/// (vmx::complete_exit_events, SDM Vol. 3C 28.2.3-28.2.4), the handler, and RSP/RIP/RFLAGS
/// written back before the stub's VMRESUME.
extern "C" int hv_handle_exit(guest_regs* block) {
  hvkit::vmx::hw::current_vmcs vmcs;
  const hvkit::vmx::exit_reason_field reason{static_cast<std::uint32_t>(vmread(fields::exit_reason))};
  const std::uint32_t basic = reason.basic_raw();
  run.exits.total++;
  run.exits.by_reason[basic < exit_reason_slots ? basic : exit_reason_slots - 1]++;
  vcpu regs(vmcs, *block);
  hvkit::vmx::exit_event_actions events{};
  if (!reason.entry_failure()) events = must(hvkit::vmx::complete_exit_events(vmcs, reason.basic()));
  if (lx::active) {  // the Linux guest (linux/linux.cpp)
    const int lrc = lx::handle_exit(regs, basic);
    must(regs.flush());
    return lrc != 0 && injection_consistent(regs) ? 1 : 0;
  }
  exit_handler h{regs, events};
  int rc = hvkit::vmx::dispatch_exit(h, vmcs, reason);
  must(regs.flush());
  if (rc != 0 && run.status == run_status::running && !injection_consistent(regs)) run.status = run_status::fatal_exit;
  if (rc != 0 && run.status != run_status::running) rc = 0;  // a VMX failure or a shutdown verdict
  return rc;
}
