// SPDX-License-Identifier: MIT
/// @file
/// @brief Per-vCPU VMCB and ASID across physical CPUs (AMD APM Vol. 2, 15.16 "TLB Control",
/// 15.15.3 "VMCB Clean Field"), and `physical_cpu`: one processor's ASID allocator
/// (svm/tlb.hpp) and IBPB tracker (svm/ibpb.hpp) together.
///
/// ASIDs are per processor: the TLB of one processor caches translations tagged with the ASIDs
/// used on it. A vCPU's ASID is therefore valid only on the processor and in the allocator
/// generation it was given in. When a vCPU moves to another processor it needs an ASID of that
/// processor's allocator (the old number may be another vCPU's there), and its VMCB must run
/// with every clean bit 0 (the new processor has no cached copy of it: clean_bits.hpp).
/// A request to flush the vCPU's translations (an NPT change, paging/tlb_invalidation.hpp)
/// becomes TLB_CONTROL on its next VMRUN, unless it gets a fresh ASID anyway.
#pragma once

#include <cstdint>

#include "ibpb.hpp"
#include "tlb.hpp"

namespace hvkit::svm {

using cpu_id = std::uint32_t;
inline constexpr cpu_id no_cpu = ~cpu_id{0};

/// A vCPU's ASID binding.
struct vcpu_asid {
  asid_allocator::assignment assignment{};
  cpu_id cpu = no_cpu;          ///< the processor the ASID belongs to
  bool flush_requested = false; ///< its translations must go before the next VMRUN
};

/// What the next VMRUN of the vCPU's VMCB needs.
struct vmrun_setup {
  std::uint32_t asid = 0;
  tlb_control control = tlb_control::do_nothing;
  bool clear_clean_bits = false;  ///< run with VMCB clean = 0 (another processor ran it last)
  friend constexpr bool operator==(const vmrun_setup&, const vmrun_setup&) noexcept = default;
};

/// One physical processor.
template <class Barrier = pred_cmd_barrier>
class physical_cpu {
 public:
  /// `nasid`: CPUID Fn8000_000A EBX; `flush_by_asid`: Fn8000_000A EDX[6].
  constexpr physical_cpu(cpu_id id, std::uint32_t nasid, bool flush_by_asid, ibpb_policy p, Barrier b = Barrier{}) noexcept
      : id_(id), flush_by_asid_(flush_by_asid), asids_(nasid), ibpb_(p, b) {}

  /// Prepares VMRUN of the VMCB `vmcb` of vCPU `v` (guest `vm`, vCPU `vcpu`) on this processor:
  /// the IBPB decision, the ASID, TLB_CONTROL and whether the clean bits must be cleared.
  constexpr vmrun_setup prepare_vmrun(vcpu_asid& v, vmcb_identity vmcb) noexcept {
    vmrun_setup s;
    if (v.cpu != id_) {
      v.assignment = {};  // an ASID of another processor means nothing here
      v.cpu = id_;
      s.clear_clean_bits = true;
    }
    const std::uint64_t before = v.assignment.generation;
    s.control = asids_.assign(v.assignment);
    // The first VMRUN on this processor: its TLB may hold entries tagged with guest ASIDs
    // from whatever ran before (another hypervisor, a previous load): flush them all once.
    if (!used_) s.control = tlb_control::flush_all;
    used_ = true;
    const bool fresh = v.assignment.generation != before || s.control == tlb_control::flush_all;
    if (v.flush_requested && !fresh && s.control == tlb_control::do_nothing) s.control = flush_guest(flush_by_asid_);
    v.flush_requested = false;
    s.asid = v.assignment.asid;
    ibpb_.on_vmrun(vmcb);
    return s;
  }

  [[nodiscard]] constexpr cpu_id id() const noexcept { return id_; }
  [[nodiscard]] constexpr const asid_allocator& asids() const noexcept { return asids_; }
  [[nodiscard]] constexpr const Barrier& barrier() const noexcept { return ibpb_.barrier(); }

 private:
  cpu_id id_;
  bool flush_by_asid_;
  asid_allocator asids_;
  ibpb_tracker<Barrier> ibpb_;
  bool used_ = false;
};

}  // namespace hvkit::svm
