// SPDX-License-Identifier: MIT
/// @file
/// @brief What the VM-entry checks look at: a snapshot of the VMCS fields they read (taken
/// through any vmcs_backend), the memory they may consult (virtual-APIC page, VMCS link
/// pointer, PAE PDPT), and the processor they check against (capability MSRs, MAXPHYADDR,
/// linear-address width). The rules of SDM Vol. 3C 27.2-27.4 are predicates over these.
///
/// A field is read only when some check uses it under the controls in force (the EPTP only
/// with "enable EPT", guest IA32_PAT only with "load IA32_PAT", ...), as the processor does,
/// so a backend that lacks a field the processor does not support is never asked for it.
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"
#include "capabilities.hpp"
#include "controls.hpp"
#include "fields.hpp"
#include "../paging/guest_memory.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/result.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::vmx {

/// The processor the VMCS is checked against.
struct vm_entry_env {
  vmx_capabilities caps{};
  /// CPUID.80000008H:EAX[7:0] (default: x86::default_maxphyaddr, SDM 4.1.4).
  unsigned maxphyaddr = x86::default_maxphyaddr;
  /// Linear-address width for the canonical checks: 57 if the processor supports 5-level
  /// paging (CPUID.(7,0):ECX[16]), else 48 (SDM 27.2.2 footnote, 27.3.1.2).
  x86::linear_width linear = x86::linear_width::la48;
  /// VMLAUNCH/VMRESUME executed in IA-32e mode (a 64-bit hypervisor; SDM 27.2.4).
  bool in_ia32e_mode = true;
  /// The processor supports SGX (CPUID.(7,0):EBX[2]): interruptibility bit 4 ("enclave
  /// interruption") may be 1 (SDM 27.3.1.5); without it the bit is reserved.
  bool sgx = false;
  /// The processor supports RTM (CPUID.(7,0):EBX[11]): pending-debug-exceptions bit 16
  /// may be 1 (SDM 27.3.1.5); without it the bit is reserved.
  bool rtm = false;
  /// VMLAUNCH/VMRESUME executed in SMM (under the dual-monitor treatment): blocking by SMI
  /// may be 1, and so may "entry to SMM" and "deactivate dual-monitor treatment" (SDM
  /// 27.2.1.3, 27.3.1.5). The SMM-only checks themselves are not modelled.
  bool in_smm = false;
  /// Whether this processor refuses to inject an NMI under blocking by STI (SDM 27.3.1.5:
  /// "A processor may require bit 0 (blocking by STI) to be 0 if ... the interruption type
  /// ... has value 2, indicating NMI. Other processors may not make this requirement.").
  /// Default: it does (the VM entry then fails with exit qualification 3, SDM 28.2.1), as
  /// Bochs and the processors the differential ran on do; the same property as
  /// entry_state_environment::nmi_refused_under_sti.
  bool nmi_refused_under_sti = true;
  /// Follow the older SDM wording of the deliver-error-code rule (SDM 27.2.1.3 in editions up
  /// to about 2016: the guest counts as in protected mode if "the 'unrestricted guest'
  /// VM-execution control is 0" or CR0.PE = 1). Default: the current text, CR0.PE alone
  /// (docs/vmx.md, "Which SDM text").
  bool error_code_older_wording = false;
  /// Optional: would WRMSR(index, value) fault? Decides the last MSR-load rule (SDM 27.4);
  /// without it that rule is not checked.
  bool (*msr_write_faults)(std::uint32_t index, std::uint64_t value) = nullptr;
};

/// One segment register of the guest-state area (SDM 25.4.1).
struct vm_entry_segment {
  std::uint16_t selector = 0;
  std::uint64_t base = 0;
  std::uint32_t limit = 0;
  std::uint32_t access_rights = 0;
};

/// Segment order of the snapshot: the order of the guest-state area (SDM 25.4.1).
enum class guest_segment : std::uint8_t { es, cs, ss, ds, fs, gs, ldtr, tr };
inline constexpr unsigned guest_segment_count = 8;

/// The VMCS fields (and memory values) the VM-entry checks read.
struct vm_entry_state {
  // ---- VM-execution, VM-exit and VM-entry controls (SDM 25.6-25.8) ----
  pin_based pin{};
  primary_proc_based proc{};
  /// As read; the checks use secondary() (0 unless "activate secondary controls").
  secondary_proc_based proc2_raw{};
  tertiary_proc_based proc3_raw{};
  exit_controls exit{};
  entry_controls entry{};
  std::uint32_t cr3_target_count = 0;
  std::uint64_t io_bitmap_a = 0, io_bitmap_b = 0, msr_bitmap = 0;
  std::uint32_t tpr_threshold = 0;
  std::uint64_t virtual_apic_address = 0, apic_access_address = 0;
  std::uint16_t posted_interrupt_vector = 0;
  std::uint64_t posted_interrupt_descriptor = 0;
  std::uint16_t vpid = 0;
  paging::ept_pointer eptp{};  ///< EPT pointer (SDM 25.6.11), typed as the VMCS field
  std::uint64_t pml_address = 0;
  std::uint64_t vm_function_controls = 0, eptp_list_address = 0;
  std::uint64_t vmread_bitmap = 0, vmwrite_bitmap = 0, ve_information_address = 0;
  std::uint32_t exit_msr_store_count = 0, exit_msr_load_count = 0, entry_msr_load_count = 0;
  std::uint64_t exit_msr_store_address = 0, exit_msr_load_address = 0, entry_msr_load_address = 0;
  std::uint32_t entry_interruption_info = 0, entry_exception_error_code = 0, entry_instruction_length = 0;

  // ---- host-state area (SDM 25.5) ----
  x86::cr0 host_cr0{};
  std::uint64_t host_cr3 = 0;
  x86::cr4 host_cr4{};
  std::uint64_t host_sysenter_esp = 0, host_sysenter_eip = 0;
  std::uint64_t host_pat = 0;
  x86::efer host_efer{};
  std::uint64_t host_pkrs = 0;
  /// ES, CS, SS, DS, FS, GS, TR.
  std::array<std::uint16_t, 7> host_selector{};
  std::uint64_t host_fs_base = 0, host_gs_base = 0, host_tr_base = 0, host_gdtr_base = 0, host_idtr_base = 0;
  std::uint64_t host_rip = 0;

  // ---- guest-state area (SDM 25.4) ----
  x86::cr0 guest_cr0{};
  std::uint64_t guest_cr3 = 0;
  x86::cr4 guest_cr4{};
  std::uint64_t guest_dr7 = 0, guest_debugctl = 0;
  std::uint64_t guest_sysenter_esp = 0, guest_sysenter_eip = 0;
  std::uint64_t guest_pat = 0;
  x86::efer guest_efer{};
  std::uint64_t guest_bndcfgs = 0, guest_pkrs = 0;
  std::array<vm_entry_segment, guest_segment_count> seg{};
  std::uint64_t gdtr_base = 0, idtr_base = 0;
  std::uint32_t gdtr_limit = 0, idtr_limit = 0;
  std::uint64_t guest_rip = 0;
  x86::rflags guest_rflags{};
  std::uint32_t activity_state = 0, interruptibility = 0;
  std::uint64_t pending_debug_exceptions = 0;
  std::uint64_t vmcs_link_pointer = ~std::uint64_t{0};
  /// The PDPTE fields (with "enable EPT"), or the PDPTEs read from the PDPT at CR3 through
  /// the memory view (without it) when the guest will use PAE paging (SDM 27.3.1.6).
  std::array<std::uint64_t, 4> pdpte{};
  bool pdptes_known = false;

  // ---- memory (only through a memory view) ----
  bool vtpr_known = false;
  std::uint8_t vtpr = 0;  ///< byte 80H of the virtual-APIC page (SDM 30.1.1)
  bool link_revision_known = false;
  std::uint32_t link_revision = 0;  ///< the 32 bits at the VMCS link pointer
  /// Fields of optional features the backend could not read (read as 0).
  unsigned unreadable_fields = 0;

  /// The secondary controls in force (0 unless "activate secondary controls"; SDM 25.6.2).
  [[nodiscard]] constexpr secondary_proc_based secondary() const noexcept {
    return proc.test(primary_proc_based::activate_secondary_controls) ? proc2_raw : secondary_proc_based{};
  }
  /// The tertiary controls in force (0 unless "activate tertiary controls").
  [[nodiscard]] constexpr tertiary_proc_based tertiary() const noexcept {
    return proc.test(primary_proc_based::activate_tertiary_controls) ? proc3_raw : tertiary_proc_based{};
  }
  [[nodiscard]] constexpr const vm_entry_segment& segment(guest_segment s) const noexcept {
    return seg[static_cast<unsigned>(s)];
  }
  [[nodiscard]] constexpr vm_entry_segment& segment(guest_segment s) noexcept { return seg[static_cast<unsigned>(s)]; }
  [[nodiscard]] constexpr bool ia32e_guest() const noexcept { return entry.test(entry_controls::ia32e_mode_guest); }
  [[nodiscard]] constexpr bool unrestricted_guest() const noexcept {
    return secondary().test(secondary_proc_based::unrestricted_guest);
  }
  [[nodiscard]] constexpr bool ept() const noexcept { return secondary().test(secondary_proc_based::enable_ept); }
  /// The guest will use PAE paging: CR0.PG = 1, CR4.PAE = 1 and "IA-32e mode guest" = 0
  /// (SDM 27.3.1.6).
  [[nodiscard]] constexpr bool guest_pae_paging() const noexcept {
    return guest_cr0.test(x86::cr0::pg) && guest_cr4.test(x86::cr4::pae) && !ia32e_guest();
  }
};

/// No memory view: the checks that read memory are not made.
struct no_memory_view {
  [[nodiscard]] constexpr result<std::uint32_t, paging::memory_error> read32(x86::gpa) const noexcept {
    return unexpected(paging::memory_error::unbacked);
  }
  [[nodiscard]] constexpr result<std::uint64_t, paging::memory_error> read64(x86::gpa) const noexcept {
    return unexpected(paging::memory_error::unbacked);
  }
};
static_assert(paging::guest_memory<no_memory_view>);

namespace detail {
template <vmcs_backend B, std::uint32_t E, class T>
constexpr bool entry_read(B& b, field<E> f, T& out, vm_fail& err) noexcept {
  auto r = vmread(b, f);
  if (!r) {
    err = r.error();
    return false;
  }
  out = static_cast<T>(r.value());
  return true;
}
/// A field read only because a control that uses it is 1: a processor without that field
/// also lacks the control, which its own rule refuses first; the field then reads as 0.
template <vmcs_backend B, std::uint32_t E, class T>
constexpr void entry_read_optional(B& b, field<E> f, T& out, unsigned& unreadable) noexcept {
  auto r = vmread(b, f);
  if (!r) {
    ++unreadable;
    out = T{};
    return;
  }
  out = static_cast<T>(r.value());
}
}  // namespace detail

/// Reads the fields the VM-entry checks use, through `b`, and the memory they use through
/// `mem` (physical addresses; for a nested hypervisor, L1's guest-physical space). Fails
/// with the backend's error if a needed field cannot be read.
template <vmcs_backend B, paging::guest_memory M = no_memory_view>
[[nodiscard]] constexpr result<vm_entry_state, vm_fail> read_vm_entry_state(B& b, const M& mem = M{}) noexcept {
  namespace f = fields;
  vm_entry_state s{};
  vm_fail err{};
  std::uint32_t v32 = 0;
  std::uint64_t v64 = 0;
#define HVKIT_RD(fld, dst) \
  if (!detail::entry_read(b, f::fld, dst, err)) return unexpected(err)
#define HVKIT_RD_OPT(fld, dst) detail::entry_read_optional(b, f::fld, dst, s.unreadable_fields)
#define HVKIT_RD_TYPED(fld, dst, T, tmp) \
  HVKIT_RD(fld, tmp);                    \
  dst = T{tmp}
  HVKIT_RD_TYPED(pin_based_controls, s.pin, pin_based, v32);
  HVKIT_RD_TYPED(primary_processor_based_controls, s.proc, primary_proc_based, v32);
  if (s.proc.test(primary_proc_based::activate_secondary_controls)) {
    HVKIT_RD_TYPED(secondary_processor_based_controls, s.proc2_raw, secondary_proc_based, v32);
  }
  if (s.proc.test(primary_proc_based::activate_tertiary_controls)) {
    HVKIT_RD_OPT(tertiary_processor_based_controls, v64);
    s.proc3_raw = tertiary_proc_based{v64};
  }
  HVKIT_RD_TYPED(primary_vm_exit_controls, s.exit, exit_controls, v32);
  HVKIT_RD_TYPED(vm_entry_controls, s.entry, entry_controls, v32);
  HVKIT_RD(cr3_target_count, s.cr3_target_count);
  const auto p2 = s.secondary();
  if (s.proc.test(primary_proc_based::use_io_bitmaps)) {
    HVKIT_RD_OPT(io_bitmap_a, s.io_bitmap_a);
    HVKIT_RD_OPT(io_bitmap_b, s.io_bitmap_b);
  }
  if (s.proc.test(primary_proc_based::use_msr_bitmaps)) { HVKIT_RD_OPT(msr_bitmap, s.msr_bitmap); }
  if (s.proc.test(primary_proc_based::use_tpr_shadow)) {
    HVKIT_RD_OPT(virtual_apic_page_address, s.virtual_apic_address);
    HVKIT_RD_OPT(tpr_threshold, s.tpr_threshold);
    if (auto r = mem.read32(x86::gpa{s.virtual_apic_address + 0x80})) {
      s.vtpr_known = true;
      s.vtpr = static_cast<std::uint8_t>(r.value());
    }
  }
  if (p2.test(secondary_proc_based::virtualize_apic_accesses)) { HVKIT_RD_OPT(apic_access_address, s.apic_access_address); }
  if (s.pin.test(pin_based::process_posted_interrupts)) {
    HVKIT_RD_OPT(posted_interrupt_notification_vector, s.posted_interrupt_vector);
    HVKIT_RD_OPT(posted_interrupt_descriptor_address, s.posted_interrupt_descriptor);
  }
  if (p2.test(secondary_proc_based::enable_vpid)) { HVKIT_RD_OPT(virtual_processor_id, s.vpid); }
  if (p2.test(secondary_proc_based::enable_ept)) { HVKIT_RD_OPT(ept_pointer, s.eptp); }
  if (p2.test(secondary_proc_based::enable_pml)) { HVKIT_RD_OPT(pml_address, s.pml_address); }
  if (p2.test(secondary_proc_based::enable_vm_functions)) {
    HVKIT_RD_OPT(vm_function_controls, s.vm_function_controls);
    if (s.vm_function_controls & 1u) { HVKIT_RD_OPT(eptp_list_address, s.eptp_list_address); }
  }
  if (p2.test(secondary_proc_based::vmcs_shadowing)) {
    HVKIT_RD_OPT(vmread_bitmap_address, s.vmread_bitmap);
    HVKIT_RD_OPT(vmwrite_bitmap_address, s.vmwrite_bitmap);
  }
  if (p2.test(secondary_proc_based::ept_violation_ve)) { HVKIT_RD_OPT(ve_information_address, s.ve_information_address); }
  HVKIT_RD(vm_exit_msr_store_count, s.exit_msr_store_count);
  HVKIT_RD(vm_exit_msr_load_count, s.exit_msr_load_count);
  HVKIT_RD(vm_entry_msr_load_count, s.entry_msr_load_count);
  if (s.exit_msr_store_count) { HVKIT_RD(vm_exit_msr_store_address, s.exit_msr_store_address); }
  if (s.exit_msr_load_count) { HVKIT_RD(vm_exit_msr_load_address, s.exit_msr_load_address); }
  if (s.entry_msr_load_count) { HVKIT_RD(vm_entry_msr_load_address, s.entry_msr_load_address); }
  HVKIT_RD(vm_entry_interruption_info, s.entry_interruption_info);
  if (s.entry_interruption_info >> 31) {
    HVKIT_RD(vm_entry_exception_error_code, s.entry_exception_error_code);
    HVKIT_RD(vm_entry_instruction_length, s.entry_instruction_length);
  }

  HVKIT_RD_TYPED(host_cr0, s.host_cr0, x86::cr0, v64);
  HVKIT_RD(host_cr3, s.host_cr3);
  HVKIT_RD_TYPED(host_cr4, s.host_cr4, x86::cr4, v64);
  HVKIT_RD(host_ia32_sysenter_esp, s.host_sysenter_esp);
  HVKIT_RD(host_ia32_sysenter_eip, s.host_sysenter_eip);
  if (s.exit.test(exit_controls::load_ia32_pat)) { HVKIT_RD_OPT(host_ia32_pat, s.host_pat); }
  if (s.exit.test(exit_controls::load_ia32_efer)) { HVKIT_RD_OPT(host_ia32_efer, v64);
    s.host_efer = x86::efer{v64}; }
  if (s.exit.test(exit_controls::load_pkrs)) { HVKIT_RD_OPT(host_ia32_pkrs, s.host_pkrs); }
  HVKIT_RD(host_es_selector, s.host_selector[0]);
  HVKIT_RD(host_cs_selector, s.host_selector[1]);
  HVKIT_RD(host_ss_selector, s.host_selector[2]);
  HVKIT_RD(host_ds_selector, s.host_selector[3]);
  HVKIT_RD(host_fs_selector, s.host_selector[4]);
  HVKIT_RD(host_gs_selector, s.host_selector[5]);
  HVKIT_RD(host_tr_selector, s.host_selector[6]);
  HVKIT_RD(host_fs_base, s.host_fs_base);
  HVKIT_RD(host_gs_base, s.host_gs_base);
  HVKIT_RD(host_tr_base, s.host_tr_base);
  HVKIT_RD(host_gdtr_base, s.host_gdtr_base);
  HVKIT_RD(host_idtr_base, s.host_idtr_base);
  HVKIT_RD(host_rip, s.host_rip);

  HVKIT_RD_TYPED(guest_cr0, s.guest_cr0, x86::cr0, v64);
  HVKIT_RD(guest_cr3, s.guest_cr3);
  HVKIT_RD_TYPED(guest_cr4, s.guest_cr4, x86::cr4, v64);
  HVKIT_RD(guest_dr7, s.guest_dr7);
  HVKIT_RD(guest_ia32_debugctl, s.guest_debugctl);
  HVKIT_RD(guest_ia32_sysenter_esp, s.guest_sysenter_esp);
  HVKIT_RD(guest_ia32_sysenter_eip, s.guest_sysenter_eip);
  if (s.entry.test(entry_controls::load_ia32_pat)) { HVKIT_RD_OPT(guest_ia32_pat, s.guest_pat); }
  if (s.entry.test(entry_controls::load_ia32_efer)) { HVKIT_RD_OPT(guest_ia32_efer, v64);
    s.guest_efer = x86::efer{v64}; }
  if (s.entry.test(entry_controls::load_ia32_bndcfgs)) { HVKIT_RD_OPT(guest_ia32_bndcfgs, s.guest_bndcfgs); }
  if (s.entry.test(entry_controls::load_pkrs)) { HVKIT_RD_OPT(guest_ia32_pkrs, s.guest_pkrs); }
#define HVKIT_RD_SEG(name, idx)                                  \
  HVKIT_RD(guest_##name##_selector, s.seg[idx].selector);        \
  HVKIT_RD(guest_##name##_base, s.seg[idx].base);                \
  HVKIT_RD(guest_##name##_limit, s.seg[idx].limit);              \
  HVKIT_RD(guest_##name##_access_rights, s.seg[idx].access_rights)
  HVKIT_RD_SEG(es, 0);
  HVKIT_RD_SEG(cs, 1);
  HVKIT_RD_SEG(ss, 2);
  HVKIT_RD_SEG(ds, 3);
  HVKIT_RD_SEG(fs, 4);
  HVKIT_RD_SEG(gs, 5);
  HVKIT_RD_SEG(ldtr, 6);
  HVKIT_RD_SEG(tr, 7);
#undef HVKIT_RD_SEG
  HVKIT_RD(guest_gdtr_base, s.gdtr_base);
  HVKIT_RD(guest_gdtr_limit, s.gdtr_limit);
  HVKIT_RD(guest_idtr_base, s.idtr_base);
  HVKIT_RD(guest_idtr_limit, s.idtr_limit);
  HVKIT_RD(guest_rip, s.guest_rip);
  HVKIT_RD_TYPED(guest_rflags, s.guest_rflags, x86::rflags, v64);
  HVKIT_RD(guest_activity_state, s.activity_state);
  HVKIT_RD(guest_interruptibility_state, s.interruptibility);
  HVKIT_RD(guest_pending_debug_exceptions, s.pending_debug_exceptions);
  HVKIT_RD(vmcs_link_pointer, s.vmcs_link_pointer);
  if (s.vmcs_link_pointer != ~std::uint64_t{0}) {
    if (auto r = mem.read32(x86::gpa{s.vmcs_link_pointer})) {
      s.link_revision_known = true;
      s.link_revision = r.value();
    }
  }
  if (s.guest_pae_paging()) {
    if (s.ept()) {
      HVKIT_RD_OPT(guest_pdpte0, s.pdpte[0]);
      HVKIT_RD_OPT(guest_pdpte1, s.pdpte[1]);
      HVKIT_RD_OPT(guest_pdpte2, s.pdpte[2]);
      HVKIT_RD_OPT(guest_pdpte3, s.pdpte[3]);
      s.pdptes_known = true;
    } else {
      // Without EPT the processor loads the PDPTEs from the PDPT at CR3 bits 31:5.
      s.pdptes_known = true;
      for (unsigned i = 0; i < 4 && s.pdptes_known; ++i) {
        auto r = mem.read64(x86::gpa{(s.guest_cr3 & 0xffff'ffe0u) + 8u * i});
        if (r) s.pdpte[i] = r.value();
        else s.pdptes_known = false;
      }
    }
  }
#undef HVKIT_RD_TYPED
#undef HVKIT_RD_OPT
#undef HVKIT_RD
  return s;
}

}  // namespace hvkit::vmx
