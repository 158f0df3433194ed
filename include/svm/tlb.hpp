// SPDX-License-Identifier: MIT
/// @file
/// @brief ASIDs and TLB control (AMD APM Vol. 2, 15.16 "TLB Control"; Table B-1 offset 058h).
///
/// Guest TLB entries are tagged with the ASID of the VMCB (bits 31:0 of 058h); ASID 0 is the
/// host's, and VMRUN with guest ASID 0 fails with VMEXIT_INVALID (15.5.1). CPUID Fn8000_000A
/// EBX is the number of ASIDs (valid ASIDs are 1 .. NASID-1). TLB_CONTROL (bits 39:32) asks
/// VMRUN to flush: 00h nothing, 01h the entire TLB (every ASID, global entries too), 03h the
/// guest's ASID only, 07h the guest's non-global entries only; 03h and 07h need FlushByAsid
/// (CPUID Fn8000_000A EDX[6]). Other values are reserved.
#pragma once

#include <cstdint>

#include "vmcb.hpp"

namespace hvkit::svm {

enum class tlb_control : std::uint8_t {
  do_nothing = 0x00,
  flush_all = 0x01,
  flush_asid = 0x03,
  flush_asid_non_global = 0x07,
};

/// A value TLB_CONTROL may hold on this processor.
[[nodiscard]] constexpr bool valid_tlb_control(std::uint8_t v, bool flush_by_asid) noexcept {
  return v == 0x00 || v == 0x01 || (flush_by_asid && (v == 0x03 || v == 0x07));
}

/// The TLB_CONTROL to request a flush of the guest's translations: by ASID if the processor
/// can, otherwise the entire TLB (the only flush older processors offer).
[[nodiscard]] constexpr tlb_control flush_guest(bool flush_by_asid, bool keep_global = false) noexcept {
  if (!flush_by_asid) return tlb_control::flush_all;
  return keep_global ? tlb_control::flush_asid_non_global : tlb_control::flush_asid;
}

/// A per-CPU ASID allocator with generations: ASIDs 1 .. nasid-1 are handed out in order; when
/// they run out a new generation starts, which needs one flush of the entire TLB (the old
/// generation's entries are still tagged with the reused ASIDs). A vCPU keeps its ASID while
/// its generation is current.
class asid_allocator {
 public:
  /// `nasid`: CPUID Fn8000_000A EBX (at least 2 for any guest ASID to exist).
  constexpr explicit asid_allocator(std::uint32_t nasid) noexcept : nasid_(nasid) { HVKIT_EXPECTS(nasid >= 2); }

  /// A vCPU's ASID on this CPU.
  struct assignment {
    std::uint32_t asid = 0;
    std::uint64_t generation = 0;  ///< 0: never assigned
  };

  /// Make `a` current: keep it if its generation is current, else give it the next ASID.
  /// Returns the TLB_CONTROL to use on this VMRUN: flush_all when a new generation began,
  /// a guest flush when the vCPU got an ASID whose old entries may belong to someone else
  /// (never within one generation: each ASID is handed out once per generation), else nothing.
  constexpr tlb_control assign(assignment& a) noexcept {
    if (a.generation == generation_ && a.asid != 0) return tlb_control::do_nothing;
    tlb_control c = tlb_control::do_nothing;
    if (next_ >= nasid_) {
      ++generation_;
      next_ = 1;
      c = tlb_control::flush_all;
    }
    a.asid = next_++;
    a.generation = generation_;
    return c;
  }
  [[nodiscard]] constexpr std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::uint32_t nasid_;
  std::uint32_t next_ = 1;
  std::uint64_t generation_ = 1;
};

/// Write the guest ASID and TLB_CONTROL for the next VMRUN.
template <vmcb_memory M>
constexpr void set_asid(M& m, std::uint32_t asid, tlb_control c = tlb_control::do_nothing) noexcept {
  HVKIT_EXPECTS(asid != 0);
  write(m, fields::guest_asid, asid);
  write(m, fields::tlb_control, static_cast<std::uint8_t>(c));
}

}  // namespace hvkit::svm
