// SPDX-License-Identifier: MIT
/// @file
/// @brief The hardware backend: VMXON, VMXOFF, VMCLEAR, VMPTRLD, VMPTRST, VMREAD, VMWRITE,
/// VMLAUNCH, VMRESUME, INVEPT, INVVPID as inline assembly (x86-64 only, VMX root operation).
///
/// Freestanding: no libc, no SSE (works with -mgeneral-regs-only -mno-red-zone).
/// Failures follow SDM 31.2: RFLAGS.CF = VMfailInvalid; RFLAGS.ZF = VMfailValid, in which case
/// the VM-instruction error number is read from the current VMCS (field 0x4400).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "vm_fail.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"

#if defined(__x86_64__)

namespace hvkit::vmx::hw {

namespace detail {
[[nodiscard]] inline vm_instruction_error read_instruction_error() noexcept {
  std::uint64_t v = 0;
  std::uint64_t enc = 0x4400;  // VM-instruction error (SDM Appendix B.3.2)
  asm volatile("vmread %[enc], %[out]" : [out] "=r"(v) : [enc] "r"(enc) : "cc");
  return static_cast<vm_instruction_error>(static_cast<std::uint32_t>(v));
}
[[nodiscard]] inline result<void, vm_fail> status(bool cf, bool zf, vmx_instruction i,
                                                  std::uint32_t enc = ~0u) noexcept {
  if (cf) return unexpected(vm_fail::fail_invalid(i, enc));
  if (zf) return unexpected(vm_fail::fail_valid(i, read_instruction_error(), enc));
  return {};
}
}  // namespace detail

/// VMXON with the physical address of a 4 KiB-aligned VMXON region (SDM 31.3 VMXON).
inline result<void, vm_fail> vmxon(x86::hpa region) noexcept {
  std::uint64_t pa = region.value();
  bool cf, zf;
  asm volatile("vmxon %[pa]" : "=@ccc"(cf), "=@ccz"(zf) : [pa] "m"(pa) : "memory");
  return detail::status(cf, zf, vmx_instruction::vmxon);
}
inline result<void, vm_fail> vmxoff() noexcept {
  bool cf, zf;
  asm volatile("vmxoff" : "=@ccc"(cf), "=@ccz"(zf) : : "memory");
  return detail::status(cf, zf, vmx_instruction::vmxoff);
}
inline result<void, vm_fail> vmclear(x86::hpa vmcs) noexcept {
  std::uint64_t pa = vmcs.value();
  bool cf, zf;
  asm volatile("vmclear %[pa]" : "=@ccc"(cf), "=@ccz"(zf) : [pa] "m"(pa) : "memory");
  return detail::status(cf, zf, vmx_instruction::vmclear);
}
inline result<void, vm_fail> vmptrld(x86::hpa vmcs) noexcept {
  std::uint64_t pa = vmcs.value();
  bool cf, zf;
  asm volatile("vmptrld %[pa]" : "=@ccc"(cf), "=@ccz"(zf) : [pa] "m"(pa) : "memory");
  return detail::status(cf, zf, vmx_instruction::vmptrld);
}
/// The current-VMCS pointer (all ones if there is none).
inline x86::hpa vmptrst() noexcept {
  std::uint64_t pa = 0;
  asm volatile("vmptrst %[pa]" : [pa] "=m"(pa) : : "memory");
  return x86::hpa{pa};
}

/// VMLAUNCH. Returns only on failure: on success the CPU runs the guest, and the next VM
/// exit resumes at the VMCS's HOST_RIP with HOST_RSP, not here.
inline vm_fail vmlaunch() noexcept {
  bool cf, zf;
  asm volatile("vmlaunch" : "=@ccc"(cf), "=@ccz"(zf) : : "memory");
  auto r = detail::status(cf, zf, vmx_instruction::vmlaunch);
  return r ? vm_fail::fail_invalid(vmx_instruction::vmlaunch) : r.error();
}
/// VMRESUME; like vmlaunch(), returns only on failure.
inline vm_fail vmresume() noexcept {
  bool cf, zf;
  asm volatile("vmresume" : "=@ccc"(cf), "=@ccz"(zf) : : "memory");
  auto r = detail::status(cf, zf, vmx_instruction::vmresume);
  return r ? vm_fail::fail_invalid(vmx_instruction::vmresume) : r.error();
}

/// INVEPT types (SDM 31.3 INVEPT).
enum class invept_type : std::uint64_t { single_context = 1, all_context = 2 };
inline result<void, vm_fail> invept(invept_type t, std::uint64_t eptp) noexcept {
  struct {
    std::uint64_t eptp, reserved;
  } desc{eptp, 0};
  bool cf, zf;
  asm volatile("invept %[d], %[t]" : "=@ccc"(cf), "=@ccz"(zf)
               : [d] "m"(desc), [t] "r"(static_cast<std::uint64_t>(t)) : "memory");
  return detail::status(cf, zf, vmx_instruction::invept);
}

/// INVVPID types (SDM 31.3 INVVPID).
enum class invvpid_type : std::uint64_t {
  individual_address = 0, single_context = 1, all_context = 2, single_context_retaining_globals = 3,
};
inline result<void, vm_fail> invvpid(invvpid_type t, std::uint16_t vpid, x86::gva address = x86::gva{}) noexcept {
  struct {
    std::uint64_t vpid, address;  // bits 15:0 VPID, bits 63:16 reserved (0)
  } desc{vpid, address.value()};
  bool cf, zf;
  asm volatile("invvpid %[d], %[t]" : "=@ccc"(cf), "=@ccz"(zf)
               : [d] "m"(desc), [t] "r"(static_cast<std::uint64_t>(t)) : "memory");
  return detail::status(cf, zf, vmx_instruction::invvpid);
}

/// The current VMCS through VMREAD/VMWRITE: a vmcs_backend.
class current_vmcs {
 public:
  [[nodiscard]] result<std::uint64_t, vm_fail> read(std::uint32_t enc) noexcept {
    std::uint64_t v = 0;
    std::uint64_t e = enc;
    bool cf, zf;
    asm volatile("vmread %[e], %[v]" : [v] "=r"(v), "=@ccc"(cf), "=@ccz"(zf) : [e] "r"(e) : "memory");
    auto s = detail::status(cf, zf, vmx_instruction::vmread, enc);
    if (!s) return unexpected(s.error());
    return v;
  }
  result<void, vm_fail> write(std::uint32_t enc, std::uint64_t v) noexcept {
    std::uint64_t e = enc;
    bool cf, zf;
    asm volatile("vmwrite %[v], %[e]" : "=@ccc"(cf), "=@ccz"(zf) : [e] "r"(e), [v] "r"(v) : "memory");
    return detail::status(cf, zf, vmx_instruction::vmwrite, enc);
  }
};
static_assert(vmcs_backend<current_vmcs>);

}  // namespace hvkit::vmx::hw

#endif  // __x86_64__
