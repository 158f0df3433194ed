// SPDX-License-Identifier: MIT
/// @file
/// @brief `cached_vmcs<Backend>`: a caching decorator with per-field available/dirty state.
///
/// Between two VM exits a field is read from the backend at most once; writes go to the
/// cache and are written back by flush() (call it before VM entry). After every VM exit call
/// on_vm_exit(): it drops the available state of what the CPU may have rewritten (guest
/// state, exit information, and four control fields); other control and host-state fields
/// stay cached across exits. A HIGH-half access goes through the full field's cache entry.
/// Encodings that name no listed field pass straight through to the backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "fields.hpp"

namespace hvkit::vmx {

template <vmcs_backend Backend>
class cached_vmcs {
  static constexpr std::size_t words = (field_count + 63) / 64;

 public:
  constexpr explicit cached_vmcs(Backend& b) noexcept : backend_(&b) {}

  /// Read by encoding (the encoding may be a run-time value).
  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> read(std::uint32_t enc) noexcept {
    const int si = slot_of(enc);
    if (si < 0) return backend_->read(enc);
    const auto s = static_cast<std::size_t>(si);
    if (!test(available_, s)) {
      auto r = fill(s, enc & ~1u);
      if (!r) return r;
    }
    return is_high_access(enc) ? values_[s] >> 32 : values_[s];
  }

  /// Read of a typed field (what vmx::vmread() calls): the slot is a compile-time constant,
  /// so a hit is one bit test and one load, inlined; only a miss goes to the backend.
  template <std::uint32_t E>
    requires(slot_of(E) >= 0)  // unlisted fields take the by-encoding path (to the backend)
  [[nodiscard]] constexpr result<std::uint64_t, vm_fail> read(field<E>) noexcept {
    constexpr std::size_t s = slot_v<E>;
    if (!test(available_, s)) [[unlikely]] {
      auto r = fill(s, E & ~1u);
      if (!r) return r;
    }
    return field<E>::high ? values_[s] >> 32 : values_[s];
  }

  constexpr result<void, vm_fail> write(std::uint32_t enc, std::uint64_t v) noexcept {
    const int si = slot_of(enc);
    if (si < 0) return backend_->write(enc, v);
    if (type_of(enc) == field_type::exit_info)  // let the backend decide (error 13 or MISC bit 29)
      return write_through(enc, v, static_cast<std::size_t>(si));
    const auto s = static_cast<std::size_t>(si);
    if (is_high_access(enc)) {
      auto full = read(enc & ~1u);
      if (!full) return unexpected(full.error());
      return put(s, with_high(full.value(), v));
    }
    return put(s, v & value_mask(enc));
  }

  /// Write of a typed field (what vmx::vmwrite() calls): no run-time slot lookup.
  template <std::uint32_t E>
    requires(slot_of(E) >= 0)
  constexpr result<void, vm_fail> write(field<E>, std::uint64_t v) noexcept {
    constexpr std::size_t s = slot_v<E>;
    if constexpr (field<E>::read_only) {
      return write_through(E, v, s);
    } else if constexpr (field<E>::high) {
      auto full = read(field<(E & ~1u)>{});
      if (!full) return unexpected(full.error());
      return put(s, with_high(full.value(), v));
    } else {
      return put(s, v & value_mask(E));
    }
  }

  /// Writes every dirty field back to the backend, in field-table order. Stops at the first
  /// failure (that field and the ones after it stay dirty).
  constexpr result<void, vm_fail> flush() noexcept {
    for (std::size_t w = 0; w < words; ++w) {
      while (dirty_[w] != 0) {
        const auto bit = static_cast<std::size_t>(__builtin_ctzll(dirty_[w]));
        const std::size_t s = w * 64 + bit;
        auto r = backend_->write(field_table[s].encoding, values_[s]);
        if (!r) return r;
        dirty_[w] &= dirty_[w] - 1;
      }
    }
    return {};
  }

  /// After a VM exit: the guest-state and exit-information fields have changed in the
  /// backend, and so may the few control fields the processor writes without the
  /// hypervisor: the "IA-32e mode guest" VM-entry control (saved from EFER.LMA) and the
  /// valid bit of the VM-entry interruption information (cleared) on every exit (SDM Vol. 3C
  /// 28.2, 28.3), the EPTP and EPTP index by VMFUNC EPTP switching in the guest (SDM 26.5.6.3).
  /// Every other control field and the host-state fields only change by VMWRITE, so they
  /// stay available. Dirty fields must have been flushed before the VM entry; a dirty field
  /// here is a contract violation.
  constexpr void on_vm_exit() noexcept {
    HVKIT_EXPECTS(!any_dirty());
    for (std::size_t w = 0; w < words; ++w) available_[w] &= survives_exit[w];
  }

  /// Forget cached values without writing back (e.g. after VMPTRLD of another VMCS).
  constexpr void invalidate() noexcept {
    available_ = {};
    dirty_ = {};
  }

  [[nodiscard]] constexpr bool any_dirty() const noexcept {
    for (auto w : dirty_)
      if (w != 0) return true;
    return false;
  }
  template <std::uint32_t E>
  [[nodiscard]] constexpr bool is_available(field<E>) const noexcept { return test(available_, slot_v<E>); }
  template <std::uint32_t E>
  [[nodiscard]] constexpr bool is_dirty(field<E>) const noexcept { return test(dirty_, slot_v<E>); }

  [[nodiscard]] constexpr Backend& backend() noexcept { return *backend_; }

 private:
  using bits = std::array<std::uint64_t, words>;
  // Slots a VM exit leaves unchanged (see on_vm_exit()).
  static constexpr bits survives_exit = [] {
    bits b{};
    for (std::size_t s = 0; s < field_count; ++s) {
      const std::uint32_t e = field_table[s].encoding;
      const field_type t = type_of(e);
      const bool exit_writes = e == fields::vm_entry_controls.encoding || e == fields::vm_entry_interruption_info.encoding ||
                               e == fields::ept_pointer.encoding || e == fields::eptp_index.encoding;
      if ((t == field_type::control || t == field_type::host) && !exit_writes) b[s / 64] |= std::uint64_t{1} << (s % 64);
    }
    return b;
  }();
  static constexpr bool test(const bits& b, std::size_t s) noexcept { return (b[s / 64] >> (s % 64)) & 1u; }
  static constexpr void set(bits& b, std::size_t s) noexcept { b[s / 64] |= std::uint64_t{1} << (s % 64); }
  static constexpr void clear(bits& b, std::size_t s) noexcept { b[s / 64] &= ~(std::uint64_t{1} << (s % 64)); }

  // A cached write: the value is available, and dirty until flush().
  constexpr result<void, vm_fail> put(std::size_t s, std::uint64_t value) noexcept {
    values_[s] = value;
    set(available_, s);
    set(dirty_, s);
    return {};
  }
  // A HIGH-half write: the low 32 bits of `v` replace bits 63:32 of the full field.
  static constexpr std::uint64_t with_high(std::uint64_t full, std::uint64_t v) noexcept {
    return (full & 0xffff'ffffu) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)) << 32);
  }

  // A miss: read the full field from the backend and make it available.
  constexpr result<std::uint64_t, vm_fail> fill(std::size_t s, std::uint32_t full_encoding) noexcept {
    auto r = backend_->read(full_encoding);
    if (!r) return r;
    values_[s] = r.value();
    set(available_, s);
    return r;
  }

  constexpr result<void, vm_fail> write_through(std::uint32_t enc, std::uint64_t v, std::size_t s) noexcept {
    auto r = backend_->write(enc, v);
    clear(available_, s);  // re-read on next access (HIGH writes, masking done by the backend)
    return r;
  }

  Backend* backend_;
  std::array<std::uint64_t, field_count> values_{};
  bits available_{};
  bits dirty_{};
};

}  // namespace hvkit::vmx
