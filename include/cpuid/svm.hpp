// SPDX-License-Identifier: MIT
/// @file
/// @brief CPUID Fn8000_000A, the SVM leaf (AMD APM Vol. 3, Appendix E, "CPUID Fn8000_000A
/// SVM Features"; APM Vol. 2, 15.4 "Enabling SVM"): decoding, and the leaf a guest sees when
/// the hypervisor offers nested SVM.
///
/// EAX[7:0] SvmRev (SVM revision), EBX NASID (number of address space identifiers), ECX
/// reserved, EDX the SVM feature bits. The leaf is meaningful only if Fn8000_0001 ECX[2]
/// (SVM) is set.
#pragma once

#include <cstdint>

#include "leaf.hpp"
#include "../x86/flags.hpp"

namespace hvkit::cpuid {

/// Fn8000_000A EDX: the SVM feature bits.
class svm_features : public x86::flags<svm_features, std::uint32_t> {
 public:
  using flags::flags;
  static const svm_features np;               ///< 0: nested paging
  static const svm_features lbr_virt;         ///< 1: LBR virtualization
  static const svm_features svm_lock;         ///< 2: SVM lock (VM_CR.SVMDIS lockable)
  static const svm_features nrip_save;        ///< 3: nRIP saved on #VMEXIT
  static const svm_features tsc_rate_msr;     ///< 4: TSC ratio MSR
  static const svm_features vmcb_clean;       ///< 5: VMCB clean bits
  static const svm_features flush_by_asid;    ///< 6: TLB_CONTROL 03h/07h
  static const svm_features decode_assists;   ///< 7: decode assists (EXITINFO for CR/DR, INTn, INVLPG; instruction bytes)
  static const svm_features pause_filter;     ///< 10: PAUSE intercept filter count
  static const svm_features pause_filter_threshold;  ///< 12
  static const svm_features avic;             ///< 13: AMD virtual interrupt controller
  static const svm_features vmsave_virt;      ///< 15: virtualized VMSAVE/VMLOAD
  static const svm_features vgif;             ///< 16: virtual global interrupt flag
  static const svm_features gmet;             ///< 17: guest mode execute trap
  static const svm_features x2avic;           ///< 18: AVIC in x2APIC mode
  static const svm_features spec_ctrl;        ///< 20: SPEC_CTRL virtualization
  static const svm_features vnmi;             ///< 25: virtual NMI
  static const svm_features nested_vmcb_addr_check;  ///< 28: VMRUN/VMLOAD/VMSAVE check the VMCB address (nested)
};
inline constexpr svm_features svm_features::np = svm_features::bit(0);
inline constexpr svm_features svm_features::lbr_virt = svm_features::bit(1);
inline constexpr svm_features svm_features::svm_lock = svm_features::bit(2);
inline constexpr svm_features svm_features::nrip_save = svm_features::bit(3);
inline constexpr svm_features svm_features::tsc_rate_msr = svm_features::bit(4);
inline constexpr svm_features svm_features::vmcb_clean = svm_features::bit(5);
inline constexpr svm_features svm_features::flush_by_asid = svm_features::bit(6);
inline constexpr svm_features svm_features::decode_assists = svm_features::bit(7);
inline constexpr svm_features svm_features::pause_filter = svm_features::bit(10);
inline constexpr svm_features svm_features::pause_filter_threshold = svm_features::bit(12);
inline constexpr svm_features svm_features::avic = svm_features::bit(13);
inline constexpr svm_features svm_features::vmsave_virt = svm_features::bit(15);
inline constexpr svm_features svm_features::vgif = svm_features::bit(16);
inline constexpr svm_features svm_features::gmet = svm_features::bit(17);
inline constexpr svm_features svm_features::x2avic = svm_features::bit(18);
inline constexpr svm_features svm_features::spec_ctrl = svm_features::bit(20);
inline constexpr svm_features svm_features::vnmi = svm_features::bit(25);
inline constexpr svm_features svm_features::nested_vmcb_addr_check = svm_features::bit(28);

/// The decoded leaf.
struct svm_info {
  std::uint8_t revision = 0;   ///< EAX[7:0]
  std::uint32_t nasid = 0;     ///< EBX: ASIDs 1 .. nasid-1 are usable by guests
  svm_features features{};     ///< EDX
  friend constexpr bool operator==(const svm_info&, const svm_info&) noexcept = default;
};

[[nodiscard]] constexpr svm_info decode_svm(regs r) noexcept {
  return {static_cast<std::uint8_t>(r.eax & 0xff), r.ebx, svm_features{r.edx}};
}
[[nodiscard]] constexpr regs encode_svm(const svm_info& i) noexcept {
  return {i.revision, i.nasid, 0, i.features.raw()};
}

/// What a hypervisor offers its guests of nested SVM. A feature reaches the guest only if the
/// hypervisor implements it for the guest's VMRUN: passed through from the host (the host must
/// have it) or emulated (offered whatever the host has; e.g. VMCB clean bits, which a
/// hypervisor may ignore, or the nested VMCB address check). The defaults offer no feature.
struct svm_nested_caps {
  svm_features passthrough{};  ///< used as the host has them
  svm_features emulated{};     ///< implemented whatever the host has
  std::uint8_t revision = 1;   ///< the SVM revision reported to the guest
  /// ASIDs offered to the guest; 0 means the host's NASID. The guest's ASIDs are the
  /// hypervisor's to map onto host ASIDs (or to flush on every nested VMRUN).
  std::uint32_t nasid = 0;
};

/// The Fn8000_000A leaf a guest sees when nested SVM is offered (the nested_virtualization
/// rule hides the leaf and Fn8000_0001 ECX[2] otherwise): the hypervisor's revision, its
/// NASID (or the host's), ECX reserved (0), and the features it implements.
[[nodiscard]] constexpr regs svm_guest_leaf(regs host, const svm_nested_caps& hv) noexcept {
  const svm_info h = decode_svm(host);
  svm_info g{};
  g.revision = hv.revision;
  g.nasid = hv.nasid != 0 ? hv.nasid : h.nasid;
  g.features = (h.features & hv.passthrough) | hv.emulated;
  return encode_svm(g);
}

}  // namespace hvkit::cpuid
