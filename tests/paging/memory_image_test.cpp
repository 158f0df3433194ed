// SPDX-License-Identifier: MIT
// paging/region_memory.hpp, paging/elf_core.hpp and paging/hosted/image.hpp: memory images
// of several regions (holes between them) and ELF core files as QEMU's dump-guest-memory
// writes them. The oracle for the ELF side is a writer in this file that lays out the
// header, program headers and notes at the offsets of the System V gABI (ELF-64: e_phoff at
// 32, e_phentsize 54, e_phnum 56; Elf64_Phdr: p_type 0, p_offset 8, p_paddr 24, p_filesz
// 32, p_memsz 40) and QEMU's CPU-state note (version 1: 16 GPRs, RIP, RFLAGS, 10 segments
// of 24 bytes, CR0-CR4); the reader must find exactly what was written, and refuse each
// malformed variant with its own error.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <hvkit/paging/elf_core.hpp>
#include <hvkit/paging/hosted/image.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/read_virtual.hpp>
#include <hvkit/paging/region_memory.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;
using paging::elf_core_error;
using paging::memory_region;
using paging::region_error;
using std::uint64_t;

using bytes = std::vector<std::uint8_t>;
void put(bytes& b, std::size_t at, uint64_t v, unsigned n) {
  if (b.size() < at + n) b.resize(at + n);
  for (unsigned i = 0; i < n; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// ---- region_view ------------------------------------------------------------------------

TEST(RegionView, RefusesUnsortedOverlappingWrappingAndMissingBuffers) {
  std::uint8_t a[16]{}, b[16]{};
  const memory_region unsorted[] = {{x86::gpa{0x100}, a, 16}, {x86::gpa{0x0}, b, 16}};
  const memory_region overlap[] = {{x86::gpa{0x100}, a, 16}, {x86::gpa{0x10f}, b, 16}};
  const memory_region wraps[] = {{x86::gpa{~uint64_t{0} - 7}, a, 16}};
  const memory_region no_data[] = {{x86::gpa{0}, nullptr, 16}};
  const memory_region touching[] = {{x86::gpa{0x100}, a, 16}, {x86::gpa{0x110}, b, 16}};
  EXPECT_EQ(paging::region_view::make(unsorted, 2).error(), region_error::unsorted);
  EXPECT_EQ(paging::region_view::make(overlap, 2).error(), region_error::overlapping);
  EXPECT_EQ(paging::region_view::make(wraps, 1).error(), region_error::wraps);
  EXPECT_EQ(paging::region_view::make(no_data, 1).error(), region_error::no_data);
  EXPECT_TRUE(paging::region_view::make(touching, 2));
  EXPECT_TRUE(paging::region_view::make(nullptr, 0));
}

TEST(RegionView, ReadsInsideRegionsAcrossTouchingOnesAndNeverInAHole) {
  // [0x1000, 0x1010) and [0x1010, 0x1018) touch; [0x2000, 0x2008) after a hole.
  bytes a(16), b(8), c(8);
  for (unsigned i = 0; i < 16; ++i) a[i] = static_cast<std::uint8_t>(0x10 + i);
  for (unsigned i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(0x40 + i), c[i] = static_cast<std::uint8_t>(0x80 + i);
  const memory_region r[] = {{x86::gpa{0x1000}, a.data(), a.size()},
                             {x86::gpa{0x1010}, b.data(), b.size()},
                             {x86::gpa{0x2000}, c.data(), c.size()}};
  const auto v = *paging::region_view::make(r, 3);
  EXPECT_EQ(*v.read64(x86::gpa{0x1000}), 0x1716151413121110u);
  EXPECT_EQ(*v.read32(x86::gpa{0x1004}), 0x17161514u);
  EXPECT_EQ(*v.read64(x86::gpa{0x100c}), 0x434241401f1e1d1cu) << "served from both touching regions";
  EXPECT_EQ(*v.read64(x86::gpa{0x2000}), 0x8786858483828180u);
  EXPECT_FALSE(v.read64(x86::gpa{0x1014})) << "runs from b into the hole";
  EXPECT_FALSE(v.read32(x86::gpa{0x1800}));
  EXPECT_FALSE(v.read32(x86::gpa{0xffc})) << "starts in the hole below a";
  EXPECT_FALSE(v.read64(x86::gpa{0x2004}));
  EXPECT_FALSE(v.read64(x86::gpa{~uint64_t{0} - 3}));
  EXPECT_TRUE(v.contains(x86::gpa{0x1000}, 0x18));
  EXPECT_FALSE(v.contains(x86::gpa{0x1000}, 0x19));
}

// ---- ELF core writer (the oracle) ---------------------------------------------------------

struct segment {
  std::uint32_t type;
  uint64_t paddr;
  bytes data;
  uint64_t memsz;  // 0: = data.size()
};

bytes note(const std::string& name, std::uint32_t type, const bytes& desc) {
  bytes n;
  put(n, 0, name.size() + 1, 4);
  put(n, 4, desc.size(), 4);
  put(n, 8, type, 4);
  std::size_t at = 12;
  for (char ch : name) n.push_back(static_cast<std::uint8_t>(ch)), ++at;
  n.push_back(0), ++at;
  while (n.size() % 4) n.push_back(0);
  n.insert(n.end(), desc.begin(), desc.end());
  while (n.size() % 4) n.push_back(0);
  return n;
}

// QEMU's CPU state, version 1, with CRn = cr[n] and CS flags `cs_flags`.
bytes qemu_state(const uint64_t (&cr)[5], std::uint32_t cs_flags, uint64_t rip) {
  bytes d(432);
  put(d, 0, 1, 4);                // version
  put(d, 4, 432, 4);              // size
  for (unsigned i = 0; i < 16; ++i) put(d, 8 + 8 * i, 0x1111 * (i + 1), 8);  // RAX..R15
  put(d, 136, rip, 8);
  put(d, 144, 0x246, 8);          // RFLAGS
  put(d, 152 + 0, 0x10, 4);       // CS selector
  put(d, 152 + 4, 0xffffffff, 4); // CS limit
  put(d, 152 + 8, cs_flags, 4);   // CS flags
  put(d, 152 + 16, 0, 8);         // CS base
  for (unsigned i = 0; i < 5; ++i) put(d, 392 + 8 * i, cr[i], 8);
  return d;
}

bytes elf_core(const std::vector<segment>& segs, unsigned class_ = 2, unsigned data_ = 1, unsigned type = 4,
               unsigned machine = 62) {
  bytes f(64);
  f[0] = 0x7f, f[1] = 'E', f[2] = 'L', f[3] = 'F', f[4] = static_cast<std::uint8_t>(class_);
  f[5] = static_cast<std::uint8_t>(data_), f[6] = 1;
  put(f, 16, type, 2);
  put(f, 18, machine, 2);
  put(f, 20, 1, 4);
  put(f, 32, 64, 8);         // e_phoff
  put(f, 52, 64, 2);         // e_ehsize
  put(f, 54, 56, 2);         // e_phentsize
  put(f, 56, segs.size(), 2);
  uint64_t data_at = 64 + 56 * segs.size();
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const std::size_t ph = 64 + 56 * i;
    put(f, ph + 0, segs[i].type, 4);
    put(f, ph + 8, data_at, 8);
    put(f, ph + 16, 0, 8);  // p_vaddr: 0 in a dump without paging
    put(f, ph + 24, segs[i].paddr, 8);
    put(f, ph + 32, segs[i].data.size(), 8);
    put(f, ph + 40, segs[i].memsz ? segs[i].memsz : segs[i].data.size(), 8);
    data_at += segs[i].data.size();
  }
  f.resize(64 + 56 * segs.size());
  for (const auto& s : segs) f.insert(f.end(), s.data.begin(), s.data.end());
  return f;
}

bytes filled(std::size_t n, std::uint8_t seed) {
  bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i * 13 + (i >> 8));
  return b;
}

constexpr uint64_t crs[5] = {0x80050033, 0, 0x7f0000001000, 0x10a000, 0x3506f0};

std::vector<segment> typical() {
  bytes notes = note("CORE", 1, bytes(336, 0xaa));  // NT_PRSTATUS: skipped
  const bytes q = note("QEMU", 0, qemu_state(crs, 0x00a09b00, 0xffffffff81000000));
  notes.insert(notes.end(), q.begin(), q.end());
  uint64_t cpu1[5] = {1, 2, 3, 4, 5};
  const bytes q1 = note("QEMU", 0, qemu_state(cpu1, 0, 0));
  notes.insert(notes.end(), q1.begin(), q1.end());
  // Out of address order, with a hole at [0xa0000, 0x100000) and one past 0x102000.
  return {{4, 0, notes, 0},
          {1, 0x100000, filled(0x2000, 1), 0},
          {1, 0x0, filled(0xa0000, 2), 0},
          {1, 0x200000, filled(0x1000, 3), 0x3000}};  // p_memsz > p_filesz: the rest unbacked
}

TEST(ElfCore, SegmentsBecomeSortedRegionsAndTheQemuNoteGivesTheRegisters) {
  const bytes f = elf_core(typical());
  memory_region r[8];
  const auto c = paging::parse_elf_core(f.data(), f.size(), r, 8);
  ASSERT_TRUE(c) << to_string(c.error());
  ASSERT_EQ(c->regions, 3u);
  EXPECT_EQ(r[0].base.value(), 0x0u);
  EXPECT_EQ(r[0].size, 0xa0000u);
  EXPECT_EQ(r[1].base.value(), 0x100000u);
  EXPECT_EQ(r[1].size, 0x2000u);
  EXPECT_EQ(r[2].base.value(), 0x200000u);
  EXPECT_EQ(r[2].size, 0x1000u) << "only p_filesz bytes are in the file";
  EXPECT_EQ(r[1].data, f.data() + 64 + 56 * 4 + typical()[0].data.size());
  EXPECT_EQ(c->cpus, 2u);
  ASSERT_TRUE(c->has_cpu_state);
  EXPECT_EQ(c->cpu0.version, 1u);
  for (unsigned i = 0; i < 5; ++i) EXPECT_EQ(c->cpu0.cr[i], crs[i]) << i;
  EXPECT_EQ(c->cpu0.rip, 0xffffffff81000000u);
  EXPECT_EQ(c->cpu0.rflags, 0x246u);
  EXPECT_EQ(c->cpu0.gpr[0], 0x1111u);
  EXPECT_EQ(c->cpu0.gpr[15], 0x1111u * 16);
  EXPECT_EQ(c->cpu0.cs.selector, 0x10u);
  EXPECT_TRUE(c->cpu0.cs_long()) << "flags 0x00a09b00: L (bit 21) set";
  const auto v = paging::region_view::make(r, c->regions);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v->read32(x86::gpa{0x100000}), 0x281b0e01u) << "bytes 1, 14, 27, 40 of filled(.., 1)";
  EXPECT_FALSE(v->read32(x86::gpa{0xa0000})) << "the hole";
  EXPECT_FALSE(v->read32(x86::gpa{0x201000})) << "p_memsz beyond p_filesz";
}

TEST(ElfCore, EachMalformedFileHasItsOwnError) {
  memory_region r[8];
  auto parse = [&](const bytes& f, std::size_t max = 8) { return paging::parse_elf_core(f.data(), f.size(), r, max); };
  const bytes good = elf_core(typical());
  EXPECT_TRUE(parse(good));
  EXPECT_EQ(parse(bytes(good.begin(), good.begin() + 63)).error(), elf_core_error::truncated);
  EXPECT_EQ(parse(bytes(10, 0)).error(), elf_core_error::not_elf);
  EXPECT_EQ(parse(elf_core(typical(), 1)).error(), elf_core_error::elf32);
  EXPECT_EQ(parse(elf_core(typical(), 2, 2)).error(), elf_core_error::big_endian);
  EXPECT_EQ(parse(elf_core(typical(), 2, 1, 2)).error(), elf_core_error::not_core);      // ET_EXEC
  EXPECT_EQ(parse(elf_core(typical(), 2, 1, 4, 3)).error(), elf_core_error::not_x86_64);  // EM_386
  bytes f = good;
  put(f, 54, 57, 2);
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
  f = good;
  put(f, 56, 0xfff0, 2);  // more headers than the file holds
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
  f = good;
  put(f, 64 + 56 * 1 + 32, 0x10000000, 8);  // segment 1's p_filesz past the end
  EXPECT_EQ(parse(f).error(), elf_core_error::segment_outside_file);
  f = good;
  put(f, 64 + 56 * 1 + 8, ~uint64_t{0} - 4, 8);  // p_offset near 2^64: no wrap-around
  EXPECT_EQ(parse(f).error(), elf_core_error::segment_outside_file);
  EXPECT_EQ(parse(good, 2).error(), elf_core_error::too_many_regions);
  f = good;
  put(f, 64 + 56 * 1 + 24, 0x9f000, 8);  // segment 1 at 0x9f000 overlaps [0, 0xa0000)
  EXPECT_EQ(parse(f).error(), elf_core_error::overlapping);
  f = good;
  put(f, 64 + 56 * 1 + 24, ~uint64_t{0} - 0xfff, 8);
  EXPECT_EQ(parse(f).error(), elf_core_error::address_wraps);
  f = good;
  put(f, 64 + 56 * 4 + 4, 0xfffffff0, 4);  // the first note's descsz
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_note);
  // PN_XNUM: the count comes from section header 0's sh_info.
  f = good;
  put(f, 56, 0xffff, 2);
  const uint64_t sh = f.size();
  put(f, 40, sh, 8);
  put(f, sh + 63, 0, 1);
  put(f, sh + 44, 4, 4);
  const auto x = parse(f);
  ASSERT_TRUE(x) << to_string(x.error());
  EXPECT_EQ(x->regions, 3u);
}

// A note with a raw name (`namesz` bytes of `name`, no NUL added) and `descsz` bytes of
// descriptor, padded to 4 bytes (gABI "Note Section").
bytes raw_note(const std::string& name, std::uint32_t descsz, bool pad = true) {
  bytes n;
  put(n, 0, name.size(), 4);
  put(n, 4, descsz, 4);
  put(n, 8, 0, 4);
  for (char ch : name) n.push_back(static_cast<std::uint8_t>(ch));
  while (n.size() % 4) n.push_back(0);
  n.resize(n.size() + descsz, 0);
  if (pad)
    while (n.size() % 4) n.push_back(0);
  return n;
}

TEST(ElfCore, IdentificationBytesEachChecked) {
  memory_region r[8];
  auto parse = [&](const bytes& f) { return paging::parse_elf_core(f.data(), f.size(), r, 8); };
  const bytes good = elf_core(typical());
  // e_ident[EI_MAG0..3] = 0x7f 'E' 'L' 'F': a file that differs in any one of them is no ELF
  // file, whatever its length; a file with the magic but shorter than the 64-byte ELF-64
  // header is a truncated one.
  for (unsigned i = 0; i < 4; ++i) {
    bytes f = good;
    f[i] ^= 0x20;
    EXPECT_EQ(parse(f).error(), elf_core_error::not_elf) << i;
    f.resize(63);
    EXPECT_EQ(parse(f).error(), elf_core_error::not_elf) << i;
  }
  EXPECT_EQ(parse(bytes(good.begin(), good.begin() + 4)).error(), elf_core_error::truncated);
  EXPECT_EQ(parse(bytes(good.begin(), good.begin() + 3)).error(), elf_core_error::not_elf) << "no room for the magic";
  EXPECT_EQ(parse(bytes{}).error(), elf_core_error::not_elf);
  // EI_CLASS: 0 is ELFCLASSNONE ("Invalid class"), 3 is none; EI_DATA: 0 is ELFDATANONE
  // ("Invalid data encoding"), 3 is none.
  for (unsigned c : {0u, 3u, 0xffu}) EXPECT_EQ(parse(elf_core(typical(), c)).error(), elf_core_error::not_elf) << c;
  for (unsigned d : {0u, 3u, 0xffu}) EXPECT_EQ(parse(elf_core(typical(), 2, d)).error(), elf_core_error::not_elf) << d;
}

TEST(ElfCore, ProgramHeaderTablePlacement) {
  memory_region r[8];
  auto parse = [&](const bytes& f) { return paging::parse_elf_core(f.data(), f.size(), r, 8); };
  const bytes good = elf_core(typical());
  // No program header table (e_phnum 0, gABI: "If a file has no program header table,
  // e_phnum holds the value zero"): a core with no region and no vCPU, e_phentsize unread.
  bytes f = good;
  put(f, 56, 0, 2);
  put(f, 54, 0, 2);
  auto none = parse(f);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->regions, 0u);
  EXPECT_EQ(none->cpus, 0u);
  EXPECT_FALSE(none->has_cpu_state);
  // The table's count fits the file but its offset puts its end past the file.
  f = good;
  put(f, 32, f.size() - 4 * 56 + 1, 8);
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
  f = good;
  put(f, 32, ~uint64_t{0} - 8, 8);  // e_phoff near 2^64: no wrap-around
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
  // PN_XNUM with section header 0 (64 bytes) not inside the file.
  f = good;
  put(f, 56, 0xffff, 2);
  put(f, 40, f.size() - 63, 8);
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
  f = good;
  put(f, 56, 0xffff, 2);
  put(f, 40, ~uint64_t{0} - 16, 8);
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_program_headers);
}

TEST(ElfCore, SegmentsWithoutFileBytesAndOtherTypesAreSkipped) {
  memory_region r[8];
  // PT_LOAD with p_filesz 0 (all of it past the file: p_memsz only), PT_DYNAMIC (2) and
  // PT_PHDR (6) with bytes: no region; PT_LOAD with bytes: one.
  const bytes f = elf_core({{1, 0x1000, bytes{}, 0x1000}, {2, 0x2000, bytes(16, 1), 0},
                            {6, 0x3000, bytes(16, 2), 0}, {1, 0x4000, bytes(32, 3), 0}});
  const auto c = paging::parse_elf_core(f.data(), f.size(), r, 1);
  ASSERT_TRUE(c) << to_string(c.error());
  ASSERT_EQ(c->regions, 1u);
  EXPECT_EQ(r[0].base.value(), 0x4000u);
  EXPECT_EQ(r[0].size, 32u);
  EXPECT_EQ(r[0].data[0], 3u);
}

TEST(ElfCore, NotesAndWhichOnesAreQemuCpuStates) {
  memory_region r[8];
  const bytes state = qemu_state(crs, 0, 0x1234);
  struct one {
    bytes note;
    bool counted;
  };
  // QEMU names its note "QEMU" with the NUL (namesz 5); a namesz of 4 without the NUL names
  // it as well. Any other name, a longer name that starts with "QEMU", or a descriptor shorter
  // than version 1 of the state (432 bytes) is some other note, skipped.
  auto with_desc = [&](const std::string& name, const bytes& d) {
    bytes n = raw_note(name, static_cast<std::uint32_t>(d.size()));
    std::copy(d.begin(), d.end(), n.end() - static_cast<std::ptrdiff_t>((d.size() + 3) & ~std::size_t{3}));
    return n;
  };
  const one cases[] = {
      {with_desc(std::string("QEMU", 5), state), true},
      {with_desc("QEMU", state), true},
      {with_desc("QEM", state), false},
      {with_desc(std::string("QEMUX", 5), state), false},
      {with_desc(std::string("QEMU\0X", 6), state), true},  // name ends at its NUL
      {with_desc(std::string("xEMU", 5), state), false},
      {with_desc(std::string("QxMU", 5), state), false},
      {with_desc(std::string("QExU", 5), state), false},
      {with_desc(std::string("QEMx", 5), state), false},
      {with_desc(std::string("QEMU", 5), bytes(state.begin(), state.end() - 1)), false},
      {with_desc(std::string("QEMU", 5), bytes(state.begin(), state.end() - 8)), false},
  };
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const bytes f = elf_core({{4, 0, cases[i].note, 0}});
    const auto c = paging::parse_elf_core(f.data(), f.size(), r, 8);
    ASSERT_TRUE(c) << i;
    EXPECT_EQ(c->cpus, cases[i].counted ? 1u : 0u) << i;
    EXPECT_EQ(c->has_cpu_state, cases[i].counted) << i;
    if (cases[i].counted) {
      EXPECT_EQ(c->cpu0.rip, 0x1234u) << i;
    }
  }
  // Fewer than 12 bytes left after the last note: no further note header, not an error.
  bytes tail = with_desc(std::string("QEMU", 5), state);
  tail.resize(tail.size() + 11, 0xee);
  const bytes f = elf_core({{4, 0, tail, 0}});
  const auto c = paging::parse_elf_core(f.data(), f.size(), r, 8);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cpus, 1u);
}

TEST(ElfCore, NotesThatRunPastTheirSegment) {
  memory_region r[8];
  auto parse = [&](const bytes& f) { return paging::parse_elf_core(f.data(), f.size(), r, 8); };
  // The name runs past the segment.
  bytes n = raw_note("QEMU", 0);
  put(n, 0, 64, 4);
  EXPECT_EQ(parse(elf_core({{4, 0, n, 0}})).error(), elf_core_error::bad_note);
  put(n, 0, 0xffffffff, 4);
  EXPECT_EQ(parse(elf_core({{4, 0, n, 0}})).error(), elf_core_error::bad_note);
  // The descriptor fits, its padding to 4 bytes does not (descsz 5, segment cut after it).
  n = raw_note("CORE", 5, false);
  EXPECT_EQ(parse(elf_core({{4, 0, n, 0}})).error(), elf_core_error::bad_note);
  n.resize(n.size() + 3, 0);
  EXPECT_TRUE(parse(elf_core({{4, 0, n, 0}})));
  // The PT_NOTE segment itself is not inside the file.
  bytes f = elf_core({{4, 0, raw_note("CORE", 8), 0}});
  put(f, 64 + 8, f.size() - 4, 8);  // p_offset: 4 bytes before the end, p_filesz 20
  EXPECT_EQ(parse(f).error(), elf_core_error::bad_note);
}

// ---- a walk and a read through a core with a hole -----------------------------------------

TEST(ElfCore, WalkAndReadThroughTheRegionsStopAtTheHole) {
  // Guest RAM [0, 0x9000) and [0x10000, 0x11000); 4-level tables at 0x1000 mapping
  // VA 0x400000.. to PA 0x8000 (last page of the first region) and VA 0x401000 to PA 0x9000
  // (the hole), VA 0x402000 to 0x10000.
  bytes low(0x9000), high(0x1000);
  for (std::size_t i = 0; i < low.size(); ++i) low[i] = static_cast<std::uint8_t>(i);
  for (std::size_t i = 0; i < high.size(); ++i) high[i] = static_cast<std::uint8_t>(0x80 ^ i);
  for (std::size_t i = 0x1000; i < 0x5000; ++i) low[i] = 0;
  put(low, 0x1000, 0x2003, 8);
  put(low, 0x2000, 0x3003, 8);
  put(low, 0x3000 + 2 * 8, 0x4003, 8);
  put(low, 0x4000 + 0 * 8, 0x8001, 8);
  put(low, 0x4000 + 1 * 8, 0x9001, 8);
  put(low, 0x4000 + 2 * 8, 0x10001, 8);
  const bytes f = elf_core({{1, 0x10000, high, 0}, {1, 0, low, 0}});
  memory_region r[4];
  const auto c = paging::parse_elf_core(f.data(), f.size(), r, 4);
  ASSERT_TRUE(c);
  const auto mem = *paging::region_view::make(r, c->regions);
  const auto mmu = paging::mmu_context::make(x86::cr0{0x80000011}, x86::cr4{x86::cr4::pae}, x86::efer{0x500},
                                             x86::gpa{0x1000});
  const paging::guest_walker w(mmu, paging::cpu_properties{.maxphyaddr = 46});
  std::uint8_t out[32];
  const auto ok = paging::read_virtual(w, mem, x86::gva{0x402000}, out, 32);
  ASSERT_TRUE(ok);
  EXPECT_EQ(out[5], 0x85);
  const auto bad = paging::read_virtual(w, mem, x86::gva{0x400ff0}, out, 32);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().what, paging::read_failure::memory);
  EXPECT_EQ(bad.error().address.value(), 0x401000u);
  EXPECT_EQ(bad.error().physical.value(), 0x9000u);
  EXPECT_EQ(bad.error().bytes_read, 16u);
  EXPECT_EQ(out[0], 0xf0) << "PA 0x8ff0";
  EXPECT_EQ(to_string(bad.error()),
            "gva 0x0000000000401000 -> gpa 0x0000000000009000: not in memory (after 16 bytes)");
}

// ---- memory_image (hosted) ------------------------------------------------------------------

TEST(MemoryImage, RawFilesAndACoreMakeOneViewAndOverlapsAreRefused) {
  paging::memory_image img;
  ASSERT_TRUE(img.add_raw(bytes(0x1000, 0x11), x86::gpa{0x100000}));
  ASSERT_TRUE(img.add_raw(bytes(0x1000, 0x22), x86::gpa{0x0}));
  const auto clash = img.add_raw(bytes(0x10, 0x33), x86::gpa{0x100ff8});
  ASSERT_FALSE(clash);
  EXPECT_EQ(to_string(clash.error()), "regions: overlapping");
  EXPECT_EQ(img.regions().size(), 2u) << "a refused file leaves the image as it was";
  const auto v = img.view();
  ASSERT_TRUE(v);
  EXPECT_EQ(*v->read32(x86::gpa{0x0}), 0x22222222u);
  EXPECT_EQ(*v->read32(x86::gpa{0x100ffc}), 0x11111111u);
  EXPECT_FALSE(img.core());
  const std::string path = ::testing::TempDir() + "hvkit_image_test.core";
  const bytes f = elf_core({{1, 0x200000, bytes(0x1000, 0x44), 0}, typical()[0]});
  std::FILE* out = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(out);
  std::fwrite(f.data(), 1, f.size(), out);
  std::fclose(out);
  ASSERT_TRUE(img.add_file(path));
  ASSERT_TRUE(img.core());
  EXPECT_EQ(img.core()->cpu0.cr[3], crs[3]);
  EXPECT_EQ(*img.view()->read32(x86::gpa{0x200000}), 0x44444444u);
  const auto missing = img.add_file(path + ".missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(to_string(missing.error()), "cannot read: No such file or directory");
  std::remove(path.c_str());
}

}  // namespace
