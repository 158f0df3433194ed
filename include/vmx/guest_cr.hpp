// SPDX-License-Identifier: MIT
/// @file
/// @brief `guest_cr`: the hypervisor's cached guest-visible CR0/CR4 and read_cr0_bits() /
/// read_cr4_bits(), which read the VMCS only if an asked bit is guest-owned.
///
/// Host-owned bits cannot change without a VM exit, so the cached value is exact for them.
/// Guest-owned bits may have changed since the last exit (no exit on a guest write), so asking
/// for one reads GUEST_CR0/GUEST_CR4 once per exit (docs/background.md §1: the reader that made
/// CR0.WP passthrough cheap and correct).
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "cr_mask.hpp"
#include "fields.hpp"
#include "../x86/cr.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

class guest_cr {
 public:
  constexpr guest_cr() noexcept = default;
  /// `cr0`/`cr4` are the guest-visible values the hypervisor last established.
  constexpr guest_cr(x86::cr0 cr0, x86::cr4 cr4, guest_owned_bits owned) noexcept
      : cr0_(cr0), cr4_(cr4), owned_(owned) {}

  /// After every VM exit: guest-owned bits may have changed in the VMCS.
  constexpr void on_vm_exit() noexcept { cr0_fresh_ = cr4_fresh_ = false; }

  /// The bits `mask` of the guest-visible CR0. Reads GUEST_CR0 only if `mask` includes a
  /// guest-owned bit and it was not read since the last exit.
  template <vmcs_backend B>
  [[nodiscard]] constexpr result<x86::cr0, vm_fail> read_cr0_bits(B& b, x86::cr0 mask) noexcept {
    if ((mask & owned_.cr0).none() || cr0_fresh_) return cr0_ & mask;
    auto r = vmread(b, fields::guest_cr0);
    if (!r) return unexpected(r.error());
    cr0_ = (cr0_ & ~owned_.cr0) | (x86::cr0{r.value()} & owned_.cr0);
    cr0_fresh_ = true;
    return cr0_ & mask;
  }
  /// As read_cr0_bits(), for CR4.
  template <vmcs_backend B>
  [[nodiscard]] constexpr result<x86::cr4, vm_fail> read_cr4_bits(B& b, x86::cr4 mask) noexcept {
    if ((mask & owned_.cr4).none() || cr4_fresh_) return cr4_ & mask;
    auto r = vmread(b, fields::guest_cr4);
    if (!r) return unexpected(r.error());
    cr4_ = (cr4_ & ~owned_.cr4) | (x86::cr4{r.value()} & owned_.cr4);
    cr4_fresh_ = true;
    return cr4_ & mask;
  }

  /// read_cr_bits(vmcs, mask): KVM's name, overloaded on the mask's register type.
  template <vmcs_backend B>
  [[nodiscard]] constexpr result<x86::cr0, vm_fail> read_cr_bits(B& b, x86::cr0 mask) noexcept { return read_cr0_bits(b, mask); }
  template <vmcs_backend B>
  [[nodiscard]] constexpr result<x86::cr4, vm_fail> read_cr_bits(B& b, x86::cr4 mask) noexcept { return read_cr4_bits(b, mask); }

  /// Record a value the hypervisor set (after emulating a write, or at VM entry setup).
  constexpr void set_cr0(x86::cr0 v) noexcept { cr0_ = v; cr0_fresh_ = true; }
  constexpr void set_cr4(x86::cr4 v) noexcept { cr4_ = v; cr4_fresh_ = true; }
  constexpr void set_guest_owned(guest_owned_bits o) noexcept { owned_ = o; }
  [[nodiscard]] constexpr guest_owned_bits guest_owned() const noexcept { return owned_; }

 private:
  x86::cr0 cr0_{};
  x86::cr4 cr4_{};
  guest_owned_bits owned_{};
  bool cr0_fresh_ = false;
  bool cr4_fresh_ = false;
};

}  // namespace hvkit::vmx
