// SPDX-License-Identifier: MIT
// libFuzzer target: a guest on the shadow MMU beside the same guest on the walker alone
// (tests/paging/shadow_harness.hpp). The input drives random guest-table edits (emulated
// writes, reported with table_written(), and real MOV instructions of the guest kernel run by
// emulate::emulate_on_shadow() through an alias of the tables), CR0.WP / CR4.SMEP / CR4.SMAP / EFER.NXE writes
// through evaluate_cr_write / cr_write_actions and control_registers_written(), MOV to CR3
// between two address spaces, INVLPG, and accesses, on 32-bit, PAE, 4-level and 5-level guests, with write flooding off or
// on; every access must give the walker's verdict, error code, CR2 and host frame, and guest memory (A/D flags) must stay
// equal.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <hvkit/emulate/shadow_write.hpp>
#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/shadow/invalidate.hpp>

#include "../tests/paging/shadow_harness.hpp"

namespace {

using namespace shadow_harness;
namespace emulate = hvkit::emulate;

struct input {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

constexpr std::uint64_t vas[] = {0x0, 0x1000, 0x3000, 0x20'0000, 0x20'1000, 0x4000'0000, 0x4020'1000, 0x7fe0'0000};
constexpr unsigned idxs[] = {0, 1, 2, 3, 0x100, 0x101, 0x1ff, 0x3ff};

[[noreturn]] void fail(const char* what, const outcome& s, const outcome& o) {
  std::fprintf(stderr, "shadow mismatch (%s)\n shadow: %s\n walker: %s\n", what, describe(s).c_str(),
               describe(o).c_str());
  std::abort();
}

// Guest memory as the harness has it: data accesses see frames 0-27 as RAM (28-31 are MMIO,
// as the shadow MMU's frame map says); page walks read every frame of the buffer, as the
// MMU's own walks and the oracle's do.
struct split_ram {
  emulate::flat_ram data, all;
  bool read(x86::gpa a, std::uint8_t* out, std::size_t n) const { return data.read(a, out, n); }
  bool write(x86::gpa a, const std::uint8_t* in, std::size_t n) { return data.write(a, in, n); }
  hvkit::result<bool, paging::memory_error> cmpxchg(x86::gpa a, unsigned b, std::uint64_t e, std::uint64_t d) {
    return data.cmpxchg(a, b, e, d);
  }
  hvkit::result<std::uint32_t, paging::memory_error> read32(x86::gpa a) const { return all.read32(a); }
  hvkit::result<std::uint64_t, paging::memory_error> read64(x86::gpa a) const { return all.read64(a); }
  hvkit::result<bool, paging::memory_error> cmpxchg32(x86::gpa a, std::uint32_t e, std::uint32_t d) {
    return all.cmpxchg32(a, e, d);
  }
  hvkit::result<bool, paging::memory_error> cmpxchg64(x86::gpa a, std::uint64_t e, std::uint64_t d) {
    return all.cmpxchg64(a, e, d);
  }
};

// The guest kernel (CPL 0) executes MOV [rDI], rAX at va 0x1e000 with rDI = `target`: the
// shadow side runs it through emulate::emulate_on_shadow() on `sut`; the oracle walks the
// fetch and the write with the guest walker on `oracle` and stores the bytes the MOV writes
// (4 outside IA-32e mode). Outcome, #PF error code and CR2 must agree.
void emulate_mov(machine& mc, std::uint64_t cr0, std::uint64_t cr4, std::uint64_t efer, bool ia32e,
                 std::uint64_t target, std::uint64_t v) {
  emulate::context ctx{};
  ctx.cr0 = x86::cr0{cr0};
  ctx.cr4 = x86::cr4{cr4};
  ctx.efer = x86::efer{efer};
  for (auto& s : ctx.seg) s = emulate::segment{0x10, 0, 0xffff'ffff, emulate::segment_ar{0xc093}};
  ctx[emulate::sreg::cs] = emulate::segment{0x8, 0, 0xffff'ffff, emulate::segment_ar{ia32e ? 0xa09bu : 0xc09bu}};
  ctx.rip = 0x1e000;
  ctx.gpr[7] = target;
  ctx.gpr[0] = ia32e ? v : v & 0xffff'ffffu;
  const unsigned bytes = ia32e ? 8 : 4;
  split_ram ram{{mc.sut.data(), backed_frames * 4096}, {mc.sut.data(), mc.sut.size()}};
  emulate::null_platform plat;
  const emulate::shadow_emulation r = emulate::emulate_on_shadow(mc.mmu, ctx, ram, plat);
  paging::walk_request f{};
  f.linear = x86::gva{0x1e000};
  f.access = x86::pfec::fetch;
  outcome o = mc.via_walker(f);
  if (o.ok && o.mmio) {  // the code is not in RAM (a table edit remapped it): not emulated
    if (r.emulated.kind != emulate::outcome_kind::unsupported ||
        r.emulated.why != emulate::unsupported_reason::fetch_not_ram)
      fail("emulated MOV: code outside RAM", outcome{}, o);
    if (!mc.memories_equal()) fail("emulated MOV: guest memory", outcome{}, o);
    return;
  }
  if (o.ok) {
    paging::walk_request w{};
    w.linear = x86::gva{target};
    w.access = x86::pfec::write;
    o = mc.via_walker(w);
  }
  if (!o.ok) {
    if (!r.emulated.is_page_fault() ||
        r.emulated.page_fault_error_code().hardware_bits() != o.fault.error_code.hardware_bits() ||
        r.emulated.cr2 != o.fault.linear.value()) {
      std::fprintf(stderr, "emulator: kind %d vector %d error code %#x cr2 %#llx why %d\n",
                   static_cast<int>(r.emulated.kind), static_cast<int>(r.emulated.vector), r.emulated.error_code,
                   static_cast<unsigned long long>(r.emulated.cr2), static_cast<int>(r.emulated.why));
      fail("emulated MOV: the walker faults", outcome{}, o);
    }
  } else if (o.mmio) {
    if (r.emulated.kind != emulate::outcome_kind::needs_mmio) fail("emulated MOV: MMIO", outcome{}, o);
  } else {
    if (!r.emulated.is_done()) {
      std::fprintf(stderr, "emulator: kind %d vector %d error code %#x cr2 %#llx why %d\n",
                   static_cast<int>(r.emulated.kind), static_cast<int>(r.emulated.vector), r.emulated.error_code,
                   static_cast<unsigned long long>(r.emulated.cr2), static_cast<int>(r.emulated.why));
      fail("emulated MOV: the walker allows it", outcome{}, o);
    }
    const std::uint64_t gpa = o.host - host_ram;
    for (unsigned i = 0; i < bytes; ++i) mc.oracle[gpa + i] = static_cast<std::uint8_t>(ctx.gpr[0] >> (8 * i));
  }
  if (!mc.memories_equal()) fail("emulated MOV: guest memory", outcome{}, o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static machine* mcp = new machine();  // one machine (its storage is large), reset per input
  machine& mc = *mcp;
  input in{data, size};
  std::fill(mc.sut.begin(), mc.sut.end(), 0);
  std::fill(mc.oracle.begin(), mc.oracle.end(), 0);
  mc.cache.zap_all();
  const std::uint8_t mb = in.byte();
  const unsigned mode = mb % 3;  // 0 32-bit, 1 PAE, 2 IA-32e: 4-level, or 5-level if bit 6 is set
  const bool four = mode == 2, pae = mode == 1, m32 = mode == 0;
  const bool five = four && (mb & 0x40);
  // Write flooding (shadow_mmu::set_write_flood_threshold()) off or on with threshold 1, 2 or
  // 4: frames the edits keep writing are unprotected; every access must still agree.
  constexpr unsigned flood_thresholds[] = {0, 1, 2, 4};
  mc.mmu.set_write_flood_threshold(flood_thresholds[(mb >> 3) & 3]);
  const unsigned esz = m32 ? 4 : 8;
  // Skeleton: top tables at frames 1 and 5, PDPT 2 (4-level), PD 3, PTs 4 and 6; data 8-27.
  // 5-level: frames 1 and 5 are PML5s whose entries 0 and 1 (PML5 index 0 and 1) both
  // point to the PML4 in frame 7.
  if (five) {
    for (std::uint64_t top : {0x1000u, 0x5000u}) {
      mc.write(top, 8, 0x7007);
      mc.write(top + 8, 8, 0x7007);
    }
    mc.write(0x7000, 8, 0x2007);
  } else if (four) {
    for (std::uint64_t top : {0x1000u, 0x5000u}) mc.write(top, 8, 0x2007);
  }
  if (four) {
    mc.write(0x2000, 8, 0x3007);
    mc.write(0x2008, 8, 0x3007);
  } else if (pae) {
    for (std::uint64_t top : {0x1000u, 0x5000u})
      for (unsigned i = 0; i < 4; ++i) mc.write(top + 8 * i, 8, 0x3001);
  } else {
    for (std::uint64_t top : {0x1000u, 0x5000u}) {
      mc.write(top, 4, 0x4007);
      mc.write(top + 4 * 0x100, 4, 0x6007);
    }
  }
  if (!m32) {
    mc.write(0x3000, 8, 0x4007);
    mc.write(0x3008, 8, 0x6007);
  }
  for (unsigned i = 0; i < 4; ++i) {
    mc.write(0x4000 + esz * i, esz, ((8u + i) << 12) | 0x7);
    mc.write(0x6000 + esz * i, esz, ((12u + i) << 12) | 0x7);
  }
  // The kernel's view of its tables: va 0x10000 + f * 4096 -> table frame f (1-7), supervisor
  // read/write (PTEs 17-23 of the PT in frame 4); its code at va 0x1e000 -> frame 27 (PTE 30).
  for (unsigned f = 1; f <= 7; ++f) mc.write(0x4000 + esz * (16 + f), esz, (std::uint64_t{f} << 12) | 0x3);
  mc.write(0x4000 + esz * 30, esz, (27u << 12) | 0x1);
  if (m32 || pae) {
    mc.write(27 * 4096, 2, 0x0789);  // 89 07: MOV [EDI], EAX
  } else {
    mc.write(27 * 4096, 3, 0x078948);  // 48 89 07: MOV [RDI], RAX
  }
  std::uint64_t cr0 = 0x8001'0031, cr4 = m32 ? 0x10 : five ? 0x1020 : 0x20, efer = four ? 0x500 : 0;
  std::uint64_t cr3 = 0x1000;
  std::uint32_t pkru = 0;
  auto role_of = [&] { return paging::make_cpu_role(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer}); };
  mc.load(role_of(), x86::gpa{cr3});

  while (in.n > 0) {
    const std::uint8_t op = in.byte();
    switch (op % 8) {
      case 1: {  // the kernel's MOV to a table entry through its alias, on the shadow MMU's emulator
        const std::uint8_t a = in.byte(), b = in.byte(), c = in.byte();
        const std::uint64_t frame = 1 + a % 7;
        const unsigned idx = idxs[(a >> 3) % (m32 ? 8 : 7)];
        std::uint64_t v = (b & 0xff) | (std::uint64_t{c & 31u} << 12);
        if (!m32 && (c & 0x80)) v |= 1ull << 63;
        const std::uint64_t target = 0x10000 + frame * 4096 + esz * idx;
        emulate_mov(mc, cr0, cr4, efer, !(m32 || pae), target, v);
        break;
      }
      case 0: {  // a guest paging-structure edit (an emulated store)
        const std::uint8_t a = in.byte(), b = in.byte(), c = in.byte();
        const std::uint64_t frame = 1 + a % (five ? 7 : 6);
        const unsigned idx = idxs[(a >> 3) % (m32 ? 8 : 7)];
        std::uint64_t v = b & 0xff;  // P RW US PWT PCD A D PS
        const std::uint64_t target = c & 31;  // frame 0: large pages at 0 (2 MiB, 4 MiB, 1 GiB) are valid
        v |= target << 12;
        if (!m32 && (c & 0x80)) v |= 1ull << 63;  // XD (reserved without NXE: RSVD faults)
        if (four && (c & 0x40)) v |= std::uint64_t{(a >> 6) & 3u} << 59;  // protection key 0-3
        if (pae && (frame == 1 || frame == 5) && idx < 4) v &= ~(0x1e6ull | (1ull << 63));  // PDPTE: no reserved bits
        mc.guest_store(frame * 4096 + esz * idx, esz, v);
        break;
      }
      case 2:
      case 3:
      case 4: {  // an access
        const std::uint8_t a = in.byte();
        paging::walk_request q{};
        q.linear = x86::gva{vas[a & 7] + ((a >> 3) & 3) * 0x408 + (five && (a & 0x20) ? 1ull << 48 : 0)};
        const std::uint64_t kinds[] = {0, 2, 16, 2};
        const std::uint64_t modes[] = {4, 0, 0, 1ull << 48};
        q.access = x86::pfec{kinds[(op >> 3) & 3] | modes[(op >> 5) & 3]};
        q.rflags = x86::rflags{(op & 0x80) ? (1ull << 18) : 0};
        q.pkru = pkru;
        const outcome s = mc.via_shadow(q), o = mc.via_walker(q);
        if (!same(s, o)) fail("access", s, o);
        if (!mc.memories_equal()) fail("guest memory (A/D)", s, o);
        break;
      }
      case 5: {  // MOV to CR0 / CR4 / EFER toggling a role bit
        const std::uint8_t a = in.byte();
        paging::cr_state before{x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer}};
        paging::cr_state after = before;
        switch (a % 6) {
          case 0: after.cr0 = x86::cr0{cr0 ^ (1ull << 16)}; break;   // WP
          case 1: after.cr4 = x86::cr4{cr4 ^ (1ull << 20)}; break;   // SMEP
          case 2: after.cr4 = x86::cr4{cr4 ^ (1ull << 21)}; break;   // SMAP
          case 3: after.efer = x86::efer{efer ^ (1ull << 11)}; break;  // NXE
          case 4: after.cr4 = x86::cr4{cr4 ^ (1ull << 4)}; break;    // PSE
          case 5: after.cr4 = x86::cr4{cr4 ^ (1ull << 22)}; break;   // PKE
        }
        paging::cr_write_outcome o{};
        o.cr = 0;
        o.after = after;
        o.after.efer = paging::efer_with_lma(after.cr0, after.efer);
        o.actions = paging::cr_write_actions(before, after, paging::paging_kind::shadow);
        paging::pdpte_snapshot p = mc.pdptes;
        if (o.actions.test(paging::mmu_actions::reload_pdptrs)) {
          paging::flat_view v(mc.oracle.data(), mc.oracle.size());
          const auto l = paging::load_pdptrs(x86::cr3{cr3}, v, 52);
          if (!l) break;  // the write would #GP: nothing changes
          p = *l;
        }
        cr0 = after.cr0.raw();
        cr4 = after.cr4.raw();
        efer = after.efer.raw();
        shadow::control_registers_written(mc.mmu, o, x86::cr3{cr3}, 52, p);
        mc.role = mc.mmu.role();
        mc.pdptes = mc.mmu.pdptes();
        break;
      }
      case 6: {  // MOV to CR3 (the other address space)
        const std::uint64_t next = cr3 == 0x1000 ? 0x5000 : 0x1000;
        paging::pdpte_snapshot p{};
        if (pae) {
          paging::flat_view v(mc.oracle.data(), mc.oracle.size());
          const auto l = paging::load_pdptrs(x86::cr3{next}, v, 52);
          if (!l) break;  // #GP: CR3 unchanged
          p = *l;
        }
        cr3 = next;
        paging::cr_write_outcome o{};
        o.cr = 3;
        o.value = next;
        shadow::mov_to_cr3(mc.mmu, o, 52, p);
        mc.root = x86::gpa{next};
        mc.pdptes = mc.mmu.pdptes();
        break;
      }
      case 7: {  // INVLPG, or a WRPKRU
        const std::uint8_t a = in.byte();
        if (a & 0x80) {
          pkru = std::uint32_t{a & 0x3fu} << 2;  // AD/WD of keys 1-3 (leaves use key 0-15 from bits 62:59)
        } else {
          static_cast<void>(shadow::invlpg(x86::gva{vas[a & 7]}));
        }
        break;
      }
    }
  }
  return 0;
}
