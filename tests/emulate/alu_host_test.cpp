// SPDX-License-Identifier: MIT
// The ALU flags against the host CPU (an oracle hvkit did not write): every 8-bit operand
// pair for each ALU instruction, plus edge and random 16/32/64-bit pairs (fixed seed),
// executed with inline assembly (stepping over the red zone before pushing). Flags the SDM
// leaves undefined (AF after AND/OR/XOR/TEST) are masked.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>

#include <hvkit/emulate/alu.hpp>

#if defined(__x86_64__)
namespace {
using hvkit::emulate::mnemonic;
constexpr std::uint64_t status = 0x8d5;  // OF SF ZF AF PF CF

template <class T>
std::uint64_t host(mnemonic op, T& a, T b, std::uint64_t flags_in) {
  std::uint64_t f = flags_in;
#define HVKIT_HOST_OP(insn)                                                                     \
  asm volatile("lea -128(%%rsp), %%rsp\n\tpush %[f]\n\tpopfq\n\t" insn " %[b], %[a]\n\tpushfq\n\tpop %[f]\n\tlea 128(%%rsp), %%rsp"                \
               : [a] "+r"(a), [f] "+r"(f) : [b] "r"(b) : "cc")
#define HVKIT_HOST_UNARY(insn) \
  asm volatile("lea -128(%%rsp), %%rsp\n\tpush %[f]\n\tpopfq\n\t" insn " %[a]\n\tpushfq\n\tpop %[f]\n\tlea 128(%%rsp), %%rsp" : [a] "+r"(a), [f] "+r"(f) : : "cc")
  switch (op) {
    case mnemonic::add: HVKIT_HOST_OP("add"); break;
    case mnemonic::or_: HVKIT_HOST_OP("or"); break;
    case mnemonic::adc: HVKIT_HOST_OP("adc"); break;
    case mnemonic::sbb: HVKIT_HOST_OP("sbb"); break;
    case mnemonic::and_: HVKIT_HOST_OP("and"); break;
    case mnemonic::sub: HVKIT_HOST_OP("sub"); break;
    case mnemonic::xor_: HVKIT_HOST_OP("xor"); break;
    case mnemonic::cmp: HVKIT_HOST_OP("cmp"); break;
    case mnemonic::test: HVKIT_HOST_OP("test"); break;
    case mnemonic::inc: HVKIT_HOST_UNARY("inc"); break;
    case mnemonic::dec: HVKIT_HOST_UNARY("dec"); break;
    case mnemonic::neg: HVKIT_HOST_UNARY("neg"); break;
    default: break;
  }
#undef HVKIT_HOST_OP
#undef HVKIT_HOST_UNARY
  return f;
}

constexpr mnemonic ops[] = {mnemonic::add, mnemonic::or_, mnemonic::adc, mnemonic::sbb, mnemonic::and_, mnemonic::sub,
                            mnemonic::xor_, mnemonic::cmp, mnemonic::test, mnemonic::inc, mnemonic::dec, mnemonic::neg};

bool logic(mnemonic op) {
  return op == mnemonic::or_ || op == mnemonic::and_ || op == mnemonic::xor_ || op == mnemonic::test;
}

template <class T>
bool check(mnemonic op, T a, T b, std::uint64_t cf_in, unsigned long long& n) {
  const std::uint64_t in = 0x202 | cf_in;
  T ha = a;
  const std::uint64_t hf = host<T>(op, ha, b, in);
  const auto r = hvkit::emulate::alu(op, a, b, sizeof(T), hvkit::x86::rflags{in});
  const std::uint64_t mask = logic(op) ? status & ~0x10ull : status;
  ++n;
  const bool writes = op != mnemonic::cmp && op != mnemonic::test;
  const bool ok = (hf & mask) == (r.flags.raw() & mask) && (!writes || static_cast<T>(r.value) == ha) &&
                  r.writes == writes;
  if (!ok)
    ADD_FAILURE() << "op " << int(op) << " size " << sizeof(T) << " a " << std::uint64_t(a) << " b "
                  << std::uint64_t(b) << " cf " << cf_in << ": host flags " << (hf & mask) << " ours "
                  << (r.flags.raw() & mask);
  return ok;
}

TEST(AluHost, EveryByteOperandPairAndRandomWiderOnes) {
  unsigned long long n = 0, failures = 0;
  for (auto op : ops)
    for (unsigned a = 0; a < 256; ++a)
      for (unsigned b = 0; b < 256; ++b)
        for (std::uint64_t cf = 0; cf < 2; ++cf)
          if (!check<std::uint8_t>(op, static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b), cf, n) &&
              ++failures > 20)
            return;
  std::mt19937_64 rng(7);
  const std::uint64_t edges[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fff'ffff, 0x8000'0000,
                                 0xffff'ffff, 0x7fff'ffff'ffff'ffff, 0x8000'0000'0000'0000, ~0ull};
  for (auto op : ops)
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t a = i < 196 ? edges[i % 14] : rng(), b = i < 196 ? edges[i / 14] : rng();
      const std::uint64_t cf = rng() & 1;
      if (!check<std::uint16_t>(op, static_cast<std::uint16_t>(a), static_cast<std::uint16_t>(b), cf, n)) ++failures;
      if (!check<std::uint32_t>(op, static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b), cf, n)) ++failures;
      if (!check<std::uint64_t>(op, a, b, cf, n)) ++failures;
      if (failures > 20) return;
    }
  std::printf("ALU vs host CPU: %llu cases compared\n", n);
  EXPECT_EQ(failures, 0u);
}
}  // namespace
#endif
