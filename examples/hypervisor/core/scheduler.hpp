// SPDX-License-Identifier: MIT
/// @file
/// @brief Two guests on one CPU, written once over the vendor: guest A (the conformance guest
/// in spin mode, its control block A1), a second control block of guest A's vCPU (A2, a
/// spinner in guest A's RAM) and guest B (another VM: 2 MiB of its own, a spinner or, hostile,
/// a triple fault), run round-robin A1 A2 A1 B, one time slice each, until guest A reports
/// done. x86::ibpb_tracker sees every switch of control block and every entry: the policy
/// decides the barriers, the run counts them.
///
/// The vendor (a `two_guest_vendor`: vmx/scheduler.cpp with VMCSs and the VMX-preemption
/// timer, svm/svm_runs.cpp with VMCBs and the local APIC timer) sets up the two extra control
/// blocks and guest B's second stage, loads a block and runs one slice through the core's
/// exit loop; the guests' images, the order, the switch counting, the hostile guest's end and
/// the results are here.
#pragma once

#include <concepts>
#include <cstdint>

#include <hvkit/x86/ibpb.hpp>

#include "../hypercall.hpp"
#include "../layout.hpp"
#include "report.hpp"
#include "state.hpp"

namespace hv::core {

inline constexpr std::uint64_t guest_b_hpa = 0x3000000;  ///< 48 MiB: guest B's 2 MiB of RAM
inline constexpr std::uint64_t guest_b_gpa = 0x1000000;  ///< seen by guest B at 16 MiB
inline constexpr std::uint64_t spin_a2_gpa = layout::guest_mem_base + 0xE00000;  ///< in guest A's RAM

/// Where a spinner starts: RIP, RSP and CR3 (its identity page tables, 2 MiB pages).
struct spinner_start {
  std::uint64_t rip, rsp, cr3;
};
/// Guest A's second control block: a spinner in guest A's RAM, on guest A's boot page tables.
inline constexpr spinner_start spinner_a2{spin_a2_gpa, spin_a2_gpa + 0x8000, layout::guest_boot_pt_gpa};
/// Guest B: code at GPA +0, stack below GPA +512 KiB, page tables at GPA +1 MiB.
inline constexpr spinner_start spinner_b{guest_b_gpa, guest_b_gpa + 0x80000, guest_b_gpa + 0x100000};

/// One of the three control blocks: its IBPB identity (block, VM, vCPU), the registers of the
/// guest it runs, its slices and, for a spinner, the host address of its counter.
struct sched_slot {
  const char* name;
  hvkit::x86::ibpb_domain id;
  guest_regs regs;
  std::uint64_t slices;
  std::uint64_t counter_hpa;
};

/// How a slice ended: the guest is to stop (a time slice ended, done, or a fatal exit: the
/// vCPU's status and `preempted` say which), guest A asked for more (a hypercall answered
/// that wants the guest again at once, no switch), or the entry failed (VMfail).
enum class slice_end { stopped, again, vm_fail };

/// What the run has seen so far (a vendor's hc::spin_more answer may depend on it).
struct sched_progress {
  std::uint64_t a2_spins, b_spins, same_guest, cross_guest;
  bool b_dead;
};

// clang-format off
/// What the scheduler needs from a vendor.
template <class V>
concept two_guest_vendor = requires(V& v, const hc::guest_header& g, unsigned i, sched_slot& s,
                                    const sched_progress& p, const char* what) {
  { v.block(i) } -> std::same_as<std::uint64_t>;           ///< control block i's address (0 A1, 1 A2, 2 B)
  { v.prepare(g, spinner_a2, spinner_b) } -> std::same_as<bool>;  ///< blocks 1 and 2, B's second stage; A1 current
  { v.host_has_ibpb() } -> std::same_as<bool>;             ///< the host enumerates IBPB (IA32_PRED_CMD bit 0)
  { v.load(i) } -> std::same_as<bool>;                     ///< make block i the one entered next
  { v.run_slice(i, s, p) } -> std::same_as<slice_end>;     ///< enter block i, its exits through the core
  v.finish();                                              ///< the run is over: timers off, A1 current
  v.report_exit(what);                                     ///< an exit that ends the run
};
// clang-format on

/// `inc qword [counter]; jmp back`: the whole program of guest B and of guest A's second
/// control block. Absolute disp32 addressing (ModRM 04, SIB 25), SDM Vol. 2A 2.1.5.
inline void write_spin_code(std::uint8_t* at, std::uint32_t counter_gpa) {
  const std::uint8_t code[] = {0x48, 0xFF, 0x04, 0x25, static_cast<std::uint8_t>(counter_gpa),
                               static_cast<std::uint8_t>(counter_gpa >> 8), static_cast<std::uint8_t>(counter_gpa >> 16),
                               static_cast<std::uint8_t>(counter_gpa >> 24), 0xEB, 0xF6};
  for (unsigned i = 0; i < sizeof code; ++i) at[i] = code[i];
}

/// Guest B's RAM (zeroed; identity page tables of 2 MiB pages at GPA +1 MiB: PML4E, PDPTE,
/// and 512 PDEs) with its program: the spinner, or (hostile) UD2 with an empty IDT, whose
/// #UD, #GP and #DF end in a triple fault. Guest A's second spinner in guest A's RAM.
inline void write_guest_images(bool hostile_b) {
  auto* b = reinterpret_cast<std::uint8_t*>(guest_b_hpa);
  for (std::uint64_t i = 0; i < 0x200000; ++i) b[i] = 0;
  auto* bpt = reinterpret_cast<std::uint64_t*>(guest_b_hpa + 0x100000);
  bpt[0] = (guest_b_gpa + 0x101000) | 0x3;
  bpt[512] = (guest_b_gpa + 0x102000) | 0x3;
  for (std::uint64_t i = 0; i < 512; ++i) bpt[1024 + i] = (i << 21) | 0x83;
  if (hostile_b) {
    b[0] = 0x0F;  // UD2
    b[1] = 0x0B;
  } else {
    write_spin_code(b, static_cast<std::uint32_t>(guest_b_gpa + 0x90000));
  }
  write_spin_code(reinterpret_cast<std::uint8_t*>(spin_a2_gpa), static_cast<std::uint32_t>(spin_a2_gpa + 0x10000));
}

/// The barrier the tracker issues: counted, and the real IBPB when the host has it.
struct counting_barrier {
  std::uint64_t* count;
  bool real;
  void operator()() const noexcept {
    ++*count;
    if (real) hvkit::x86::pred_cmd_barrier{}();
  }
};

/// The two-guest run of the vCPU `st` (its registers become A1's) with IBPB policy `policy`.
/// Returns 0, or 1 when an entry failed (VMfail; the vendor reported it).
template <two_guest_vendor V>
int run_two_guests(V& v, run_state& st, const hc::guest_header& g, hvkit::x86::ibpb_policy policy) {
  const run_config& cfg = *st.cfg;
  const bool hostile_b = cfg.guest_flags & hc::cfg_hostile_b;
  write_guest_images(hostile_b);
  sched_slot slots[3] = {
      {"A1", {v.block(0), 1, 0}, st.regs, 0, 0},
      {"A2", {v.block(1), 1, 0}, {}, 0, spin_a2_gpa + 0x10000},
      {"B", {v.block(2), 2, 0}, {}, 0, guest_b_hpa + 0x90000},
  };
  if (!v.prepare(g, spinner_a2, spinner_b)) {
    result(*st.results, "ibpb_setup", false, "reason=extra_control_block_setup_failed");
    return 1;
  }
  const bool host_ibpb = v.host_has_ibpb();
  std::uint64_t barriers = 0;
  hvkit::x86::ibpb_tracker<counting_barrier> tracker{policy, counting_barrier{&barriers, host_ibpb}};
  tracker.on_switch(slots[0].id);  // the first load on this CPU: always a barrier
  sched_progress progress{};
  static constexpr unsigned order[4] = {0, 1, 0, 2};
  unsigned current = 0;
  int rc = 0;
  std::uint64_t b_slices_at_death = 0;  // guest B's slices when it died: none may follow
  auto spins = [&](unsigned i) { return *reinterpret_cast<volatile std::uint64_t*>(slots[i].counter_hpa); };
  for (std::uint64_t n = 0; n < 100000 && st.status == run_status::running; ++n) {
    const unsigned next = order[n % 4];
    if (next == 2 && progress.b_dead) continue;  // a guest that died is not scheduled again
    if (next != current) {
      if (!v.load(next)) {
        st.status = run_status::vm_fail;
        break;
      }
      tracker.on_switch(slots[next].id);
      ++(slots[next].id.vm == slots[current].id.vm ? progress.same_guest : progress.cross_guest);
      current = next;
    }
    tracker.on_vm_entry();
    st.preempted = false;
    progress.a2_spins = spins(1);
    progress.b_spins = spins(2);
    const slice_end e = v.run_slice(current, slots[current], progress);
    ++slots[current].slices;
    if (e == slice_end::vm_fail) {
      rc = 1;
      break;
    }
    if (st.preempted) continue;
    if (current == 2 && hostile_b && st.status == run_status::triple_fault) {
      // Guest B died; guest A (another VM) keeps running.
      kprintf("HVKIT INFO run=%s guest B triple-faulted after %llu slices: stopped, guest A continues\n", cfg.name,
              (unsigned long long)slots[2].slices);
      progress.b_dead = true;
      b_slices_at_death = slots[2].slices;
      st.status = run_status::running;
      continue;
    }
    if (e == slice_end::stopped && st.status == run_status::running) st.status = run_status::fatal_exit;
    if (current != 0 && st.status == run_status::running) {  // a spinner exits only at the end of its slice
      v.report_exit("spinner_exit");
      st.status = run_status::fatal_exit;
    }
    if (e == slice_end::again) --n;  // guest A asked for more: run it again at once, no switch
  }
  v.finish();
  const std::uint64_t a2 = spins(1), bc = spins(2);
  const bool skip = policy == hvkit::x86::ibpb_policy::skip_same_guest;
  const std::uint64_t expected = 1 + progress.cross_guest + (skip ? 0 : progress.same_guest);
  kprintf("HVKIT INFO run=%s slices_a1=%llu slices_a2=%llu slices_b=%llu spins_a2=%llu spins_b=%llu host_ibpb=%d\n",
          cfg.name, (unsigned long long)slots[0].slices, (unsigned long long)slots[1].slices,
          (unsigned long long)slots[2].slices, (unsigned long long)a2, (unsigned long long)bc, host_ibpb ? 1 : 0);
  if (hostile_b) {
    result(*st.results, "hostile_guest_b_contained",
           progress.b_dead && st.status == run_status::done && slots[2].slices == b_slices_at_death && a2 > 0,
           "b_dead=%d b_slices=%llu b_slices_at_death=%llu a1_slices=%llu", progress.b_dead ? 1 : 0,
           (unsigned long long)slots[2].slices, (unsigned long long)b_slices_at_death,
           (unsigned long long)slots[0].slices);
    return rc;
  }
  result(*st.results, skip ? "ibpb_policy.skip_same_guest" : "ibpb_policy.every_vmcs_change",
         barriers == expected && progress.same_guest > 0 && progress.cross_guest > 0 && a2 > 0 && bc > 0,
         "switches_same_guest=%llu switches_cross_guest=%llu barriers=%llu expected=%llu",
         (unsigned long long)progress.same_guest, (unsigned long long)progress.cross_guest,
         (unsigned long long)barriers, (unsigned long long)expected);
  return rc;
}

}  // namespace hv::core
