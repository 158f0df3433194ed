// SPDX-License-Identifier: MIT
/// @file
/// @brief `soft_vmcs`: a VMCS in ordinary memory holding every field of the field table
/// (fixed storage, no heap). For tests, simulators and a nested hypervisor's vmcs12.
///
/// It behaves like VMREAD/VMWRITE on a current VMCS (SDM 31.3): an encoding that names no
/// field fails with VMfailValid(12), a VMWRITE to a VM-exit information field fails with
/// VMfailValid(13) unless the "VMWRITE to any field" capability (IA32_VMX_MISC bit 29) is
/// emulated, a HIGH access reads or writes bits 63:32 of a 64-bit field, and a write keeps
/// only the bits the field holds. store() is the CPU's side: it writes any field, including
/// exit information, as a VM exit would. It counts reads and writes (tests, benchmarks).
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"
#include "fields.hpp"

namespace hvkit::vmx {

class soft_vmcs {
 public:
  constexpr soft_vmcs() noexcept = default;
  /// `vmwrite_any_field`: emulate IA32_VMX_MISC bit 29 (VMWRITE may write exit-info fields).
  constexpr explicit soft_vmcs(bool vmwrite_any_field) noexcept : vmwrite_any_(vmwrite_any_field) {}

  /// VMREAD semantics.
  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> read(std::uint32_t enc) noexcept {
    ++reads_;
    const int s = slot_of(enc);
    if (s < 0)
      return unexpected(vm_fail::fail_valid(vmx_instruction::vmread, vm_instruction_error::unsupported_vmcs_component, enc));
    const std::uint64_t v = values_[static_cast<std::size_t>(s)];
    return is_high_access(enc) ? (v >> 32) : v;
  }

  /// VMWRITE semantics.
  constexpr result<void, vm_fail> write(std::uint32_t enc, std::uint64_t v) noexcept {
    ++writes_;
    const int s = slot_of(enc);
    if (s < 0)
      return unexpected(vm_fail::fail_valid(vmx_instruction::vmwrite, vm_instruction_error::unsupported_vmcs_component, enc));
    if (type_of(enc) == field_type::exit_info && !vmwrite_any_)
      return unexpected(vm_fail::fail_valid(vmx_instruction::vmwrite, vm_instruction_error::vmwrite_read_only_component, enc));
    put(static_cast<std::size_t>(s), enc, v);
    return {};
  }

  /// The processor's side: set any field (exit information included), no counting.
  constexpr void store(std::uint32_t enc, std::uint64_t v) noexcept {
    const int s = slot_of(enc);
    HVKIT_EXPECTS(s >= 0);
    put(static_cast<std::size_t>(s), enc, v);
  }
  /// Typed store(); takes what vmwrite() takes (the field's value type, the register type
  /// it holds, or an integer constant that fits).
  template <std::uint32_t E>
  constexpr void store(field<E>, std::type_identity_t<field_value<E>> v) noexcept {
    put(slot_v<E>, E, static_cast<std::uint64_t>(v.raw()));
  }
  /// The stored value of a typed field, without counting (for assertions).
  template <std::uint32_t E>
  [[nodiscard]] constexpr typename field<E>::value_type peek(field<E>) const noexcept {
    const std::uint64_t v = values_[slot_v<E>];
    return static_cast<typename field<E>::value_type>(field<E>::high ? v >> 32 : v);
  }

  [[nodiscard]] constexpr std::uint64_t reads() const noexcept { return reads_; }
  [[nodiscard]] constexpr std::uint64_t writes() const noexcept { return writes_; }
  constexpr void reset_counts() noexcept { reads_ = writes_ = 0; }

 private:
  constexpr void put(std::size_t s, std::uint32_t enc, std::uint64_t v) noexcept {
    if (is_high_access(enc)) {
      values_[s] = (values_[s] & 0xffff'ffffu) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)) << 32);
    } else {
      values_[s] = v & value_mask(enc);
    }
  }

  std::array<std::uint64_t, field_count> values_{};
  std::uint64_t reads_ = 0;
  std::uint64_t writes_ = 0;
  bool vmwrite_any_ = false;
};

static_assert(vmcs_backend<soft_vmcs>);

}  // namespace hvkit::vmx
