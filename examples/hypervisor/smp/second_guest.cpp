// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: a second guest on every processor of the SMP Linux run, so that
// each processor's IBPB tracker sees switches between guests (docs/smp.md, "IBPB per
// processor"; issue item: the IBPB count per physical CPU against the cross-guest switches on
// that CPU).
//
// Guest 2 is another VM: its own second stage (EPT or NPT) over five pages of hypervisor
// memory that the Linux guest's second stage does not map. Each processor owns two of its
// control blocks (B1, B2: two vCPUs of guest 2 on that processor). Every
// `second_guest_period` exits of its Linux vCPU a processor runs B1 and B2 for one slice each
// and goes back to Linux: Linux -> B1 (cross-guest), B1 -> B2 (same guest), B2 -> Linux
// (cross-guest). Under skip_same_guest the tracker (x86/ibpb.hpp, through svm::physical_cpu
// or vmx::physical_cpu) issues a barrier at the processor's first load and at every
// cross-guest switch, none at B1 -> B2 (SDM Vol. 3A / the IBPB rule of docs/smp.md 1.).
//
// A slice of guest 2 is `inc qword [rbx]; vmcall` (VMMCALL on SVM): it starts at the code
// page each time, so its counter must equal the slices it ran; any other exit is counted as
// unexpected and fails the check.
#include "smp.hpp"

namespace hv::smp {

namespace {
void put64(std::uint8_t* p, std::uint64_t v) {
  for (unsigned i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
}  // namespace

void second_guest_init(machine& m, bool vmx) {
  auto& ram = m.sg.ram;
  for (auto& page : ram)
    for (auto& b : page) b = 0;
  // PML4 (GPA 0), PDPT (1000H), PD (2000H): 4-level paging (SDM Vol. 3A 4.5), P | R/W (03H),
  // the PDE maps 2 MiB at GPA 0 (PS, 83H), supervisor pages.
  put64(ram[0], 0x1000 | 0x3);
  put64(ram[1], 0x2000 | 0x3);
  put64(ram[2], 0x0 | 0x83);
  // inc qword [rbx] (REX.W FF /0), then VMCALL 0F 01 C1 (SDM Vol. 2B) or VMMCALL 0F 01 D9
  // (APM Vol. 3), then UD2 (never reached: every slice starts again at the code page).
  const std::uint8_t code[] = {0x48, 0xFF, 0x03, 0x0F, 0x01, static_cast<std::uint8_t>(vmx ? 0xC1 : 0xD9), 0x0F, 0x0B};
  for (unsigned i = 0; i < sizeof code; ++i) ram[second_guest_code_gpa >> 12][i] = code[i];
}

std::uint64_t second_guest_counter_gpa(const cpu& c, unsigned j) {
  return second_guest_counters_gpa + (c.index * 2 + j) * 8;
}

std::uint64_t second_guest_counter(const cpu& c, unsigned j) {
  const std::uint64_t off = second_guest_counter_gpa(c, j) - second_guest_counters_gpa;
  return *reinterpret_cast<const volatile std::uint64_t*>(c.m->sg.ram[second_guest_counters_gpa >> 12] + off);
}

bool second_guest_due(cpu& c) {
  if (c.sg.failed) return false;
  if (++c.sg.countdown < second_guest_period) return false;
  c.sg.countdown = 0;
  return true;
}

void note_control_block_switch(cpu& c, std::uint64_t block, std::uint32_t vm) {
  if (c.last_block != 0 && c.last_block != block) ++(c.last_vm == vm ? c.switches_same_guest : c.switches_cross_guest);
  c.last_block = block;
  c.last_vm = vm;
}

void report_ibpb(machine& m, core::tally& t) {
  unsigned ok_cpus = 0;
  std::uint64_t total_cross = 0;
  for (unsigned i = 0; i < m.count; ++i) {
    cpu& c = m.cpus[i];
    // A stable copy: the processor may still be in an excursion (its Linux vCPU has not
    // stopped); seq is odd while it changes its counts.
    std::uint64_t barriers, same, cross, ex, unexpected, slices[2], counters[2];
    for (;;) {
      const std::uint32_t s0 = __atomic_load_n(&c.sg.seq, __ATOMIC_ACQUIRE);
      barriers = c.ibpb_barriers;
      same = c.switches_same_guest;
      cross = c.switches_cross_guest;
      ex = c.sg.excursions;
      unexpected = c.sg.unexpected;
      slices[0] = c.sg.slices[0];
      slices[1] = c.sg.slices[1];
      counters[0] = second_guest_counter(c, 0);
      counters[1] = second_guest_counter(c, 1);
      if ((s0 & 1) == 0 && __atomic_load_n(&c.sg.seq, __ATOMIC_ACQUIRE) == s0) break;
      asm volatile("pause");
    }
    const bool ok = barriers == 1 + cross && same > 0 && cross > 0 && unexpected == 0 && !c.sg.failed &&
                    counters[0] == slices[0] && counters[1] == slices[1] && slices[0] > 0;
    if (ok) ++ok_cpus;
    total_cross += cross;
    kprintf("HVKIT LINUX ibpb cpu=%u barriers=%llu switches_same_guest=%llu switches_cross_guest=%llu expected=%llu "
            "excursions=%llu guest2_slices=%llu/%llu guest2_counters=%llu/%llu unexpected=%llu reason=0x%llx ok=%d\n",
            i, (unsigned long long)barriers, (unsigned long long)same, (unsigned long long)cross,
            (unsigned long long)(1 + cross), (unsigned long long)ex, (unsigned long long)slices[0],
            (unsigned long long)slices[1], (unsigned long long)counters[0], (unsigned long long)counters[1],
            (unsigned long long)unexpected, (unsigned long long)c.sg.unexpected_reason, ok ? 1 : 0);
  }
  result(t, "linux_smp_ibpb_per_cpu", ok_cpus == m.count,
         "cpus=%u cpus_ok=%u policy=skip_same_guest cross_guest_switches=%llu", m.count, ok_cpus,
         (unsigned long long)total_cross);
}

}  // namespace hv::smp
