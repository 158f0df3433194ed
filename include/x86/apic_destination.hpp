// SPDX-License-Identifier: MIT
/// @file
/// @brief Which local APICs an IPI reaches: the destination shorthands, physical and logical
/// destination mode in xAPIC (flat and cluster models) and x2APIC mode (SDM Vol. 3A 11.6.2
/// "Determining IPI Destination", 11.6.2.1-11.6.2.2; 11.12.10 "Logical Destination Mode in
/// x2APIC Mode"). One predicate for every IPI source: an ICR write, a SELF IPI and
/// KVM_HC_SEND_IPI (x86/pv_send_ipi.hpp) all produce an `ipi_request`.
///
/// Lowest-priority arbitration among the matching APICs is not decided here (the choice is
/// model specific, SDM 11.6.2.4): the predicate names the candidates.
#pragma once

#include <cstdint>

#include "apic_icr.hpp"

namespace hvkit::x86::apic {

/// The x2APIC logical ID the processor derives from the x2APIC ID (SDM 11.12.10.2): cluster ID
/// x2APIC ID[19:4] in bits 31:16, and bit x2APIC ID[3:0] set in bits 15:0.
[[nodiscard]] constexpr std::uint32_t x2apic_logical_id(std::uint32_t x2apic_id) noexcept {
  return (((x2apic_id >> 4) & 0xffffu) << 16) | (std::uint32_t{1} << (x2apic_id & 0xfu));
}

/// The xAPIC destination format register's model (DFR bits 31:28, SDM 11.6.2.2): 1111B flat,
/// 0000B cluster.
enum class xapic_model : std::uint8_t { flat, cluster };

/// A receiving APIC as the destination logic sees it.
struct apic_identity {
  std::uint32_t id = 0;   ///< xAPIC ID (8 bits) or x2APIC ID
  std::uint32_t ldr = 0;  ///< logical destination register (xAPIC: logical ID in bits 31:24)
  xapic_model model = xapic_model::flat;
};

/// True if the IPI `r`, sent in mode `m` by the APIC with ID `sender_id`, is addressed to `t`.
[[nodiscard]] constexpr bool is_destination(const ipi_request& r, apic_mode m, std::uint32_t sender_id,
                                            const apic_identity& t) noexcept {
  switch (r.shorthand) {
    case destination_shorthand::self: return t.id == sender_id;
    case destination_shorthand::all_including_self: return true;
    case destination_shorthand::all_excluding_self: return t.id != sender_id;
    case destination_shorthand::none: break;
  }
  if (is_broadcast(r, m)) return true;
  if (r.dest_mode == destination_mode::physical) return t.id == r.destination;
  if (m == apic_mode::x2apic) {
    // Cluster in bits 31:16 must match; bits 15:0 select processors within it (11.12.10.2).
    return (r.destination >> 16) == (t.ldr >> 16) && (r.destination & t.ldr & 0xffffu) != 0;
  }
  const std::uint32_t dest = r.destination & 0xffu, logical = (t.ldr >> 24) & 0xffu;
  if (t.model == xapic_model::flat) return (dest & logical) != 0;  // 11.6.2.2: flat, bit-wise AND
  // Cluster model: the high nibble names the cluster, the low nibble selects within it.
  return (dest >> 4) == (logical >> 4) && (dest & logical & 0xfu) != 0;
}

}  // namespace hvkit::x86::apic
