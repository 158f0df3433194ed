// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: printing hvkit values. The shared machinery (`to_string` by ADL,
/// `operator<<` for iostreams, a `std::formatter` where the library has `<format>`) and the
/// names of x86/'s enumerations (exception vectors, paging modes, exception-merge verdicts,
/// general-purpose registers, CR-write faults) and #PF error codes.
///
/// Every printable hvkit type `T` has, in its own namespace:
///  - for an enumeration, `name(T)`: a `std::string_view` with the enumerator's name, empty
///    for a value that names no enumerator (constexpr, no allocation);
///  - `to_string(const T&)`: a `std::string` (an unknown enumeration value prints as
///    "type(number)", e.g. "fault_kind(200)");
///  - `operator<<(std::ostream&, const T&)`;
///  - with `__cpp_lib_format` (C++20 `<format>`; GCC 12's library has none),
///    `std::formatter<T>`, so `std::format("{}", x)` works and takes string format specs
///    (`{:>20}`).
/// @code
///   #include <hvkit/paging/hosted/print.hpp>
///   std::cout << fault.kind << '\n';                 // "not_present"
///   std::string s = to_string(fault.kind);           // found by ADL
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/x86/hosted/format.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <version>
#if defined(__cpp_lib_format)
#include <format>
#endif

#include "../apic_base.hpp"
#include "../cr_rules.hpp"
#include "../exception_merge.hpp"
#include "../gpr.hpp"
#include "../paging_mode.hpp"
#include "../pfec.hpp"
#include "../vector.hpp"

namespace hvkit::hosted {

/// Opt-in: `T` has a `to_string(const T&)` found by argument-dependent lookup. Specialize to
/// true for a printable type; operator<< and std::formatter then follow.
template <class T>
inline constexpr bool enable_printing = false;

/// A type hvkit knows how to print.
template <class T>
concept printable = enable_printing<std::remove_cvref_t<T>>;

namespace detail {
/// Calls the ADL `to_string` from a scope that declares none of its own.
template <class T>
[[nodiscard]] std::string adl_to_string(const T& v) {
  return to_string(v);
}
}  // namespace detail

/// "0x" and 16 hex digits (addresses and entries as the SDM prints 64-bit values).
[[nodiscard]] inline std::string hex16(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x0000000000000000";
  for (unsigned i = 0; i < 16; ++i) s[17 - i] = digits[(v >> (4 * i)) & 0xfu];
  return s;
}
/// "0x" and the shortest hex digits.
[[nodiscard]] inline std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v & 0xfu]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s;
}

/// The text of an enumeration value: its name, or "type(number)" for a value that has none.
template <class E>
  requires std::is_enum_v<E>
[[nodiscard]] std::string enum_string(std::string_view name, std::string_view type, E v) {
  if (!name.empty()) return std::string(name);
  std::string s(type);
  s += '(';
  s += std::to_string(static_cast<unsigned long long>(static_cast<std::underlying_type_t<E>>(v)));
  s += ')';
  return s;
}

/// Writes `to_string(v)`. Brought into each hvkit namespace by a using-declaration, so
/// argument-dependent lookup finds it for that namespace's printable types.
template <printable T>
std::ostream& operator<<(std::ostream& out, const T& v) {
  return out << detail::adl_to_string(v);
}

}  // namespace hvkit::hosted

#if defined(__cpp_lib_format)
namespace std {
/// std::format support for every printable hvkit type: formats `to_string(v)` as a string
/// (so string format specs such as width and alignment apply).
template <hvkit::hosted::printable T>
struct formatter<T, char> : formatter<string_view, char> {
  template <class FormatContext>
  auto format(const T& v, FormatContext& ctx) const {
    const string s = hvkit::hosted::detail::adl_to_string(v);
    return formatter<string_view, char>::format(string_view(s), ctx);
  }
};
}  // namespace std
#endif

namespace hvkit::x86 {

using ::hvkit::hosted::operator<<;

/// The exception's mnemonic as the SDM writes it (Table 6-1): "#PF", "NMI", ...
[[nodiscard]] constexpr std::string_view name(vector v) noexcept {
  switch (v) {
    case vector::de: return "#DE";
    case vector::db: return "#DB";
    case vector::nmi: return "NMI";
    case vector::bp: return "#BP";
    case vector::of: return "#OF";
    case vector::br: return "#BR";
    case vector::ud: return "#UD";
    case vector::nm: return "#NM";
    case vector::df: return "#DF";
    case vector::cso: return "CSO";
    case vector::ts: return "#TS";
    case vector::np: return "#NP";
    case vector::ss: return "#SS";
    case vector::gp: return "#GP";
    case vector::pf: return "#PF";
    case vector::mf: return "#MF";
    case vector::ac: return "#AC";
    case vector::mc: return "#MC";
    case vector::xm: return "#XM";
    case vector::ve: return "#VE";
    case vector::cp: return "#CP";
    case vector::hv: return "#HV";
    case vector::vc: return "#VC";
    case vector::sx: return "#SX";
  }
  return {};
}
/// See name(vector); an unnamed vector prints as "vector(n)".
[[nodiscard]] inline std::string to_string(vector v) { return ::hvkit::hosted::enum_string(name(v), "vector", v); }

/// The paging mode's name: "none", "two_level", "pae", "four_level", "five_level".
[[nodiscard]] constexpr std::string_view name(paging_mode m) noexcept {
  switch (m) {
    case paging_mode::none: return "none";
    case paging_mode::two_level: return "two_level";
    case paging_mode::pae: return "pae";
    case paging_mode::four_level: return "four_level";
    case paging_mode::five_level: return "five_level";
  }
  return {};
}
/// See name(paging_mode).
[[nodiscard]] inline std::string to_string(paging_mode m) { return ::hvkit::hosted::enum_string(name(m), "paging_mode", m); }

/// How the SDM titles the mode (Table 4-1): "32-bit", "PAE", "4-level", "5-level", or
/// "paging off".
[[nodiscard]] constexpr std::string_view description(paging_mode m) noexcept {
  switch (m) {
    case paging_mode::none: return "paging off";
    case paging_mode::two_level: return "32-bit";
    case paging_mode::pae: return "PAE";
    case paging_mode::four_level: return "4-level";
    case paging_mode::five_level: return "5-level";
  }
  return {};
}

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(merge_verdict v) noexcept {
  switch (v) {
    case merge_verdict::deliver_second: return "deliver_second";
    case merge_verdict::double_fault: return "double_fault";
    case merge_verdict::shutdown: return "shutdown";
  }
  return {};
}
/// See name(merge_verdict).
[[nodiscard]] inline std::string to_string(merge_verdict v) { return ::hvkit::hosted::enum_string(name(v), "merge_verdict", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(gpr v) noexcept {
  switch (v) {
    case gpr::rax: return "rax";
    case gpr::rcx: return "rcx";
    case gpr::rdx: return "rdx";
    case gpr::rbx: return "rbx";
    case gpr::rsp: return "rsp";
    case gpr::rbp: return "rbp";
    case gpr::rsi: return "rsi";
    case gpr::rdi: return "rdi";
    case gpr::r8: return "r8";
    case gpr::r9: return "r9";
    case gpr::r10: return "r10";
    case gpr::r11: return "r11";
    case gpr::r12: return "r12";
    case gpr::r13: return "r13";
    case gpr::r14: return "r14";
    case gpr::r15: return "r15";
  }
  return {};
}
/// See name(gpr).
[[nodiscard]] inline std::string to_string(gpr v) { return ::hvkit::hosted::enum_string(name(v), "gpr", v); }

/// A #PF error code: the value, then the set bits by their SDM names (4.7, Figure 4-12) in
/// brackets: "0x7 [P W U]"; software-only flags as "implicit", unnamed bits as hex; "0x0"
/// when empty.
[[nodiscard]] inline std::string to_string(pfec e) {
  std::string s = ::hvkit::hosted::hex(e.raw() & 0xffff'ffffu);
  std::string names;
  auto add = [&](bool on, std::string_view n) {
    if (!on) return;
    if (!names.empty()) names += ' ';
    names += n;
  };
  add(e.test(pfec::present), "P");
  add(e.test(pfec::write), "W");
  add(e.test(pfec::user), "U");
  add(e.test(pfec::rsvd), "RSVD");
  add(e.test(pfec::fetch), "I");
  add(e.test(pfec::pk), "PK");
  add(e.test(pfec::ss), "SS");
  add(e.test(pfec::hlat), "HLAT");
  add(e.test(pfec::sgx), "SGX");
  add(e.test(pfec::implicit_access), "implicit");
  const std::uint64_t named = (pfec::present | pfec::write | pfec::user | pfec::rsvd | pfec::fetch | pfec::pk |
                               pfec::ss | pfec::hlat | pfec::sgx | pfec::implicit_access)
                                  .raw();
  if (e.raw() & ~named) add(true, ::hvkit::hosted::hex(e.raw() & ~named));
  return names.empty() ? s : s + " [" + names + "]";
}

/// The CR-write fault's name (pg_without_pe, ...); empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(cr_write_fault v) noexcept {
  switch (v) {
    case cr_write_fault::none: return "none";
    case cr_write_fault::reserved_bit: return "reserved_bit";
    case cr_write_fault::pg_without_pe: return "pg_without_pe";
    case cr_write_fault::nw_without_cd: return "nw_without_cd";
    case cr_write_fault::long_mode_without_pae: return "long_mode_without_pae";
    case cr_write_fault::clear_wp_with_cet: return "clear_wp_with_cet";
    case cr_write_fault::cet_without_wp: return "cet_without_wp";
    case cr_write_fault::clear_pae_in_long_mode: return "clear_pae_in_long_mode";
    case cr_write_fault::change_la57_in_long_mode: return "change_la57_in_long_mode";
    case cr_write_fault::pcide_bad_state: return "pcide_bad_state";
    case cr_write_fault::clear_pg_in_64bit_mode: return "clear_pg_in_64bit_mode";
    case cr_write_fault::activate_ia32e_with_cs_l: return "activate_ia32e_with_cs_l";
    case cr_write_fault::clear_pg_with_pcide: return "clear_pg_with_pcide";
    case cr_write_fault::cr3_reserved_bit: return "cr3_reserved_bit";
  }
  return {};
}
/// See name(cr_write_fault).
[[nodiscard]] inline std::string to_string(cr_write_fault v) { return ::hvkit::hosted::enum_string(name(v), "cr_write_fault", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(apic_mode v) noexcept {
  switch (v) {
    case apic_mode::disabled: return "disabled";
    case apic_mode::invalid: return "invalid";
    case apic_mode::xapic: return "xapic";
    case apic_mode::x2apic: return "x2apic";
  }
  return {};
}
/// See name(apic_mode).
[[nodiscard]] inline std::string to_string(apic_mode v) { return ::hvkit::hosted::enum_string(name(v), "apic_mode", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(apic_base_fault v) noexcept {
  switch (v) {
    case apic_base_fault::reserved_bit: return "reserved_bit";
    case apic_base_fault::invalid_state: return "invalid_state";
    case apic_base_fault::x2apic_to_xapic: return "x2apic_to_xapic";
    case apic_base_fault::disabled_to_x2apic: return "disabled_to_x2apic";
  }
  return {};
}
/// See name(apic_base_fault).
[[nodiscard]] inline std::string to_string(apic_base_fault v) {
  return ::hvkit::hosted::enum_string(name(v), "apic_base_fault", v);
}


}  // namespace hvkit::x86

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<x86::vector> = true;
template <>
inline constexpr bool enable_printing<x86::paging_mode> = true;
template <>
inline constexpr bool enable_printing<x86::pfec> = true;
template <>
inline constexpr bool enable_printing<x86::merge_verdict> = true;
template <>
inline constexpr bool enable_printing<x86::gpr> = true;
template <>
inline constexpr bool enable_printing<x86::cr_write_fault> = true;
template <>
inline constexpr bool enable_printing<x86::apic_mode> = true;
template <>
inline constexpr bool enable_printing<x86::apic_base_fault> = true;
}  // namespace hvkit::hosted
