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
#include <cstdint>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
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
  std::FILE* f = std::fopen(argv[1], "wb");
  if (!f) return 1;
  const bool ok = std::fwrite(m.data(), 1, m.size(), f) == m.size();
  return std::fclose(f) == 0 && ok ? 0 : 1;
}
