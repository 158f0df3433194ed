// SPDX-License-Identifier: MIT
// emulate::read_emulation_context / write_emulation_context over a software VMCB. Expected
// values typed from the APM's layouts: VMCB segment attributes are descriptor bits 47:40 in
// attribute bits 7:0 and 55:52 in 11:8 (APM Vol. 2 15.5.1); the emulator's segment_ar is the
// VMX access-rights layout with bit 16 "unusable" (SDM Vol. 3C 25.4.1); EFER.SVME is the
// host's (15.5.1); the interrupt shadow is bit 0 of VMCB 068h (15.21.5).
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/emulate/vmcb_context.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace em = hvkit::emulate;
namespace f = hvkit::svm::fields;

namespace {
struct fixture {
  svm::soft_vmcb v;
  x86::gpr_block g{};
  svm::register_file<svm::soft_vmcb> regs{v, g};
  fixture() {
    svm::write(v, f::rip, std::uint64_t{0x40'1000});
    svm::write(v, f::rax, std::uint64_t{0x1111});
    g[x86::gpr::rbx] = 0x2222;
    svm::write(v, f::rflags, x86::rflags{0x202});
    // CS: 64-bit code, DPL 0: descriptor type 0xB, S, P (0x9B) and L (bit 53 -> attribute bit 9).
    svm::store_segment(v, svm::segment::cs, {x86::selector{0x08}, std::uint16_t{0x29B}, 0xffff'ffffu, 0});
    // LDTR: an LDT descriptor (type 2, P: 0x82).
    svm::store_segment(v, svm::segment::ldtr, {x86::selector{0x30}, std::uint16_t{0x82}, 0xffffu, 0x1234});
    // TR not present: attribute 0.
    svm::store_segment(v, svm::segment::tr, {x86::selector{0}, std::uint16_t{0}, 0x67u, 0});
    svm::write(v, f::gdtr_base, std::uint64_t{0x5000});
    svm::write(v, f::gdtr_limit, std::uint32_t{0x7f});
    svm::write(v, f::cr0, x86::cr0{0x8005'0033});
    svm::write(v, f::cr4, x86::cr4{0x20});
    svm::write(v, f::efer, x86::efer{0x1d00});  // SVME | NXE | LMA | LME
  }
};
}  // namespace

TEST(VmcbContext, ReadsTheGuestAsTheEmulatorSeesIt) {
  fixture x;
  const em::context c = em::read_emulation_context(x.v, x.regs, 40, x86::cr4{0x20});
  EXPECT_EQ(c.rip, 0x40'1000u);
  EXPECT_EQ(c.gpr[0], 0x1111u);  // RAX from the VMCB
  EXPECT_EQ(c.gpr[3], 0x2222u);  // RBX from the block
  EXPECT_EQ(c.seg[1].ar.raw(), 0x209Bu);  // VMX layout: L is bit 13
  EXPECT_FALSE(c.ldtr.ar.test(em::segment_ar::unusable));
  EXPECT_EQ(c.ldtr.ar.raw(), 0x82u);
  EXPECT_TRUE(c.tr.ar.test(em::segment_ar::unusable));  // P clear: unusable
  EXPECT_EQ(c.gdtr.base, 0x5000u);
  EXPECT_EQ(c.gdtr.limit, 0x7fu);
  EXPECT_EQ(c.efer.raw(), 0xd00u);  // without SVME
  EXPECT_EQ(c.maxphyaddr, 40u);
}

TEST(VmcbContext, WritesBackWhatTheInstructionChanged) {
  fixture x;
  const em::context before = em::read_emulation_context(x.v, x.regs, 40, x86::cr4{0x20});
  em::context after = before;
  after.gpr[3] = 0x3333;
  after.rip = 0x40'1003;
  after.cr0 = x86::cr0{0x8001'0033};  // WP cleared
  after.ldtr.selector = 0;  // LLDT 0: unusable
  after.ldtr.limit = 0xffff;
  after.ldtr.base = 0x1234;
  after.ldtr.ar = em::segment_ar{0x1'0000};
  em::outcome o = em::outcome::make_done(em::event::cr_write);
  o.mov_ss_shadow = true;
  em::write_emulation_context(x.v, x.regs, before, after, o);
  EXPECT_EQ(x.g[x86::gpr::rbx], 0x3333u);
  EXPECT_EQ(svm::read(x.v, f::rip), 0x40'1003u);
  EXPECT_EQ(svm::read(x.v, f::cr0), 0x8001'0033u);
  EXPECT_EQ(svm::read(x.v, f::efer), 0x1d00u);  // SVME back in
  const svm::segment_state l = svm::load_segment(x.v, svm::segment::ldtr);
  EXPECT_EQ(l.attributes, 0u);
  EXPECT_EQ(l.limit, 0u);  // a null LDTR: limit and base 0
  EXPECT_EQ(l.base, 0u);
  EXPECT_EQ(svm::read(x.v, f::interrupt_state) & 1u, 1u);  // MOV SS shadow
}
