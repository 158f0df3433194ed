// SPDX-License-Identifier: MIT
// emulate/shadow_write.hpp: a guest kernel's write to its own (write-protected) page table,
// taken as a host #PF on the shadow tables, answered emulate_protected by the shadow MMU and
// carried out by emulate_on_shadow() from the real instruction bytes. The oracle is the
// instruction's effect typed from the SDM (Vol. 2: MOV, XCHG, BTR, STOS, MOVS, CMPXCHG,
// CMPXCHG8B) applied to a second copy of guest memory, and the library's guest walker over
// that copy: after the emulation, every access through the shadow tables (the "hardware" walk plus the MMU's
// answers, tests/paging/shadow_harness.hpp) must give what the walker gives, and both guest
// memories must be equal byte for byte (the entries written, A/D flags).
#include <cstdint>
#include <initializer_list>

#include <gtest/gtest.h>

#include <hvkit/emulate/shadow_write.hpp>

#include "../paging/shadow_harness.hpp"

namespace {

using namespace shadow_harness;
namespace emulate = hvkit::emulate;

constexpr std::uint64_t P = 1, RW = 2, US = 4, A = 32, D = 64;

// A 4-level guest (PML4 frame 1, PDPT 2, PD 3, PT 4): va0 + i * 4096 -> PTE i -> frame 8 + i
// (user, writable, A and D set). PTE 20 maps the page table itself (frame 4) at `alias`
// (supervisor, writable: how a kernel reaches its PTEs); PTE 21 the code page (frame 20),
// PTE 22 a source page (frame 21) for string copies. Their A/D flags are preset, so the
// emulated instruction's own walks change no A/D flag and the oracle need not model them.
constexpr std::uint64_t va0 = 0x0040'0000;
constexpr std::uint64_t alias = va0 + 20 * 4096, code = va0 + 21 * 4096, source = va0 + 22 * 4096;
constexpr std::uint64_t pt = 0x4000, code_frame = 20, source_frame = 21;
constexpr unsigned data_ptes = 8;

std::uint64_t data_pte(unsigned i) { return P | RW | US | A | D | ((8ull + i) << 12); }

struct fixture {
  machine mc;
  emulate::flat_ram ram{mc.sut.data(), mc.sut.size()};
  emulate::null_platform plat;
  emulate::context ctx{};

  // 4-level paging in 64-bit mode, or (`pae`) PAE paging in 32-bit protected mode with the
  // PDPT in frame 1 (entry 0 -> the PD in frame 3; SDM 4.4.1: a PDPTE has no R/W, U/S or A).
  explicit fixture(bool pae = false) {
    if (pae) {
      mc.write(0x1000, 8, P | 0x3000);
    } else {
      mc.write(0x1000, 8, P | RW | US | A | 0x2000);
      mc.write(0x2000, 8, P | RW | US | A | 0x3000);
    }
    mc.write(0x3000 + 8 * 2, 8, P | RW | US | A | pt);
    for (unsigned i = 0; i < data_ptes; ++i) mc.write(pt + 8 * i, 8, data_pte(i));
    mc.write(pt + 8 * 20, 8, P | RW | A | D | pt);
    mc.write(pt + 8 * 21, 8, P | A | (code_frame << 12));
    mc.write(pt + 8 * 22, 8, P | A | (source_frame << 12));
    const x86::cr0 cr0{0x8001'0033};  // PG WP NE ET MP PE
    const x86::cr4 cr4 = x86::cr4::pae;
    const x86::efer efer = pae ? x86::efer::nxe : x86::efer::lme | x86::efer::lma | x86::efer::nxe;
    mc.load(paging::make_cpu_role(cr0, cr4, efer), x86::gpa{0x1000});
    // 64-bit mode (SDM 3.4.5, 5.2.1: CS.L = 1) or 32-bit protected mode (CS.D = 1), CPL 0,
    // flat segments.
    ctx.cr0 = cr0;
    ctx.cr4 = cr4;
    ctx.efer = efer;
    ctx.cr3 = x86::cr3{0x1000};
    for (auto& s : ctx.seg) s = emulate::segment{0x10, 0, 0xffff'ffff, emulate::segment_ar{0xc093}};
    ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff, emulate::segment_ar{pae ? 0xc09bu : 0xa09bu}};
    ctx.rip = code;
    // Every data page is used once (user read and write), so their shadow leaves exist
    // and the page table (frame 4) is mirrored, hence write-protected.
    for (unsigned i = 0; i < data_ptes; ++i) {
      check_page(i);
      check_page(i, 6);
    }
  }
  static paging::walk_request req(std::uint64_t va, std::uint64_t pfec) {
    paging::walk_request r{};
    r.linear = x86::gva{va};
    r.access = x86::pfec{pfec};
    return r;
  }
  // The shadow side against the walker for an access to data page i; returns the shadow side.
  outcome check_page(unsigned i, std::uint64_t pfec = 4) {
    const auto r = req(va0 + i * 4096 + 0x18, pfec);
    const outcome s = mc.via_shadow(r), o = mc.via_walker(r);
    EXPECT_TRUE(same(s, o)) << "page " << i << " access " << pfec << ": shadow " << describe(s) << ", walker "
                            << describe(o);
    return s;
  }
  void check_all() {
    for (unsigned i = 0; i < data_ptes; ++i) {
      check_page(i, 4);
      check_page(i, 6);
    }
    EXPECT_TRUE(mc.memories_equal()) << "guest memory differs (the emulated write or A/D flags)";
  }
  void code_bytes(std::initializer_list<std::uint8_t> bytes) {
    std::uint64_t a = code_frame << 12;
    for (const auto b : bytes) mc.write(a++, 1, b);
  }
  // The write the guest kernel makes first reaches the hardware: the host walk over the
  // shadow tables refuses it (frame 4 is write-protected), and the shadow MMU answers
  // emulate_protected with the entry's guest-physical address.
  void expect_protected_fault(std::uint64_t linear) {
    EXPECT_FALSE(mc.hardware(req(linear, 2)).has_value()) << "a mirrored page table is writable";
    paging::flat_memory m(mc.sut.data(), mc.sut.size());
    const shadow::fault_answer a = mc.mmu.page_fault(m, req(linear, 2));
    EXPECT_EQ(a.action, shadow::fault_action::emulate_protected);
    EXPECT_EQ(a.gpa.value(), pt + (linear - alias));
  }
  emulate::shadow_emulation run() { return emulate::emulate_on_shadow(mc.mmu, ctx, ram, plat); }
  // The oracle's copy of guest memory gets the instruction's effect as typed by the test.
  void oracle_store(std::uint64_t gpa, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) mc.oracle[gpa + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

TEST(shadow_write, mov_rewrites_a_pte) {
  // 48 89 07: MOV [RDI], RAX (SDM Vol. 2B MOV, REX.W + 89 /r): how a 64-bit kernel sets a PTE.
  fixture f;
  f.code_bytes({0x48, 0x89, 0x07});
  f.ctx.gpr[7] = alias + 8 * 3;                                   // RDI: PTE 3
  f.ctx.gpr[0] = P | RW | US | A | D | (27ull << 12);             // RAX: now frame 27
  f.expect_protected_fault(alias + 8 * 3);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 3);
  EXPECT_EQ(r.bytes_written, 8u);
  EXPECT_EQ(r.flush, shadow::host_flush::all);  // a present shadow leaf was zapped
  f.oracle_store(pt + 8 * 3, P | RW | US | A | D | (27ull << 12));
  f.check_all();
  EXPECT_EQ(f.check_page(3).host, host_ram + (27ull << 12) + 0x18);
}

TEST(shadow_write, xchg_clears_a_pte_and_returns_the_old_one) {
  // 48 87 07: XCHG [RDI], RAX (SDM Vol. 2B XCHG: "the processor's locking protocol is
  // automatically implemented"): how x86-64 Linux clears a PTE (ptep_get_and_clear).
  fixture f;
  f.code_bytes({0x48, 0x87, 0x07});
  f.ctx.gpr[7] = alias + 8 * 5;
  f.ctx.gpr[0] = 0;
  f.expect_protected_fault(alias + 8 * 5);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.gpr[0], data_pte(5));  // the old entry, A and D included
  EXPECT_EQ(f.ctx.rip, code + 3);
  f.oracle_store(pt + 8 * 5, 0);
  f.check_all();
  // SDM 4.7: a not-present translation: P = 0; a user read: U/S = 1 -> error code 0x4.
  const outcome o = f.check_page(5);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.fault.error_code.hardware_bits().raw(), 0x4u);
}

TEST(shadow_write, lock_btr_write_protects_a_pte) {
  // F0 48 0F BA 37 01: LOCK BTR QWORD [RDI], 1 (SDM Vol. 2A BTR, REX.W + 0F BA /6 ib): how
  // Linux clears _PAGE_RW (clear_bit). The user write that then follows is the guest's own
  // #PF: P = 1, W/R = 1, U/S = 1 -> 0x7 (SDM 4.7).
  fixture f;
  f.code_bytes({0xf0, 0x48, 0x0f, 0xba, 0x37, 0x01});
  f.ctx.gpr[7] = alias + 8 * 1;
  f.expect_protected_fault(alias + 8 * 1);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 6);
  EXPECT_TRUE(f.ctx.rflags.test(x86::rflags::cf));  // CF = the old bit (R/W was 1)
  f.oracle_store(pt + 8 * 1, data_pte(1) & ~RW);
  f.check_all();
  const outcome o = f.check_page(1, 6);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.fault.error_code.hardware_bits().raw(), 0x7u);
}

TEST(shadow_write, rep_stosq_clears_several_ptes) {
  // F3 48 AB: REP STOSQ (SDM Vol. 2B STOS: "the (E)CX register ... number of times"): four
  // entries (PTEs 2-5) zeroed by one instruction; PTEs 1 and 6 around them stay.
  fixture f;
  f.code_bytes({0xf3, 0x48, 0xab});
  f.ctx.gpr[7] = alias + 8 * 2;
  f.ctx.gpr[1] = 4;  // RCX
  f.ctx.gpr[0] = 0;
  f.expect_protected_fault(alias + 8 * 2);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.gpr[1], 0u);
  EXPECT_EQ(f.ctx.gpr[7], alias + 8 * 6);
  EXPECT_EQ(f.ctx.rip, code + 3);
  EXPECT_EQ(r.bytes_written, 32u);
  for (unsigned i = 2; i <= 5; ++i) f.oracle_store(pt + 8 * i, 0);
  f.check_all();
  for (unsigned i = 2; i <= 5; ++i) EXPECT_FALSE(f.check_page(i).ok);
  EXPECT_TRUE(f.check_page(1).ok);
  EXPECT_TRUE(f.check_page(6).ok);
}

TEST(shadow_write, rep_movsq_copies_ptes_from_another_page) {
  // F3 48 A5: REP MOVSQ: three entries copied from the source page (read-only, not a page
  // table) over PTEs 4-6: data pages 4-6 now map frames 25, 26 and 27, read-only.
  fixture f;
  f.code_bytes({0xf3, 0x48, 0xa5});
  for (unsigned i = 0; i < 3; ++i)
    f.mc.write((source_frame << 12) + 8 * i, 8, P | US | A | ((25ull + i) << 12));
  f.ctx.gpr[6] = source;          // RSI
  f.ctx.gpr[7] = alias + 8 * 4;   // RDI
  f.ctx.gpr[1] = 3;
  f.expect_protected_fault(alias + 8 * 4);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 3);
  for (unsigned i = 0; i < 3; ++i) f.oracle_store(pt + 8 * (4 + i), P | US | A | ((25ull + i) << 12));
  f.check_all();
  EXPECT_EQ(f.check_page(5).host, host_ram + (26ull << 12) + 0x18);
  EXPECT_FALSE(f.check_page(5, 6).ok);  // read-only now: a user write is the guest's #PF
}

TEST(shadow_write, a_pae_kernel_writes_a_pte_in_two_halves) {
  // 89 47 04: MOV [EDI+4], EAX, then 89 0F: MOV [EDI], ECX (SDM Vol. 2B MOV, 89 /r, 32-bit
  // operands): how a 32-bit PAE kernel sets an 8-byte PTE, high half first. Each half is its
  // own protected-table fault; between them the entry holds the new high and the old low
  // half, and the shadow must give what the guest's tables give at that point too.
  fixture f(true);
  f.code_bytes({0x89, 0x47, 0x04, 0x89, 0x0f});
  const std::uint64_t next = P | RW | US | A | D | (1ull << 63) | (26ull << 12);  // XD, frame 26
  f.ctx.gpr[7] = alias + 8 * 6;
  f.ctx.gpr[0] = next >> 32;
  f.ctx.gpr[1] = next & 0xffff'ffffu;
  f.expect_protected_fault(alias + 8 * 6 + 4);
  auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 3);
  EXPECT_EQ(r.bytes_written, 4u);
  f.oracle_store(pt + 8 * 6, (next & ~0xffff'ffffull) | (data_pte(6) & 0xffff'ffffu));
  f.check_all();
  EXPECT_FALSE(f.check_page(6, 4 | 16).ok);  // XD is in place: a user fetch faults (0x15)
  f.expect_protected_fault(alias + 8 * 6);
  r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 5);
  f.oracle_store(pt + 8 * 6, next);
  f.check_all();
  EXPECT_EQ(f.check_page(6).host, host_ram + (26ull << 12) + 0x18);
}

TEST(shadow_write, lock_cmpxchg_replaces_a_pte_only_if_unchanged) {
  // F0 48 0F B1 0F: LOCK CMPXCHG [RDI], RCX (SDM Vol. 2A CMPXCHG, REX.W + 0F B1 /r): how
  // x86-64 Linux updates a live PTE (ptep_cmpxchg / try_cmpxchg64). RAX holds the entry the
  // kernel read: equal, so "the second operand (source operand) is loaded into the
  // destination operand" and ZF = 1.
  fixture f;
  f.code_bytes({0xf0, 0x48, 0x0f, 0xb1, 0x0f});
  const std::uint64_t next = P | US | A | D | (27ull << 12);  // frame 27, read-only
  f.ctx.gpr[7] = alias + 8 * 3;
  f.ctx.gpr[0] = data_pte(3);
  f.ctx.gpr[1] = next;
  f.expect_protected_fault(alias + 8 * 3);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 5);
  EXPECT_TRUE(f.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(f.ctx.gpr[0], data_pte(3));  // RAX unchanged on success
  EXPECT_EQ(r.bytes_written, 8u);
  EXPECT_EQ(r.flush, shadow::host_flush::all);  // a present shadow leaf was zapped
  f.oracle_store(pt + 8 * 3, next);
  f.check_all();
  EXPECT_EQ(f.check_page(3).host, host_ram + (27ull << 12) + 0x18);
  EXPECT_FALSE(f.check_page(3, 6).ok);  // read-only now: a user write is the guest's #PF
}

TEST(shadow_write, a_failed_lock_cmpxchg_loads_rax_and_writes_the_pte_back) {
  // The same LOCK CMPXCHG with a stale RAX (another CPU set A/D meanwhile): ZF = 0, "the
  // destination operand is loaded into the AL, AX, EAX or RAX register", and "The
  // destination operand is written back if the comparison fails" (SDM Vol. 2A CMPXCHG): a
  // write of the entry's own value, reported to the MMU; the entry and translation stay.
  fixture f;
  f.code_bytes({0xf0, 0x48, 0x0f, 0xb1, 0x0f});
  f.ctx.gpr[7] = alias + 8 * 2;
  f.ctx.gpr[0] = data_pte(2) & ~(A | D);
  f.ctx.gpr[1] = 0;
  f.expect_protected_fault(alias + 8 * 2);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 5);
  EXPECT_FALSE(f.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(f.ctx.gpr[0], data_pte(2));
  EXPECT_EQ(r.bytes_written, 8u);
  f.check_all();  // the oracle's memory was not touched: the entry is unchanged
  EXPECT_EQ(f.check_page(2).host, host_ram + (10ull << 12) + 0x18);
}

TEST(shadow_write, a_pae_kernel_sets_a_pte_with_lock_cmpxchg8b) {
  // F0 0F C7 0F: LOCK CMPXCHG8B [EDI] (SDM Vol. 2A CMPXCHG8B, 0F C7 /1 m64): how a 32-bit
  // PAE kernel replaces an 8-byte PTE in one access (set_64bit / cmpxchg64). EDX:EAX = the
  // old entry, ECX:EBX = the new one: equal, so ZF = 1 and ECX:EBX is stored.
  fixture f(true);
  f.code_bytes({0xf0, 0x0f, 0xc7, 0x0f});
  const std::uint64_t next = P | RW | US | A | D | (1ull << 63) | (26ull << 12);  // XD, frame 26
  f.ctx.gpr[7] = alias + 8 * 6;
  f.ctx.gpr[0] = data_pte(6) & 0xffff'ffffu;
  f.ctx.gpr[2] = data_pte(6) >> 32;
  f.ctx.gpr[3] = next & 0xffff'ffffu;
  f.ctx.gpr[1] = next >> 32;
  f.expect_protected_fault(alias + 8 * 6);
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(f.ctx.rip, code + 4);
  EXPECT_TRUE(f.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(r.bytes_written, 8u);
  f.oracle_store(pt + 8 * 6, next);
  f.check_all();
  EXPECT_EQ(f.check_page(6).host, host_ram + (26ull << 12) + 0x18);
  EXPECT_FALSE(f.check_page(6, 4 | 16).ok);  // XD is in place: a user fetch faults
}

TEST(shadow_write, a_write_outside_the_page_tables_zaps_nothing) {
  // MOV [RDI], RAX into an ordinary data page: emulated (e.g. an emulate_access answer) and
  // reported, but no shadow entry mirrors it: no host flush.
  fixture f;
  f.code_bytes({0x48, 0x89, 0x07});
  f.ctx.gpr[7] = va0 + 7 * 4096 + 0x40;
  f.ctx.gpr[0] = 0x1122'3344'5566'7788;
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_done());
  EXPECT_EQ(r.flush, shadow::host_flush::none);
  f.oracle_store(((8ull + 7) << 12) + 0x40, 0x1122'3344'5566'7788);
  f.check_all();
}

TEST(shadow_write, a_faulting_write_is_the_guests_pf_and_changes_nothing) {
  // MOV [RDI], RAX at CPL 3 into the supervisor-only alias: the guest's own #PF (SDM 4.6.1:
  // a user-mode write needs U/S = 1 at every level; 4.7: P = 1, W/R = 1, U/S = 1 -> 0x7,
  // CR2 = the address), and guest memory and the shadow stay as they were.
  fixture f;
  f.code_bytes({0x48, 0x89, 0x07});
  f.mc.guest_store(pt + 8 * 21, 8, P | US | A | (code_frame << 12));  // a user code page
  f.ctx.cpl = 3;
  f.ctx[emulate::sreg::cs].selector = 0x1b;
  f.ctx[emulate::sreg::cs].ar = emulate::segment_ar{0xa0fb};
  f.ctx[emulate::sreg::ss].ar = emulate::segment_ar{0xc0f3};
  f.ctx[emulate::sreg::ds].ar = emulate::segment_ar{0xc0f3};
  f.ctx.gpr[7] = alias + 8 * 2;
  f.ctx.gpr[0] = 0;
  const auto r = f.run();
  ASSERT_TRUE(r.emulated.is_page_fault());
  EXPECT_EQ(r.emulated.page_fault_error_code().hardware_bits().raw(), 0x7u);
  EXPECT_EQ(r.emulated.cr2, alias + 8 * 2);
  EXPECT_EQ(r.bytes_written, 0u);
  EXPECT_EQ(f.ctx.rip, code);
  f.check_all();
}

}  // namespace
