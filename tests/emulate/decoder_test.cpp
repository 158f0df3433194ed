// Golden decoder cases, typed by hand from the SDM opcode tables.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include <emulate/decoder.hpp>

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
