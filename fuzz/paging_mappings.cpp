// SPDX-License-Identifier: MIT
// libFuzzer target for paging/mappings.hpp: arbitrary memory images (hostile tables,
// cycles, entries pointing outside memory) and registers. The first 64 bytes choose
// CR0/CR3/CR4/EFER, MAXPHYADDR, the EPTP and the range; the rest is memory at address 0.
// Guest, EPT and nested enumerations run with a read bound, under ASan + UBSan.
// Invariants: the enumeration ends within the bound; pages come in address order without
// overlap; each enumerated page translates with the walker (raw) to the same output at its
// first and last byte, with the same rights; every fault is a fault of the walker too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/mappings.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/x86/cr3.hpp>

namespace {

using namespace hvkit;

std::uint64_t take(const std::uint8_t*& p, const std::uint8_t* end, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n && p < end; ++i) v |= std::uint64_t{*p++} << (8 * i);
  return v;
}

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::uint64_t max_reads = 4096;

// Offset-space key of an input address (canonical upper half above the lower half).
std::uint64_t key(std::uint64_t a, unsigned width) {
  return width >= 64 ? a : a & ((std::uint64_t{1} << width) - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 64) return 0;
  const std::uint8_t* p = data;
  const std::uint8_t* hdr_end = data + 64;
  const x86::cr0 cr0{take(p, hdr_end, 4) | x86::cr0::pg.raw() | x86::cr0::pe.raw()};
  const x86::cr3 cr3{take(p, hdr_end, 8)};
  const x86::cr4 cr4{take(p, hdr_end, 4)};
  x86::efer efer{take(p, hdr_end, 2)};
  const unsigned maxphy = 32 + static_cast<unsigned>(take(p, hdr_end, 1) % 21);
  const std::uint64_t eptp = take(p, hdr_end, 8);
  const std::uint64_t first = take(p, hdr_end, 8);
  const std::uint64_t span = take(p, hdr_end, 8);
  const paging::flat_view mem(data + 64, size - 64);

  if (efer.test(x86::efer::lme)) efer.set(x86::efer::lma);
  const auto mode = x86::paging_mode_of(cr0, cr4, efer);
  const auto root = x86::cr3_root(cr3, mode, maxphy);
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
  paging::cpu_properties props{};
  props.maxphyaddr = maxphy;
  paging::pdpte_snapshot pdptes{};
  if (mode == x86::paging_mode::pae) {
    const auto l = paging::load_pdptrs(cr3, mem, maxphy);
    if (!l) return 0;
    pdptes = *l;
  }
  const paging::guest_walker w(mmu, props, pdptes);
  const unsigned width = mode == x86::paging_mode::four_level ? 48 : mode == x86::paging_mode::five_level ? 57 : 32;
  const paging::mapping_range range{first, span > ~first ? ~std::uint64_t{0} : first + span};

  paging::guest_mappings pages(w.state(), mem, range, paging::mapping_limits{max_reads});
  std::uint64_t next = 0;
  bool any = false;
  for (const auto& m : pages) {
    if (!m) {
      check(!w.translate(mem, m.error().linear));
      continue;
    }
    check(m->size != 0 && (mode == x86::paging_mode::none || m->size == std::uint64_t{1} << m->page_shift));
    check(!any || key(m->input, width) >= next);
    next = key(m->input, width) + m->size;
    any = true;
    for (const std::uint64_t off : {std::uint64_t{0}, m->size - 1}) {
      const auto t = w.translate(mem, x86::gva{m->input + off});
      check(t && t->address.value() == m->output.value() + off && t->rights == m->rights);
    }
  }
  check(pages.reads() <= max_reads);

  paging::ept_capabilities caps{};
  caps.maxphyaddr = maxphy;
  caps.execute_only = (eptp >> 62) & 1;
  const auto ept = paging::ept_walker::make(paging::ept_pointer{eptp}, caps);
  if (!ept) return 0;
  auto e = paging::ept_mappings<paging::flat_view>::make(paging::ept_pointer{eptp}, caps, mem, range,
                                                         paging::mapping_limits{max_reads});
  check(bool(e));
  std::uint64_t last_end = 0;
  any = false;
  for (const auto& m : *e) {
    if (!m) {
      check(!ept->translate(mem, x86::gpa{m.error().linear.value()}));
      continue;
    }
    check(!any || m->input >= last_end);
    last_end = m->input + m->size;
    any = true;
    const auto t = ept->translate(mem, x86::gpa{m->input + m->size - 1});
    check(t && t->address.value() == m->output.value() + m->size - 1 && t->rights == m->rights);
  }
  check(e->reads() <= max_reads);

  paging::nested_mappings<paging::ept_walker, paging::flat_view> nested(w.state(), *ept, mem, range,
                                                                       paging::mapping_limits{max_reads});
  std::uint64_t pieces = 0;
  for (const auto& m : nested) {
    if (m) check(m->size != 0 && m->size <= m->guest.size);
    ++pieces;
  }
  check(nested.reads() <= max_reads);
  static_cast<void>(pieces);
  return 0;
}
