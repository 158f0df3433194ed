// SPDX-License-Identifier: MIT
/// @file
/// @brief The SVM intercept vectors (AMD APM Vol. 2, 15.8 "Intercept Operation", 15.9
/// "Instruction Intercepts", 15.12 "Exception Intercepts"; Table B-1 offsets 000h-017h) as
/// one typed bit number per intercept, an `intercept_set` value over the six 32-bit words,
/// and reading/writing them in a VMCB.
///
/// An intercept is named by its bit position in the 192-bit run of intercept words at VMCB
/// offset 000h: word 0 (000h) CR reads 15:0 and CR writes 31:16, word 1 (004h) DR reads and
/// writes likewise, word 2 (008h) one bit per exception vector, words 3 and 4 (00Ch, 010h)
/// the instruction and event intercepts, word 5 (014h) the newer instruction intercepts.
/// (For every intercept the #VMEXIT code equals this bit number; exit_code.hpp lists the
/// codes separately from Appendix C and tests/svm checks that they agree.)
#pragma once

#include <array>
#include <cstdint>

#include "vmcb.hpp"
#include "../x86/contract.hpp"
#include "../x86/vector.hpp"

namespace hvkit::svm {

/// One intercept: its bit number in the intercept words (Table B-1).
enum class intercept : std::uint16_t {
  // Word 3, offset 00Ch.
  intr = 96,               ///< physical INTR
  nmi = 97,
  smi = 98,
  init = 99,
  vintr = 100,             ///< virtual interrupt (V_IRQ taken)
  cr0_selective_write = 101,  ///< writes of CR0 that change bits other than CR0.TS or CR0.MP (15.9.1)
  idtr_read = 102,
  gdtr_read = 103,
  ldtr_read = 104,
  tr_read = 105,
  idtr_write = 106,
  gdtr_write = 107,
  ldtr_write = 108,
  tr_write = 109,
  rdtsc = 110,
  rdpmc = 111,
  pushf = 112,
  popf = 113,
  cpuid = 114,
  rsm = 115,
  iret = 116,
  intn = 117,              ///< software interrupt INTn
  invd = 118,
  pause = 119,
  hlt = 120,
  invlpg = 121,
  invlpga = 122,
  ioio_prot = 123,         ///< IN/OUT: consult the I/O permission map (15.10)
  msr_prot = 124,          ///< RDMSR/WRMSR: consult the MSR permission map (15.11)
  task_switch = 125,
  ferr_freeze = 126,       ///< processor "freezing" during legacy FERR handling
  shutdown = 127,          ///< shutdown events (triple fault)
  // Word 4, offset 010h.
  vmrun = 128,             ///< must be set: VMRUN with it clear fails with VMEXIT_INVALID (15.5.1)
  vmmcall = 129,
  vmload = 130,
  vmsave = 131,
  stgi = 132,
  clgi = 133,
  skinit = 134,
  rdtscp = 135,
  icebp = 136,             ///< INT1 (opcode F1)
  wbinvd = 137,            ///< WBINVD and WBNOINVD
  monitor = 138,           ///< MONITOR and MONITORX
  mwait = 139,             ///< MWAIT/MWAITX, unconditionally
  mwait_conditional = 140,  ///< MWAIT/MWAITX if the monitor hardware is armed
  xsetbv = 141,
  rdpru = 142,
  efer_write_trap = 143,   ///< a write of EFER, reported after the instruction completed (a trap)
  // 144-159: CR0-CR15 write traps (cr_write_trap(n)).
  // Word 5, offset 014h.
  invlpgb = 160,
  invlpgb_illegal = 161,
  invpcid = 162,
  mcommit = 163,
  tlbsync = 164,
};

/// Intercept reads of CRn (word 0 bits 15:0).
[[nodiscard]] constexpr intercept cr_read(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<intercept>(n);
}
/// Intercept writes of CRn (word 0 bits 31:16), checked before the write (a fault-like exit).
[[nodiscard]] constexpr intercept cr_write(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<intercept>(16 + n);
}
/// Intercept reads of DRn (word 1 bits 15:0).
[[nodiscard]] constexpr intercept dr_read(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<intercept>(32 + n);
}
/// Intercept writes of DRn (word 1 bits 31:16).
[[nodiscard]] constexpr intercept dr_write(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<intercept>(48 + n);
}
/// Intercept exception vector `v` (word 2, one bit per vector; 15.12).
[[nodiscard]] constexpr intercept exception(unsigned v) noexcept {
  HVKIT_EXPECTS(v < 32);
  return static_cast<intercept>(64 + v);
}
[[nodiscard]] constexpr intercept exception(x86::vector v) noexcept { return exception(static_cast<unsigned>(v)); }
/// Trap after a guest write of CRn completed (word 4 bits 31:16; the exit reports the new
/// value in EXITINFO1).
[[nodiscard]] constexpr intercept cr_write_trap(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<intercept>(144 + n);
}

/// The intercept word and bit of an intercept.
[[nodiscard]] constexpr unsigned word_of(intercept i) noexcept { return static_cast<unsigned>(i) / 32; }
[[nodiscard]] constexpr std::uint32_t bit_of(intercept i) noexcept {
  return std::uint32_t{1} << (static_cast<unsigned>(i) % 32);
}
/// The number of intercept words modelled (000h-017h).
inline constexpr unsigned intercept_words = 6;

/// A set of intercepts: the six intercept words as values (build one, merge vmcb01's with a
/// nested guest's, then store()).
class intercept_set {
 public:
  constexpr intercept_set() noexcept = default;
  constexpr explicit intercept_set(std::array<std::uint32_t, intercept_words> words) noexcept : w_(words) {}
  constexpr intercept_set& set(intercept i, bool on = true) noexcept {
    auto& w = w_[word_of(i)];
    w = on ? (w | bit_of(i)) : (w & ~bit_of(i));
    return *this;
  }
  constexpr intercept_set& clear(intercept i) noexcept { return set(i, false); }
  [[nodiscard]] constexpr bool test(intercept i) const noexcept { return (w_[word_of(i)] & bit_of(i)) != 0; }
  [[nodiscard]] constexpr std::uint32_t word(unsigned n) const noexcept {
    HVKIT_EXPECTS(n < intercept_words);
    return w_[n];
  }
  [[nodiscard]] constexpr const std::array<std::uint32_t, intercept_words>& words() const noexcept { return w_; }
  /// Union (the intercepts of L1 and of its nested guest both apply while L2 runs).
  [[nodiscard]] friend constexpr intercept_set operator|(intercept_set a, const intercept_set& b) noexcept {
    for (unsigned i = 0; i < intercept_words; ++i) a.w_[i] |= b.w_[i];
    return a;
  }
  friend constexpr bool operator==(const intercept_set&, const intercept_set&) noexcept = default;

  /// The intercept words of a VMCB.
  template <vmcb_memory M>
  [[nodiscard]] static constexpr intercept_set load(const M& m) noexcept {
    intercept_set s;
    for (unsigned i = 0; i < intercept_words; ++i)
      s.w_[i] = static_cast<std::uint32_t>(m.load(static_cast<std::uint16_t>(4 * i), 4));
    return s;
  }
  /// Write the six intercept words to a VMCB.
  template <vmcb_memory M>
  constexpr void store(M& m) const noexcept {
    for (unsigned i = 0; i < intercept_words; ++i) m.store(static_cast<std::uint16_t>(4 * i), 4, w_[i]);
  }

 private:
  std::array<std::uint32_t, intercept_words> w_{};
};

/// Set or clear one intercept in a VMCB.
template <vmcb_memory M>
constexpr void set_intercept(M& m, intercept i, bool on = true) noexcept {
  const auto off = static_cast<std::uint16_t>(4 * word_of(i));
  const auto w = static_cast<std::uint32_t>(m.load(off, 4));
  m.store(off, 4, on ? (w | bit_of(i)) : (w & ~bit_of(i)));
}
/// Is an intercept set in a VMCB?
template <vmcb_memory M>
[[nodiscard]] constexpr bool intercepted(const M& m, intercept i) noexcept {
  return (m.load(static_cast<std::uint16_t>(4 * word_of(i)), 4) & bit_of(i)) != 0;
}

// The word offsets agree with the typed fields of Table B-1.
static_assert(fields::intercept_cr.offset == 0x000 && fields::intercept_dr.offset == 0x004 &&
              fields::intercept_exceptions.offset == 0x008 && fields::intercept_misc1.offset == 0x00c &&
              fields::intercept_misc2.offset == 0x010 && fields::intercept_misc3.offset == 0x014);

}  // namespace hvkit::svm
