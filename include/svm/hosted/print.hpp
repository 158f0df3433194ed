// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: names and printers for svm/: exit codes (the APM's names, Table C-1),
/// the EXITINFO1/EXITINFO2 decodings (IOIO, MOV CR/DR, exception, #NPF), EVENTINJ and
/// EXITINTINFO, intercepts and intercept sets, and the svm/ enumerations (event types,
/// injection and VMRUN errors, TLB control, clean bits, segments, CR0 write intercepts).
///
/// See x86/hosted/format.hpp for the conventions (`name()`, `to_string()`, `operator<<`,
/// `std::formatter`).
/// @code
///   std::cout << svm::exit_code{0x400} << '\n';              // "NPF"
///   std::cout << svm::decode_npf(info1, info2) << '\n';    // "gpa 0x...: 0x100000006 [W U] final translation"
///   std::cout << intercepts << '\n';                       // "{cr4_write excp14 cpuid msr_prot vmrun}"
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/svm/hosted/print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "../clean_bits.hpp"
#include "../cr_intercepts.hpp"
#include "../event_injection.hpp"
#include "../exit_code.hpp"
#include "../exit_info.hpp"
#include "../intercepts.hpp"
#include "../npf.hpp"
#include "../segment.hpp"
#include "../tlb.hpp"
#include "../vmrun_checks.hpp"
#include "../../paging/hosted/print.hpp"  // role_sync (svm::role_sync is paging::role_sync)
#include "../../x86/hosted/format.hpp"
#include "../../x86/vector.hpp"

namespace hvkit::svm {

using ::hvkit::hosted::operator<<;

/// Table C-1's name without "VMEXIT_" ("CR0_WRITE", "EXCP14", "NPF", "INVALID"); empty for
/// a code the table does not list.
[[nodiscard]] constexpr std::string_view name_of(exit_code c) noexcept {
  const char* n = name(c);
  return n ? std::string_view(n) : std::string_view{};
}
/// See name_of(exit_code); an unlisted code prints as "exit_code(0x...)".
[[nodiscard]] inline std::string to_string(exit_code c) {
  const std::string_view n = name_of(c);
  return n.empty() ? "exit_code(" + ::hvkit::hosted::hex(raw(c)) + ")" : std::string(n);
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(event_type v) noexcept {
  switch (v) {
    case event_type::intr: return "intr";
    case event_type::nmi: return "nmi";
    case event_type::exception: return "exception";
    case event_type::soft_int: return "soft_int";
  }
  return {};
}
/// See name(event_type).
[[nodiscard]] inline std::string to_string(event_type v) { return ::hvkit::hosted::enum_string(name(v), "event_type", v); }

/// 15.20: "vector 14 (#PF) exception, error code 0x0002", "invalid"; a reserved TYPE prints
/// as "type 5"; set reserved bits 30:12 are named.
[[nodiscard]] inline std::string to_string(const event_info& e) {
  if (!e.valid()) return "invalid (" + ::hvkit::hosted::hex(e.raw()) + ")";
  std::string s = "vector " + std::to_string(e.vector());
  const std::string_view t = name(e.type());
  if ((e.type() == event_type::exception || e.type() == event_type::nmi) && e.vector() < 32) {
    const std::string_view v = x86::name(static_cast<x86::vector>(e.vector()));
    if (!v.empty()) s += " (" + std::string(v) + ")";
  }
  s += t.empty() ? " type " + std::to_string(e.type_bits()) : " " + std::string(t);
  if (e.has_error_code()) s += ", error code " + ::hvkit::hosted::hex(e.error_code());
  if ((e.raw() & event_bits::reserved) != 0) s += ", reserved bits " + ::hvkit::hosted::hex(e.raw() & event_bits::reserved);
  return s;
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(injection_error v) noexcept {
  switch (v) {
    case injection_error::none: return "none";
    case injection_error::reserved_type: return "reserved_type";
    case injection_error::reserved_bits: return "reserved_bits";
    case injection_error::impossible_in_mode: return "impossible_in_mode";
    case injection_error::not_an_exception: return "not_an_exception";
  }
  return {};
}
/// See name(injection_error).
[[nodiscard]] inline std::string to_string(injection_error v) {
  return ::hvkit::hosted::enum_string(name(v), "injection_error", v);
}

/// 15.10.2, Figure 15-2: "IN 1 byte, port 0x0060", "REP OUTS 2 bytes, port 0x03f8, a32, DS".
[[nodiscard]] inline std::string to_string(const ioio_info& i) {
  static constexpr const char* segs[8] = {"ES", "CS", "SS", "DS", "FS", "GS", "seg6", "seg7"};
  std::string s = i.rep() ? "REP " : "";
  s += i.in() ? (i.string() ? "INS" : "IN") : (i.string() ? "OUTS" : "OUT");
  s += i.size() == 0 ? " (no single size bit)" : " " + std::to_string(i.size()) + (i.size() == 1 ? " byte" : " bytes");
  s += ", port 0x";
  static constexpr char d[] = "0123456789abcdef";
  for (int k = 3; k >= 0; --k) s += d[(i.port() >> (4 * k)) & 0xf];
  if (i.string()) {
    if (i.address_size() != 0) s += ", a" + std::to_string(i.address_size());
    s += ", ";
    s += segs[i.segment() & 7];
  }
  return s;
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(cr_access::source v) noexcept {
  switch (v) {
    case cr_access::source::mov: return "mov";
    case cr_access::source::other: return "other";
    case cr_access::source::not_decoded: return "not_decoded";
  }
  return {};
}
/// 15.33.1: "MOV with rax", "CLTS, LMSW or SMSW", "not decoded (no decode assists)".
[[nodiscard]] inline std::string to_string(const cr_access& a) {
  switch (a.from) {
    case cr_access::source::mov: return "MOV with " + std::string(x86::name(x86::gpr_from_index(a.gpr)));
    case cr_access::source::other: return "CLTS, LMSW or SMSW";
    case cr_access::source::not_decoded: return "not decoded (no decode assists)";
  }
  return "cr_access(" + std::to_string(static_cast<unsigned>(a.from)) + ")";
}

/// 15.12: "#PF, error code 0x2, address 0x...", "#GP, error code 0x0", "#UD".
[[nodiscard]] inline std::string to_string(const exception_info& e) {
  const std::string_view v = e.vector < 32 ? x86::name(static_cast<x86::vector>(e.vector)) : std::string_view{};
  std::string s = v.empty() ? "vector " + std::to_string(e.vector) : std::string(v);
  // Vectors that push an error code (APM 8.2, Table 8-1): #DF, #TS, #NP, #SS, #GP, #PF, #AC, #CP, #VC, #SX.
  constexpr std::uint32_t with_error_code = (1u << 8) | (1u << 10) | (1u << 11) | (1u << 12) | (1u << 13) |
                                            (1u << 14) | (1u << 17) | (1u << 21) | (1u << 29) | (1u << 30);
  if (e.vector < 32 && ((with_error_code >> e.vector) & 1u)) s += ", error code " + ::hvkit::hosted::hex(e.error_code);
  if (e.vector == 14) s += ", address " + ::hvkit::hosted::hex16(e.exit_info_2);
  return s;
}

/// 15.25.6: "0x100000006 [W U] final translation", "[P RSV] guest page-table access".
[[nodiscard]] inline std::string to_string(const npf_error_code& e) {
  std::string bits;
  auto add = [&bits](bool on, const char* n) {
    if (on) bits += (bits.empty() ? "" : " ") + std::string(n);
  };
  add(e.is_present(), "P");
  add(e.is_write(), "W");
  add(e.is_user(), "U");
  add(e.is_reserved(), "RSV");
  add(e.is_fetch(), "ID");
  add(e.is_shadow_stack(), "SS");
  std::string s = ::hvkit::hosted::hex(e.raw()) + " [" + bits + "]";
  if (e.is_final_translation()) s += " final translation";
  if (e.is_guest_page_table_walk()) s += " guest page-table access";
  return s;
}
/// "gpa 0x...: <error code>".
[[nodiscard]] inline std::string to_string(const npf_info& n) {
  return "gpa " + ::hvkit::hosted::hex16(n.address.value()) + ": " + to_string(n.error);
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(not_npf v) noexcept {
  switch (v) {
    case not_npf::guest_stage: return "guest_stage";
    case not_npf::other_stage: return "other_stage";
    case not_npf::host_side: return "host_side";
  }
  return {};
}
/// See name(not_npf).
[[nodiscard]] inline std::string to_string(not_npf v) { return ::hvkit::hosted::enum_string(name(v), "not_npf", v); }

namespace detail {
inline constexpr const char* intercept_names_96[] = {
    "intr", "nmi", "smi", "init", "vintr", "cr0_selective_write", "idtr_read", "gdtr_read", "ldtr_read", "tr_read",
    "idtr_write", "gdtr_write", "ldtr_write", "tr_write", "rdtsc", "rdpmc", "pushf", "popf", "cpuid", "rsm", "iret",
    "intn", "invd", "pause", "hlt", "invlpg", "invlpga", "ioio_prot", "msr_prot", "task_switch", "ferr_freeze",
    "shutdown", "vmrun", "vmmcall", "vmload", "vmsave", "stgi", "clgi", "skinit", "rdtscp", "icebp", "wbinvd",
    "monitor", "mwait", "mwait_conditional", "xsetbv", "rdpru", "efer_write_trap"};
inline constexpr const char* intercept_names_160[] = {"invlpgb", "invlpgb_illegal", "invpcid", "mcommit", "tlbsync"};
}  // namespace detail

/// Table B-1: "cr4_write", "dr7_read", "excp14", "cpuid", "cr3_write_trap", ...; empty for a
/// bit the table does not define.
[[nodiscard]] inline std::string name_of(intercept i) {
  const unsigned b = static_cast<unsigned>(i);
  if (b < 16) return "cr" + std::to_string(b) + "_read";
  if (b < 32) return "cr" + std::to_string(b - 16) + "_write";
  if (b < 48) return "dr" + std::to_string(b - 32) + "_read";
  if (b < 64) return "dr" + std::to_string(b - 48) + "_write";
  if (b < 96) return "excp" + std::to_string(b - 64);
  if (b < 144) return detail::intercept_names_96[b - 96];
  if (b < 160) return "cr" + std::to_string(b - 144) + "_write_trap";
  if (b < 165) return detail::intercept_names_160[b - 160];
  return {};
}
/// See name_of(intercept); an undefined bit prints as "intercept(n)".
[[nodiscard]] inline std::string to_string(intercept i) {
  const std::string n = name_of(i);
  return n.empty() ? "intercept(" + std::to_string(static_cast<unsigned>(i)) + ")" : n;
}
/// The set intercepts in bit order: "{cr0_read cr0_write excp14 cpuid vmrun}", "{}".
[[nodiscard]] inline std::string to_string(const intercept_set& s) {
  std::string out = "{";
  for (unsigned w = 0; w < intercept_words; ++w) {
    for (unsigned b = 0; b < 32; ++b) {
      if (((s.word(w) >> b) & 1u) == 0) continue;
      if (out.size() > 1) out += ' ';
      out += to_string(static_cast<intercept>(32 * w + b));
    }
  }
  return out + "}";
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(tlb_control v) noexcept {
  switch (v) {
    case tlb_control::do_nothing: return "do_nothing";
    case tlb_control::flush_all: return "flush_all";
    case tlb_control::flush_asid: return "flush_asid";
    case tlb_control::flush_asid_non_global: return "flush_asid_non_global";
  }
  return {};
}
/// See name(tlb_control).
[[nodiscard]] inline std::string to_string(tlb_control v) { return ::hvkit::hosted::enum_string(name(v), "tlb_control", v); }

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(clean_bit v) noexcept {
  switch (v) {
    case clean_bit::intercepts: return "intercepts";
    case clean_bit::iopm: return "iopm";
    case clean_bit::asid: return "asid";
    case clean_bit::tpr: return "tpr";
    case clean_bit::np: return "np";
    case clean_bit::crx: return "crx";
    case clean_bit::drx: return "drx";
    case clean_bit::dt: return "dt";
    case clean_bit::seg: return "seg";
    case clean_bit::cr2: return "cr2";
    case clean_bit::lbr: return "lbr";
    case clean_bit::avic: return "avic";
  }
  return {};
}
/// See name(clean_bit).
[[nodiscard]] inline std::string to_string(clean_bit v) { return ::hvkit::hosted::enum_string(name(v), "clean_bit", v); }

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(segment v) noexcept {
  switch (v) {
    case segment::es: return "es";
    case segment::cs: return "cs";
    case segment::ss: return "ss";
    case segment::ds: return "ds";
    case segment::fs: return "fs";
    case segment::gs: return "gs";
    case segment::ldtr: return "ldtr";
    case segment::tr: return "tr";
  }
  return {};
}
/// See name(segment).
[[nodiscard]] inline std::string to_string(segment v) { return ::hvkit::hosted::enum_string(name(v), "segment", v); }

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(cr0_write_intercept v) noexcept {
  switch (v) {
    case cr0_write_intercept::all: return "all";
    case cr0_write_intercept::selective: return "selective";
    case cr0_write_intercept::none: return "none";
  }
  return {};
}
/// See name(cr0_write_intercept).
[[nodiscard]] inline std::string to_string(cr0_write_intercept v) {
  return ::hvkit::hosted::enum_string(name(v), "cr0_write_intercept", v);
}

/// The core's name(vmrun_error) ("asid_zero", ...); an undefined value prints as "vmrun_error(n)".
[[nodiscard]] inline std::string to_string(vmrun_error v) {
  const std::string_view n = static_cast<unsigned>(v) < vmrun_error_count ? name(v) : "";
  return ::hvkit::hosted::enum_string(n, "vmrun_error", v);
}

}  // namespace hvkit::svm

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<svm::exit_code> = true;
template <>
inline constexpr bool enable_printing<svm::event_type> = true;
template <>
inline constexpr bool enable_printing<svm::event_info> = true;
template <>
inline constexpr bool enable_printing<svm::injection_error> = true;
template <>
inline constexpr bool enable_printing<svm::ioio_info> = true;
template <>
inline constexpr bool enable_printing<svm::cr_access> = true;
template <>
inline constexpr bool enable_printing<svm::exception_info> = true;
template <>
inline constexpr bool enable_printing<svm::npf_error_code> = true;
template <>
inline constexpr bool enable_printing<svm::npf_info> = true;
template <>
inline constexpr bool enable_printing<svm::not_npf> = true;
template <>
inline constexpr bool enable_printing<svm::intercept> = true;
template <>
inline constexpr bool enable_printing<svm::intercept_set> = true;
template <>
inline constexpr bool enable_printing<svm::tlb_control> = true;
template <>
inline constexpr bool enable_printing<svm::clean_bit> = true;
template <>
inline constexpr bool enable_printing<svm::segment> = true;
template <>
inline constexpr bool enable_printing<svm::cr0_write_intercept> = true;
template <>
inline constexpr bool enable_printing<svm::vmrun_error> = true;
}  // namespace hvkit::hosted
