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
