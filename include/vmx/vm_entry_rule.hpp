// SPDX-License-Identifier: MIT
/// @file
/// @brief The vocabulary of the VM-entry checks: a named rule (SDM section, what failing it
/// makes the processor do, a constexpr predicate), the hit a predicate reports (the fields
/// and values involved), and the verdict of check_vm_entry (vm_entry_checks.hpp).
///
/// What a failed check does (SDM Vol. 3C 27.1-27.4, 28.2.1, 31.4):
/// - VM-execution/exit/entry control fields (27.2.1): VMfailValid, VM-instruction error 7;
/// - host-state area (27.2.2-27.2.4): VMfailValid, error 8;
/// - guest-state area (27.3.1): a VM-entry failure VM exit, basic exit reason 33 (bit 31 of
///   the exit reason set), exit qualification 0, or 2 (PDPTEs), 3 (NMI injection with
///   blocking by STI), 4 (VMCS link pointer);
/// - MSR loading (27.4): exit reason 34, exit qualification = the 1-based index of the entry.
#pragma once

#include <cstdint>

#include "capabilities.hpp"
#include "vm_entry_state.hpp"
#include "vm_fail.hpp"
#include "../x86/address.hpp"
#include "../x86/pat.hpp"

namespace hvkit::vmx {

/// Which group of checks a rule belongs to, in the order VM entry makes them.
enum class vm_entry_phase : std::uint8_t { controls, host_state, guest_state, msr_load };

/// Exit qualifications of a VM-entry failure due to invalid guest state (SDM 28.2.1).
enum class entry_failure_qualification : std::uint8_t {
  none = 0,
  pdpte_load = 2,
  nmi_injection_blocked_by_sti = 3,
  vmcs_link_pointer = 4,
};

/// What a failed predicate reports: up to two VMCS fields (encodings) and their values.
struct vm_entry_hit {
  bool failed = false;
  std::uint32_t field = ~0u;
  std::uint64_t value = 0;
  std::uint32_t field2 = ~0u;
  std::uint64_t value2 = 0;
  [[nodiscard]] constexpr explicit operator bool() const noexcept { return failed; }
};
[[nodiscard]] constexpr vm_entry_hit entry_pass() noexcept { return {}; }
template <std::uint32_t E>
[[nodiscard]] constexpr vm_entry_hit entry_fail(field<E>, std::uint64_t v) noexcept {
  return {true, E, v};
}
template <std::uint32_t E, std::uint32_t E2>
[[nodiscard]] constexpr vm_entry_hit entry_fail(field<E>, std::uint64_t v, field<E2>, std::uint64_t v2) noexcept {
  return {true, E, v, E2, v2};
}
[[nodiscard]] constexpr vm_entry_hit entry_fail_raw(std::uint32_t enc, std::uint64_t v, std::uint32_t enc2 = ~0u,
                                                    std::uint64_t v2 = 0) noexcept {
  return {true, enc, v, enc2, v2};
}

/// The part of a rule a report needs.
struct vm_entry_rule_info {
  const char* name;     ///< snake_case, unique over all rules
  const char* section;  ///< SDM Vol. 3C section
  vm_entry_phase phase;
  entry_failure_qualification qualification = entry_failure_qualification::none;  ///< guest state only
};

/// A check on the VMCS (and the memory values in the snapshot).
struct vm_entry_rule {
  vm_entry_rule_info info;
  vm_entry_hit (*check)(const vm_entry_state&, const vm_entry_env&) noexcept;
};

/// One entry of the VM-entry MSR-load area (SDM 25.8.2, Table 25-16).
struct msr_load_entry {
  std::uint32_t index = 0;
  std::uint32_t reserved = 0;  ///< bits 63:32
  std::uint64_t value = 0;
};

/// A check on one MSR-load entry (SDM 27.4).
struct msr_load_rule {
  vm_entry_rule_info info;
  bool (*bad)(const msr_load_entry&, const vm_entry_env&) noexcept;
};

/// What VM entry does with this VMCS.
enum class vm_entry_outcome : std::uint8_t {
  success,        ///< VM entry succeeds
  vm_fail_valid,  ///< VMfailValid with `error` (7 or 8)
  entry_failure,  ///< VM exit with basic reason 33 or 34 (bit 31 set)
};

/// Basic exit reasons of VM-entry failures (SDM Appendix C).
inline constexpr std::uint16_t exit_reason_invalid_guest_state = 33;
inline constexpr std::uint16_t exit_reason_msr_loading = 34;

/// The verdict: what the processor would do, and for a human which rule failed and why.
struct vm_entry_verdict {
  vm_entry_outcome outcome = vm_entry_outcome::success;
  vm_instruction_error error = vm_instruction_error::none;
  /// The full exit reason (bit 31 = VM-entry failure) for entry_failure.
  std::uint32_t exit_reason = 0;
  std::uint64_t exit_qualification = 0;
  const vm_entry_rule_info* rule = nullptr;
  /// The fields and values involved (MSR loading: the entry's address and the count).
  vm_entry_hit hit{};
  /// MSR loading: the failing entry.
  msr_load_entry msr{};

  [[nodiscard]] constexpr bool ok() const noexcept { return outcome == vm_entry_outcome::success; }
  [[nodiscard]] constexpr std::uint16_t basic_exit_reason() const noexcept {
    return static_cast<std::uint16_t>(exit_reason & 0xffffu);
  }
  friend constexpr bool same_outcome(const vm_entry_verdict& a, const vm_entry_verdict& b) noexcept {
    return a.outcome == b.outcome && a.error == b.error && a.exit_reason == b.exit_reason &&
           a.exit_qualification == b.exit_qualification;
  }
};

/// The verdict of failing `info` (with `qualification_value` for MSR loading).
[[nodiscard]] constexpr vm_entry_verdict make_verdict(const vm_entry_rule_info& info, vm_entry_hit hit,
                                                      std::uint64_t msr_entry_number = 0) noexcept {
  vm_entry_verdict v{};
  v.rule = &info;
  v.hit = hit;
  switch (info.phase) {
    case vm_entry_phase::controls:
      v.outcome = vm_entry_outcome::vm_fail_valid;
      v.error = vm_instruction_error::entry_invalid_control_fields;
      break;
    case vm_entry_phase::host_state:
      v.outcome = vm_entry_outcome::vm_fail_valid;
      v.error = vm_instruction_error::entry_invalid_host_state;
      break;
    case vm_entry_phase::guest_state:
      v.outcome = vm_entry_outcome::entry_failure;
      v.exit_reason = 0x8000'0000u | exit_reason_invalid_guest_state;
      v.exit_qualification = static_cast<std::uint64_t>(info.qualification);
      break;
    case vm_entry_phase::msr_load:
      v.outcome = vm_entry_outcome::entry_failure;
      v.exit_reason = 0x8000'0000u | exit_reason_msr_loading;
      v.exit_qualification = msr_entry_number;
      break;
  }
  return v;
}

/// Helpers the rules share.
namespace entry_rules {
using S = vm_entry_state;
using E = vm_entry_env;
using H = vm_entry_hit;
namespace f = fields;
using p1 = primary_proc_based;
using p2 = secondary_proc_based;

/// A control field against its capability MSR (SDM A.3-A.5): an allowed-0 bit cleared or
/// an allowed-1 bit clear set.
[[nodiscard]] constexpr bool violates(std::uint32_t v, control_capability c) noexcept {
  return (c.must_be_one & ~v) != 0 || (v & ~c.may_be_one) != 0;
}
/// Bits 63:MAXPHYADDR set.
[[nodiscard]] constexpr bool beyond_maxphyaddr(std::uint64_t a, const vm_entry_env& e) noexcept {
  return e.maxphyaddr < 64 && (a >> e.maxphyaddr) != 0;
}
/// A 4-KByte aligned physical address within MAXPHYADDR.
[[nodiscard]] constexpr bool bad_page_address(std::uint64_t a, const vm_entry_env& e) noexcept {
  return (a & 0xfffu) != 0 || beyond_maxphyaddr(a, e);
}
/// An MSR area: bits 3:0 clear, and its last byte (16 bytes per entry) within MAXPHYADDR
/// (SDM 27.2.1.2, 27.2.1.3).
[[nodiscard]] constexpr bool bad_msr_area(std::uint64_t a, std::uint32_t count, const vm_entry_env& e) noexcept {
  if (count == 0) return false;
  if ((a & 0xfu) != 0 || beyond_maxphyaddr(a, e)) return true;
  const std::uint64_t last = a + std::uint64_t{count} * 16u - 1u;
  return last < a || beyond_maxphyaddr(last, e);
}
[[nodiscard]] constexpr bool canonical(std::uint64_t a, const vm_entry_env& e) noexcept {
  return x86::is_canonical(x86::gva{a}, e.linear);
}
/// IA32_PAT fields (SDM 27.2.2, 27.3.1.1): x86/pat.hpp.
using x86::valid_pat;
/// IA32_EFER bits defined on Intel 64 processors: SCE, LME, LMA, NXE (Vol. 4 Table 2-2); the
/// rest are reserved and must be 0 in a VMCS EFER field.
inline constexpr std::uint64_t efer_defined_intel = (x86::efer::sce | x86::efer::lme | x86::efer::lma | x86::efer::nxe).raw();

// Segment access-rights fields (SDM 25.4.1, Table 25-2).
[[nodiscard]] constexpr unsigned ar_type(std::uint32_t ar) noexcept { return ar & 0xfu; }
[[nodiscard]] constexpr bool ar_s(std::uint32_t ar) noexcept { return (ar >> 4) & 1u; }
[[nodiscard]] constexpr unsigned ar_dpl(std::uint32_t ar) noexcept { return (ar >> 5) & 3u; }
[[nodiscard]] constexpr bool ar_p(std::uint32_t ar) noexcept { return (ar >> 7) & 1u; }
[[nodiscard]] constexpr bool ar_l(std::uint32_t ar) noexcept { return (ar >> 13) & 1u; }
[[nodiscard]] constexpr bool ar_db(std::uint32_t ar) noexcept { return (ar >> 14) & 1u; }
[[nodiscard]] constexpr bool ar_g(std::uint32_t ar) noexcept { return (ar >> 15) & 1u; }
[[nodiscard]] constexpr bool ar_unusable(std::uint32_t ar) noexcept { return (ar >> 16) & 1u; }
/// Bits 11:8 and 31:17 are reserved.
[[nodiscard]] constexpr bool ar_reserved(std::uint32_t ar) noexcept { return (ar & 0xfffe'0f00u) != 0; }
/// The granularity rule: G must be 0 unless limit bits 11:0 are all 1, and 1 if any of limit
/// bits 31:20 is 1 (SDM 27.3.1.2).
[[nodiscard]] constexpr bool bad_granularity(std::uint32_t limit, std::uint32_t ar) noexcept {
  if ((limit & 0xfffu) != 0xfffu && ar_g(ar)) return true;
  if ((limit >> 20) != 0 && !ar_g(ar)) return true;
  return false;
}

// The injection and interruptibility rules themselves are event_injection.hpp's
// injection_rules and interruptibility.hpp's entry_state_rules (one copy, also behind
// check_injection_fields and check_entry_state).
// Activity states (SDM 25.4.2).
inline constexpr std::uint32_t activity_hlt = 1;
}  // namespace entry_rules

}  // namespace hvkit::vmx
