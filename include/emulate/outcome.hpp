// SPDX-License-Identifier: MIT
/// @file
/// @brief What emulating one instruction produced: done, an exception to inject, an I/O or
/// MMIO access the caller must complete, or an instruction hvkit does not emulate.
///
/// Only `done` commits anything to the context: every other outcome leaves registers,
/// RIP and memory exactly as they were (REP string instructions commit the iterations that
/// completed before it, like the processor: SDM Vol. 2 "REP", interrupted iterations; a
/// needs_io / needs_mmio outcome records the device accesses already performed in
/// context::completed, so that the re-run replays instead of repeating them).
#pragma once

#include <cstdint>

#include "instruction.hpp"
#include "../paging/cr_write.hpp"
#include "../x86/address.hpp"
#include "../x86/contract.hpp"
#include "../x86/pfec.hpp"
#include "../x86/vector.hpp"

namespace hvkit::emulate {

/// The outcome kinds.
enum class outcome_kind : std::uint8_t {
  done,         ///< registers and RIP updated; see `event` for what the caller must act on
  exception,    ///< inject `vector` (with `error_code` if the vector pushes one; CR2 for #PF)
  needs_io,     ///< a port access no platform handler took: complete it and re-run
  needs_mmio,   ///< an MMIO access no device took: complete it and re-run
  unsupported,  ///< not emulated (see `why`); injecting #UD is the architectural default
};

/// Side effects of a `done` instruction the hypervisor must apply beyond the context.
enum class event : std::uint8_t {
  none,
  halt,           ///< HLT: the vCPU halts until an interrupt
  invlpg,         ///< INVLPG: flush `address` (a linear address) from the guest TLB
  cr_write,       ///< MOV to CRn / LMSW / CLTS: `reg` says which CR changed
  dr_write,       ///< MOV to DRn: `reg` says which DR changed
  msr_write,      ///< WRMSR completed through the platform
  descriptor_table_load,  ///< LGDT / LIDT / LLDT / LTR changed GDTR, IDTR, LDTR or TR
  cache_flush,    ///< INVD / WBINVD
};

/// Why an instruction is unsupported.
enum class unsupported_reason : std::uint8_t {
  none,
  instruction,        ///< valid, but outside the subset (or a form of it hvkit does not emulate)
  fetch_not_ram,      ///< the instruction bytes are not in RAM (executing from MMIO)
  page_table_unbacked,///< the guest page tables point outside guest memory
  second_stage_fault, ///< the translator reported an EPT/NPT-stage fault
  invalid_context,    ///< the context is inconsistent (e.g. MAXPHYADDR outside 32..52 for MOV to CR3)
  too_many_device_accesses,  ///< more device accesses before a needs_* than context::completed holds
};

/// The outcome of emulate().
struct outcome {
  outcome_kind kind = outcome_kind::done;
  // exception
  x86::vector vector = x86::vector::ud;
  /// The error code to deliver (0 for vectors without one); for #PF its bits are the
  /// x86::pfec bits, typed by page_fault_error_code().
  std::uint32_t error_code = 0;
  std::uint64_t cr2 = 0;  ///< #PF only: the faulting linear address
  // done
  event what = event::none;
  std::uint8_t reg = 0;       ///< CR/DR number for cr_write / dr_write
  /// cr_write of CR3 with CR4.PCIDE=1 and source bit 63 set: keep the PCID's TLB entries
  /// (SDM 4.10.4.1); bit 63 itself is not stored in CR3.
  bool cr3_noflush = false;
  /// cr_write of CR0/CR4 (and EFER.LMA with CR0.PG): what the guest's MMU must do under
  /// two-dimensional paging (paging::cr_write_actions), for the hypervisor to carry out.
  paging::mmu_actions mmu{};
  /// RFLAGS.TF was 1 when the instruction began: deliver a single-step #DB (DR6.BS) now
  /// that it completed (SDM 18.3.1.4).
  bool single_step = false;
  /// MOV to SS: interrupts and debug traps are inhibited until after the next instruction
  /// (SDM 6.8.3; VMX interruptibility state "blocking by MOV SS").
  bool mov_ss_shadow = false;
  std::uint64_t address = 0;  ///< invlpg: linear address; needs_io: port; needs_mmio: gpa
  // needs_io / needs_mmio
  std::uint8_t size = 0;
  bool write = false;
  std::uint64_t value = 0;    ///< the value to write (writes)
  // unsupported
  unsupported_reason why = unsupported_reason::none;
  mnemonic op = mnemonic::invalid;  ///< the instruction (when it was decoded)

  [[nodiscard]] static constexpr outcome make_done(event e = event::none) noexcept {
    outcome o;
    o.what = e;
    return o;
  }
  [[nodiscard]] static constexpr outcome make_exception(x86::vector v, std::uint32_t ec = 0, std::uint64_t cr2 = 0) noexcept {
    outcome o;
    o.kind = outcome_kind::exception;
    o.vector = v;
    // The emulator raises only vectors 0-21, whose error codes both vendors push alike.
    o.error_code = x86::has_error_code(v, x86::vendor::intel) ? ec : 0;
    o.cr2 = cr2;
    return o;
  }
  /// A #PF with error code `ec` (only its architectural bits are delivered; software flags
  /// such as pfec::implicit_access are dropped) and CR2 = `linear` (SDM 4.7, 6.15 "#PF").
  [[nodiscard]] static constexpr outcome make_page_fault(x86::pfec ec, x86::gva linear) noexcept {
    return make_exception(x86::vector::pf, static_cast<std::uint32_t>(ec.hardware_bits().raw()), linear.value());
  }
  [[nodiscard]] static constexpr outcome make_unsupported(unsupported_reason r) noexcept {
    outcome o;
    o.kind = outcome_kind::unsupported;
    o.vector = x86::vector::ud;
    o.why = r;
    return o;
  }
  [[nodiscard]] constexpr bool is_done() const noexcept { return kind == outcome_kind::done; }
  [[nodiscard]] constexpr bool is_exception() const noexcept { return kind == outcome_kind::exception; }
  /// True if this is a #PF to inject.
  [[nodiscard]] constexpr bool is_page_fault() const noexcept { return is_exception() && vector == x86::vector::pf; }
  /// The #PF error code as typed bits (SDM 4.7, Figure 4-12). Only for a #PF (contract).
  [[nodiscard]] constexpr x86::pfec page_fault_error_code() const noexcept {
    HVKIT_EXPECTS(is_page_fault());
    return x86::pfec{error_code};
  }
};

}  // namespace hvkit::emulate
