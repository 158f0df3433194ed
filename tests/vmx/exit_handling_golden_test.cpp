// SPDX-License-Identifier: MIT
// Run-time golden cases for the exit-handling helpers around the decoders: exit dispatch
// (vmx/dispatch.hpp) on every path (entry failure with and without an entry_failed handler, a
// failing VMREAD of the exit reason or of the qualification, a handler without the CR-access
// overload), the I/O bitmaps' layout (vmx/io_bitmap.hpp, SDM Vol. 3C 25.6.4) and the CR-access
// values (vmx/cr_access.hpp, 28.2.1 Table 28-3 and 27.3.1.1).
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/vmx/cr_access.hpp>
#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/io_bitmap.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/vmx/vm_fail.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
using er = vmx::exit_reason;

namespace {

template <class T>
T rt(T v) {
  volatile T x = v;
  return x;
}

// A VMCS whose VMREADs fail (VMfailInvalid: no current VMCS) for encodings in `failing`.
struct failing_vmcs {
  vmx::soft_vmcs inner;
  std::uint32_t failing = ~0u;
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t enc) {
    if (enc == failing) return hvkit::unexpected(vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc));
    return inner.read(enc);
  }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t enc, std::uint64_t v) { return inner.write(enc, v); }
};
static_assert(vmx::vmcs_backend<failing_vmcs>);

// A handler with only `unhandled` and a CPUID overload: no entry_failed, no vmread_failed,
// no CR-access overload (CR-access exits take the switch, reason 28 -> unhandled).
struct minimal_handler {
  using result_type = int;
  unsigned last_unhandled = 0;
  int operator()(vmx::exit_tag<er::cpuid>, failing_vmcs&) { return 10; }
  int unhandled(vmx::exit_reason_field r, failing_vmcs&) { return last_unhandled = r.raw(), -1; }
};

// The same with every optional member.
struct full_handler {
  using result_type = int;
  unsigned last_cr = 99;
  int operator()(vmx::cr_access_exit e, failing_vmcs&) { return last_cr = e.qualification.cr(), 28; }
  int entry_failed(vmx::exit_reason_field r, failing_vmcs&) { return static_cast<int>(r.basic()) + 1000; }
  int vmread_failed(vmx::vm_fail) { return -7; }
  int unhandled(vmx::exit_reason_field, failing_vmcs&) { return -1; }
};

TEST(vmx_dispatch_golden, every_path) {
  failing_vmcs v;
  minimal_handler m;
  full_handler f;
  // Exit reason 10 (CPUID, SDM Appendix C) to the overload.
  v.inner.store(vmx::fields::exit_reason, std::uint32_t{10});
  EXPECT_EQ(vmx::dispatch_exit(m, v), 10);
  // Reason 28 (control-register accesses) without a CR-access overload: unhandled.
  v.inner.store(vmx::fields::exit_reason, std::uint32_t{28});
  v.inner.store(vmx::fields::exit_qualification, std::uint64_t{0x0000'0000'0000'0f04ull});
  EXPECT_EQ(vmx::dispatch_exit(m, v), -1);
  EXPECT_EQ(m.last_unhandled, 28u);
  // With it: the qualification decoded (MOV CR4, R15: CR 4).
  EXPECT_EQ(vmx::dispatch_exit(f, v), 28);
  EXPECT_EQ(f.last_cr, 4u);
  // The qualification cannot be read: unhandled.
  v.failing = vmx::fields::exit_qualification.encoding;
  EXPECT_EQ(vmx::dispatch_exit(f, v), -1);
  v.failing = ~0u;
  // "Bit 31 ... VM-entry failure (0 = true VM exit; 1 = VM-entry failure)" (SDM 25.9.1,
  // Table 25-18): 0x8000'0021 = invalid guest state (33). With entry_failed, to it; without,
  // to unhandled.
  v.inner.store(vmx::fields::exit_reason, std::uint32_t{0x8000'0021u});
  EXPECT_EQ(vmx::dispatch_exit(f, v), 1033);
  EXPECT_EQ(vmx::dispatch_exit(m, v), -1);
  EXPECT_EQ(m.last_unhandled, 0x8000'0021u);
  // The exit reason cannot be read: vmread_failed, or unhandled with the reason ~0u.
  v.failing = vmx::fields::exit_reason.encoding;
  EXPECT_EQ(vmx::dispatch_exit(f, v), -7);
  EXPECT_EQ(vmx::dispatch_exit(m, v), -1);
  EXPECT_EQ(m.last_unhandled, ~0u);
  // Every basic exit reason 0..127 (Appendix C numbers 0-79 with gaps; the others reach
  // no case of the switch).
  v.failing = ~0u;
  for (std::uint32_t n = 0; n < 128; ++n) {
    const vmx::exit_reason_field r{rt(n)};
    EXPECT_EQ(vmx::dispatch_exit(m, v, r), n == 10 ? 10 : -1) << n;
    EXPECT_EQ(vmx::dispatch_exit(f, v, r), n == 28 ? 28 : -1) << n;
  }
}

// SDM 25.6.4: "I/O bitmap A contains one bit for each I/O port in the range 0000H through
// 7FFFH; I/O bitmap B contains bits for ports in the range 8000H through FFFFH." 26.1.3: with
// "use I/O bitmaps", an access exits "if any bit in the I/O bitmaps corresponding to a port it
// accesses is 1", and the I/O access "wraps around" (port + size - 1 > FFFFH) always exits.
TEST(vmx_io_bitmap_golden, layout_and_ranges) {
  auto b = vmx::io_bitmaps::none_exit();
  b.set_intercept(rt<std::uint16_t>(0x03f8), true);  // A: byte 7Fh, bit 0
  b.set_intercept(rt<std::uint16_t>(0x8001), true);  // B: byte 0, bit 1
  b.set_intercept(rt<std::uint16_t>(0xffff), true);  // B: byte FFFh, bit 7
  EXPECT_EQ(b.a()[0x7f], 0x01u);
  EXPECT_EQ(b.b()[0x000], 0x02u);
  EXPECT_EQ(b.b()[0xfff], 0x80u);
  unsigned set_bits = 0;
  for (std::size_t i = 0; i < vmx::io_bitmaps::page; ++i) set_bits += __builtin_popcount(b.a()[i]) + __builtin_popcount(b.b()[i]);
  EXPECT_EQ(set_bits, 3u);
  // A 2-byte access at 3F7h touches 3F7h and 3F8h: exits; at 3F9h it does not.
  EXPECT_TRUE(b.exits(rt<std::uint16_t>(0x3f7), 2));
  EXPECT_FALSE(b.exits(rt<std::uint16_t>(0x3f9), 2));
  // Wrap-around: a 2-byte access at FFFFh and a 4-byte access at FFFDh exit even with
  // every bit clear; a 4-byte access at FFFCh does not wrap.
  b.set_intercept(rt<std::uint16_t>(0xffff), false);
  EXPECT_EQ(b.b()[0xfff], 0x00u);
  EXPECT_TRUE(b.exits(rt<std::uint16_t>(0xffff), 2));
  EXPECT_TRUE(b.exits(rt<std::uint16_t>(0xfffd), 4));
  EXPECT_FALSE(b.exits(rt<std::uint16_t>(0xfffc), 4));
  EXPECT_FALSE(b.exits(rt<std::uint16_t>(0xffff), 1));
  // A range crossing from bitmap A into B, and one clamped at FFFFh.
  b.set_intercept_range(rt<std::uint16_t>(0x7ffe), 4, true);  // 7FFEh-8001h
  EXPECT_EQ(b.a()[0xfff], 0xc0u);
  EXPECT_EQ(b.b()[0x000], 0x03u);
  b.set_intercept_range(rt<std::uint16_t>(0xfff0), 0x100, true);  // clamped: FFF0h-FFFFh
  EXPECT_EQ(b.b()[0xffe], 0xffu);
  EXPECT_EQ(b.b()[0xfff], 0xffu);
  b.set_intercept_range(rt<std::uint16_t>(0x7ffe), 4, false);
  EXPECT_EQ(b.a()[0xfff], 0x00u);
  EXPECT_EQ(b.b()[0x000], 0x00u);
  // all_exit: every bit of both bitmaps set.
  const auto all = vmx::io_bitmaps::all_exit();
  for (std::size_t i = 0; i < vmx::io_bitmaps::page; ++i) {
    ASSERT_EQ(all.a()[i], 0xffu);
    ASSERT_EQ(all.b()[i], 0xffu);
  }
  EXPECT_TRUE(all.exits(rt<std::uint16_t>(0), 1));
  EXPECT_TRUE(all.port_bit(rt<std::uint16_t>(0x8000)));
}

// Table 28-3 MOV from CR3/CR8 (the only MOV from CR that exits, with the CR3-store and
// CR8-store controls, 26.1.3) and the CR0/CR4 values for the VMCS (27.3.1.1, A.7, A.8).
TEST(vmx_cr_access_golden, reads_and_vmcs_values) {
  vmx::cr_context c{};
  c.cr3 = 0x0000'0000'1234'5000ull;
  // MOV R9, CR8 (0x918: gpr 9, type 1, CR 8): CR8 is TPR bits 7:4 (10.8.6.1), the argument.
  const auto r8 = vmx::evaluate_cr_read(vmx::cr_access_qualification{rt<std::uint64_t>(0x918)}, c, rt<std::uint64_t>(0xa));
  EXPECT_TRUE(r8.valid);
  EXPECT_EQ(r8.gpr, 9u);
  EXPECT_EQ(r8.value, 0xau);
  // MOV RSP, CR3 (0x413).
  const auto r3 = vmx::evaluate_cr_read(vmx::cr_access_qualification{rt<std::uint64_t>(0x413)}, c, 0);
  EXPECT_TRUE(r3.valid);
  EXPECT_EQ(r3.gpr, 4u);
  EXPECT_EQ(r3.value, 0x1234'5000u);
  // MOV RAX, CR0 (0x10) and MOV to CR3 (0x3) are not MOV-from-CR3/CR8 exits.
  EXPECT_FALSE(vmx::evaluate_cr_read(vmx::cr_access_qualification{rt<std::uint64_t>(0x10)}, c, 0).valid);
  EXPECT_FALSE(vmx::evaluate_cr_read(vmx::cr_access_qualification{rt<std::uint64_t>(0x3)}, c, 0).valid);
  // A MOV from CR is no write.
  EXPECT_EQ(vmx::evaluate_cr_write(vmx::cr_access_qualification{rt<std::uint64_t>(0x13)}, c, 0,
                                   hvkit::paging::paging_kind::two_dimensional)
                .cr,
            ~0u);
  // cr_values_for: the real register = (value | must-be-one) & may-be-one, the shadow = value.
  const auto v = vmx::cr_values_for(rt<std::uint64_t>(0x0000'0011ull), 0x8000'0021ull, 0xffff'ffffull);
  EXPECT_EQ(v.actual, 0x8000'0031ull);
  EXPECT_EQ(v.read_shadow, 0x11ull);
  // CR0 with IA32_VMX_CR0_FIXED0 = 8000'0021h (PG, NE, PE) and FIXED1 = FFFF'FFFFh: "unrestricted
  // guest" 1 lifts PE and PG (27.3.1.1: "If the "unrestricted guest" VM-execution control is
  // 1, bit 0 (corresponding to CR0.PE) and bit 31 (PG) ... are not checked"), NE stays.
  const vmx::cr_fixed f0{0x8000'0021ull, 0xffff'ffffull}, f4{0x2000ull, 0x0037'27ffull};
  const auto u = vmx::cr0_values_for(x86::cr0{rt<std::uint64_t>(0x10)}, f0, rt(true));
  EXPECT_EQ(u.actual, 0x30u);
  EXPECT_EQ(u.read_shadow, 0x10u);
  const auto p = vmx::cr0_values_for(x86::cr0{rt<std::uint64_t>(0x10)}, f0, rt(false));
  EXPECT_EQ(p.actual, 0x8000'0031u);
  // CR4 with FIXED0 = 2000h (VMXE) and FIXED1 = 37'27FFh: VMXE forced, bit 11 (UMIP) not
  // allowed by this FIXED1, both hidden from the guest by the shadow.
  const auto c4 = vmx::cr4_values_for(x86::cr4{rt<std::uint64_t>(0x820)}, f4);
  EXPECT_EQ(c4.actual, 0x2020u);
  EXPECT_EQ(c4.read_shadow, 0x820u);
  const auto w = vmx::cr_values_for(rt<std::uint64_t>(0x1'0000'0001ull), 0, 0xffff'ffffull);
  EXPECT_EQ(w.actual, 0x1ull);
  EXPECT_EQ(w.read_shadow, 0x1'0000'0001ull);
}

}  // namespace
