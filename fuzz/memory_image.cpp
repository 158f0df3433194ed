// SPDX-License-Identifier: MIT
// libFuzzer target for the memory-image readers (a dump is untrusted input): the input is an
// ELF core file. parse_elf_core() must either refuse it with a typed error or give regions
// that lie inside the input, sorted and disjoint (region_view::make accepts them as they
// are); then every region's first and last words, the words across each region end and a
// few input-chosen addresses are read through region_view, and a 4-level walk and a
// read_virtual() of 64 bytes run over the image with CR3 from the core's QEMU note (or
// from the input), all under ASan + UBSan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <hvkit/paging/elf_core.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/read_virtual.hpp>
#include <hvkit/paging/region_memory.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;

void check(bool ok) {
  if (!ok) std::abort();
}

std::uint64_t take64(const std::uint8_t* data, std::size_t size, std::size_t at) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < 8 && at + i < size; ++i) v |= std::uint64_t{data[at + i]} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  paging::memory_region regions[64];
  const auto core = paging::parse_elf_core(data, size, regions, 64);
  if (!core) {
    check(core.error() != paging::elf_core_error::none);
    return 0;
  }
  check(core->regions <= 64);
  for (std::size_t i = 0; i < core->regions; ++i) {
    const auto& r = regions[i];
    check(r.size > 0 && r.data >= data && r.data + r.size <= data + size);
    if (i > 0) check(regions[i - 1].end() <= r.base.value());
  }
  const auto view = paging::region_view::make(regions, core->regions);
  check(view.has_value());
  const paging::region_view& mem = *view;
  volatile std::uint64_t sink = 0;
  for (std::size_t i = 0; i < core->regions; ++i) {
    const std::uint64_t b = regions[i].base.value(), e = regions[i].end();
    for (std::uint64_t a : {b, b + 1, e - 8, e - 4, e - 3, e - 1, e, b - 4}) {
      if (const auto v = mem.read64(x86::gpa{a})) sink = sink + *v;
      if (const auto v = mem.read32(x86::gpa{a})) sink = sink + *v;
      check(mem.contains(x86::gpa{a}, 1) == (mem.find(a) != nullptr));
    }
  }
  // A walk and a read through the image, the registers from the note or the input's tail.
  const std::uint64_t cr3 = core->has_cpu_state ? core->cpu0.cr[3] : take64(data, size, size / 2);
  const std::uint64_t va = take64(data, size, size > 8 ? size - 8 : 0);
  const auto mmu = paging::mmu_context::make(x86::cr0{0x80000011}, x86::cr4{x86::cr4::pae}, x86::efer{0xd00},
                                             x86::gpa{cr3 & 0x000f'ffff'ffff'f000});
  const paging::guest_walker walker(mmu, paging::cpu_properties{.maxphyaddr = 52});
  if (const auto t = walker.translate(mem, x86::gva{va})) check(t->page_shift == 12 || t->page_shift == 21 || t->page_shift == 30);
  std::uint8_t out[64];
  const auto r = paging::read_virtual(walker, mem, x86::gva{va}, out, sizeof out);
  check(r ? *r == sizeof out : r.error().bytes_read < sizeof out);
  return 0;
}
