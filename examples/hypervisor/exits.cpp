// hvkit reference hypervisor: VM-exit handlers (one overload per exit reason, dispatched by vmx::dispatch_exit), emulation through hvkit::emulate, the MMIO test device and the hypercalls.
#include "hv.hpp"

namespace hv {

// ---- exit handlers -------------------------------------------------------------------------
/// The guest's CR state for vmx::evaluate_cr_write / evaluate_cr_read: CR0/CR4 as the
/// guest sees them (guest-owned bits from the guest field, host-owned ones from the read
/// shadow), EFER, CR3, the CR4 bits its CPUID allows, CS.L (CS access rights bit 13, SDM
/// Vol. 3C 25.4.1), MAXPHYADDR (CPUID.80000008H:EAX[7:0]) and LAM only if the guest's CPUID
/// enumerates it.
hvkit::vmx::cr_context guest_cr_context() {
  namespace v = hvkit::vmx;
  const std::uint64_t m0 = vmread(fields::cr0_guest_host_mask), m4 = vmread(fields::cr4_guest_host_mask);
  v::cr_context c{};
  c.cr0 = v::guest_visible_cr0(x86::cr0{vmread(fields::guest_cr0)}, x86::cr0{vmread(fields::cr0_read_shadow)}, m0);
  c.cr4 = v::guest_visible_cr4(x86::cr4{vmread(fields::guest_cr4)}, x86::cr4{vmread(fields::cr4_read_shadow)}, m4);
  c.efer = x86::efer{vmread(fields::guest_ia32_efer)};
  c.cr3 = vmread(fields::guest_cr3);
  c.cr4_allowed = guest_cr4_allowed();
  c.cs_l = (vmread(fields::guest_cs_access_rights) >> 13) & 1;
  c.maxphyaddr = guest_cpu_properties().maxphyaddr;
  c.lam = guest_policy.has(cpuid_ns::feat::lam);
  return c;
}

/// PAE paging with EPT: VM entry loads the PDPTE registers from the VMCS guest-PDPTE
/// fields (SDM Vol. 3C 26.3.2.4), so an emulated CR write that loads them (MOV to CR3, or
/// a CR0/CR4 write entering PAE paging, SDM 4.4.1) must put them there: paging::load_pdptrs
/// against guest memory. A reserved bit in a present PDPTE is #GP(0) on that MOV, and the
/// write does not happen (false).
bool load_guest_pdptes(std::uint64_t cr3) {
  pg::flat_memory mem = guest_ram_view();
  const auto p = pg::load_pdptrs(x86::cr3{cr3}, mem, guest_cpu_properties().maxphyaddr);
  if (!p) return false;
  vmwrite(fields::guest_pdpte0, p.value().entries[0]);
  vmwrite(fields::guest_pdpte1, p.value().entries[1]);
  vmwrite(fields::guest_pdpte2, p.value().entries[2]);
  vmwrite(fields::guest_pdpte3, p.value().entries[3]);
  return true;
}

/// CR-access exit (reason 28), qualification decoded by vmx::dispatch_exit (SDM Vol. 3C
/// 28.2.1, Table 28-3). Every access goes through hvkit::vmx: writes (MOV to CR0/CR3/CR4,
/// CLTS, LMSW) through vmx::evaluate_cr_write against the guest-visible state (the
/// architectural #GP checks, CR3 reserved bits included; the new value; the MMU actions
/// from paging::cr_write_actions: a WP toggle refreshes the permission table and never
/// resets the MMU); MOV from CR3 through vmx::evaluate_cr_read. A fault is injected as
/// #GP(0) and changes nothing. vmx::cr_values_for gives the read shadow and the real value
/// with the VMX fixed bits forced (SDM Vol. 3D A.7, A.8).
bool handle_cr(guest_regs& r, hvkit::vmx::cr_access_qualification q) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
  const v::cr_context c = guest_cr_context();
  if (q.type() == acc::mov_from_cr) {
    const v::cr_read_outcome rd = v::evaluate_cr_read(q, c, 0);
    if (!rd.valid) {
      kprintf("HVKIT ERROR unhandled CR read qualification=0x%llx\n", (unsigned long long)q.raw());
      run.status = run_status::fatal_exit;
      return false;
    }
    write_gpr(r, rd.gpr, rd.value);
    skip_instruction();
    return true;
  }
  // The whole register: outside 64-bit mode evaluate_cr_write uses its low 32 bits itself.
  const std::uint64_t value = q.type() == acc::mov_to_cr ? read_gpr(r, q.gpr()) : 0;
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, value, hvkit::paging::paging_kind::two_dimensional);
  if (out.cr != 0 && out.cr != 3 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    run.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    ++run.cr_gp_injected;
    inject_gp();
    return true;
  }
  const bool pae_paging = c.cr0.test(x86::cr0::pg) && c.cr4.test(x86::cr4::pae) && !c.efer.test(x86::efer::lma);
  if (out.cr == 3) {
    if (pae_paging && !load_guest_pdptes(out.value)) {
      ++run.cr_gp_injected;
      inject_gp();
      return true;
    }
    vmwrite(fields::guest_cr3, out.value);
    skip_instruction();
    return true;
  }
  using hvkit::paging::mmu_actions;
  if (out.actions.any(mmu_actions::reload_pdptrs) && !load_guest_pdptes(c.cr3)) {
    ++run.cr_gp_injected;
    inject_gp();
    return true;
  }
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
  if (out.actions.any(mmu_actions::reset_mmu)) ++run.mmu_resets;
  if (out.actions.any(mmu_actions::refresh_permissions | mmu_actions::reset_mmu)) {
    ++run.mmu_refreshes;
    const hvkit::paging::cr_state now = current_cr_state();
    run.mmu = hvkit::paging::mmu_context::make(now.cr0, now.cr4, now.efer, run.mmu.root());
  }
  skip_instruction();
  return true;
}

/// CPUID exit: the answer of the guest's hvkit::cpuid policy, with the dynamic bits
/// (OSXSAVE, OSPKE) from the guest's CR4 as the guest sees it.
void handle_cpuid(guest_regs& r) {
  auto leaf = static_cast<std::uint32_t>(r.rax), sub = static_cast<std::uint32_t>(r.rcx);
  cpuid_ns::vcpu_state vs{};
  const std::uint64_t m4 = vmread(fields::cr4_guest_host_mask);
  vs.cr4 = hvkit::vmx::guest_visible_cr4(x86::cr4{vmread(fields::guest_cr4)}, x86::cr4{vmread(fields::cr4_read_shadow)}, m4);
  const cpuid_ns::regs a = guest_policy.answer(leaf, sub, vs);
  r.rax = a.eax;
  r.rbx = a.ebx;
  r.rcx = a.ecx;
  r.rdx = a.edx;
  skip_instruction();
}

/// RDMSR/WRMSR: every access exits (no MSR bitmap). The MSR policy follows the CPUID
/// policy: IA32_PRED_CMD is writable exactly when CPUID.7.0:EDX[26] (IBRS/IBPB) is
/// advertised; unknown MSRs raise #GP(0) as on hardware.
bool handle_msr(guest_regs& r, bool write) {
  auto m = static_cast<std::uint32_t>(r.rcx);
  std::uint64_t v = (r.rdx << 32) | (r.rax & 0xFFFFFFFF);
  bool ok = true;
  // MSRs the CPUID-derived policy decides (PRED_CMD, SPEC_CTRL, FLUSH_CMD, ...).
  const cpuid_ns::msr_verdict verdict = write ? guest_msrs.write(m, v) : guest_msrs.read(m);
  if (verdict == cpuid_ns::msr_verdict::gp) {
    inject_gp();
    return true;
  }
  if (verdict == cpuid_ns::msr_verdict::allow) {
    // Allowed means the host has the feature too (the policy only passes host features
    // through): perform the access on the real MSR.
    if (write) {
      wrmsr(m, v);
    } else {
      v = rdmsr(m);
      r.rax = v & 0xFFFFFFFF;
      r.rdx = v >> 32;
    }
    skip_instruction();
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
      r.rax = v & 0xFFFFFFFF;
      r.rdx = v >> 32;
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
          const hvkit::paging::cr_state before = current_cr_state();
          vmwrite(fields::guest_ia32_efer, (cur & ~changeable) | (v & changeable));
          mmu_after_cr_write(before);
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
    inject_gp();
    return true;
  }
  skip_instruction();
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
  pg::walk_result translate(const pg::walk_request& req) { return inner.translate(req); }
};
static_assert(em::translator<hv_translator>);

/// Segment state between the VMCS and the emulator (VMCS access rights are the emulator's
/// segment_ar layout, unusable bit 16 included: SDM Vol. 3C 25.4.1).
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
em::segment read_segment(hvkit::vmx::field<S> s, hvkit::vmx::field<B> b, hvkit::vmx::field<L> l, hvkit::vmx::field<A> a) {
  return {static_cast<std::uint16_t>(vmread(s)), vmread(b), static_cast<std::uint32_t>(vmread(l)),
          em::segment_ar{static_cast<std::uint32_t>(vmread(a))}};
}
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
void write_segment(const em::segment& g, hvkit::vmx::field<S> s, hvkit::vmx::field<B> b, hvkit::vmx::field<L> l,
                   hvkit::vmx::field<A> a) {
  vmwrite(s, g.selector);
  vmwrite(b, g.base);
  vmwrite(l, g.limit);
  vmwrite(a, g.ar.raw());
}
#define HV_SEG(x) fields::guest_##x##_selector, fields::guest_##x##_base, fields::guest_##x##_limit, \
                  fields::guest_##x##_access_rights

/// The guest state the emulator sees, from the VMCS. CR0/CR4 are the values the guest sees
/// (guest-owned bits from the guest CR field, host-owned ones from the read shadow).
em::context read_emulation_context(guest_regs& r) {
  em::context c{};
  for (unsigned i = 0; i < 16; ++i) c.gpr[i] = read_gpr(r, i);
  c.rip = vmread(fields::guest_rip);
  c.rflags = x86::rflags{vmread(fields::guest_rflags)};
  c[em::sreg::es] = read_segment(HV_SEG(es));
  c[em::sreg::cs] = read_segment(HV_SEG(cs));
  c[em::sreg::ss] = read_segment(HV_SEG(ss));
  c[em::sreg::ds] = read_segment(HV_SEG(ds));
  c[em::sreg::fs] = read_segment(HV_SEG(fs));
  c[em::sreg::gs] = read_segment(HV_SEG(gs));
  c.ldtr = read_segment(HV_SEG(ldtr));
  c.tr = read_segment(HV_SEG(tr));
  c.gdtr = {vmread(fields::guest_gdtr_base), static_cast<std::uint16_t>(vmread(fields::guest_gdtr_limit))};
  c.idtr = {vmread(fields::guest_idtr_base), static_cast<std::uint16_t>(vmread(fields::guest_idtr_limit))};
  std::uint64_t m0 = vmread(fields::cr0_guest_host_mask), m4 = vmread(fields::cr4_guest_host_mask);
  c.cr0 = x86::cr0{(vmread(fields::guest_cr0) & ~m0) | (vmread(fields::cr0_read_shadow) & m0)};
  c.cr4 = x86::cr4{(vmread(fields::guest_cr4) & ~m4) | (vmread(fields::cr4_read_shadow) & m4)};
  c.cr3 = x86::cr3{vmread(fields::guest_cr3)};
  c.efer = x86::efer{vmread(fields::guest_ia32_efer)};
  c.cpl = static_cast<std::uint8_t>(guest_cpl());
  c.maxphyaddr = static_cast<std::uint8_t>(guest_cpu_properties().maxphyaddr);
  c.cr4_allowed = guest_cr4_allowed();  // MOV to CR4: the bits the guest's CPUID allows
  c.lam = guest_policy.has(cpuid_ns::feat::lam);
  return c;
}

/// Emulates the instruction at the guest RIP with hvkit::emulate and applies the outcome:
/// a completed instruction writes back what it changed; an exception is injected (#PF
/// with CR2); anything not emulated gets #UD, the architectural default.
bool emulate_instruction(guest_regs& r, const char* why) {
  em::context ctx = read_emulation_context(r);
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
  switch (o.kind) {
    case em::outcome_kind::done:
      for (unsigned i = 0; i < 16; ++i)
        if (ctx.gpr[i] != before.gpr[i]) write_gpr(r, i, ctx.gpr[i]);
      vmwrite(fields::guest_rip, ctx.rip);
      if (ctx.rflags.raw() != before.rflags.raw()) vmwrite(fields::guest_rflags, ctx.rflags.raw());
      if (!(ctx.tr == before.tr)) write_segment(ctx.tr, HV_SEG(tr));
      if (!(ctx.ldtr == before.ldtr)) write_segment(ctx.ldtr, HV_SEG(ldtr));
      if (!(ctx.gdtr == before.gdtr)) {
        vmwrite(fields::guest_gdtr_base, ctx.gdtr.base);
        vmwrite(fields::guest_gdtr_limit, ctx.gdtr.limit);
      }
      if (!(ctx.idtr == before.idtr)) {
        vmwrite(fields::guest_idtr_base, ctx.idtr.base);
        vmwrite(fields::guest_idtr_limit, ctx.idtr.limit);
      }
      if (!(ctx[em::sreg::ds] == before[em::sreg::ds])) write_segment(ctx[em::sreg::ds], HV_SEG(ds));
      if (!(ctx[em::sreg::es] == before[em::sreg::es])) write_segment(ctx[em::sreg::es], HV_SEG(es));
      if (!(ctx[em::sreg::fs] == before[em::sreg::fs])) write_segment(ctx[em::sreg::fs], HV_SEG(fs));
      if (!(ctx[em::sreg::gs] == before[em::sreg::gs])) write_segment(ctx[em::sreg::gs], HV_SEG(gs));
      if (o.what == em::event::cr_write || o.what == em::event::dr_write || o.what == em::event::halt) {
        kprintf("HVKIT ERROR run=%s emulated instruction with unexpected side effect %u (%s exit)\n", run.cfg->name,
                static_cast<unsigned>(o.what), why);
        run.status = run_status::fatal_exit;
        return false;
      }
      return true;
    case em::outcome_kind::exception:
      if (o.vector == x86::vector::pf) {
        if (run.cfg->stale_role && o.error_code == 0x3 && !x86::cr0{vmread(fields::guest_cr0)}.test(x86::cr0::wp))
          ++run.stale_wrong_faults;
        inject_pf(o.cr2, x86::pfec{o.error_code});
      } else {
        inject_exception(static_cast<unsigned>(o.vector), x86::has_error_code(o.vector), o.error_code);
      }
      return true;
    case em::outcome_kind::unsupported:
      if (o.why == em::unsupported_reason::page_table_unbacked || o.why == em::unsupported_reason::fetch_not_ram) {
        kprintf("HVKIT ERROR run=%s cannot emulate at rip=0x%llx (%s exit): reason %u\n", run.cfg->name,
                (unsigned long long)before.rip, why, static_cast<unsigned>(o.why));
        run.status = run_status::fatal_exit;
        return false;
      }
      [[fallthrough]];
    case em::outcome_kind::needs_io:
    case em::outcome_kind::needs_mmio:
      ++run.not_emulable;
      kprintf("HVKIT INFO run=%s not_emulable rip=0x%llx (%s exit) outcome=%u mnemonic=%u: #UD\n", run.cfg->name,
              (unsigned long long)before.rip, why, static_cast<unsigned>(o.kind), static_cast<unsigned>(o.op));
      inject_exception(6, false);
      return true;
  }
  return true;
}

/// EPT violation (reason 48); exit qualification: SDM Vol. 3C 28.2.1, Table 28-7. Guest
/// RAM is all mapped, so this is an access to the test device or to unassigned space: the
/// emulator redoes the access against hv_platform.
bool handle_ept_violation(guest_regs& r) {
  if (ept_case_violation()) return true;  // a provoked one (EPT differential): retry
  std::uint64_t q = vmread(fields::exit_qualification);
  if ((vmread(fields::idt_vectoring_info) >> 31) & 1) {
    report_exit("ept_violation_during_event_delivery");
    run.status = run_status::fatal_exit;
    return false;
  }
  if (q & 4) {
    report_exit("guest_fetch_outside_memory");
    run.status = run_status::fatal_exit;
    return false;
  }
  return emulate_instruction(r, "ept_violation");
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

bool handle_vmcall(guest_regs& r) {
  char name[64];
  // Hypercalls are for the guest kernel only (CPL 0: SS.DPL, SDM Vol. 3C 25.4.1).
  if (((vmread(fields::guest_ss_access_rights) >> 5) & 3) != 0) {
    r.rax = ~0ull;
    skip_instruction();
    return true;
  }
  switch (r.rax) {
    case hc::log: {
      char buf[160];
      read_guest_string(r.rbx, buf, sizeof buf);
      kprintf("guest: %s\n", buf);
      break;
    }
    case hc::mark_begin:
      run.mark = run.exits;
      break;
    case hc::mark_end:
      read_guest_string(r.rbx, name, sizeof name);
      print_section(name, r.rcx, r.rdx, r.rsi);
      break;
    case hc::result: {
      read_guest_string(r.rbx, name, sizeof name);
      char check[80];
      std::size_t n = 0;
      for (const char* p = name; *p && n < 60; ++p) check[n++] = *p;
      check[n++] = '.';
      for (const char* p = run.cfg->name; *p && n < 78; ++p) check[n++] = *p;
      check[n] = '\0';
      if (run.cfg->stale_role) {
        // Negative control: the guest's verdicts are evidence, not results.
        kprintf("HVKIT INFO run=%s guest_check=%s guest_verdict=%s a=0x%llx b=0x%llx\n", run.cfg->name, name,
                r.rcx == hc::result_pass ? "PASS" : "FAIL", (unsigned long long)r.rdx, (unsigned long long)r.rsi);
        if (str_eq(name, "ltr_ro_gdt_wp0_ok")) {
          run.neg_wp0_seen = true;
          run.neg_wp0_result = r.rcx;
        }
      } else if (r.rcx == hc::result_erratum && !run.cfg->dt_exiting) {
        // Only runs where the CPU executes the instruction itself may report an erratum.
        ++results_errata;
        kprintf("HVKIT ERRATUM %s a=0x%llx b=0x%llx\n", check, (unsigned long long)r.rdx,
                (unsigned long long)r.rsi);
      } else {
        result(check, r.rcx == hc::result_pass, "a=0x%llx b=0x%llx", (unsigned long long)r.rdx,
               (unsigned long long)r.rsi);
      }
      break;
    }
    case hc::paging_case:
      r.rax = handle_paging_case(r);
      skip_instruction();
      return true;
    case hc::paging_case32:
      r.rax = handle_paging_case32(r);
      skip_instruction();
      return true;
    case hc::ept_arm:
      handle_ept_arm(r);
      r.rax = 0;
      skip_instruction();
      return true;
    case hc::ept_check:
      r.rax = handle_ept_check(r);
      skip_instruction();
      return true;
    case hc::done:
      run.status = run_status::done;
      skip_instruction();
      return false;
    case hc::unexpected:
      kprintf("HVKIT ERROR guest exception vector=%llu error=0x%llx rip=0x%llx cr2=0x%llx\n",
              (unsigned long long)r.rbx, (unsigned long long)r.rcx, (unsigned long long)r.rdx,
              (unsigned long long)r.rsi);
      run.status = run_status::fatal_exit;
      return false;
    default:
      r.rax = ~0ull;  // unknown hypercall: error return, the guest keeps running
      skip_instruction();
      return true;
  }
  r.rax = 0;
  skip_instruction();
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


/// The exit handler for hvkit::vmx::dispatch_exit: one overload per handled basic exit
/// reason, chosen at compile time (one switch, no function pointers or virtual calls).
/// Each returns 1 to resume the guest, 0 to end the run.
struct exit_handler {
  using result_type = int;
  void* reserved;
  guest_regs& r;

  template <class B>
  int operator()(hvkit::vmx::cr_access_exit e, B&) { return handle_cr(r, e.qualification) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::cpuid>, B&) { handle_cpuid(r); return 1; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::vmcall>, B&) { return handle_vmcall(r) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::rdmsr>, B&) { return handle_msr(r, false) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::wrmsr>, B&) { return handle_msr(r, true) ? 1 : 0; }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ldtr_tr_access>, B&) {
    return emulate_instruction(r, "ldtr_tr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::gdtr_idtr_access>, B&) {
    return emulate_instruction(r, "gdtr_idtr") ? 1 : 0;
  }
  template <class B>
  int operator()(hvkit::vmx::exit_tag<hvkit::vmx::exit_reason::ept_violation>, B&) {
    return handle_ept_violation(r) ? 1 : 0;
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

}  // namespace hv

using namespace hv;
using namespace hv::vmx;

extern "C" int hv_handle_exit(guest_regs* regs) {
  auto raw = static_cast<std::uint32_t>(vmread(fields::exit_reason));
  std::uint32_t basic = raw & 0xFFFF;
  run.exits.total++;
  run.exits.by_reason[basic < exit_reason_slots ? basic : exit_reason_slots - 1]++;
  exit_handler h{nullptr, *regs};
  hvkit::vmx::hw::current_vmcs vmcs;
  return hvkit::vmx::dispatch_exit(h, vmcs, hvkit::vmx::exit_reason_field{raw});
}
