// SPDX-License-Identifier: MIT
// The descriptor checks of MOV to DS/SS, LLDT, LTR, VERR and VERW, exhaustively: every
// code/data/system type (S, type 0-15), DPL, present bit, selector RPL, CPL, table (GDT at
// three limits around the descriptor, LDT, unusable LDTR), in 32-bit protected mode and in
// 64-bit mode, with the selector in a register or in memory, against a model written here
// from the SDM's pseudo-code and exception lists (Vol. 2B "MOV", Vol. 2A "LLDT", "LTR",
// Vol. 2B "VERR/VERW"; descriptor layout Vol. 3A 3.4.5, 16-byte system descriptors 8.2.3).
// The model below is the oracle: it does not call the emulator's own checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;
using hvkit::test::pte_p;
using hvkit::test::pte_rw;

enum class op { mov_ds, mov_ss, lldt, ltr, verr, verw };
constexpr op ops[] = {op::mov_ds, op::mov_ss, op::lldt, op::ltr, op::verr, op::verw};
// Where the descriptor is: the GDT with a limit just below its last byte (0x26), covering
// its first 8 bytes only (0x27), covering 16 bytes (0x2f); the LDT; an LDT selector while
// LDTR is unusable.
enum class table { gdt_short, gdt_8, gdt_16, ldt, ldt_unusable };
constexpr table tables[] = {table::gdt_short, table::gdt_8, table::gdt_16, table::ldt, table::ldt_unusable};

constexpr std::uint32_t desc_base = 0x00ab'cd00, desc_limit = 0x5'6789;  // G = 0

// Vol. 3A Figure 3-8: limit 15:0, base 23:0, type, S, DPL, P, limit 19:16, AVL, L, D/B, G,
// base 31:24 (here D/B = 1, the rest 0).
constexpr std::uint64_t encode(unsigned type, bool s, unsigned dpl, bool p) {
  return (desc_limit & 0xffffull) | (std::uint64_t{desc_base & 0xff'ffff} << 16) | (std::uint64_t{type} << 40) |
         (std::uint64_t{s} << 44) | (std::uint64_t{dpl} << 45) | (std::uint64_t{p} << 47) |
         (std::uint64_t{(desc_limit >> 16) & 0xf} << 48) | (1ull << 54) | (std::uint64_t{desc_base >> 24} << 56);
}

struct expected {
  bool fault = false;
  x86::vector v{};
  std::uint16_t ec = 0;
  bool zf = false;       // VERR/VERW
  bool loads = false;    // MOV/LLDT/LTR load the register from the descriptor
  bool null_load = false;
};
expected fault(x86::vector v, std::uint16_t ec) { return {true, v, ec, false, false, false}; }

struct case_ {
  op o;
  bool long64;
  unsigned cpl, rpl, type, dpl;
  bool s, p;
  table t;
};

// The oracle, from the SDM's text.
expected model(const case_& c, bool null) {
  const std::uint16_t sel_ec = static_cast<std::uint16_t>((c.t == table::ldt || c.t == table::ldt_unusable ? 0x14 : 0x20));
  const bool code = c.s && (c.type & 8), data = c.s && !(c.type & 8);
  const bool conforming = code && (c.type & 4);
  const bool readable = data || (code && (c.type & 2));  // data is always readable
  const bool writable = data && (c.type & 2);
  const bool in_ldt = c.t == table::ldt || c.t == table::ldt_unusable;
  // 16-byte system descriptors for LLDT/LTR in IA-32e mode (8.2.3).
  const unsigned bytes = c.long64 && (c.o == op::lldt || c.o == op::ltr) ? 16 : 8;
  const bool within = c.t == table::ldt || (c.t == table::gdt_8 && bytes == 8) || c.t == table::gdt_16;
  const auto x = x86::vector::gp;
  switch (c.o) {
    case op::mov_ss:
      // "IF segment selector is NULL THEN #GP(0)"; 64-bit mode: #GP(0) for a null selector
      // "when CPL = 3" or "when CPL < 3 and CPL != RPL".
      if (null) return c.long64 && c.cpl != 3 && c.rpl == c.cpl ? expected{.null_load = true} : fault(x, 0);
      // "IF segment selector index is outside descriptor table limits OR segment selector's
      // RPL != CPL OR segment is not a writable data segment OR DPL != CPL THEN #GP(selector)";
      // "IF segment not marked present THEN #SS(selector)".
      if (!within || c.rpl != c.cpl || !writable || c.dpl != c.cpl) return fault(x, sel_ec);
      if (!c.p) return fault(x86::vector::ss, sel_ec);
      return {.loads = true};
    case op::mov_ds:
      // "IF DS, ES, FS, or GS is loaded with NULL selector THEN SegmentRegister <- segment selector".
      if (null) return {.null_load = true};
      // "... outside descriptor table limits OR segment is not a data or readable code segment
      // OR ((segment is a data or nonconforming code segment) AND ((RPL > DPL) or (CPL > DPL)))
      // THEN #GP(selector)"; "IF segment not marked present THEN #NP(selector)".
      if (!within || !readable || (!conforming && (c.rpl > c.dpl || c.cpl > c.dpl))) return fault(x, sel_ec);
      if (!c.p) return fault(x86::vector::np, sel_ec);
      return {.loads = true};
    case op::lldt:
      // "#GP(0) If the current privilege level is not 0."; a null selector makes LDTR invalid;
      // "#GP(selector) If the selector operand does not point into the Global Descriptor
      // Table or if the entry in the GDT is not a Local Descriptor Table (LDT) segment
      // descriptor"; "#NP(selector) If the LDT descriptor is not present".
      if (c.cpl != 0) return fault(x, 0);
      if (null) return {.null_load = true};
      if (in_ldt || !within || c.s || c.type != 2) return fault(x, sel_ec);
      if (!c.p) return fault(x86::vector::np, sel_ec);
      return {.loads = true};
    case op::ltr:
      // "#GP(0) If the current privilege level is not 0"; "IF SRC is a NULL selector THEN
      // #GP(0)"; "IF SRC(Offset) > descriptor table limit OR IF SRC(type) != global THEN
      // #GP(segment selector)"; "IF segment descriptor is not for an available TSS THEN
      // #GP(segment selector)" (types 1 and 9; 16-bit TSSs do not exist in IA-32e mode,
      // Vol. 3A Table 3-2); "IF segment descriptor is not present THEN #NP(segment selector)".
      if (c.cpl != 0 || null) return fault(x, 0);
      if (in_ldt || !within || c.s || !(c.type == 9 || (c.type == 1 && !c.long64))) return fault(x, sel_ec);
      if (!c.p) return fault(x86::vector::np, sel_ec);
      return {.loads = true};
    case op::verr:
    case op::verw: {
      // "IF SRC(Offset) > (GDTR(Limit) or (LDTR(Limit)) THEN ZF <- 0"; "IF
      // SegmentDescriptor(DescriptorType) = 0 (* System segment *) or
      // (SegmentDescriptor(Type) != conforming code segment) and (CPL > DPL) or (RPL > DPL)
      // THEN ZF <- 0 ELSE IF ((Instruction = VERR) and (Segment readable)) or ((Instruction =
      // VERW) and (Segment writable)) THEN ZF <- 1". Null selectors and an invalid LDT give
      // ZF = 0; no check of the present bit.
      const bool reachable = !null && c.t != table::ldt_unusable && (c.t == table::ldt || c.t != table::gdt_short);
      const bool priv = conforming || (c.cpl <= c.dpl && c.rpl <= c.dpl);
      return {.zf = reachable && c.s && priv && (c.o == op::verr ? readable : writable)};
    }
  }
  return {};
}

// The guest: GDT, LDT and a data word at fixed addresses (linear = physical in 32-bit
// protected mode; mapped by 4-level paging in 64-bit mode).
struct layout {
  std::uint64_t gdt_lin, gdt_phys, ldt_lin, ldt_phys, data_lin, data_phys;
};
constexpr layout flat{0x8000, 0x8000, 0x9000, 0x9000, 0x7000, 0x7000};
constexpr layout paged{0x50'0000, 0x13'0000, 0x51'0000, 0x14'0000, 0x60'0000, 0x12'0000};

std::vector<std::uint8_t> encode_op(op o, bool mem) {
  // ModRM: mod 11 rm 0 (AX) or mod 00 rm 0 ([rAX]); reg = the segment register (DS 3,
  // SS 2) for 8E, the /digit for 0F 00 (LLDT /2, LTR /3, VERR /4, VERW /5).
  const auto modrm = [mem](unsigned reg) { return static_cast<std::uint8_t>((mem ? 0x00 : 0xc0) | (reg << 3)); };
  switch (o) {
    case op::mov_ds: return {0x8e, modrm(3)};
    case op::mov_ss: return {0x8e, modrm(2)};
    case op::lldt: return {0x0f, 0x00, modrm(2)};
    case op::ltr: return {0x0f, 0x00, modrm(3)};
    case op::verr: return {0x0f, 0x00, modrm(4)};
    case op::verw: return {0x0f, 0x00, modrm(5)};
  }
  return {};
}

struct runner {
  guest g;
  context base_ctx{};
  layout at{};
  bool long64;
  explicit runner(bool l) : long64(l) {
    if (long64) {
      g.long_mode();
      at = paged;
      // User pages for the code and the memory operand: the cases run at CPL 0 to 3.
      g.map(guest::code, guest::code_phys, pte_p | pte_rw | hvkit::test::pte_us);
      g.map(at.gdt_lin, at.gdt_phys, pte_p | pte_rw);
      g.map(at.ldt_lin, at.ldt_phys, pte_p | pte_rw);
      g.map(at.data_lin, at.data_phys, pte_p | pte_rw | hvkit::test::pte_us);
    } else {
      g.protected32();
      at = flat;
    }
    base_ctx = g.ctx;
  }
  struct result {
    outcome o;
    context after;
    std::uint64_t table_entry;  // the descriptor's first 8 bytes afterwards
  };
  result run(const case_& c, bool null, bool mem) {
    g.ctx = base_ctx;
    g.ctx.cpl = static_cast<std::uint8_t>(c.cpl);
    g.ctx.gdtr = descriptor_table{at.gdt_lin, static_cast<std::uint16_t>(c.t == table::gdt_short ? 0x26 : c.t == table::gdt_8 ? 0x27 : 0x2f)};
    g.ctx.ldtr = segment{0x38, at.ldt_lin, 0x17, segment_ar{c.t == table::ldt_unusable ? 0x1'0082u : 0x82u}};
    const bool in_ldt = c.t == table::ldt || c.t == table::ldt_unusable;
    const std::uint64_t slot = in_ldt ? at.ldt_phys + 0x10 : at.gdt_phys + 0x20;
    g.wr64(at.ldt_phys + 0x10, 0);
    g.wr64(at.gdt_phys + 0x20, 0);
    g.wr64(slot, encode(c.type, c.s, c.dpl, c.p));
    g.wr64(slot + 8, 0);  // the upper half of a 16-byte descriptor: base 63:32 = 0, type 0
    const std::uint16_t sel = static_cast<std::uint16_t>(null ? c.rpl : (in_ldt ? 0x14 : 0x20) | c.rpl);
    if (mem) {
      g.put(at.data_phys, {static_cast<std::uint8_t>(sel), static_cast<std::uint8_t>(sel >> 8)});
      g.ctx.gpr[0] = at.data_lin;
    } else {
      g.ctx.gpr[0] = 0xdead'0000u | sel;  // only the low 16 bits are the selector
    }
    const auto bytes = encode_op(c.o, mem);
    const std::uint64_t code_at = long64 ? guest::code_phys : g.ctx.rip;
    for (std::size_t i = 0; i < bytes.size(); ++i) g.mem[code_at + i] = bytes[i];
    const outcome o = g.run();
    return {o, g.ctx, g.rd64(slot)};
  }
};

std::string describe(const case_& c, bool null, bool mem) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "op %d %s cpl %u rpl %u S %d type %u dpl %u P %d table %d null %d mem %d", int(c.o),
                c.long64 ? "64-bit" : "32-bit", c.cpl, c.rpl, int(c.s), c.type, c.dpl, int(c.p), int(c.t), int(null),
                int(mem));
  return buf;
}

// Checks one case; returns false (with a failure) on a mismatch.
bool check(runner& r, const case_& c, bool null, bool mem) {
  const expected e = model(c, null);
  const auto got = r.run(c, null, mem);
  const std::uint64_t before = encode(c.type, c.s, c.dpl, c.p);
  const auto& o = got.o;
  std::string why;
  if (e.fault) {
    if (o.kind != outcome_kind::exception || o.vector != e.v || o.error_code != e.ec)
      why = "expected fault " + std::to_string(int(e.v)) + "(" + std::to_string(e.ec) + "), got kind " +
            std::to_string(int(o.kind)) + " vector " + std::to_string(int(o.vector)) + " ec " + std::to_string(o.error_code);
    else if (got.table_entry != before)
      why = "a faulting instruction wrote the descriptor";
  } else if (!o.is_done()) {
    why = "expected done, got kind " + std::to_string(int(o.kind)) + " vector " + std::to_string(int(o.vector)) +
          " ec " + std::to_string(o.error_code);
  } else {
    const std::uint16_t sel = static_cast<std::uint16_t>(null ? c.rpl : (c.t == table::ldt ? 0x14 : 0x20) | c.rpl);
    // The access rights as loaded: the descriptor's byte 5 and bits 55:52 (Vol. 3C 25.4.1
    // layout, which segment_ar uses), with the accessed bit (code/data) or the busy bit
    // (TSS) set by the load.
    const std::uint32_t ar = c.type | (c.s << 4) | (c.dpl << 5) | (c.p << 7) | (1u << 14);
    const segment* loaded = nullptr;
    std::uint32_t want_ar = ar;
    std::uint64_t want_entry = before;
    switch (c.o) {
      case op::mov_ds: loaded = &got.after[sreg::ds]; want_ar |= 1; want_entry |= 1ull << 40; break;
      case op::mov_ss: loaded = &got.after[sreg::ss]; want_ar |= 1; want_entry |= 1ull << 40; break;
      case op::lldt: loaded = &got.after.ldtr; break;
      case op::ltr: loaded = &got.after.tr; want_ar |= 2; want_entry |= 2ull << 40; break;
      case op::verr:
      case op::verw:
        if (got.after.rflags.test(x86::rflags::zf) != e.zf) why = e.zf ? "ZF 0, expected 1" : "ZF 1, expected 0";
        break;
    }
    if (loaded != nullptr && e.null_load) {
      if (loaded->selector != sel || !loaded->ar.test(segment_ar::unusable)) why = "null selector not loaded as unusable";
    } else if (loaded != nullptr) {
      if (!e.loads) why = "loaded, expected no load";
      else if (loaded->selector != sel || loaded->base != desc_base || loaded->limit != desc_limit || loaded->ar.raw() != want_ar)
        why = "loaded sel " + std::to_string(loaded->selector) + " base " + std::to_string(loaded->base) + " limit " +
              std::to_string(loaded->limit) + " ar " + std::to_string(loaded->ar.raw()) + ", expected ar " +
              std::to_string(want_ar);
      else if (got.table_entry != want_entry)
        why = "descriptor in memory " + std::to_string(got.table_entry) + ", expected " + std::to_string(want_entry);
      else if (o.mov_ss_shadow != (c.o == op::mov_ss))
        why = "MOV SS blocking wrong";
    }
  }
  if (!why.empty()) ADD_FAILURE() << describe(c, null, mem) << ": " << why;
  return why.empty();
}

TEST(DescriptorRules, MovSregLldtLtrVerrVerwAgainstTheSdmModel) {
  unsigned long long n = 0, failures = 0;
  for (bool long64 : {false, true}) {
    runner r(long64);
    for (op o : ops)
      for (table t : tables)
        for (unsigned cpl = 0; cpl < 4; ++cpl)
          for (unsigned rpl = 0; rpl < 4; ++rpl) {
            // The null selector (index 0 of the GDT), once per CPL/RPL.
            if (t == table::gdt_16) {
              const case_ c{o, long64, cpl, rpl, 0, 0, false, false, t};
              ++n;
              if (!check(r, c, true, (cpl + rpl) % 2 == 1) && ++failures > 20) return;
            }
            for (unsigned s = 0; s < 2; ++s)
              for (unsigned type = 0; type < 16; ++type)
                for (unsigned dpl = 0; dpl < 4; ++dpl)
                  for (unsigned p = 0; p < 2; ++p) {
                    const case_ c{o, long64, cpl, rpl, type, dpl, s == 1, p == 1, t};
                    ++n;
                    // Register and memory operands alternate over the cases.
                    if (!check(r, c, false, (type + dpl + p + cpl) % 2 == 1) && ++failures > 20) return;
                  }
          }
  }
  std::printf("descriptor rules: %llu cases against the SDM model\n", n);
  EXPECT_EQ(failures, 0u);
}

// IA-32e mode's 16-byte LDT and TSS descriptors: "#GP(selector) If ... the type field of the
// upper 8 bytes is not 0" (the upper half's bits 12:8 of its second dword, Vol. 3A Figure
// 8-4), and a non-canonical base is #GP(selector) (LLDT/LTR, 64-bit mode exceptions).
TEST(DescriptorRules, SixteenByteSystemDescriptorUpperHalf) {
  runner r(true);
  for (op o : {op::lldt, op::ltr}) {
    const unsigned type = o == op::lldt ? 2 : 9;
    const case_ c{o, true, 0, 0, type, 0, false, true, table::gdt_16};
    // A valid upper half loads (the base's bits 63:32 come from it).
    auto ok = r.run(c, false, false);
    ASSERT_TRUE(ok.o.is_done()) << int(o);
    for (std::uint64_t upper : {std::uint64_t{1} << 40, std::uint64_t{0x1f} << 40, std::uint64_t{0x0000'8000}}) {
      r.g.ctx = r.base_ctx;
      r.g.ctx.gdtr = descriptor_table{paged.gdt_lin, 0x2f};
      r.g.wr64(paged.gdt_phys + 0x20, encode(type, false, 0, true));
      r.g.wr64(paged.gdt_phys + 0x28, upper);
      r.g.ctx.gpr[0] = 0x20;
      const auto bytes = encode_op(o, false);
      for (std::size_t i = 0; i < bytes.size(); ++i) r.g.mem[guest::code_phys + i] = bytes[i];
      const auto out = r.g.run();
      EXPECT_EQ(out.kind, outcome_kind::exception) << int(o) << " upper " << upper;
      EXPECT_EQ(out.vector, x86::vector::gp) << int(o) << " upper " << upper;
      EXPECT_EQ(out.error_code, 0x20u) << int(o) << " upper " << upper;
    }
  }
}

}  // namespace
