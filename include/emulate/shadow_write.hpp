// SPDX-License-Identifier: MIT
/// @file
/// @brief The shadow MMU's emulation answers carried out by the emulator: the faulting
/// instruction runs through emulate::emulate() over the guest's own tables (the shadow
/// MMU's walker), every guest-RAM write it makes is reported to the shadow MMU, which zaps
/// the shadow entries mirroring what changed.
///
/// This is the glue between paging/shadow/ (which cannot include emulate/: emulate/ includes
/// paging/) and the emulator; it lives here, one layer above both (docs/architecture.md).
///
/// @code
///   const auto a = mmu.page_fault(guest_memory, request);
///   if (a.action == paging::shadow::fault_action::emulate_protected) {
///     emulate::context ctx = ...;                        // from the VMCS/VMCB adapter
///     const auto r = emulate::emulate_on_shadow(mmu, ctx, ram, devices);
///     // r.emulated: done (store ctx back), exception (inject), needs_mmio/needs_io, unsupported
///     // r.flush: the host TLB work for the shadow entries that were zapped
///   }
/// @endcode
///
/// Why every write is reported, not only the one at the faulting address: the instruction
/// may write more than the faulting entry (REP STOS/MOVS over a table, an access split at a
/// page boundary, an XCHG whose other operand is memory), and a write the shadow MMU does not
/// hear about would leave a shadow entry the guest's tables no longer give (SDM 4.10.4.1
/// only allows stale translations until the next invalidation, and the shadow MMU tells the
/// guest none is needed: paging/shadow/invalidate.hpp). A report for a frame the MMU does not
/// mirror costs one hash probe.
///
/// The guest walks of the emulated instruction (its fetch and data accesses) use the shadow
/// MMU's walker and context, with the live CR0.WP from `ctx.cr0` (the translator refreshes
/// it), and set A/D flags in the guest's tables as the processor would (SDM 4.8). A/D updates
/// need no report: a shadow entry never grants more than the A/D state it was built from
/// allows (a clean leaf is read-only; the next write faults and rebuilds it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "context.hpp"
#include "emulator.hpp"
#include "outcome.hpp"
#include "platform.hpp"
#include "../paging/guest_memory.hpp"
#include "../paging/mmu.hpp"
#include "../paging/shadow/fault_answer.hpp"
#include "../paging/shadow/frame_map.hpp"
#include "../paging/shadow/shadow_mmu.hpp"
#include "../paging/walk_result.hpp"
#include "../paging/walker.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/result.hpp"

namespace hvkit::emulate {

/// The emulator's translator over a shadow MMU: the guest walk of the MMU's current context
/// (the guest's own tables, PDPTE registers included), refreshed from the live CR0.
template <paging::shadow::frame_map Map, paging::writable_guest_memory Tables>
class shadow_translator {
 public:
  constexpr shadow_translator(const paging::shadow::shadow_mmu<Map>& mmu, Tables& tables) noexcept
      : ctx_(mmu.guest_context()), walker_(&mmu.walker()), tables_(&tables) {}

  constexpr bool refresh_passthrough_bits(x86::cr0 live) noexcept { return ctx_.refresh_passthrough_bits(live); }
  [[nodiscard]] constexpr paging::walk_result walk(const paging::walk_request& req) noexcept {
    return walker_->walk(*tables_, ctx_, req);
  }

 private:
  paging::mmu_context ctx_;
  const paging::guest_walker* walker_;
  Tables* tables_;
};

/// Guest RAM that reports every successful write (plain or compare-exchange) to the shadow
/// MMU with shadow_mmu::table_written(), collecting the host TLB work it asks for.
template <paging::shadow::frame_map Map, guest_ram Ram>
class shadow_reporting_ram {
 public:
  constexpr shadow_reporting_ram(paging::shadow::shadow_mmu<Map>& mmu, Ram& ram) noexcept : mmu_(&mmu), ram_(&ram) {}

  [[nodiscard]] constexpr bool read(x86::gpa a, std::uint8_t* out, std::size_t n) const noexcept {
    return ram_->read(a, out, n);
  }
  [[nodiscard]] constexpr bool write(x86::gpa a, const std::uint8_t* in, std::size_t n) noexcept {
    if (!ram_->write(a, in, n)) return false;
    report(a, n);
    return true;
  }
  [[nodiscard]] constexpr result<bool, paging::memory_error> cmpxchg(x86::gpa a, unsigned bytes, std::uint64_t expected,
                                                                      std::uint64_t desired) noexcept {
    const auto r = ram_->cmpxchg(a, bytes, expected, desired);
    if (r && r.value()) report(a, bytes);
    return r;
  }

  /// The merged host TLB work of every report so far.
  [[nodiscard]] constexpr paging::shadow::host_flush flush() const noexcept { return flush_; }
  /// Bytes reported so far.
  [[nodiscard]] constexpr std::uint64_t bytes_written() const noexcept { return bytes_; }

 private:
  constexpr void report(x86::gpa a, std::size_t n) noexcept {
    bytes_ += n;
    // The emulator writes at most one page piece at a time (it splits at 4 KiB), so n fits.
    flush_ = paging::shadow::merge(flush_, mmu_->table_written(a, static_cast<unsigned>(n)));
  }

  paging::shadow::shadow_mmu<Map>* mmu_;
  Ram* ram_;
  paging::shadow::host_flush flush_ = paging::shadow::host_flush::none;
  std::uint64_t bytes_ = 0;
};

/// What emulate_on_shadow() did.
struct shadow_emulation {
  /// The emulator's outcome: `done` (ctx updated: store it back; act on `what`, e.g. a CR
  /// write goes to paging::shadow::control_registers_written()), `exception` (inject it; a
  /// #PF comes from the guest's own tables), `needs_mmio` / `needs_io` (complete it and call
  /// again with ctx.pending), `unsupported` (#UD is the architectural default).
  outcome emulated{};
  /// The host TLB work for the shadow entries zapped by the instruction's writes (apply it
  /// before resuming; INVVPID single-context / ASID flush for `all`).
  paging::shadow::host_flush flush = paging::shadow::host_flush::none;
  /// Guest-RAM bytes the instruction wrote (each reported to the shadow MMU).
  std::uint64_t bytes_written = 0;
};

/// Carries out an `emulate_protected`, `emulate_access` or `emulate_mmio` answer of
/// shadow_mmu::page_fault(): emulates the instruction at ctx CS:RIP over the guest's own
/// tables (`ram` must model both emulate::guest_ram and paging::writable_guest_memory, like
/// emulate::flat_ram), MMIO going to `plat`, and reports every guest-RAM write to `mmu`, which
/// zaps the shadow entries that mirror the bytes written (shadow_mmu::table_written()).
/// Guest entries are thus updated by the emulated instruction itself, exactly as the
/// processor would have written them, and the next access rebuilds the shadow from them.
template <paging::shadow::frame_map Map, class Ram, platform P>
  requires guest_ram<Ram> && paging::writable_guest_memory<Ram>
[[nodiscard]] constexpr shadow_emulation emulate_on_shadow(paging::shadow::shadow_mmu<Map>& mmu, context& ctx, Ram& ram,
                                                           P& plat) noexcept {
  shadow_translator<Map, Ram> tr{mmu, ram};
  shadow_reporting_ram<Map, Ram> rr{mmu, ram};
  shadow_emulation r;
  r.emulated = emulate::emulate(ctx, tr, rr, plat);
  r.flush = rr.flush();
  r.bytes_written = rr.bytes_written();
  return r;
}

}  // namespace hvkit::emulate
