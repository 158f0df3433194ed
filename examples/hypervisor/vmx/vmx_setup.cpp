// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: host tables, VMX bring-up, CPUID policy, EPT, guest loading and the VMCS.
#include "../hv.hpp"
#include "../core/profile.hpp"
#include "../linux/linux.hpp"
#include "../core/shadow_paging.hpp"

namespace hv {

// ---- host descriptor tables -----------------------------------------------------------
host_tables& setup_host_tables(core::page_pool& pool) {
  host_tables& t = pool.take<host_tables>();
  auto tss = reinterpret_cast<std::uint64_t>(t.tss);
  t.gdt[0] = 0;
  t.gdt[1] = 0x00AF9A000000FFFF;  // 0x08 code64
  t.gdt[2] = 0x00CF92000000FFFF;  // 0x10 data
  // 0x18: 64-bit available TSS (SDM Vol. 3A 8.2.3, Figure 8-4)
  t.gdt[3] = (sizeof(t.tss) - 1) | ((tss & 0xFFFFFF) << 16) | (0x89ull << 40) | (((tss >> 24) & 0xFF) << 56);
  t.gdt[4] = tss >> 32;
  t.gdt[5] = 0;
  t.tss[102] = sizeof(t.tss);  // I/O map base beyond the limit: no I/O bitmap
  for (int v = 0; v < 32; ++v) {
    std::uint64_t h = host_isr_table[v];
    t.idt[2 * v] = (h & 0xFFFF) | (0x08ull << 16) | (0x8E00ull << 32) | (((h >> 16) & 0xFFFF) << 48);
    t.idt[2 * v + 1] = h >> 32;
  }
  load_host_tables(t, true);
  return t;
}

/// GDTR, IDTR, the segment registers and (load_tr) TR from the hypervisor's tables. An AP
/// (smp/smp_boot.cpp) leaves TR alone: the TSS descriptor is busy from the BSP's LTR, and
/// the first VM exit loads TR from the VMCS host-state area.
namespace {
struct __attribute__((packed)) table_register {
  std::uint16_t limit;
  std::uint64_t base;
};
}  // namespace

void load_host_tables(const host_tables& t, bool load_tr) {
  const table_register gdtr{sizeof(t.gdt) - 1, reinterpret_cast<std::uint64_t>(t.gdt)},
      idtr{sizeof(t.idt) - 1, reinterpret_cast<std::uint64_t>(t.idt)};
  asm volatile(
      "lgdt %0\n\t"
      "pushq $0x08\n\t"
      "leaq 1f(%%rip), %%rax\n\t"
      "pushq %%rax\n\t"
      "lretq\n"
      "1:\n\t"
      "movl $0x10, %%eax\n\t"
      "movl %%eax, %%ds\n\t"
      "movl %%eax, %%es\n\t"
      "movl %%eax, %%ss\n\t"
      "movl %%eax, %%fs\n\t"
      "movl %%eax, %%gs\n\t"
      "lidt %1"
      :
      : "m"(gdtr), "m"(idtr)
      : "rax", "memory");
  if (load_tr) asm volatile("ltr %w0" ::"r"(std::uint16_t{0x18}) : "memory");
}

host_tables& current_host_tables() {
  table_register gdtr{};
  asm volatile("sgdt %0" : "=m"(gdtr));
  return *reinterpret_cast<host_tables*>(gdtr.base);
}

// ---- VMX bring-up ------------------------------------------------------------------------
void read_capabilities(vmx_host& h) {
  h.caps = hvkit::vmx::vmx_capabilities::read([](std::uint32_t m) { return rdmsr(m); });
  const hvkit::vmx::vmx_capabilities& vcaps = h.caps;
  auto pair = [](hvkit::vmx::control_capability c) {
    return (static_cast<unsigned long long>(c.may_be_one) << 32) | c.must_be_one;
  };
  kprintf("HVKIT INFO vmx_basic=0x%016llx true_ctls=%d revision=0x%x\n", (unsigned long long)vcaps.basic,
          vcaps.has_true_controls() ? 1 : 0, vcaps.revision_id());
  kprintf("HVKIT INFO pin=0x%016llx proc=0x%016llx proc2=0x%016llx\n", pair(vcaps.pin_caps()),
          pair(vcaps.primary_caps()), pair(vcaps.secondary_caps()));
  kprintf("HVKIT INFO exit=0x%016llx entry=0x%016llx ept_vpid_cap=0x%016llx\n", pair(vcaps.exit_caps()),
          pair(vcaps.entry_caps()), (unsigned long long)vcaps.ept_vpid_cap);
  kprintf("HVKIT INFO cr0_fixed0=0x%llx cr0_fixed1=0x%llx cr4_fixed0=0x%llx cr4_fixed1=0x%llx\n",
          (unsigned long long)vcaps.cr0_fixed0, (unsigned long long)vcaps.cr0_fixed1,
          (unsigned long long)vcaps.cr4_fixed0, (unsigned long long)vcaps.cr4_fixed1);
}

/// Builds the guest's CPUID policy (hvkit::cpuid::build_policy) and the MSR policy derived
/// from it. Host features pass through except those whose instructions or state this
/// hypervisor does not virtualize with the VMX controls it sets (RDTSCP, INVPCID, XSAVES
/// need their secondary controls; RDPID reads TSC_AUX; a feature whose CR4 bit VMX does not
/// allow in the guest is hidden); VMX is not offered (no nested virtualization). No KVM
/// paravirtual feature is implemented, so none is offered; the hints word says
/// "realtime" (one vCPU, never preempted). Hints may change later, features may not.
void take_vmx_pages(vmx_host& h, core::page_pool& pool) {
  h.vmxon = pool.take_page();
  h.vmcs = pool.take_page();
  h.vmcs_a2 = pool.take_page();
  h.vmcs_b = pool.take_page();
  h.ept_pml4 = pool.take_table();
  h.ept_pdpt = pool.take_table();
  h.ept_pd = pool.take_table();
  h.ept_pd_alias = pool.take_table();
  h.ept_b_pml4 = pool.take_table();
  h.ept_b_pdpt = pool.take_table();
  h.ept_b_pd = pool.take_table();
  h.ept_unmap_pt = pool.take_table();
  h.ept_alias_pdpt = pool.take_table();
  h.ept_alias_pd = pool.take_table();
  h.ept_alias_pt = pool.take_table();
  h.shadow = core::shadow::take(pool, false);
}

bool build_cpuid_policy(core::tally& t, const vmx_host& h, core::guest_cpu& g, const lx::linux_state* for_linux, unsigned cpus) {
  cpuid_ns::table<128> host_cpuid{};
  namespace feat = cpuid_ns::feat;
  if (!cpuid_ns::read_all(cpuid_ns::host_source{}, host_cpuid)) {
    result(t, "cpuid_policy", false, "reason=host_table_full");
    return false;
  }
#if defined(HVKIT_HV_DUMP_CPUID)
  // Opt-in (run --dump-cpuid): the host table as read_all() enumerated it, one machine-
  // readable line per leaf/subleaf. Leaf 0xD is printed raw for every subleaf 0..63, also
  // those its bitmaps do not enumerate, so an inconsistent XSAVE enumeration is visible.
  for (const cpuid_ns::entry& e : host_cpuid)
    if (e.leaf != 0xd)
      kprintf("HVKIT CPUID 0x%08x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x\n", e.leaf, e.subleaf, e.value.eax, e.value.ebx,
              e.value.ecx, e.value.edx);
  if (host_cpuid.has_leaf(0xd))
    for (std::uint32_t s = 0; s < 64; ++s) {
      const cpuid_ns::regs r = cpuid_ns::execute(0xd, s);
      kprintf("HVKIT CPUID 0x%08x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x\n", 0xdu, s, r.eax, r.ebx, r.ecx, r.edx);
    }
#endif
  cpuid_ns::hypervisor_caps hvc{};
  hvc.passthrough = cpuid_ns::feature_set::all();
  for (const cpuid_ns::feature f : {feat::vmx, feat::rdtscp, feat::invpcid, feat::xsaves, feat::rdpid, feat::waitpkg})
    hvc.passthrough.reset(f);
  const x86::cr4 vmx_cr4{h.caps.cr4_fixed1};
  if (!vmx_cr4.test(x86::cr4::pke)) hvc.passthrough.reset(feat::pku);
  if (!vmx_cr4.test(x86::cr4::la57)) hvc.passthrough.reset(feat::la57);
  if (!vmx_cr4.test(x86::cr4::umip)) hvc.passthrough.reset(feat::umip);
  if (!vmx_cr4.test(x86::cr4::smep)) hvc.passthrough.reset(feat::smep);
  if (!vmx_cr4.test(x86::cr4::smap)) hvc.passthrough.reset(feat::smap);
  if (!vmx_cr4.test(x86::cr4::fsgsbase)) hvc.passthrough.reset(feat::fsgsbase);
  // XSAVE state: every component (the default). The host never touches FP/vector state
  // (-mgeneral-regs-only) and runs with CR4.PKE clear, so the guest's XSAVE state and PKRU
  // survive exits untouched. A component whose CPUID.0xD sub-leaf contradicts the host's
  // bitmaps (Bochs tigerlake/icelake: PKRU enumerated, 0xD.9 all zeros) is withheld by the
  // library and reported below.
  // The Linux guest's local APIC is the processor's own (vmx/vmx_linux.cpp): x2APIC is
  // offered when the processor has it, its MSRs passed through but the ICR, whose writes
  // the hypervisor carries out (smp/smp_ipi.cpp). Linux then sends its IPIs, INIT and SIPI
  // with WRMSR, not through the xAPIC page.
  if (for_linux && ((cpuid(1).ecx >> 21) & 1)) hvc.emulated.set(feat::x2apic);
  cpuid_ns::policy_config cfg{};
  cfg.hints = cpuid_ns::feature_set{cpuid_ns::kvm::hints::realtime};
  cfg.topo.cores_per_package = cpus;
  if (for_linux) cfg.deny |= lx::denied_features();  // the Linux guest's normalization (linux/)
  if (for_linux) hvc.emulated |= lx::emulated_features(*for_linux);  // PV_SEND_IPI on request (linux/)
  auto p = cpuid_ns::build_policy(host_cpuid, hvc, cfg);
  if (!p) {
    result(t, "cpuid_policy", false, "reason=build_policy_error_%u", static_cast<unsigned>(p.error()));
    return false;
  }
  g.cpuid = p.value();
  if (for_linux && g.cpuid.has(feat::xsavec)) {
    // XSAVEC only where the CPU's own XSAVE enumeration is consistent: no component the
    // library had to withhold (enumerated in CPUID.(0xD,0) without a valid sub-leaf), and
    // the standard-format size CPUID.(0xD,0):ECX reports equal to the size derived from
    // the per-component offsets and sizes. Otherwise the compacted layout the CPU really
    // writes need not be the one the policy would promise (compacted offsets are computed,
    // not enumerated). Bochs 2.7 fails both (skylake_x: 2432 reported for 2688 derived;
    // tigerlake: PKRU without a sub-leaf); a Linux guest using XSAVEC there saw user
    // processes die now and then (a TLS pointer read back as 0), none with the standard
    // format (docs/linux-guest.md).
    cpuid_ns::vcpu_state all{};
    all.cr4 = x86::cr4::osxsave;
    all.xcr0 = g.cpuid.xcr0_components();
    const std::uint32_t host_max = cpuid_ns::execute(0xd, 0).ecx, derived = g.cpuid.answer(0xd, 0, all).ecx;
    if (host_max != derived || g.cpuid.xsave_withheld().raw() != 0) {
      kprintf("HVKIT INFO linux_policy xsavec=withheld host_xsave_max_size=%u derived=%u withheld_components=0x%llx\n",
              host_max, derived, (unsigned long long)g.cpuid.xsave_withheld().raw());
      cfg.deny.set(feat::xsavec);
      auto q = cpuid_ns::build_policy(host_cpuid, hvc, cfg);
      if (!q) {
        result(t, "cpuid_policy", false, "reason=build_policy_error_%u", static_cast<unsigned>(q.error()));
        return false;
      }
      g.cpuid = q.value();
    }
  }
  const bool consistent = core::complete_guest_cpu(g, x86::cr4{h.caps.cr4_fixed1});  // CR4: IA32_VMX_CR4_FIXED1
  const cpuid_ns::regs sig = g.cpuid.answer(g.cpuid.kvm_base(), 0, {});
  const cpuid_ns::regs pv = g.cpuid.answer(g.cpuid.kvm_base() + 1, 0, {});
  result(t, "cpuid_policy", consistent,
         "kvm_base=0x%x max_leaf=0x%x pv_features=0x%x hints=0x%x ibpb=%d pred_cmd_bits=0x%llx msr_policy_consistent=%d"
         " xcr0_components=0x%llx xss_components=0x%llx xsave_withheld=0x%llx",
         g.cpuid.kvm_base(), sig.eax, pv.eax, pv.edx, g.cpuid.has(feat::spec_ctrl) ? 1 : 0,
         (unsigned long long)g.msrs.pred_cmd_bits, consistent ? 1 : 0,
         (unsigned long long)g.cpuid.xcr0_components().raw(), (unsigned long long)g.cpuid.xss_components().raw(),
         (unsigned long long)g.cpuid.xsave_withheld().raw());
  for (unsigned i = 0; i < cpuid_ns::xsave_max_components; ++i) {
    const char* why = nullptr;
    switch (g.cpuid.xsave_issue(i)) {
      case cpuid_ns::xsave_enumeration::consistent: break;
      case cpuid_ns::xsave_enumeration::no_size: why = "no_size"; break;
      case cpuid_ns::xsave_enumeration::wrong_register: why = "wrong_register"; break;
      case cpuid_ns::xsave_enumeration::bad_offset: why = "bad_offset"; break;
      case cpuid_ns::xsave_enumeration::too_large: why = "too_large"; break;
    }
    if (why != nullptr) kprintf("HVKIT INFO xsave_component_withheld component=%u reason=%s\n", i, why);
  }
  return true;
}

bool enable_vmx(core::tally& t, const vmx_host& h) {
  const hvkit::vmx::vmx_capabilities& caps = h.caps;
  // SDM Vol. 3C 24.7 "Enabling and Entering VMX Operation".
  std::uint64_t fc = rdmsr(x86::msr::ia32_feature_control);
  if ((fc & feature_control_lock) == 0) {
    fc |= feature_control_lock | feature_control_vmxon_outside_smx;
    wrmsr(x86::msr::ia32_feature_control, fc);
    kprintf("HVKIT INFO feature_control=0x%llx (set and locked by us)\n", (unsigned long long)fc);
  } else {
    kprintf("HVKIT INFO feature_control=0x%llx (locked by firmware)\n", (unsigned long long)fc);
    if ((fc & feature_control_vmxon_outside_smx) == 0) {
      result(t, "vmx_enable", false, "reason=feature_control_locked_without_vmx");
      return false;
    }
  }
  // SDM Vol. 3C 24.8 "Restrictions on VMX Operation": CR0/CR4 fixed bits (CR4.VMXE is a
  // fixed-1 bit).
  write_cr0((read_cr0() | caps.cr0_fixed0) & caps.cr0_fixed1);
  write_cr4((read_cr4() | caps.cr4_fixed0 | x86::cr4::vmxe.raw()) & caps.cr4_fixed1);

  const std::uint32_t revision = caps.revision_id();
  *reinterpret_cast<std::uint32_t*>(h.vmxon) = revision;
  auto on = hvkit::vmx::hw::vmxon(x86::hpa{reinterpret_cast<std::uint64_t>(h.vmxon)});
  if (!on) {
    result(t, "vmx_enable", false, "reason=vmxon_failed kind=%s", on.error().how == hvkit::vmx::vm_fail::kind::invalid ? "VMfailInvalid" : "VMfailValid");
    return false;
  }
  result(t, "vmx_enable", true, "revision=0x%x", revision);
  return true;
}

/// Identity EPT for guest memory only: GPA [guest_mem_base, +guest_mem_size) -> same HPA,
/// 2 MiB pages, RWX, write-back. Nothing else is mapped: neither the hypervisor's memory
/// nor the MMIO test device (SDM Vol. 3C 29.3.2 "EPT Translation Mechanism").

bool build_ept(core::tally& t, vmx_host& h) {
  namespace v = hvkit::vmx;
  const hvkit::vmx::vmx_capabilities& vcaps = h.caps;
  std::uint64_t* const ept_pml4 = h.ept_pml4;
  std::uint64_t* const ept_pdpt = h.ept_pdpt;
  std::uint64_t* const ept_pd = h.ept_pd;
  std::uint64_t* const ept_pd_alias = h.ept_pd_alias;
  const auto ec = v::ept_capabilities_from(vcaps.ept_vpid_cap, core::host_maxphyaddr());
  const v::ept_permissions rwx{true, true, true, false};
  for (unsigned i = 0; i < 512; ++i) ept_pml4[i] = ept_pdpt[i] = ept_pd[i] = 0;
  auto pml4e = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pdpt)}, rwx, ec);
  auto pdpte = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pd)}, rwx, ec);
  auto eptp = v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pml4)}, hvkit::paging::ept_memory_type::wb, 4,
                           false, ec);
  if (!pml4e || !pdpte || !eptp) {
    result(t, "ept_setup", false, "reason=ept_entry_refused ept_vpid_cap=0x%llx", (unsigned long long)vcaps.ept_vpid_cap);
    return false;
  }
  ept_pml4[0] = pml4e.value().raw();
  ept_pdpt[0] = pdpte.value().raw();
  // The PSE-36 alias: GPA 4 GiB + [28 MiB, 32 MiB) -> HPA [28 MiB, 32 MiB), so that a 4 MiB
  // page with PA bit 32 (the 32-bit guest's differential cases) reaches the scratch area.
  for (unsigned i = 0; i < 512; ++i) ept_pd_alias[i] = 0;
  auto alias = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_pd_alias)}, rwx, ec);
  if (!alias) {
    result(t, "ept_setup", false, "reason=ept_entry_refused ept_vpid_cap=0x%llx", (unsigned long long)vcaps.ept_vpid_cap);
    return false;
  }
  ept_pdpt[hc::pse36_alias_gpa >> 30] = alias.value().raw();
  for (std::uint64_t gpa = 0x1C00000; gpa < 0x2000000; gpa += 0x200000) {
    auto leaf =
        v::make_ept_leaf(x86::hpa{gpa}, v::ept_level::pde, rwx, hvkit::paging::ept_memory_type::wb, ec, false);
    if (!leaf) return false;
    ept_pd_alias[gpa >> 21] = leaf.value().raw();
  }
  h.eptp = eptp.value().raw();
  static_assert(layout::guest_mem_base + layout::guest_mem_size <= (1ull << 30), "one EPT PD covers 1 GiB");
  static_assert(layout::guest_mem_base % 0x200000 == 0 && layout::guest_mem_size % 0x200000 == 0);
  for (std::uint64_t gpa = layout::guest_mem_base; gpa < layout::guest_mem_base + layout::guest_mem_size;
       gpa += 0x200000) {
    auto leaf =
        v::make_ept_leaf(x86::hpa{gpa}, v::ept_level::pde, rwx, hvkit::paging::ept_memory_type::wb, ec, false);
    if (!leaf) {
      result(t, "ept_setup", false, "reason=2m_leaf_refused ept_vpid_cap=0x%llx", (unsigned long long)vcaps.ept_vpid_cap);
      return false;
    }
    ept_pd[gpa >> 21] = leaf.value().raw();
  }
  return true;
}

/// Clears guest memory, copies the guest image in and writes the guest's boot page
/// tables (identity map of the low 4 GiB with 2 MiB pages; the guest builds its own).
const hc::guest_header* load_guest(core::tally& t, hc::guest_header& ph, bool guest32,
                                   const core::guest_profile* profile) {
  std::uint64_t words = layout::guest_mem_size / 8;
  void* dst = reinterpret_cast<void*>(layout::guest_mem_base);
  asm volatile("rep stosq" : "+D"(dst), "+c"(words) : "a"(0ull) : "memory");
  const unsigned char* blob = guest32 ? guest32_blob_start : guest_blob_start;
  auto size = static_cast<std::size_t>((guest32 ? guest32_blob_end : guest_blob_end) - blob);
  if (!profile) {
    __builtin_memcpy(reinterpret_cast<void*>(layout::guest_load_gpa), blob, size);
  } else {
    // A guest profile's flat image (core/profile.hpp): no header of its own; the descriptor
    // tables the VMCS/VMCB name are zeroed pages below the boot page tables (the profile's
    // guest loads no segment and takes no event).
    const auto psize = static_cast<std::size_t>(profile->image_end - profile->image);
    __builtin_memcpy(reinterpret_cast<void*>(layout::guest_load_gpa), profile->image, psize);
    ph = hc::guest_header{hc::header_magic, 0, layout::guest_load_gpa + psize, profile->entry,
                          profile->stack_top, layout::guest_boot_pt_gpa - 0x3000, 0x1F,
                          layout::guest_boot_pt_gpa - 0x2000, 0xFFF, layout::guest_boot_pt_gpa - 0x1000};
  }
  auto* hdr = profile ? &ph : reinterpret_cast<const hc::guest_header*>(layout::guest_load_gpa);
  if (hdr->magic != hc::header_magic || hdr->image_end > layout::guest_boot_pt_gpa ||
      hdr->entry < layout::guest_load_gpa || hdr->entry >= hdr->image_end) {
    result(t, "guest_load", false, "reason=bad_header magic=0x%x", hdr->magic);
    return nullptr;
  }
  if (guest32) {
    // 32-bit paging with CR4.PSE: one page directory of 4 MiB pages, identity (SDM 4.3).
    auto* pd = reinterpret_cast<std::uint32_t*>(layout::guest_boot_pt_gpa);
    for (std::uint32_t i = 0; i < 1024; ++i) pd[i] = (i << 22) | 0x83;
    return hdr;
  }
  auto* pml4 = reinterpret_cast<std::uint64_t*>(layout::guest_boot_pt_gpa);
  auto* pdpt = pml4 + 512;
  auto* pd = pml4 + 1024;  // four page directories
  pml4[0] = reinterpret_cast<std::uint64_t>(pdpt) | 0x3;
  for (int i = 0; i < 4; ++i) pdpt[i] = reinterpret_cast<std::uint64_t>(pd + 512 * i) | 0x3;
  for (std::uint64_t i = 0; i < 2048; ++i) pd[i] = (i << 21) | 0x83;
  return hdr;
}

/// CR4 bits the guest may set: what the CPU allows in VMX non-root operation (IA32_VMX_CR4_FIXED1,
/// SDM Vol. 3D A.8), gated by the guest's CPUID policy (the guest CPU model, core::guest_cpu_model).


/// Reports a control adjustment the CPU cannot satisfy (a required bit it lacks).
template <class C>
bool controls_ok(core::tally& t, const char* what, const hvkit::result<C, hvkit::vmx::control_error<C>>& r) {
  if (r.has_value()) return true;
  result(t, "vmcs_controls", false, "reason=%s unsupported=0x%llx cannot_clear=0x%llx", what,
         (unsigned long long)r.error().unsupported.raw(), (unsigned long long)r.error().cannot_clear.raw());
  return false;
}

/// The VMCS fields every guest of this hypervisor has the same (SDM Vol. 3C 25.2, 25.8.3):
/// guest exceptions go to the guest's IDT, no CR3 targets, no MSR areas, nothing to inject.
void write_common_controls(std::uint64_t eptp) {
  vmwrite(fields::exception_bitmap, 0);
  vmwrite(fields::page_fault_error_code_mask, 0);
  vmwrite(fields::page_fault_error_code_match, 0);
  vmwrite(fields::cr3_target_count, 0);
  vmwrite(fields::vm_exit_msr_store_count, 0);
  vmwrite(fields::vm_exit_msr_load_count, 0);
  vmwrite(fields::vm_entry_msr_load_count, 0);
  vmwrite(fields::vm_entry_interruption_info, 0);
  vmwrite(fields::ept_pointer, eptp);
}

bool write_controls(core::tally& t, const vmx_controls<hvkit::vmx::pin_based>& pin, const vmx_controls<hvkit::vmx::primary_proc_based>& proc,
                    const vmx_controls<hvkit::vmx::secondary_proc_based>& proc2,
                    const vmx_controls<hvkit::vmx::exit_controls>& exitc,
                    const vmx_controls<hvkit::vmx::entry_controls>& entry, std::uint64_t eptp) {
  if (!controls_ok(t, "pin", pin) || !controls_ok(t, "proc", proc) || !controls_ok(t, "proc2", proc2) ||
      !controls_ok(t, "exit", exitc) || !controls_ok(t, "entry", entry))
    return false;
  vmwrite(fields::pin_based_controls, pin.value().raw());
  vmwrite(fields::primary_processor_based_controls, proc.value().raw());
  vmwrite(fields::secondary_processor_based_controls, proc2.value().raw());
  vmwrite(fields::primary_vm_exit_controls, exitc.value().raw());
  vmwrite(fields::vm_entry_controls, entry.value().raw());
  write_common_controls(eptp);
  return true;
}

/// CR0/CR4 guest/host masks and read shadows (SDM Vol. 3C 25.6.6) from the guest-owned bits,
/// the guest's first CR0/CR4 (as it sees them) and CR3. Host-required CR bits (the VMX
/// fixed-1 bits) must be host-owned, or the guest could see a value it never wrote: false.
bool write_guest_crs(const vmx_host& h, const hvkit::vmx::guest_owned_bits& owned, x86::cr0 cr0, x86::cr4 cr4,
                     std::uint64_t cr3) {
  const hvkit::vmx::vmx_capabilities& caps = h.caps;
  const std::uint64_t cr0_mask = owned.cr0_mask(), cr4_mask = owned.cr4_mask();
  if ((caps.cr0_fixed0 & ~cr0_mask) || (caps.cr4_fixed0 & ~cr4_mask)) return false;
  vmwrite(fields::cr0_guest_host_mask, cr0_mask);
  vmwrite(fields::cr0_read_shadow, cr0.raw());
  vmwrite(fields::guest_cr0, (cr0.raw() | caps.cr0_fixed0) & caps.cr0_fixed1);
  vmwrite(fields::cr4_guest_host_mask, cr4_mask);
  vmwrite(fields::cr4_read_shadow, cr4.raw());
  vmwrite(fields::guest_cr4, (cr4.raw() | caps.cr4_fixed0) & caps.cr4_fixed1);
  vmwrite(fields::guest_cr3, cr3);
  return true;
}

/// The host state a VM exit loads (SDM Vol. 3C 25.5, checks 27.2.2 / 27.2.3): the
/// hypervisor's own CRs, GDT (0x08 code, 0x10 data, 0x18 TSS: TR must be non-zero), IDT, EFER,
/// and PAT when the exit controls load it. HOST_RSP is written by vmx_enter just before
/// VMLAUNCH/VMRESUME.
void write_host_state(bool with_pat) {
  const host_tables& t = current_host_tables();
  vmwrite(fields::host_cr0, read_cr0());
  vmwrite(fields::host_cr3, read_cr3());
  vmwrite(fields::host_cr4, read_cr4());
  vmwrite(fields::host_cs_selector, 0x08);
  vmwrite(fields::host_ss_selector, 0x10);
  vmwrite(fields::host_ds_selector, 0x10);
  vmwrite(fields::host_es_selector, 0x10);
  vmwrite(fields::host_fs_selector, 0x10);
  vmwrite(fields::host_gs_selector, 0x10);
  vmwrite(fields::host_tr_selector, 0x18);
  vmwrite(fields::host_fs_base, 0);
  vmwrite(fields::host_gs_base, 0);
  vmwrite(fields::host_tr_base, reinterpret_cast<std::uint64_t>(t.tss));
  vmwrite(fields::host_gdtr_base, reinterpret_cast<std::uint64_t>(t.gdt));
  vmwrite(fields::host_idtr_base, reinterpret_cast<std::uint64_t>(t.idt));
  vmwrite(fields::host_ia32_sysenter_cs, 0);
  vmwrite(fields::host_ia32_sysenter_esp, 0);
  vmwrite(fields::host_ia32_sysenter_eip, 0);
  vmwrite(fields::host_ia32_efer, rdmsr(x86::msr::ia32_efer));
  if (with_pat) vmwrite(fields::host_ia32_pat, rdmsr(x86::msr::ia32_pat));
  vmwrite(fields::host_rip, reinterpret_cast<std::uint64_t>(&vmx_exit_stub));
}

/// A guest in protected or long mode with flat segments (SDM Vol. 3C 25.4.1, access rights
/// Table 25-2): CS code exec/read accessed P G=1 with L=1 (64-bit) or D=1 (32-bit), the data
/// segments read/write accessed P D/B=1 G=1, LDTR unusable, TR a busy TSS; no debug state,
/// interrupts off, active, no shadow VMCS.
void write_flat_guest_state(const flat_guest& g) {
  vmwrite(fields::guest_cs_selector, g.cs);
  vmwrite(fields::guest_cs_base, 0);
  vmwrite(fields::guest_cs_limit, 0xFFFFFFFF);
  vmwrite(fields::guest_cs_access_rights, g.long_mode ? 0xA09B : 0xC09B);
  auto data_segment = [&](auto sel, auto base, auto limit, auto ar) {
    vmwrite(sel, g.ds);
    vmwrite(base, 0);
    vmwrite(limit, 0xFFFFFFFF);
    vmwrite(ar, 0xC093);
  };
  data_segment(fields::guest_ss_selector, fields::guest_ss_base, fields::guest_ss_limit, fields::guest_ss_access_rights);
  data_segment(fields::guest_ds_selector, fields::guest_ds_base, fields::guest_ds_limit, fields::guest_ds_access_rights);
  data_segment(fields::guest_es_selector, fields::guest_es_base, fields::guest_es_limit, fields::guest_es_access_rights);
  data_segment(fields::guest_fs_selector, fields::guest_fs_base, fields::guest_fs_limit, fields::guest_fs_access_rights);
  data_segment(fields::guest_gs_selector, fields::guest_gs_base, fields::guest_gs_limit, fields::guest_gs_access_rights);
  vmwrite(fields::guest_ldtr_selector, 0);
  vmwrite(fields::guest_ldtr_base, 0);
  vmwrite(fields::guest_ldtr_limit, 0);
  vmwrite(fields::guest_ldtr_access_rights, 1u << 16);  // unusable
  vmwrite(fields::guest_tr_selector, g.tr);
  vmwrite(fields::guest_tr_base, g.tss_base);
  vmwrite(fields::guest_tr_limit, 103);
  vmwrite(fields::guest_tr_access_rights, 0x008B);  // busy 64-bit (or 32-bit) TSS, P
  vmwrite(fields::guest_gdtr_base, g.gdt_base);
  vmwrite(fields::guest_gdtr_limit, g.gdt_limit);
  vmwrite(fields::guest_idtr_base, g.idt_base);
  vmwrite(fields::guest_idtr_limit, g.idt_limit);
  vmwrite(fields::guest_dr7, 0x400);
  vmwrite(fields::guest_ia32_debugctl, 0);
  vmwrite(fields::guest_rsp, g.rsp);
  vmwrite(fields::guest_rip, g.rip);
  vmwrite(fields::guest_rflags, 0x2);
  vmwrite(fields::guest_pending_debug_exceptions, 0);
  vmwrite(fields::guest_interruptibility_state, 0);
  vmwrite(fields::guest_activity_state, 0);
  vmwrite(fields::guest_ia32_sysenter_cs, 0);
  vmwrite(fields::guest_ia32_sysenter_esp, 0);
  vmwrite(fields::guest_ia32_sysenter_eip, 0);
  vmwrite(fields::guest_ia32_efer, g.efer.raw());
  vmwrite(fields::vmcs_link_pointer, ~0ull);  // no shadow VMCS: must be all ones
}

/// Fills the current VMCS for a fresh run of the conformance guest (the run of `vs`: its
/// configuration, and its first EFER and MMU context set here).
bool setup_vmcs(const vmx_host& h, const hc::guest_header& g, core::run_state& vs) {
  const run_config& cfg = *vs.cfg;
  const hvkit::vmx::vmx_capabilities& vcaps = h.caps;
  namespace v = hvkit::vmx;
  // ---- controls, adjusted to the capability MSRs (hvkit::vmx::adjust_controls, SDM Vol. 3D
  // A.3-A.5; through the TRUE_* MSRs when they exist, so CR3-load/store exiting can be 0).
  // Without the TRUE MSRs CR3 accesses exit and handle_cr() emulates them.
  // Shadow paging (run --shadow, core/shadow_paging.hpp): no EPT; every #PF, CR3 access and
  // INVLPG exits (docs/shadow-mmu.md, "Integration").
  const bool shadow = core::shadow::enabled();
  const auto pin = v::adjust_controls(vcaps.pin_caps(), cfg.ibpb >= 0 ? v::pin_based::activate_preemption_timer
                                                                         : v::pin_based{});
  const auto proc = v::adjust_controls(
      vcaps.primary_caps(),
      v::primary_proc_based::hlt_exiting | v::primary_proc_based::activate_secondary_controls |
          (cfg.profile ? v::primary_proc_based::unconditional_io_exiting : v::primary_proc_based{}) |
          (cfg.cr3_exiting || shadow
               ? v::primary_proc_based::cr3_load_exiting | v::primary_proc_based::cr3_store_exiting
               : v::primary_proc_based{}) |
          (shadow ? v::primary_proc_based::invlpg_exiting : v::primary_proc_based{}));
  const auto ept = shadow ? v::secondary_proc_based{} : v::secondary_proc_based::enable_ept;
  const auto proc2 = v::adjust_controls(vcaps.secondary_caps(),
                                        cfg.dt_exiting ? ept | v::secondary_proc_based::descriptor_table_exiting
                                                            : ept);
  const auto exitc = v::adjust_controls(vcaps.exit_caps(), v::exit_controls::host_address_space_size |
                                                               v::exit_controls::save_ia32_efer |
                                                               v::exit_controls::load_ia32_efer);
  // The 32-bit guest runs in protected mode with paging: "IA-32e mode guest" = 0 (SDM Vol.
  // 3C 27.3.1.1: then EFER.LMA = 0, and LME = 0 with CR0.PG = 1).
  const bool guest32 = cfg.guest_flags & hc::cfg_guest32;
  const auto entry = v::adjust_controls(vcaps.entry_caps(), guest32 ? v::entry_controls::load_ia32_efer
                                                                    : v::entry_controls::ia32e_mode_guest |
                                                                          v::entry_controls::load_ia32_efer);
  if (!write_controls(*vs.results, pin, proc, proc2, exitc, entry, h.eptp)) return false;
  // With shadow paging every #PF exits (PFEC mask = match = 0, SDM Vol. 3C 26.2: bit 14 set
  // and the error code always "matches").
  if (shadow) vmwrite(fields::exception_bitmap, 1u << 14);

  // ---- CR0/CR4 guest/host masks and read shadows (SDM Vol. 3C 25.6.6) ----
  // Guest-owned bits from the policy under the run's features (vmx::make_guest_owned: WP
  // only with EPT, a CR4 bit only if the guest may set it).
  const v::cr_mask_features features{!shadow, vs.cpu->model.cr4_allowed};
  const v::guest_owned_bits owned = cfg.wp_intercepted ? v::make_guest_owned<policy_wp_intercepted>(features)
                                                             : v::make_guest_owned<policy_wp_guest_owned>(features);
  const x86::cr0 guest_cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  const x86::cr4 guest_cr4 = guest32 ? x86::cr4::pse : x86::cr4::pae;  // 32-bit paging with 4 MiB pages
  if (!write_guest_crs(h, owned, guest_cr0, guest_cr4, layout::guest_boot_pt_gpa)) {
    result(*vs.results, "cr_masks", false, "reason=fixed_bit_guest_owned");
    return false;
  }
  kprintf("HVKIT INFO run=%s cr0_guest_host_mask=0x%016llx cr4_guest_host_mask=0x%016llx dt_exiting=%d\n",
          cfg.name, (unsigned long long)owned.cr0_mask(), (unsigned long long)owned.cr4_mask(), cfg.dt_exiting ? 1 : 0);
  write_host_state(false);
  const bool nx = (cpuid(0x80000001).edx >> 20) & 1;
  const x86::efer efer = guest32 ? x86::efer{} : nx ? x86::efer::lme | x86::efer::lma | x86::efer::nxe
                                                    : x86::efer::lme | x86::efer::lma;
  write_flat_guest_state({hc::guest_cs, hc::guest_ds, hc::guest_tr, !guest32, g.tss_base, g.gdt_base, g.gdt_limit,
                          g.idt_base, g.idt_limit, g.stack_top, g.entry, efer});
  vs.guest_efer = efer.raw();
  vs.mmu = hvkit::paging::mmu_context::make(x86::cr0{vmread(fields::guest_cr0)}, x86::cr4{vmread(fields::guest_cr4)}, efer,
                                           x86::gpa{vmread(fields::guest_cr3)});
  if (shadow) {
    // The guest runs on the shadow root built from its boot tables, with the real EFER.NXE
    // = 1 and, for the 32-bit guest, the real CR4.PAE = 1 (PAE-format shadow tables: VM
    // entry loads the PDPTEs from the root, SDM Vol. 3C 27.3.2.4); the guest sees its own
    // CR4 in the read shadow (PAE is host-owned under shadow paging).
    vmwrite(fields::guest_ia32_efer, (efer | x86::efer::nxe).raw());
    vmwrite(fields::guest_cr4, core::shadow::host_cr4(x86::cr4{vmread(fields::guest_cr4)}).raw());
    vmwrite(fields::guest_cr3, core::shadow::begin(vs, *h.shadow, {x86::cr0{vmread(fields::guest_cr0)}, guest_cr4, efer},
                                                   x86::cr3{layout::guest_boot_pt_gpa})
                                   .value());
  }
  return true;
}

hvkit::paging::cr_state current_cr_state() {
  return {x86::cr0{vmread(fields::guest_cr0)}, x86::cr4{vmread(fields::guest_cr4)}, x86::efer{vmread(fields::guest_ia32_efer)}};
}

}  // namespace hv
