// SPDX-License-Identifier: MIT
// Golden decoder cases, typed by hand from the SDM opcode tables.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include <hvkit/emulate/decoder.hpp>

namespace {
using namespace hvkit::emulate;

hvkit::result<instruction, decode_error> dec(std::initializer_list<std::uint8_t> b, code_size m = code_size::c64) {
  return decode(b.begin(), b.size(), m);
}

TEST(Decoder, MovStoreRipRelative) {
  // 89 05 10 00 00 00: mov [rip+0x10], eax
  auto r = dec({0x89, 0x05, 0x10, 0x00, 0x00, 0x00});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->op, mnemonic::mov);
  EXPECT_EQ(r->length, 6);
  EXPECT_EQ(r->dst.kind, operand_kind::mem);
  EXPECT_TRUE(r->mem.rip_relative);
  EXPECT_EQ(r->mem.disp, 0x10);
  EXPECT_EQ(r->src.kind, operand_kind::gpr);
  EXPECT_EQ(r->src.reg, 0);
  EXPECT_EQ(r->src.size, 4);
}
}  // namespace

namespace {
using namespace hvkit::emulate;

hvkit::result<instruction, decode_error> d(std::initializer_list<std::uint8_t> b, code_size m) {
  return decode(b.begin(), b.size(), m);
}

TEST(Decoder, SixteenBitBpBasedDefaultsToSs) {
  auto r = d({0x8b, 0x46, 0xfe}, code_size::c16);  // mov ax, [bp-2]
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 3);
  EXPECT_EQ(r->operand_size, 2);
  EXPECT_EQ(r->address_size, 2);
  EXPECT_EQ(r->mem.base, 5);
  EXPECT_EQ(r->mem.index, no_register);
  EXPECT_EQ(r->mem.disp, -2);
  EXPECT_EQ(r->mem.segment, sreg::ss);
}

TEST(Decoder, ThirtyTwoBitSibWithoutBase) {
  auto r = d({0x8b, 0x04, 0x8d, 0x00, 0x10, 0x00, 0x00}, code_size::c32);  // mov eax, [ecx*4+0x1000]
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 7);
  EXPECT_EQ(r->mem.base, no_register);
  EXPECT_EQ(r->mem.index, 1);
  EXPECT_EQ(r->mem.scale, 4);
  EXPECT_EQ(r->mem.disp, 0x1000);
  EXPECT_EQ(r->mem.segment, sreg::ds);
}

TEST(Decoder, RexRules) {
  // A legacy prefix after REX cancels it (SDM 2.2.1): mov ax, ax.
  auto r = d({0x48, 0x66, 0x89, 0xc0}, code_size::c64);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->operand_size, 2);
  // REX.W wins over 66: mov rax, rax.
  r = d({0x66, 0x48, 0x89, 0xc0}, code_size::c64);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->operand_size, 8);
  // Byte register 4: AH without REX, SPL with any REX.
  r = d({0x88, 0xe0}, code_size::c64);  // mov al, ah
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->src.high8);
  EXPECT_EQ(r->src.reg, 0);
  r = d({0x40, 0x88, 0xe0}, code_size::c64);  // mov al, spl
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->src.high8);
  EXPECT_EQ(r->src.reg, 4);
  // 0x48 is DEC eax in 32-bit code: outside the subset, not a REX prefix.
  EXPECT_EQ(d({0x48, 0x89, 0xc0}, code_size::c32).error(), decode_error::unsupported);
}

TEST(Decoder, MoffsUsesAddressSize) {
  auto r = d({0x67, 0xa1, 0x44, 0x33, 0x22, 0x11}, code_size::c64);  // mov eax, [0x11223344]
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 6);
  EXPECT_EQ(r->mem.disp, 0x11223344);
  r = d({0xa3, 1, 2, 3, 4, 5, 6, 7, 8}, code_size::c64);  // mov [0x0807060504030201], eax
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 9);
  EXPECT_EQ(static_cast<std::uint64_t>(r->mem.disp), 0x0807060504030201u);
}

TEST(Decoder, SegmentOverridesIn64BitMode) {
  EXPECT_EQ(d({0x2e, 0x8b, 0x00}, code_size::c64)->mem.segment, sreg::ds);  // CS ignored
  EXPECT_EQ(d({0x64, 0x8b, 0x00}, code_size::c64)->mem.segment, sreg::fs);
  EXPECT_EQ(d({0x2e, 0x8b, 0x00}, code_size::c32)->mem.segment, sreg::cs);
}

TEST(Decoder, ControlRegisters) {
  auto r = d({0x0f, 0x20, 0xc0}, code_size::c32);  // mov eax, cr0
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->op, mnemonic::mov_from_cr);
  EXPECT_EQ(r->dst.size, 4);
  r = d({0x44, 0x0f, 0x22, 0xc0}, code_size::c64);  // mov cr8, rax
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->dst.reg, 8);
  EXPECT_EQ(r->src.size, 8);
  EXPECT_EQ(d({0x0f, 0x20, 0xc8}, code_size::c64).error(), decode_error::invalid);  // cr1
  EXPECT_EQ(d({0x44, 0x0f, 0x21, 0xc0}, code_size::c64).error(), decode_error::invalid);  // REX.R with DR
}

TEST(Decoder, LengthLimitAndTruncation) {
  std::uint8_t b[16];
  for (int i = 0; i < 13; ++i) b[i] = 0x66;
  b[13] = 0x89;
  b[14] = 0xc0;
  auto r = decode(b, 15, code_size::c64);  // exactly 15 bytes
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->length, 15);
  for (int i = 0; i < 14; ++i) b[i] = 0x66;
  b[14] = 0x89;
  b[15] = 0xc0;
  EXPECT_EQ(decode(b, 16, code_size::c64).error(), decode_error::too_long);
  EXPECT_EQ(d({0x89}, code_size::c64).error(), decode_error::truncated);
  EXPECT_EQ(d({0x0f}, code_size::c64).error(), decode_error::truncated);
  EXPECT_EQ(d({0x8b, 0x80, 0x00}, code_size::c64).error(), decode_error::truncated);  // disp32 cut
}

TEST(Decoder, LockRules) {
  EXPECT_TRUE(d({0xf0, 0x01, 0x00}, code_size::c64).has_value());  // lock add [rax], eax
  EXPECT_EQ(d({0xf0, 0x01, 0xc0}, code_size::c64).error(), decode_error::invalid);  // register dst
  EXPECT_EQ(d({0xf0, 0x39, 0x00}, code_size::c64).error(), decode_error::invalid);  // lock cmp
  EXPECT_EQ(d({0xf0, 0x0f, 0xa3, 0x00}, code_size::c64).error(), decode_error::invalid);  // lock bt
}

TEST(Decoder, ImmediatesAreSignExtendedToOperandSize) {
  EXPECT_EQ(d({0x48, 0x83, 0xc0, 0xff}, code_size::c64)->imm, 0xffff'ffff'ffff'ffffu);
  EXPECT_EQ(d({0x48, 0x81, 0xc0, 0x00, 0x00, 0x00, 0x80}, code_size::c64)->imm, 0xffff'ffff'8000'0000u);
  EXPECT_EQ(d({0x83, 0xc0, 0x80}, code_size::c32)->imm, 0xffff'ff80u);
  EXPECT_EQ(d({0x66, 0x83, 0xc0, 0x80}, code_size::c32)->imm, 0xff80u);
}

TEST(Decoder, OutsideTheSubsetOrInvalid) {
  EXPECT_EQ(d({0x0f, 0x01, 0xf8}, code_size::c64).error(), decode_error::unsupported);  // swapgs
  EXPECT_EQ(d({0xc6, 0xf8, 0x00}, code_size::c64).error(), decode_error::unsupported);  // xabort
  EXPECT_EQ(d({0xc6, 0xc8, 0x00}, code_size::c64).error(), decode_error::invalid);
  EXPECT_EQ(d({0x8c, 0xf0}, code_size::c64).error(), decode_error::invalid);  // Sreg 6
  EXPECT_EQ(d({0x0f, 0x00, 0x30}, code_size::c64).error(), decode_error::invalid);  // 0F 00 /6
  EXPECT_EQ(d({0x0f, 0x0b}, code_size::c64).error(), decode_error::unsupported);  // ud2 (not ours)
}

static_assert(decode(nullptr, 0, code_size::c64).error() == decode_error::truncated);
constexpr std::uint8_t ltr_ax[] = {0x0f, 0x00, 0xd8};
static_assert(decode(ltr_ax, 3, code_size::c64)->op == mnemonic::ltr);
static_assert(decode(ltr_ax, 3, code_size::c64)->length == 3);

}  // namespace
