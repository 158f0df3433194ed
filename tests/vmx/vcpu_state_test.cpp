// SPDX-License-Identifier: MIT
// The guest register file over each VMCS backend (VMREADs counted), instruction skip
// (16/32/64-bit widths, interrupt shadows, single step), the CR context from the VMCS and
// the cr_write_actions executor (PDPTEs, MMU, TLB flush). Expected values are typed from
// the SDM (Vol. 3C 25.4.1-25.4.2, 27.3.2.4; Vol. 3A 4.4.1, 4.10.4.1), not computed.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include <hvkit/paging/ept_memory.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/cr_write_apply.hpp>
#include <hvkit/vmx/guest_context.hpp>
#include <hvkit/vmx/guest_mode.hpp>
#include <hvkit/vmx/hardware.hpp>
#include <hvkit/vmx/register_file.hpp>
#include <hvkit/vmx/skip.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace pg = hvkit::paging;
using x86::gpr;

// ---- register file ------------------------------------------------------------------
TEST(register_file, rsp_costs_one_vmread_then_none) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::guest_rsp, std::uint64_t{0x7000});
  vmx::gpr_block g;
  vmx::register_file<vmx::soft_vmcs> regs(v, g);
  v.reset_counts();
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x7000u);
  EXPECT_EQ(v.reads(), 1u);
  EXPECT_EQ(regs.read(4u).value(), 0x7000u);  // 4 = RSP as qualifications encode it
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x7000u);
  EXPECT_EQ(v.reads(), 1u);
  // GPRs never touch the VMCS.
  regs.write(gpr::rbx, 0x1234);
  EXPECT_EQ(regs.read(3u).value(), 0x1234u);
  EXPECT_EQ(regs.gprs().slot[3], 0x1234u);
  EXPECT_EQ(v.reads(), 1u);
  // After an exit the next read goes to the VMCS again (once).
  regs.on_vm_exit();
  v.store(vmx::fields::guest_rsp, std::uint64_t{0x6ff8});
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x6ff8u);
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x6ff8u);
  EXPECT_EQ(v.reads(), 2u);
}

TEST(register_file, writes_land_at_entry) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::guest_rsp, std::uint64_t{0x7000});
  v.store(vmx::fields::guest_rip, std::uint64_t{0x1000});
  v.store(vmx::fields::guest_rflags, std::uint64_t{0x2});
  vmx::gpr_block g;
  vmx::register_file<vmx::soft_vmcs> regs(v, g);
  v.reset_counts();
  regs.write(4u, 0x5000);
  regs.set_rip(0x1003);
  regs.set_rflags(x86::rflags{0x202});
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x5000u);  // read back from the file
  EXPECT_EQ(regs.gprs().slot[4], 0u);                   // slot 4 of the block is not RSP
  EXPECT_EQ(v.writes(), 0u);
  EXPECT_EQ(v.reads(), 0u);
  EXPECT_EQ(v.peek(vmx::fields::guest_rsp), 0x7000u);  // not yet in the VMCS
  EXPECT_TRUE(regs.dirty(decltype(regs)::vmcs_reg::rip));
  ASSERT_TRUE(regs.flush());
  EXPECT_EQ(v.writes(), 3u);
  EXPECT_EQ(v.peek(vmx::fields::guest_rsp), 0x5000u);
  EXPECT_EQ(v.peek(vmx::fields::guest_rip), 0x1003u);
  EXPECT_EQ(v.peek(vmx::fields::guest_rflags), 0x202u);
  EXPECT_FALSE(regs.dirty(decltype(regs)::vmcs_reg::rip));
  ASSERT_TRUE(regs.flush());  // nothing dirty: no writes
  EXPECT_EQ(v.writes(), 3u);
}

TEST(register_file, over_cached_vmcs) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::guest_rsp, std::uint64_t{0x7000});
  vmx::cached_vmcs<vmx::soft_vmcs> c(v);
  vmx::gpr_block g;
  vmx::register_file<vmx::cached_vmcs<vmx::soft_vmcs>> regs(c, g);
  v.reset_counts();
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x7000u);
  EXPECT_EQ(regs.read(gpr::rsp).value(), 0x7000u);
  EXPECT_EQ(v.reads(), 1u);
  regs.write(gpr::rsp, 0x6000);
  ASSERT_TRUE(regs.flush());      // into the cache ...
  EXPECT_EQ(v.writes(), 0u);
  ASSERT_TRUE(c.flush());         // ... and at entry into the VMCS
  EXPECT_EQ(v.writes(), 1u);
  EXPECT_EQ(v.peek(vmx::fields::guest_rsp), 0x6000u);
}

#if defined(__x86_64__)
// The hardware backend: VMREAD/VMWRITE cannot run outside VMX root operation, so this
// instantiates the file and skip over it (the freestanding build does the same).
template <class B>
concept usable_register_file = requires(vmx::register_file<B>& r) {
  r.read(gpr::rsp);
  r.flush();
  vmx::skip_instruction(r);
};
static_assert(usable_register_file<vmx::hw::current_vmcs>);
static_assert(usable_register_file<vmx::soft_vmcs>);
static_assert(usable_register_file<vmx::cached_vmcs<vmx::hw::current_vmcs>>);
#endif

// ---- instruction skip ---------------------------------------------------------------
namespace {
// CS access rights: 0x9b code segment; L = bit 13, D = bit 14 (SDM 25.4.1).
constexpr std::uint32_t cs16 = 0x9b, cs32 = 0x409b, cs64 = 0x209b;
struct skip_setup {
  vmx::soft_vmcs v;
  skip_setup(std::uint64_t rip, std::uint32_t len, std::uint32_t cs_ar, bool ia32e, std::uint64_t rflags = 0x202,
             std::uint32_t intr = 0) {
    v.store(vmx::fields::guest_rip, rip);
    v.store(vmx::fields::vm_exit_instruction_length, len);
    v.store(vmx::fields::guest_cs_access_rights, cs_ar);
    v.store(vmx::fields::vm_entry_controls, ia32e ? std::uint32_t{1u << 9} : std::uint32_t{0});
    v.store(vmx::fields::guest_rflags, rflags);
    v.store(vmx::fields::guest_interruptibility_state, intr);
  }
  std::uint64_t run() {
    vmx::gpr_block g;
  vmx::register_file<vmx::soft_vmcs> regs(v, g);
    auto r = vmx::skip_instruction(regs);
    EXPECT_TRUE(r);
    EXPECT_TRUE(regs.flush());
    return v.peek(vmx::fields::guest_rip);
  }
};
}  // namespace

TEST(skip, widths_and_wrap) {
  EXPECT_EQ(skip_setup(0x1000, 2, cs64, true).run(), 0x1002u);
  EXPECT_EQ(skip_setup(0xffff'ffffu, 2, cs64, true).run(), 0x1'0000'0001u);  // no 32-bit wrap in 64-bit mode
  EXPECT_EQ(skip_setup(0xffff'fffeu, 3, cs32, false).run(), 0x1u);           // EIP wraps at 2^32
  EXPECT_EQ(skip_setup(0xffff'fffeu, 3, cs32, true).run(), 0x1u);            // compatibility mode too
  EXPECT_EQ(skip_setup(0xfffeu, 3, cs16, false).run(), 0x1u);                // IP wraps at 2^16
  EXPECT_EQ(skip_setup(0x7ffeu, 2, cs16, false).run(), 0x8000u);
  EXPECT_EQ(skip_setup(0xfffeu, 3, cs64 & ~0x2000u, true).run(), 0x1u);      // L=0, D=0 in IA-32e: 16-bit
  // The helpers themselves.
  static_assert(vmx::advance_ip(0xffff, 1, vmx::ip_width::w16) == 0);
  static_assert(vmx::ip_width_of(false, cs64) == vmx::ip_width::w16);  // L ignored outside IA-32e mode
}

TEST(skip, shadows_cleared) {
  for (std::uint32_t intr : {0x1u, 0x2u, 0x9u, 0xau}) {
    skip_setup s(0x1000, 1, cs64, true, 0x202, intr);
    s.run();
    EXPECT_EQ(s.v.peek(vmx::fields::guest_interruptibility_state), intr & ~0x3u) << intr;  // NMI blocking stays
  }
  skip_setup none(0x1000, 1, cs64, true, 0x202, 0x8);
  none.v.reset_counts();
  none.run();
  EXPECT_EQ(none.v.writes(), 1u);  // only RIP: an unchanged interruptibility state is not written
}

TEST(skip, single_step_trap) {
  skip_setup tf(0x1000, 1, cs64, true, 0x302);  // TF=1
  tf.run();
  EXPECT_EQ(tf.v.peek(vmx::fields::guest_pending_debug_exceptions), 0x4000u);  // BS
  skip_setup btf(0x1000, 1, cs64, true, 0x302);
  btf.v.store(vmx::fields::guest_ia32_debugctl, std::uint64_t{0x2});  // BTF: single-step on branches only
  btf.run();
  EXPECT_EQ(btf.v.peek(vmx::fields::guest_pending_debug_exceptions), 0u);
  skip_setup no(0x1000, 1, cs64, true, 0x202);
  no.run();
  EXPECT_EQ(no.v.peek(vmx::fields::guest_pending_debug_exceptions), 0u);
}

// A VMREAD or VMWRITE that fails on the way: skip_instruction returns that failure (SDM 31.2:
// the instruction's VMfail), whatever field it was. The guest has TF = 1 (a single-step trap
// to record) and blocking by STI (to clear), so every field is touched.
namespace {
struct failing_vmcs {
  vmx::soft_vmcs inner;
  std::uint32_t failing_read = ~0u, failing_write = ~0u;
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t enc) {
    if (enc == failing_read) return hvkit::unexpected(vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc));
    return inner.read(enc);
  }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t enc, std::uint64_t v) {
    if (enc == failing_write) return hvkit::unexpected(vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmwrite, enc));
    return inner.write(enc, v);
  }
};
static_assert(vmx::vmcs_backend<failing_vmcs>);
}  // namespace

TEST(skip, a_failed_vmread_or_vmwrite_is_the_result) {
  namespace fl = vmx::fields;
  const std::uint32_t reads[] = {decltype(fl::vm_exit_instruction_length)::encoding, decltype(fl::guest_rip)::encoding,
                                 decltype(fl::guest_cs_access_rights)::encoding,
                                 decltype(fl::guest_interruptibility_state)::encoding,
                                 decltype(fl::guest_rflags)::encoding, decltype(fl::guest_ia32_debugctl)::encoding,
                                 decltype(fl::guest_pending_debug_exceptions)::encoding};
  const std::uint32_t writes[] = {decltype(fl::guest_interruptibility_state)::encoding,
                                  decltype(fl::guest_pending_debug_exceptions)::encoding};
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t k = 0; k < (pass == 0 ? std::size(reads) : std::size(writes)); ++k) {
      failing_vmcs v;
      v.inner.store(fl::guest_rip, std::uint64_t{0x1000});
      v.inner.store(fl::vm_exit_instruction_length, std::uint32_t{1});
      v.inner.store(fl::guest_cs_access_rights, cs64);
      v.inner.store(fl::vm_entry_controls, std::uint32_t{1u << 9});
      v.inner.store(fl::guest_rflags, std::uint64_t{0x302});            // TF
      v.inner.store(fl::guest_interruptibility_state, std::uint32_t{1});  // blocking by STI
      const std::uint32_t enc = pass == 0 ? reads[k] : writes[k];
      (pass == 0 ? v.failing_read : v.failing_write) = enc;
      vmx::gpr_block g;
      vmx::register_file<failing_vmcs> regs(v, g);
      const auto r = vmx::skip_instruction(regs);
      ASSERT_FALSE(r) << std::hex << enc;
      EXPECT_EQ(r.error().field_encoding, enc);
      EXPECT_EQ(r.error().instruction, pass == 0 ? vmx::vmx_instruction::vmread : vmx::vmx_instruction::vmwrite);
    }
  // Without a failure the same guest gets its trap recorded and its STI blocking cleared.
  failing_vmcs ok;
  ok.inner.store(fl::guest_rip, std::uint64_t{0x1000});
  ok.inner.store(fl::vm_exit_instruction_length, std::uint32_t{1});
  ok.inner.store(fl::guest_cs_access_rights, cs64);
  ok.inner.store(fl::vm_entry_controls, std::uint32_t{1u << 9});
  ok.inner.store(fl::guest_rflags, std::uint64_t{0x302});
  ok.inner.store(fl::guest_interruptibility_state, std::uint32_t{1});
  vmx::gpr_block g;
  vmx::register_file<failing_vmcs> regs(ok, g);
  const auto r = vmx::skip_instruction(regs);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->shadow_cleared && r->single_step);
  EXPECT_EQ(r->new_rip, 0x1001u);
}

// ---- CR context ---------------------------------------------------------------------
TEST(guest_context, cr_context_from_the_vmcs) {
  vmx::soft_vmcs v;
  v.store(vmx::fields::guest_cr0, std::uint64_t{0x8005'0033});     // PG WP NE ET MP PE, the real value
  v.store(vmx::fields::cr0_read_shadow, std::uint64_t{0x8000'0031}); // the guest believes WP=0, NE=1, MP=0
  v.store(vmx::fields::cr0_guest_host_mask, std::uint64_t{0x0000'0022}); // NE and MP host-owned
  v.store(vmx::fields::guest_cr4, std::uint64_t{0x2020});            // VMXE PAE
  v.store(vmx::fields::cr4_read_shadow, std::uint64_t{0x0020});
  v.store(vmx::fields::cr4_guest_host_mask, std::uint64_t{0x2000});  // VMXE host-owned
  v.store(vmx::fields::guest_ia32_efer, std::uint64_t{0x500});
  v.store(vmx::fields::vm_entry_controls, std::uint32_t{1u << 9});  // IA-32e mode guest (= EFER.LMA)
  v.store(vmx::fields::guest_cr3, std::uint64_t{0x9000});
  v.store(vmx::fields::guest_cs_access_rights, cs64);
  const auto c = vmx::read_cr_context(v, {x86::cr4{0x20}, 39, true});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cr0.raw(), 0x8005'0031u);  // WP from the guest field (guest-owned), NE/MP from the shadow
  EXPECT_EQ(c->cr4.raw(), 0x20u);
  EXPECT_EQ(c->efer.raw(), 0x500u);
  EXPECT_EQ(c->cr3, 0x9000u);
  EXPECT_TRUE(c->cs_l);
  EXPECT_EQ(c->maxphyaddr, 39u);
  EXPECT_TRUE(c->lam);
  EXPECT_EQ(c->cr4_allowed.raw(), 0x20u);
  EXPECT_TRUE(vmx::in_64bit_mode(*c));
  // The MOV to CR source through the register file: low 32 bits outside 64-bit mode.
  vmx::gpr_block g;
  vmx::register_file<vmx::soft_vmcs> regs(v, g);
  regs.write(gpr::rdx, 0x1'8000'0031u);
  const vmx::cr_access_qualification mov_cr0_rdx{0x200};  // CR0, MOV to CR, RDX
  EXPECT_EQ(vmx::cr_source_value(regs, mov_cr0_rdx, *c).value(), 0x1'8000'0031u);
  vmx::cr_context c32 = *c;
  c32.cs_l = false;
  EXPECT_EQ(vmx::cr_source_value(regs, mov_cr0_rdx, c32).value(), 0x8000'0031u);
}

// Issue 23.8: one source for "is the guest in 64-bit mode". A VM exit stores EFER.LMA into the
// "IA-32e mode guest" VM-entry control on every exit; the guest IA32_EFER field is saved only
// under "save IA32_EFER" (SDM Vol. 3C 28.2-28.3), so with that control clear it can hold a stale
// LMA. On a software VMCS where the two disagree, skip_instruction, read_cr_context,
// the emulator's context and guest_in_64bit_mode must all take LMA from the control.
TEST(guest_mode, one_source_for_lma_and_64bit_mode) {
  struct expect_row {
    std::uint64_t efer_field;  // guest IA32_EFER
    bool ia32e_control;        // "IA-32e mode guest"
    std::uint32_t cs_ar;
    bool long64;               // 64-bit mode as the SDM defines it (LMA from the control, CS.L)
    std::uint64_t rip_after;   // RIP 0xfffe + 3
  };
  // cs16 has L=0 D=0, cs64 L=1 D=0: outside IA-32e mode L is ignored and IP wraps at 2^16.
  const expect_row rows[] = {
      {0xd01, false, cs64, false, 0x1},       // stale LMA=1 in the field: 16-bit wrap, not 64-bit
      {0x101, true, cs64, true, 0x1'0001},    // stale LMA=0 in the field: 64-bit mode
      {0xd01, true, cs64, true, 0x1'0001},    // consistent 64-bit
      {0x001, false, cs16, false, 0x1},       // consistent 16-bit
      {0xd01, true, cs16, false, 0x1},        // compatibility mode (L=0, D=0): 16-bit
  };
  for (const auto& r : rows) {
    skip_setup s(0xfffe, 3, r.cs_ar, r.ia32e_control);
    s.v.store(vmx::fields::guest_ia32_efer, r.efer_field);
    const auto m = vmx::guest_in_64bit_mode(s.v);
    ASSERT_TRUE(m);
    EXPECT_EQ(*m, r.long64) << std::hex << r.efer_field << " " << r.ia32e_control;
    const auto c = vmx::read_cr_context(s.v, {x86::cr4::defined, 39, false});
    ASSERT_TRUE(c);
    EXPECT_EQ(vmx::in_64bit_mode(*c), r.long64) << std::hex << r.efer_field << " " << r.ia32e_control;
    EXPECT_EQ(c->efer.test(x86::efer::lma), r.ia32e_control);
    EXPECT_EQ(c->efer.test(x86::efer::lme), (r.efer_field & 0x100) != 0);  // LME etc. from the field
    EXPECT_EQ(vmx::read_guest_efer(s.v).value().raw(), c->efer.raw());
    EXPECT_EQ(s.run(), r.rip_after) << std::hex << r.efer_field << " " << r.ia32e_control;
  }
}

// ---- cr_write_actions executor -----------------------------------------------------
TEST(cr_write_apply, pae_pdptes_into_the_vmcs) {
  alignas(8) static std::array<std::uint8_t, 0x4000> ram{};
  pg::flat_memory mem{ram.data(), ram.size(), x86::gpa{0}};
  auto put = [&](std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) ram[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  // PDPT at 0x1020 (CR3 bits 31:5): entries 0 and 2 present.
  put(0x1020, 0x2001);
  put(0x1028, 0);
  put(0x1030, 0x3001);
  put(0x1038, 0);
  vmx::soft_vmcs v;
  pg::mmu_context mmu;
  // Paging off -> PAE paging: CR0.PG set with CR4.PAE=1, EFER.LME=0 (SDM 4.4.1).
  const pg::cr_state before{x86::cr0{0x11}, x86::cr4{0x20}, x86::efer{0}};
  const pg::cr_state after{x86::cr0{0x8000'0011}, x86::cr4{0x20}, x86::efer{0}};
  const auto actions = pg::cr_write_actions(before, after, pg::paging_kind::two_dimensional);
  ASSERT_TRUE(actions.any(pg::mmu_actions::reload_pdptrs));
  auto r = vmx::apply_cr_write_actions(v, mmu, actions, after, x86::cr3{0x1020}, mem, 36, true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->pdptes_loaded);
  EXPECT_TRUE(r->mmu_rebuilt);
  EXPECT_EQ(v.peek(vmx::fields::guest_pdpte0), 0x2001u);
  EXPECT_EQ(v.peek(vmx::fields::guest_pdpte1), 0u);
  EXPECT_EQ(v.peek(vmx::fields::guest_pdpte2), 0x3001u);
  EXPECT_EQ(mmu.role().mode(), x86::paging_mode::pae);
  EXPECT_EQ(mmu.root().value(), 0x1020u);  // reset_mmu: root from CR3 bits 31:5
  // PG 0->1 changes no flush bit of SDM 4.10.4.1: no INVVPID.
  EXPECT_EQ(r->flush, vmx::tlb_flush::none);

  // A present PDPTE with a reserved bit (bit 1): #GP, nothing written.
  put(0x1028, 0x4003);
  vmx::soft_vmcs v2;
  pg::mmu_context mmu2;
  auto bad = vmx::apply_cr_write_actions(v2, mmu2, actions, after, x86::cr3{0x1020}, mem, 36, true);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, vmx::cr_apply_error::kind_type::pdpte);
  EXPECT_EQ(bad.error().pdpte.index, 1u);
  EXPECT_EQ(v2.writes(), 0u);
  EXPECT_EQ(v2.peek(vmx::fields::guest_pdpte0), 0u);
}

TEST(cr_write_apply, tlb_flush_verdicts) {
  using A = pg::mmu_actions;
  // CR4.PGE toggled: flush everything (SDM 4.10.4.1): INVVPID single-context with VPIDs.
  const pg::cr_state b{x86::cr0{0x8000'0011}, x86::cr4{0x20}, x86::efer{0x500}};
  pg::cr_state a = b;
  a.cr4 = x86::cr4{0xa0};
  const auto act = pg::cr_write_actions(b, a, pg::paging_kind::two_dimensional);
  EXPECT_TRUE(act.any(A::flush_tlb_all));
  EXPECT_EQ(vmx::tlb_flush_for(act, true), vmx::tlb_flush::invvpid_single_context);
  EXPECT_EQ(vmx::tlb_flush_for(act, false), vmx::tlb_flush::none);  // VPID 0: entries and exits flush
  EXPECT_EQ(vmx::tlb_flush_for(A::flush_tlb_current, true), vmx::tlb_flush::invvpid_single_context);
  EXPECT_EQ(vmx::tlb_flush_for(A::refresh_permissions, true), vmx::tlb_flush::none);
  // A CR0.WP toggle with EPT: refresh the permissions, keep the root, no flush.
  pg::mmu_context mmu = pg::mmu_context::make(b.cr0, b.cr4, b.efer, x86::gpa{0x5000});
  pg::cr_state wp = b;
  wp.cr0 = x86::cr0{0x8001'0011};
  const auto wact = pg::cr_write_actions(b, wp, pg::paging_kind::two_dimensional);
  vmx::soft_vmcs v;
  alignas(8) static std::array<std::uint8_t, 64> ram{};
  pg::flat_memory mem{ram.data(), ram.size(), x86::gpa{0}};
  auto r = vmx::apply_cr_write_actions(v, mmu, wact, wp, x86::cr3{0x5000}, mem, 36, true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->mmu_rebuilt);
  EXPECT_FALSE(r->pdptes_loaded);
  EXPECT_EQ(r->flush, vmx::tlb_flush::none);
  EXPECT_EQ(mmu.root().value(), 0x5000u);
  EXPECT_TRUE(mmu.role().cr0_wp());
}

TEST(cr_write_apply, pdptes_through_the_ept) {
  // Host memory: EPT PML4 0x10000 -> PDPT 0x11000[1] -> PD 0x12000[1] -> PT 0x13000[1]
  // maps GPA 0x4020'1000 to host 0x18000 (SDM 29.3.2; entries RWX, leaf write-back).
  alignas(8) static std::array<std::uint8_t, 0x20000> host{};
  auto put = [&](std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) host[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(0x10000, 0x11000 | 7);
  put(0x11000 + 8, 0x12000 | 7);
  put(0x12000 + 8, 0x13000 | 7);
  put(0x13000 + 8, 0x18000 | 7 | (6u << 3));
  put(0x18020, 0x5001);  // the guest's PDPT at GPA 0x4020'1020: PDPTE 0 present
  put(0x18030, 0x6001);  // PDPTE 2
  pg::flat_memory mem{host.data(), host.size(), x86::gpa{0}};
  const auto ept = pg::ept_walker::make(pg::make_ept_pointer(x86::hpa{0x10000}, 4, false), {});
  ASSERT_TRUE(ept);
  const pg::ept_memory<pg::flat_memory> guest(*ept, mem);
  EXPECT_EQ(guest.read64(x86::gpa{0x4020'1020}).value(), 0x5001u);
  EXPECT_EQ(guest.read64(x86::gpa{0x4020'2020}).error(), pg::memory_error::unbacked);  // PT entry 2 not present
  vmx::soft_vmcs v;
  auto p = vmx::load_guest_pdptes(v, x86::cr3{0x4020'1020}, guest, 36);
  ASSERT_TRUE(p);
  EXPECT_EQ(v.peek(vmx::fields::guest_pdpte0), 0x5001u);
  EXPECT_EQ(v.peek(vmx::fields::guest_pdpte2), 0x6001u);
  // A PDPT the EPT does not map: reported as unbacked, nothing written.
  vmx::soft_vmcs v2;
  auto bad = vmx::load_guest_pdptes(v2, x86::cr3{0x4020'2020}, guest, 36);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().pdpte.kind, pg::pdptr_error::kind_type::unbacked);
  EXPECT_EQ(v2.writes(), 0u);
}
