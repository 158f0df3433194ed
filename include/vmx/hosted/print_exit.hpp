// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: printers for what a VM exit reports: the exit qualifications of
/// vmx/exit_qualification.hpp (SDM Vol. 3C 28.2.1, Tables 28-1 to 28-7) and the VM-entry
/// interruption information, VM-exit interruption information and IDT-vectoring
/// information of vmx/interruption_info.hpp (Tables 25-17, 25-19, 25-20).
///
/// The text names what the SDM's table says the bits mean, register and vector names as the
/// SDM writes them. See x86/hosted/format.hpp for the conventions (`to_string()`,
/// `operator<<`, `std::formatter`).
/// @code
///   vmx::cr_access_qualification q{exit_qualification};
///   std::cout << q << '\n';                        // "MOV to CR4 from rcx"
///   std::cout << vmx::idt_vectoring_info{info};    // "#PF (vector 14) hardware_exception, error code"
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/vmx/hosted/print_exit.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "../exit_qualification.hpp"
#include "../interruption_info.hpp"
#include "../../x86/gpr.hpp"
#include "../../x86/hosted/format.hpp"
#include "../../x86/vector.hpp"
#include "print.hpp"

namespace hvkit::vmx {

using ::hvkit::hosted::operator<<;

namespace detail {
inline std::string hex_n(std::uint64_t v, unsigned digits) {
  static constexpr char d[] = "0123456789abcdef";
  std::string s(digits, '0');
  for (unsigned i = 0; i < digits; ++i) s[digits - 1 - i] = d[(v >> (4 * i)) & 0xf];
  return "0x" + s;
}
inline void add_flag(std::string& s, bool on, std::string_view what) {
  if (!on) return;
  if (!s.empty()) s += ", ";
  s += what;
}
inline std::string gpr_name(unsigned n) { return std::string(x86::name(x86::gpr_from_index(n))); }
}  // namespace detail

/// Table 28-1: "B0 B3 BS" (the conditions met: breakpoints B0-B3, BLD, BD, BS, RTM), "none".
[[nodiscard]] inline std::string to_string(const debug_qualification& q) {
  std::string s;
  for (unsigned b = 0; b < 4; ++b) {
    if ((q.breakpoints() >> b) & 1u) s += (s.empty() ? "B" : " B") + std::to_string(b);
  }
  auto add = [&s](bool on, const char* n) {
    if (on) s += (s.empty() ? "" : " ") + std::string(n);
  };
  add(q.bus_lock(), "BLD");
  add(q.debug_register_access(), "BD");
  add(q.single_step(), "BS");
  add(q.rtm(), "RTM");
  return s.empty() ? "none" : s;
}

/// "CALL", "IRET", "JMP", "task gate in IDT" (Table 28-2, bits 31:30).
[[nodiscard]] constexpr std::string_view name(task_switch_qualification::source v) noexcept {
  switch (v) {
    case task_switch_qualification::source::call: return "CALL";
    case task_switch_qualification::source::iret: return "IRET";
    case task_switch_qualification::source::jmp: return "JMP";
    case task_switch_qualification::source::task_gate_in_idt: return "task gate in IDT";
  }
  return {};
}
/// Table 28-2: "task switch to TSS 0x0028 by IRET".
[[nodiscard]] inline std::string to_string(const task_switch_qualification& q) {
  return "task switch to TSS " + detail::hex_n(q.tss_selector(), 4) + " by " + std::string(name(q.initiated_by()));
}

/// Table 28-3: "MOV to CR4 from rcx", "MOV from CR3 to rbx", "CLTS", "LMSW 0x0001 from a
/// register" / "from memory".
[[nodiscard]] inline std::string to_string(const cr_access_qualification& q) {
  const std::string cr = "CR" + std::to_string(q.cr());
  switch (q.type()) {
    case cr_access_qualification::access::mov_to_cr: return "MOV to " + cr + " from " + detail::gpr_name(q.gpr());
    case cr_access_qualification::access::mov_from_cr: return "MOV from " + cr + " to " + detail::gpr_name(q.gpr());
    case cr_access_qualification::access::clts: return "CLTS";
    case cr_access_qualification::access::lmsw:
      return "LMSW " + detail::hex_n(q.lmsw_source(), 4) + (q.lmsw_memory_operand() ? " from memory" : " from a register");
  }
  return "cr_access(" + ::hvkit::hosted::hex(q.raw()) + ")";
}

/// Table 28-4: "MOV to DR7 from rax", "MOV from DR6 to rdx".
[[nodiscard]] inline std::string to_string(const mov_dr_qualification& q) {
  const std::string dr = "DR" + std::to_string(q.dr());
  return q.from_dr() ? "MOV from " + dr + " to " + detail::gpr_name(q.gpr())
                     : "MOV to " + dr + " from " + detail::gpr_name(q.gpr());
}

/// Table 28-5: "IN 1 byte, port 0x0060 (immediate)", "REP OUTS 2 bytes, port 0x03f8 (DX)".
[[nodiscard]] inline std::string to_string(const io_qualification& q) {
  std::string s = q.rep() ? "REP " : "";
  s += q.in() ? (q.string() ? "INS" : "IN") : (q.string() ? "OUTS" : "OUT");
  s += ' ' + std::to_string(q.size()) + (q.size() == 1 ? " byte" : " bytes");
  s += ", port " + detail::hex_n(q.port(), 4) + (q.immediate_operand() ? " (immediate)" : " (DX)");
  return s;
}

/// Table 28-6, bits 15:12: "linear read", ..., "physical event delivery".
[[nodiscard]] constexpr std::string_view name(apic_access_qualification::access v) noexcept {
  switch (v) {
    case apic_access_qualification::access::linear_read: return "linear read";
    case apic_access_qualification::access::linear_write: return "linear write";
    case apic_access_qualification::access::linear_fetch: return "linear fetch";
    case apic_access_qualification::access::linear_event_delivery: return "linear access during event delivery";
    case apic_access_qualification::access::physical_event_delivery: return "physical access during event delivery";
    case apic_access_qualification::access::physical_fetch_or_execution:
      return "physical access for an instruction fetch or execution";
  }
  return {};
}
/// Table 28-6: "linear write at offset 0x080", "physical access during event delivery";
/// ", asynchronous" for bit 16.
[[nodiscard]] inline std::string to_string(const apic_access_qualification& q) {
  const std::string_view n = name(q.type());
  std::string s = n.empty() ? "access type " + std::to_string(static_cast<unsigned>(q.type())) : std::string(n);
  // Bits 11:0 are the page offset for linear accesses (types 0-3) only.
  if (static_cast<unsigned>(q.type()) <= 3) s += " at offset " + detail::hex_n(q.offset(), 3);
  if (q.asynchronous()) s += ", asynchronous";
  return s;
}

/// Table 28-7: the access ("read", "write", "fetch"; bits 2:0), the translation's
/// permissions ("translation r-x", user-executable "ux" with MBEC; bits 6:3), where the walk
/// was (bits 8:7: "final address" or "guest paging-structure entry", "no guest linear
/// address"), then the set bits 9-16 by name.
[[nodiscard]] inline std::string to_string(const ept_violation_qualification& q) {
  std::string access;
  detail::add_flag(access, q.read(), "read");
  detail::add_flag(access, q.write(), "write");
  detail::add_flag(access, q.fetch(), "fetch");
  std::string s = access.empty() ? "no access bit" : access;
  s += std::string("; translation ") + (q.readable() ? 'r' : '-') + (q.writable() ? 'w' : '-') +
       (q.executable() ? 'x' : '-') + (q.user_executable() ? " ux" : "");
  if (!q.linear_address_valid()) {
    s += "; no guest linear address";
  } else {
    s += q.translated_access() ? "; final address" : "; guest paging-structure entry";
  }
  std::string more;
  const bool advanced = q.linear_address_valid() && q.translated_access();  // bits 9-11 (28.2.1)
  detail::add_flag(more, advanced && q.user_mode_address(), "user-mode address");
  detail::add_flag(more, advanced && q.writable_page(), "writable page");
  detail::add_flag(more, advanced && q.execute_disable_page(), "execute-disable page");
  detail::add_flag(more, q.nmi_unblocking(), "NMI unblocking due to IRET");
  detail::add_flag(more, q.shadow_stack_access(), "shadow-stack access");
  detail::add_flag(more, q.supervisor_shadow_stack(), "supervisor shadow-stack page");
  detail::add_flag(more, q.guest_paging_verification(), "guest-paging verification");
  detail::add_flag(more, q.asynchronous(), "asynchronous");
  return more.empty() ? s : s + "; " + more;
}

namespace detail {
// "vector 14 (#PF) hardware_exception", with the vector's name where the type makes it an
// exception or NMI (SDM Table 25-17: types 2, 3, 5, 6; a software interrupt is INT n).
template <class Info>
std::string interruption_text(const Info& i) {
  if (!i.valid()) return "invalid (" + hex_n(i.raw(), 8) + ")";
  const interruption_type t = i.type();
  std::string s = "vector " + std::to_string(i.vector());
  const bool exception_like = t == interruption_type::nmi || t == interruption_type::hardware_exception ||
                              t == interruption_type::privileged_software_exception ||
                              t == interruption_type::software_exception;
  if (exception_like && i.vector() < 32) {
    const std::string_view n = x86::name(static_cast<x86::vector>(i.vector()));
    if (!n.empty()) s += " (" + std::string(n) + ")";
  }
  s += ' ' + to_string(t);
  if (i.has_error_code()) s += ", error code";
  return s;
}
}  // namespace detail

/// Table 25-17: "vector 13 (#GP) hardware_exception, error code", "invalid (0x00000000)".
[[nodiscard]] inline std::string to_string(const entry_interruption_info& i) { return detail::interruption_text(i); }
/// Table 25-19, and ", NMI unblocking due to IRET" for bit 12.
[[nodiscard]] inline std::string to_string(const exit_interruption_info& i) {
  std::string s = detail::interruption_text(i);
  if (i.valid() && i.nmi_unblocking()) s += ", NMI unblocking due to IRET";
  return s;
}
/// Table 25-20: the event being delivered when the exit occurred.
[[nodiscard]] inline std::string to_string(const idt_vectoring_info& i) { return detail::interruption_text(i); }

}  // namespace hvkit::vmx

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<vmx::debug_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::task_switch_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::cr_access_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::mov_dr_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::io_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::apic_access_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::ept_violation_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::entry_interruption_info> = true;
template <>
inline constexpr bool enable_printing<vmx::exit_interruption_info> = true;
template <>
inline constexpr bool enable_printing<vmx::idt_vectoring_info> = true;
}  // namespace hvkit::hosted
