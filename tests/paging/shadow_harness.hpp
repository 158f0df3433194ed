// SPDX-License-Identifier: MIT
// A guest on a shadow MMU beside the same guest on the walker alone, for the shadow tests
// and the shadow fuzzer. `sut` memory is the guest's memory as the shadow MMU sees it; every
// access is made by the "hardware" (the library's walker in the host format over the shadow
// tables: 4-level, 5-level for a 5-level guest, PAE for a 32-bit or PAE guest with the PDPTE
// registers loaded from the shadow root as a VM entry loads them; the host role, no A/D
// updates), and a host fault goes to shadow_mmu::page_fault() whose
// answer is acted on (resume, inject, emulate with the guest walker). `oracle` memory gets the
// same access from the guest walker directly. The two must agree on every access: verdict,
// vector, error code, CR2, the host frame reached, and every byte of guest memory (A/D flags).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <hvkit/paging/shadow/shadow_mmu.hpp>
#include <hvkit/paging/walker.hpp>

namespace shadow_harness {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
namespace shadow = hvkit::paging::shadow;

inline constexpr std::uint64_t guest_frames = 32;         // 128 KiB of guest RAM at gpa 0
inline constexpr std::uint64_t backed_frames = 28;        // frames 28-31: MMIO
inline constexpr std::uint64_t host_ram = 0x1000'0000;    // guest frame f at host_ram + f * 4096
inline constexpr std::uint64_t table_base = 0x4000'0000;  // shadow tables in host memory
inline constexpr unsigned cache_pages = 48;

using storage_type = shadow::static_cache_storage<cache_pages, 4>;

struct outcome {
  bool ok = false;
  bool emulated = false;
  std::uint64_t host = 0;   // ok: host-physical address reached (or guest gpa for MMIO)
  bool mmio = false;
  paging::walk_fault fault{};
  bool loop = false;        // the fault path did not converge
};

inline std::string describe(const outcome& o) {
  if (o.loop) return "LOOP";
  if (o.ok) return std::string(o.mmio ? "mmio " : "ok ") + std::to_string(o.host) + (o.emulated ? " (emulated)" : "");
  return "fault kind=" + std::to_string(static_cast<int>(o.fault.kind)) + " vec=" +
         std::to_string(static_cast<int>(o.fault.vector)) + " ec=" + std::to_string(o.fault.error_code.raw()) +
         " cr2=" + std::to_string(o.fault.linear.value());
}

inline bool same(const outcome& a, const outcome& b) {
  if (a.loop || b.loop) return false;
  if (a.ok != b.ok) return false;
  if (a.ok) return a.host == b.host && a.mmio == b.mmio;
  return a.fault.kind == b.fault.kind && a.fault.vector == b.fault.vector &&
         a.fault.error_code.hardware_bits() == b.fault.error_code.hardware_bits() && a.fault.linear == b.fault.linear;
}

struct machine {
  std::vector<std::uint8_t> sut = std::vector<std::uint8_t>(guest_frames * 4096);
  std::vector<std::uint8_t> oracle = std::vector<std::uint8_t>(guest_frames * 4096);
  std::unique_ptr<storage_type> storage = std::make_unique<storage_type>();
  paging::shadow::page_cache cache{storage->view(x86::hpa{table_base})};
  shadow::linear_frame_map map{x86::hpa{host_ram}, backed_frames};
  paging::cpu_properties props{};
  shadow::shadow_mmu<shadow::linear_frame_map> mmu{cache, map, props};
  paging::cpu_role role{};
  x86::gpa root{};
  paging::pdpte_snapshot pdptes{};
  unsigned faults_taken = 0;

  void write(std::uint64_t gpa, unsigned bytes, std::uint64_t v) {  // both memories (setup)
    for (unsigned i = 0; i < bytes; ++i) sut[gpa + i] = oracle[gpa + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  std::uint64_t read(const std::vector<std::uint8_t>& m, std::uint64_t gpa, unsigned bytes) const {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= std::uint64_t{m[gpa + i]} << (8 * i);
    return v;
  }
  // A guest write to guest-physical memory as an emulated instruction makes it: both
  // memories, and the shadow MMU is told (write protection).
  void guest_store(std::uint64_t gpa, unsigned bytes, std::uint64_t v) {
    write(gpa, bytes, v);
    static_cast<void>(mmu.table_written(x86::gpa{gpa}, bytes));
  }

  shadow::context_answer load(paging::cpu_role r, x86::gpa rt) {
    role = r;
    root = rt;
    pdptes = {};
    if (r.mode() == x86::paging_mode::pae) {
      paging::flat_view v(oracle.data(), oracle.size());
      pdptes = *paging::load_pdptrs(x86::cr3{rt.value()}, v, props.maxphyaddr);
    }
    return mmu.load(r, rt, pdptes);
  }

  paging::walk_result hardware(const paging::walk_request& req) const {
    const paging::cpu_role hr = shadow::host_role(role);
    const paging::mmu_context hctx(hr, x86::gpa{mmu.root().value()});
    paging::flat_view tables(reinterpret_cast<const std::uint8_t*>(storage->tables.data()),
                             sizeof(storage->tables), x86::gpa{table_base});
    paging::walk_request r = req;
    if (!role.lma()) r.linear = x86::gva{req.linear.value() & 0xffff'ffffu};
    if (hr.mode() == x86::paging_mode::pae) {
      // The host's PDPTE registers, loaded from the shadow root at every entry into the guest
      // (VMX without EPT: SDM 27.3.2.4), i.e. before every access here; a reserved bit in one
      // (a VM-entry failure, #GP for a MOV to CR3) is a defect of the shadow MMU.
      const auto p = paging::load_pdptrs(x86::cr3{mmu.root().value()}, tables, props.maxphyaddr);
      if (!p) std::abort();
      if ((mmu.root().value() >> 32) != 0) std::abort();  // CR3 bits 31:5 locate the PDPT
      return paging::walker_pae(paging::make_walker_state(hr, hctx.root(), props, *p)).check(tables, hctx, r);
    }
    if (hr.mode() == x86::paging_mode::five_level)  // a 5-level guest: the host runs with CR4.LA57
      return paging::walker_5level(paging::make_walker_state(hr, hctx.root(), props)).check(tables, hctx, r);
    const paging::walker_4level w(paging::make_walker_state(hr, hctx.root(), props));
    return w.check(tables, hctx, r);
  }

  outcome via_shadow(const paging::walk_request& req) {
    outcome o{};
    for (unsigned attempt = 0; attempt < 4; ++attempt) {
      const auto h = hardware(req);
      if (h) {
        o.ok = true;
        o.host = h->address.value();
        return o;
      }
      ++faults_taken;
      paging::flat_memory m(sut.data(), sut.size());
      const shadow::fault_answer a = mmu.page_fault(m, req);
      switch (a.action) {
        case shadow::fault_action::fixed: continue;
        case shadow::fault_action::inject:
          o.fault = a.fault;
          return o;
        case shadow::fault_action::emulate_mmio:
        case shadow::fault_action::emulate_protected:
        case shadow::fault_action::emulate_access: {
          const auto w = mmu.walker().walk(m, mmu.guest_context(), req);
          o.emulated = true;
          if (!w) {
            o.fault = w.error();
            return o;
          }
          o.ok = true;
          const auto f = map.host_frame(x86::gpa_to_gfn(w->address));
          o.mmio = !f;
          o.host = f ? f->value() + (w->address.value() & 0xfffu) : w->address.value();
          return o;
        }
      }
    }
    o.loop = true;
    return o;
  }

  outcome via_walker(const paging::walk_request& req) {
    outcome o{};
    paging::flat_memory m(oracle.data(), oracle.size());
    const paging::mmu_context ctx(role, root);
    const paging::guest_walker w(ctx, props, pdptes);
    const auto r = w.walk(m, ctx, req);
    if (!r) {
      o.fault = r.error();
      return o;
    }
    o.ok = true;
    const auto f = map.host_frame(x86::gpa_to_gfn(r->address));
    o.mmio = !f;
    o.host = f ? f->value() + (r->address.value() & 0xfffu) : r->address.value();
    return o;
  }

  bool memories_equal() const { return sut == oracle; }
};

}  // namespace shadow_harness
