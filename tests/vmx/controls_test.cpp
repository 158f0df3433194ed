// SPDX-License-Identifier: MIT
// Control adjustment against the capability MSRs Bochs 2.7 reports for corei7_skylake_x
// (docs/bochs-and-qemu-facts.md), expected values worked out by hand from SDM A.3-A.5
// ((requested | allowed-0) & allowed-1), and CR0/CR4 fixed bits (SDM A.7, A.8, 27.3.1.1).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>

#include <hvkit/vmx/capabilities.hpp>
#include <hvkit/vmx/controls.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
using pp = vmx::primary_proc_based;
using sp = vmx::secondary_proc_based;

namespace {
// The Bochs corei7_skylake_x capability MSRs.
const std::map<std::uint32_t, std::uint64_t> bochs = {
    {0x480, 0x00d810000000002b}, {0x481, 0x0000007f00000016}, {0x48d, 0x0000007f00000016},
    {0x482, 0xf7f9fffe0401e172}, {0x48e, 0xf7f9fffe04006172}, {0x483, 0x007fffff00036dff},
    {0x48f, 0x007fffff00036dfb}, {0x484, 0x0000ffff000011ff}, {0x490, 0x0000ffff000011fb},
    {0x485, 0x00000000600401e0}, {0x48a, 0x34},               {0x486, 0x80000021},
    {0x487, 0xffffffff},         {0x488, 0x2000},             {0x489, 0x003727ff},
    {0x48b, 0x02177fff00000000}, {0x48c, 0x00000f0106334141}, {0x491, 0x1},
};
vmx::vmx_capabilities read_bochs(int* reads = nullptr) {
  return vmx::vmx_capabilities::read([&](std::uint32_t m) -> std::uint64_t {
    if (reads) ++*reads;
    auto it = bochs.find(m);
    EXPECT_NE(it, bochs.end()) << "read of an MSR Bochs does not have: 0x" << std::hex << m;
    return it == bochs.end() ? 0 : it->second;
  });
}
constexpr vmx::vmx_capabilities bochs_const() {
  vmx::vmx_capabilities c;
  c.basic = 0x00d810000000002b;
  c.pinbased = c.true_pinbased = 0x0000007f00000016;
  c.procbased = 0xf7f9fffe0401e172;
  c.true_procbased = 0xf7f9fffe04006172;
  c.exit = 0x007fffff00036dff;
  c.true_exit = 0x007fffff00036dfb;
  c.entry = 0x0000ffff000011ff;
  c.true_entry = 0x0000ffff000011fb;
  c.procbased2 = 0x02177fff00000000;
  c.cr0_fixed0 = 0x80000021;
  c.cr0_fixed1 = 0xffffffff;
  c.cr4_fixed0 = 0x2000;
  c.cr4_fixed1 = 0x003727ff;
  return c;
}
}  // namespace

TEST(vmx_controls, named_bits_and_default1) {
  // Table 25-6 bit positions, typed by hand.
  HVKIT_BOTH(pp::hlt_exiting.raw() == 0x80u);
  HVKIT_BOTH(pp::use_msr_bitmaps.raw() == 0x1000'0000u);
  HVKIT_BOTH(pp::activate_secondary_controls.raw() == 0x8000'0000u);
  HVKIT_BOTH(sp::enable_ept.raw() == 0x2u && sp::unrestricted_guest.raw() == 0x80u && sp::enable_vpid.raw() == 0x20u);
  HVKIT_BOTH(vmx::exit_controls::host_address_space_size.raw() == 0x200u);
  HVKIT_BOTH(vmx::entry_controls::ia32e_mode_guest.raw() == 0x200u);
  // Newer bits (PASID translation; FRED: entry control 23, secondary exit controls 0 and 1).
  HVKIT_BOTH(sp::pasid_translation.raw() == 0x20'0000u);
  HVKIT_BOTH(sp::enable_xsaves_xrstors.raw() == 0x10'0000u && sp::mode_based_execute_control.raw() == 0x40'0000u);
  HVKIT_BOTH(vmx::entry_controls::load_ia32_fred.raw() == 0x80'0000u);
  HVKIT_BOTH(vmx::secondary_exit_controls::save_ia32_fred.raw() == 0x1u);
  HVKIT_BOTH(vmx::secondary_exit_controls::load_ia32_fred.raw() == 0x2u);
  // default1 classes (SDM A.2) equal Bochs' non-TRUE allowed-0 halves.
  HVKIT_BOTH(vmx::pin_based::default1.raw() == 0x16u);
  HVKIT_BOTH(pp::default1.raw() == 0x0401e172u);
  HVKIT_BOTH(vmx::exit_controls::default1.raw() == 0x36dffu);
  HVKIT_BOTH(vmx::entry_controls::default1.raw() == 0x11ffu);
}

TEST(vmx_controls, reads_capabilities_like_the_sdm_says) {
  int reads = 0;
  const auto c = read_bochs(&reads);
  EXPECT_TRUE(c.has_true_controls());  // BASIC bit 55
  EXPECT_EQ(c.revision_id(), 0x2bu);
  EXPECT_EQ(c.true_procbased, 0xf7f9fffe04006172u);
  EXPECT_EQ(c.procbased2, 0x02177fff00000000u);
  EXPECT_EQ(c.ept_vpid_cap, 0x00000f0106334141u);
  EXPECT_EQ(c.vmfunc, 0x1u);
  EXPECT_EQ(c.procbased3, 0u);  // tertiary controls not allowed-1: MSR 0x492 never read
  EXPECT_EQ(reads, 17);  // 10 base + 4 TRUE + CTLS2 + EPT_VPID_CAP + VMFUNC
  EXPECT_TRUE(c.vmwrite_any_field());  // MISC 0x600401e0 bit 29
}

TEST(vmx_controls, adjust_with_true_msrs) {
  constexpr auto c = bochs_const();
  // Primary: HLT exiting, MSR bitmaps, secondary controls; TRUE allowed-0 0x04006172.
  constexpr auto p = vmx::adjust_controls(c.primary_caps(), pp::hlt_exiting | pp::use_msr_bitmaps | pp::activate_secondary_controls);
  HVKIT_BOTH(p.has_value() && p.value().raw() == 0x940061f2u);
  // CR3-load exiting may be cleared with the TRUE MSR...
  constexpr auto p2 = vmx::adjust_controls(c.primary_caps(), pp::hlt_exiting, pp{}, pp::cr3_load_exiting | pp::cr3_store_exiting);
  HVKIT_BOTH(p2.has_value() && p2.value().raw() == 0x040061f2u);
  // ...but not with the legacy one (allowed-0 0x0401e172 forces bits 15 and 16).
  constexpr auto legacy = vmx::control_capability::from_msr(c.procbased);
  constexpr auto p3 = vmx::adjust_controls(legacy, pp::hlt_exiting, pp{}, pp::cr3_load_exiting);
  HVKIT_BOTH(!p3.has_value() && p3.error().cannot_clear.raw() == 0x8000u);
  constexpr auto p4 = vmx::adjust_controls(legacy, pp::hlt_exiting | pp::use_msr_bitmaps | pp::activate_secondary_controls);
  HVKIT_BOTH(p4.value().raw() == 0x9401e1f2u);
  // Monitor trap flag (bit 27) is not allowed-1 on this model: reported, nothing else.
  constexpr auto m = vmx::adjust_controls(c.primary_caps(), pp::hlt_exiting | pp::monitor_trap_flag);
  HVKIT_BOTH(!m.has_value() && m.error().unsupported == pp::monitor_trap_flag && m.error().cannot_clear.none());
  // ...but as an optional bit it is dropped silently.
  constexpr auto m2 = vmx::adjust_controls(c.primary_caps(), pp::hlt_exiting, pp::monitor_trap_flag);
  HVKIT_BOTH(m2.has_value() && m2.value().raw() == 0x040061f2u);
}

TEST(vmx_controls, adjust_pin_secondary_exit_entry) {
  constexpr auto c = bochs_const();
  constexpr auto pin = vmx::adjust_controls(c.pin_caps(), vmx::pin_based::external_interrupt_exiting | vmx::pin_based::nmi_exiting);
  HVKIT_BOTH(pin.value().raw() == 0x1fu);
  constexpr auto posted = vmx::adjust_controls(c.pin_caps(), vmx::pin_based::process_posted_interrupts);
  HVKIT_BOTH(!posted.has_value() && posted.error().unsupported.raw() == 0x80u);
  constexpr auto sec = vmx::adjust_controls(c.secondary_caps(), sp::enable_ept | sp::unrestricted_guest | sp::enable_vpid);
  HVKIT_BOTH(sec.value().raw() == 0xa2u);
  constexpr auto mbec = vmx::adjust_controls(c.secondary_caps(), sp::enable_ept | sp::mode_based_execute_control | sp::enable_pml);
  HVKIT_BOTH(!mbec.has_value() && mbec.error().unsupported.raw() == 0x40'0000u);
  using ex = vmx::exit_controls;
  constexpr auto e = vmx::adjust_controls(c.exit_caps(), ex::host_address_space_size | ex::acknowledge_interrupt_on_exit |
                                                             ex::save_ia32_efer | ex::load_ia32_efer);
  HVKIT_BOTH(e.value().raw() == 0x33effbu);
  constexpr auto cet = vmx::adjust_controls(c.exit_caps(), ex::load_cet_state);
  HVKIT_BOTH(!cet.has_value() && cet.error().unsupported.raw() == 0x1000'0000u);
  using en = vmx::entry_controls;
  constexpr auto n = vmx::adjust_controls(c.entry_caps(), en::ia32e_mode_guest | en::load_ia32_pat | en::load_ia32_efer);
  HVKIT_BOTH(n.value().raw() == 0xd3fbu);
  // Without BASIC bit 55 the legacy MSRs apply: save-debug-controls (bit 2) forced.
  constexpr auto legacy = [] {
    auto l = bochs_const();
    l.basic &= ~(1ull << 55);
    return l;
  }();
  constexpr auto n2 = vmx::adjust_controls(legacy.entry_caps(), en::ia32e_mode_guest);
  HVKIT_BOTH(n2.value().raw() == 0x13ffu);
  // Tertiary: no allowed-1 bits on this model.
  HVKIT_BOTH(!vmx::adjust_tertiary(c.tertiary_allowed1(), vmx::tertiary_proc_based::ipi_virtualization).has_value());
}

TEST(vmx_controls, cr_fixed_bits) {
  constexpr auto c = bochs_const();
  // CR0 FIXED0 0x80000021 (PE, NE, PG), FIXED1 0xffffffff.
  HVKIT_BOTH(vmx::adjust_cr0(x86::cr0{0}, c.cr0_fixed()).raw() == 0x8000'0021u);
  // Unrestricted guest: PE and PG exempt, NE still forced.
  HVKIT_BOTH(vmx::adjust_cr0(x86::cr0{0}, c.cr0_fixed(), true).raw() == 0x20u);
  HVKIT_BOTH(vmx::cr0_fixed_violations(x86::cr0{0x11}, c.cr0_fixed()).raw() == 0x8000'0020u);
  HVKIT_BOTH(vmx::cr0_fixed_violations(x86::cr0{0x11}, c.cr0_fixed(), true).raw() == 0x20u);
  HVKIT_BOTH(vmx::cr0_fixed_violations(x86::cr0{0x1'8000'0031}, c.cr0_fixed()).raw() == 0x1'0000'0000u);
  // CR4 FIXED0 0x2000 (VMXE), FIXED1 0x003727ff: UMIP (11) and LA57 (12) must be 0.
  HVKIT_BOTH(vmx::adjust_cr4(x86::cr4{0x20}, c.cr4_fixed()).raw() == 0x2020u);
  HVKIT_BOTH(vmx::adjust_cr4(x86::cr4{0x1820}, c.cr4_fixed()).raw() == 0x2020u);
  HVKIT_BOTH(vmx::cr4_fixed_violations(x86::cr4{0x3020}, c.cr4_fixed()).raw() == 0x1000u);
  HVKIT_BOTH(vmx::cr4_fixed_violations(x86::cr4{0x20}, c.cr4_fixed()).raw() == 0x2000u);
}

TEST(vmx_controls, adjust_matches_rule_model_exhaustively_per_bit) {
  // For each control word and each single requested bit, compare with the rule written here.
  // The capability the rule uses is split here from the raw MSR value (SDM A.3-A.5: allowed-0
  // settings in bits 31:0, allowed-1 in bits 63:32), taking the TRUE MSR where BASIC bit 55 is
  // set (0x48D, 0x48E, 0x48F, 0x490) and PROCBASED_CTLS2 (0x48B), not from the library's choice.
  const auto c = read_bochs();
  std::size_t n = 0;
  const struct {
    vmx::control_capability cap;
    std::uint32_t msr;
  } words[] = {{c.pin_caps(), 0x48d}, {c.primary_caps(), 0x48e}, {c.secondary_caps(), 0x48b},
               {c.exit_caps(), 0x48f}, {c.entry_caps(), 0x490}};
  for (const auto& w : words) {
    const std::uint64_t raw = bochs.at(w.msr);
    const auto must1 = static_cast<std::uint32_t>(raw), may1 = static_cast<std::uint32_t>(raw >> 32);
    for (unsigned b = 0; b < 32; ++b) {
      const std::uint32_t req = 1u << b;
      auto r = vmx::adjust_controls(w.cap, pp{req});
      const bool model_ok = (req & ~may1) == 0;
      EXPECT_EQ(r.has_value(), model_ok) << std::hex << w.msr << " bit " << std::dec << b;
      if (model_ok) {
        EXPECT_EQ(r.value().raw(), (req | must1) & may1);
      } else {
        EXPECT_EQ(r.error().unsupported.raw(), req);
      }
      ++n;
    }
  }
  std::printf("compared %zu single-bit control requests with the allowed-0/allowed-1 rule\n", n);
}
