// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: names and printers for paging/: fault kinds, walk stages, EPT memory types
/// and misconfigurations, the flags of a paging-structure or EPT entry, a whole walk (the
/// chain of entries and the translation or the fault, as `hvkit-walk` prints it), and the
/// mappings of paging/mappings.hpp.
///
/// See x86/hosted/format.hpp for the conventions (`name()`, `to_string()`, `operator<<`,
/// `std::formatter`).
/// @code
///   const auto r = walker.translate(mem, va);
///   std::cout << paging::format_walk(walker.state(), va, r);
///   //  gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000
///   //    PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A
///   //    ...
///   //    -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/paging/hosted/print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "../access.hpp"
#include "../ept_entry.hpp"
#include "../ept_walker.hpp"
#include "../guest_memory.hpp"
#include "../mappings.hpp"
#include "../nested.hpp"
#include "../pte.hpp"
#include "../role_sync.hpp"
#include "../walk_result.hpp"
#include "../walker.hpp"
#include "../../x86/hosted/format.hpp"

namespace hvkit::paging {

using ::hvkit::hosted::operator<<;

/// The enumerator's name ("not_present", ...); empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(fault_kind k) noexcept {
  switch (k) {
    case fault_kind::none: return "none";
    case fault_kind::not_present: return "not_present";
    case fault_kind::reserved_bit: return "reserved_bit";
    case fault_kind::permission: return "permission";
    case fault_kind::protection_key: return "protection_key";
    case fault_kind::unbacked: return "unbacked";
    case fault_kind::ept_misconfig: return "ept_misconfig";
    case fault_kind::non_canonical: return "non_canonical";
    case fault_kind::invalid_pdpte: return "invalid_pdpte";
    case fault_kind::retry_exhausted: return "retry_exhausted";
    case fault_kind::pdptes_not_loaded: return "pdptes_not_loaded";
    case fault_kind::mode_mismatch: return "mode_mismatch";
    case fault_kind::invalid_request: return "invalid_request";
  }
  return {};
}
/// See name(fault_kind).
[[nodiscard]] inline std::string to_string(fault_kind k) { return ::hvkit::hosted::enum_string(name(k), "fault_kind", k); }

/// "guest", "ept" or "npt".
[[nodiscard]] constexpr std::string_view name(walk_stage s) noexcept {
  switch (s) {
    case walk_stage::guest: return "guest";
    case walk_stage::ept: return "ept";
    case walk_stage::npt: return "npt";
  }
  return {};
}
/// See name(walk_stage).
[[nodiscard]] inline std::string to_string(walk_stage s) { return ::hvkit::hosted::enum_string(name(s), "walk_stage", s); }

/// The enumerator's name ("unbacked", ...); empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(memory_error e) noexcept {
  switch (e) {
    case memory_error::none: return "none";
    case memory_error::unbacked: return "unbacked";
    case memory_error::read_only: return "read_only";
  }
  return {};
}
/// See name(memory_error).
[[nodiscard]] inline std::string to_string(memory_error e) { return ::hvkit::hosted::enum_string(name(e), "memory_error", e); }

/// The enumerator's name ("walk_length", ...); empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(eptp_error e) noexcept {
  switch (e) {
    case eptp_error::none: return "none";
    case eptp_error::walk_length: return "walk_length";
    case eptp_error::memory_type: return "memory_type";
    case eptp_error::ad_unsupported: return "ad_unsupported";
    case eptp_error::supervisor_shadow_stack_unsupported: return "supervisor_shadow_stack_unsupported";
    case eptp_error::reserved_bits: return "reserved_bits";
  }
  return {};
}
/// See name(eptp_error).
[[nodiscard]] inline std::string to_string(eptp_error e) { return ::hvkit::hosted::enum_string(name(e), "eptp_error", e); }

/// The memory type as the SDM abbreviates it (Table 11-2): "UC", "WC", "WT", "WP", "WB";
/// empty for the reserved encodings 2, 3 and 7.
[[nodiscard]] constexpr std::string_view name(ept_memory_type t) noexcept {
  switch (t) {
    case ept_memory_type::uc: return "UC";
    case ept_memory_type::wc: return "WC";
    case ept_memory_type::wt: return "WT";
    case ept_memory_type::wp: return "WP";
    case ept_memory_type::wb: return "WB";
  }
  return {};
}
/// See name(ept_memory_type).
[[nodiscard]] inline std::string to_string(ept_memory_type t) {
  return ::hvkit::hosted::enum_string(name(t), "ept_memory_type", t);
}

/// The enumerator's name ("write_without_read", ...); empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(ept_misconfig m) noexcept {
  switch (m) {
    case ept_misconfig::none: return "none";
    case ept_misconfig::write_without_read: return "write_without_read";
    case ept_misconfig::execute_only_unsupported: return "execute_only_unsupported";
    case ept_misconfig::reserved_memory_type: return "reserved_memory_type";
    case ept_misconfig::large_page_unsupported: return "large_page_unsupported";
    case ept_misconfig::reserved_bits: return "reserved_bits";
  }
  return {};
}
/// See name(ept_misconfig).
[[nodiscard]] inline std::string to_string(ept_misconfig m) { return ::hvkit::hosted::enum_string(name(m), "ept_misconfig", m); }

/// The enumerator's name ("mapping", "fault", "end", "truncated").
[[nodiscard]] constexpr std::string_view name(mapping_step s) noexcept {
  switch (s) {
    case mapping_step::mapping: return "mapping";
    case mapping_step::fault: return "fault";
    case mapping_step::end: return "end";
    case mapping_step::truncated: return "truncated";
  }
  return {};
}
/// See name(mapping_step).
[[nodiscard]] inline std::string to_string(mapping_step s) { return ::hvkit::hosted::enum_string(name(s), "mapping_step", s); }

/// What sync_cr0_role() did (paging/role_sync.hpp): "unchanged", "wp_refreshed", "rebuilt".
[[nodiscard]] constexpr std::string_view name(role_sync v) noexcept {
  switch (v) {
    case role_sync::unchanged: return "unchanged";
    case role_sync::wp_refreshed: return "wp_refreshed";
    case role_sync::rebuilt: return "rebuilt";
  }
  return {};
}
/// See name(role_sync).
[[nodiscard]] inline std::string to_string(role_sync v) { return ::hvkit::hosted::enum_string(name(v), "role_sync", v); }

namespace detail {
inline void add_flag(std::string& s, bool on, std::string_view flag) {
  if (!on) return;
  if (!s.empty()) s += ' ';
  s += flag;
}
}  // namespace detail

/// The entry at `level` as the SDM names it: "PML5E", "PML4E", "PDPTE", "PDE", "PTE"
/// ("?" for a level outside 1..5).
[[nodiscard]] constexpr std::string_view entry_name(unsigned level) noexcept {
  switch (level) {
    case 5: return "PML5E";
    case 4: return "PML4E";
    case 3: return "PDPTE";
    case 2: return "PDE";
    case 1: return "PTE";
    default: return "?";
  }
}

/// The set flags of an IA-32 paging-structure entry at `level` (1 = PTE), in bit order, with
/// the SDM's names (Tables 4-4..4-20): P RW US PWT PCD A, then D and G for a leaf (`leaf`),
/// PS above level 1, PAT (bit 7 of a PTE, bit 12 of a large page), XD when `nx` (EFER.NXE
/// with PAE or IA-32e paging), and "PK=n" for a leaf's nonzero protection key when `keys`
/// (4/5-level paging).
[[nodiscard]] inline std::string pte_flags(pte e, unsigned level, bool leaf, bool nx, bool keys = false) {
  const std::uint64_t v = e.raw();
  std::string s;
  detail::add_flag(s, v & 1, "P");
  detail::add_flag(s, v & 2, "RW");
  detail::add_flag(s, v & 4, "US");
  detail::add_flag(s, v & 8, "PWT");
  detail::add_flag(s, v & 16, "PCD");
  detail::add_flag(s, v & 32, "A");
  detail::add_flag(s, leaf && (v & 64), "D");
  detail::add_flag(s, level > 1 && (v & 128), "PS");
  detail::add_flag(s, level == 1 && (v & 128), "PAT");
  detail::add_flag(s, leaf && (v & 256), "G");
  detail::add_flag(s, leaf && level > 1 && (v & 0x1000), "PAT");
  if (keys && leaf && e.pkey() != 0) detail::add_flag(s, true, "PK=" + std::to_string(e.pkey()));
  detail::add_flag(s, nx && (v >> 63), "XD");
  return s;
}

/// The set flags of an EPT entry at `level` (SDM Tables 29-1..29-7): R W X (XS with MBEC),
/// XU, PS above level 1, A, D (leaf); for a leaf (`leaf`) also IPAT, the memory type
/// ("WB", or "MT=n" for a reserved encoding) and SVE (suppress #VE).
[[nodiscard]] inline std::string ept_flags(ept_entry e, unsigned level, bool leaf) {
  const std::uint64_t v = e.raw();
  std::string s;
  detail::add_flag(s, v & 1, "R");
  detail::add_flag(s, v & 2, "W");
  detail::add_flag(s, v & 4, "X");
  detail::add_flag(s, v & 0x400, "XU");
  detail::add_flag(s, level > 1 && (v & 0x80), "PS");
  detail::add_flag(s, v & 0x100, "A");
  detail::add_flag(s, leaf && (v & 0x200), "D");
  if (leaf) {
    detail::add_flag(s, v & 0x40, "IPAT");
    const auto t = static_cast<ept_memory_type>(e.memory_type());
    detail::add_flag(s, true, name(t).empty() ? "MT=" + std::to_string(e.memory_type()) : std::string(name(t)));
    detail::add_flag(s, v >> 63, "SVE");
  }
  return s;
}

/// The rights of a guest translation as a debugger shows them: "rwx user", "r-- supervisor"
/// (every mapped guest page is readable), with " shadow-stack" for a shadow-stack page.
[[nodiscard]] inline std::string guest_rights(pte_access r) {
  std::string s = "r";
  s += r.test(pte_access::write) ? 'w' : '-';
  s += r.test(pte_access::exec) ? 'x' : '-';
  s += r.test(pte_access::user) ? " user" : " supervisor";
  if (r.test(pte_access::shadow_stack)) s += " shadow-stack";
  return s;
}

/// The rights of an EPT translation: "rwx" (X is XS with MBEC), then "u" if XU is set.
[[nodiscard]] inline std::string ept_rights(pte_access r) {
  std::string s;
  s += r.test(pte_access::read) ? 'r' : '-';
  s += r.test(pte_access::write) ? 'w' : '-';
  s += r.test(pte_access::exec) ? 'x' : '-';
  if (r.test(pte_access::user_exec)) s += 'u';
  return s;
}

/// The named rights in a pte_access, in bit order ("exec write user"), or "none".
[[nodiscard]] inline std::string to_string(pte_access r) {
  std::string s;
  detail::add_flag(s, r.test(pte_access::exec), "exec");
  detail::add_flag(s, r.test(pte_access::write), "write");
  detail::add_flag(s, r.test(pte_access::user), "user");
  detail::add_flag(s, r.test(pte_access::read), "read");
  detail::add_flag(s, r.test(pte_access::user_exec), "user_exec");
  detail::add_flag(s, r.test(pte_access::shadow_stack), "shadow_stack");
  if (r.raw() & 0xc0u) detail::add_flag(s, true, "pte_access(" + ::hvkit::hosted::hex(r.raw() & 0xc0u) + ")");
  return s.empty() ? "none" : s;
}

/// "4 KiB", "2 MiB", "4 MiB", "1 GiB", "4 GiB" for a page of 2^shift bytes ("2^n bytes" otherwise).
[[nodiscard]] inline std::string page_size_name(unsigned shift) {
  switch (shift) {
    case 12: return "4 KiB";
    case 21: return "2 MiB";
    case 22: return "4 MiB";
    case 30: return "1 GiB";
    case 32: return "4 GiB";
    default: return "2^" + std::to_string(shift) + " bytes";
  }
}

/// One line per entry of `path`, each "<indent>PML4E @ 0x... = 0x...  P RW US A\n" (EPT:
/// "EPT PML4E @ ...", NPT: "NPT PML4E @ ..." with the host format's flags). `nx` and `keys`
/// as for pte_flags() (guest and NPT stages).
template <class Address>
[[nodiscard]] inline std::string format_path(const basic_walk_path<Address>& path, walk_stage stage, bool nx,
                                             bool keys = false, std::string_view indent = "  ") {
  std::string s;
  for (unsigned i = 0; i < path.count; ++i) {
    const auto e = path[i];
    const bool leaf = i + 1 == path.count;
    s += indent;
    std::string n(entry_name(e.level));
    if (stage == walk_stage::ept) n = "EPT " + n;
    if (stage == walk_stage::npt) n = "NPT " + n;
    n.resize(n.size() < 5 ? 5 : n.size(), ' ');
    s += n;
    s += " @ " + ::hvkit::hosted::hex16(e.address.value()) + " = " + ::hvkit::hosted::hex16(e.value) + "  ";
    s += stage == walk_stage::ept ? ept_flags(ept_entry{e.value}, e.level, leaf)
                                  : pte_flags(pte{e.value}, e.level, leaf, nx, keys);
    s += '\n';
  }
  return s;
}

/// The result of a translation: guest stage "-> gpa 0x... (4 KiB page, rw- supervisor,
/// pkey 0)"; EPT stage "-> hpa 0x... (2 MiB page, rwx, WB)"; NPT stage "-> hpa 0x...
/// (4 KiB page, rwx user)".
template <class Address>
[[nodiscard]] inline std::string format_translation(const basic_translation<Address>& t, walk_stage stage) {
  if (stage == walk_stage::npt)
    return "-> hpa " + ::hvkit::hosted::hex16(t.address.value()) + " (" + page_size_name(t.page_shift) + " page, " +
           guest_rights(t.rights) + ")";
  if (stage == walk_stage::ept) {
    const auto mt = static_cast<ept_memory_type>(t.memory_type & 7u);
    std::string type = name(mt).empty() ? "MT=" + std::to_string(t.memory_type & 7u) : std::string(name(mt));
    if (t.memory_type & 8u) type += " IPAT";
    return "-> hpa " + ::hvkit::hosted::hex16(t.address.value()) + " (" + page_size_name(t.page_shift) + " page, " +
           ept_rights(t.rights) + ", " + type + ")";
  }
  return "-> gpa " + ::hvkit::hosted::hex16(t.address.value()) + " (" + page_size_name(t.page_shift) + " page, " +
         guest_rights(t.rights) + ", pkey " + std::to_string(t.pkey) + ")";
}

/// A walk fault in one line, e.g. "not_present at PDE @ 0x... = 0x... (#PF error code 0x0)",
/// "non_canonical address (#GP)", "ept_misconfig at EPT PTE @ 0x... = 0x... (EPT
/// misconfiguration, gpa 0x...)", "permission at EPT PDE @ ... (EPT violation, exit
/// qualification 0x..., gpa 0x...)".
[[nodiscard]] inline std::string to_string(const walk_fault& f) {
  std::string s = to_string(f.kind);
  if (f.kind == fault_kind::non_canonical) return s + " address (" + to_string(f.vector) + ")";
  if (f.kind == fault_kind::pdptes_not_loaded) return s + " (a PAE walk without the PDPTE registers: load_pdptrs)";
  if (f.kind == fault_kind::mode_mismatch) return s + " (the walker's format is not the context's paging mode)";
  if (f.kind == fault_kind::invalid_request) return s + " (the request contradicts itself)";
  if (f.level != 0) {
    s += " at ";
    if (f.stage == walk_stage::ept) s += "EPT ";
    if (f.stage == walk_stage::npt) s += "NPT ";
    s += entry_name(f.level);
    s += " @ " + ::hvkit::hosted::hex16(f.entry_address.value()) + " = " + ::hvkit::hosted::hex16(f.entry_value);
  }
  if (f.stage == walk_stage::ept) {
    if (f.kind == fault_kind::ept_misconfig) s += " (EPT misconfiguration, gpa ";
    else if (f.kind == fault_kind::unbacked) s += " (not backed, gpa ";
    else s += " (EPT violation, exit qualification " + ::hvkit::hosted::hex(f.qualification.raw()) + ", gpa ";
    return s + ::hvkit::hosted::hex16(f.guest_physical.value()) + ")";
  }
  if (f.stage == walk_stage::npt) {
    // AMD APM 15.25.6: EXITINFO1 = the #PF-format bits, bit 32 final access, bit 33 guest table.
    if (f.kind == fault_kind::unbacked) s += " (not backed, gpa ";
    else if (f.kind == fault_kind::retry_exhausted) s += " (the entries kept changing, gpa ";
    else
      s += std::string(" (#NPF on the ") +
           (f.qualification.test(ept_qualification::final_translation) ? "final access" : "guest page-table access") +
           ", error code " + to_string(f.error_code) + ", gpa ";
    return s + ::hvkit::hosted::hex16(f.guest_physical.value()) + ")";
  }
  switch (f.kind) {
    case fault_kind::unbacked: return s + " (not backed: " + ::hvkit::hosted::hex16(f.guest_physical.value()) + ")";
    case fault_kind::invalid_pdpte: return s + " (" + to_string(f.vector) + " at the PDPTE load)";
    case fault_kind::retry_exhausted: return s + " (the entries kept changing)";
    default: break;
  }
  return s + " (" + to_string(f.vector) + " error code " + to_string(f.error_code) + ")";
}

/// A whole guest walk as `hvkit-walk --gva` prints it: a header line with the mode and
/// root, then the chain of entries and the translation, or the fault.
/// @code
///   gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000
///     PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A
///     ...
///     -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)
/// @endcode
[[nodiscard]] inline std::string format_walk(const walker_state& s, x86::gva va, const walk_result& r) {
  std::string out = "gva " + ::hvkit::hosted::hex16(va.value()) + ": " + std::string(x86::description(s.mode));
  if (s.mode != x86::paging_mode::none) out += " paging, root " + ::hvkit::hosted::hex16(s.root.value());
  out += '\n';
  if (r) {
    const bool keys = s.mode == x86::paging_mode::four_level || s.mode == x86::paging_mode::five_level;
    out += format_path(r->path, walk_stage::guest, s.nx, keys);
    return out + "  " + format_translation(*r, walk_stage::guest) + '\n';
  }
  return out + "  fault: " + to_string(r.error()) + '\n';
}

/// A whole EPT walk: "gpa 0x...: 4-level EPT, root 0x...", the EPT entries and the
/// translation, or the fault.
[[nodiscard]] inline std::string format_ept_walk(const ept_walker& w, x86::gpa ga, const host_walk_result& r) {
  std::string out = "gpa " + ::hvkit::hosted::hex16(ga.value()) + ": " + std::to_string(w.levels()) + "-level EPT, root " +
                    ::hvkit::hosted::hex16(w.root().value()) + '\n';
  if (r) return out + format_path(r->path, walk_stage::ept, false) + "  " + format_translation(*r, walk_stage::ept) + '\n';
  return out + "  fault: " + to_string(r.error()) + '\n';
}

/// A whole nested walk: the guest's chain (entry addresses are guest-physical, L2), the
/// guest-physical result, then the second stage's walk of it (its entries indented), or the
/// fault of whichever stage failed (`walk_fault::stage`).
/// @code
///   gva 0x00007f0000412345: 4-level paging, root 0x0000000000101000
///     PML4E @ ...
///     -> gpa 0x0000000040012345 (2 MiB page, rwx user, pkey 0)
///       EPT PML4E @ 0x0000000000108000 = 0x0000000000109007  R W X
///       EPT PDPTE @ 0x0000000000109008 = 0x00000000800000b5  R X PS WB
///       -> hpa 0x0000000080012345 (1 GiB page, r-x, WB)
/// @endcode
/// `second` names the second stage (walk_stage::npt for AMD nested paging, whose entries
/// have the host's paging format; `second_nx` is the host's EFER.NXE then).
[[nodiscard]] inline std::string format_nested_walk(const walker_state& s, x86::gva va, const nested_result& r,
                                                    walk_stage second = walk_stage::ept, bool second_nx = false) {
  std::string out = "gva " + ::hvkit::hosted::hex16(va.value()) + ": " + std::string(x86::description(s.mode));
  if (s.mode != x86::paging_mode::none) out += " paging, root " + ::hvkit::hosted::hex16(s.root.value());
  out += '\n';
  if (!r) return out + "  fault: " + to_string(r.error()) + '\n';
  const bool keys = s.mode == x86::paging_mode::four_level || s.mode == x86::paging_mode::five_level;
  out += format_path(r->guest.path, walk_stage::guest, s.nx, keys);
  out += "  " + format_translation(r->guest, walk_stage::guest) + '\n';
  out += format_path(r->second.path, second, second_nx, false, "    ");
  return out + "    " + format_translation(r->second, second) + '\n';
}

/// One mapping in one line: "0x<first> -> 0x<output>  4 KiB rw- supervisor pkey 0 pat 0" for
/// guest paging, "0x<first> -> 0x<output>  2 MiB rwx WB" for EPT (16-digit addresses).
template <class Address>
[[nodiscard]] inline std::string to_string(const basic_mapping<Address>& m) {
  std::string s = ::hvkit::hosted::hex16(m.input) + " -> " + ::hvkit::hosted::hex16(m.output.value()) + "  " + page_size_name(m.page_shift);
  if (m.stage == walk_stage::ept) {
    const auto mt = static_cast<ept_memory_type>(m.memory_type & 7u);
    s += ' ' + ept_rights(m.rights) + ' ';
    s += name(mt).empty() ? "MT=" + std::to_string(m.memory_type & 7u) : std::string(name(mt));
    if (m.memory_type & 8u) s += " IPAT";
    return s;
  }
  return s + ' ' + guest_rights(m.rights) + " pkey " + std::to_string(m.pkey) + " pat " + std::to_string(m.memory_type);
}

/// One nested mapping: "0x<linear> +0x<size> -> gpa 0x... -> 0x...  <guest rights> / <EPT rights>".
[[nodiscard]] inline std::string to_string(const nested_mapping& m) {
  return ::hvkit::hosted::hex16(m.linear) + " +" + ::hvkit::hosted::hex(m.size) + " -> gpa " + ::hvkit::hosted::hex16(m.guest_physical.value()) +
         " -> " + ::hvkit::hosted::hex16(m.output.value()) + "  " + guest_rights(m.guest.rights) + " / " +
         ept_rights(m.second_rights);
}

}  // namespace hvkit::paging

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<paging::fault_kind> = true;
template <>
inline constexpr bool enable_printing<paging::walk_stage> = true;
template <>
inline constexpr bool enable_printing<paging::memory_error> = true;
template <>
inline constexpr bool enable_printing<paging::eptp_error> = true;
template <>
inline constexpr bool enable_printing<paging::ept_memory_type> = true;
template <>
inline constexpr bool enable_printing<paging::ept_misconfig> = true;
template <>
inline constexpr bool enable_printing<paging::mapping_step> = true;
template <>
inline constexpr bool enable_printing<paging::role_sync> = true;
template <>
inline constexpr bool enable_printing<paging::pte_access> = true;
template <>
inline constexpr bool enable_printing<paging::walk_fault> = true;
template <>
inline constexpr bool enable_printing<paging::mapping> = true;
template <>
inline constexpr bool enable_printing<paging::host_mapping> = true;
template <>
inline constexpr bool enable_printing<paging::nested_mapping> = true;
}  // namespace hvkit::hosted
