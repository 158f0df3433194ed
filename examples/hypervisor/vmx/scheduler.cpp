// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the VMX vendor of the two-guest run (core/scheduler.hpp): a
// sibling VMCS of guest A and guest B's VMCS with its own EPT, switched by VMPTRLD, a slice
// ended by the VMX-preemption timer.
#include "../hv.hpp"
#include "../core/scheduler.hpp"

namespace hv {

namespace {

// ---- two guests, one CPU: VMCS switches -------------------------------------------------
constexpr std::uint32_t preemption_slice = 4000;   // TSC ticks >> IA32_VMX_MISC[4:0]

/// RFLAGS of the two spinners (guest B, guest A's second VMCS): IF (bit 9) set, and the
/// always-one bit 1. Guest A sets IF itself (STI) around its spin loop (guest/guest.cpp).
///
/// Works around a Bochs 2.7 erratum (docs/hypervisor.md, "Bochs 2.7 errata seen here"):
/// on VM entry Bochs re-evaluates whether it may take an external interrupt before it marks
/// the CPU as in VMX non-root operation, so after an entry into a guest with RFLAGS.IF = 0
/// the host's external interrupts stay blocked until the guest executes STI/POPF or exits
/// for another reason. The SDM makes an external interrupt a VM exit whatever the guest's
/// RFLAGS.IF when "external-interrupt exiting" is 1 (Vol. 3C 25.2, Other Causes of VM
/// Exits). Under Linux KVM on Bochs the VMX-preemption timer this scheduler relies on is
/// emulated by KVM with a host timer: its interrupt never arrived while an IF = 0 guest
/// spun, and no VMCS switch happened. With IF = 1 the host's interrupts get through. The
/// guests themselves take none: prepare() below masks both 8259 PICs and nothing arms a
/// local APIC timer; an interrupt that reached them anyway would show (guest A reports any
/// unexpected vector; guest B, which has no IDT, would triple-fault).
constexpr std::uint64_t spin_rflags = 0x202;

/// The VMX vendor of core::run_two_guests: VMCS A1 (the run's, current), A2 and B.
struct vmx_two_guests {
  const vmx_host& h;
  run_state& st;
  std::uint8_t* const vmcs[3] = {h.vmcs, h.vmcs_a2, h.vmcs_b};
  bool launched[3] = {};
  int rc = 0;  ///< vmx_enter's: 1 VMfailInvalid, 2 VMfailValid

  std::uint64_t block(unsigned i) const { return reinterpret_cast<std::uint64_t>(vmcs[i]); }

  /// One extra VMCS: the common set-up, then its own RIP/RSP/CR3, EPTP and slice.
  bool setup_extra_vmcs(unsigned i, const hc::guest_header& g, const core::spinner_start& s, std::uint64_t eptp) {
    *reinterpret_cast<std::uint32_t*>(vmcs[i]) = h.caps.revision_id();
    const x86::hpa pa{block(i)};
    if (!hvkit::vmx::hw::vmclear(pa) || !hvkit::vmx::hw::vmptrld(pa) || !setup_vmcs(h, g, st)) return false;
    vmwrite(fields::guest_rip, s.rip);
    vmwrite(fields::guest_rsp, s.rsp);
    vmwrite(fields::guest_cr3, s.cr3);
    vmwrite(fields::ept_pointer, eptp);
    vmwrite(fields::vmx_preemption_timer_value, preemption_slice);
    vmwrite(fields::guest_rflags, spin_rflags);
    return true;
  }

  /// Guest B's EPT (its 2 MiB at HPA guest_b_hpa, seen at GPA guest_b_gpa), the two extra
  /// VMCSs (A2 on guest A's EPT), then A1 current again with the same slice; every 8259 line
  /// masked (OCW1: the guests spin with RFLAGS.IF = 1, spin_rflags, and take no device
  /// interrupt the firmware left enabled, the PIT's IRQ 0).
  bool prepare(const hc::guest_header& g, const core::spinner_start& a2, const core::spinner_start& b) {
    namespace v = hvkit::vmx;
    const auto ec = v::ept_capabilities_from(h.caps.ept_vpid_cap, core::host_maxphyaddr());
    const v::ept_permissions rwx{true, true, true, false};
    std::uint64_t* const ept_b_pml4 = h.ept_b_pml4;
    std::uint64_t* const ept_b_pdpt = h.ept_b_pdpt;
    std::uint64_t* const ept_b_pd = h.ept_b_pd;
    for (unsigned e = 0; e < 512; ++e) ept_b_pml4[e] = ept_b_pdpt[e] = ept_b_pd[e] = 0;
    constexpr auto wb = hvkit::paging::ept_memory_type::wb;
    ept_b_pml4[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pdpt)}, rwx, ec).value().raw();
    ept_b_pdpt[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pd)}, rwx, ec).value().raw();
    ept_b_pd[core::guest_b_gpa >> 21] =
        v::make_ept_leaf(x86::hpa{core::guest_b_hpa}, v::ept_level::pde, rwx, wb, ec).value().raw();
    const std::uint64_t eptp_b =
        v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pml4)}, wb, 4, false, ec).value().raw();
    if (!setup_extra_vmcs(1, g, a2, h.eptp) || !setup_extra_vmcs(2, g, b, eptp_b)) return false;
    vmwrite(fields::guest_idtr_limit, 0);  // guest B has no IDT (B's VMCS is still current)
    if (!v::hw::vmptrld(x86::hpa{block(0)})) return false;
    vmwrite(fields::vmx_preemption_timer_value, preemption_slice);
    outb(0x21, 0xFF);
    outb(0xA1, 0xFF);
    return true;
  }
  bool host_has_ibpb() const { return (cpuid(7, 0).edx >> 26) & 1; }  // CPUID.(EAX=07H,ECX=0):EDX[26]
  bool load(unsigned i) { return static_cast<bool>(hvkit::vmx::hw::vmptrld(x86::hpa{block(i)})); }
  /// VMLAUNCH/VMRESUME; the exits go through hv_handle_exit until one stops the slice.
  core::slice_end run_slice(unsigned i, core::sched_slot& s, const core::sched_progress&) {
    rc = vmx_enter(&s.regs, launched[i] ? 1 : 0, &st, &h);
    launched[i] = true;
    return rc == 0 ? core::slice_end::stopped : core::slice_end::vm_fail;
  }
  void finish() {}
  void report_exit(const char* what) { hv::report_exit(what); }
};
static_assert(core::two_guest_vendor<vmx_two_guests>);

}  // namespace

/// The two-guest run of `st` (core::run_two_guests) with the run's IBPB policy.
int run_scheduled(const vmx_host& h, const hc::guest_header& g, run_state& st) {
  vmx_two_guests v{h, st};
  return core::run_two_guests(v, st, g, static_cast<hvkit::vmx::ibpb_policy>(st.cfg->ibpb)) == 0 ? 0 : v.rc ? v.rc : 1;
}

}  // namespace hv
