// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: names and printers for emulate/: outcome kinds, events, unsupported
/// reasons, mnemonics, decode errors, CPU modes and segment registers, and an outcome in
/// one line.
///
/// See x86/hosted/format.hpp for the conventions (`name()`, `to_string()`, `operator<<`,
/// `std::formatter`). Mnemonics print without the trailing underscore that keeps C++
/// keywords out of the enumeration (`mnemonic::and_` is "and").
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/emulate/hosted/print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "../context.hpp"
#include "../decoder.hpp"
#include "../instruction.hpp"
#include "../outcome.hpp"
#include "../../x86/hosted/format.hpp"

namespace hvkit::emulate {

using ::hvkit::hosted::operator<<;

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(outcome_kind v) noexcept {
  switch (v) {
    case outcome_kind::done: return "done";
    case outcome_kind::exception: return "exception";
    case outcome_kind::needs_io: return "needs_io";
    case outcome_kind::needs_mmio: return "needs_mmio";
    case outcome_kind::unsupported: return "unsupported";
  }
  return {};
}
/// See name(outcome_kind).
[[nodiscard]] inline std::string to_string(outcome_kind v) { return ::hvkit::hosted::enum_string(name(v), "outcome_kind", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(event v) noexcept {
  switch (v) {
    case event::none: return "none";
    case event::halt: return "halt";
    case event::invlpg: return "invlpg";
    case event::cr_write: return "cr_write";
    case event::dr_write: return "dr_write";
    case event::msr_write: return "msr_write";
    case event::descriptor_table_load: return "descriptor_table_load";
    case event::cache_flush: return "cache_flush";
  }
  return {};
}
/// See name(event).
[[nodiscard]] inline std::string to_string(event v) { return ::hvkit::hosted::enum_string(name(v), "event", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(unsupported_reason v) noexcept {
  switch (v) {
    case unsupported_reason::none: return "none";
    case unsupported_reason::instruction: return "instruction";
    case unsupported_reason::fetch_not_ram: return "fetch_not_ram";
    case unsupported_reason::page_table_unbacked: return "page_table_unbacked";
    case unsupported_reason::second_stage_fault: return "second_stage_fault";
    case unsupported_reason::invalid_context: return "invalid_context";
    case unsupported_reason::too_many_device_accesses: return "too_many_device_accesses";
  }
  return {};
}
/// See name(unsupported_reason).
[[nodiscard]] inline std::string to_string(unsupported_reason v) { return ::hvkit::hosted::enum_string(name(v), "unsupported_reason", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(mnemonic v) noexcept {
  switch (v) {
    case mnemonic::invalid: return "invalid";
    case mnemonic::mov: return "mov";
    case mnemonic::movzx: return "movzx";
    case mnemonic::movsx: return "movsx";
    case mnemonic::movsxd: return "movsxd";
    case mnemonic::mov_from_sreg: return "mov_from_sreg";
    case mnemonic::mov_to_sreg: return "mov_to_sreg";
    case mnemonic::xchg: return "xchg";
    case mnemonic::cmpxchg: return "cmpxchg";
    case mnemonic::cmpxchg8b: return "cmpxchg8b";
    case mnemonic::cmpxchg16b: return "cmpxchg16b";
    case mnemonic::add: return "add";
    case mnemonic::or_: return "or";
    case mnemonic::adc: return "adc";
    case mnemonic::sbb: return "sbb";
    case mnemonic::and_: return "and";
    case mnemonic::sub: return "sub";
    case mnemonic::xor_: return "xor";
    case mnemonic::cmp: return "cmp";
    case mnemonic::test: return "test";
    case mnemonic::not_: return "not";
    case mnemonic::neg: return "neg";
    case mnemonic::inc: return "inc";
    case mnemonic::dec: return "dec";
    case mnemonic::bt: return "bt";
    case mnemonic::bts: return "bts";
    case mnemonic::btr: return "btr";
    case mnemonic::btc: return "btc";
    case mnemonic::movs: return "movs";
    case mnemonic::cmps: return "cmps";
    case mnemonic::stos: return "stos";
    case mnemonic::lods: return "lods";
    case mnemonic::ins: return "ins";
    case mnemonic::outs: return "outs";
    case mnemonic::in: return "in";
    case mnemonic::out: return "out";
    case mnemonic::sldt: return "sldt";
    case mnemonic::str: return "str";
    case mnemonic::lldt: return "lldt";
    case mnemonic::ltr: return "ltr";
    case mnemonic::verr: return "verr";
    case mnemonic::verw: return "verw";
    case mnemonic::sgdt: return "sgdt";
    case mnemonic::sidt: return "sidt";
    case mnemonic::lgdt: return "lgdt";
    case mnemonic::lidt: return "lidt";
    case mnemonic::smsw: return "smsw";
    case mnemonic::lmsw: return "lmsw";
    case mnemonic::invlpg: return "invlpg";
    case mnemonic::mov_from_cr: return "mov_from_cr";
    case mnemonic::mov_to_cr: return "mov_to_cr";
    case mnemonic::mov_from_dr: return "mov_from_dr";
    case mnemonic::mov_to_dr: return "mov_to_dr";
    case mnemonic::clts: return "clts";
    case mnemonic::cpuid: return "cpuid";
    case mnemonic::rdmsr: return "rdmsr";
    case mnemonic::wrmsr: return "wrmsr";
    case mnemonic::hlt: return "hlt";
    case mnemonic::invd: return "invd";
    case mnemonic::wbinvd: return "wbinvd";
    case mnemonic::vmcall: return "vmcall";
    case mnemonic::vmmcall: return "vmmcall";
    case mnemonic::int3: return "int3";
    case mnemonic::int_n: return "int";
    case mnemonic::into: return "into";
    case mnemonic::int1: return "int1";
  }
  return {};
}
/// See name(mnemonic).
[[nodiscard]] inline std::string to_string(mnemonic v) { return ::hvkit::hosted::enum_string(name(v), "mnemonic", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(decode_error v) noexcept {
  switch (v) {
    case decode_error::truncated: return "truncated";
    case decode_error::too_long: return "too_long";
    case decode_error::invalid: return "invalid";
    case decode_error::unsupported: return "unsupported";
  }
  return {};
}
/// See name(decode_error).
[[nodiscard]] inline std::string to_string(decode_error v) { return ::hvkit::hosted::enum_string(name(v), "decode_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(cpu_mode v) noexcept {
  switch (v) {
    case cpu_mode::real: return "real";
    case cpu_mode::vm86: return "vm86";
    case cpu_mode::protected_: return "protected";
    case cpu_mode::long64: return "long64";
  }
  return {};
}
/// See name(cpu_mode).
[[nodiscard]] inline std::string to_string(cpu_mode v) { return ::hvkit::hosted::enum_string(name(v), "cpu_mode", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(sreg v) noexcept {
  switch (v) {
    case sreg::es: return "es";
    case sreg::cs: return "cs";
    case sreg::ss: return "ss";
    case sreg::ds: return "ds";
    case sreg::fs: return "fs";
    case sreg::gs: return "gs";
  }
  return {};
}
/// See name(sreg).
[[nodiscard]] inline std::string to_string(sreg v) { return ::hvkit::hosted::enum_string(name(v), "sreg", v); }

namespace detail {
template <class V>
[[nodiscard]] constexpr std::uint64_t raw_value(V v) noexcept {
  if constexpr (std::is_integral_v<V>) return static_cast<std::uint64_t>(v);
  else return static_cast<std::uint64_t>(v.raw());
}
}  // namespace detail

/// An outcome in one line: "done", "done (halt)", "exception #GP error code 0x0",
/// "exception #PF error code 0x2 cr2 0x...", "needs_io write port 0x70 size 1 value 0x8f",
/// "needs_mmio read gpa 0xfee00030 size 4", "unsupported (instruction: ltr)".
[[nodiscard]] inline std::string to_string(const outcome& o) {
  std::string s = to_string(o.kind);
  switch (o.kind) {
    case outcome_kind::done:
      if (o.what != event::none) s += " (" + to_string(o.what) + ")";
      break;
    case outcome_kind::exception:
      s += ' ' + to_string(o.vector);
      if (x86::has_error_code(o.vector, x86::vendor::intel)) s += " error code " + ::hvkit::hosted::hex(detail::raw_value(o.error_code));
      if (o.vector == x86::vector::pf) s += " cr2 " + ::hvkit::hosted::hex(o.cr2);
      break;
    case outcome_kind::needs_io:
    case outcome_kind::needs_mmio:
      s += o.write ? " write " : " read ";
      s += o.kind == outcome_kind::needs_io ? "port " : "gpa ";
      s += ::hvkit::hosted::hex(o.address) + " size " + std::to_string(o.size);
      if (o.write) s += " value " + ::hvkit::hosted::hex(o.value);
      break;
    case outcome_kind::unsupported:
      s += " (" + to_string(o.why);
      if (o.op != mnemonic::invalid) s += ": " + to_string(o.op);
      s += ')';
      break;
  }
  return s;
}

}  // namespace hvkit::emulate

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<emulate::outcome_kind> = true;
template <>
inline constexpr bool enable_printing<emulate::event> = true;
template <>
inline constexpr bool enable_printing<emulate::unsupported_reason> = true;
template <>
inline constexpr bool enable_printing<emulate::mnemonic> = true;
template <>
inline constexpr bool enable_printing<emulate::decode_error> = true;
template <>
inline constexpr bool enable_printing<emulate::cpu_mode> = true;
template <>
inline constexpr bool enable_printing<emulate::sreg> = true;
template <>
inline constexpr bool enable_printing<emulate::outcome> = true;
}  // namespace hvkit::hosted
