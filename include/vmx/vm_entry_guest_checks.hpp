// SPDX-License-Identifier: MIT
/// @file
/// @brief The checks on the guest-state area (SDM Vol. 3C 27.3.1.1 control and debug
/// registers and MSRs, 27.3.1.2 segment registers (protected mode, unrestricted guest,
/// virtual-8086 mode), 27.3.1.3 descriptor-table registers, 27.3.1.4 RIP and RFLAGS,
/// 27.3.1.5 non-register state, 27.3.1.6 PDPTEs). Failing any of them: a VM-entry failure
/// VM exit, basic exit reason 33, with the rule's exit qualification.
#pragma once

#include <array>
#include <cstdint>

#include "interruptibility.hpp"
#include "vm_entry_controls_checks.hpp"
#include "vm_entry_rule.hpp"
#include "../paging/reserved.hpp"

namespace hvkit::vmx {

namespace entry_rules {
inline constexpr const char* sec_guest_cr = "27.3.1.1";
inline constexpr const char* sec_guest_seg = "27.3.1.2";
inline constexpr const char* sec_guest_dt = "27.3.1.3";
inline constexpr const char* sec_guest_rip = "27.3.1.4";
inline constexpr const char* sec_guest_nonreg = "27.3.1.5";
inline constexpr const char* sec_guest_pdpte = "27.3.1.6";
inline constexpr auto guest = vm_entry_phase::guest_state;
using Q = entry_failure_qualification;

/// Field encodings per guest segment (guest_segment order: ES CS SS DS FS GS LDTR TR).
inline constexpr std::uint32_t seg_selector_field[8] = {0x0800, 0x0802, 0x0804, 0x0806, 0x0808, 0x080a, 0x080c, 0x080e};
inline constexpr std::uint32_t seg_base_field[8] = {0x6806, 0x6808, 0x680a, 0x680c, 0x680e, 0x6810, 0x6812, 0x6814};
inline constexpr std::uint32_t seg_limit_field[8] = {0x4800, 0x4802, 0x4804, 0x4806, 0x4808, 0x480a, 0x480c, 0x480e};
inline constexpr std::uint32_t seg_ar_field[8] = {0x4814, 0x4816, 0x4818, 0x481a, 0x481c, 0x481e, 0x4820, 0x4822};
static_assert(seg_selector_field[7] == f::guest_tr_selector.encoding && seg_base_field[1] == f::guest_cs_base.encoding &&
              seg_limit_field[6] == f::guest_ldtr_limit.encoding && seg_ar_field[2] == f::guest_ss_access_rights.encoding);

constexpr unsigned es = 0, cs = 1, ss = 2, ds = 3, fs = 4, gs = 5, ldtr = 6, tr = 7;
/// CS, SS, DS, ES, FS, GS in the order the SDM checks them.
inline constexpr unsigned data_and_code[6] = {cs, ss, ds, es, fs, gs};
inline constexpr unsigned data_only[4] = {ds, es, fs, gs};

[[nodiscard]] constexpr bool v86(const S& s) noexcept { return s.guest_rflags.test(x86::rflags::vm); }
[[nodiscard]] constexpr bool usable(const S& s, unsigned i) noexcept { return !ar_unusable(s.seg[i].access_rights); }
[[nodiscard]] constexpr H seg_ar_hit(const S& s, unsigned i) noexcept {
  return entry_fail_raw(seg_ar_field[i], s.seg[i].access_rights);
}
[[nodiscard]] constexpr std::uint16_t rpl(std::uint16_t sel) noexcept { return sel & 3u; }
/// The snapshot's fields for the entry_state_rules of interruptibility.hpp.
[[nodiscard]] constexpr interruptibility_state interruptibility_of(const S& s) noexcept {
  return interruptibility_state{s.interruptibility};
}
[[nodiscard]] constexpr activity_state activity_of(const S& s) noexcept {
  return static_cast<activity_state>(s.activity_state);
}
[[nodiscard]] constexpr H interruptibility_hit(const S& s) noexcept {
  return entry_fail(f::guest_interruptibility_state, s.interruptibility, f::vm_entry_interruption_info,
                    s.entry_interruption_info);
}

/// The guest CR0 bits that must be 1: FIXED0, less PE and PG with unrestricted guest.
[[nodiscard]] constexpr bool guest_cr0_bad(const S& s, const E& e) noexcept {
  return !cr0_fixed_violations(s.guest_cr0, e.caps.cr0_fixed(), s.unrestricted_guest()).none();
}
/// IA32_DEBUGCTL bits reserved in the VMCS field: 5:2 and 63:16 (bit 15 and bits 14:6 are
/// defined on current processors; SDM Vol. 4 Table 2-2). Conservative: a processor may
/// reserve more.
inline constexpr std::uint64_t debugctl_reserved = 0xffff'ffff'ffff'0000ull | 0x3cull;
/// IA32_BNDCFGS reserved bits 11:2 (the base in 63:12 must be canonical).
inline constexpr std::uint64_t bndcfgs_reserved = 0xffcull;

inline constexpr std::array guest_rules{
    // ---- 27.3.1.1 control registers, debug registers, MSRs ----
    vm_entry_rule{{"guest_cr0_fixed_bits", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return guest_cr0_bad(s, e) ? entry_fail(f::guest_cr0, s.guest_cr0.raw()) : entry_pass();
    }},
    vm_entry_rule{{"guest_cr0_pg_without_pe", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.guest_cr0.test(x86::cr0::pg) && !s.guest_cr0.test(x86::cr0::pe) ? entry_fail(f::guest_cr0, s.guest_cr0.raw())
                                                                               : entry_pass();
    }},
    vm_entry_rule{{"guest_cr4_fixed_bits", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return cr4_fixed_violations(s.guest_cr4, e.caps.cr4_fixed()).none() ? entry_pass()
                                                                          : entry_fail(f::guest_cr4, s.guest_cr4.raw());
    }},
    vm_entry_rule{{"guest_cr4_cet_without_wp", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.guest_cr4.test(x86::cr4::cet) && !s.guest_cr0.test(x86::cr0::wp)
                 ? entry_fail(f::guest_cr4, s.guest_cr4.raw(), f::guest_cr0, s.guest_cr0.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_debugctl_reserved", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_debug_controls) && (s.guest_debugctl & debugctl_reserved) != 0
                 ? entry_fail(f::guest_ia32_debugctl, s.guest_debugctl)
                 : entry_pass();
    }},
    // An IA-32e mode guest has CR0.PG = 1 and CR4.PAE = 1.
    vm_entry_rule{{"ia32e_guest_without_paging", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.ia32e_guest() && !s.guest_cr0.test(x86::cr0::pg) ? entry_fail(f::guest_cr0, s.guest_cr0.raw()) : entry_pass();
    }},
    vm_entry_rule{{"ia32e_guest_without_pae", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.ia32e_guest() && !s.guest_cr4.test(x86::cr4::pae) ? entry_fail(f::guest_cr4, s.guest_cr4.raw()) : entry_pass();
    }},
    vm_entry_rule{{"guest_pcide_outside_ia32e", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return !s.ia32e_guest() && s.guest_cr4.test(x86::cr4::pcide) ? entry_fail(f::guest_cr4, s.guest_cr4.raw()) : entry_pass();
    }},
    vm_entry_rule{{"guest_cr3_beyond_maxphyaddr", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return beyond_maxphyaddr(s.guest_cr3, e) ? entry_fail(f::guest_cr3, s.guest_cr3) : entry_pass();
    }},
    vm_entry_rule{{"guest_dr7_high", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_debug_controls) && (s.guest_dr7 >> 32) != 0 ? entry_fail(f::guest_dr7, s.guest_dr7)
                                                                                           : entry_pass();
    }},
    vm_entry_rule{{"guest_sysenter_esp_not_canonical", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return canonical(s.guest_sysenter_esp, e) ? entry_pass() : entry_fail(f::guest_ia32_sysenter_esp, s.guest_sysenter_esp);
    }},
    vm_entry_rule{{"guest_sysenter_eip_not_canonical", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return canonical(s.guest_sysenter_eip, e) ? entry_pass() : entry_fail(f::guest_ia32_sysenter_eip, s.guest_sysenter_eip);
    }},
    vm_entry_rule{{"guest_pat_invalid", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_ia32_pat) && !valid_pat(s.guest_pat) ? entry_fail(f::guest_ia32_pat, s.guest_pat)
                                                                                    : entry_pass();
    }},
    vm_entry_rule{{"guest_efer_reserved", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_ia32_efer) && (s.guest_efer.raw() & ~efer_defined_intel) != 0
                 ? entry_fail(f::guest_ia32_efer, s.guest_efer.raw())
                 : entry_pass();
    }},
    // EFER.LMA equals "IA-32e mode guest"; with CR0.PG = 1 so does EFER.LME.
    vm_entry_rule{{"guest_efer_lma_mismatch", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_ia32_efer) && s.guest_efer.test(x86::efer::lma) != s.ia32e_guest()
                 ? entry_fail(f::guest_ia32_efer, s.guest_efer.raw(), f::vm_entry_controls, s.entry.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_efer_lme_mismatch", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_ia32_efer) && s.guest_cr0.test(x86::cr0::pg) &&
                     s.guest_efer.test(x86::efer::lme) != s.ia32e_guest()
                 ? entry_fail(f::guest_ia32_efer, s.guest_efer.raw(), f::vm_entry_controls, s.entry.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_bndcfgs_invalid", sec_guest_cr, guest}, [](const S& s, const E& e) noexcept -> H {
      return s.entry.test(entry_controls::load_ia32_bndcfgs) &&
                     ((s.guest_bndcfgs & bndcfgs_reserved) != 0 || !canonical(s.guest_bndcfgs & ~0xfffull, e))
                 ? entry_fail(f::guest_ia32_bndcfgs, s.guest_bndcfgs)
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_pkrs_reserved", sec_guest_cr, guest}, [](const S& s, const E&) noexcept -> H {
      return s.entry.test(entry_controls::load_pkrs) && (s.guest_pkrs >> 32) != 0 ? entry_fail(f::guest_ia32_pkrs, s.guest_pkrs)
                                                                                  : entry_pass();
    }},

    // ---- 27.3.1.2 segment registers: selectors ----
    vm_entry_rule{{"guest_tr_selector_ti", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return s.seg[tr].selector & 4u ? entry_fail(f::guest_tr_selector, s.seg[tr].selector) : entry_pass();
    }},
    vm_entry_rule{{"guest_ldtr_selector_ti", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return usable(s, ldtr) && (s.seg[ldtr].selector & 4u) ? entry_fail(f::guest_ldtr_selector, s.seg[ldtr].selector)
                                                            : entry_pass();
    }},
    vm_entry_rule{{"guest_ss_rpl_not_cs_rpl", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return !v86(s) && !s.unrestricted_guest() && rpl(s.seg[ss].selector) != rpl(s.seg[cs].selector)
                 ? entry_fail(f::guest_ss_selector, s.seg[ss].selector, f::guest_cs_selector, s.seg[cs].selector)
                 : entry_pass();
    }},
    // ---- bases ----
    vm_entry_rule{{"guest_v86_base", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (!v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if (s.seg[i].base != std::uint64_t{s.seg[i].selector} << 4)
          return entry_fail_raw(seg_base_field[i], s.seg[i].base, seg_selector_field[i], s.seg[i].selector);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_base_not_canonical", sec_guest_seg, guest}, [](const S& s, const E& e) noexcept -> H {
      for (unsigned i : {tr, fs, gs})
        if (!canonical(s.seg[i].base, e)) return entry_fail_raw(seg_base_field[i], s.seg[i].base);
      if (usable(s, ldtr) && !canonical(s.seg[ldtr].base, e)) return entry_fail_raw(seg_base_field[ldtr], s.seg[ldtr].base);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_cs_base_high", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return (s.seg[cs].base >> 32) != 0 ? entry_fail(f::guest_cs_base, s.seg[cs].base) : entry_pass();
    }},
    vm_entry_rule{{"guest_ss_ds_es_base_high", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      for (unsigned i : {ss, ds, es})
        if (usable(s, i) && (s.seg[i].base >> 32) != 0) return entry_fail_raw(seg_base_field[i], s.seg[i].base);
      return entry_pass();
    }},
    // ---- limits and access rights in virtual-8086 mode ----
    vm_entry_rule{{"guest_v86_limit", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (!v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if (s.seg[i].limit != 0xffffu) return entry_fail_raw(seg_limit_field[i], s.seg[i].limit);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_v86_access_rights", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (!v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if (s.seg[i].access_rights != 0xf3u) return seg_ar_hit(s, i);
      return entry_pass();
    }},
    // ---- access rights outside virtual-8086 mode: CS, SS, DS, ES, FS, GS ----
    vm_entry_rule{{"guest_cs_type", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      const unsigned t = ar_type(s.seg[cs].access_rights);
      const bool ok = t == 9 || t == 11 || t == 13 || t == 15 || (t == 3 && s.unrestricted_guest());
      return ok ? entry_pass() : seg_ar_hit(s, cs);
    }},
    vm_entry_rule{{"guest_ss_type", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s) || !usable(s, ss)) return entry_pass();
      const unsigned t = ar_type(s.seg[ss].access_rights);
      return t == 3 || t == 7 ? entry_pass() : seg_ar_hit(s, ss);
    }},
    vm_entry_rule{{"guest_data_segment_not_accessed", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_only)
        if (usable(s, i) && (ar_type(s.seg[i].access_rights) & 1u) == 0) return seg_ar_hit(s, i);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_data_segment_code_not_readable", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_only) {
        const unsigned t = ar_type(s.seg[i].access_rights);
        if (usable(s, i) && (t & 8u) && !(t & 2u)) return seg_ar_hit(s, i);
      }
      return entry_pass();
    }},
    vm_entry_rule{{"guest_segment_s_clear", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if ((i == cs || usable(s, i)) && !ar_s(s.seg[i].access_rights)) return seg_ar_hit(s, i);
      return entry_pass();
    }},
    // CS.DPL: 0 for type 3 (unrestricted guest), = SS.DPL for non-conforming code, <= SS.DPL
    // for conforming code.
    vm_entry_rule{{"guest_cs_dpl", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      const auto ar = s.seg[cs].access_rights;
      const unsigned t = ar_type(ar), d = ar_dpl(ar), sd = ar_dpl(s.seg[ss].access_rights);
      const bool bad = (t == 3 && d != 0) || ((t == 9 || t == 11) && d != sd) || ((t == 13 || t == 15) && d > sd);
      return bad ? entry_fail(f::guest_cs_access_rights, ar, f::guest_ss_access_rights, s.seg[ss].access_rights) : entry_pass();
    }},
    // SS.DPL: = SS.RPL without unrestricted guest; 0 if CS type is 3 or CR0.PE = 0.
    vm_entry_rule{{"guest_ss_dpl", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      const unsigned d = ar_dpl(s.seg[ss].access_rights);
      const bool bad = (!s.unrestricted_guest() && d != rpl(s.seg[ss].selector)) ||
                       ((ar_type(s.seg[cs].access_rights) == 3 || !s.guest_cr0.test(x86::cr0::pe)) && d != 0);
      return bad ? entry_fail(f::guest_ss_access_rights, s.seg[ss].access_rights, f::guest_ss_selector, s.seg[ss].selector)
                 : entry_pass();
    }},
    // DS, ES, FS, GS (usable, data or non-conforming code, no unrestricted guest): DPL >= RPL.
    vm_entry_rule{{"guest_data_segment_dpl", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s) || s.unrestricted_guest()) return entry_pass();
      for (unsigned i : data_only) {
        const auto ar = s.seg[i].access_rights;
        if (usable(s, i) && ar_type(ar) <= 11 && ar_dpl(ar) < rpl(s.seg[i].selector))
          return entry_fail_raw(seg_ar_field[i], ar, seg_selector_field[i], s.seg[i].selector);
      }
      return entry_pass();
    }},
    vm_entry_rule{{"guest_segment_not_present", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if ((i == cs || usable(s, i)) && !ar_p(s.seg[i].access_rights)) return seg_ar_hit(s, i);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_segment_ar_reserved", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if ((i == cs || usable(s, i)) && ar_reserved(s.seg[i].access_rights)) return seg_ar_hit(s, i);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_cs_l_and_db", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      const auto ar = s.seg[cs].access_rights;
      return !v86(s) && s.ia32e_guest() && ar_l(ar) && ar_db(ar) ? seg_ar_hit(s, cs) : entry_pass();
    }},
    vm_entry_rule{{"guest_segment_granularity", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (v86(s)) return entry_pass();
      for (unsigned i : data_and_code)
        if ((i == cs || usable(s, i)) && bad_granularity(s.seg[i].limit, s.seg[i].access_rights))
          return entry_fail_raw(seg_ar_field[i], s.seg[i].access_rights, seg_limit_field[i], s.seg[i].limit);
      return entry_pass();
    }},
    // ---- TR ----
    vm_entry_rule{{"guest_tr_type", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      const unsigned t = ar_type(s.seg[tr].access_rights);
      const bool ok = t == 11 || (t == 3 && !s.ia32e_guest());
      return ok ? entry_pass() : seg_ar_hit(s, tr);
    }},
    vm_entry_rule{{"guest_tr_ar_invalid", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      const auto ar = s.seg[tr].access_rights;
      const bool bad = ar_s(ar) || !ar_p(ar) || ar_reserved(ar) || bad_granularity(s.seg[tr].limit, ar);
      return bad ? entry_fail(f::guest_tr_access_rights, ar, f::guest_tr_limit, s.seg[tr].limit) : entry_pass();
    }},
    vm_entry_rule{{"guest_tr_unusable", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return usable(s, tr) ? entry_pass() : seg_ar_hit(s, tr);
    }},
    // ---- LDTR (if usable) ----
    vm_entry_rule{{"guest_ldtr_type", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      return usable(s, ldtr) && ar_type(s.seg[ldtr].access_rights) != 2 ? seg_ar_hit(s, ldtr) : entry_pass();
    }},
    vm_entry_rule{{"guest_ldtr_ar_invalid", sec_guest_seg, guest}, [](const S& s, const E&) noexcept -> H {
      if (!usable(s, ldtr)) return entry_pass();
      const auto ar = s.seg[ldtr].access_rights;
      const bool bad = ar_s(ar) || !ar_p(ar) || ar_reserved(ar) || bad_granularity(s.seg[ldtr].limit, ar);
      return bad ? entry_fail(f::guest_ldtr_access_rights, ar, f::guest_ldtr_limit, s.seg[ldtr].limit) : entry_pass();
    }},

    // ---- 27.3.1.3 descriptor-table registers ----
    vm_entry_rule{{"guest_gdtr_idtr_base_not_canonical", sec_guest_dt, guest}, [](const S& s, const E& e) noexcept -> H {
      if (!canonical(s.gdtr_base, e)) return entry_fail(f::guest_gdtr_base, s.gdtr_base);
      if (!canonical(s.idtr_base, e)) return entry_fail(f::guest_idtr_base, s.idtr_base);
      return entry_pass();
    }},
    vm_entry_rule{{"guest_gdtr_idtr_limit_high", sec_guest_dt, guest}, [](const S& s, const E&) noexcept -> H {
      if (s.gdtr_limit >> 16) return entry_fail(f::guest_gdtr_limit, s.gdtr_limit);
      if (s.idtr_limit >> 16) return entry_fail(f::guest_idtr_limit, s.idtr_limit);
      return entry_pass();
    }},

    // ---- 27.3.1.4 RIP and RFLAGS ----
    vm_entry_rule{{"guest_rip_high", sec_guest_rip, guest}, [](const S& s, const E&) noexcept -> H {
      const bool long64 = s.ia32e_guest() && ar_l(s.seg[cs].access_rights);
      return !long64 && (s.guest_rip >> 32) != 0 ? entry_fail(f::guest_rip, s.guest_rip) : entry_pass();
    }},
    vm_entry_rule{{"guest_rip_not_canonical", sec_guest_rip, guest}, [](const S& s, const E& e) noexcept -> H {
      const bool long64 = s.ia32e_guest() && ar_l(s.seg[cs].access_rights);
      return long64 && !canonical(s.guest_rip, e) ? entry_fail(f::guest_rip, s.guest_rip) : entry_pass();
    }},
    // Bits 63:22, 15, 5, 3 are 0 and bit 1 is 1.
    vm_entry_rule{{"guest_rflags_reserved", sec_guest_rip, guest}, [](const S& s, const E&) noexcept -> H {
      const std::uint64_t r = s.guest_rflags.raw();
      return (r & 0xffff'ffff'ffc0'8028ull) != 0 || (r & 2u) == 0 ? entry_fail(f::guest_rflags, r) : entry_pass();
    }},
    vm_entry_rule{{"guest_rflags_vm_invalid", sec_guest_rip, guest}, [](const S& s, const E&) noexcept -> H {
      return v86(s) && (s.ia32e_guest() || !s.guest_cr0.test(x86::cr0::pe))
                 ? entry_fail(f::guest_rflags, s.guest_rflags.raw(), f::guest_cr0, s.guest_cr0.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_rflags_if_clear_for_external_interrupt", sec_guest_rip, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::interrupt_with_if_clear(injection_of(s), s.guest_rflags)
                 ? entry_fail(f::guest_rflags, s.guest_rflags.raw(), f::vm_entry_interruption_info, s.entry_interruption_info)
                 : entry_pass();
    }},

    // ---- 27.3.1.5 non-register state ----
    // Activity state: 0-3 and supported (IA32_VMX_MISC bits 8:6 for HLT, shutdown, wait-for-SIPI).
    vm_entry_rule{{"guest_activity_state_unsupported", sec_guest_nonreg, guest}, [](const S& s, const E& e) noexcept -> H {
      const auto a = s.activity_state;
      const bool bad = entry_state_rules::reserved_activity_state(activity_of(s)) ||
                       (a != 0 && ((e.caps.misc >> (5 + a)) & 1u) == 0);
      return bad ? entry_fail(f::guest_activity_state, a) : entry_pass();
    }},
    vm_entry_rule{{"guest_hlt_with_ss_dpl_nonzero", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return s.activity_state == activity_hlt && ar_dpl(s.seg[ss].access_rights) != 0
                 ? entry_fail(f::guest_activity_state, s.activity_state, f::guest_ss_access_rights, s.seg[ss].access_rights)
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_inactive_with_sti_or_mov_ss_blocking", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::shadow_while_inactive(activity_of(s), interruptibility_of(s))
                 ? entry_fail(f::guest_activity_state, s.activity_state, f::guest_interruptibility_state, s.interruptibility)
                 : entry_pass();
    }},
    // An injected event must be one the activity state does not block: HLT accepts external
    // interrupts, NMIs, #DB, #MC and the pending MTF (other event 0); shutdown accepts NMIs
    // and #MC; wait-for-SIPI accepts nothing (entry_state_rules::event_blocked_by_activity).
    vm_entry_rule{{"guest_activity_blocks_injected_event", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::event_blocked_by_activity(injection_of(s), activity_of(s))
                 ? entry_fail(f::guest_activity_state, s.activity_state, f::vm_entry_interruption_info,
                              s.entry_interruption_info)
                 : entry_pass();
    }},
    // Interruptibility state (entry_state_rules of interruptibility.hpp, which
    // check_entry_state runs too): bits 31:5 reserved (4 too without SGX); STI and MOV-SS
    // blocking not both; STI blocking needs RFLAGS.IF = 1; neither with an injected external
    // interrupt; no MOV-SS blocking with an injected NMI; no STI blocking with an injected
    // NMI on processors that require it; no SMI blocking outside SMM; no NMI blocking with an
    // injected NMI under virtual NMIs; enclave interruption without MOV-SS blocking.
    vm_entry_rule{{"guest_interruptibility_reserved", sec_guest_nonreg, guest}, [](const S& s, const E& e) noexcept -> H {
      return entry_state_rules::reserved_interruptibility(interruptibility_of(s), e.sgx)
                 ? entry_fail(f::guest_interruptibility_state, s.interruptibility)
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_sti_and_mov_ss_blocking", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::sti_and_mov_ss(interruptibility_of(s)) ? entry_fail(f::guest_interruptibility_state, s.interruptibility)
                                                                       : entry_pass();
    }},
    vm_entry_rule{{"guest_sti_blocking_with_if_clear", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::sti_with_if_clear(interruptibility_of(s), s.guest_rflags)
                 ? entry_fail(f::guest_interruptibility_state, s.interruptibility, f::guest_rflags, s.guest_rflags.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_blocking_with_external_interrupt_injection", sec_guest_nonreg, guest},
                  [](const S& s, const E&) noexcept -> H {
                    return entry_state_rules::interrupt_under_shadow(injection_of(s), interruptibility_of(s))
                               ? interruptibility_hit(s)
                               : entry_pass();
                  }},
    vm_entry_rule{{"guest_mov_ss_blocking_with_nmi_injection", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      return entry_state_rules::nmi_under_mov_ss(injection_of(s), interruptibility_of(s)) ? interruptibility_hit(s)
                                                                                          : entry_pass();
    }},
    // NMI injection with blocking by STI, on a processor that refuses it
    // (vm_entry_env::nmi_refused_under_sti): exit qualification 3 (SDM 28.2.1).
    vm_entry_rule{{"guest_sti_blocking_with_nmi_injection", sec_guest_nonreg, guest, Q::nmi_injection_blocked_by_sti},
                  [](const S& s, const E& e) noexcept -> H {
                    return entry_state_rules::nmi_under_sti(injection_of(s), interruptibility_of(s), e.nmi_refused_under_sti)
                               ? interruptibility_hit(s)
                               : entry_pass();
                  }},
    vm_entry_rule{{"guest_smi_blocking_outside_smm", sec_guest_nonreg, guest}, [](const S& s, const E& e) noexcept -> H {
      return entry_state_rules::smi_blocking_outside_smm(interruptibility_of(s), e.in_smm)
                 ? entry_fail(f::guest_interruptibility_state, s.interruptibility)
                 : entry_pass();
    }},
    vm_entry_rule{{"guest_nmi_blocking_with_virtual_nmi_injection", sec_guest_nonreg, guest},
                  [](const S& s, const E&) noexcept -> H {
                    return entry_state_rules::nmi_under_virtual_nmi_blocking(injection_of(s), interruptibility_of(s),
                                                                             s.pin.test(pin_based::virtual_nmis))
                               ? interruptibility_hit(s)
                               : entry_pass();
                  }},
    vm_entry_rule{{"guest_enclave_interruption_with_mov_ss_blocking", sec_guest_nonreg, guest},
                  [](const S& s, const E&) noexcept -> H {
                    return entry_state_rules::enclave_with_mov_ss(interruptibility_of(s))
                               ? entry_fail(f::guest_interruptibility_state, s.interruptibility)
                               : entry_pass();
                  }},
    // Pending debug exceptions: bits 11:4, 13, 15 and 63:17 reserved (16 too without RTM) ...
    vm_entry_rule{{"guest_pending_debug_reserved", sec_guest_nonreg, guest}, [](const S& s, const E& e) noexcept -> H {
      const std::uint64_t reserved = 0xffff'ffff'fffe'aff0ull | (e.rtm ? 0u : 0x1'0000u);  // bit 16 only with RTM
      return (s.pending_debug_exceptions & reserved) != 0
                 ? entry_fail(f::guest_pending_debug_exceptions, s.pending_debug_exceptions)
                 : entry_pass();
    }},
    // ... and with STI/MOV-SS blocking or HLT, BS (bit 14) is set exactly when RFLAGS.TF = 1
    // and IA32_DEBUGCTL.BTF = 0.
    vm_entry_rule{{"guest_pending_debug_bs_mismatch", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      if (!(interruptibility_of(s).any(interruptibility_state::shadow) || s.activity_state == activity_hlt)) return entry_pass();
      const bool bs = (s.pending_debug_exceptions >> 14) & 1u;
      const bool want = s.guest_rflags.test(x86::rflags::tf) && !(s.guest_debugctl & 2u);
      return bs != want ? entry_fail(f::guest_pending_debug_exceptions, s.pending_debug_exceptions, f::guest_rflags,
                                     s.guest_rflags.raw())
                        : entry_pass();
    }},
    // RTM (bit 16), SDM 27.3.1.5: "The following checks are performed if bit 16 (RTM) is 1:
    // Bits 11:0, bits 15:13, and bits 63:17 ... must be 0; bit 12 must be 1. ... The
    // interruptibility-state field must not indicate blocking by MOV SS (bit 1 in that field
    // must be 0)." Blocking by STI is allowed (bits 15:13 and 63:17 are the reserved rule's).
    vm_entry_rule{{"guest_pending_debug_rtm_invalid", sec_guest_nonreg, guest}, [](const S& s, const E&) noexcept -> H {
      const auto p = s.pending_debug_exceptions;
      if (!((p >> 16) & 1u)) return entry_pass();
      const bool bad = (p & 0x4fffu) != 0 || ((p >> 12) & 1u) == 0 || interruptibility_of(s).test(interruptibility_state::blocking_by_mov_ss);
      return bad ? entry_fail(f::guest_pending_debug_exceptions, p) : entry_pass();
    }},
    // The VMCS link pointer (exit qualification 4): all ones, or 4-KByte aligned within
    // MAXPHYADDR with the VMCS revision identifier in bits 30:0 of the memory it points to
    // and bit 31 equal to "VMCS shadowing".
    vm_entry_rule{{"vmcs_link_pointer_address", sec_guest_nonreg, guest, Q::vmcs_link_pointer},
                  [](const S& s, const E& e) noexcept -> H {
                    return s.vmcs_link_pointer != ~std::uint64_t{0} && bad_page_address(s.vmcs_link_pointer, e)
                               ? entry_fail(f::vmcs_link_pointer, s.vmcs_link_pointer)
                               : entry_pass();
                  }},
    vm_entry_rule{{"vmcs_link_pointer_revision", sec_guest_nonreg, guest, Q::vmcs_link_pointer},
                  [](const S& s, const E& e) noexcept -> H {
                    if (s.vmcs_link_pointer == ~std::uint64_t{0} || !s.link_revision_known ||
                        bad_page_address(s.vmcs_link_pointer, e))
                      return entry_pass();
                    const std::uint32_t want = e.caps.revision_id() |
                                               (s.secondary().test(p2::vmcs_shadowing) ? 0x8000'0000u : 0u);
                    return s.link_revision != want ? entry_fail(f::vmcs_link_pointer, s.vmcs_link_pointer) : entry_pass();
                  }},

    // ---- 27.3.1.6 PDPTEs (PAE paging; exit qualification 2) ----
    // A present PDPTE has no reserved bit set (2:1, 8:5, 63:MAXPHYADDR; paging::
    // pae_pdpte_reserved, the rule MOV to CR3 applies).
    vm_entry_rule{{"guest_pdpte_reserved", sec_guest_pdpte, guest, Q::pdpte_load}, [](const S& s, const E& e) noexcept -> H {
      if (!s.guest_pae_paging() || !s.pdptes_known || !x86::is_valid_maxphyaddr(e.maxphyaddr)) return entry_pass();
      const std::uint64_t rsvd = paging::pae_pdpte_reserved(e.maxphyaddr);
      for (unsigned i = 0; i < 4; ++i)
        if ((s.pdpte[i] & 1u) && (s.pdpte[i] & rsvd))
          return entry_fail_raw(f::guest_pdpte0.encoding + 2 * i, s.pdpte[i], f::guest_cr3.encoding, s.guest_cr3);
      return entry_pass();
    }},
};
}  // namespace entry_rules

}  // namespace hvkit::vmx
