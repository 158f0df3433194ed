// SPDX-License-Identifier: MIT
// IN's I/O permission check, exhaustively over CPL, IOPL, virtual-8086 mode, the TR type, the
// TSS limit around the bit map's bytes, ports at byte boundaries, sizes 1/2/4 and the bit map
// contents, against a model typed from SDM Vol. 1 19.5.1-19.5.2: "the processor checks the I/O
// permission bit map ... if the CPL of the program or task currently executing is greater
// than the IOPL, or if the processor is operating in virtual-8086 mode"; "If any of the bits
// corresponding to the I/O port(s) is set, the processor generates a general-protection
// exception"; the processor reads two bytes of the bit map for every access, so both must lie
// within the TSS limit ("any byte ... beyond the TSS limit ... is treated as all 1s", i.e.
// #GP(0)); the I/O map base is the word at offset 66H of a 32-bit TSS (Vol. 3A 8.2.1), so a
// TR that is not a 32-bit TSS or whose limit is below 67H has no bit map.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;

constexpr std::uint64_t tss = 0x9000;
constexpr std::uint16_t map_base = 0x68;

TEST(IoPermission, InAgainstTheSdmModel) {
  guest g;
  g.protected32();
  const context base_ctx = g.ctx;
  unsigned long long n = 0, failures = 0;
  for (unsigned vm86 = 0; vm86 < 2; ++vm86)
    for (unsigned cpl = 0; cpl < 4; ++cpl)
      for (unsigned iopl = 0; iopl < 4; ++iopl)
        for (std::uint8_t type : {9, 11, 1, 2})
          for (unsigned port : {0x70u, 0x77u, 0x7eu, 0x7fu})
            for (unsigned size : {1u, 2u, 4u})
              for (int limit_case = 0; limit_case < 4; ++limit_case)
                for (int map_case = 0; map_case < 4; ++map_case) {
                  if (vm86 && cpl != 3) continue;  // virtual-8086 mode runs at CPL 3
                  const std::uint64_t first = map_base + port / 8;  // the bit map's first byte read
                  const std::uint32_t limit = limit_case == 0   ? 0x66
                                              : limit_case == 1 ? static_cast<std::uint32_t>(first)      // second byte out
                                              : limit_case == 2 ? static_cast<std::uint32_t>(first + 1)  // both in
                                                                : 0x2067;
                  // Bit map: all clear, the first port's bit, the last port's bit, or the bit
                  // just after the last port.
                  for (unsigned i = 0; i < 0x2000 / 8 + 2; ++i) g.mem[tss + map_base + i] = 0;
                  const unsigned bit = map_case == 1 ? port : map_case == 2 ? port + size - 1 : port + size;
                  if (map_case != 0) g.mem[tss + map_base + bit / 8] |= static_cast<std::uint8_t>(1u << (bit % 8));
                  g.mem[tss + 0x66] = map_base;
                  g.mem[tss + 0x67] = 0;
                  g.ctx = base_ctx;
                  g.ctx.cpl = static_cast<std::uint8_t>(cpl);
                  g.ctx.rflags = x86::rflags{0x2 | (iopl << 12) | (vm86 ? 1u << 17 : 0)};
                  g.ctx.tr = segment{0x28, tss, limit, segment_ar{static_cast<std::uint32_t>(0x80 | type)}};
                  g.ctx.gpr[2] = port;
                  std::uint64_t code_at = guest::code_phys;
                  if (vm86) {
                    for (auto& s : g.ctx.seg) s = segment{0, 0, 0xffff, segment_ar{0xf3}};
                    g.ctx[sreg::cs].base = guest::code_phys;
                    g.ctx.rip = 0;
                  }
                  // IN from DX: EC (byte), ED (word/dword by operand size), 66 toggles it.
                  const bool op16 = vm86 != 0;  // virtual-8086 code is 16-bit
                  std::uint8_t bytes[2] = {0xec, 0};
                  unsigned len = 1;
                  if (size != 1) {
                    const bool need66 = (size == 2) != op16;
                    if (need66) bytes[len - 1] = 0x66, bytes[len++] = 0xed;
                    else bytes[0] = 0xed;
                  }
                  for (unsigned i = 0; i < len; ++i) g.mem[code_at + i] = bytes[i];
                  const outcome o = g.run();
                  // The model.
                  bool allowed = true;
                  if (vm86 || cpl > iopl) {
                    if ((type != 9 && type != 11) || limit < 0x67 || first + 1 > limit) allowed = false;
                    else allowed = map_case == 0 || map_case == 3;
                  }
                  ++n;
                  const bool got_allowed = o.is_done() || o.kind == outcome_kind::needs_io;
                  const bool got_gp0 = o.kind == outcome_kind::exception && o.vector == x86::vector::gp && o.error_code == 0;
                  if (allowed ? !got_allowed : !got_gp0) {
                    ++failures;
                    ADD_FAILURE() << "vm86 " << vm86 << " cpl " << cpl << " iopl " << iopl << " type " << int(type)
                                  << " port " << std::hex << port << " size " << size << " limit " << limit << " map "
                                  << map_case << ": expected " << (allowed ? "allowed" : "#GP(0)") << ", got kind "
                                  << int(o.kind) << " vector " << int(o.vector);
                    if (failures > 20) return;
                  }
                }
  std::printf("I/O permission: %llu IN cases against the SDM model\n", n);
  EXPECT_EQ(failures, 0u);
}

}  // namespace
