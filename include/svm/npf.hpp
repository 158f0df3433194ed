// SPDX-License-Identifier: MIT
/// @file
/// @brief The #NPF exit information of a nested walk over NPT (paging/npt.hpp): EXITINFO1
/// and EXITINFO2 built from the walk's fault (AMD APM Vol. 2, 15.25.6), for a hypervisor
/// emulating #VMEXIT(NPF) for its guest hypervisor and for differential tests against a CPU.
#pragma once

#include <cstdint>

#include "exit_code.hpp"
#include "exit_info.hpp"
#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../paging/walk_result.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"

namespace hvkit::svm {

/// Why a walk fault is no #NPF.
enum class not_npf : std::uint8_t {
  guest_stage,      ///< the guest's own walk faulted: a guest #PF (or #GP/#SS), not an exit
  other_stage,      ///< an EPT-stage fault (VMX)
  host_side,        ///< unbacked memory or entries that kept changing: no architectural fault
};

/// The #NPF exit of an NPT-stage fault (`f.stage == paging::walk_stage::npt` and a
/// not-present, reserved-bit or permission fault): EXITINFO1 = the #PF-format error code
/// (P, RW, US, RSV, ID as the nested check saw the access) with bit 32 set when the final
/// guest-physical access faulted and bit 33 when an access to a guest page-table entry did
/// (APM 15.25.6); EXITINFO2 = the faulting guest-physical address.
[[nodiscard]] constexpr result<npf_info, not_npf> npf_from_fault(const paging::walk_fault& f) noexcept {
  if (f.stage == paging::walk_stage::guest) return unexpected(not_npf::guest_stage);
  if (f.stage != paging::walk_stage::npt) return unexpected(not_npf::other_stage);
  switch (f.kind) {
    case paging::fault_kind::not_present:
    case paging::fault_kind::reserved_bit:
    case paging::fault_kind::permission: break;
    default: return unexpected(not_npf::host_side);
  }
  const bool final_access = f.qualification.test(paging::ept_qualification::final_translation);
  return npf_info{npf_error_code::make(static_cast<std::uint32_t>(f.error_code.hardware_bits().raw()), final_access,
                                       !final_access),
                  f.guest_physical};
}

/// Writes an #NPF exit into `vmcb` as the processor does (EXITCODE 400h, EXITINFO1,
/// EXITINFO2): for a nested hypervisor reflecting a fault of its guest's NPT to it.
template <class M>
constexpr void write_npf_exit(M& vmcb, const npf_info& info) noexcept {
  processor_write(vmcb, fields::exit_code, static_cast<std::uint64_t>(exit_code::npf));
  processor_write(vmcb, fields::exit_info_1, info.error.raw());
  processor_write(vmcb, fields::exit_info_2, info.address.value());
}

}  // namespace hvkit::svm
