// SPDX-License-Identifier: MIT
// Writes the memory dump the hvkit-walk CTest walks: 4-level tables at guest-physical
// 0x100000 (the dump's base), entries typed from SDM Tables 4-14..4-20.
// Lower canonical half:
//   PML4E[0xfe] @ 0x1017f0 = 0x102027        (P RW US A)
//   PDPTE[0]    @ 0x102000 = 0x103027
//   PDE[1]      @ 0x103008 = 0x104027
//   PTE[1]      @ 0x104008 = 0x8000000012345063  (P RW A D XD: supervisor, no execute)
//   PDE[2]      @ 0x103010 = 0x400010e7      (2 MiB page at 0x40000000, PAT set)
// Upper canonical half (a kernel's -2 GiB region):
//   PML4E[0x1ff] @ 0x101ff8 = 0x105003       (P RW)
//   PDPTE[0x1fe] @ 0x105ff0 = 0x106003
//   PDE[0]       @ 0x106000 = 0x200183       (2 MiB page at 0x200000, G)
//   PDE[1]       @ 0x106008 = 0x107003
//   PTE[0]       @ 0x107000 = 0x80000000fee0001b  (P RW PWT PCD XD: the local APIC page)
// EPT tables (EPTP 0x10801e: root 0x108000, 4 levels, WB), SDM Tables 29-1..29-7:
//   PML4E[0] @ 0x108000 = 0x109007               (R W X)
//   PDPTE[0] @ 0x109000 = 0x10a007
//   PDPTE[1] @ 0x109008 = 0x800000b5             (1 GiB: gpa 0x40000000 -> 0x80000000, R X, WB)
//   PDE[0]   @ 0x10a000 = 0x0000b7               (2 MiB: gpa 0 -> 0, identity, R W X, WB)
//   PDE[1]   @ 0x10a008 = 0x6000b3               (2 MiB: gpa 0x200000 -> 0x600000, R W, WB)
//   PDE[2]   @ 0x10a010 = 0x10b007
//   PTE[5]   @ 0x10b028 = 0x000002               (W without R: misconfigured)
//
// With a second argument PREFIX it also writes, for the multi-region and ELF-core checks:
//   PREFIX.core     an ELF64 core (System V gABI layout; QEMU's CPU-state note, version 1)
//                   of the same memory as two PT_LOAD segments, [0x100000, 0x106000) and
//                   [0x107000, 0x10c000): the page at 0x106000 (the upper half's PD) is a
//                   hole; the note gives CR0 0x80010033, CR3 0x101018, CR4 0x20, CS.L = 1
//   PREFIX.12345    one page for GPA 0x12345000 (VA 0x7f0000201000): "hvkit read ok"
//   PREFIX.3ff      one page for GPA 0x3ff000, ending in "a read across" (the last bytes
//                   of the 2 MiB page at VA 0xffffffff80000000)
//   PREFIX.fee      one page for GPA 0xfee00000 (VA 0xffffffff80200000): " two pages"
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
bool write_file(const std::string& path, const std::vector<unsigned char>& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}
void le(std::vector<unsigned char>& b, std::size_t at, std::uint64_t v, unsigned n) {
  if (b.size() < at + n) b.resize(at + n);
  for (unsigned i = 0; i < n; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
std::vector<unsigned char> page_with(std::size_t at, const char* text) {
  std::vector<unsigned char> p(0x1000);
  std::memcpy(p.data() + at, text, std::strlen(text));
  return p;
}
// The ELF core: header, 3 program headers (PT_NOTE, 2 x PT_LOAD), the note, the segments.
std::vector<unsigned char> core_of(const std::vector<unsigned char>& m) {
  std::vector<unsigned char> note;
  le(note, 0, 5, 4);      // namesz: "QEMU\0"
  le(note, 4, 432, 4);    // descsz: the version-1 state
  le(note, 8, 0, 4);      // type
  for (char c : std::string("QEMU")) note.push_back(static_cast<unsigned char>(c));
  note.push_back(0);
  while (note.size() % 4) note.push_back(0);
  const std::size_t d = note.size();
  le(note, d + 0, 1, 4);                    // version
  le(note, d + 4, 432, 4);                  // size
  le(note, d + 8 + 16 * 8, 0x7f0000201abc, 8);  // RIP
  le(note, d + 8 + 17 * 8, 0x2, 8);         // RFLAGS
  le(note, d + 152 + 0, 0x10, 4);           // CS selector
  le(note, d + 152 + 8, 0x00a09b00, 4);     // CS flags: P, S, type 0xb, L (bit 21), G
  le(note, d + 392 + 0 * 8, 0x80010033, 8); // CR0
  le(note, d + 392 + 3 * 8, 0x101018, 8);   // CR3
  le(note, d + 392 + 4 * 8, 0x20, 8);       // CR4
  note.resize(d + 432);
  struct seg { std::uint32_t type; std::uint64_t paddr, off, size; };
  const std::size_t data_at = 64 + 3 * 56;
  const seg segs[3] = {{4, 0, data_at, note.size()},
                       {1, 0x100000, data_at + note.size(), 0x6000},
                       {1, 0x107000, data_at + note.size() + 0x6000, 0x5000}};
  std::vector<unsigned char> f(data_at);
  f[0] = 0x7f, f[1] = 'E', f[2] = 'L', f[3] = 'F', f[4] = 2, f[5] = 1, f[6] = 1;
  le(f, 16, 4, 2);   // ET_CORE
  le(f, 18, 62, 2);  // EM_X86_64
  le(f, 20, 1, 4);
  le(f, 32, 64, 8);  // e_phoff
  le(f, 52, 64, 2);
  le(f, 54, 56, 2);
  le(f, 56, 3, 2);
  for (unsigned i = 0; i < 3; ++i) {
    const std::size_t ph = 64 + 56 * i;
    le(f, ph + 0, segs[i].type, 4);
    le(f, ph + 8, segs[i].off, 8);
    le(f, ph + 24, segs[i].paddr, 8);
    le(f, ph + 32, segs[i].size, 8);
    le(f, ph + 40, segs[i].size, 8);
  }
  f.insert(f.end(), note.begin(), note.end());
  f.insert(f.end(), m.begin(), m.begin() + 0x6000);
  f.insert(f.end(), m.begin() + 0x7000, m.begin() + 0xc000);
  return f;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) return 2;
  std::vector<unsigned char> m(0xc000);
  auto put = [&m](std::uint64_t gpa, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) m[gpa - 0x100000 + i] = static_cast<unsigned char>(v >> (8 * i));
  };
  put(0x1017f0, 0x102027);
  put(0x102000, 0x103027);
  put(0x103008, 0x104027);
  put(0x104008, 0x8000000012345063ull);
  put(0x103010, 0x400010e7);
  put(0x101ff8, 0x105003);
  put(0x105ff0, 0x106003);
  put(0x106000, 0x200183);
  put(0x106008, 0x107003);
  put(0x107000, 0x80000000fee0001bull);
  put(0x108000, 0x109007);
  put(0x109000, 0x10a007);
  put(0x109008, 0x800000b5);
  put(0x10a000, 0x0000b7);
  put(0x10a008, 0x6000b3);
  put(0x10a010, 0x10b007);
  put(0x10b028, 0x000002);
  if (!write_file(argv[1], m)) return 1;
  if (argc == 3) {
    const std::string prefix = argv[2];
    if (!write_file(prefix + ".core", core_of(m)) || !write_file(prefix + ".12345", page_with(0, "hvkit read ok")) ||
        !write_file(prefix + ".3ff", page_with(0x1000 - 13, "a read across")) ||
        !write_file(prefix + ".fee", page_with(0, " two pages"))) {
      return 1;
    }
  }
  return 0;
}
