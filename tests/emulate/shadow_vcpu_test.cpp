// SPDX-License-Identifier: MIT
// emulate/shadow_vcpu.hpp: the calls a vCPU core makes on shadow-paging exits, with golden
// cases typed from the SDM (quoted) and the library's walker (tests/paging/shadow_harness.hpp)
// as the oracle for the accesses.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/emulate/shadow_vcpu.hpp>

#include "../paging/shadow_harness.hpp"

namespace {

using namespace shadow_harness;
namespace emulate = hvkit::emulate;

constexpr std::uint64_t P = 1, RW = 2, US = 4, A = 32, D = 64;

TEST(shadow_vcpu, an_implicit_supervisor_access_at_cpl3_is_checked_as_implicit) {
  // SDM 4.6.1: "Some operations implicitly access system data structures with linear
  // addresses; the resulting accesses to those data structures are supervisor-mode accesses
  // regardless of CPL" and, with CR4.SMAP = 1, "If CR4.SMAP = 1, data may not be read from
  // any user-mode address" for implicit supervisor-mode accesses (whatever RFLAGS.AC).
  // A CPL-3 guest with AC = 1 whose GDT sits on a user page: the processor's implicit read
  // faults on the host (SMAP is in the host's CR4); the hardware error code has U/S = 0.
  // Treated as an explicit supervisor read with AC = 1 the walker would allow it and the
  // MMU would resume into the same fault forever; as an implicit one it is the guest's #PF
  // with P = 1 (0x1; SDM 4.7).
  machine mc;
  mc.write(0x1000, 8, P | RW | US | A | 0x2000);
  mc.write(0x2000, 8, P | RW | US | A | 0x3000);
  mc.write(0x3000, 8, P | RW | US | A | 0x4000);
  mc.write(0x4000 + 8 * 5, 8, P | RW | US | A | D | 0x9000);
  const x86::cr0 cr0{0x8001'0033};
  const x86::cr4 cr4 = x86::cr4::pae | x86::cr4::smap;
  const x86::efer efer = x86::efer::lme | x86::efer::lma | x86::efer::nxe;
  mc.load(paging::make_cpu_role(cr0, cr4, efer), x86::gpa{0x1000});
  emulate::context ctx{};
  ctx.cr0 = cr0;
  ctx.cr4 = cr4;
  ctx.efer = efer;
  ctx.cpl = 3;
  ctx.rflags = x86::rflags{0x2 | (1u << 18)};  // AC = 1
  for (auto& s : ctx.seg) s = emulate::segment{0x2b, 0, 0xffff'ffff, emulate::segment_ar{0xc0f3}};
  ctx[emulate::sreg::cs] = emulate::segment{0x33, 0, 0xffff'ffff, emulate::segment_ar{0xa0fb}};
  emulate::flat_ram ram{mc.sut.data(), mc.sut.size()};
  emulate::null_platform plat;
  const std::uint64_t gdt_entry = 0x5000 + 0x28;
  // What the processor reports for the implicit read: a supervisor read of a present page (P = 1).
  const auto e = emulate::shadow_page_fault(mc.mmu, ctx, ram, plat, x86::gva{gdt_entry}, x86::pfec::present);
  ASSERT_EQ(e.action, emulate::shadow_exit_action::inject);
  EXPECT_EQ(e.fault.error_code.hardware_bits().raw(), 0x1u);
  EXPECT_EQ(e.fault.linear.value(), gdt_entry);
  // The same fault at CPL 0 is an explicit supervisor read: AC = 1 allows it (SDM 4.6.1:
  // "If CR4.SMAP = 1 ... and RFLAGS.AC = 1, data may be read from any user-mode address
  // with a valid translation" for explicit accesses at CPL < 3): mapped, resume.
  ctx.cpl = 0;
  const auto k = emulate::shadow_page_fault(mc.mmu, ctx, ram, plat, x86::gva{gdt_entry}, x86::pfec::present);
  EXPECT_EQ(k.action, emulate::shadow_exit_action::resume);
}

TEST(shadow_vcpu, a_pae_cr3_load_with_a_reserved_pdpte_bit_is_gp) {
  // SDM 4.4.1: with PAE paging, MOV to CR3 loads the four PDPTEs; "If any of the PDPTEs sets
  // both the P flag (bit 0) and any reserved bit, the MOV to CR instruction causes a
  // general-protection exception (#GP(0)) and the PDPTEs are not loaded." Bit 1 (R/W in
  // other entries) is reserved in a PDPTE (Table 4-8). A clean PDPT loads and switches.
  machine mc;
  mc.write(0x1000, 8, P | 0x3000);
  mc.write(0x5000, 8, P | RW | 0x3000);  // reserved bit 1 set
  mc.write(0x6000, 8, P | 0x3000);
  mc.write(0x3000, 8, P | RW | US | A | 0x4000);
  const x86::cr0 cr0{0x8001'0033};
  const x86::cr4 cr4 = x86::cr4::pae;
  mc.load(paging::make_cpu_role(cr0, cr4, x86::efer{}), x86::gpa{0x1000});
  const x86::hpa before = mc.mmu.root();
  paging::flat_memory mem(mc.sut.data(), mc.sut.size());
  paging::cr_write_outcome o{};
  o.cr = 3;
  o.value = 0x5000;
  const auto bad = emulate::shadow_cr_write(mc.mmu, o, x86::cr3{0x1000}, mem, 52);
  EXPECT_EQ(bad.action, emulate::shadow_exit_action::inject);
  EXPECT_TRUE(bad.gp);
  EXPECT_EQ(mc.mmu.root(), before);  // nothing loaded
  o.value = 0x6000;
  const auto good = emulate::shadow_cr_write(mc.mmu, o, x86::cr3{0x1000}, mem, 52);
  EXPECT_EQ(good.action, emulate::shadow_exit_action::resume);
  EXPECT_EQ(mc.mmu.pdptes().entries[0], P | 0x3000);
  EXPECT_EQ(mc.mmu.guest_context().root().value(), 0x6000u);
}

}  // namespace
