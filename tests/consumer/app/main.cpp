// SPDX-License-Identifier: MIT
// The README's worked example, built by the consumer tests against an installed hvkit
// (find_package, pkg-config) and a source tree (add_subdirectory, FetchContent): the CR0.WP
// story of docs/background.md §1. A supervisor write to a read-only page is allowed with
// CR0.WP=0 and is #PF(0x3) with WP=1; the guest owns WP, so the MMU context re-syncs it from
// the live CR0 before the walk.
//
// The consumer also has headers of its own named x86/cr.hpp, paging/walker.hpp, vmx/fields.hpp,
// cpuid/policy.hpp, emulate/emulator.hpp ... (own/, first on the include path): hvkit's
// internal includes must not pick them up, and the consumer's own includes must.
#include <x86/cr.hpp>
#include <paging/walker.hpp>

#include <hvkit/cpuid/policy.hpp>
#include <hvkit/emulate/emulator.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/version.hpp>
#include <hvkit/x86/cr3.hpp>

#include <cpuid/policy.hpp>
#include <emulate/emulator.hpp>
#include <vmx/fields.hpp>

#include <cstring>

// The generated version header is part of every way of using hvkit (install tree included).
static_assert(HVKIT_VERSION == hvkit::version.major * 10000 + hvkit::version.minor * 100 + hvkit::version.patch);

#include <cstdint>
#include <cstdio>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  // 4-level tables in 5 pages of "guest RAM" at gpa 0: PML4 at 0x0000, PDPT 0x1000,
  // PD 0x2000, PT 0x3000, data page 0x4000 mapped read-only (R/W=0) at gva 0.
  alignas(8) static std::uint8_t ram[5 * 4096];
  auto put = [](std::uint64_t gpa, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) ram[gpa + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(0x0000, 0x1000 | 0x3);  // P | R/W
  put(0x1000, 0x2000 | 0x3);
  put(0x2000, 0x3000 | 0x3);
  put(0x3000, 0x4000 | 0x1);  // P only: read-only

  const x86::cr0 cr0{0x8000'0011};  // PG | ET | PE, WP = 0
  const x86::cr4 cr4{0x20};         // PAE
  const x86::efer efer{0x500};      // LME | LMA
  const auto mode = x86::paging_mode_of(cr0, cr4, efer);
  auto mmu = paging::mmu_context::make(cr0, cr4, efer, x86::cr3_root(x86::cr3{0}, mode, 40));
  const paging::walker_4level walker(mmu, paging::cpu_properties{.maxphyaddr = 40, .gbpages = true, .amd_nonleaf_bit8 = false});
  paging::flat_memory memory(ram, sizeof ram, x86::gpa{0});

  paging::walk_request write{};
  write.linear = x86::gva{0x10};
  write.access = x86::pfec::write;  // a supervisor write (CPL 0)

  const auto allowed = walker.walk(memory, mmu, write);  // WP = 0: allowed, and D is set
  mmu.refresh_passthrough_bits(cr0.with(x86::cr0::wp));  // the guest set WP without an exit
  const auto denied = walker.walk(memory, mmu, write);   // WP = 1: #PF, error code 0x3

  // Both worlds are visible: the consumer's own headers and hvkit's.
  if (std::strcmp(app::own_x86_cr_hpp, "x86/cr.hpp") != 0 ||
      std::strcmp(app::own_paging_walker_hpp, "paging/walker.hpp") != 0 ||
      std::strcmp(app::own_vmx_fields_hpp, "vmx/fields.hpp") != 0 ||
      std::strcmp(app::own_cpuid_policy_hpp, "cpuid/policy.hpp") != 0 ||
      std::strcmp(app::own_emulate_emulator_hpp, "emulate/emulator.hpp") != 0)
    return 2;
  hvkit::vmx::soft_vmcs vmcs;
  if (!hvkit::vmx::vmwrite(vmcs, hvkit::vmx::fields::guest_cr0, cr0.raw()) ||
      hvkit::vmx::vmread(vmcs, hvkit::vmx::fields::guest_cr0).value() != cr0.raw())
    return 3;

  if (!allowed || allowed->address.value() != 0x4010 || denied ||
      denied.error().error_code.raw() != 0x3 || (ram[0x3000] & 0x40) == 0)
    return 1;
  std::printf("consumer ok: WP=0 write -> gpa 0x%llx, WP=1 write -> #PF 0x%llx\n",
              static_cast<unsigned long long>(allowed->address.value()),
              static_cast<unsigned long long>(denied.error().error_code.raw()));
  return 0;
}
