// SPDX-License-Identifier: MIT
// libFuzzer target for the page walkers: arbitrary memory images and registers.
// The first 64 bytes choose CR0/CR3/CR4/EFER, the address, the access, PKRU, MAXPHYADDR,
// vendor and EPT settings; the rest is guest memory (at GPA 0). Every mode's walker, the
// raw translate, the PDPTE load, the EPT walker, the NPT stage (every host format) and the
// nested walkers over EPT and NPT run on it, under
// ASan + UBSan. Invariants checked: a translation is below 2^52 with a valid page size and
// a path no longer than the mode's levels; the raw translate of a successful walk gives
// the same address; a faulting walk writes nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/svm/npf.hpp>
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

template <class Address>  // guest walks: x86::gpa; second stages: x86::hpa
void check_translation(const paging::basic_translation<Address>& t, unsigned max_levels) {
  check(t.address.value() < (std::uint64_t{1} << 52));
  const auto s = t.page_size();
  check(s == x86::page_size_4k || s == x86::page_size_2m || s == x86::page_size_4m || s == x86::page_size_1g);
  check(t.path.count <= max_levels);
  for (unsigned i = 0; i < t.path.count; ++i) static_cast<void>(t.path[i]);
}

// The #NPF encoding of an NPT-stage fault (APM 15.25.6): exactly one of bits 32 and 33, US
// always set, RSV only with P, EXITINFO2 the guest-physical address the fault names.
void check_npf(const paging::walk_fault& f) {
  const auto e = svm::npf_from_fault(f);
  if (f.stage != paging::walk_stage::npt) return;
  if (!e) {
    check(f.kind == paging::fault_kind::unbacked || f.kind == paging::fault_kind::retry_exhausted);
    return;
  }
  check(e->error.is_final_translation() != e->error.is_guest_page_table_walk());
  check(e->error.is_user());
  check(!e->error.is_reserved() || e->error.is_present());
  check((e->error.raw() & ~std::uint64_t{0x3'0000'001f}) == 0);
  check(e->address == f.guest_physical);
}

template <class Host>
void fuzz_npt(std::vector<std::uint8_t>& image, const paging::mmu_context& mmu, const paging::cpu_properties& props,
              const paging::walk_request& req, std::uint64_t flags, std::uint64_t ncr3, std::uint64_t acc, x86::gva va,
              x86::paging_mode mode) {
  const paging::npt_walker<Host> npt(x86::hpa{ncr3}, paging::npt_host{(flags & 0x400) != 0, (flags & 0x800) != 0}, props);
  paging::flat_memory mem(image.data(), image.size());
  paging::ept_request er{};
  er.address = x86::gpa{va.value()};
  er.access = paging::ept_access{acc & 7};
  er.origin = static_cast<paging::ept_origin>(((acc >> 5) & 7u) % 3u);
  const std::vector<std::uint8_t> before = image;
  const auto c = npt.check(paging::flat_view(image.data(), image.size()), er);
  const auto raw = npt.translate(paging::flat_view(image.data(), image.size()), er.address);
  const auto w = npt.walk(mem, er);
  // A request that contradicts itself (a paging-structure fetch, a PDPTE load that is not a
  // plain read) is refused as such before anything is read or written, by every verb.
  if (!paging::ept_request_consistent(er)) {
    check(!c && c.error().kind == paging::fault_kind::invalid_request);
    check(!w && w.error().kind == paging::fault_kind::invalid_request && image == before);
    return;
  }
  check(c || c.error().kind != paging::fault_kind::invalid_request);
  // Setting A or D can make an entry fault only where bits 5/6 are reserved: a PAE host's
  // PDPTE, when an A/D update of another entry aliases it and the walk is redone.
  constexpr bool ad_cannot_fault = !Host::pdpte_registers;
  if (ad_cannot_fault) check(c.has_value() == w.has_value());
  if (w) {
    check_translation(*w, Host::levels);
    check(raw.has_value() && raw->address == w->address);
  } else {
    if (ad_cannot_fault) check(image == before);
    check_npf(w.error());
  }
  if (mode == x86::paging_mode::four_level) {
    const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker<Host>> n(paging::walker_4level(mmu, props),
                                                                                     npt);
    const std::vector<std::uint8_t> snapshot = image;
    const auto nr = n.walk(mem, mmu, req);
    if (nr) {
      check_translation(nr->guest, 4);
      check_translation(nr->second, Host::levels);
    } else {
      if (ad_cannot_fault) check(image == snapshot);  // nothing written on a faulting walk
      check_npf(nr.error());
    }
    static_cast<void>(n.translate(paging::flat_view(image.data(), image.size()), va));
  } else if (mode == x86::paging_mode::two_level) {
    const paging::nested_walker<paging::format::ia32, paging::npt_walker<Host>> n(paging::walker_32bit(mmu, props), npt);
    const auto nr = n.walk(mem, mmu, req);
    if (nr) check_translation(nr->second, Host::levels);
    if (!nr) check_npf(nr.error());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 64) return 0;
  const std::uint8_t* p = data;
  const std::uint8_t* hdr_end = data + 64;
  const x86::cr0 cr0{take(p, hdr_end, 4) | x86::cr0::pg.raw()};
  const x86::cr3 cr3{take(p, hdr_end, 8)};
  const x86::cr4 cr4{take(p, hdr_end, 4)};
  const std::uint64_t efer_bits = take(p, hdr_end, 2);
  const x86::gva va{take(p, hdr_end, 8)};
  const std::uint64_t acc = take(p, hdr_end, 1);
  const std::uint32_t pkru = static_cast<std::uint32_t>(take(p, hdr_end, 4));
  const unsigned maxphy = 32 + static_cast<unsigned>(take(p, hdr_end, 1) % 21);
  const std::uint64_t flags = take(p, hdr_end, 2);
  const std::uint64_t eptp_raw = take(p, hdr_end, 8);
  const std::uint64_t gpa_in = take(p, hdr_end, 8);

  std::vector<std::uint8_t> image(data + 64, data + size);
  std::vector<std::uint8_t> before = image;
  // LMA follows LME with paging on (SDM 2.2.1); the fuzzer may still pick any mode.
  x86::efer efer{efer_bits & x86::efer::defined.raw()};
  efer.set(x86::efer::lma, efer.test(x86::efer::lme));

  x86::pfec access{};
  if (acc & 1) access = access | x86::pfec::write;
  if (acc & 2) access = access | x86::pfec::user;
  if (acc & 4) access = access | x86::pfec::fetch;
  if (acc & 8) access = access | x86::pfec::implicit_access;
  if (acc & 32) access = access | x86::pfec::ss;  // CET shadow-stack access

  paging::cpu_properties props{};
  props.maxphyaddr = maxphy;
  props.gbpages = flags & 1;
  props.amd_nonleaf_bit8 = flags & 2;
  props.pse36 = !(flags & 128);

  const auto mode = x86::paging_mode_of(cr0, cr4, efer);
  const auto root = x86::cr3_root(cr3, mode, maxphy);
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
  paging::pdpte_snapshot pd{};
  if (mode == x86::paging_mode::pae) {
    const auto l = paging::load_pdptrs(cr3, paging::flat_view(image.data(), image.size()), maxphy);
    if (!l) {
      check(l.error().vector == x86::vector::gp);
    } else {
      pd = *l;
    }
  }
  const paging::guest_walker w(mmu, props, pd);
  paging::walk_request req{};
  req.linear = va;
  req.access = access;
  req.rflags = x86::rflags{(flags & 4) ? x86::rflags::ac.raw() : 0};
  req.pkru = pkru;
  req.stack = flags & 8;
  const unsigned levels = x86::paging_levels(mode) == 0 ? 0 : x86::paging_levels(mode);

  paging::flat_memory mem(image.data(), image.size());
  const auto r = w.walk(mem, mmu, req);
  if (r) {
    check_translation(*r, levels);
    // SDM 4.6.1: a shadow-stack access succeeds only on a shadow-stack page of its mode.
    if (levels != 0 && access.test(x86::pfec::ss) && !access.test(x86::pfec::fetch))
      check(r->rights.test(paging::pte_access::shadow_stack) &&
            r->rights.test(paging::pte_access::user) == access.test(x86::pfec::user));
    const auto raw = w.translate(paging::flat_view(image.data(), image.size()), va);
    check(raw.has_value() && raw->address == r->address);
  } else {
    check(image == before);  // nothing written on a faulting walk
    check(r.error().kind != paging::fault_kind::none);
  }

  // EPT, and the nested walk over it (4-level guest), when the EPTP is acceptable.
  paging::ept_capabilities caps{};
  caps.maxphyaddr = maxphy;
  caps.execute_only = flags & 16;
  caps.mbec = flags & 32;
  caps.page_1g = flags & 64;
  const auto ept = paging::ept_walker::make(paging::ept_pointer{eptp_raw}, caps);
  if (ept) {
    paging::ept_request er{};
    er.address = x86::gpa{gpa_in};
    er.access = paging::ept_access{acc & 7};
    if (acc & 16) er.access = er.access | paging::ept_access::user_address;
    er.origin = static_cast<paging::ept_origin>(((acc >> 5) & 7u) % 3u);
    er.linear_valid = acc & 8;
    er.linear = va;
    const auto e = ept->walk(mem, er);
    if (e) check_translation(*e, ept->levels());
    // A self-contradicting request is refused as such, and only such a request.
    check((!e && e.error().kind == paging::fault_kind::invalid_request) == !paging::ept_request_consistent(er));
    // A PDPTE load has no guest-linear address and is never refused for writing (SDM 28.2.1,
    // 29.3.3.2); with EPT A/D a paging-structure violation reports bits 0 and 1 together.
    if (!e && er.origin == paging::ept_origin::pdpte_load)
      check((e.error().qualification.raw() & 0x182u) == 0 && e.error().linear.value() == 0);
    if (!e && e.error().kind == paging::fault_kind::permission && er.origin == paging::ept_origin::paging_structure &&
        ept->ad_enabled())
      check((e.error().qualification.raw() & 3u) == 3u);
    const auto raw = ept->translate(paging::flat_view(image.data(), image.size()), er.address);
    if (raw) check_translation(*raw, ept->levels());
    if (mode == x86::paging_mode::four_level) {
      const paging::nested_walker<paging::format::ia32e<4>> n(paging::walker_4level(mmu, props), *ept);
      const auto nr = n.walk(mem, mmu, req);
      if (nr) {
        check_translation(nr->guest, 4);
        check_translation(nr->second, ept->levels());
      }
      static_cast<void>(n.translate(paging::flat_view(image.data(), image.size()), va));
    }
  }

  // AMD nested paging: the EPTP bytes as nCR3, the host format from flags bits 9:8, host
  // EFER.NXE and CR4.PSE from bits 10 and 11; the NPT stage alone (walk, check, translate)
  // and the nested walk of the guest's 4-level or 32-bit walk over it.
  switch ((flags >> 8) & 3u) {
    case 0: fuzz_npt<paging::format::ia32>(image, mmu, props, req, flags, gpa_in, acc, va, mode); break;
    case 1: fuzz_npt<paging::format::pae>(image, mmu, props, req, flags, gpa_in, acc, va, mode); break;
    case 2: fuzz_npt<paging::format::ia32e<4>>(image, mmu, props, req, flags, gpa_in, acc, va, mode); break;
    default: fuzz_npt<paging::format::ia32e<5>>(image, mmu, props, req, flags, gpa_in, acc, va, mode); break;
  }
  static_cast<void>(eptp_raw);
  return 0;
}
