// SPDX-License-Identifier: MIT
// The software VMCS against VMREAD/VMWRITE semantics (SDM 31.3, error numbers from 31.4)
// and the caching decorator's promise: one backend read per field between exits, dirty
// fields written back on flush.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace f = hvkit::vmx::fields;

TEST(soft_vmcs, typed_round_trip_and_widths) {
  vmx::soft_vmcs v;
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_rip, std::uint64_t{0xffff'8000'1234'5678}));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_cs_selector, std::uint16_t{0x10}));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_cs_limit, std::uint32_t{0xffff'ffff}));
  EXPECT_EQ(vmx::vmread(v, f::guest_rip).value(), 0xffff'8000'1234'5678u);
  EXPECT_EQ(vmx::vmread(v, f::guest_cs_selector).value(), 0x10u);
  std::uint32_t lim = 0;
  ASSERT_TRUE(vmx::vmread(v, f::guest_cs_limit, lim));
  EXPECT_EQ(lim, 0xffff'ffffu);
  // A raw write keeps only the field's bits (SDM VMWRITE: excess source bits ignored).
  ASSERT_TRUE(v.write(0x0800, 0x1234'5678));
  EXPECT_EQ(v.read(0x0800).value(), 0x5678u);
  ASSERT_TRUE(v.write(0x4800, 0x1'2345'6789));
  EXPECT_EQ(v.read(0x4800).value(), 0x2345'6789u);
}

// Typed values: a field that holds a register takes that register type, and any field takes
// an integer constant that fits it. Expected raw values are the SDM bit positions (CR0.PE
// bit 0, CR0.PG bit 31, SDM 2.5; EFER.LME bit 8, LMA bit 10, NXE bit 11, SDM 2.2.1; RFLAGS
// bit 1 fixed, IF bit 9, SDM 3.4.3; selector index 15:3, TI 2, RPL 1:0, SDM 3.4.2).
TEST(soft_vmcs, typed_register_values_and_constants) {
  namespace x86 = hvkit::x86;
  vmx::soft_vmcs v;
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_cr0, x86::cr0::pe | x86::cr0::pg));
  ASSERT_TRUE(vmx::vmwrite(v, f::cr4_read_shadow, x86::cr4::pae));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_ia32_efer, x86::efer::lme | x86::efer::lma | x86::efer::nxe));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_rflags, x86::rflags::fixed1 | x86::rflags::if_));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_ss_selector, x86::selector::make(3, 3, true)));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_cs_selector, 0x10));
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_es_selector, 0xffff));  // the widest constant that fits
  ASSERT_TRUE(vmx::vmwrite(v, f::guest_rip, 0x7c00));
  ASSERT_TRUE(vmx::vmwrite(v, f::tsc_offset, 0xffff'ffff'ffff'ffffull));
  EXPECT_EQ(v.read(0x6800).value(), 0x8000'0001u);
  EXPECT_EQ(v.read(0x6006).value(), 0x20u);
  EXPECT_EQ(v.read(0x2806).value(), 0xd00u);
  EXPECT_EQ(v.read(0x6820).value(), 0x202u);
  EXPECT_EQ(v.read(0x0804).value(), 0x1fu);
  EXPECT_EQ(v.read(0x0802).value(), 0x10u);
  EXPECT_EQ(v.read(0x0800).value(), 0xffffu);
  EXPECT_EQ(v.read(0x681e).value(), 0x7c00u);
  EXPECT_EQ(v.read(0x2010).value(), ~std::uint64_t{0});
  // Reading back into the register type.
  x86::cr0 cr0;
  ASSERT_TRUE(vmx::vmread(v, f::guest_cr0, cr0));
  EXPECT_TRUE(cr0.test(x86::cr0::pg) && cr0.test(x86::cr0::pe) && !cr0.test(x86::cr0::wp));
  x86::selector ss;
  ASSERT_TRUE(vmx::vmread(v, f::guest_ss_selector, ss));
  EXPECT_EQ(ss.index(), 3u);
  EXPECT_EQ(ss.rpl(), 3u);
  EXPECT_TRUE(ss.ldt());
  // The cache takes the same values.
  vmx::cached_vmcs c(v);
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_cr0, x86::cr0::pe));
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(v.read(0x6800).value(), 1u);
  // store() (the CPU's side) takes them too.
  v.store(f::guest_cr4, x86::cr4::pae | x86::cr4::vmxe);
  EXPECT_EQ(v.peek(f::guest_cr4), 0x2020u);
}

TEST(soft_vmcs, high_half_access) {
  vmx::soft_vmcs v;
  ASSERT_TRUE(vmx::vmwrite(v, f::tsc_offset, std::uint64_t{0x1111'2222'3333'4444}));
  EXPECT_EQ(vmx::vmread(v, vmx::high_half(f::tsc_offset)).value(), 0x1111'2222u);
  ASSERT_TRUE(vmx::vmwrite(v, vmx::high_half(f::tsc_offset), std::uint32_t{0xaaaa'bbbb}));
  EXPECT_EQ(vmx::vmread(v, f::tsc_offset).value(), 0xaaaa'bbbb'3333'4444u);
}

TEST(soft_vmcs, failures_are_sdm_errors) {
  vmx::soft_vmcs v;
  // Unsupported component: error 12 (SDM 31.4), reported with the encoding.
  auto r = v.read(0x6830);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().how, vmx::vm_fail::kind::valid);
  EXPECT_EQ(static_cast<std::uint32_t>(r.error().error), 12u);
  EXPECT_EQ(r.error().field_encoding, 0x6830u);
  // Read-only component: error 13.
  auto w = v.write(0x4402, 28);
  ASSERT_FALSE(w);
  EXPECT_EQ(static_cast<std::uint32_t>(w.error().error), 13u);
  EXPECT_EQ(w.error().instruction, vmx::vmx_instruction::vmwrite);
  // With IA32_VMX_MISC bit 29 emulated, VMWRITE may write exit information.
  vmx::soft_vmcs any(true);
  ASSERT_TRUE(any.write(0x4402, 28));
  EXPECT_EQ(any.peek(f::exit_reason), 28u);
}

TEST(soft_vmcs, constexpr_use) {
  constexpr auto rip = [] {
    vmx::soft_vmcs v;
    (void)vmx::vmwrite(v, f::guest_rip, std::uint64_t{0x7c00});
    return vmx::vmread(v, f::guest_rip).value();
  }();
  static_assert(rip == 0x7c00);
  EXPECT_EQ(rip, 0x7c00u);
}

TEST(cached_vmcs, reads_each_field_once_between_exits) {
  vmx::soft_vmcs v;
  v.store(f::exit_reason, std::uint32_t{28});
  v.store(f::guest_rip, std::uint64_t{0x1000});
  vmx::cached_vmcs c(v);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(vmx::vmread(c, f::exit_reason).value(), 28u);
    EXPECT_EQ(vmx::vmread(c, f::guest_rip).value(), 0x1000u);
  }
  EXPECT_EQ(v.reads(), 2u);
  EXPECT_TRUE(c.is_available(f::guest_rip));
  // HIGH half of a cached 64-bit field is served from the full entry.
  v.store(f::guest_ia32_efer, std::uint64_t{0x5'0000'0d01});
  EXPECT_EQ(vmx::vmread(c, vmx::high_half(f::guest_ia32_efer)).value(), 5u);
  EXPECT_EQ(vmx::vmread(c, f::guest_ia32_efer).value(), 0x5'0000'0d01u);
  EXPECT_EQ(v.reads(), 3u);
  // A VM exit: the CPU rewrote the fields; the cache re-reads each once.
  c.on_vm_exit();
  v.store(f::exit_reason, std::uint32_t{10});
  EXPECT_EQ(vmx::vmread(c, f::exit_reason).value(), 10u);
  EXPECT_EQ(vmx::vmread(c, f::exit_reason).value(), 10u);
  EXPECT_EQ(v.reads(), 4u);
}

TEST(cached_vmcs, control_and_host_fields_survive_a_vm_exit) {
  vmx::soft_vmcs v;
  vmx::cached_vmcs c(v);
  v.store(f::cr4_guest_host_mask, vmx::natural_t{0x2000});
  v.store(f::host_rip, vmx::natural_t{0x10'0000});
  v.store(f::vm_entry_controls, std::uint32_t{0x200});
  v.store(f::vm_entry_interruption_info, std::uint32_t{0x8000'0b0d});
  v.store(f::ept_pointer, std::uint64_t{0x5e});
  v.store(f::guest_cr4, vmx::natural_t{0x2020});
  auto read_all = [&] {
    (void)vmx::vmread(c, f::cr4_guest_host_mask);
    (void)vmx::vmread(c, f::host_rip);
    (void)vmx::vmread(c, f::vm_entry_controls);
    (void)vmx::vmread(c, f::vm_entry_interruption_info);
    (void)vmx::vmread(c, f::ept_pointer);
    (void)vmx::vmread(c, f::guest_cr4);
  };
  read_all();
  EXPECT_EQ(v.reads(), 6u);
  c.on_vm_exit();
  // The exit saved EFER.LMA into the entry controls, cleared the injection's valid bit; the
  // guest may have switched EPTP with VMFUNC; guest state changed. Those four are re-read.
  v.store(f::vm_entry_controls, std::uint32_t{0});
  v.store(f::vm_entry_interruption_info, std::uint32_t{0x0000'0b0d});
  v.store(f::ept_pointer, std::uint64_t{0x6e});
  read_all();
  EXPECT_EQ(v.reads(), 10u);
  EXPECT_TRUE(c.is_available(f::cr4_guest_host_mask));
  EXPECT_EQ(vmx::vmread(c, f::vm_entry_controls).value(), 0u);
  EXPECT_EQ(vmx::vmread(c, f::vm_entry_interruption_info).value(), 0xb0du);
  EXPECT_EQ(vmx::vmread(c, f::ept_pointer).value(), 0x6eu);
}

TEST(cached_vmcs, writes_back_dirty_fields_on_flush) {
  vmx::soft_vmcs v;
  vmx::cached_vmcs c(v);
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_rip, std::uint64_t{0x2000}));
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_rip, std::uint64_t{0x2003}));
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_cs_selector, std::uint16_t{8}));
  EXPECT_EQ(v.writes(), 0u);
  EXPECT_EQ(v.peek(f::guest_rip), 0u);
  EXPECT_EQ(vmx::vmread(c, f::guest_rip).value(), 0x2003u);  // served from the cache
  EXPECT_EQ(v.reads(), 0u);
  EXPECT_TRUE(c.is_dirty(f::guest_rip));
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(v.writes(), 2u);  // two dirty fields, each written once
  EXPECT_EQ(v.peek(f::guest_rip), 0x2003u);
  EXPECT_EQ(v.peek(f::guest_cs_selector), 8u);
  EXPECT_FALSE(c.any_dirty());
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(v.writes(), 2u);  // nothing left to write
  // Writing a read-only field through the cache reports the backend's error 13.
  auto w = c.write(0x6400, 1);
  ASSERT_FALSE(w);
  EXPECT_EQ(static_cast<std::uint32_t>(w.error().error), 13u);
  // HIGH-half write through the cache: read-modify-write of the full field.
  v.store(f::tsc_offset, std::uint64_t{0x0000'0000'dead'beef});
  c.on_vm_exit();
  ASSERT_TRUE(vmx::vmwrite(c, vmx::high_half(f::tsc_offset), std::uint32_t{0x1234}));
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(v.peek(f::tsc_offset), 0x1234'dead'beefu);
}

// Every encoding 0..0x7fff (plus a few with bits above 14) through the software VMCS, against a
// rule model written here from SDM 25.11.2: a listed field or the HIGH half of a listed
// 64-bit field is accepted; width from bits 14:13; HIGH reads bits 63:32; read-only group = 1.
TEST(soft_vmcs, every_encoding_against_rule_model) {
  std::set<std::uint32_t> listed;
  for (const auto& row : vmx::field_table) listed.insert(row.encoding);
  auto model_width_bits = [](std::uint32_t e) -> unsigned {
    if (e & 1) return 32;
    switch ((e >> 13) & 3) {
      case 0: return 16;
      case 1: return 64;
      case 2: return 32;
      default: return 64;
    }
  };
  vmx::soft_vmcs v(true);  // VMWRITE to any field allowed, to exercise the exit-info rows too
  vmx::soft_vmcs strict;
  std::size_t n = 0, accepted = 0;
  for (std::uint32_t e = 0; e < 0x8000 + 4; ++e) {
    const std::uint32_t enc = e < 0x8000 ? e : (0x1'0000u << (e - 0x8000)) | 0x681e;
    const bool full = listed.count(enc) != 0;
    const bool high = (enc & 1) && listed.count(enc & ~1u) && ((enc >> 13) & 3) == 1;
    const bool model_ok = full || high;
    const std::uint64_t pattern = 0xfedc'ba98'7654'3210ull ^ enc;
    auto w = v.write(enc, pattern);
    auto r = v.read(enc);
    EXPECT_EQ(w.has_value(), model_ok) << std::hex << enc;
    EXPECT_EQ(r.has_value(), model_ok) << std::hex << enc;
    if (model_ok) {
      ++accepted;
      const unsigned bits = model_width_bits(enc);
      const std::uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
      EXPECT_EQ(r.value(), pattern & mask) << std::hex << enc;
      const bool read_only = ((enc >> 10) & 3) == 1;
      auto sw = strict.write(enc, pattern);
      EXPECT_EQ(sw.has_value(), !read_only) << std::hex << enc;
      if (read_only) {
        EXPECT_EQ(static_cast<unsigned>(sw.error().error), 13u);
      }
    } else {
      EXPECT_EQ(static_cast<unsigned>(r.error().error), 12u);
    }
    ++n;
  }
  // Every listed field, plus the HIGH half of each 64-bit one.
  std::size_t w64 = 0;
  for (auto e : listed) w64 += ((e >> 13) & 3) == 1;
  EXPECT_EQ(accepted, listed.size() + w64);
  std::printf("compared %zu encodings with the encoding rule model (%zu accepted)\n", n, accepted);
}

namespace {
// A backend whose VMWRITE of one encoding fails with VMfailValid(12): for the cache's error path.
struct failing_backend {
  vmx::soft_vmcs inner;
  std::uint32_t fail_on = 0;
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t e) { return inner.read(e); }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t e, std::uint64_t v) {
    if (e == fail_on)
      return hvkit::unexpected(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmwrite,
                                                        vmx::vm_instruction_error::unsupported_vmcs_component, e));
    return inner.write(e, v);
  }
};
}  // namespace

TEST(cached_vmcs, flush_stops_at_a_failing_field_and_keeps_it_dirty) {
  failing_backend b;
  b.fail_on = 0x681e;  // GUEST_RIP
  vmx::cached_vmcs c(b);
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_cs_selector, std::uint16_t{8}));  // slot before RIP
  ASSERT_TRUE(vmx::vmwrite(c, f::guest_rip, std::uint64_t{0x1000}));
  ASSERT_TRUE(vmx::vmwrite(c, f::host_rip, std::uint64_t{0x2000}));     // slot after RIP
  auto r = c.flush();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field_encoding, 0x681eu);
  EXPECT_EQ(b.inner.peek(f::guest_cs_selector), 8u);
  EXPECT_FALSE(c.is_dirty(f::guest_cs_selector));
  EXPECT_TRUE(c.is_dirty(f::guest_rip));
  EXPECT_TRUE(c.is_dirty(f::host_rip));
  b.fail_on = 0;
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(b.inner.peek(f::guest_rip), 0x1000u);
  EXPECT_EQ(b.inner.peek(f::host_rip), 0x2000u);
}

namespace {
// A backend whose VMREAD of one encoding fails: for the cache's miss path.
struct failing_read_backend {
  vmx::soft_vmcs inner;
  std::uint32_t fail_on = 0;
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t e) {
    if (e == fail_on)
      return hvkit::unexpected(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmread,
                                                        vmx::vm_instruction_error::unsupported_vmcs_component, e));
    return inner.read(e);
  }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t e, std::uint64_t v) { return inner.write(e, v); }
};
}  // namespace

// vmx::vmread/vmwrite reach the cache's typed members (slot resolved at compile time);
// cached_vmcs::read/write(encoding) resolve it at run time. Both must see the same state.
TEST(cached_vmcs, typed_and_by_encoding_access_agree) {
  static_assert(requires(vmx::cached_vmcs<vmx::soft_vmcs>& x) { x.read(f::guest_rip); },
                "vmx::vmread() on the cache should reach its typed member");
  vmx::soft_vmcs v;
  v.store(f::guest_ia32_efer, std::uint64_t{0x5'0000'0d01});
  v.store(f::guest_cs_selector, std::uint16_t{0x10});
  vmx::cached_vmcs c(v);
  // Typed miss, then by-encoding hits (full and HIGH) without another backend read.
  EXPECT_EQ(vmx::vmread(c, f::guest_ia32_efer).value(), 0x5'0000'0d01u);
  EXPECT_EQ(c.read(0x2806).value(), 0x5'0000'0d01u);  // GUEST_IA32_EFER, full
  EXPECT_EQ(c.read(0x2807).value(), 5u);              // HIGH
  EXPECT_EQ(v.reads(), 1u);
  // By-encoding miss, then a typed hit.
  EXPECT_EQ(c.read(0x0802).value(), 0x10u);  // GUEST_CS_SELECTOR
  EXPECT_EQ(vmx::vmread(c, f::guest_cs_selector).value(), 0x10u);
  EXPECT_EQ(v.reads(), 2u);
  // By-encoding write of a too-wide value keeps the field's width (SDM VMWRITE); typed read.
  ASSERT_TRUE(c.write(0x0802, 0xdead'0018));
  EXPECT_EQ(vmx::vmread(c, f::guest_cs_selector).value(), 0x18u);
  // Typed HIGH write, by-encoding read of the full field.
  ASSERT_TRUE(vmx::vmwrite(c, vmx::high_half(f::guest_ia32_efer), std::uint32_t{7}));
  EXPECT_EQ(c.read(0x2806).value(), 0x7'0000'0d01u);
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(v.peek(f::guest_ia32_efer), 0x7'0000'0d01u);
  EXPECT_EQ(v.peek(f::guest_cs_selector), 0x18u);
}

TEST(cached_vmcs, failed_typed_read_is_reported_and_not_cached) {
  failing_read_backend b;
  b.inner.store(f::guest_rip, std::uint64_t{0x1000});
  b.fail_on = 0x681e;  // GUEST_RIP
  vmx::cached_vmcs c(b);
  auto r = vmx::vmread(c, f::guest_rip);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field_encoding, 0x681eu);
  EXPECT_FALSE(c.is_available(f::guest_rip));
  b.fail_on = 0;
  EXPECT_EQ(vmx::vmread(c, f::guest_rip).value(), 0x1000u);
  EXPECT_TRUE(c.is_available(f::guest_rip));
  // A HIGH write needs the full field first; a failing read fails the write, nothing dirty.
  c.invalidate();
  b.fail_on = 0x2806;  // GUEST_IA32_EFER
  EXPECT_FALSE(vmx::vmwrite(c, vmx::high_half(f::guest_ia32_efer), std::uint32_t{1}));
  EXPECT_FALSE(c.any_dirty());
}

namespace {
// By encoding (run-time values): a HIGH access (bit 0 = 1) of a 64-bit field reads and writes
// bits 63:32 and leaves bits 31:0 (SDM 25.11.2: "the high 32 bits of a 64-bit field"); an
// encoding that names no field goes to the backend, which fails it with error 12 (SDM 31.4:
// "VMREAD/VMWRITE from/to unsupported VMCS component").
TEST(cached_vmcs, high_access_and_unknown_encoding_by_run_time_encoding) {
  failing_read_backend b;
  b.inner.store(f::guest_ia32_efer, std::uint64_t{0xd01});
  vmx::cached_vmcs c(b);
  const std::uint32_t efer_high = hvkit::test::rt(0x2807u);
  ASSERT_TRUE(c.write(efer_high, 0x1234'5678u));
  EXPECT_EQ(c.read(hvkit::test::rt(0x2806u)).value(), 0x1234'5678'0000'0d01u);
  EXPECT_EQ(c.read(efer_high).value(), 0x1234'5678u);
  ASSERT_TRUE(c.flush());
  EXPECT_EQ(b.inner.peek(f::guest_ia32_efer), 0x1234'5678'0000'0d01u);
  // The full field cannot be read: the HIGH write fails with that VMREAD's error.
  c.invalidate();
  b.fail_on = 0x2806;
  const auto w = c.write(efer_high, 1);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().field_encoding, 0x2806u);
  EXPECT_FALSE(c.any_dirty());
  // 0x6801: a HIGH access of GUEST_CR0 (0x6800), a natural-width field: HIGH accesses exist
  // only for 64-bit fields, so no such field.
  const auto r = c.read(hvkit::test::rt(0x6801u));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error, vmx::vm_instruction_error::unsupported_vmcs_component);
  const auto u = c.write(hvkit::test::rt(0x6801u), 0);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().instruction, vmx::vmx_instruction::vmwrite);
}
}  // namespace
