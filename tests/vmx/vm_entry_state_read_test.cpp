// SPDX-License-Identifier: MIT
// vmx::read_vm_entry_state (vmx/vm_entry_state.hpp) when a VMREAD fails, field by field, and
// where it takes the guest PDPTEs from.
//   A field the checks always need: its VMREAD failure is the result ("Fails with the
//   backend's error if a needed field cannot be read").
//   A field read only because a control that uses it is 1: SDM Vol. 3D Appendix B marks such
//   fields "This field exists only on processors that support the 1-setting of the ...
//   VM-execution control" (e.g. guest PDPTE0-3, 280AH-2811H, with "enable EPT"; guest IA32_PAT,
//   2804H, with "load IA32_PAT"; tertiary controls, 2034H, with "activate tertiary
//   controls"): a failed read counts in unreadable_fields and reads as 0, and the read goes on.
//   SDM 27.3.1.6 / 4.4.1: with CR0.PG = 1, CR4.PAE = 1 and "IA-32e mode guest" = 0 the guest
//   uses PAE paging; with "enable EPT" = 0 the PDPTEs come from the PDPT that CR3 bits 31:5
//   locate (four 8-byte entries), with "enable EPT" = 1 from the guest-PDPTE fields.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "../support/probe_vmcs.hpp"
#include <hvkit/vmx/vm_entry_state.hpp>

namespace vmx = hvkit::vmx;
namespace f = hvkit::vmx::fields;

namespace {

using hvkit::test::probe_vmcs;


constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }

// Every control 1 (so every conditional field is read), a 32-bit PAE guest (CR0.PG, CR4.PAE,
// "IA-32e mode guest" = 0), EPT on or off, the VMCS link pointer set.
probe_vmcs every_control(bool ept) {
  probe_vmcs v;
  v.inner.store(f::pin_based_controls.encoding, 0xffffffff);
  v.inner.store(f::primary_processor_based_controls.encoding, 0xffffffff);
  v.inner.store(f::secondary_processor_based_controls.encoding, ept ? 0xffffffff : 0xffffffff & ~bit(1));
  v.inner.store(f::tertiary_processor_based_controls.encoding, ~std::uint64_t{0});
  v.inner.store(f::primary_vm_exit_controls.encoding, 0xffffffff);
  v.inner.store(f::vm_entry_controls.encoding, 0xffffffff & ~bit(9));  // not IA-32e mode
  v.inner.store(f::guest_cr0.encoding, 0x80000011);                     // PG, ET, PE
  v.inner.store(f::guest_cr4.encoding, 0x20);                           // PAE
  v.inner.store(f::guest_cr3.encoding, 0x1fe3);                         // PDPT at 1FE0H (bits 31:5)
  v.inner.store(f::vmcs_link_pointer.encoding, 0x3000);
  v.inner.store(f::guest_pdpte0.encoding, 0x11);
  v.inner.store(f::guest_pdpte1.encoding, 0x21);
  v.inner.store(f::guest_pdpte2.encoding, 0x31);
  v.inner.store(f::guest_pdpte3.encoding, 0x41);
  return v;
}

struct memory {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x4000, 0);
  memory() {
    for (unsigned i = 0; i < 4; ++i) {
      const std::uint64_t e = 0x100001 + 0x1000 * i;
      std::memcpy(&bytes[0x1fe0 + 8 * i], &e, 8);
    }
    const std::uint32_t revision = 0x12345;
    std::memcpy(&bytes[0x3000], &revision, 4);
  }
  hvkit::paging::flat_memory view() { return {bytes.data(), bytes.size()}; }
};

TEST(vmx_vm_entry_state_read, pdptes_from_cr3_without_ept_and_from_the_vmcs_with_it) {
  memory m;
  auto no_ept = every_control(false);
  auto s = vmx::read_vm_entry_state(no_ept, m.view());
  ASSERT_TRUE(s.has_value());
  ASSERT_TRUE(s->guest_pae_paging());
  EXPECT_TRUE(s->pdptes_known);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(s->pdpte[i], 0x100001u + 0x1000u * i) << i;
  EXPECT_TRUE(s->link_revision_known);
  EXPECT_EQ(s->link_revision, 0x12345u);
  // No guest-PDPTE field was read without EPT.
  for (auto e : no_ept.reads) EXPECT_FALSE(e >= 0x280a && e <= 0x2811) << std::hex << e;

  auto with_ept = every_control(true);
  s = vmx::read_vm_entry_state(with_ept, m.view());
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->pdptes_known);
  EXPECT_EQ(s->pdpte, (std::array<std::uint64_t, 4>{0x11, 0x21, 0x31, 0x41}));

  // The PDPT outside memory: the PDPTEs are unknown (and the link pointer's revision too).
  auto far = every_control(false);
  far.inner.store(f::guest_cr3.encoding, 0x7fffffe0);
  far.inner.store(f::vmcs_link_pointer.encoding, 0x7fff0000);
  s = vmx::read_vm_entry_state(far, m.view());
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->pdptes_known);
  EXPECT_FALSE(s->link_revision_known);
  // Without a memory view nothing is read from memory.
  auto none = every_control(false);
  s = vmx::read_vm_entry_state(none);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->pdptes_known);
  EXPECT_FALSE(s->link_revision_known);
}

TEST(vmx_vm_entry_state_read, a_failed_vmread_of_each_field) {
  memory m;
  for (bool ept : {false, true}) {
    auto all = every_control(ept);
    ASSERT_TRUE(vmx::read_vm_entry_state(all, m.view()).has_value());
    const std::set<std::uint32_t> read(all.reads.begin(), all.reads.end());
    ASSERT_GT(read.size(), 60u);
    std::set<std::uint32_t> optional;
    for (std::uint32_t enc : read) {
      auto v = every_control(ept);
      v.failing = enc;
      auto s = vmx::read_vm_entry_state(v, m.view());
      if (s) {
        EXPECT_EQ(s->unreadable_fields, 1u) << std::hex << enc;
        optional.insert(enc);
      } else {
        EXPECT_EQ(s.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc)) << std::hex << enc;
      }
    }
    // Fields every VMX processor has (SDM Appendix B, no "exists only" note): a failed read
    // is the result.
    for (std::uint32_t enc : {0x4000u /*pin-based*/, 0x4002u /*primary*/, 0x400cu /*exit*/, 0x4012u /*entry*/,
                              0x6800u /*guest CR0*/, 0x6802u /*guest CR3*/, 0x6804u /*guest CR4*/,
                              0x681eu /*guest RIP*/, 0x6820u /*guest RFLAGS*/, 0x2800u /*VMCS link*/}) {
      EXPECT_TRUE(read.count(enc)) << std::hex << enc;
      EXPECT_FALSE(optional.count(enc)) << std::hex << enc;
    }
    // Fields that "exist only on processors that support the 1-setting of" a control.
    EXPECT_TRUE(optional.count(0x2804));  // guest IA32_PAT: "load IA32_PAT"
    EXPECT_TRUE(optional.count(0x2034));  // tertiary controls: "activate tertiary controls"
    EXPECT_TRUE(optional.count(0x2000));  // I/O bitmap A: "use I/O bitmaps"
    EXPECT_TRUE(optional.count(0x2004));  // MSR bitmaps: "use MSR bitmaps"
    if (ept) {
      for (std::uint32_t enc = 0x280a; enc <= 0x2810; enc += 2) EXPECT_TRUE(optional.count(enc)) << std::hex << enc;
    }
  }
}

}  // namespace
