// SPDX-License-Identifier: MIT
/// @file
/// @brief An SVM CR write intercept as the vendor-neutral paging::cr_write_op: with decode
/// assists EXITINFO1 names the source GPR of a MOV to CR (AMD APM Vol. 2, 15.33.1 "MOV CRx/DRx
/// Intercepts"); without them, or for LMSW/CLTS, the instruction has to be decoded (emulate/),
/// and the result says so. The write is then checked and applied by paging::evaluate_cr_write,
/// the same rules the VMX CR-access exit uses.
#pragma once

#include <cstdint>

#include "exit_code.hpp"
#include "exit_info.hpp"
#include "register_file.hpp"
#include "../paging/cr_write.hpp"

namespace hvkit::svm {

/// The write an exit reports, if EXITINFO1 says enough.
struct decoded_cr_write {
  bool decoded = false;        ///< false: decode the instruction (no decode assists, or LMSW/CLTS)
  paging::cr_write_op op{};    ///< meaningful if decoded
};

/// For a CR write exit (10h-1Fh) or CR0_SEL_WRITE (65h).
template <vmcb_memory M>
[[nodiscard]] constexpr decoded_cr_write decode_cr_write_exit(exit_code c, std::uint64_t exit_info_1, bool decode_assists,
                                                           const register_file<M>& regs) noexcept {
  unsigned cr = 0;
  if (is_cr_write(c)) cr = cr_dr_number(c);
  else if (c != exit_code::cr0_sel_write) return {};
  const cr_access a = decode_cr_access(exit_info_1, decode_assists);
  if (a.from != cr_access::source::mov) return {};
  return {true, {paging::cr_write_op::instruction::mov_to_cr, cr, regs.read(static_cast<unsigned>(a.gpr))}};
}

}  // namespace hvkit::svm
