// SPDX-License-Identifier: MIT
// CMPXCHG, CMPXCHG8B and CMPXCHG16B against the host CPU (an oracle hvkit did not write):
// the same instruction bytes run natively (inline assembly, over a 16-byte-aligned buffer
// at RDI) and through the emulator (64-bit guest, the buffer on a RAM page), from the same
// RAX/RBX/RCX/RDX/RSI/RFLAGS and memory; every register, the status flags and the 16 bytes
// must agree. Each form runs with the accumulator equal to the destination (the exchange)
// and different from it (the accumulator load and the write-back), on edge and random
// values (fixed seed).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "guest.hpp"

#if defined(__x86_64__)
namespace {
using namespace hvkit;
using hvkit::test::guest;

struct machine_state {
  std::uint64_t rax, rbx, rcx, rdx, rsi, rflags;
  std::array<std::uint8_t, 16> mem;
  bool operator==(const machine_state&) const = default;
};

// One form: its bytes for the emulator and the same bytes for the host (a macro, since
// inline assembly needs them as literals). Memory forms address [rdi].
#define HVKIT_FORMS(X)                                                   \
  X(cmpxchg_m8_r8, 0x0f, 0xb0, 0x0f)               /* cmpxchg [rdi], cl */        \
  X(lock_cmpxchg_m8_r8, 0xf0, 0x0f, 0xb0, 0x0f)    /* lock cmpxchg [rdi], cl */   \
  X(cmpxchg_m16_r16, 0x66, 0x0f, 0xb1, 0x0f)       /* cmpxchg [rdi], cx */        \
  X(lock_cmpxchg_m16_r16, 0xf0, 0x66, 0x0f, 0xb1, 0x0f)                          \
  X(cmpxchg_m32_r32, 0x0f, 0xb1, 0x0f)             /* cmpxchg [rdi], ecx */       \
  X(lock_cmpxchg_m32_r32, 0xf0, 0x0f, 0xb1, 0x0f)                                \
  X(cmpxchg_m64_r64, 0x48, 0x0f, 0xb1, 0x0f)       /* cmpxchg [rdi], rcx */       \
  X(lock_cmpxchg_m64_r64, 0xf0, 0x48, 0x0f, 0xb1, 0x0f)                          \
  X(cmpxchg_dh_cl, 0x0f, 0xb0, 0xce)               /* cmpxchg dh, cl (no REX) */  \
  X(cmpxchg_sil_cl, 0x40, 0x0f, 0xb0, 0xce)        /* cmpxchg sil, cl */          \
  X(cmpxchg_al_ah, 0x0f, 0xb0, 0xe0)               /* cmpxchg al, ah */           \
  X(cmpxchg_si_cx, 0x66, 0x0f, 0xb1, 0xce)         /* cmpxchg si, cx */           \
  X(cmpxchg_esi_ecx, 0x0f, 0xb1, 0xce)             /* cmpxchg esi, ecx */         \
  X(cmpxchg_eax_ecx, 0x0f, 0xb1, 0xc8)             /* cmpxchg eax, ecx */         \
  X(cmpxchg_ecx_eax, 0x0f, 0xb1, 0xc1)             /* cmpxchg ecx, eax */         \
  X(cmpxchg_rsi_rcx, 0x48, 0x0f, 0xb1, 0xce)       /* cmpxchg rsi, rcx */         \
  X(cmpxchg8b, 0x0f, 0xc7, 0x0f)                   /* cmpxchg8b [rdi] */          \
  X(lock_cmpxchg8b, 0xf0, 0x0f, 0xc7, 0x0f)                                      \
  X(cmpxchg16b, 0x48, 0x0f, 0xc7, 0x0f)            /* cmpxchg16b [rdi] */         \
  X(lock_cmpxchg16b, 0xf0, 0x48, 0x0f, 0xc7, 0x0f)

#define HVKIT_STR2(...) #__VA_ARGS__
#define HVKIT_STR(...) HVKIT_STR2(__VA_ARGS__)

enum class form : unsigned {
#define HVKIT_ENUM(name, ...) name,
  HVKIT_FORMS(HVKIT_ENUM)
#undef HVKIT_ENUM
};

struct form_info {
  const char* name;
  std::vector<std::uint8_t> bytes;
};

machine_state host(form f, machine_state s) {
  alignas(16) std::array<std::uint8_t, 16> mem = s.mem;
  std::uint64_t fl = s.rflags;
  switch (f) {
#define HVKIT_HOST(name, ...)                                                                          \
  case form::name:                                                                                     \
    asm volatile("lea -128(%%rsp), %%rsp\n\tpush %[f]\n\tpopfq\n\t.byte " HVKIT_STR(__VA_ARGS__)       \
                 "\n\tpushfq\n\tpop %[f]\n\tlea 128(%%rsp), %%rsp"                                      \
                 : "+a"(s.rax), "+b"(s.rbx), "+c"(s.rcx), "+d"(s.rdx), "+S"(s.rsi), [f] "+r"(fl)        \
                 : "D"(mem.data())                                                                     \
                 : "memory", "cc");                                                                    \
    break;
    HVKIT_FORMS(HVKIT_HOST)
#undef HVKIT_HOST
  }
  s.rflags = fl;
  s.mem = mem;
  return s;
}

std::vector<form_info> forms() {
  std::vector<form_info> v;
#define HVKIT_INFO(name, ...) v.push_back({#name, {__VA_ARGS__}});
  HVKIT_FORMS(HVKIT_INFO)
#undef HVKIT_INFO
  return v;
}

constexpr std::uint64_t data_lin = 0x60'0000, data_phys = 0x12'0000;
constexpr std::uint64_t status = 0x8d5;  // OF SF ZF AF PF CF

machine_state emulated(const form_info& fi, const machine_state& s, bool& ok, int& kind) {
  guest g;
  g.long_mode();
  g.map(data_lin, data_phys);
  g.ctx.gpr = {};
  g.ctx.gpr[0] = s.rax;
  g.ctx.gpr[3] = s.rbx;
  g.ctx.gpr[1] = s.rcx;
  g.ctx.gpr[2] = s.rdx;
  g.ctx.gpr[6] = s.rsi;
  g.ctx.gpr[7] = data_lin;
  g.ctx.rflags = x86::rflags{s.rflags};
  for (unsigned i = 0; i < 16; ++i) g.mem[data_phys + i] = s.mem[i];
  for (unsigned i = 0; i < fi.bytes.size(); ++i) g.mem[guest::code_phys + i] = fi.bytes[i];
  const auto o = g.run();
  kind = static_cast<int>(o.kind) * 100 + static_cast<int>(o.vector);
  ok = o.is_done() && g.ctx.rip == guest::code + fi.bytes.size() && g.ctx.gpr[7] == data_lin;
  machine_state r{g.ctx.gpr[0], g.ctx.gpr[3], g.ctx.gpr[1], g.ctx.gpr[2], g.ctx.gpr[6], g.ctx.rflags.raw(), {}};
  for (unsigned i = 0; i < 16; ++i) r.mem[i] = g.mem[data_phys + i];
  return r;
}

// Makes the compared operand equal to the accumulator (the exchange case) for form `f`.
void make_equal(form f, machine_state& s) {
  auto put = [&](unsigned at, std::uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) s.mem[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  switch (f) {
    case form::cmpxchg_m8_r8: case form::lock_cmpxchg_m8_r8: put(0, s.rax, 1); break;
    case form::cmpxchg_m16_r16: case form::lock_cmpxchg_m16_r16: put(0, s.rax, 2); break;
    case form::cmpxchg_m32_r32: case form::lock_cmpxchg_m32_r32: put(0, s.rax, 4); break;
    case form::cmpxchg_m64_r64: case form::lock_cmpxchg_m64_r64: put(0, s.rax, 8); break;
    case form::cmpxchg_dh_cl: s.rdx = (s.rdx & ~0xff00ull) | ((s.rax & 0xff) << 8); break;
    case form::cmpxchg_sil_cl: s.rsi = (s.rsi & ~0xffull) | (s.rax & 0xff); break;
    case form::cmpxchg_al_ah: s.rax = (s.rax & ~0xff00ull) | ((s.rax & 0xff) << 8); break;
    case form::cmpxchg_si_cx: s.rsi = (s.rsi & ~0xffffull) | (s.rax & 0xffff); break;
    case form::cmpxchg_esi_ecx: s.rsi = (s.rsi & ~0xffff'ffffull) | (s.rax & 0xffff'ffff); break;
    case form::cmpxchg_eax_ecx: break;  // always equal
    case form::cmpxchg_ecx_eax: s.rcx = (s.rcx & ~0xffff'ffffull) | (s.rax & 0xffff'ffff); break;
    case form::cmpxchg_rsi_rcx: s.rsi = s.rax; break;
    case form::cmpxchg8b: case form::lock_cmpxchg8b: put(0, s.rax, 4); put(4, s.rdx, 4); break;
    case form::cmpxchg16b: case form::lock_cmpxchg16b: put(0, s.rax, 8); put(8, s.rdx, 8); break;
  }
}

TEST(CmpxchgHost, EveryFormBothOutcomesMatchesTheHostCpu) {
  std::mt19937_64 rng(11);
  const std::uint64_t edges[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fff'ffff, 0x8000'0000,
                                 0xffff'ffff, 0x7fff'ffff'ffff'ffff, 0x8000'0000'0000'0000, ~0ull};
  const auto fs = forms();
  unsigned long long n = 0, equal_cases = 0, failures = 0;
  for (unsigned fi = 0; fi < fs.size(); ++fi) {
    const form f = static_cast<form>(fi);
    for (int i = 0; i < 600; ++i) {
      machine_state s{};
      const bool edge = i < 14 * 14 * 2;
      s.rax = edge ? edges[(i / 2) % 14] : rng();
      const std::uint64_t other = edge ? edges[(i / 2) / 14] : rng();
      s.rbx = rng();
      s.rcx = rng();
      s.rdx = edge ? other : rng();
      s.rsi = edge ? other : rng();
      for (unsigned k = 0; k < 16; ++k) s.mem[k] = static_cast<std::uint8_t>(edge ? other >> (8 * (k & 7)) : rng());
      // Status flags in: random, so that untouched ones (8B/16B keep all but ZF) show.
      s.rflags = 0x202 | (rng() & status);
      if (i & 1) make_equal(f, s);
      const machine_state h = host(f, s);
      bool ok = false;
      int kind = 0;
      machine_state e = emulated(fs[fi], s, ok, kind);
      e.rflags &= status | 0x202;
      machine_state hm = h;
      hm.rflags &= status | 0x202;
      ++n;
      if ((h.rflags & 0x40) != 0) ++equal_cases;
      if (!ok || !(e == hm)) {
        if (++failures <= 10)
          ADD_FAILURE() << fs[fi].name << " case " << i << ": rax " << std::hex << s.rax << " rdx " << s.rdx
                        << " rsi " << s.rsi << "\n host: rax " << h.rax << " rbx " << h.rbx << " rcx " << h.rcx
                        << " rdx " << h.rdx << " rsi " << h.rsi << " fl " << hm.rflags << " mem0 "
                        << *reinterpret_cast<const std::uint64_t*>(h.mem.data()) << "\n emu:  rax " << e.rax
                        << " rbx " << e.rbx << " rcx " << e.rcx << " rdx " << e.rdx << " rsi " << e.rsi << " fl "
                        << e.rflags << " mem0 " << *reinterpret_cast<const std::uint64_t*>(e.mem.data())
                        << (ok ? "" : " (not done: outcome kind*100+vector " + std::to_string(kind) + ")");
      }
    }
  }
  std::printf("CMPXCHG* vs host CPU: %llu cases over %zu forms compared (%llu with ZF=1)\n", n, fs.size(),
              equal_cases);
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(equal_cases, n / 3);
}
}  // namespace
#endif
