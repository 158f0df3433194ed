// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: two guests and a sibling VMCS on one CPU, switched on VMX-preemption-timer exits, with vmx::ibpb_tracker deciding every barrier.
#include "../hv.hpp"

namespace hv {

// ---- two guests, one CPU: VMCS switches and the IBPB policy ---------------------------
constexpr std::uint64_t guest_b_hpa = 0x3000000;   // 48 MiB: guest B's 2 MiB of RAM
constexpr std::uint64_t guest_b_gpa = 0x1000000;   // seen by guest B at 16 MiB
constexpr std::uint64_t spin_a2_gpa = layout::guest_mem_base + 0xE00000;  // in guest A's RAM
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
/// guests themselves take none: run_scheduled() masks both 8259 PICs and nothing arms a
/// local APIC timer; an interrupt that reached them anyway would show (guest A reports any
/// unexpected vector; guest B, which has no IDT, would triple-fault).
constexpr std::uint64_t spin_rflags = 0x202;

std::uint64_t ibpb_barriers;
bool host_has_ibpb;
/// The barrier the tracker issues: counted, and the real IBPB when the host has it.
struct counting_barrier {
  void operator()() const noexcept {
    ++ibpb_barriers;
    if (host_has_ibpb) hvkit::vmx::pred_cmd_barrier{}();
  }
};

/// `inc qword [counter]; jmp back`: the whole program of guest B and of guest A's second
/// VMCS. Absolute disp32 addressing (ModRM 04, SIB 25), SDM Vol. 2A 2.1.5.
void write_spin_code(std::uint8_t* at, std::uint32_t counter_gpa) {
  const std::uint8_t code[] = {0x48, 0xFF, 0x04, 0x25, static_cast<std::uint8_t>(counter_gpa),
                               static_cast<std::uint8_t>(counter_gpa >> 8), static_cast<std::uint8_t>(counter_gpa >> 16),
                               static_cast<std::uint8_t>(counter_gpa >> 24), 0xEB, 0xF6};
  for (unsigned i = 0; i < sizeof code; ++i) at[i] = code[i];
}

struct vcpu_slot {
  const char* name;
  std::uint8_t* vmcs;
  hvkit::vmx::vmcs_identity id;
  guest_regs regs;
  bool launched;
  std::uint64_t slices;
  std::uint64_t counter_hpa;
};

/// Prepares one extra VMCS: the common set-up, then its own RIP/RSP/CR3 (and EPTP).
bool setup_extra_vmcs(vcpu_slot& s, const hc::guest_header& g, core::vcpu_state& vs, std::uint64_t rip,
                      std::uint64_t rsp, std::uint64_t cr3, std::uint64_t eptp) {
  *reinterpret_cast<std::uint32_t*>(s.vmcs) = vcaps.revision_id();
  const x86::hpa pa{reinterpret_cast<std::uint64_t>(s.vmcs)};
  if (!hvkit::vmx::hw::vmclear(pa) || !hvkit::vmx::hw::vmptrld(pa) || !setup_vmcs(g, vs)) return false;
  vmwrite(fields::guest_rip, rip);
  vmwrite(fields::guest_rsp, rsp);
  vmwrite(fields::guest_cr3, cr3);
  vmwrite(fields::ept_pointer, eptp);
  vmwrite(fields::vmx_preemption_timer_value, preemption_slice);
  vmwrite(fields::guest_rflags, spin_rflags);
  return true;
}

/// Runs guest A (the conformance guest in spin mode, VMCS A1), guest A's second VMCS (A2)
/// and guest B round-robin A1 A2 A1 B, one VMX-preemption-timer slice each, until guest A
/// reports done. Every VMPTRLD is followed by ibpb_tracker::on_vmcs_load and every entry
/// preceded by on_vm_entry: the policy decides the barriers, the run counts them.
int run_scheduled(const hc::guest_header& g, run_state& st) {
  namespace v = hvkit::vmx;
  // Guest B: 2 MiB at HPA 48 MiB, mapped by its own EPT at GPA 16 MiB; identity page
  // tables (2 MiB pages) at GPA +1 MiB, code at GPA +0, stack below GPA +512 KiB.
  auto* b = reinterpret_cast<std::uint8_t*>(guest_b_hpa);
  for (std::uint64_t i = 0; i < 0x200000; ++i) b[i] = 0;
  auto* bpt = reinterpret_cast<std::uint64_t*>(guest_b_hpa + 0x100000);
  bpt[0] = (guest_b_gpa + 0x101000) | 0x3;
  bpt[512] = (guest_b_gpa + 0x102000) | 0x3;
  for (std::uint64_t i = 0; i < 512; ++i) bpt[1024 + i] = (i << 21) | 0x83;
  const bool hostile_b = st.cfg->guest_flags & hc::cfg_hostile_b;
  if (hostile_b) {
    b[0] = 0x0F;  // UD2 with an empty IDT (limit 0, below): #UD, #GP, #DF, triple fault
    b[1] = 0x0B;
  } else {
    write_spin_code(b, static_cast<std::uint32_t>(guest_b_gpa + 0x90000));
  }
  const auto ec = v::ept_capabilities_from(vcaps.ept_vpid_cap);
  const v::ept_permissions rwx{true, true, true, false};
  for (auto& e : ept_b_pml4) e = 0;
  for (auto& e : ept_b_pdpt) e = 0;
  for (auto& e : ept_b_pd) e = 0;
  constexpr auto wb = hvkit::paging::ept_memory_type::wb;
  ept_b_pml4[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pdpt)}, rwx, ec).value().raw();
  ept_b_pdpt[0] = v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pd)}, rwx, ec).value().raw();
  ept_b_pd[guest_b_gpa >> 21] = v::make_ept_leaf(x86::hpa{guest_b_hpa}, v::ept_level::pde, rwx, wb, ec).value().raw();
  const std::uint64_t eptp_b =
      v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_b_pml4)}, wb, 4, false, ec).value().raw();
  // Guest A's second VMCS: a spinner in guest A's RAM, on the boot page tables.
  write_spin_code(reinterpret_cast<std::uint8_t*>(spin_a2_gpa), static_cast<std::uint32_t>(spin_a2_gpa + 0x10000));

  vcpu_slot slots[3] = {
      {"A1", vmcs_region, {reinterpret_cast<std::uint64_t>(vmcs_region), 1, 0}, st.regs, false, 0, 0},
      {"A2", vmcs_a2_region, {reinterpret_cast<std::uint64_t>(vmcs_a2_region), 1, 0}, {}, false, 0,
       spin_a2_gpa + 0x10000},
      {"B", vmcs_b_region, {reinterpret_cast<std::uint64_t>(vmcs_b_region), 2, 0}, {}, false, 0,
       guest_b_hpa + 0x90000},
  };
  if (!setup_extra_vmcs(slots[1], g, st, spin_a2_gpa, spin_a2_gpa + 0x8000, layout::guest_boot_pt_gpa, eptp_value) ||
      !setup_extra_vmcs(slots[2], g, st, guest_b_gpa, guest_b_gpa + 0x80000, guest_b_gpa + 0x100000, eptp_b)) {
    result("ibpb_setup", false, "reason=extra_vmcs_setup_failed");
    return 1;
  }
  vmwrite(fields::guest_idtr_limit, 0);  // guest B has no IDT (B's VMCS is still current)
  // Back to A1 (set up by run_guest), with the same slice.
  if (!v::hw::vmptrld(x86::hpa{slots[0].id.vmcs})) return 1;
  vmwrite(fields::vmx_preemption_timer_value, preemption_slice);

  // The guests spin with RFLAGS.IF = 1 (spin_rflags): mask every line of both 8259 PICs
  // (OCW1, the interrupt mask register) so that no device interrupt the firmware left
  // enabled (the PIT's IRQ 0) is delivered into them.
  outb(0x21, 0xFF);
  outb(0xA1, 0xFF);

  host_has_ibpb = (cpuid(7, 0).edx >> 26) & 1;
  ibpb_barriers = 0;
  v::ibpb_tracker<counting_barrier> tracker{static_cast<v::ibpb_policy>(st.cfg->ibpb)};
  tracker.on_vmcs_load(slots[0].id);  // the first load on this CPU: always a barrier
  std::uint64_t same_guest = 0, cross_guest = 0;
  static constexpr int order[4] = {0, 1, 0, 2};
  int current = 0;
  int rc = 0;
  bool b_dead = false;
  std::uint64_t b_slices_at_death = 0;  // guest B's slices when it died: none may follow
  for (std::uint64_t n = 0; n < 100000 && st.status == run_status::running; ++n) {
    const int next = order[n % 4];
    if (next == 2 && b_dead) continue;  // a guest that died is not scheduled again
    if (next != current) {
      if (!v::hw::vmptrld(x86::hpa{slots[next].id.vmcs})) {
        st.status = run_status::vm_fail;
        break;
      }
      tracker.on_vmcs_load(slots[next].id);
      (slots[next].id.vm == slots[current].id.vm ? same_guest : cross_guest)++;
      current = next;
    }
    tracker.on_vm_entry();
    st.preempted = false;
    rc = vmx_enter(&slots[current].regs, slots[current].launched ? 1 : 0, &st);
    slots[current].launched = true;
    ++slots[current].slices;
    if (rc != 0) break;
    if (current == 2 && st.status == run_status::triple_fault && hostile_b) {
      // Guest B died; guest A (another VM) keeps running.
      kprintf("HVKIT INFO run=%s guest B triple-faulted after %llu slices: stopped, guest A continues\n",
              st.cfg->name, (unsigned long long)slots[2].slices);
      b_dead = true;
      b_slices_at_death = slots[2].slices;
      st.status = run_status::running;
      continue;
    }
    if (st.status == run_status::running && !st.preempted) break;  // fatal exit already reported
  }
  const std::uint64_t a2 = *reinterpret_cast<volatile std::uint64_t*>(slots[1].counter_hpa);
  const std::uint64_t bc = *reinterpret_cast<volatile std::uint64_t*>(slots[2].counter_hpa);
  const bool skip = st.cfg->ibpb == static_cast<int>(v::ibpb_policy::skip_same_guest);
  const std::uint64_t expected = 1 + cross_guest + (skip ? 0 : same_guest);
  kprintf("HVKIT INFO run=%s slices_a1=%llu slices_a2=%llu slices_b=%llu spins_a2=%llu spins_b=%llu host_ibpb=%d\n",
          st.cfg->name, (unsigned long long)slots[0].slices, (unsigned long long)slots[1].slices,
          (unsigned long long)slots[2].slices, (unsigned long long)a2, (unsigned long long)bc, host_has_ibpb ? 1 : 0);
  if (hostile_b) {
    result("hostile_guest_b_contained", b_dead && st.status == run_status::done && slots[2].slices == b_slices_at_death && a2 > 0,
           "b_dead=%d b_slices=%llu b_slices_at_death=%llu a1_slices=%llu", b_dead ? 1 : 0,
           (unsigned long long)slots[2].slices, (unsigned long long)b_slices_at_death,
           (unsigned long long)slots[0].slices);
    return rc;
  }
  result(skip ? "ibpb_policy.skip_same_guest" : "ibpb_policy.every_vmcs_change",
         ibpb_barriers == expected && same_guest > 0 && cross_guest > 0 && a2 > 0 && bc > 0,
         "switches_same_guest=%llu switches_cross_guest=%llu barriers=%llu expected=%llu", (unsigned long long)same_guest,
         (unsigned long long)cross_guest, (unsigned long long)ibpb_barriers, (unsigned long long)expected);
  return rc;
}

}  // namespace hv
