// SPDX-License-Identifier: MIT
/// @file
/// @brief The #PF error code (SDM 4.7, Figure 4-12) and software-only access flags.
///
/// Bits 31:0 are the hardware error code pushed with #PF. hvkit describes an access with the
/// same type (KVM's "pfec"): a write is `pfec::write`, a user-mode access `pfec::user`, an
/// instruction fetch `pfec::fetch`. Properties of an access that the hardware error code
/// cannot express live at bit 32 and above, so they can never alias a hardware bit, and
/// `hardware_bits()` strips them before a value is injected into a guest.
#pragma once

#include <cstdint>

#include "flags.hpp"

namespace hvkit::x86 {

class pfec : public flags<pfec> {
 public:
  using flags::flags;
  static const pfec present;  ///< 0: P, the fault was a protection violation (page present)
  static const pfec write;    ///< 1: W/R, the access was a write
  static const pfec user;     ///< 2: U/S, a user-mode access (CPL 3, not implicit supervisor)
  static const pfec rsvd;     ///< 3: RSVD, a reserved bit was set in a paging-structure entry
  static const pfec fetch;    ///< 4: I/D, an instruction fetch (reported with NX or SMEP only)
  static const pfec pk;       ///< 5: PK, protection-key violation
  static const pfec ss;       ///< 6: SS, a shadow-stack access
  static const pfec hlat;     ///< 7: HLAT paging
  static const pfec sgx;      ///< 15: SGX, violation of SGX-specific access control
  /// Software: an implicit supervisor-mode access (GDT/LDT/IDT/TSS, even at CPL 3; SDM 4.6).
  /// SMAP then applies whatever RFLAGS.AC says.
  static const pfec implicit_access;
  /// Every hardware bit (31:0).
  static const pfec hardware;
  /// Every software-only bit.
  static const pfec software;

  /// The value as the hardware would push it (software flags removed).
  [[nodiscard]] constexpr pfec hardware_bits() const noexcept { return pfec{raw() & 0xffff'ffffu}; }
};
inline constexpr pfec pfec::present = pfec::bit(0);
inline constexpr pfec pfec::write = pfec::bit(1);
inline constexpr pfec pfec::user = pfec::bit(2);
inline constexpr pfec pfec::rsvd = pfec::bit(3);
inline constexpr pfec pfec::fetch = pfec::bit(4);
inline constexpr pfec pfec::pk = pfec::bit(5);
inline constexpr pfec pfec::ss = pfec::bit(6);
inline constexpr pfec pfec::hlat = pfec::bit(7);
inline constexpr pfec pfec::sgx = pfec::bit(15);
inline constexpr pfec pfec::implicit_access = pfec::bit(48);
inline constexpr pfec pfec::hardware = pfec{0xffff'ffffu};
inline constexpr pfec pfec::software = pfec::implicit_access;

static_assert((pfec::software & pfec::hardware).none(),
              "software-only access flags must never alias a hardware #PF error-code bit");
static_assert(pfec::software.raw() >> 32 != 0 && (pfec::software.raw() & 0xffff'ffffu) == 0,
              "software-only access flags live at bit 32 and above");

}  // namespace hvkit::x86
