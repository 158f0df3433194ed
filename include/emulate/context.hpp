// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulation context: the guest state an exiting instruction can read or change.
///
/// Fill it from the VMCS (or a snapshot) before emulate(), copy back what changed after a
/// `done` outcome. General-purpose registers are numbered as in the encoding (0 = rAX ...
/// 15 = r15). CPL is explicit (SDM 5.5: the DPL of SS/CS; 0 in real mode, 3 in virtual-8086
/// mode), so the caller decides where it comes from.
#pragma once

#include <array>
#include <cstdint>

#include "instruction.hpp"
#include "segment.hpp"
#include "../x86/address.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/efer.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::emulate {

/// The operating mode the instruction runs in (SDM 2.2, 3.4.5, 5.2.1).
enum class cpu_mode : std::uint8_t {
  real,       ///< CR0.PE = 0
  vm86,       ///< protected mode with RFLAGS.VM = 1
  protected_, ///< protected mode (legacy, or compatibility mode with EFER.LMA = 1)
  long64,     ///< 64-bit mode: EFER.LMA = 1 and CS.L = 1
};

/// A completion the caller supplies for an access that produced needs_io / needs_mmio: the
/// emulator re-executes the instruction and uses it for the matching access instead of
/// asking the platform (a read takes `value`; a write is taken as done).
struct completion {
  enum class kind : std::uint8_t { none, pio, mmio };
  kind what = kind::none;
  std::uint64_t address = 0;  ///< port or guest-physical address
  std::uint8_t size = 0;
  bool write = false;
  std::uint64_t value = 0;
};

/// Guest state for the emulator.
struct context {
  std::array<std::uint64_t, 16> gpr{};
  std::uint64_t rip = 0;
  x86::rflags rflags{0x2};
  /// ES, CS, SS, DS, FS, GS, indexed by emulate::sreg.
  std::array<segment, 6> seg{};
  segment ldtr{0, 0, 0, segment_ar{0x10082}};  ///< default: unusable LDT
  segment tr{0, 0, 0xffff, segment_ar{0x8b}};  ///< default: busy 32-bit TSS
  descriptor_table gdtr{};
  descriptor_table idtr{0, 0xffff};
  x86::cr0 cr0{0x10};  ///< the live CR0, as the guest sees it (guest-owned bits included)
  std::uint64_t cr2 = 0;
  x86::cr3 cr3{};
  x86::cr4 cr4{};
  std::uint64_t cr8 = 0;
  x86::efer efer{};
  /// DR0-DR3, DR6, DR7 at indexes 0-3, 6, 7 (4 and 5 unused: they alias 6 and 7).
  std::array<std::uint64_t, 8> dr{0, 0, 0, 0, 0, 0, 0xffff0ff0u, 0x400};
  std::uint8_t cpl = 0;
  std::uint32_t pkru = 0;  ///< PKRU, for user-mode pages with CR4.PKE
  std::uint32_t pkrs = 0;  ///< IA32_PKRS, for supervisor-mode pages with CR4.PKS
  /// MAXPHYADDR (CPUID.80000008H:EAX[7:0], 32..52), for the CR3 reserved-bit check in
  /// IA-32e mode (x86::check_cr3_write); outside 32..52 MOV to CR3 there is `unsupported`
  /// (`invalid_context`). Default: x86::default_maxphyaddr (36). This field, `lam` and
  /// `cr4_allowed` are the guest CPU model's: emulate::apply_cpu_model() sets all three from
  /// a cpuid::guest_cpu_model.
  std::uint8_t maxphyaddr = static_cast<std::uint8_t>(x86::default_maxphyaddr);
  /// The guest has LAM (CPUID.(EAX=07H,ECX=1):EAX[26]): CR3 bits 61 and 62 may be set.
  bool lam = false;
  /// The CR4 bits the guest may set, from its CPUID policy (e.g. no FSGSBASE if CPUID hides
  /// it): MOV to CR4 with any other bit is #GP(0) (SDM 2.5, Vol. 2B MOV CR). The default,
  /// every bit x86::cr4 names, only suits a guest that sees every feature; a hypervisor
  /// passes what its CPUID policy exposes (the same set as vmx::cr_mask_features).
  x86::cr4 cr4_allowed = x86::cr4::defined;
  /// The guest's CPUID enumerates CMPXCHG8B (CPUID.01H:EDX.CX8[bit 8]) and CMPXCHG16B
  /// (CPUID.01H:ECX.CX16[bit 13]); without it the instruction is #UD (SDM Vol. 2A
  /// CMPXCHG8B/CMPXCHG16B). Default: both, as on every 64-bit processor; apply_cpu_model()
  /// sets them from the guest CPU model.
  bool cx8 = true;
  bool cx16 = true;
  completion pending{};
  /// Device accesses (MMIO, ports) the instruction already performed before its last
  /// needs_io / needs_mmio outcome, in program order: the emulator records them there (the
  /// one change a non-`done` outcome makes to the context) and replays them, instead of
  /// repeating them, when the instruction is re-run with `pending`. A read-modify-write of
  /// an unclaimed MMIO location thus takes two completions: the read, then the write.
  /// Cleared on `done`. A caller that abandons the instruction clears it with `pending`.
  std::array<completion, 4> completed{};

  [[nodiscard]] constexpr segment& operator[](sreg s) noexcept { return seg[static_cast<unsigned>(s)]; }
  [[nodiscard]] constexpr const segment& operator[](sreg s) const noexcept { return seg[static_cast<unsigned>(s)]; }

  /// The operating mode (SDM 2.2).
  [[nodiscard]] constexpr cpu_mode mode() const noexcept {
    if (!cr0.test(x86::cr0::pe)) return cpu_mode::real;
    if (efer.test(x86::efer::lma)) {
      return (*this)[sreg::cs].ar.test(segment_ar::l) ? cpu_mode::long64 : cpu_mode::protected_;
    }
    return rflags.test(x86::rflags::vm) ? cpu_mode::vm86 : cpu_mode::protected_;
  }
  /// The code size the decoder uses: CS.L, then CS.D (SDM 3.4.5, 5.2.1).
  [[nodiscard]] constexpr code_size code() const noexcept {
    switch (mode()) {
      case cpu_mode::long64: return code_size::c64;
      case cpu_mode::real:
      case cpu_mode::vm86: return code_size::c16;
      case cpu_mode::protected_: break;
    }
    return (*this)[sreg::cs].ar.test(segment_ar::db) ? code_size::c32 : code_size::c16;
  }
  /// The CPL an instruction is checked against: 0 in real mode, 3 in virtual-8086 mode.
  [[nodiscard]] constexpr std::uint8_t effective_cpl() const noexcept {
    switch (mode()) {
      case cpu_mode::real: return 0;
      case cpu_mode::vm86: return 3;
      default: return cpl;
    }
  }
};

}  // namespace hvkit::emulate
