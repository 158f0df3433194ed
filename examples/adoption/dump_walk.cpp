// SPDX-License-Identifier: MIT
// Introspection: walk a guest's page tables in a memory dump, then the same address through
// the guest's tables and an EPT (a nested walk: linear -> L2 guest-physical -> L1 physical).
// Raw translations: no access rights are checked and no A/D flags are written.
#include <cassert>
#include <cstdint>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/walker.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;
using paging::ept_entry;
using paging::pte;

int main() {
  // Host memory (4 MiB): the EPT at 0x10000; the guest's RAM (2 MiB) at host 0x200000.
  std::vector<std::uint8_t> host(4 << 20);
  auto put64 = [&](std::uint64_t a, std::uint64_t v) { for (int i = 0; i < 8; ++i) host[a + i] = std::uint8_t(v >> 8 * i); };
  constexpr std::uint64_t ram = 0x20'0000;

  // The guest's 4-level tables (SDM 4.5) in its own physical space: linear 0x7f00'4040'3000
  // maps to guest-physical 0x5000 (PML4 0x1000, PDPT 0x2000, PD 0x3000, PT 0x4000).
  constexpr x86::gva linear{0x7f00'4040'3000};
  const pte t = pte::present | pte::writable | pte::user;
  put64(ram + 0x1000 + 0xfe * 8, pte::make(x86::gpa{0x2000}, t).raw());  // PML4 index 254
  put64(ram + 0x2000 + 0x001 * 8, pte::make(x86::gpa{0x3000}, t).raw());  // PDPT index 1
  put64(ram + 0x3000 + 0x002 * 8, pte::make(x86::gpa{0x4000}, t).raw());  // PD index 2
  put64(ram + 0x4000 + 0x003 * 8, pte::make(x86::gpa{0x5000}, t).raw());  // PT index 3

  // 1. The dump: the guest's RAM alone, and its CR0/CR4/EFER/CR3.
  const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::mp | x86::cr0::pe;
  const x86::cr4 cr4 = x86::cr4::pae;
  const x86::efer efer = x86::efer::lme | x86::efer::lma | x86::efer::nxe;
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, x86::cr3_root(x86::cr3{0x1000}, x86::paging_mode_of(cr0, cr4, efer), 52));
  const paging::guest_walker guest(mmu, paging::cpu_properties{});
  const paging::flat_memory dump(host.data() + ram, 2 << 20);
  const auto r = guest.translate(dump, linear + 0x123);
  assert(r && r->address == x86::gpa{0x5123} && r->page_size() == x86::page_size_4k);
  assert(!guest.translate(dump, x86::gva{0x1000}));  // not mapped: a #PF report (r.error())

  // 2. Nested: an EPT (SDM 29.3) maps guest-physical 0..2 MiB to host 0x200000 with one
  // 2 MiB leaf, write-back; PML4 0x10000, PDPT 0x11000, PD 0x12000.
  const ept_entry rwx = ept_entry::read | ept_entry::write | ept_entry::exec;
  put64(0x10000, (ept_entry{0x11000} | rwx).raw());
  put64(0x11000, (ept_entry{0x12000} | rwx).raw());
  put64(0x12000, (ept_entry{ram | ept_entry::memory_type_field::set(0, 6)} | rwx | ept_entry::page_size).raw());
  paging::ept_pointer eptp{0x10000 | (3u << 3) | 6u};  // 4 levels, write-back
  const auto ept = paging::ept_walker::make(eptp, paging::ept_capabilities{});
  assert(ept);
  const paging::nested_walker<paging::format::ia32e<4>> nested(paging::walker_4level(mmu, paging::cpu_properties{}), *ept);
  const paging::flat_memory l1(host.data(), host.size());
  const auto n = nested.translate(l1, linear + 0x123);
  assert(n && n->l2_gpa() == x86::gpa{0x5123} && n->l1_address() == x86::hpa{ram + 0x5123});
  return 0;
}
