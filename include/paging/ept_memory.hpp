// SPDX-License-Identifier: MIT
/// @file
/// @brief `ept_memory<M>`: guest-physical memory seen through an EPT, as a read-only
/// guest_memory. Each read is translated by the ept_walker as a load of the PAE PDPTE
/// registers (ept_origin::pdpte_load: a read, even with EPT A/D enabled, where a guest
/// paging-structure access would need write permission; SDM Vol. 3C 29.3.3.2), then served
/// from the memory behind the EPT; an address the EPT does not map readably reads as
/// `unbacked`. For loads the hypervisor performs on the guest's behalf through its EPT, such
/// as the PAE PDPTEs (load_pdptrs). paging/nested.hpp's load_pdptrs(cr3, memory, maxphyaddr,
/// ept) does the same load with the EPT fault and A flags.
#pragma once

#include <cstdint>

#include "ept_walker.hpp"
#include "guest_memory.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

template <guest_memory M>
class ept_memory {
 public:
  constexpr ept_memory(const ept_walker& ept, const M& behind) noexcept : ept_(&ept), mem_(&behind) {}

  [[nodiscard]] constexpr result<std::uint32_t, memory_error> read32(x86::gpa a) const noexcept {
    const auto h = resolve(a);
    if (!h) return unexpected(h.error());
    return mem_->read32(*h);
  }
  [[nodiscard]] constexpr result<std::uint64_t, memory_error> read64(x86::gpa a) const noexcept {
    const auto h = resolve(a);
    if (!h) return unexpected(h.error());
    return mem_->read64(*h);
  }

 private:
  /// Where `a` lies in the memory behind the EPT: a checked EPT walk (ept_walker::check(),
  /// no A/D writes) of a PDPTE load.
  [[nodiscard]] constexpr result<x86::gpa, memory_error> resolve(x86::gpa a) const noexcept {
    ept_request r{};
    r.address = a;
    r.access = ept_access::read;
    r.origin = ept_origin::pdpte_load;
    const host_walk_result t = ept_->check(*mem_, r);
    if (!t) return unexpected(memory_error::unbacked);
    return x86::gpa{t->address.value()};  // the memory behind takes its addresses as x86::gpa
  }
  const ept_walker* ept_;
  const M* mem_;
};

}  // namespace hvkit::paging
