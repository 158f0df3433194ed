// SPDX-License-Identifier: MIT
/// @file
/// @brief `register_file<Backend>`: the guest's general-purpose registers in memory (where
/// the VM-exit stub saves them) and RSP, RIP and RFLAGS in the VMCS, read lazily and written
/// back before VM entry, with per-register available/dirty bits (KVM's register cache).
///
/// VM exits save RSP, RIP and RFLAGS in the guest-state area, not in registers (SDM Vol. 3C
/// 28.3.1); the other GPRs keep their guest values and the hypervisor's stub stores them.
/// Registers are numbered as instructions and exit qualifications encode them (x86::gpr;
/// 4 = RSP, whose slot in the GPR block is unused: it lives in the VMCS). The first read of
/// RSP/RIP/RFLAGS after an exit costs one VMREAD, later reads none; writes stay in the file
/// until flush(), which the hypervisor calls before VMRESUME. Works over any vmcs_backend
/// (hw::current_vmcs, soft_vmcs, cached_vmcs).
///
/// The GPRs live in a `gpr_block` the hypervisor owns (per vCPU, where its entry/exit stub
/// loads and saves them); the file refers to it. A file is cheap to make: constructing one
/// per exit is the same as on_vm_exit().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "fields.hpp"
#include "../x86/gpr.hpp"
#include "../x86/result.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::vmx {

/// The guest's general-purpose registers in memory (x86::gpr_block). Slot 4 is not the
/// guest's RSP (that lives in the VMCS); register_file never uses it.
using gpr_block = x86::gpr_block;

template <vmcs_backend Backend>
class register_file {
 public:
  /// The VMCS-resident registers, as bits of the available/dirty masks.
  enum class vmcs_reg : std::uint8_t { rsp = 0, rip = 1, rflags = 2 };

  constexpr register_file(Backend& b, gpr_block& gprs) noexcept : gpr_(&gprs), backend_(&b) {}

  /// The in-memory block the file reads and writes the GPRs in.
  [[nodiscard]] constexpr gpr_block& gprs() noexcept { return *gpr_; }

  /// Register `r` (RSP from the VMCS on first use after an exit).
  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> read(x86::gpr r) noexcept {
    if (r == x86::gpr::rsp) return load(vmcs_reg::rsp, fields::guest_rsp);
    return (*gpr_)[r];
  }
  /// Register number `n` (bits 3:0) as an exit qualification or instruction information reports it.
  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> read(unsigned n) noexcept { return read(x86::gpr_from_index(n)); }
  constexpr void write(x86::gpr r, std::uint64_t v) noexcept {
    if (r == x86::gpr::rsp) store(vmcs_reg::rsp, v);
    else (*gpr_)[r] = v;
  }
  constexpr void write(unsigned n, std::uint64_t v) noexcept { write(x86::gpr_from_index(n), v); }

  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> rip() noexcept { return load(vmcs_reg::rip, fields::guest_rip); }
  constexpr void set_rip(std::uint64_t v) noexcept { store(vmcs_reg::rip, v); }
  [[nodiscard]] constexpr result<x86::rflags, vm_fail> rflags() noexcept {
    auto r = load(vmcs_reg::rflags, fields::guest_rflags);
    if (!r) return unexpected(r.error());
    return x86::rflags{r.value()};
  }
  constexpr void set_rflags(x86::rflags v) noexcept { store(vmcs_reg::rflags, v.raw()); }

  /// Before VM entry: writes the dirty VMCS-resident registers back (RSP, RIP, RFLAGS order).
  /// On failure the register that failed and the ones after it stay dirty.
  constexpr result<void, vm_fail> flush() noexcept {
    if (dirty(vmcs_reg::rsp)) {
      auto r = vmwrite(*backend_, fields::guest_rsp, vals_[0]);
      if (!r) return r;
      dirty_ &= ~mask(vmcs_reg::rsp);
    }
    if (dirty(vmcs_reg::rip)) {
      auto r = vmwrite(*backend_, fields::guest_rip, vals_[1]);
      if (!r) return r;
      dirty_ &= ~mask(vmcs_reg::rip);
    }
    if (dirty(vmcs_reg::rflags)) {
      auto r = vmwrite(*backend_, fields::guest_rflags, vals_[2]);
      if (!r) return r;
      dirty_ &= ~mask(vmcs_reg::rflags);
    }
    return {};
  }
  /// After every VM exit: the VMCS holds new RSP/RIP/RFLAGS. Dirty registers must have been
  /// flushed before the entry; one still dirty here is a contract violation.
  constexpr void on_vm_exit() noexcept {
    HVKIT_EXPECTS(dirty_ == 0);
    available_ = 0;
  }
  /// Forget the VMCS-resident registers without writing them (another VMCS became current).
  constexpr void invalidate() noexcept { available_ = dirty_ = 0; }

  [[nodiscard]] constexpr bool available(vmcs_reg r) const noexcept { return (available_ & mask(r)) != 0; }
  [[nodiscard]] constexpr bool dirty(vmcs_reg r) const noexcept { return (dirty_ & mask(r)) != 0; }
  [[nodiscard]] constexpr Backend& backend() noexcept { return *backend_; }
  /// Point the file at another backend (e.g. after switching the current VMCS); invalidates.
  constexpr void rebind(Backend& b) noexcept {
    backend_ = &b;
    invalidate();
  }

 private:
  static constexpr unsigned mask(vmcs_reg r) noexcept { return 1u << static_cast<unsigned>(r); }
  template <std::uint32_t E>
  constexpr result<std::uint64_t, vm_fail> load(vmcs_reg r, field<E> f) noexcept {
    const auto i = static_cast<unsigned>(r);
    if (!(available_ & mask(r))) [[unlikely]] {
      auto v = vmread(*backend_, f);
      if (!v) return unexpected(v.error());
      vals_[i] = v.value();
      available_ |= mask(r);
    }
    return vals_[i];
  }
  constexpr void store(vmcs_reg r, std::uint64_t v) noexcept {
    vals_[static_cast<unsigned>(r)] = v;
    available_ |= mask(r);
    dirty_ |= mask(r);
  }

  gpr_block* gpr_;
  std::array<std::uint64_t, 3> vals_{};
  unsigned available_ = 0;
  unsigned dirty_ = 0;
  Backend* backend_;
};

}  // namespace hvkit::vmx
