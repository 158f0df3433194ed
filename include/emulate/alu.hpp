// SPDX-License-Identifier: MIT
/// @file
/// @brief Integer results and status flags of the ALU instructions in the subset
/// (ADD/OR/ADC/SBB/AND/SUB/XOR/CMP/TEST/INC/DEC/NEG; SDM Vol. 1 Appendix A, Vol. 2 per
/// instruction "Flags Affected").
///
/// Flags the SDM leaves undefined (AF after AND/OR/XOR/TEST) are cleared, as current Intel
/// processors do; INC and DEC leave CF alone.
#pragma once

#include <bit>
#include <cstdint>

#include "instruction.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::emulate {

/// The result of an ALU operation.
struct alu_result {
  std::uint64_t value = 0;  ///< truncated to the operand size
  x86::rflags flags{};      ///< the complete new RFLAGS
  bool writes = true;       ///< false for CMP and TEST
};

namespace detail {
[[nodiscard]] constexpr std::uint64_t mask_of(unsigned size) noexcept {
  return size >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * size)) - 1;
}
}  // namespace detail

/// `a op b` at `size` bytes with the incoming flags `f` (for ADC/SBB's CF and INC/DEC).
[[nodiscard]] constexpr alu_result alu(mnemonic op, std::uint64_t a, std::uint64_t b, unsigned size,
                                       x86::rflags f) noexcept {
  using x86::rflags;
  const std::uint64_t m = detail::mask_of(size);
  const std::uint64_t sign = std::uint64_t{1} << (8 * size - 1);
  a &= m;
  b &= m;
  std::uint64_t r = 0;
  bool cf = false, of = false, af = false;
  bool keep_cf = false, writes = true;
  const std::uint64_t cin = f.test(rflags::cf) ? 1 : 0;
  switch (op) {
    case mnemonic::add:
    case mnemonic::adc:
    case mnemonic::inc: {
      const std::uint64_t c = op == mnemonic::adc ? cin : 0;
      if (op == mnemonic::inc) b = 1, keep_cf = true;
      r = (a + b + c) & m;
      cf = r < a || (c != 0 && r == a);
      of = ((a ^ r) & (b ^ r) & sign) != 0;
      af = ((a ^ b ^ r) & 0x10) != 0;
      break;
    }
    case mnemonic::sub:
    case mnemonic::sbb:
    case mnemonic::cmp:
    case mnemonic::dec: {
      const std::uint64_t c = op == mnemonic::sbb ? cin : 0;
      if (op == mnemonic::dec) b = 1, keep_cf = true;
      r = (a - b - c) & m;
      cf = a < b || (c != 0 && a == b);
      of = ((a ^ b) & (a ^ r) & sign) != 0;
      af = ((a ^ b ^ r) & 0x10) != 0;
      writes = op != mnemonic::cmp;
      break;
    }
    case mnemonic::neg:
      r = (0 - a) & m;
      cf = a != 0;
      of = a == sign;
      af = ((a ^ r) & 0x10) != 0;
      break;
    case mnemonic::and_:
    case mnemonic::test: r = a & b; writes = op != mnemonic::test; break;
    case mnemonic::or_: r = a | b; break;
    case mnemonic::xor_: r = a ^ b; break;
    default: break;
  }
  rflags out = f.without(keep_cf ? rflags::status.without(rflags::cf) : rflags::status);
  if (cf && !keep_cf) out.set(rflags::cf);
  if (of) out.set(rflags::of);
  if (af) out.set(rflags::af);
  if (r & sign) out.set(rflags::sf);
  if (r == 0) out.set(rflags::zf);
  if ((std::popcount(static_cast<unsigned>(r & 0xff)) & 1) == 0) out.set(rflags::pf);
  return alu_result{r, out, writes};
}

}  // namespace hvkit::emulate
