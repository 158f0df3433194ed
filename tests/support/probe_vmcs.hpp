// SPDX-License-Identifier: MIT
// Test support: a software VMCS that records the encodings read through it and fails the
// VMREAD of one chosen encoding (VMfailInvalid), for tests of what a reader reads and how it
// reports a failed read.
#pragma once

#include <cstdint>
#include <vector>

#include <hvkit/vmx/soft_vmcs.hpp>

namespace hvkit::test {

struct probe_vmcs {
  vmx::soft_vmcs inner;
  std::uint32_t failing = ~0u;  ///< the encoding whose VMREAD fails
  std::vector<std::uint32_t> reads;
  result<std::uint64_t, vmx::vm_fail> read(std::uint32_t enc) {
    reads.push_back(enc);
    if (enc == failing) return unexpected(vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc));
    return inner.read(enc);
  }
  result<void, vmx::vm_fail> write(std::uint32_t enc, std::uint64_t v) { return inner.write(enc, v); }
};
static_assert(vmx::vmcs_backend<probe_vmcs>);

}  // namespace hvkit::test
