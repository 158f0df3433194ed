// SPDX-License-Identifier: MIT
/// @file
/// @brief "Why did my VM entry fail?": every check VM entry makes on the VMCS, in SDM order
/// (Vol. 3C 27.2.1 controls, 27.2.2-27.2.4 host state, 27.3.1 guest state, 27.4 MSR
/// loading), as named rules, and check_vm_entry(), which says what the processor does with
/// a VMCS: VMfailValid with error 7 or 8, a VM-entry failure exit (reason 33 or 34, with its
/// exit qualification), or success; plus which rule failed and the field values involved.
///
/// It reads the VMCS only through a vmcs_backend: a software VMCS (a nested hypervisor
/// checking its guest's VMCS before emulating VM entry) or the hardware VMCS (diagnosing a
/// failed VMLAUNCH after the fact). A memory view (paging::guest_memory over physical
/// addresses) enables the checks that read memory: TPR threshold against VTPR, the VMCS
/// link pointer's revision, the PDPTEs without EPT, and the MSR-load area.
///
/// Not checked (they need state outside the VMCS, or are for SMM): the basic checks of
/// 27.1 (VMCS launch state, MOV-SS blocking of VMLAUNCH itself), IA32_PERF_GLOBAL_CTRL,
/// IA32_RTIT_CTL, CET, FRED and LBR-control state, the executive-VMCS pointer and SMM
/// entry, HLAT, IPI virtualization and PASID translation; the MSR-load values that WRMSR
/// would refuse are checked only with vm_entry_env::msr_write_faults.
///
/// Order: the SDM's. The outcome for a VMCS with violations in several groups follows the
/// first group (controls before host state before guest state before MSR loading); within
/// the guest state the exit qualification depends on which check fails first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend.hpp"
#include "vm_entry_controls_checks.hpp"
#include "vm_entry_guest_checks.hpp"
#include "vm_entry_host_checks.hpp"
#include "vm_entry_msr_load.hpp"
#include "vm_entry_rule.hpp"
#include "vm_entry_state.hpp"

namespace hvkit::vmx {

/// Number of VMCS rules (controls, host state, guest state) and of MSR-load rules.
inline constexpr std::size_t vm_entry_rule_count =
    entry_rules::control_rules.size() + entry_rules::host_rules.size() + entry_rules::guest_rules.size();
inline constexpr std::size_t msr_load_rule_count = entry_rules::msr_load_rules.size();

/// Calls f(rule) for every VMCS rule, in check order.
template <class F>
constexpr void for_each_vm_entry_rule(F&& f) {
  for (const auto& r : entry_rules::control_rules) f(r);
  for (const auto& r : entry_rules::host_rules) f(r);
  for (const auto& r : entry_rules::guest_rules) f(r);
}

/// The rule (VMCS or MSR-load) named `name`, or nullptr.
[[nodiscard]] constexpr const vm_entry_rule_info* find_vm_entry_rule(const char* name) noexcept {
  auto eq = [](const char* a, const char* b) {
    while (*a && *a == *b) ++a, ++b;
    return *a == *b;
  };
  const vm_entry_rule_info* found = nullptr;
  for_each_vm_entry_rule([&](const vm_entry_rule& r) {
    if (!found && eq(r.info.name, name)) found = &r.info;
  });
  for (const auto& r : entry_rules::msr_load_rules)
    if (!found && eq(r.info.name, name)) found = &r.info;
  return found;
}

/// The verdict on a snapshot: the first failing VMCS rule, or success. The MSR-load area
/// is not looked at (check_vm_entry does that).
[[nodiscard]] constexpr vm_entry_verdict check_vm_entry_state(const vm_entry_state& s, const vm_entry_env& env) noexcept {
  vm_entry_verdict v{};
  bool done = false;
  for_each_vm_entry_rule([&](const vm_entry_rule& r) {
    if (done) return;
    if (const vm_entry_hit h = r.check(s, env)) {
      v = make_verdict(r.info, h);
      done = true;
    }
  });
  return v;
}

/// Calls f(rule, hit) for every VMCS rule the snapshot violates, in check order (a VMCS
/// can violate several; the processor reports the first of its own order).
template <class F>
constexpr void for_each_vm_entry_violation(const vm_entry_state& s, const vm_entry_env& env, F&& f) {
  for_each_vm_entry_rule([&](const vm_entry_rule& r) {
    if (const vm_entry_hit h = r.check(s, env)) f(r, h);
  });
}

/// What VM entry would do with the VMCS behind `b` on a processor described by `env`.
/// Fails only if the backend cannot read a field the checks need.
template <vmcs_backend B, paging::guest_memory M = no_memory_view>
[[nodiscard]] constexpr result<vm_entry_verdict, vm_fail> check_vm_entry(B& b, const vm_entry_env& env,
                                                                         const M& mem = M{}) noexcept {
  auto s = read_vm_entry_state(b, mem);
  if (!s) return unexpected(s.error());
  vm_entry_verdict v = check_vm_entry_state(s.value(), env);
  if (!v.ok()) return v;
  return check_msr_load_area(s.value().entry_msr_load_address, s.value().entry_msr_load_count, env, mem);
}

/// "VMfailValid(7)", "VM-entry failure (33)" ... for a report.
[[nodiscard]] constexpr const char* outcome_name(vm_entry_outcome o) noexcept {
  switch (o) {
    case vm_entry_outcome::success: return "success";
    case vm_entry_outcome::vm_fail_valid: return "VMfailValid";
    case vm_entry_outcome::entry_failure: return "VM-entry failure";
  }
  return "?";
}

}  // namespace hvkit::vmx
