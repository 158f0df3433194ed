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
/// differentials' random tables, a few cached roots. 4 KiB each, in the image's .bss (the
/// hypervisor runs identity-mapped: an address is its host-physical address).
constexpr unsigned shadow_pages = 256;
alignas(4096) constinit sp::static_cache_storage<shadow_pages, 8> storage{};
/// The conformance guests' RAM, and the 32-bit guest's PSE-36 alias: [4 GiB + 28 MiB, +4 MiB)
/// onto 28 MiB, as the EPT/NPT maps it (vmx_setup.cpp, svm_setup.cpp).
constinit identity_window window{layout::guest_mem_base, layout::guest_mem_size, 0,
                                 {hc::pse36_alias_gpa + 0x1C00000, 0x400000, 0x1C00000}};
#ifdef HVKIT_HV_SHADOW
/// Shadow pages for the Linux guest (run --linux --shadow): the kernel's direct map (its
/// 2 MiB pages are mapped by 4 KiB host pages: one direct shadow page per guest large page
/// touched), its page tables and those of every process, roots for the processes' CR3 and
/// both CR0.WP values (the Debian kernel to its shell, the checks and the module: 178 at
/// most). 4 MiB in the image's .bss, which must stay below 16 MiB (linker.ld).
/// A full cache is zapped and rebuilt (counted: print_cache_report()).
constexpr unsigned linux_shadow_pages = 1024;
alignas(4096) constinit sp::static_cache_storage<linux_shadow_pages, 16> linux_storage{};
#endif
bool linux_guest = false;
sp::page_cache cache;
alignas(mmu_type) unsigned char mmu_bytes[sizeof(mmu_type)];
mmu_type* the_mmu = nullptr;
x86::cr3 guest_cr3_value{};
x86::cr0 guest_cr0_value{};
x86::cr4 guest_cr4_value{};
x86::efer guest_efer_value{};
constinit stats the_stats{};
/// Write flooding (paging::shadow::shadow_mmu::set_write_flood_threshold()): a protected frame
/// is unprotected after this many emulated writes with no fix-up through its shadow page in
/// between (docs/shadow-mmu.md); 0 turns the rule off (CMake HVKIT_HV_SHADOW_WRITE_FLOOD).
#ifndef HVKIT_HV_SHADOW_WRITE_FLOOD
#define HVKIT_HV_SHADOW_WRITE_FLOOD 4
#endif
constexpr unsigned write_flood_threshold = HVKIT_HV_SHADOW_WRITE_FLOOD;
}  // namespace

bool enabled() noexcept {
#ifdef HVKIT_HV_SHADOW
  return true;
#else
  return false;
#endif
}

mmu_type& mmu(const vcpu_state&) noexcept { return *the_mmu; }
stats& counters(const vcpu_state&) noexcept { return the_stats; }
x86::cr3 guest_cr3(const vcpu_state&) noexcept { return guest_cr3_value; }
x86::efer guest_efer(const vcpu_state&) noexcept { return guest_efer_value; }
x86::cr0 guest_cr0(const vcpu_state&) noexcept { return guest_cr0_value; }
x86::cr4 guest_cr4(const vcpu_state&) noexcept { return guest_cr4_value; }
x86::cr4 guest_view_cr4(const vcpu_state&, x86::cr4 real) noexcept {
  return guest_cr4_value.test(x86::cr4::pae) ? real : real.without(x86::cr4::pae);
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

void use_linux_guest(const vcpu_state&, std::uint64_t low_end, std::uint64_t base, std::uint64_t end) noexcept {
  window = identity_window{base, end - base, low_end};
  linux_guest = true;
}

void print_cache_report(const vcpu_state&, const char* run_name) noexcept {
  if (!the_mmu) return;
  const sp::page_cache& c = the_mmu->cache();
  kprintf("HVKIT SHADOW run=%s pages_used=%u pages_peak=%llu capacity=%u rebuilds=%u faults=%llu fixed=%llu "
          "injected=%llu emulated=%llu unprotected=%llu flood_threshold=%u flood_unprotected=%llu cr_writes=%llu "
          "invlpg=%llu refused=%llu\n",
          run_name, c.used(), (unsigned long long)the_stats.peak_pages, static_cast<unsigned>(c.capacity()),
          the_mmu->rebuilds(), (unsigned long long)the_stats.faults, (unsigned long long)the_stats.fixed,
          (unsigned long long)the_stats.injected, (unsigned long long)the_stats.emulated,
          (unsigned long long)the_stats.unprotected, the_mmu->write_flood_threshold(),
          (unsigned long long)the_mmu->flood_unprotects(),
          (unsigned long long)the_stats.cr_writes, (unsigned long long)the_stats.invlpg,
          (unsigned long long)the_stats.refused);
}

x86::hpa begin(const vcpu_state& v, const pg::cr_state& crs, x86::cr3 cr3) noexcept {
#ifdef HVKIT_HV_SHADOW
  if (linux_guest)
    cache = sp::page_cache{linux_storage.view(x86::hpa{reinterpret_cast<std::uint64_t>(linux_storage.tables.data())})};
  else
#endif
    cache = sp::page_cache{storage.view(x86::hpa{reinterpret_cast<std::uint64_t>(storage.tables.data())})};
  the_mmu = new (mmu_bytes) mmu_type(cache, window, guest_cpu_properties(v.cpu->model));
  the_mmu->set_write_flood_threshold(write_flood_threshold);
  the_stats = {};
  guest_cr3_value = cr3;
  guest_efer_value = crs.efer;
  guest_cr0_value = crs.cr0;
  guest_cr4_value = crs.cr4;
  const pg::cpu_role role = pg::make_cpu_role(crs.cr0, crs.cr4, crs.efer);
  const unsigned maxphyaddr = v.cpu->model.maxphyaddr;
  return the_mmu->load(role, x86::cr3_root(cr3, role.mode(), maxphyaddr)).root;
}

void print_walks(const vcpu_state& v, std::uint64_t la, x86::pfec access, std::uint32_t pkru) noexcept {
  std::uint64_t table = the_mmu->root().value();
  // The host format's levels: a PAE root is a PDPT (index la bits 31:30, the la 32 bits).
  for (int level = static_cast<int>(sp::host_levels(the_mmu->role())); level >= 1; --level) {
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
  const auto w = the_mmu->walker().check(mem, the_mmu->guest_context(), r);
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
  ++the_stats.cr_writes;
#ifdef HVKIT_HV_SHADOW_NO_ROOT_CACHE
  // The CR0.WP table's baseline (run --shadow-no-root-cache): a role change starts from an
  // empty cache, as a shadow MMU that keeps no root per role would (then a full flush).
  const bool zap = o.cr != 3 && !(pg::make_cpu_role(o.after.cr0, o.after.cr4, o.after.efer) == the_mmu->role());
  if (zap) the_mmu->cache().zap_all();
#endif
  hvkit::emulate::shadow_exit e =
      hvkit::emulate::shadow_cr_write(*the_mmu, o, cr3_after, guest_ram_view(v.ram), v.cpu->model.maxphyaddr);
#ifdef HVKIT_HV_SHADOW_NO_ROOT_CACHE
  if (zap) e.flush = sp::host_flush::all;
#endif
  if (e.action == hvkit::emulate::shadow_exit_action::resume) {
    guest_cr3_value = cr3_after;
    if (o.cr != 3) {  // a MOV to CR3's outcome carries no CR0/EFER
      guest_efer_value = o.after.efer;
      guest_cr0_value = o.after.cr0;
      guest_cr4_value = o.after.cr4;
    }
  }
  return e;
}

}  // namespace hv::core::shadow
