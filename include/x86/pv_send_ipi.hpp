// SPDX-License-Identifier: MIT
/// @file
/// @brief The KVM paravirtual IPI hypercall KVM_HC_SEND_IPI (number 10), decoded into the same
/// `apic::ipi_request` an ICR write gives, one per destination APIC ID.
///
/// ABI (Linux Documentation/virt/kvm/x86/hypercalls.rst, KVM_HC_SEND_IPI; the numbers are the
/// KVM ABI): RAX = 10; a0 (RBX) = low part of the destination bitmap, a1 (RCX) = high part,
/// a2 (RDX) = the APIC ID of bit 0 of a0, a3 (RSI) = the ICR value. Bit n of a0 is APIC ID
/// a2 + n, bit n of a1 is APIC ID a2 + W + n, where W is 64 for a guest in 64-bit mode and 32
/// otherwise (a 32-bit caller's registers are 32 bits wide: at most 64 destinations per call).
/// The ICR must name physical destination mode and no shorthand; otherwise the hypercall returns
/// -KVM_EINVAL. It returns the number of destinations the IPI was delivered to.
/// The CPUID side (KVM_FEATURE_PV_SEND_IPI, withheld when IPIs are accelerated) is rule
/// pv_send_ipi of cpuid/policy.hpp.
#pragma once

#include <cstdint>

#include "apic_icr.hpp"
#include "result.hpp"

namespace hvkit::x86::pv_ipi {

inline constexpr std::uint64_t kvm_hc_send_ipi = 10;
/// KVM_EINVAL (the hypercall returns its negation in RAX).
inline constexpr std::int64_t kvm_einval = 22;

enum class send_ipi_error : std::uint8_t {
  none,
  logical_destination,  ///< ICR bit 11 set: only physical APIC IDs can be named by the bitmap
  shorthand,            ///< ICR bits 19:18 non-zero
};

/// A decoded KVM_HC_SEND_IPI.
struct send_ipi {
  apic::ipi_request ipi{};       ///< vector, delivery mode, level, trigger from a3; physical, no shorthand
  std::uint64_t bitmap_low = 0;  ///< a0 (32 bits wide for a 32-bit caller)
  std::uint64_t bitmap_high = 0; ///< a1
  std::uint32_t min_apic_id = 0; ///< a2
  unsigned cluster_bits = 64;    ///< W: 64 in 64-bit mode, 32 otherwise

  /// Calls `f(ipi_request)` once per destination, in ascending APIC ID order, with
  /// `destination` set to that APIC ID; IDs above 0xFFFFFFFF (a2 + n overflowing) are skipped.
  /// Returns the number of destinations visited.
  template <class F>
  constexpr unsigned for_each_destination(F&& f) const noexcept {
    unsigned n = 0;
    const std::uint64_t words[2] = {bitmap_low, bitmap_high};
    for (unsigned w = 0; w < 2; ++w) {
      for (unsigned b = 0; b < cluster_bits; ++b) {
        if (((words[w] >> b) & 1u) == 0) continue;
        const std::uint64_t id = std::uint64_t{min_apic_id} + w * cluster_bits + b;
        if (id > 0xffff'ffffu) continue;
        apic::ipi_request r = ipi;
        r.destination = static_cast<std::uint32_t>(id);
        f(r);
        ++n;
      }
    }
    return n;
  }
};

/// Decodes KVM_HC_SEND_IPI from its four arguments; `long_mode`: the caller runs in 64-bit mode
/// (else every argument is truncated to 32 bits, as the hypercall ABI reads 32-bit registers).
/// The ICR's low 32 bits are used (vector 7:0, delivery mode 10:8, level 14, trigger 15).
[[nodiscard]] constexpr result<send_ipi, send_ipi_error> decode_send_ipi(std::uint64_t a0, std::uint64_t a1,
                                                                         std::uint64_t a2, std::uint64_t a3,
                                                                         bool long_mode) noexcept {
  if (!long_mode) {
    a0 &= 0xffff'ffffu;
    a1 &= 0xffff'ffffu;
    a2 &= 0xffff'ffffu;
    a3 &= 0xffff'ffffu;
  }
  const std::uint64_t icr = a3 & 0xffff'ffffu;
  if (apic::icr::dest_mode::get(icr) != apic::destination_mode::physical) return unexpected(send_ipi_error::logical_destination);
  if (apic::icr::shorthand::get(icr) != apic::destination_shorthand::none) return unexpected(send_ipi_error::shorthand);
  send_ipi s;
  s.ipi = apic::decode_xapic_icr(static_cast<std::uint32_t>(icr), 0);
  s.bitmap_low = a0;
  s.bitmap_high = a1;
  s.min_apic_id = static_cast<std::uint32_t>(a2);
  s.cluster_bits = long_mode ? 64u : 32u;
  return s;
}

/// The value the hypercall returns in RAX: the count delivered, or -KVM_EINVAL for `e`.
[[nodiscard]] constexpr std::uint64_t return_value(const result<unsigned, send_ipi_error>& r) noexcept {
  if (r.has_value()) return r.value();
  return static_cast<std::uint64_t>(-kvm_einval);
}

}  // namespace hvkit::x86::pv_ipi
