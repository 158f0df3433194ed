// SPDX-License-Identifier: MIT
// Instruction skip and the register file on SVM, with the shared x86 rules: widths from the
// CS attributes (APM Vol. 2 15.5.1: L = attribute bit 9, D/B = bit 10), nRIP, the interrupt
// shadow (VMCB 068h bit 0), and the single-step #DB with DR6.BS.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/svm/register_file.hpp>
#include <hvkit/svm/skip.hpp>
#include <hvkit/vmx/skip.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace f = hvkit::svm::fields;

namespace {

TEST(SvmSkip, WidthFromCsAttributes) {
  svm::soft_vmcb v;
  svm::write(v, f::efer, x86::efer::lme | x86::efer::lma);
  svm::write(v, f::cs_attrib, std::uint16_t{0x029b});  // P, DPL0, code, L=1
  svm::write(v, f::rip, std::uint64_t{0xffff'ffff'ffff'fffe});
  EXPECT_EQ(svm::ip_width_of(v), x86::ip_width::w64);
  EXPECT_EQ(svm::skip_instruction(v, 3, 0).new_rip, 1u);  // 64-bit wrap
  svm::write(v, f::cs_attrib, std::uint16_t{0x049b});  // D/B=1, L=0: compatibility mode, 32-bit
  EXPECT_EQ(svm::ip_width_of(v), x86::ip_width::w32);
  svm::write(v, f::rip, std::uint64_t{0xffff'fffe});
  EXPECT_EQ(svm::skip_instruction(v, 3, 0).new_rip, 1u);
  svm::write(v, f::efer, x86::efer{});
  svm::write(v, f::cs_attrib, std::uint16_t{0x009b});  // 16-bit
  svm::write(v, f::rip, std::uint64_t{0xfffe});
  EXPECT_EQ(svm::skip_instruction(v, 4, 0).new_rip, 2u);
  svm::write(v, f::cs_attrib, std::uint16_t{0x029b});  // L=1 without LMA: not 64-bit
  EXPECT_EQ(svm::ip_width_of(v), x86::ip_width::w16);
}

TEST(SvmSkip, SameWidthsAsVmx) {
  // VMX access rights put L at 13 and D/B at 14; the VMCB attributes at 9 and 10.
  for (int lma = 0; lma < 2; ++lma)
    for (unsigned ld = 0; ld < 4; ++ld) {
      svm::soft_vmcb v;
      svm::write(v, f::efer, lma ? x86::efer::lma : x86::efer{});
      svm::write(v, f::cs_attrib, static_cast<std::uint16_t>(ld << 9));
      EXPECT_EQ(svm::ip_width_of(v), hvkit::vmx::ip_width_of(lma != 0, ld << 13)) << lma << ld;
    }
}

TEST(SvmSkip, NextRipShadowAndSingleStep) {
  svm::soft_vmcb v;
  svm::write(v, f::rip, std::uint64_t{0x1000});
  svm::processor_write(v, f::next_rip, std::uint64_t{0x1003});
  svm::write(v, f::interrupt_state, std::uint64_t{1});
  svm::write(v, f::rflags, x86::rflags{0x102});  // TF
  const auto fx = svm::skip_to_next_rip(v, 0);
  EXPECT_EQ(fx.new_rip, 0x1003u);
  EXPECT_EQ(svm::read(v, f::rip), 0x1003u);
  EXPECT_TRUE(fx.shadow_cleared);
  EXPECT_EQ(svm::read(v, f::interrupt_state), 0u);
  EXPECT_TRUE(fx.single_step);
  EXPECT_EQ(svm::read(v, f::dr6) & (1u << 14), 1u << 14);
  EXPECT_EQ(svm::read(v, f::event_injection), 0x8000'0301ull);  // #DB, exception, no error code
  // BTF set: no trap on a non-branch.
  svm::soft_vmcb w;
  svm::write(w, f::rflags, x86::rflags{0x102});
  EXPECT_FALSE(svm::skip_instruction(w, 1, 2).single_step);
  EXPECT_EQ(svm::read(w, f::event_injection), 0u);
}

TEST(SvmRegisterFile, RaxAndRspLiveInTheVmcb) {
  svm::soft_vmcb v;
  x86::gpr_block g{};
  svm::register_file rf{v, g};
  rf.write(x86::gpr::rax, 0x11);
  rf.write(x86::gpr::rsp, 0x22);
  rf.write(x86::gpr::rbx, 0x33);
  rf.write(15u, 0x44);
  EXPECT_EQ(svm::read(v, f::rax), 0x11u);
  EXPECT_EQ(svm::read(v, f::rsp), 0x22u);
  EXPECT_EQ(g[x86::gpr::rax], 0u);
  EXPECT_EQ(g[x86::gpr::rbx], 0x33u);
  EXPECT_EQ(rf.read(x86::gpr::r15), 0x44u);
  EXPECT_EQ(rf.read(0u), 0x11u);
  rf.set_rip(0x5000);
  EXPECT_EQ(svm::read(v, f::rip), 0x5000u);
  EXPECT_EQ(x86::gpr_block::offset(x86::gpr::r15), 120u);
}

}  // namespace

#include <hvkit/svm/cr_access.hpp>
#include <hvkit/svm/segment.hpp>

namespace {

TEST(SvmSegments, AttributesAndLayout) {
  // A flat 64-bit code descriptor 00AF9B000000FFFF: type B, S, DPL 0, P; L, G.
  const std::uint16_t a = svm::attributes_from_descriptor(0x00af'9b00'0000'ffffull);
  EXPECT_EQ(a, 0x0a9b);
  EXPECT_EQ(svm::to_access_rights_layout(a), 0xa09bu);  // the VMX access-rights layout
  EXPECT_EQ(svm::from_access_rights_layout(0x1'a09b), a);  // "unusable" (bit 16) dropped
  EXPECT_EQ(svm::attrib::dpl(0x0ef3), 3u);
  svm::soft_vmcb v;
  const svm::segment_state tr{x86::selector::make(5), 0x008b, 0x67, 0xffff'8000'0000'1000ull};
  svm::store_segment(v, svm::segment::tr, tr);
  EXPECT_EQ(svm::read(v, f::tr_selector), 0x28);
  EXPECT_EQ(svm::read(v, f::tr_attrib), 0x008b);
  EXPECT_EQ(svm::read(v, f::tr_limit), 0x67u);
  EXPECT_EQ(v.page().bytes[0x498], 0x00);
  EXPECT_EQ(v.page().bytes[0x49f], 0xff);
  EXPECT_EQ(svm::load_segment(v, svm::segment::tr), tr);
}

TEST(SvmCrAccess, DecodeAssistedWriteUsesTheSharedRules) {
  svm::soft_vmcb v;
  x86::gpr_block g{};
  svm::register_file rf{v, g};
  g[x86::gpr::rbx] = 0x8000'0011;  // PG, ET, PE... with EFER.LME and CR4.PAE=0: #GP
  const auto w = svm::decode_cr_write_exit(svm::cr_write_exit(0), 0x8000'0000'0000'0003ull, true, rf);
  ASSERT_TRUE(w.decoded);
  x86::cr_context c{};
  c.cr0 = x86::cr0::pe | x86::cr0::et;
  c.efer = x86::efer::lme;
  const auto out = hvkit::paging::evaluate_cr_write(w.op, c, hvkit::paging::paging_kind::two_dimensional);
  EXPECT_EQ(out.fault, x86::cr_write_fault::long_mode_without_pae);
  c.cr4 = x86::cr4::pae;
  const auto ok = hvkit::paging::evaluate_cr_write(w.op, c, hvkit::paging::paging_kind::two_dimensional);
  EXPECT_EQ(ok.fault, x86::cr_write_fault::none);
  EXPECT_TRUE(ok.after.efer.test(x86::efer::lma));  // long mode activated
  // Without decode assists (Bochs): the instruction must be decoded.
  EXPECT_FALSE(svm::decode_cr_write_exit(svm::cr_write_exit(0), 0x8000'0000'0000'0003ull, false, rf).decoded);
  // LMSW through the selective intercept: bit 63 clear, decode it.
  EXPECT_FALSE(svm::decode_cr_write_exit(svm::exit_code::cr0_sel_write, 0, true, rf).decoded);
  // MOV to CR4 from R9.
  g[x86::gpr::r9] = 0x20;
  const auto w4 = svm::decode_cr_write_exit(svm::cr_write_exit(4), 0x8000'0000'0000'0009ull, true, rf);
  EXPECT_EQ(w4.op.cr, 4u);
  EXPECT_EQ(w4.op.source, 0x20u);
}

}  // namespace
