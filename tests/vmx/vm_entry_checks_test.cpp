// SPDX-License-Identifier: MIT
// VM-entry checks (vmx/vm_entry_checks.hpp): a golden VMCS that passes, and for every rule
// the same VMCS with exactly that rule violated. The expected outcome of each case (error
// number, exit reason, exit qualification) is typed here from the SDM (Vol. 3C 27.2: error
// 7 for control fields, 8 for host state; 27.3/28.2.1: exit reason 33 with qualification 0,
// 2 PDPTEs, 3 NMI with STI blocking, 4 VMCS link pointer; 27.4: exit reason 34 with the
// entry's 1-based index), not taken from the rule table. The case list is checked against
// the rule table: a rule without a case fails the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <random>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/interruptibility.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/vmx/vm_entry_checks.hpp>

namespace vmx = hvkit::vmx;
namespace f = hvkit::vmx::fields;

namespace {

// The capability MSRs of Bochs' corei7_skylake_x model (as in controls_test.cpp).
vmx::vmx_capabilities skylake_caps() {
  vmx::vmx_capabilities c;
  c.basic = 0x00d810000000002b;
  c.pinbased = 0x0000007f00000016;
  c.true_pinbased = 0x0000007f00000016;
  c.procbased = 0xf7f9fffe0401e172;
  c.true_procbased = 0xf7f9fffe04006172;
  c.exit = 0x007fffff00036dff;
  c.true_exit = 0x007fffff00036dfb;
  c.entry = 0x0000ffff000011ff;
  c.true_entry = 0x0000ffff000011fb;
  c.misc = 0x00000000600401e0;
  c.cr0_fixed0 = 0x80000021;
  c.cr0_fixed1 = 0xffffffff;
  c.cr4_fixed0 = 0x2000;
  c.cr4_fixed1 = 0x003727ff;
  c.procbased2 = 0x02177fff00000000;
  c.ept_vpid_cap = 0x00000f0106334141;
  c.vmfunc = 1;
  return c;
}

/// A memory view for the checks that read memory: 64 KiB at physical address 0.
struct test_memory {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x10000, 0);
  void put32(std::uint64_t a, std::uint32_t v) { std::memcpy(&bytes[a], &v, 4); }
  void put64(std::uint64_t a, std::uint64_t v) { std::memcpy(&bytes[a], &v, 8); }
  hvkit::paging::flat_memory view() { return {bytes.data(), bytes.size()}; }
};

struct fixture {
  vmx::soft_vmcs vmcs;
  vmx::vm_entry_env env;
  test_memory mem;
  template <std::uint32_t E>
  void set(vmx::field<E> fl, std::uint64_t v) {
    vmcs.store(E, v);
    (void)fl;
  }
  template <std::uint32_t E>
  std::uint64_t get(vmx::field<E> fl) {
    return static_cast<std::uint64_t>(vmcs.peek(fl));
  }
  template <std::uint32_t E>
  void or_(vmx::field<E> fl, std::uint64_t v) { set(fl, get(fl) | v); }
  template <std::uint32_t E>
  void clear(vmx::field<E> fl, std::uint64_t v) { set(fl, get(fl) & ~v); }
  /// Lets the CPU set `bits` in a control (allowed-1 half of the capability MSRs).
  static void allow(std::uint64_t& msr, std::uint64_t bits) { msr |= bits << 32; }
};

// Control bits (SDM 25.6-25.8), spelled as numbers so the test does not lean on controls.hpp.
constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }

// A 64-bit guest and host as the reference hypervisor sets them up (SDM 25.4, 25.5).
void golden(fixture& x) {
  x.env.caps = skylake_caps();
  x.env.maxphyaddr = 39;
  auto& v = x;
  v.set(f::pin_based_controls, 0x16);
  v.set(f::primary_processor_based_controls, 0x04006172 | bit(7) | bit(31));  // HLT exiting, secondary
  v.set(f::secondary_processor_based_controls, bit(1));                     // enable EPT
  v.set(f::primary_vm_exit_controls, 0x36dfb | bit(9) | bit(20) | bit(21));
  v.set(f::vm_entry_controls, 0x11fb | bit(2) | bit(9) | bit(15));  // load debug controls, IA-32e guest, load EFER
  v.set(f::ept_pointer, 0x100000 | (3 << 3) | 6);                    // WB, 4 levels
  v.set(f::host_cr0, 0x80000033);
  v.set(f::host_cr3, 0x200000);
  v.set(f::host_cr4, 0x2020);
  v.set(f::host_cs_selector, 0x08);
  for (auto enc : {f::host_ss_selector.encoding, f::host_ds_selector.encoding, f::host_es_selector.encoding,
                   f::host_fs_selector.encoding, f::host_gs_selector.encoding})
    v.vmcs.store(enc, 0x10);
  v.set(f::host_tr_selector, 0x18);
  v.set(f::host_tr_base, 0x101000);
  v.set(f::host_gdtr_base, 0x102000);
  v.set(f::host_idtr_base, 0x103000);
  v.set(f::host_ia32_efer, 0xd01);
  v.set(f::host_rip, 0x104000);
  v.set(f::host_rsp, 0x105000);
  v.set(f::guest_cr0, 0x80010031);
  v.set(f::guest_cr3, 0x1f00000);
  v.set(f::guest_cr4, 0x2020);
  v.set(f::guest_dr7, 0x400);
  v.set(f::guest_cs_selector, 0x08);
  v.set(f::guest_cs_limit, 0xffffffff);
  v.set(f::guest_cs_access_rights, 0xa09b);
  const std::uint32_t data[][3] = {{0x0800, 0x4800, 0x4814}, {0x0804, 0x4804, 0x4818}, {0x0806, 0x4806, 0x481a},
                                   {0x0808, 0x4808, 0x481c}, {0x080a, 0x480a, 0x481e}};
  for (const auto& d : data) {
    v.vmcs.store(d[0], 0x10);
    v.vmcs.store(d[1], 0xffffffff);
    v.vmcs.store(d[2], 0xc093);
  }
  v.set(f::guest_ldtr_access_rights, bit(16));
  v.set(f::guest_tr_selector, 0x18);
  v.set(f::guest_tr_base, 0x1234000);
  v.set(f::guest_tr_limit, 0x67);
  v.set(f::guest_tr_access_rights, 0x8b);
  v.set(f::guest_gdtr_base, 0x1235000);
  v.set(f::guest_gdtr_limit, 0x2f);
  v.set(f::guest_idtr_base, 0x1236000);
  v.set(f::guest_idtr_limit, 0xfff);
  v.set(f::guest_rip, 0x1001000);
  v.set(f::guest_rsp, 0x1100000);
  v.set(f::guest_rflags, 0x2);
  v.set(f::guest_ia32_efer, 0xd00);
  v.set(f::vmcs_link_pointer, ~0ull);
}

// A 32-bit protected-mode guest with PAE paging (IA-32e mode guest = 0).
void guest32(fixture& x) {
  x.clear(f::vm_entry_controls, bit(9));
  x.set(f::guest_ia32_efer, 0);
  x.set(f::guest_cs_access_rights, 0xc09b);
}
// A virtual-8086 guest (RFLAGS.VM = 1; SDM 27.3.1.2: base = selector << 4, limit FFFFH, AR F3H).
void v86(fixture& x) {
  guest32(x);
  x.or_(f::guest_rflags, bit(17));
  const std::uint32_t segs[][4] = {{0x0800, 0x6806, 0x4800, 0x4814}, {0x0802, 0x6808, 0x4802, 0x4816},
                                   {0x0804, 0x680a, 0x4804, 0x4818}, {0x0806, 0x680c, 0x4806, 0x481a},
                                   {0x0808, 0x680e, 0x4808, 0x481c}, {0x080a, 0x6810, 0x480a, 0x481e}};
  std::uint16_t sel = 0x1000;
  for (const auto& s : segs) {
    x.vmcs.store(s[0], sel);
    x.vmcs.store(s[1], std::uint64_t{sel} << 4);
    x.vmcs.store(s[2], 0xffff);
    x.vmcs.store(s[3], 0xf3);
    sel += 0x100;
  }
}
// A 32-bit host (host address-space size = 0) called from outside IA-32e mode.
void host32(fixture& x) {
  guest32(x);
  x.env.in_ia32e_mode = false;
  x.clear(f::primary_vm_exit_controls, bit(9));
  x.set(f::host_ia32_efer, 0);
}
void tpr_shadow(fixture& x) {
  x.or_(f::primary_processor_based_controls, bit(21));
  x.set(f::virtual_apic_page_address, 0x4000);
}
void posted_interrupts(fixture& x) {
  fixture::allow(x.env.caps.true_pinbased, bit(7));
  tpr_shadow(x);
  x.or_(f::pin_based_controls, bit(0) | bit(7));
  x.or_(f::secondary_processor_based_controls, bit(9));
  x.or_(f::primary_vm_exit_controls, bit(15));
  x.set(f::posted_interrupt_notification_vector, 0xf0);
  x.set(f::posted_interrupt_descriptor_address, 0x6000);
}
void unrestricted(fixture& x) { x.or_(f::secondary_processor_based_controls, bit(7)); }
void inject(fixture& x, unsigned type, unsigned vector, bool error_code = false) {
  x.set(f::vm_entry_interruption_info, bit(31) | (type << 8) | vector | (error_code ? bit(11) : 0));
}
void msr_area(fixture& x, std::initializer_list<std::array<std::uint64_t, 2>> entries) {
  x.set(f::vm_entry_msr_load_count, entries.size());
  x.set(f::vm_entry_msr_load_address, 0x2000);
  std::uint64_t a = 0x2000;
  for (const auto& e : entries) {
    x.mem.put64(a, e[0]);
    x.mem.put64(a + 8, e[1]);
    a += 16;
  }
}

enum class expect_kind { fail7, fail8, exit33, exit34 };
struct expected {
  expect_kind kind;
  std::uint64_t qualification = 0;
};
constexpr expected fail7{expect_kind::fail7}, fail8{expect_kind::fail8};
constexpr expected exit33(std::uint64_t q = 0) { return {expect_kind::exit33, q}; }
constexpr expected exit34(std::uint64_t q) { return {expect_kind::exit34, q}; }

struct rule_case {
  const char* rule;
  expected want;
  std::function<void(fixture&)> violate;
};

bool canon_fault(std::uint32_t index, std::uint64_t v) {
  // WRMSR to IA32_SYSENTER_ESP/EIP with a non-canonical value is #GP (SDM Vol. 4).
  return (index == 0x175 || index == 0x176) && static_cast<std::uint64_t>(static_cast<std::int64_t>(v << 16) >> 16) != v;
}

const std::vector<rule_case>& cases() {
  static const std::vector<rule_case> c = {
      // ---- 27.2.1.1 ----
      {"pin_based_controls_reserved", fail7, [](fixture& x) { x.clear(f::pin_based_controls, bit(1)); }},
      {"primary_controls_reserved", fail7, [](fixture& x) { x.clear(f::primary_processor_based_controls, bit(1)); }},
      {"secondary_controls_reserved", fail7, [](fixture& x) { x.or_(f::secondary_processor_based_controls, bit(22)); }},
      {"tertiary_controls_reserved", fail7,
       [](fixture& x) {
         fixture::allow(x.env.caps.true_procbased, bit(17));
         fixture::allow(x.env.caps.procbased, bit(17));
         x.env.caps.procbased3 = 0x10;
         x.or_(f::primary_processor_based_controls, bit(17));
         x.set(f::tertiary_processor_based_controls, 0x20);
       }},
      {"cr3_target_count_too_large", fail7, [](fixture& x) { x.set(f::cr3_target_count, 5); }},
      {"io_bitmap_a_address", fail7,
       [](fixture& x) {
         x.or_(f::primary_processor_based_controls, bit(25));
         x.set(f::io_bitmap_a, 0x1001);
         x.set(f::io_bitmap_b, 0x3000);
       }},
      {"io_bitmap_b_address", fail7,
       [](fixture& x) {
         x.or_(f::primary_processor_based_controls, bit(25));
         x.set(f::io_bitmap_a, 0x1000);
         x.set(f::io_bitmap_b, bit(39));  // beyond MAXPHYADDR 39
       }},
      {"msr_bitmap_address", fail7,
       [](fixture& x) {
         x.or_(f::primary_processor_based_controls, bit(28));
         x.set(f::msr_bitmap, 0x800);
       }},
      {"virtual_apic_address", fail7,
       [](fixture& x) {
         tpr_shadow(x);
         x.set(f::virtual_apic_page_address, 0x4010);
       }},
      {"tpr_threshold_reserved", fail7,
       [](fixture& x) {
         tpr_shadow(x);
         x.set(f::tpr_threshold, 0x10);
       }},
      {"tpr_threshold_above_vtpr", fail7,
       [](fixture& x) {
         tpr_shadow(x);
         x.mem.put32(0x4080, 0x20);  // VTPR = 2
         x.set(f::tpr_threshold, 3);
       }},
      {"apic_virtualization_without_tpr_shadow", fail7,
       [](fixture& x) { x.or_(f::secondary_processor_based_controls, bit(8)); }},
      {"x2apic_mode_with_apic_access_virtualization", fail7,
       [](fixture& x) {
         tpr_shadow(x);
         x.or_(f::secondary_processor_based_controls, bit(0) | bit(4));
         x.set(f::apic_access_address, 0x5000);
       }},
      {"virtual_interrupt_delivery_without_external_interrupt_exiting", fail7,
       [](fixture& x) {
         tpr_shadow(x);
         x.or_(f::secondary_processor_based_controls, bit(9));
       }},
      {"posted_interrupts_without_virtual_interrupt_delivery", fail7,
       [](fixture& x) {
         posted_interrupts(x);
         x.clear(f::secondary_processor_based_controls, bit(9));
       }},
      {"posted_interrupts_without_acknowledge_on_exit", fail7,
       [](fixture& x) {
         posted_interrupts(x);
         x.clear(f::primary_vm_exit_controls, bit(15));
       }},
      {"posted_interrupt_vector_reserved", fail7,
       [](fixture& x) {
         posted_interrupts(x);
         x.set(f::posted_interrupt_notification_vector, 0x1f0);
       }},
      {"posted_interrupt_descriptor_address", fail7,
       [](fixture& x) {
         posted_interrupts(x);
         x.set(f::posted_interrupt_descriptor_address, 0x6020);
       }},
      {"virtual_nmis_without_nmi_exiting", fail7, [](fixture& x) { x.or_(f::pin_based_controls, bit(5)); }},
      {"nmi_window_exiting_without_virtual_nmis", fail7,
       [](fixture& x) { x.or_(f::primary_processor_based_controls, bit(22)); }},
      {"apic_access_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(0));
         x.set(f::apic_access_address, 0x5001);
       }},
      {"vpid_zero", fail7, [](fixture& x) { x.or_(f::secondary_processor_based_controls, bit(5)); }},
      {"eptp_invalid", fail7, [](fixture& x) { x.set(f::ept_pointer, 0x100000 | (3 << 3) | 2); }},  // memory type 2
      {"pml_without_ept", fail7, [](fixture& x) { x.set(f::secondary_processor_based_controls, bit(17)); }},
      {"pml_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(17));
         x.set(f::pml_address, 0x123);
       }},
      {"unrestricted_guest_without_ept", fail7, [](fixture& x) { x.set(f::secondary_processor_based_controls, bit(7)); }},
      {"mode_based_execute_without_ept", fail7,
       [](fixture& x) {
         fixture::allow(x.env.caps.procbased2, bit(22));
         x.set(f::secondary_processor_based_controls, bit(22));
       }},
      {"sub_page_permissions_without_ept", fail7,
       [](fixture& x) {
         fixture::allow(x.env.caps.procbased2, bit(23));
         x.set(f::secondary_processor_based_controls, bit(23));
       }},
      {"vm_function_controls_reserved", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(13));
         x.set(f::vm_function_controls, 2);
       }},
      {"eptp_switching_without_ept", fail7,
       [](fixture& x) {
         x.set(f::secondary_processor_based_controls, bit(13));
         x.set(f::vm_function_controls, 1);
         x.set(f::eptp_list_address, 0x7000);
       }},
      {"eptp_list_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(13));
         x.set(f::vm_function_controls, 1);
         x.set(f::eptp_list_address, 0x7004);
       }},
      {"vmread_bitmap_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(14));
         x.set(f::vmread_bitmap_address, 0x7001);
         x.set(f::vmwrite_bitmap_address, 0x8000);
       }},
      {"vmwrite_bitmap_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(14));
         x.set(f::vmread_bitmap_address, 0x7000);
         x.set(f::vmwrite_bitmap_address, 0x8800);
       }},
      {"ve_information_address", fail7,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(18));
         x.set(f::ve_information_address, 0x9001);
       }},
      // ---- 27.2.1.2 ----
      {"exit_controls_reserved", fail7, [](fixture& x) { x.clear(f::primary_vm_exit_controls, bit(0)); }},
      {"save_preemption_timer_without_activate", fail7, [](fixture& x) { x.or_(f::primary_vm_exit_controls, bit(22)); }},
      {"exit_msr_store_area", fail7,
       [](fixture& x) {
         x.set(f::vm_exit_msr_store_count, 1);
         x.set(f::vm_exit_msr_store_address, 0x1008);
       }},
      {"exit_msr_load_area", fail7,
       [](fixture& x) {
         x.set(f::vm_exit_msr_load_count, 2);
         x.set(f::vm_exit_msr_load_address, bit(39) - 16);  // the second entry crosses MAXPHYADDR
       }},
      // ---- 27.2.1.3 ----
      {"entry_controls_reserved", fail7, [](fixture& x) { x.clear(f::vm_entry_controls, bit(0)); }},
      {"injection_type_reserved", fail7, [](fixture& x) { inject(x, 1, 0); }},
      {"injection_vector", fail7, [](fixture& x) { inject(x, 2, 3); }},  // NMI must be vector 2
      {"injection_error_code_missing", fail7, [](fixture& x) { inject(x, 3, 13); }},  // #GP without error code
      {"injection_error_code_unexpected", fail7, [](fixture& x) { inject(x, 3, 6, true); }},  // #UD with one
      {"injection_info_reserved", fail7,
       [](fixture& x) {
         x.set(f::vm_entry_interruption_info, bit(31) | bit(12) | (3 << 8) | 6);
       }},
      {"injection_error_code_reserved", fail7,
       [](fixture& x) {
         inject(x, 3, 13, true);
         x.set(f::vm_entry_exception_error_code, 0x10000);
       }},
      {"injection_instruction_length", fail7,
       [](fixture& x) {
         inject(x, 4, 0x80);
         x.set(f::vm_entry_instruction_length, 16);
       }},
      {"entry_msr_load_area", fail7,
       [](fixture& x) {
         x.set(f::vm_entry_msr_load_count, 1);
         x.set(f::vm_entry_msr_load_address, 0x2004);
       }},
      {"smm_controls_outside_smm", fail7, [](fixture& x) { x.or_(f::vm_entry_controls, bit(10)); }},
      // ---- 27.2.2 ----
      {"host_cr0_fixed_bits", fail8, [](fixture& x) { x.clear(f::host_cr0, bit(5)); }},
      {"host_cr4_fixed_bits", fail8, [](fixture& x) { x.clear(f::host_cr4, bit(13)); }},
      {"host_cr3_beyond_maxphyaddr", fail8, [](fixture& x) { x.set(f::host_cr3, bit(40)); }},
      {"host_sysenter_esp_not_canonical", fail8, [](fixture& x) { x.set(f::host_ia32_sysenter_esp, bit(47)); }},
      {"host_sysenter_eip_not_canonical", fail8, [](fixture& x) { x.set(f::host_ia32_sysenter_eip, bit(63)); }},
      {"host_pat_invalid", fail8,
       [](fixture& x) {
         x.or_(f::primary_vm_exit_controls, bit(19));
         x.set(f::host_ia32_pat, 0x0007040600070402);
       }},
      {"host_efer_reserved", fail8, [](fixture& x) { x.or_(f::host_ia32_efer, bit(1)); }},
      {"host_efer_lma_lme_mismatch", fail8, [](fixture& x) { x.clear(f::host_ia32_efer, bit(8)); }},
      {"host_pkrs_reserved", fail8,
       [](fixture& x) {
         fixture::allow(x.env.caps.true_exit, bit(29));
         x.or_(f::primary_vm_exit_controls, bit(29));
         x.set(f::host_ia32_pkrs, bit(32));
       }},
      // ---- 27.2.3 ----
      {"host_selector_rpl_ti", fail8, [](fixture& x) { x.set(f::host_ds_selector, 0x13); }},
      {"host_cs_selector_null", fail8, [](fixture& x) { x.set(f::host_cs_selector, 0); }},
      {"host_tr_selector_null", fail8, [](fixture& x) { x.set(f::host_tr_selector, 0); }},
      {"host_ss_selector_null", fail8,
       [](fixture& x) {
         host32(x);
         x.set(f::host_ss_selector, 0);
       }},
      {"host_base_not_canonical", fail8, [](fixture& x) { x.set(f::host_fs_base, 0x0000800000000000); }},
      // ---- 27.2.4 ----
      {"host_address_space_size_clear_in_ia32e_mode", fail8,
       [](fixture& x) {
         host32(x);
         x.env.in_ia32e_mode = true;
       }},
      {"ia32e_controls_outside_ia32e_mode", fail8, [](fixture& x) { x.env.in_ia32e_mode = false; }},
      {"host_32bit_pcide", fail8,
       [](fixture& x) {
         host32(x);
         x.or_(f::host_cr4, bit(17));
       }},
      {"host_32bit_rip_high", fail8,
       [](fixture& x) {
         host32(x);
         x.set(f::host_rip, bit(32));
       }},
      {"host_64bit_pae_clear", fail8, [](fixture& x) { x.clear(f::host_cr4, bit(5)); }},
      {"host_rip_not_canonical", fail8, [](fixture& x) { x.set(f::host_rip, 0xffff700000000000); }},
      // ---- 27.3.1.1 ----
      {"guest_cr0_fixed_bits", exit33(), [](fixture& x) { x.clear(f::guest_cr0, bit(5)); }},
      {"guest_cr0_pg_without_pe", exit33(),
       [](fixture& x) {
         unrestricted(x);
         x.clear(f::guest_cr0, bit(0));
       }},
      {"guest_cr4_fixed_bits", exit33(), [](fixture& x) { x.clear(f::guest_cr4, bit(13)); }},
      {"guest_cr4_cet_without_wp", exit33(),
       [](fixture& x) {
         x.env.caps.cr4_fixed1 |= bit(23);
         x.or_(f::guest_cr4, bit(23));
         x.clear(f::guest_cr0, bit(16));
       }},
      {"guest_debugctl_reserved", exit33(), [](fixture& x) { x.set(f::guest_ia32_debugctl, bit(2)); }},
      {"ia32e_guest_without_paging", exit33(),
       [](fixture& x) {
         unrestricted(x);
         x.clear(f::guest_cr0, bit(31));
       }},
      {"ia32e_guest_without_pae", exit33(), [](fixture& x) { x.clear(f::guest_cr4, bit(5)); }},
      {"guest_pcide_outside_ia32e", exit33(),
       [](fixture& x) {
         guest32(x);
         x.or_(f::guest_cr4, bit(17));
       }},
      {"guest_cr3_beyond_maxphyaddr", exit33(), [](fixture& x) { x.set(f::guest_cr3, bit(39) | 0x1000); }},
      {"guest_dr7_high", exit33(), [](fixture& x) { x.set(f::guest_dr7, bit(32) | 0x400); }},
      {"guest_sysenter_esp_not_canonical", exit33(), [](fixture& x) { x.set(f::guest_ia32_sysenter_esp, bit(48)); }},
      {"guest_sysenter_eip_not_canonical", exit33(), [](fixture& x) { x.set(f::guest_ia32_sysenter_eip, 0x8000'0000'0000'0000); }},
      {"guest_pat_invalid", exit33(),
       [](fixture& x) {
         x.or_(f::vm_entry_controls, bit(14));
         x.set(f::guest_ia32_pat, 0x0007040600080406);  // a byte of 8
       }},
      {"guest_efer_reserved", exit33(), [](fixture& x) { x.or_(f::guest_ia32_efer, bit(12)); }},  // SVME: AMD only
      {"guest_efer_lma_mismatch", exit33(), [](fixture& x) { x.clear(f::guest_ia32_efer, bit(10)); }},
      {"guest_efer_lme_mismatch", exit33(), [](fixture& x) { x.clear(f::guest_ia32_efer, bit(8)); }},
      {"guest_bndcfgs_invalid", exit33(),
       [](fixture& x) {
         fixture::allow(x.env.caps.true_entry, bit(16));
         x.or_(f::vm_entry_controls, bit(16));
         x.set(f::guest_ia32_bndcfgs, bit(2));
       }},
      {"guest_pkrs_reserved", exit33(),
       [](fixture& x) {
         fixture::allow(x.env.caps.true_entry, bit(22));
         x.or_(f::vm_entry_controls, bit(22));
         x.set(f::guest_ia32_pkrs, bit(40));
       }},
      // ---- 27.3.1.2 ----
      {"guest_tr_selector_ti", exit33(), [](fixture& x) { x.set(f::guest_tr_selector, 0x1c); }},
      {"guest_ldtr_selector_ti", exit33(),
       [](fixture& x) {
         x.set(f::guest_ldtr_selector, 0x24);
         x.set(f::guest_ldtr_limit, 0xfff);
         x.set(f::guest_ldtr_access_rights, 0x82);
       }},
      {"guest_ss_rpl_not_cs_rpl", exit33(), [](fixture& x) { x.set(f::guest_cs_selector, 0x0b); }},
      {"guest_v86_base", exit33(),
       [](fixture& x) {
         v86(x);
         x.set(f::guest_ds_base, x.get(f::guest_ds_base) + 1);
       }},
      {"guest_base_not_canonical", exit33(), [](fixture& x) { x.set(f::guest_gs_base, bit(47)); }},
      {"guest_cs_base_high", exit33(), [](fixture& x) { x.set(f::guest_cs_base, bit(32)); }},
      {"guest_ss_ds_es_base_high", exit33(), [](fixture& x) { x.set(f::guest_es_base, bit(33)); }},
      {"guest_v86_limit", exit33(),
       [](fixture& x) {
         v86(x);
         x.set(f::guest_fs_limit, 0xfffff);
       }},
      {"guest_v86_access_rights", exit33(),
       [](fixture& x) {
         v86(x);
         x.set(f::guest_gs_access_rights, 0xf2);
       }},
      {"guest_cs_type", exit33(), [](fixture& x) { x.set(f::guest_cs_access_rights, 0xa098); }},
      {"guest_ss_type", exit33(), [](fixture& x) { x.set(f::guest_ss_access_rights, 0xc091); }},
      {"guest_data_segment_not_accessed", exit33(), [](fixture& x) { x.set(f::guest_ds_access_rights, 0xc092); }},
      {"guest_data_segment_code_not_readable", exit33(), [](fixture& x) { x.set(f::guest_fs_access_rights, 0xc099); }},
      {"guest_segment_s_clear", exit33(), [](fixture& x) { x.set(f::guest_es_access_rights, 0xc083); }},
      {"guest_cs_dpl", exit33(), [](fixture& x) { x.set(f::guest_cs_access_rights, 0xa0fb); }},
      {"guest_ss_dpl", exit33(),
       [](fixture& x) {
         x.set(f::guest_ss_selector, 0x13);
         x.set(f::guest_cs_selector, 0x0b);
       }},
      {"guest_data_segment_dpl", exit33(), [](fixture& x) { x.set(f::guest_ds_selector, 0x13); }},
      {"guest_segment_not_present", exit33(), [](fixture& x) { x.set(f::guest_gs_access_rights, 0xc013); }},
      {"guest_segment_ar_reserved", exit33(), [](fixture& x) { x.set(f::guest_ds_access_rights, 0xc193); }},
      {"guest_cs_l_and_db", exit33(), [](fixture& x) { x.set(f::guest_cs_access_rights, 0xe09b); }},
      {"guest_segment_granularity", exit33(), [](fixture& x) { x.set(f::guest_ds_limit, 0xffffe000); }},
      {"guest_tr_type", exit33(), [](fixture& x) { x.set(f::guest_tr_access_rights, 0x89); }},
      {"guest_tr_ar_invalid", exit33(), [](fixture& x) { x.set(f::guest_tr_access_rights, 0x0b); }},
      {"guest_tr_unusable", exit33(), [](fixture& x) { x.set(f::guest_tr_access_rights, 0x1008b); }},
      {"guest_ldtr_type", exit33(),
       [](fixture& x) {
         x.set(f::guest_ldtr_limit, 0xfff);
         x.set(f::guest_ldtr_access_rights, 0x83);
       }},
      {"guest_ldtr_ar_invalid", exit33(),
       [](fixture& x) {
         x.set(f::guest_ldtr_limit, 0xfff);
         x.set(f::guest_ldtr_access_rights, 0x02);
       }},
      // ---- 27.3.1.3 ----
      {"guest_gdtr_idtr_base_not_canonical", exit33(), [](fixture& x) { x.set(f::guest_idtr_base, 0x0001000000000000); }},
      {"guest_gdtr_idtr_limit_high", exit33(), [](fixture& x) { x.set(f::guest_gdtr_limit, 0x10000); }},
      // ---- 27.3.1.4 ----
      {"guest_rip_high", exit33(),
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_rip, bit(32));
       }},
      {"guest_rip_not_canonical", exit33(), [](fixture& x) { x.set(f::guest_rip, bit(47)); }},
      {"guest_rflags_reserved", exit33(), [](fixture& x) { x.set(f::guest_rflags, 0); }},
      {"guest_rflags_vm_invalid", exit33(),
       [](fixture& x) {
         v86(x);
         unrestricted(x);
         x.clear(f::guest_cr0, bit(0) | bit(31));
       }},
      {"guest_rflags_if_clear_for_external_interrupt", exit33(), [](fixture& x) { inject(x, 0, 0x20); }},
      // ---- 27.3.1.5 ----
      {"guest_activity_state_unsupported", exit33(), [](fixture& x) { x.set(f::guest_activity_state, 4); }},
      {"guest_hlt_with_ss_dpl_nonzero", exit33(),
       [](fixture& x) {
         x.set(f::guest_activity_state, 1);
         x.set(f::guest_cs_selector, 0x1b);
         x.set(f::guest_cs_access_rights, 0xa0fb);
         x.set(f::guest_ss_selector, 0x23);
         x.set(f::guest_ss_access_rights, 0xc0f3);
       }},
      {"guest_inactive_with_sti_or_mov_ss_blocking", exit33(),
       [](fixture& x) {
         x.set(f::guest_activity_state, 1);
         x.set(f::guest_interruptibility_state, 2);
       }},
      {"guest_activity_blocks_injected_event", exit33(),
       [](fixture& x) {
         x.set(f::guest_activity_state, 1);
         inject(x, 3, 6);  // #UD into HLT
       }},
      {"guest_interruptibility_reserved", exit33(), [](fixture& x) { x.set(f::guest_interruptibility_state, 0x20); }},
      {"guest_sti_and_mov_ss_blocking", exit33(),
       [](fixture& x) {
         x.or_(f::guest_rflags, bit(9));
         x.set(f::guest_interruptibility_state, 3);
       }},
      {"guest_sti_blocking_with_if_clear", exit33(), [](fixture& x) { x.set(f::guest_interruptibility_state, 1); }},
      {"guest_blocking_with_external_interrupt_injection", exit33(),
       [](fixture& x) {
         x.or_(f::guest_rflags, bit(9));
         x.set(f::guest_interruptibility_state, 2);
         inject(x, 0, 0x20);
       }},
      {"guest_mov_ss_blocking_with_nmi_injection", exit33(),
       [](fixture& x) {
         x.set(f::guest_interruptibility_state, 2);
         inject(x, 2, 2);
       }},
      {"guest_sti_blocking_with_nmi_injection", exit33(3),
       [](fixture& x) {
         x.or_(f::guest_rflags, bit(9));
         x.set(f::guest_interruptibility_state, 1);
         inject(x, 2, 2);
       }},
      {"guest_smi_blocking_outside_smm", exit33(), [](fixture& x) { x.set(f::guest_interruptibility_state, 4); }},
      {"guest_nmi_blocking_with_virtual_nmi_injection", exit33(),
       [](fixture& x) {
         x.or_(f::pin_based_controls, bit(3) | bit(5));
         x.set(f::guest_interruptibility_state, 8);
         inject(x, 2, 2);
       }},
      {"guest_enclave_interruption_with_mov_ss_blocking", exit33(),
       [](fixture& x) {
         x.env.sgx = true;
         x.set(f::guest_interruptibility_state, 0x12);
       }},
      {"guest_pending_debug_reserved", exit33(), [](fixture& x) { x.set(f::guest_pending_debug_exceptions, 0x10); }},
      {"guest_pending_debug_bs_mismatch", exit33(),
       [](fixture& x) {
         x.set(f::guest_interruptibility_state, 2);
         x.set(f::guest_pending_debug_exceptions, bit(14));  // BS without RFLAGS.TF
       }},
      {"guest_pending_debug_rtm_invalid", exit33(),
       [](fixture& x) {
         x.env.rtm = true;
         x.set(f::guest_pending_debug_exceptions, bit(16));
       }},
      {"vmcs_link_pointer_address", exit33(4), [](fixture& x) { x.set(f::vmcs_link_pointer, 0x3800); }},
      {"vmcs_link_pointer_revision", exit33(4),
       [](fixture& x) {
         x.set(f::vmcs_link_pointer, 0x3000);
         x.mem.put32(0x3000, 0x2a);  // revision 0x2b expected
       }},
      // ---- 27.3.1.6 ----
      {"guest_pdpte_reserved", exit33(2),
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_pdpte2, 0x5000 | bit(1) | 1);  // present, reserved bit 1
       }},
      // ---- 27.4 ----
      {"msr_load_entry_reserved", exit34(1), [](fixture& x) { msr_area(x, {{0x1'0000'0174ull, 0}}); }},
      {"msr_load_fs_gs_base", exit34(2), [](fixture& x) { msr_area(x, {{0x174, 0}, {0xc0000101, 0}}); }},
      {"msr_load_x2apic_range", exit34(1), [](fixture& x) { msr_area(x, {{0x808, 0}}); }},
      {"msr_load_smm_only", exit34(3), [](fixture& x) { msr_area(x, {{0x174, 0}, {0x175, 0}, {0x9b, 0}}); }},
      {"msr_load_wrmsr_would_fault", exit34(2),
       [](fixture& x) {
         x.env.msr_write_faults = canon_fault;
         msr_area(x, {{0x175, 0x1000}, {0x176, bit(63)}});
       }},
  };
  return c;
}

vmx::vm_entry_verdict run(fixture& x) {
  auto r = vmx::check_vm_entry(x.vmcs, x.env, x.mem.view());
  EXPECT_TRUE(r.has_value());
  return r.has_value() ? r.value() : vmx::vm_entry_verdict{};
}

}  // namespace

TEST(VmEntryChecks, EnvironmentDefaultMaxphyaddrIsTheSdmDefault) {
  // An environment built without CPUID has the width of a PAE processor without leaf
  // 80000008H (SDM Vol. 3A 4.1.4: 36), hvkit's one default; a beyond-MAXPHYADDR check then
  // refuses bit 36 and accepts bit 35.
  const vmx::vm_entry_env e{};
  EXPECT_EQ(e.maxphyaddr, 36u);
  EXPECT_TRUE(vmx::entry_rules::beyond_maxphyaddr(std::uint64_t{1} << 36, e));
  EXPECT_FALSE(vmx::entry_rules::beyond_maxphyaddr(std::uint64_t{1} << 35, e));
}

TEST(VmEntryChecks, GoldenVmcsPasses) {
  fixture x;
  golden(x);
  const auto v = run(x);
  EXPECT_TRUE(v.ok()) << (v.rule ? v.rule->name : "");
  // The variants the cases start from pass too.
  for (auto variant : {guest32, v86, host32, tpr_shadow, posted_interrupts, unrestricted}) {
    fixture y;
    golden(y);
    variant(y);
    const auto w = run(y);
    EXPECT_TRUE(w.ok()) << (w.rule ? w.rule->name : "");
  }
}

TEST(VmEntryChecks, EveryRuleHasACaseAndNamesAreUnique) {
  std::set<std::string> names, covered;
  for (const auto& c : cases()) EXPECT_TRUE(covered.insert(c.rule).second) << "two cases for " << c.rule;
  auto see = [&](const vmx::vm_entry_rule_info& i) {
    EXPECT_TRUE(names.insert(i.name).second) << "duplicate rule name " << i.name;
    EXPECT_TRUE(covered.count(i.name)) << "rule without a golden case: " << i.name;
    EXPECT_EQ(vmx::find_vm_entry_rule(i.name), &i);
    EXPECT_TRUE(std::string(i.section).rfind("27.", 0) == 0) << i.name << " " << i.section;
  };
  vmx::for_each_vm_entry_rule([&](const vmx::vm_entry_rule& r) { see(r.info); });
  for (const auto& r : vmx::entry_rules::msr_load_rules) see(r.info);
  for (const auto& n : covered) EXPECT_TRUE(names.count(n)) << "case for an unknown rule: " << n;
  EXPECT_EQ(names.size(), vmx::vm_entry_rule_count + vmx::msr_load_rule_count);
  EXPECT_EQ(vmx::find_vm_entry_rule("no_such_rule"), nullptr);
}

TEST(VmEntryChecks, EachCaseViolatesExactlyItsRule) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.rule);
    fixture x;
    golden(x);
    c.violate(x);
    const auto v = run(x);
    ASSERT_FALSE(v.ok());
    ASSERT_NE(v.rule, nullptr);
    EXPECT_STREQ(v.rule->name, c.rule);
    EXPECT_TRUE(v.hit.failed);
    switch (c.want.kind) {
      case expect_kind::fail7:
        EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::vm_fail_valid);
        EXPECT_EQ(static_cast<unsigned>(v.error), 7u);
        break;
      case expect_kind::fail8:
        EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::vm_fail_valid);
        EXPECT_EQ(static_cast<unsigned>(v.error), 8u);
        break;
      case expect_kind::exit33:
        EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::entry_failure);
        EXPECT_EQ(v.exit_reason, 0x80000021u);
        EXPECT_EQ(v.exit_qualification, c.want.qualification);
        break;
      case expect_kind::exit34:
        EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::entry_failure);
        EXPECT_EQ(v.exit_reason, 0x80000022u);
        EXPECT_EQ(v.exit_qualification, c.want.qualification);
        break;
    }
    // Exactly one VMCS rule is violated (MSR-load cases: none; the area is the fault).
    if (c.want.kind != expect_kind::exit34) {
      std::vector<std::string> hits;
      auto s = vmx::read_vm_entry_state(x.vmcs, x.mem.view());
      ASSERT_TRUE(s.has_value());
      vmx::for_each_vm_entry_violation(s.value(), x.env,
                                       [&](const vmx::vm_entry_rule& r, const vmx::vm_entry_hit&) { hits.push_back(r.info.name); });
      EXPECT_EQ(hits.size(), 1u) << (hits.size() > 1 ? hits[0] + ", " + hits[1] : std::string{});
    }
  }
}

TEST(VmEntryChecks, GroupOrderControlsHostGuestMsrLoad) {
  // SDM 27.2 before 27.3 before 27.4: a VMCS broken everywhere fails on its controls.
  fixture x;
  golden(x);
  x.set(f::cr3_target_count, 9);
  x.set(f::host_cr3, bit(50));
  x.set(f::guest_rflags, 0);
  msr_area(x, {{0x808, 0}});
  EXPECT_EQ(static_cast<unsigned>(run(x).error), 7u);
  x.set(f::cr3_target_count, 0);
  EXPECT_EQ(static_cast<unsigned>(run(x).error), 8u);
  x.set(f::host_cr3, 0x1000);
  EXPECT_EQ(run(x).exit_reason, 0x80000021u);
  x.set(f::guest_rflags, 2);
  EXPECT_EQ(run(x).exit_reason, 0x80000022u);
  EXPECT_EQ(run(x).msr.index, 0x808u);
}

TEST(VmEntryChecks, AnyErrorCodeWithVmxBasicBit56) {
  // SDM A.1: with IA32_VMX_BASIC[56] a hardware exception may be injected with or without
  // an error code; any other event type still has none.
  fixture x;
  golden(x);
  x.env.caps.basic |= bit(56);
  inject(x, 3, 6, true);
  EXPECT_TRUE(run(x).ok());
  inject(x, 3, 13, false);
  EXPECT_TRUE(run(x).ok());
  inject(x, 2, 2, true);  // an NMI with an error code
  EXPECT_STREQ(run(x).rule->name, "injection_error_code_unexpected");
  // Real mode (unrestricted guest, CR0.PE = 0): never an error code.
  unrestricted(x);
  x.clear(f::guest_cr0, bit(0) | bit(31));
  x.clear(f::vm_entry_controls, bit(9));
  x.set(f::guest_ia32_efer, 0);
  x.set(f::guest_cs_access_rights, 0x809b);
  inject(x, 3, 13, true);
  EXPECT_STREQ(run(x).rule->name, "injection_error_code_unexpected");
}

TEST(VmEntryChecks, SgxAndRtmBitsReservedWithoutTheFeature) {
  // SDM 27.3.1.5: interruptibility bit 4 needs SGX, pending-debug bit 16 needs RTM.
  fixture x;
  golden(x);
  x.set(f::guest_interruptibility_state, 0x10);
  EXPECT_STREQ(run(x).rule->name, "guest_interruptibility_reserved");
  x.env.sgx = true;
  EXPECT_TRUE(run(x).ok());
  x.set(f::guest_interruptibility_state, 0);
  x.set(f::guest_pending_debug_exceptions, bit(16) | bit(12));
  EXPECT_STREQ(run(x).rule->name, "guest_pending_debug_reserved");
  x.env.rtm = true;
  EXPECT_TRUE(run(x).ok());
}

TEST(VmEntryChecks, ReportsFieldValues) {
  fixture x;
  golden(x);
  x.set(f::guest_ss_access_rights, 0xc091);
  const auto v = run(x);
  EXPECT_STREQ(v.rule->section, "27.3.1.2");
  EXPECT_EQ(v.hit.field, f::guest_ss_access_rights.encoding);
  EXPECT_EQ(v.hit.value, 0xc091u);
}

TEST(VmEntryChecks, ReadsOnlyFieldsTheControlsUse) {
  // A backend that has only the basic fields (no PAT, PKRS, posted interrupts, tertiary
  // controls ...) is enough for a VMCS that does not use them.
  struct basic_backend {
    vmx::soft_vmcs* v;
    std::set<std::uint32_t> seen;
    hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t e) {
      seen.insert(e);
      return v->read(e);
    }
    hvkit::result<void, vmx::vm_fail> write(std::uint32_t e, std::uint64_t x) { return v->write(e, x); }
  };
  fixture x;
  golden(x);
  basic_backend b{&x.vmcs, {}};
  auto r = vmx::check_vm_entry(b, x.env);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r.value().ok());
  for (auto e : {f::guest_ia32_pat.encoding, f::host_ia32_pat.encoding, f::guest_ia32_pkrs.encoding,
                 f::tertiary_processor_based_controls.encoding, f::posted_interrupt_descriptor_address.encoding,
                 f::guest_pdpte0.encoding, f::vm_entry_msr_load_address.encoding})
    EXPECT_EQ(b.seen.count(e), 0u) << std::hex << e;
  EXPECT_EQ(b.seen.count(f::ept_pointer.encoding), 1u);
}

// The injection and entry-state rules exist once (vmx::injection_rules, vmx::entry_state_rules)
// and both check_vm_entry and the pre-injection checks call them, so this is not a second
// statement of the rules (those are the separate rule model in events_test.cpp and the CPU in
// the VM-entry differential). What it checks is the wiring: check_vm_entry reads the event,
// interruptibility, activity state, RFLAGS and pin-based controls from the VMCS and derives
// its environment (MTF, BASIC[56], SGX) from the capability MSRs; check_injection_fields +
// check_entry_state are given the same values directly. A wrong field, bit or capability in
// that path makes them disagree. VM entry must succeed exactly when the pre-injection checks pass.
TEST(VmEntryChecks, AgreesWithTheInjectionChecks) {
  const unsigned vectors[] = {0, 1, 2, 3, 8, 13, 14, 18, 21, 0x80};
  unsigned combos = 0, ok = 0;
  for (unsigned type = 0; type < 8; ++type)
    for (unsigned vec : vectors)
      for (unsigned ec = 0; ec < 3; ++ec)  // deliver-error-code off, on with 0x10, on with 0x10000
        for (std::uint32_t intr = 0; intr < 32; ++intr)
          for (unsigned act = 0; act < 4; ++act)
            for (bool if_ : {false, true})
              for (bool vnmi : {false, true}) {
                fixture x;
                golden(x);
                x.env.sgx = (intr & 8) != 0;  // half the cases with SGX (bit 4 allowed)
                const std::uint32_t info = 0x8000'0000u | (type << 8) | vec | (ec ? 0x800u : 0u);
                const std::uint32_t code = ec == 2 ? 0x10000u : 0x10u;
                x.set(f::vm_entry_interruption_info, info);
                x.set(f::vm_entry_exception_error_code, code);
                x.set(f::vm_entry_instruction_length, 2);
                x.set(f::guest_interruptibility_state, intr);
                x.set(f::guest_activity_state, act);
                x.set(f::guest_rflags, if_ ? 0x202 : 0x2);
                if (vnmi) x.or_(f::pin_based_controls, bit(3) | bit(5));  // NMI exiting + virtual NMIs
                const vmx::injected_event e{vmx::entry_interruption_info{info}, code, 2};
                vmx::injection_environment env;
                env.mtf_supported = (x.env.caps.procbased >> (32 + 27)) & 1u;
                env.any_error_code = (x.env.caps.basic >> 56) & 1u;
                const bool pre_ok =
                    vmx::check_injection_fields(e, env) == vmx::injection_error::none &&
                    vmx::check_entry_state(e, vmx::interruptibility_state{intr}, static_cast<vmx::activity_state>(act),
                                           hvkit::x86::rflags{if_ ? 0x202u : 0x2u}, vnmi, false,
                                           x.env.sgx) == vmx::entry_state_error::none;
                const auto v = run(x);
                ++combos;
                ok += v.ok();
                EXPECT_EQ(v.ok(), pre_ok) << "type " << type << " vector " << vec << " ec " << ec << " intr " << intr
                                          << " activity " << act << " IF " << if_ << " vnmi " << vnmi << " rule "
                                          << (v.rule ? v.rule->name : "-");
              }
  EXPECT_EQ(combos, 8u * 10 * 3 * 32 * 4 * 2 * 2);
  EXPECT_GT(ok, 0u);
}

// The same wiring check on random event, blocking, activity and RFLAGS combinations (real
// mode included): the rules are one copy, so "some rule of the group fails" must agree between
// check_vm_entry's VMCS path and the direct calls of check_injection_fields/check_entry_state.
TEST(VmEntryChecks, AgreesWithEventInjectionAndEntryStateChecks) {
  std::mt19937_64 rng(18);
  auto below = [&](unsigned n) { return static_cast<unsigned>(rng() % n); };
  const unsigned vectors[] = {0, 1, 2, 3, 6, 8, 10, 13, 14, 17, 18, 21, 31, 32, 255};
  unsigned checked = 0, injection_fails = 0, state_fails = 0;
  for (int n = 0; n < 20000; ++n) {
    fixture x;
    golden(x);
    x.env.sgx = true;  // check_entry_state takes bit 4 (enclave interruption) as defined
    std::uint32_t info = below(8) ? bit(31) : 0;
    info |= (below(8) << 8) | vectors[below(sizeof vectors / sizeof vectors[0])];
    if (below(2)) info |= bit(11);
    if (below(16) == 0) info |= bit(12 + below(19));
    const std::uint32_t error_code = below(4) ? 0 : 0x10000;
    const std::uint32_t length = below(17);
    const std::uint32_t blocking = below(4) ? below(16) : below(64);
    const std::uint32_t activity = below(4);
    const bool if_set = below(2), vnmi = below(2), real_mode = below(4) == 0;
    x.set(f::vm_entry_interruption_info, info);
    x.set(f::vm_entry_exception_error_code, error_code);
    x.set(f::vm_entry_instruction_length, length);
    x.set(f::guest_interruptibility_state, blocking);
    x.set(f::guest_activity_state, activity);
    x.set(f::guest_rflags, 2 | (if_set ? bit(9) : 0));
    if (vnmi) x.or_(f::pin_based_controls, bit(3) | bit(5));
    if (real_mode) {  // unrestricted guest, CR0.PE = 0
      unrestricted(x);
      x.clear(f::guest_cr0, bit(0) | bit(31));
      x.clear(f::vm_entry_controls, bit(9));
      x.set(f::guest_ia32_efer, 0);
      x.set(f::guest_cs_access_rights, 0x809b);
    }
    auto st = vmx::read_vm_entry_state(x.vmcs, x.mem.view());
    ASSERT_TRUE(st.has_value());
    bool mine_injection = false, mine_state = false;
    std::string names;
    vmx::for_each_vm_entry_violation(st.value(), x.env, [&](const vmx::vm_entry_rule& r, const vmx::vm_entry_hit&) {
      const std::string name = r.info.name;
      names += name + " ";
      if (name.rfind("injection_", 0) == 0) mine_injection = true;
      else mine_state = true;  // check_entry_state has the RFLAGS.IF rule (SDM 27.3.1.4) too
    });

    vmx::injected_event e{};
    e.info = vmx::entry_interruption_info{info};
    e.error_code = error_code;
    e.instruction_length = length;
    vmx::injection_environment ienv{};
    ienv.protected_mode = !real_mode;
    ienv.mtf_supported = (x.env.caps.primary_caps().may_be_one >> 27) & 1;
    ienv.zero_length_allowed = (x.env.caps.misc >> 30) & 1;
    const bool theirs_injection = vmx::check_injection_fields(e, ienv) != vmx::injection_error::none ||
                                  ((info >> 31) && (info & bit(11)) && (error_code >> 16));
    const bool theirs_state =
        vmx::check_entry_state(e, vmx::interruptibility_state{blocking}, static_cast<vmx::activity_state>(activity),
                               hvkit::x86::rflags{2 | (if_set ? bit(9) : 0)}, vnmi) != vmx::entry_state_error::none;
    EXPECT_EQ(mine_injection, theirs_injection) << std::hex << "info=" << info << " ec=" << error_code
                                                << " len=" << std::dec << length << " real=" << real_mode << " hvkit: " << names;
    if (!mine_injection) {  // with a bad event only the injection group is compared
      EXPECT_EQ(mine_state, theirs_state) << std::hex << "info=" << info << " blocking=" << blocking
                                          << " activity=" << activity << " if=" << if_set << " vnmi=" << vnmi
                                          << " hvkit: " << names;
    }
    ++checked;
    injection_fails += mine_injection;
    state_fails += mine_state;
  }
  EXPECT_EQ(checked, 20000u);
  EXPECT_GT(injection_fails, 1000u);
  EXPECT_GT(state_fails, 1000u);
}

// More than one case per rule, for the encodings the one-case-per-rule table leaves out: each
// mutation of the golden VMCS either passes (nullptr) or fails exactly the rule named, with
// the SDM's words (Vol. 3C 27.3.1.2 "Checks on Guest Segment Registers", 27.3.1.3 "Checks on
// Guest Descriptor-Table Registers", 27.3.1.4 "Checks on Guest RIP, RFLAGS, and SSP").
TEST(VmEntryChecks, GuestSegmentAndRegisterVariants) {
  struct variant {
    const char* what;
    const char* rule;  // nullptr: the entry passes
    std::function<void(fixture&)> change;
  };
  auto cs_ar = [](std::uint64_t ar) { return [ar](fixture& x) { x.set(f::guest_cs_access_rights, ar); }; };
  const std::vector<variant> variants = {
      // CS "Type. The values allowed are 9, 11, 13, and 15 (accessed code segment). If the
      // “unrestricted guest” VM-execution control is 1, the value 3 (read/write accessed
      // expand-up data segment) is also allowed."
      {"CS type 9 (execute-only, accessed)", nullptr, cs_ar(0xa099)},
      {"CS type 13 (conforming execute-only, accessed)", nullptr, cs_ar(0xa09d)},
      {"CS type 15 (conforming execute/read, accessed)", nullptr, cs_ar(0xa09f)},
      {"CS type 8 (not accessed)", "guest_cs_type", cs_ar(0xa098)},
      {"CS type 3 without unrestricted guest", "guest_cs_type",
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_cs_access_rights, 0xc093);
       }},
      // CS DPL: "If the Type is 13 or 15 (conforming code segment), the DPL cannot be greater
      // than the DPL in the access-rights field for SS."
      {"CS conforming, DPL 3 > SS.DPL 0", "guest_cs_dpl", cs_ar(0xa0ff)},
      // SS "If SS is usable, the Type must be 3 or 7 (read/write, accessed data segment)."
      {"SS type 7 (expand-down)", nullptr, [](fixture& x) { x.set(f::guest_ss_access_rights, 0xc097); }},
      {"SS type 1 (read-only)", "guest_ss_type", [](fixture& x) { x.set(f::guest_ss_access_rights, 0xc091); }},
      // DS, ES, FS, GS: "If bit 3 of the Type is 1 (code segment), then bit 1 of the Type must
      // be 1 (readable)."
      {"DS execute/read code, accessed", nullptr, [](fixture& x) { x.set(f::guest_ds_access_rights, 0xc09b); }},
      {"FS execute-only code", "guest_data_segment_code_not_readable",
       [](fixture& x) { x.set(f::guest_fs_access_rights, 0xc099); }},
      // "Bit 4 (S). If the register is CS or if the register is usable, S must be 1."
      {"GS S = 0", "guest_segment_s_clear", [](fixture& x) { x.set(f::guest_gs_access_rights, 0xc083); }},
      {"GS unusable, S = 0", nullptr, [](fixture& x) { x.set(f::guest_gs_access_rights, 0x10083); }},
      // TR "Type. If the guest will not be IA-32e mode, the Type must be 3 (16-bit busy TSS)
      // or 11 (32-bit busy TSS). If the guest will be IA-32e mode, the Type must be 11."
      {"TR type 3 in IA-32e mode", "guest_tr_type", [](fixture& x) { x.set(f::guest_tr_access_rights, 0x83); }},
      {"TR type 3 outside IA-32e mode", nullptr,
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_tr_access_rights, 0x83);
       }},
      // TR "Bit 4 (S). Must be 0." "Bit 7 (P). Must be 1." "Bits 11:8 (reserved) ... must be 0."
      // "If any bit in the limit field in the range 11:0 is 0, G must be 0."
      {"TR S = 1", "guest_tr_ar_invalid", [](fixture& x) { x.set(f::guest_tr_access_rights, 0x9b); }},
      {"TR not present", "guest_tr_ar_invalid", [](fixture& x) { x.set(f::guest_tr_access_rights, 0x0b); }},
      {"TR reserved bit 8", "guest_tr_ar_invalid", [](fixture& x) { x.set(f::guest_tr_access_rights, 0x18b); }},
      {"TR G = 1 with limit 67H", "guest_tr_ar_invalid", [](fixture& x) { x.set(f::guest_tr_access_rights, 0x808b); }},
      // LDTR, if usable: "Bits 3:0 (Type). Must be 2 (LDT)." "Bit 4 (S). Must be 0." "Bit 7 (P).
      // Must be 1."
      {"LDTR usable, type 2", nullptr,
       [](fixture& x) {
         x.set(f::guest_ldtr_selector, 0x20);
         x.set(f::guest_ldtr_limit, 0xffff);
         x.set(f::guest_ldtr_access_rights, 0x82);
       }},
      {"LDTR usable, S = 1", "guest_ldtr_ar_invalid",
       [](fixture& x) {
         x.set(f::guest_ldtr_selector, 0x20);
         x.set(f::guest_ldtr_access_rights, 0x92);
       }},
      {"LDTR usable, not present", "guest_ldtr_ar_invalid",
       [](fixture& x) {
         x.set(f::guest_ldtr_selector, 0x20);
         x.set(f::guest_ldtr_access_rights, 0x02);
       }},
      {"LDTR usable, base not canonical", "guest_base_not_canonical",
       [](fixture& x) {
         x.set(f::guest_ldtr_selector, 0x20);
         x.set(f::guest_ldtr_access_rights, 0x82);
         x.set(f::guest_ldtr_base, 0x0000800000000000);
       }},
      // 27.3.1.3: "The base-address fields for GDTR and IDTR must contain canonical addresses."
      // "Bits 31:16 of each limit field must be 0."
      {"GDTR base not canonical", "guest_gdtr_idtr_base_not_canonical",
       [](fixture& x) { x.set(f::guest_gdtr_base, 0xffff700000000000); }},
      {"IDTR limit bit 16", "guest_gdtr_idtr_limit_high", [](fixture& x) { x.set(f::guest_idtr_limit, 0x10000); }},
      // 27.3.1.4 RFLAGS: "Reserved bits 63:22 ..., bit 15, bit 5 and bit 3 must be 0 in the
      // field, and reserved bit 1 must be 1."
      {"RFLAGS bit 15", "guest_rflags_reserved", [](fixture& x) { x.set(f::guest_rflags, 0x8002); }},
      {"RFLAGS bit 1 clear", "guest_rflags_reserved", [](fixture& x) { x.set(f::guest_rflags, 0x0); }},
      {"RFLAGS bit 22", "guest_rflags_reserved", [](fixture& x) { x.set(f::guest_rflags, 0x400002); }},
      // 27.3.1.4: "The VM flag (bit 17) must be 0 if the “IA-32e mode guest” VM-entry control
      // is 1".
      {"RFLAGS.VM in an IA-32e guest", "guest_rflags_vm_invalid",
       [](fixture& x) {
         v86(x);  // virtual-8086 segments, so that only the RFLAGS rule is broken
         x.or_(f::vm_entry_controls, bit(9));
         x.set(f::guest_ia32_efer, 0xd00);
       }},
      // 27.3.1.1: each check on a loaded MSR or DR7 applies only "If the “load ...”
      // VM-entry control is 1": with the control 0 the field is not checked.
      {"DR7 bits 63:32 without load debug controls", nullptr,
       [](fixture& x) {
         x.clear(f::vm_entry_controls, bit(2));
         x.set(f::guest_dr7, bit(32) | 0x400);
       }},
      {"IA32_DEBUGCTL reserved bit without load debug controls", nullptr,
       [](fixture& x) {
         x.clear(f::vm_entry_controls, bit(2));
         x.set(f::guest_ia32_debugctl, bit(2));
       }},
      {"IA32_PAT invalid without load IA32_PAT", nullptr,
       [](fixture& x) { x.set(f::guest_ia32_pat, 0x0007040600080406); }},
      {"IA32_EFER reserved bit without load IA32_EFER", nullptr,
       [](fixture& x) {
         x.clear(f::vm_entry_controls, bit(15));
         x.set(f::guest_ia32_efer, bit(12) | 0xd00);
       }},
      {"IA32_EFER.LMA clear without load IA32_EFER", nullptr,
       [](fixture& x) {
         x.clear(f::vm_entry_controls, bit(15));
         x.set(f::guest_ia32_efer, 0);
       }},
      {"IA32_BNDCFGS reserved bits without load IA32_BNDCFGS", nullptr,
       [](fixture& x) { x.set(f::guest_ia32_bndcfgs, bit(2)); }},
      // "the linear address in bits 63:12 must be canonical" (IA32_BNDCFGS, load IA32_BNDCFGS).
      {"IA32_BNDCFGS base not canonical", "guest_bndcfgs_invalid",
       [](fixture& x) {
         fixture::allow(x.env.caps.true_entry, bit(16));
         x.or_(f::vm_entry_controls, bit(16));
         x.set(f::guest_ia32_bndcfgs, 0x0000800000000000);
       }},
      {"IA32_PKRS bits 63:32 without load PKRS", nullptr, [](fixture& x) { x.set(f::guest_ia32_pkrs, bit(40)); }},
      // 27.3.1.2 base addresses, outside IA-32e mode: "CS. Bits 63:32 of the address must be
      // zero." "SS, DS, ES. If the register is usable, bits 63:32 of the base address must be
      // zero."
      {"32-bit guest, DS base bit 32", "guest_ss_ds_es_base_high",
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_ds_base, bit(32));
       }},
      {"32-bit guest, unusable DS base bit 32", nullptr,
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_ds_access_rights, 0x10000);
         x.set(f::guest_ds_base, bit(32));
       }},
      // CS "If the Type is 3 (read/write accessed expand-up data segment), the DPL must be 0."
      {"unrestricted guest, CS type 3 DPL 0", nullptr,
       [](fixture& x) {
         guest32(x);
         unrestricted(x);
         x.set(f::guest_cs_access_rights, 0xc093);
       }},
      {"unrestricted guest, CS type 3 DPL 3", "guest_cs_dpl",
       [](fixture& x) {
         guest32(x);
         unrestricted(x);
         x.set(f::guest_cs_access_rights, 0xc0f3);
       }},
      // "L (bit 13): If the register is CS and IA-32e mode guest is 1 ... if L is 1, D/B must
      // be 0": outside IA-32e mode L with D/B is not checked.
      {"32-bit guest, CS L and D/B", nullptr,
       [](fixture& x) {
         guest32(x);
         x.set(f::guest_cs_access_rights, 0xe09b);
       }},
  };
  for (const auto& c : variants) {
    SCOPED_TRACE(c.what);
    fixture x;
    golden(x);
    c.change(x);
    const auto v = run(x);
    if (c.rule == nullptr) {
      EXPECT_TRUE(v.ok()) << (v.rule ? v.rule->name : "");
      continue;
    }
    ASSERT_FALSE(v.ok());
    ASSERT_NE(v.rule, nullptr);
    EXPECT_STREQ(v.rule->name, c.rule);
    EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::entry_failure);
    EXPECT_EQ(v.exit_reason, 0x80000021u);  // 33 with bit 31: VM-entry failure, invalid guest state
  }
}

// Host-state and control rules beyond the one case per rule above: each field a rule names,
// and each rule's condition that makes it not apply. Sentences from SDM Vol. 3C 27.2.
TEST(VmEntryChecks, HostAndControlVariants) {
  struct variant {
    const char* what;
    const char* rule;  // nullptr: the entry passes
    std::function<void(fixture&)> change;
  };
  const std::vector<variant> variants = {
      // 27.2.3: "the base-address fields for FS, GS, GDTR, IDTR, and TR must contain
      // canonical addresses" (FS is the case above).
      {"host GS base", "host_base_not_canonical", [](fixture& x) { x.set(f::host_gs_base, 0x0000800000000000); }},
      {"host GDTR base", "host_base_not_canonical", [](fixture& x) { x.set(f::host_gdtr_base, 0xffff7fffffffffff); }},
      {"host IDTR base", "host_base_not_canonical", [](fixture& x) { x.set(f::host_idtr_base, bit(63)); }},
      {"host TR base", "host_base_not_canonical", [](fixture& x) { x.set(f::host_tr_base, bit(48)); }},
      // 27.2.2: "If the “load IA32_EFER” VM-exit control is 1, ... Bits reserved in the
      // IA32_EFER MSR must be 0. Bit 10 (corresponding to IA32_EFER.LMA) must equal the value
      // of the “host address-space size” VM-exit control. It must also be identical to bit 8
      // (LME)." (LME cleared is the case above; here LMA.)
      {"host EFER.LMA clear, LME set", "host_efer_lma_lme_mismatch",
       [](fixture& x) { x.set(f::host_ia32_efer, 0x100); }},
      // The same checks apply only with the control 1.
      {"host EFER reserved bit, load IA32_EFER 0", nullptr,
       [](fixture& x) {
         x.clear(f::primary_vm_exit_controls, bit(21));
         x.set(f::host_ia32_efer, bit(1));
       }},
      // "If the “load IA32_PAT” VM-exit control is 1, the value of the field for the IA32_PAT
      // MSR must be one that could be written by WRMSR without fault at CPL 0."
      {"host PAT invalid, load IA32_PAT 0", nullptr,
       [](fixture& x) {
         x.clear(f::primary_vm_exit_controls, bit(19));
         x.set(f::host_ia32_pat, 0x0007040600070402);
       }},
      // "If the “load IA32_PKRS” VM-exit control is 1, bits 63:32 of the IA32_PKRS field must
      // be 0."
      {"host PKRS bit 32, load PKRS 0", nullptr, [](fixture& x) { x.set(f::host_ia32_pkrs, bit(32)); }},
      // 27.2.4: "If the logical processor is outside IA-32e mode ... the “IA-32e mode guest”
      // VM-entry control must be 0" (the host-size half is the case above).
      {"IA-32e guest outside IA-32e mode", "ia32e_controls_outside_ia32e_mode",
       [](fixture& x) {
         host32(x);
         x.or_(f::vm_entry_controls, bit(9));
       }},
      // 27.2.1.1: "If the “use MSR bitmaps” VM-execution control is 1, bits 11:0 of the MSR-
      // bitmap address must be 0": with the control 0 the address is not checked.
      {"MSR-bitmap address unaligned, use MSR bitmaps 0", nullptr,
       [](fixture& x) {
         x.clear(f::primary_processor_based_controls, bit(28));
         x.set(f::msr_bitmap, 0x1234);
       }},
      // "If the “enable VPID” VM-execution control is 1, the value of the VPID VM-execution
      // control field must not be 0000H."
      {"enable VPID with VPID 1", nullptr,
       [](fixture& x) {
         x.or_(f::secondary_processor_based_controls, bit(5));
         x.set(f::virtual_processor_id, 1);
       }},
      // 27.2.1.2: "If the “activate VMX-preemption timer” VM-execution control is 0, the “save
      // VMX-preemption timer value” VM-exit control must also be 0": both 1 is allowed.
      {"save and activate preemption timer", nullptr,
       [](fixture& x) {
         x.or_(f::pin_based_controls, bit(6));
         x.or_(f::primary_vm_exit_controls, bit(22));
       }},
  };
  for (const auto& c : variants) {
    SCOPED_TRACE(c.what);
    fixture x;
    golden(x);
    c.change(x);
    const auto v = run(x);
    if (c.rule == nullptr) {
      EXPECT_TRUE(v.ok()) << (v.rule ? v.rule->name : "");
      continue;
    }
    ASSERT_FALSE(v.ok());
    ASSERT_NE(v.rule, nullptr);
    EXPECT_STREQ(v.rule->name, c.rule);
    EXPECT_EQ(v.outcome, vmx::vm_entry_outcome::vm_fail_valid);
    EXPECT_EQ(static_cast<unsigned>(v.error), 8u);  // "VM entry with invalid host-state field(s)"
  }
}

// The three outcomes by the SDM's names (31.2 "VMfailValid"; 27.8 "VM-entry failure"); a
// value outside the enumeration has no name.
TEST(VmEntryChecks, OutcomeNames) {
  EXPECT_STREQ(vmx::outcome_name(vmx::vm_entry_outcome::success), "success");
  EXPECT_STREQ(vmx::outcome_name(vmx::vm_entry_outcome::vm_fail_valid), "VMfailValid");
  EXPECT_STREQ(vmx::outcome_name(vmx::vm_entry_outcome::entry_failure), "VM-entry failure");
  EXPECT_STREQ(vmx::outcome_name(static_cast<vmx::vm_entry_outcome>(7)), "?");
}

// A VM-entry failure's exit reason has bit 31 set and the basic reason (33: invalid guest
// state, 34: MSR loading) in bits 15:0 (SDM 27.8, 25.9.1); same_outcome compares what the
// processor reports (outcome, error, exit reason, qualification), not which rule a checker
// named.
TEST(VmEntryChecks, VerdictBasicReasonAndSameOutcome) {
  vmx::vm_entry_verdict a;
  a.outcome = vmx::vm_entry_outcome::entry_failure;
  a.exit_reason = 0x8000'0000u | vmx::exit_reason_msr_loading;
  a.exit_qualification = 3;
  EXPECT_EQ(a.basic_exit_reason(), 34u);
  EXPECT_FALSE(a.ok());
  vmx::vm_entry_verdict b = a;
  b.rule = nullptr;
  b.msr.index = 0x10;
  EXPECT_TRUE(same_outcome(a, b));
  b.exit_qualification = 4;
  EXPECT_FALSE(same_outcome(a, b));
  b = a;
  b.exit_reason = 0x8000'0000u | vmx::exit_reason_invalid_guest_state;
  EXPECT_EQ(b.basic_exit_reason(), 33u);
  EXPECT_FALSE(same_outcome(a, b));
  b = a;
  b.outcome = vmx::vm_entry_outcome::vm_fail_valid;
  EXPECT_FALSE(same_outcome(a, b));
  b = a;
  b.error = vmx::vm_instruction_error::unsupported_vmcs_component;
  EXPECT_FALSE(same_outcome(a, b));
}
