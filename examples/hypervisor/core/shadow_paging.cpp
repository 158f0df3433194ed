// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the shadow MMU's storage and context (core/shadow_paging.hpp).
#include "shadow_paging.hpp"

#include <new>

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
constinit identity_window window{layout::guest_mem_base, layout::guest_mem_size};
sp::page_cache cache;
alignas(mmu_type) unsigned char mmu_bytes[sizeof(mmu_type)];
mmu_type* the_mmu = nullptr;
x86::cr3 guest_cr3_value{};
x86::efer guest_efer_value{};
constinit stats the_stats{};
}  // namespace

bool enabled() noexcept {
#ifdef HVKIT_HV_SHADOW
  return true;
#else
  return false;
#endif
}

mmu_type& mmu() noexcept { return *the_mmu; }
stats& counters() noexcept { return the_stats; }
x86::cr3 guest_cr3() noexcept { return guest_cr3_value; }
void set_guest_cr3(x86::cr3 v) noexcept { guest_cr3_value = v; }
x86::efer guest_efer() noexcept { return guest_efer_value; }

x86::hpa begin(const pg::cr_state& crs, x86::cr3 cr3) noexcept {
  cache = sp::page_cache{storage.view(x86::hpa{reinterpret_cast<std::uint64_t>(storage.tables.data())})};
  the_mmu = new (mmu_bytes) mmu_type(cache, window, guest_cpu_properties());
  the_stats = {};
  guest_cr3_value = cr3;
  guest_efer_value = crs.efer;
  const pg::cpu_role role = pg::make_cpu_role(crs.cr0, crs.cr4, crs.efer);
  const unsigned maxphyaddr = guest_cpu_properties().maxphyaddr;
  return the_mmu->load(role, x86::cr3_root(cr3, role.mode(), maxphyaddr)).root;
}

hvkit::emulate::shadow_exit cr_written(const pg::cr_write_outcome& o, x86::cr3 cr3_after) noexcept {
  ++the_stats.cr_writes;
  const hvkit::emulate::shadow_exit e =
      hvkit::emulate::shadow_cr_write(*the_mmu, o, cr3_after, guest_ram_view(), guest_cpu_properties().maxphyaddr);
  if (e.action == hvkit::emulate::shadow_exit_action::resume) {
    guest_cr3_value = cr3_after;
    if (o.cr != 3) guest_efer_value = o.after.efer;  // a MOV to CR3's outcome carries no EFER
  }
  return e;
}

}  // namespace hv::core::shadow
