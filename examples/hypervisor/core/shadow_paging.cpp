// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the shadow MMU's storage and context (core/shadow_paging.hpp).
#include "shadow_paging.hpp"

#include <new>

#include "../hypercall.hpp"
#include "../layout.hpp"
#include "report.hpp"

namespace hv::core::shadow {

namespace {
namespace x86 = hvkit::x86;
namespace pg = hvkit::paging;

/// Shadow pages for the conformance guest: its boot tables (4 GiB in 2 MiB pages), the
/// differentials' random tables, a few cached roots. 4 KiB each (1 MiB), from the boot's page
/// pool (the hypervisor runs identity-mapped: an address is its host-physical address).
using conformance_storage = sp::static_cache_storage<256, 8>;
/// Shadow pages for the Linux guest (run --linux --shadow): the kernel's direct map (its
/// 2 MiB pages are mapped by 4 KiB host pages: one direct shadow page per guest large page
/// touched), its page tables and those of every process, roots for the processes' CR3 and
/// both CR0.WP values (the Debian kernel to its shell, the checks and the module: 178 at
/// most). 4 MiB from the Linux boot's page pool. A full cache is zapped and rebuilt (counted:
/// print_cache_report()).
using linux_storage = sp::static_cache_storage<1024, 16>;
/// The conformance guests' RAM, and the 32-bit guest's PSE-36 alias: [4 GiB + 28 MiB, +4 MiB)
/// onto 28 MiB, as the EPT/NPT maps it (vmx_setup.cpp, svm_setup.cpp).
constexpr identity_window conformance_window{layout::guest_mem_base, layout::guest_mem_size, 0,
                                             {hc::pse36_alias_gpa + 0x1C00000, 0x400000, 0x1C00000}};
/// Write flooding (paging::shadow::shadow_mmu::set_write_flood_threshold()): a protected frame
/// is unprotected after this many emulated writes with no fix-up through its shadow page in
/// between (docs/shadow-mmu.md); 0 turns the rule off (CMake HVKIT_HV_SHADOW_WRITE_FLOOD).
#ifndef HVKIT_HV_SHADOW_WRITE_FLOOD
#define HVKIT_HV_SHADOW_WRITE_FLOOD 4
#endif
constexpr unsigned write_flood_threshold = HVKIT_HV_SHADOW_WRITE_FLOOD;

template <class S>
sp::cache_storage take_storage(page_pool& pool) noexcept {
  S& s = *::new (pool.take_bytes(sizeof(S), alignof(S))) S;
  return s.view(x86::hpa{reinterpret_cast<std::uint64_t>(s.tables.data())});
}
}  // namespace

bool enabled() noexcept {
#ifdef HVKIT_HV_SHADOW
  return true;
#else
  return false;
#endif
}

vcpu_mmu* take(page_pool& pool, bool linux_guest) noexcept {
  if (!enabled()) return nullptr;
  const sp::cache_storage s = linux_guest ? take_storage<linux_storage>(pool) : take_storage<conformance_storage>(pool);
  vcpu_mmu& m = *::new (pool.take_bytes(sizeof(vcpu_mmu), alignof(vcpu_mmu))) vcpu_mmu{s, conformance_window};
  return &m;
}

mmu_type& mmu(const vcpu_state& v) noexcept { return *v.shadow->mmu; }
stats& counters(const vcpu_state& v) noexcept { return v.shadow->counters; }
x86::cr3 guest_cr3(const vcpu_state& v) noexcept { return v.shadow->guest_cr3; }
x86::efer guest_efer(const vcpu_state& v) noexcept { return v.shadow->guest_efer; }
x86::cr0 guest_cr0(const vcpu_state& v) noexcept { return v.shadow->guest_cr0; }
x86::cr4 guest_cr4(const vcpu_state& v) noexcept { return v.shadow->guest_cr4; }
x86::cr4 guest_view_cr4(const vcpu_state& v, x86::cr4 real) noexcept {
  return v.shadow->guest_cr4.test(x86::cr4::pae) ? real : real.without(x86::cr4::pae);
}

std::uint32_t guest_pkru(x86::cr4 guest_cr4) noexcept {
  if (!guest_cr4.test(x86::cr4::pke)) return 0;
  std::uint64_t cr4;
  std::uint32_t pkru, edx;
  asm volatile("mov %%cr4, %0" : "=r"(cr4));
  const std::uint64_t with_pke = cr4 | x86::cr4::pke.raw();
  asm volatile("mov %0, %%cr4" ::"r"(with_pke) : "memory");
  asm volatile("rdpkru" : "=a"(pkru), "=d"(edx) : "c"(0));
  asm volatile("mov %0, %%cr4" ::"r"(cr4) : "memory");
  return pkru;
}

void use_linux_guest(vcpu_mmu& m, std::uint64_t low_end, std::uint64_t base, std::uint64_t end) noexcept {
  m.window = identity_window{base, end - base, low_end};
}

void print_cache_report(const vcpu_state& v, const char* run_name) noexcept {
  if (!v.shadow || !v.shadow->mmu) return;
  const mmu_type& mmu = *v.shadow->mmu;
  const stats& st = v.shadow->counters;
  const sp::page_cache& c = v.shadow->cache;
  kprintf("HVKIT SHADOW run=%s pages_used=%u pages_peak=%llu capacity=%u rebuilds=%u faults=%llu fixed=%llu "
          "injected=%llu emulated=%llu unprotected=%llu flood_threshold=%u flood_unprotected=%llu cr_writes=%llu "
          "invlpg=%llu refused=%llu\n",
          run_name, c.used(), (unsigned long long)st.peak_pages, static_cast<unsigned>(c.capacity()), mmu.rebuilds(),
          (unsigned long long)st.faults, (unsigned long long)st.fixed, (unsigned long long)st.injected,
          (unsigned long long)st.emulated, (unsigned long long)st.unprotected, mmu.write_flood_threshold(),
          (unsigned long long)mmu.flood_unprotects(), (unsigned long long)st.cr_writes,
          (unsigned long long)st.invlpg, (unsigned long long)st.refused);
}

x86::hpa begin(vcpu_state& v, vcpu_mmu& m, const pg::cr_state& crs, x86::cr3 cr3) noexcept {
  v.shadow = &m;
  m.cache = sp::page_cache{m.storage};
  m.mmu = ::new (m.mmu_bytes) mmu_type(m.cache, m.window, guest_cpu_properties(v.cpu->model));
  m.mmu->set_write_flood_threshold(write_flood_threshold);
  m.counters = {};
  m.guest_cr3 = cr3;
  m.guest_efer = crs.efer;
  m.guest_cr0 = crs.cr0;
  m.guest_cr4 = crs.cr4;
  const pg::cpu_role role = pg::make_cpu_role(crs.cr0, crs.cr4, crs.efer);
  const unsigned maxphyaddr = v.cpu->model.maxphyaddr;
  return m.mmu->load(role, x86::cr3_root(cr3, role.mode(), maxphyaddr)).root;
}

void print_walks(const vcpu_state& v, std::uint64_t la, x86::pfec access, std::uint32_t pkru) noexcept {
  const mmu_type& mmu = *v.shadow->mmu;
  std::uint64_t table = mmu.root().value();
  // The host format's levels: a PAE root is a PDPT (index la bits 31:30, the la 32 bits).
  for (int level = static_cast<int>(sp::host_levels(mmu.role())); level >= 1; --level) {
    const std::uint64_t e = reinterpret_cast<const std::uint64_t*>(table)[(la >> (12 + 9 * (level - 1))) & 511];
    kprintf("HVKIT INFO shadow host_walk level=%d entry=0x%016llx\n", level, (unsigned long long)e);
    if (!(e & 1) || (e & 0x80)) break;
    table = e & 0x000f'ffff'ffff'f000ull;
  }
  hvkit::paging::flat_memory mem = guest_ram_view(v.ram);
  hvkit::paging::walk_request r{};
  r.linear = x86::gva{la};
  r.access = access;
  r.pkru = pkru;
  const auto w = mmu.walker().check(mem, mmu.guest_context(), r);
  if (w)
    kprintf("HVKIT INFO shadow guest_walk gpa=0x%llx rights=0x%x pkey=%u leaf=0x%016llx levels=%u\n",
            (unsigned long long)w->address.value(), static_cast<unsigned>(w->rights.raw()), static_cast<unsigned>(w->pkey),
            (unsigned long long)w->path.values[w->path.count - 1u], static_cast<unsigned>(w->path.count));
  else
    kprintf("HVKIT INFO shadow guest_walk fault error=0x%llx\n", (unsigned long long)w.error().error_code.raw());
}

const char* not_applicable(const run_config& cfg, bool second_vm) noexcept {
  if (!enabled()) return nullptr;
  if (cfg.guest_flags & hc::cfg_ept_diff) return "second_stage_differential_needs_ept_or_npt";
  // A second guest needs a second shadow MMU, which the hypervisor does not keep.
  if (second_vm) return "second_vm_needs_its_own_shadow_mmu";
  return nullptr;
}

hvkit::emulate::shadow_exit cr_written(const vcpu_state& v, const pg::cr_write_outcome& o, x86::cr3 cr3_after) noexcept {
  vcpu_mmu& m = *v.shadow;
  mmu_type& mmu = *m.mmu;
  ++m.counters.cr_writes;
#ifdef HVKIT_HV_SHADOW_NO_ROOT_CACHE
  // The CR0.WP table's baseline (run --shadow-no-root-cache): a role change starts from an
  // empty cache, as a shadow MMU that keeps no root per role would (then a full flush).
  const bool zap = o.cr != 3 && !(pg::make_cpu_role(o.after.cr0, o.after.cr4, o.after.efer) == mmu.role());
  if (zap) mmu.cache().zap_all();
#endif
  hvkit::emulate::shadow_exit e =
      hvkit::emulate::shadow_cr_write(mmu, o, cr3_after, guest_ram_view(v.ram), v.cpu->model.maxphyaddr);
#ifdef HVKIT_HV_SHADOW_NO_ROOT_CACHE
  if (zap) e.flush = sp::host_flush::all;
#endif
  if (e.action == hvkit::emulate::shadow_exit_action::resume) {
    m.guest_cr3 = cr3_after;
    if (o.cr != 3) {  // a MOV to CR3's outcome carries no CR0/EFER
      m.guest_efer = o.after.efer;
      m.guest_cr0 = o.after.cr0;
      m.guest_cr4 = o.after.cr4;
    }
  }
  return e;
}

}  // namespace hv::core::shadow
