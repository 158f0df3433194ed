// SPDX-License-Identifier: MIT
/// @file
/// @brief Logical-to-linear address translation with the segment checks of each mode.
///
/// Outside 64-bit mode: the segment must be usable, its type must allow the access (no
/// writes to code or read-only data, no reads of execute-only code) and every byte must be
/// inside the limit (expand-down segments: above it) (SDM 3.4.5.1, 5.3, 5.4.1). In 64-bit
/// mode only FS and GS have a base, there are no limit or type checks, and the first and
/// last byte must be canonical (SDM 3.3.7.1). Violations are #GP(0), or #SS(0) for an
/// SS-relative access (SDM 6.15, "Interrupt 12").
#pragma once

#include <cstdint>

#include "context.hpp"
#include "instruction.hpp"
#include "../x86/address.hpp"
#include "../x86/result.hpp"
#include "../x86/vector.hpp"

namespace hvkit::emulate {

/// What the access does with the segment.
enum class segment_access : std::uint8_t { read, write, execute };

/// A segmentation fault: #GP(0) or #SS(0).
struct segment_fault {
  x86::vector vector = x86::vector::gp;
  std::uint16_t error_code = 0;
};

/// The linear-address width that decides canonicality: 57 bits with CR4.LA57, else 48 (SDM
/// 3.3.7.1, 4.5). Only meaningful in IA-32e mode.
[[nodiscard]] constexpr x86::linear_width linear_width_of(const context& ctx) noexcept {
  return ctx.cr4.test(x86::cr4::la57) ? x86::linear_width::la57 : x86::linear_width::la48;
}

/// The linear address of `size` bytes at `offset` in segment `s` (the offset already
/// truncated to the address size).
[[nodiscard]] constexpr result<x86::gva, segment_fault> linearize(const context& ctx, sreg s, std::uint64_t offset,
                                                                   unsigned size, segment_access kind) noexcept {
  const segment_fault fault{s == sreg::ss ? x86::vector::ss : x86::vector::gp, 0};
  const segment& sg = ctx[s];
  const std::uint64_t last_off = offset + (size == 0 ? 0 : size - 1);
  if (ctx.mode() == cpu_mode::long64) {
    const std::uint64_t base = (s == sreg::fs || s == sreg::gs) ? sg.base : 0;
    const x86::gva first{base + offset};
    const x86::gva last{base + last_off};
    const auto width = linear_width_of(ctx);
    if (!x86::is_canonical(first, width) || !x86::is_canonical(last, width)) return unexpected(fault);
    return first;
  }
  if (ctx.mode() == cpu_mode::protected_) {
    if (sg.ar.test(segment_ar::unusable)) return unexpected(fault);
    if (kind == segment_access::write && (sg.ar.code() || !sg.ar.writable_or_readable())) return unexpected(fault);
    if (kind == segment_access::read && sg.ar.code() && !sg.ar.writable_or_readable()) return unexpected(fault);
  }
  // Limit checks apply in every non-64-bit mode, real mode included (SDM 20.1.1 (real-mode
  // limit 0xFFFF), 5.3). An expand-down data segment covers (limit, 0xFFFF or 0xFFFFFFFF].
  if (last_off < offset) return unexpected(fault);
  if (!sg.ar.code() && sg.ar.expand_down_or_conforming() && ctx.mode() == cpu_mode::protected_) {
    const std::uint64_t top = sg.ar.test(segment_ar::db) ? 0xffff'ffffu : 0xffffu;
    if (offset <= sg.limit || last_off > top) return unexpected(fault);
  } else if (last_off > sg.limit) {
    return unexpected(fault);
  }
  return x86::gva{(sg.base + offset) & 0xffff'ffffu};
}

}  // namespace hvkit::emulate
