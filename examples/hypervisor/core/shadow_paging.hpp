// SPDX-License-Identifier: MIT
/// @file
/// @brief Shadow paging for the reference hypervisor (run --shadow): the guest runs without
/// EPT/NPT on host page tables that hvkit's shadow MMU (hvkit/paging/shadow/) builds from the
/// guest's own tables. Vendor-neutral: the exits it needs (#PF, CR writes, INVLPG/INVPCID)
/// reach it through the core's exit loop; a backend that offers shadow paging models
/// `shadow_backend` (the host root into the VMCS/VMCB, a #PF with its CR2 injected, the
/// faulting address and error code, the INVLPG operand). docs/shadow-mmu.md, "Integration".
///
/// Storage: one shadow MMU per vCPU (vcpu_mmu), its shadow pages taken once per boot from the
/// boot's page pool (take(), core/page_pool.hpp), reset at the start of every run (begin()) and
/// reached from the vCPU (vcpu_state::shadow); no heap, no file-scope state.
#pragma once

#include <cstdint>

#include <hvkit/emulate/shadow_vcpu.hpp>
#include <hvkit/paging/shadow/invalidate.hpp>
#include <hvkit/paging/shadow/shadow_mmu.hpp>

#include "backend.hpp"
#include "page_pool.hpp"
#include "state.hpp"

namespace hv::core::shadow {

namespace sp = hvkit::paging::shadow;

/// Guest-physical frames of the guest's memory window map to the same host frames (the
/// hypervisor gives the guest [guest_mem_base, +guest_mem_size) identity-mapped, and the
/// Linux guest also the frames below `low_end`, as its EPT/NPT does), and the frames of an
/// alias [alias_gpa, +alias_size) to those from `alias_target` on (the conformance guests'
/// PSE-36 alias, hc::pse36_alias_gpa, as the EPT/NPT maps it; it holds data only, never a
/// paging structure, whose write protection is per guest frame); every other frame (the
/// MMIO test device, the hypervisor's own memory, unassigned space) is unbacked: its
/// accesses are emulated.
struct frame_alias {
  std::uint64_t gpa = 0, size = 0, target = 0;
};
class identity_window {
 public:
  constexpr identity_window(std::uint64_t base, std::uint64_t size, std::uint64_t low_end = 0,
                            frame_alias a = {}) noexcept
      : first_(base >> 12), count_(size >> 12), low_(low_end >> 12), alias_first_(a.gpa >> 12),
        alias_count_(a.size >> 12), alias_target_(a.target >> 12) {}
  [[nodiscard]] constexpr hvkit::result<hvkit::x86::hpa, hvkit::paging::memory_error> host_frame(
      hvkit::x86::gfn f) const noexcept {
    if (f.value() - alias_first_ < alias_count_)
      return hvkit::x86::hpa{(alias_target_ + (f.value() - alias_first_)) << 12};
    if (f.value() >= low_ && (f.value() < first_ || f.value() - first_ >= count_))
      return hvkit::unexpected(hvkit::paging::memory_error::unbacked);
    return hvkit::x86::hpa{f.value() << 12};
  }

 private:
  std::uint64_t first_, count_, low_, alias_first_, alias_count_, alias_target_;
};
static_assert(sp::frame_map<identity_window>);

using mmu_type = sp::shadow_mmu<identity_window>;

/// Counters for the run's report.
struct stats {
  std::uint64_t faults, fixed, injected, emulated, cr_writes, invlpg, flushes;
  /// The last fixed #PF (exit number, RIP, CR2, error code) and how many times in a row the
  /// very next exit was the same #PF again.
  std::uint64_t last_exit, last_rip, last_cr2;
  std::uint64_t refused;  ///< fixes the CPU refused (the instruction emulated instead)
  std::uint64_t peak_pages;  ///< the most shadow pages in use after a #PF
  /// Protected frames given up for an instruction the emulator does not have (re-executed by
  /// the CPU), and the exit and RIP of the last one (a second one at once is #UD).
  std::uint64_t unprotected, unprotect_exit, unprotect_rip;
  std::uint32_t last_error;
};

/// One vCPU's shadow MMU and what a hypervisor keeps with it: the page cache over its shadow
/// pages (from the boot's page pool), the frame map, the MMU (built by begin() for each run),
/// the guest's CR0/CR3/CR4/EFER (the real ones are the host role's and the shadow root) and
/// the run's counters. The vCPU points to it (vcpu_state::shadow) from begin() on.
struct vcpu_mmu {
  vcpu_mmu(sp::cache_storage s, identity_window w) noexcept : storage{s}, window{w} {}
  sp::cache_storage storage;
  identity_window window;
  sp::page_cache cache{};
  mmu_type* mmu = nullptr;  ///< in mmu_bytes, built by begin()
  alignas(mmu_type) unsigned char mmu_bytes[sizeof(mmu_type)]{};
  hvkit::x86::cr3 guest_cr3{};
  hvkit::x86::cr0 guest_cr0{};
  hvkit::x86::cr4 guest_cr4{};
  hvkit::x86::efer guest_efer{};
  stats counters{};
};

/// True in an image built with HVKIT_HV_SHADOW (run --shadow).
[[nodiscard]] bool enabled() noexcept;
/// A vCPU's shadow MMU with its shadow pages, taken from `pool` once per boot at bring-up: the
/// conformance guest's (its boot tables, the differentials' random tables, a few cached roots)
/// or, `linux_guest`, the larger cache a Linux kernel needs. nullptr when shadow paging is off
/// (nothing taken).
[[nodiscard]] vcpu_mmu* take(page_pool& pool, bool linux_guest) noexcept;
/// The shadow MMU of the vCPU `v` (cache emptied by begin()).
[[nodiscard]] mmu_type& mmu(const vcpu_state& v) noexcept;
/// A fresh run of the vCPU `v` on the shadow MMU `m` (v.shadow = &m from now on; the walker
/// gets v's guest CPU model: MAXPHYADDR and 1-GByte pages): the cache emptied, the counters
/// reset, the guest's paging state (CR0/CR4/EFER, CR3) loaded; returns the host root to run
/// the guest on.
[[nodiscard]] hvkit::x86::hpa begin(vcpu_state& v, vcpu_mmu& m, const hvkit::paging::cr_state& crs,
                                    hvkit::x86::cr3 cr3) noexcept;
/// The Linux guest (run --linux --shadow), before begin(): the memory window of `m` (frames
/// below `low_end` and [base, end) identity-mapped, as its EPT/NPT maps them).
void use_linux_guest(vcpu_mmu& m, std::uint64_t low_end, std::uint64_t base, std::uint64_t end) noexcept;
/// The shadow MMU's totals for the run's report: pages in use and the capacity, cache
/// rebuilds (a full cache zapped), cached roots.
void print_cache_report(const vcpu_state& v, const char* run_name) noexcept;
/// The guest's CR3 (the real one is the shadow root).
[[nodiscard]] hvkit::x86::cr3 guest_cr3(const vcpu_state& v) noexcept;
/// The guest's CR0 (the real CR0.WP is 1: paging::shadow::host_role(); VMX keeps it in the
/// CR0 read shadow too, SVM has no read shadow).
[[nodiscard]] hvkit::x86::cr0 guest_cr0(const vcpu_state& v) noexcept;
/// The guest's CR4 (SVM: the real CR4.PAE is 1 for a guest outside IA-32e mode, host_cr4();
/// VMX keeps the guest's in the CR4 read shadow).
[[nodiscard]] hvkit::x86::cr4 guest_cr4(const vcpu_state& v) noexcept;
/// The real CR4 while the guest runs with CR4 `guest`: the guest's, with PAE set. A guest
/// outside IA-32e mode (32-bit or PAE paging) runs on PAE-format shadow tables
/// (paging::shadow::host_role()), the processor walking the real CR3 in the format of the
/// real CR4.PAE (SDM 4.1.1); in IA-32e mode PAE is 1 already. The other bits of the host role
/// (SMEP, SMAP, PKE, PKS, LA57) are the guest's own.
[[nodiscard]] constexpr hvkit::x86::cr4 host_cr4(hvkit::x86::cr4 guest) noexcept { return guest | hvkit::x86::cr4::pae; }
/// The guest's view of the real CR4 `real` (SVM: no read shadow, CR4 reads intercepted and
/// answered from this, APM Vol. 2 15.9): the real CR4 with the guest's own PAE (host_cr4()).
[[nodiscard]] hvkit::x86::cr4 guest_view_cr4(const vcpu_state& v, hvkit::x86::cr4 real) noexcept;
/// The guest's EFER (the real EFER.NXE is 1: paging::shadow::host_role()).
[[nodiscard]] hvkit::x86::efer guest_efer(const vcpu_state& v) noexcept;
/// The guest's PKRU when its CR4.PKE is set (the real PKRU: the host never writes it; RDPKRU
/// needs CR4.PKE, which the host sets only around the read), else 0.
[[nodiscard]] std::uint32_t guest_pkru(hvkit::x86::cr4 guest_cr4) noexcept;

/// Under shadow paging, why a conformance run does not apply (it needs what only EPT/NPT or a
/// second VM gives); nullptr: it applies, or shadow paging is off. `second_vm`: the run
/// schedules a second guest or VMCS.
[[nodiscard]] const char* not_applicable(const run_config& cfg, bool second_vm) noexcept;

/// Prints the host (shadow) entries the CPU walks for `la` from the current root, and the
/// guest walk's translation (rights, key) for `access`: the evidence when the CPU refuses a fix.
void print_walks(const vcpu_state& v, std::uint64_t la, hvkit::x86::pfec access, std::uint32_t pkru) noexcept;

/// The counters of the vCPU `v`'s shadow MMU (reset by begin()).
[[nodiscard]] stats& counters(const vcpu_state& v) noexcept;

/// A CR write of the vCPU `v` the architectural checks accepted (paging_kind::shadow): the
/// shadow context for the new state (the guest's tables read in its RAM, v.ram). `gp`: a PAE
/// PDPTE with a reserved bit, #GP(0) and nothing changed.
[[nodiscard]] hvkit::emulate::shadow_exit cr_written(const vcpu_state& v, const hvkit::paging::cr_write_outcome& o,
                                                     hvkit::x86::cr3 cr3_after) noexcept;

// clang-format off
/// What a backend adds to `backend` for shadow paging.
template <class B>
concept shadow_backend = backend<B> && requires(B& b, hvkit::x86::hpa root, sp::host_flush f, std::uint64_t a,
                                                std::uint32_t code) {
  { b.page_fault_address() } -> std::same_as<std::uint64_t>;     ///< CR2 of the host #PF (exit qualification / EXITINFO2)
  { b.page_fault_error() } -> std::same_as<std::uint32_t>;       ///< its error code
  { b.invlpg_address() } -> std::same_as<std::uint64_t>;         ///< INVLPG's linear address
  b.load_shadow_root(root, f);                                   ///< real CR3 = root, then the flush
  b.inject_page_fault(a, code);                                  ///< the guest's #PF, CR2 = a
};
// clang-format on

}  // namespace hv::core::shadow
