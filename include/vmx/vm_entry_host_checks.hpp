// SPDX-License-Identifier: MIT
/// @file
/// @brief The checks on the host-state area (SDM Vol. 3C 27.2.2 host control registers and
/// MSRs, 27.2.3 host segment and descriptor-table registers, 27.2.4 address-space size).
/// Failing any of them: VMfailValid, VM-instruction error 8.
#pragma once

#include <array>
#include <cstdint>

#include "vm_entry_rule.hpp"

namespace hvkit::vmx {

namespace entry_rules {
inline constexpr const char* sec_host_cr = "27.2.2";
inline constexpr const char* sec_host_seg = "27.2.3";
inline constexpr const char* sec_host_size = "27.2.4";
inline constexpr auto host = vm_entry_phase::host_state;

/// Encodings of the host selectors in vm_entry_state::host_selector order.
inline constexpr std::uint32_t host_selector_fields[7] = {
    f::host_es_selector.encoding, f::host_cs_selector.encoding, f::host_ss_selector.encoding,
    f::host_ds_selector.encoding, f::host_fs_selector.encoding, f::host_gs_selector.encoding,
    f::host_tr_selector.encoding};

[[nodiscard]] constexpr bool host_64(const S& s) noexcept { return s.exit.test(exit_controls::host_address_space_size); }

inline constexpr std::array host_rules{
    // ---- 27.2.2 host control registers and MSRs ----
    vm_entry_rule{{"host_cr0_fixed_bits", sec_host_cr, host}, [](const S& s, const E& e) noexcept -> H {
      return cr0_fixed_violations(s.host_cr0, e.caps.cr0_fixed()).none() ? entry_pass() : entry_fail(f::host_cr0, s.host_cr0.raw());
    }},
    vm_entry_rule{{"host_cr4_fixed_bits", sec_host_cr, host}, [](const S& s, const E& e) noexcept -> H {
      return cr4_fixed_violations(s.host_cr4, e.caps.cr4_fixed()).none() ? entry_pass() : entry_fail(f::host_cr4, s.host_cr4.raw());
    }},
    vm_entry_rule{{"host_cr3_beyond_maxphyaddr", sec_host_cr, host}, [](const S& s, const E& e) noexcept -> H {
      return beyond_maxphyaddr(s.host_cr3, e) ? entry_fail(f::host_cr3, s.host_cr3) : entry_pass();
    }},
    vm_entry_rule{{"host_sysenter_esp_not_canonical", sec_host_cr, host}, [](const S& s, const E& e) noexcept -> H {
      return canonical(s.host_sysenter_esp, e) ? entry_pass() : entry_fail(f::host_ia32_sysenter_esp, s.host_sysenter_esp);
    }},
    vm_entry_rule{{"host_sysenter_eip_not_canonical", sec_host_cr, host}, [](const S& s, const E& e) noexcept -> H {
      return canonical(s.host_sysenter_eip, e) ? entry_pass() : entry_fail(f::host_ia32_sysenter_eip, s.host_sysenter_eip);
    }},
    vm_entry_rule{{"host_pat_invalid", sec_host_cr, host}, [](const S& s, const E&) noexcept -> H {
      return s.exit.test(exit_controls::load_ia32_pat) && !valid_pat(s.host_pat) ? entry_fail(f::host_ia32_pat, s.host_pat)
                                                                                 : entry_pass();
    }},
    vm_entry_rule{{"host_efer_reserved", sec_host_cr, host}, [](const S& s, const E&) noexcept -> H {
      return s.exit.test(exit_controls::load_ia32_efer) && (s.host_efer.raw() & ~efer_defined_intel) != 0
                 ? entry_fail(f::host_ia32_efer, s.host_efer.raw())
                 : entry_pass();
    }},
    // EFER.LMA and EFER.LME both equal "host address-space size".
    vm_entry_rule{{"host_efer_lma_lme_mismatch", sec_host_cr, host}, [](const S& s, const E&) noexcept -> H {
      if (!s.exit.test(exit_controls::load_ia32_efer)) return entry_pass();
      const bool h = host_64(s);
      return s.host_efer.test(x86::efer::lma) != h || s.host_efer.test(x86::efer::lme) != h
                 ? entry_fail(f::host_ia32_efer, s.host_efer.raw(), f::primary_vm_exit_controls, s.exit.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"host_pkrs_reserved", sec_host_cr, host}, [](const S& s, const E&) noexcept -> H {
      return s.exit.test(exit_controls::load_pkrs) && (s.host_pkrs >> 32) != 0 ? entry_fail(f::host_ia32_pkrs, s.host_pkrs)
                                                                               : entry_pass();
    }},

    // ---- 27.2.3 host segment and descriptor-table registers ----
    vm_entry_rule{{"host_selector_rpl_ti", sec_host_seg, host}, [](const S& s, const E&) noexcept -> H {
      for (unsigned i = 0; i < 7; ++i)
        if (s.host_selector[i] & 7u) return entry_fail_raw(host_selector_fields[i], s.host_selector[i]);
      return entry_pass();
    }},
    vm_entry_rule{{"host_cs_selector_null", sec_host_seg, host}, [](const S& s, const E&) noexcept -> H {
      return s.host_selector[1] == 0 ? entry_fail(f::host_cs_selector, 0) : entry_pass();
    }},
    vm_entry_rule{{"host_tr_selector_null", sec_host_seg, host}, [](const S& s, const E&) noexcept -> H {
      return s.host_selector[6] == 0 ? entry_fail(f::host_tr_selector, 0) : entry_pass();
    }},
    vm_entry_rule{{"host_ss_selector_null", sec_host_seg, host}, [](const S& s, const E&) noexcept -> H {
      return !host_64(s) && s.host_selector[2] == 0 ? entry_fail(f::host_ss_selector, 0) : entry_pass();
    }},
    vm_entry_rule{{"host_base_not_canonical", sec_host_seg, host}, [](const S& s, const E& e) noexcept -> H {
      if (!canonical(s.host_fs_base, e)) return entry_fail(f::host_fs_base, s.host_fs_base);
      if (!canonical(s.host_gs_base, e)) return entry_fail(f::host_gs_base, s.host_gs_base);
      if (!canonical(s.host_gdtr_base, e)) return entry_fail(f::host_gdtr_base, s.host_gdtr_base);
      if (!canonical(s.host_idtr_base, e)) return entry_fail(f::host_idtr_base, s.host_idtr_base);
      if (!canonical(s.host_tr_base, e)) return entry_fail(f::host_tr_base, s.host_tr_base);
      return entry_pass();
    }},

    // ---- 27.2.4 address-space size ----
    // A VMLAUNCH/VMRESUME in IA-32e mode must return to a 64-bit host ...
    vm_entry_rule{{"host_address_space_size_clear_in_ia32e_mode", sec_host_size, host}, [](const S& s, const E& e) noexcept -> H {
      return e.in_ia32e_mode && !host_64(s) ? entry_fail(f::primary_vm_exit_controls, s.exit.raw()) : entry_pass();
    }},
    // ... outside IA-32e mode neither host nor guest can be 64-bit.
    vm_entry_rule{{"ia32e_controls_outside_ia32e_mode", sec_host_size, host}, [](const S& s, const E& e) noexcept -> H {
      return !e.in_ia32e_mode && (host_64(s) || s.ia32e_guest())
                 ? entry_fail(f::primary_vm_exit_controls, s.exit.raw(), f::vm_entry_controls, s.entry.raw())
                 : entry_pass();
    }},
    // A 32-bit host: CR4.PCIDE = 0, RIP bits 63:32 = 0. (Its third rule, "IA-32e mode
    // guest" = 0, is implied by the two above: a 32-bit host is either refused in IA-32e
    // mode or, outside it, already forbids an IA-32e mode guest.)
    vm_entry_rule{{"host_32bit_pcide", sec_host_size, host}, [](const S& s, const E&) noexcept -> H {
      return !host_64(s) && s.host_cr4.test(x86::cr4::pcide) ? entry_fail(f::host_cr4, s.host_cr4.raw()) : entry_pass();
    }},
    vm_entry_rule{{"host_32bit_rip_high", sec_host_size, host}, [](const S& s, const E&) noexcept -> H {
      return !host_64(s) && (s.host_rip >> 32) != 0 ? entry_fail(f::host_rip, s.host_rip) : entry_pass();
    }},
    // A 64-bit host: CR4.PAE = 1 and a canonical RIP.
    vm_entry_rule{{"host_64bit_pae_clear", sec_host_size, host}, [](const S& s, const E&) noexcept -> H {
      return host_64(s) && !s.host_cr4.test(x86::cr4::pae) ? entry_fail(f::host_cr4, s.host_cr4.raw()) : entry_pass();
    }},
    vm_entry_rule{{"host_rip_not_canonical", sec_host_size, host}, [](const S& s, const E& e) noexcept -> H {
      return host_64(s) && !canonical(s.host_rip, e) ? entry_fail(f::host_rip, s.host_rip) : entry_pass();
    }},
};
}  // namespace entry_rules

}  // namespace hvkit::vmx
