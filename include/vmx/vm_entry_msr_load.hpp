// SPDX-License-Identifier: MIT
/// @file
/// @brief The checks on the VM-entry MSR-load area (SDM Vol. 3C 27.4 "Loading MSRs"): each
/// entry, in order, is checked before it is loaded; the first bad one ends VM entry with a
/// VM-entry failure exit, basic exit reason 34, exit qualification = its 1-based index.
#pragma once

#include <array>
#include <cstdint>

#include "vm_entry_rule.hpp"

namespace hvkit::vmx {

namespace entry_rules {
inline constexpr const char* sec_msr_load = "27.4";
inline constexpr auto msr = vm_entry_phase::msr_load;

inline constexpr std::array msr_load_rules{
    // Bits 63:32 of the first quadword are reserved.
    msr_load_rule{{"msr_load_entry_reserved", sec_msr_load, msr},
                  [](const msr_load_entry& m, const E&) noexcept { return m.reserved != 0; }},
    // IA32_FS_BASE and IA32_GS_BASE are loaded from the guest-state area, never from the list.
    msr_load_rule{{"msr_load_fs_gs_base", sec_msr_load, msr},
                  [](const msr_load_entry& m, const E&) noexcept { return m.index == 0xc000'0100u || m.index == 0xc000'0101u; }},
    // The x2APIC MSRs (bits 31:8 = 000008H).
    msr_load_rule{{"msr_load_x2apic_range", sec_msr_load, msr},
                  [](const msr_load_entry& m, const E&) noexcept { return (m.index >> 8) == 0x8u; }},
    // An MSR writable only in SMM: IA32_SMM_MONITOR_CTL (9BH), outside SMM.
    msr_load_rule{{"msr_load_smm_only", sec_msr_load, msr},
                  [](const msr_load_entry& m, const E&) noexcept { return m.index == 0x9bu; }},
    // A value WRMSR would refuse with #GP (only with vm_entry_env::msr_write_faults).
    msr_load_rule{{"msr_load_wrmsr_would_fault", sec_msr_load, msr},
                  [](const msr_load_entry& m, const E& e) noexcept {
                    return e.msr_write_faults != nullptr && e.msr_write_faults(m.index, m.value);
                  }},
};
}  // namespace entry_rules

/// Checks the VM-entry MSR-load area through `mem`. Returns the failing verdict, or a
/// success verdict if every entry passes or an entry cannot be read (an unbacked area is
/// not something the SDM gives an outcome for: the processor's behaviour is undefined).
template <paging::guest_memory M>
[[nodiscard]] constexpr vm_entry_verdict check_msr_load_area(std::uint64_t address, std::uint32_t count,
                                                             const vm_entry_env& env, const M& mem) noexcept {
  for (std::uint32_t i = 0; i < count; ++i) {
    const x86::gpa a{address + 16u * std::uint64_t{i}};
    const auto lo = mem.read64(a);
    const auto val = mem.read64(a + 8u);
    if (!lo || !val) return {};
    const msr_load_entry m{static_cast<std::uint32_t>(lo.value()), static_cast<std::uint32_t>(lo.value() >> 32), val.value()};
    for (const auto& r : entry_rules::msr_load_rules)
      if (r.bad(m, env))
      {
        vm_entry_verdict v = make_verdict(r.info,
                                          entry_fail(fields::vm_entry_msr_load_address, a.value(),
                                                     fields::vm_entry_msr_load_count, count),
                                          std::uint64_t{i} + 1);
        v.msr = m;
        return v;
      }
  }
  return {};
}

}  // namespace hvkit::vmx
