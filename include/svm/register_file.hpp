// SPDX-License-Identifier: MIT
/// @file
/// @brief `svm::register_file`: the guest's registers after a #VMEXIT. On SVM, VMRUN and
/// #VMEXIT load and save RAX, RSP, RIP and RFLAGS in the VMCB state-save area (AMD APM Vol. 2,
/// 15.5.1 "Basic Operation", 15.6 "#VMEXIT"); the other GPRs keep the guest's values and the
/// hypervisor's stub saves them in an x86::gpr_block (the same block vmx::register_file uses,
/// where only RSP lives in the VMCS). The VMCB is memory, so nothing is cached or flushed.
#pragma once

#include <cstdint>

#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../x86/gpr.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::svm {

template <vmcb_memory M>
class register_file {
 public:
  constexpr register_file(M& vmcb, x86::gpr_block& gprs) noexcept : m_(&vmcb), g_(&gprs) {}

  /// Register `r`: RAX and RSP from the VMCB, the others from the block.
  [[nodiscard]] constexpr std::uint64_t read(x86::gpr r) const noexcept {
    if (r == x86::gpr::rax) return svm::read(*m_, fields::rax);
    if (r == x86::gpr::rsp) return svm::read(*m_, fields::rsp);
    return (*g_)[r];
  }
  /// Register number `n` (bits 3:0) as EXITINFO1 of a decode-assisted exit or an instruction encodes it.
  [[nodiscard]] constexpr std::uint64_t read(unsigned n) const noexcept { return read(x86::gpr_from_index(n)); }
  constexpr void write(x86::gpr r, std::uint64_t v) noexcept {
    if (r == x86::gpr::rax) svm::write(*m_, fields::rax, v);
    else if (r == x86::gpr::rsp) svm::write(*m_, fields::rsp, v);
    else (*g_)[r] = v;
  }
  constexpr void write(unsigned n, std::uint64_t v) noexcept { write(x86::gpr_from_index(n), v); }

  [[nodiscard]] constexpr std::uint64_t rip() const noexcept { return svm::read(*m_, fields::rip); }
  constexpr void set_rip(std::uint64_t v) noexcept { svm::write(*m_, fields::rip, v); }
  [[nodiscard]] constexpr x86::rflags rflags() const noexcept { return read_typed(*m_, fields::rflags); }
  constexpr void set_rflags(x86::rflags v) noexcept { svm::write(*m_, fields::rflags, v); }

  [[nodiscard]] constexpr M& vmcb() const noexcept { return *m_; }
  [[nodiscard]] constexpr x86::gpr_block& gprs() const noexcept { return *g_; }

 private:
  M* m_;
  x86::gpr_block* g_;
};

}  // namespace hvkit::svm
