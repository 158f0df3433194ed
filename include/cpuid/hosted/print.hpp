// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: names for cpuid/'s enumerations: MSR verdicts, policy, table and XSAVE
/// errors, XSAVE enumeration checks, vendors and normalization rules.
///
/// See x86/hosted/format.hpp for the conventions (`name()`, `to_string()`, `operator<<`,
/// `std::formatter`).
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/cpuid/hosted/print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <string>
#include <string_view>

#include "../decode.hpp"
#include "../msr_policy.hpp"
#include "../policy.hpp"
#include "../rules.hpp"
#include "../table.hpp"
#include "../xsave.hpp"
#include "../../x86/hosted/format.hpp"

namespace hvkit::cpuid {

using ::hvkit::hosted::operator<<;

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(msr_verdict v) noexcept {
  switch (v) {
    case msr_verdict::not_covered: return "not_covered";
    case msr_verdict::allow: return "allow";
    case msr_verdict::gp: return "gp";
  }
  return {};
}
/// See name(msr_verdict).
[[nodiscard]] inline std::string to_string(msr_verdict v) { return ::hvkit::hosted::enum_string(name(v), "msr_verdict", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(policy_error v) noexcept {
  switch (v) {
    case policy_error::none: return "none";
    case policy_error::table_full: return "table_full";
    case policy_error::bad_kvm_base: return "bad_kvm_base";
    case policy_error::bad_topology: return "bad_topology";
    case policy_error::bad_max_leaf: return "bad_max_leaf";
    case policy_error::no_basic_leaves: return "no_basic_leaves";
    case policy_error::xsave_layout: return "xsave_layout";
    case policy_error::no_kvm_leaves: return "no_kvm_leaves";
    case policy_error::not_hypervisor_leaf: return "not_hypervisor_leaf";
  }
  return {};
}
/// See name(policy_error).
[[nodiscard]] inline std::string to_string(policy_error v) { return ::hvkit::hosted::enum_string(name(v), "policy_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(table_error v) noexcept {
  switch (v) {
    case table_error::none: return "none";
    case table_error::full: return "full";
  }
  return {};
}
/// See name(table_error).
[[nodiscard]] inline std::string to_string(table_error v) { return ::hvkit::hosted::enum_string(name(v), "table_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(xsave_error v) noexcept {
  switch (v) {
    case xsave_error::none: return "none";
    case xsave_error::unknown_component: return "unknown_component";
    case xsave_error::out_of_range: return "out_of_range";
    case xsave_error::too_large: return "too_large";
  }
  return {};
}
/// See name(xsave_error).
[[nodiscard]] inline std::string to_string(xsave_error v) { return ::hvkit::hosted::enum_string(name(v), "xsave_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(xsave_enumeration v) noexcept {
  switch (v) {
    case xsave_enumeration::consistent: return "consistent";
    case xsave_enumeration::no_size: return "no_size";
    case xsave_enumeration::wrong_register: return "wrong_register";
    case xsave_enumeration::bad_offset: return "bad_offset";
    case xsave_enumeration::too_large: return "too_large";
  }
  return {};
}
/// See name(xsave_enumeration).
[[nodiscard]] inline std::string to_string(xsave_enumeration v) { return ::hvkit::hosted::enum_string(name(v), "xsave_enumeration", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(vendor v) noexcept {
  switch (v) {
    case vendor::unknown: return "unknown";
    case vendor::intel: return "intel";
    case vendor::amd: return "amd";
    case vendor::hygon: return "hygon";
    case vendor::zhaoxin: return "zhaoxin";
    case vendor::centaur: return "centaur";
  }
  return {};
}
/// See name(vendor).
[[nodiscard]] inline std::string to_string(vendor v) { return ::hvkit::hosted::enum_string(name(v), "vendor", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(rule_id v) noexcept {
  switch (v) {
    case rule_id::nested_virtualization: return "nested_virtualization";
    case rule_id::emulated_only: return "emulated_only";
    case rule_id::feature_dependencies: return "feature_dependencies";
    case rule_id::topoext_hidden: return "topoext_hidden";
    case rule_id::hypervisor_bit: return "hypervisor_bit";
    case rule_id::xsave_leaf: return "xsave_leaf";
    case rule_id::topology: return "topology";
    case rule_id::hypervisor_leaves: return "hypervisor_leaves";
    case rule_id::leaf7_max_subleaf: return "leaf7_max_subleaf";
    case rule_id::max_basic_leaf: return "max_basic_leaf";
    case rule_id::max_extended_leaf: return "max_extended_leaf";
    case rule_id::osxsave_ospke: return "osxsave_ospke";
    case rule_id::apic_id: return "apic_id";
    case rule_id::xsave_sizes: return "xsave_sizes";
    case rule_id::pv_send_ipi: return "pv_send_ipi";
  }
  return {};
}
/// See name(rule_id).
[[nodiscard]] inline std::string to_string(rule_id v) { return ::hvkit::hosted::enum_string(name(v), "rule_id", v); }

}  // namespace hvkit::cpuid

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<cpuid::msr_verdict> = true;
template <>
inline constexpr bool enable_printing<cpuid::policy_error> = true;
template <>
inline constexpr bool enable_printing<cpuid::table_error> = true;
template <>
inline constexpr bool enable_printing<cpuid::xsave_error> = true;
template <>
inline constexpr bool enable_printing<cpuid::xsave_enumeration> = true;
template <>
inline constexpr bool enable_printing<cpuid::vendor> = true;
template <>
inline constexpr bool enable_printing<cpuid::rule_id> = true;
}  // namespace hvkit::hosted
