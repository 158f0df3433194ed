// SPDX-License-Identifier: MIT
// emulate::read_emulation_context / apply_emulation over a software VMCS: the context the
// emulator sees, and each outcome applied back (registers, RIP, shadows, single step, the
// exception injected and merged with a pending event, the MMIO completion). Expected VMCS
// values are typed from the SDM layouts (Vol. 3C 25.4.1-25.4.2, 25.8.3).
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/emulate/vmcs_context.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace em = hvkit::emulate;

namespace {
struct fixture {
  vmx::soft_vmcs v;
  vmx::gpr_block g;
  vmx::register_file<vmx::soft_vmcs> regs{v, g};
  fixture() {
    v.store(vmx::fields::guest_rip, std::uint64_t{0x40'1000});
    v.store(vmx::fields::guest_rsp, std::uint64_t{0x7ff0});
    v.store(vmx::fields::guest_rflags, std::uint64_t{0x202});
    v.store(vmx::fields::guest_cs_selector, std::uint16_t{0x1b});
    v.store(vmx::fields::guest_cs_access_rights, std::uint32_t{0xa0fb});  // 64-bit code, DPL 3
    v.store(vmx::fields::guest_cs_limit, std::uint32_t{0xffff'ffff});
    v.store(vmx::fields::guest_ss_selector, std::uint16_t{0x23});
    v.store(vmx::fields::guest_ss_access_rights, std::uint32_t{0xc0f3});  // data, DPL 3
    v.store(vmx::fields::guest_ldtr_access_rights, std::uint32_t{0x1'0000});  // unusable
    v.store(vmx::fields::guest_tr_access_rights, std::uint32_t{0x8b});
    v.store(vmx::fields::guest_gdtr_base, std::uint64_t{0x5000});
    v.store(vmx::fields::guest_gdtr_limit, std::uint32_t{0x7f});
    v.store(vmx::fields::guest_cr0, std::uint64_t{0x8005'0033});
    v.store(vmx::fields::guest_cr4, std::uint64_t{0x2020});
    v.store(vmx::fields::cr4_read_shadow, std::uint64_t{0});
    v.store(vmx::fields::cr4_guest_host_mask, std::uint64_t{0x2000});  // the guest does not see VMXE
    v.store(vmx::fields::guest_cr3, std::uint64_t{0x9000});
    v.store(vmx::fields::guest_ia32_efer, std::uint64_t{0xd01});
    v.store(vmx::fields::vm_entry_controls, std::uint32_t{1u << 9});  // IA-32e mode guest (= EFER.LMA)
    regs.write(x86::gpr::rax, 0x11);
    regs.write(x86::gpr::r15, 0xff);
  }
};
}  // namespace

TEST(vmcs_context, read) {
  fixture f;
  const auto c = em::read_emulation_context(f.v, f.regs, {x86::cr4{0x6f}, 40, false});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->gpr[0], 0x11u);
  EXPECT_EQ(c->gpr[4], 0x7ff0u);  // RSP from the VMCS
  EXPECT_EQ(c->gpr[15], 0xffu);
  EXPECT_EQ(c->rip, 0x40'1000u);
  EXPECT_EQ(c->rflags.raw(), 0x202u);
  EXPECT_EQ(c->cpl, 3u);  // SS.DPL
  EXPECT_EQ(c->mode(), em::cpu_mode::long64);
  EXPECT_EQ((*c)[em::sreg::cs].selector, 0x1bu);
  EXPECT_TRUE(c->ldtr.ar.test(em::segment_ar::unusable));
  EXPECT_EQ(c->gdtr.base, 0x5000u);
  EXPECT_EQ(c->gdtr.limit, 0x7fu);
  EXPECT_EQ(c->cr4.raw(), 0x20u);  // guest-visible: VMXE from the read shadow
  EXPECT_EQ(c->cr3.raw(), 0x9000u);
  EXPECT_EQ(c->maxphyaddr, 40u);
  EXPECT_EQ(c->cr4_allowed.raw(), 0x6fu);
}

// Issue 23.8: EFER.LMA comes from the "IA-32e mode guest" control, as in vmx::skip_instruction
// (vmx/guest_mode.hpp): a stale LMA=1 in the guest IA32_EFER field does not make 64-bit mode.
TEST(vmcs_context, lma_from_the_ia32e_mode_guest_control) {
  fixture f;
  f.v.store(vmx::fields::vm_entry_controls, std::uint32_t{0});
  const auto c = em::read_emulation_context(f.v, f.regs, {x86::cr4{0x6f}, 40, false});
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->efer.test(x86::efer::lma));
  EXPECT_NE(c->mode(), em::cpu_mode::long64);
  EXPECT_EQ(vmx::guest_in_64bit_mode(f.v).value(), c->mode() == em::cpu_mode::long64);
}

TEST(vmcs_context, done_writes_back_what_changed) {
  fixture f;
  f.v.store(vmx::fields::guest_interruptibility_state, std::uint32_t{0x1});  // STI shadow
  const em::context before = *em::read_emulation_context(f.v, f.regs, {});
  em::context after = before;
  after.gpr[4] = 0x7fe8;
  after.gpr[1] = 0x22;
  after.rip = 0x40'1003;
  after[em::sreg::ds].selector = 0x2b;
  em::outcome o = em::outcome::make_done();
  o.mov_ss_shadow = true;
  o.single_step = true;
  f.v.reset_counts();
  const auto a = em::apply_emulation(f.v, f.regs, before, after, o);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::done);
  EXPECT_EQ(f.regs.gprs().slot[1], 0x22u);
  EXPECT_EQ(f.v.peek(vmx::fields::guest_ds_selector), 0x2bu);
  EXPECT_EQ(f.v.peek(vmx::fields::guest_es_selector), 0u);  // unchanged: not written
  EXPECT_EQ(f.v.peek(vmx::fields::guest_interruptibility_state), 0x2u);  // MOV SS replaces STI
  EXPECT_EQ(f.v.peek(vmx::fields::guest_pending_debug_exceptions), 0x4000u);  // BS
  EXPECT_EQ(f.v.peek(vmx::fields::guest_rip), 0x40'1000u);  // not before flush
  ASSERT_TRUE(f.regs.flush());
  EXPECT_EQ(f.v.peek(vmx::fields::guest_rip), 0x40'1003u);
  EXPECT_EQ(f.v.peek(vmx::fields::guest_rsp), 0x7fe8u);
}

TEST(vmcs_context, exception_injected_with_cr2_and_merged) {
  fixture f;
  const em::context c = *em::read_emulation_context(f.v, f.regs, {});
  const auto pf = em::outcome::make_exception(x86::vector::pf, 0x7, 0xdead'b000);
  auto a = em::apply_emulation(f.v, f.regs, c, c, pf);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::injected);
  EXPECT_EQ(f.v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b0eu);
  EXPECT_EQ(f.v.peek(vmx::fields::vm_entry_exception_error_code), 0x7u);
  EXPECT_TRUE(a->load_cr2);
  EXPECT_EQ(a->cr2, 0xdead'b000u);
  // A #GP while that #PF is pending: #DF(0).
  a = em::apply_emulation(f.v, f.regs, c, c, em::outcome::make_exception(x86::vector::gp, 0));
  ASSERT_TRUE(a);
  EXPECT_EQ(f.v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b08u);
  EXPECT_EQ(f.v.peek(vmx::fields::vm_entry_exception_error_code), 0u);
  EXPECT_FALSE(a->load_cr2);
  // A #PF while #DF is pending: shutdown, nothing written.
  a = em::apply_emulation(f.v, f.regs, c, c, pf);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::shutdown);
  EXPECT_EQ(f.v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b08u);
}

TEST(vmcs_context, mmio_completion) {
  fixture f;
  em::context c = *em::read_emulation_context(f.v, f.regs, {});
  em::outcome o;
  o.kind = em::outcome_kind::needs_mmio;
  o.address = 0xfee0'0030;
  o.size = 4;
  o.write = false;
  const auto a = em::apply_emulation(f.v, f.regs, c, c, o);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::needs_access);
  em::complete_access(c, o, 0x50014);
  EXPECT_EQ(c.pending.what, em::completion::kind::mmio);
  EXPECT_EQ(c.pending.address, 0xfee0'0030u);
  EXPECT_EQ(c.pending.size, 4u);
  EXPECT_FALSE(c.pending.write);
  EXPECT_EQ(c.pending.value, 0x50014u);
}
