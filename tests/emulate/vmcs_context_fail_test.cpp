// SPDX-License-Identifier: MIT
// emulate::read_emulation_context / apply_emulation when the VMCS refuses an access: every
// VMREAD and VMWRITE they issue fails in turn (VMfailValid, error 12 "VMREAD/VMWRITE from/to
// unsupported VMCS component", SDM Vol. 3C 31.4), and the call must return that failure,
// naming that field, and write nothing after it. The oracle is the access log of the same
// call on a VMCS that never fails, and the values it wrote there (typed from the contexts
// given, SDM Vol. 3C 25.4.1 guest-state layout).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/emulate/vmcs_context.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace em = hvkit::emulate;

namespace {
// A VMCS backend that logs every access and fails the n-th access (0 = never).
struct failing_vmcs {
  vmx::soft_vmcs inner;
  unsigned fail_at = 0, count = 0;
  std::vector<std::uint32_t> log;         // every access, in order
  std::vector<bool> is_write;             // of each access in `log`
  std::vector<std::uint32_t> written;     // the writes that were performed
  bool fails() { return ++count == fail_at; }
  hvkit::result<std::uint64_t, vmx::vm_fail> read(std::uint32_t enc) {
    log.push_back(enc);
    is_write.push_back(false);
    if (fails())
      return hvkit::unexpected(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmread,
                                                       vmx::vm_instruction_error::unsupported_vmcs_component, enc));
    return inner.read(enc);
  }
  hvkit::result<void, vmx::vm_fail> write(std::uint32_t enc, std::uint64_t v) {
    log.push_back(enc);
    is_write.push_back(true);
    if (fails())
      return hvkit::unexpected(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmwrite,
                                                       vmx::vm_instruction_error::unsupported_vmcs_component, enc));
    written.push_back(enc);
    return inner.write(enc, v);
  }
};
static_assert(vmx::vmcs_backend<failing_vmcs>);

void setup(vmx::soft_vmcs& v) {
  v.store(vmx::fields::guest_rip, std::uint64_t{0x40'1000});
  v.store(vmx::fields::guest_rsp, std::uint64_t{0x7ff0});
  v.store(vmx::fields::guest_rflags, std::uint64_t{0x202});
  v.store(vmx::fields::guest_cs_selector, std::uint16_t{0x8});
  v.store(vmx::fields::guest_cs_access_rights, std::uint32_t{0xa09b});  // 64-bit code, DPL 0
  v.store(vmx::fields::guest_cs_limit, std::uint32_t{0xffff'ffff});
  v.store(vmx::fields::guest_ss_selector, std::uint16_t{0x10});
  v.store(vmx::fields::guest_ss_access_rights, std::uint32_t{0xc093});
  v.store(vmx::fields::guest_ldtr_access_rights, std::uint32_t{0x1'0000});
  v.store(vmx::fields::guest_tr_access_rights, std::uint32_t{0x8b});
  v.store(vmx::fields::guest_cr0, std::uint64_t{0x8005'0033});
  v.store(vmx::fields::guest_cr4, std::uint64_t{0x20});
  v.store(vmx::fields::guest_ia32_efer, std::uint64_t{0xd01});
  v.store(vmx::fields::vm_entry_controls, std::uint32_t{1u << 9});
  v.store(vmx::fields::guest_interruptibility_state, std::uint32_t{0x1});  // blocking by STI
}

struct run {
  failing_vmcs v;
  vmx::gpr_block g{};
  vmx::register_file<failing_vmcs> regs{v, g};
  explicit run(unsigned fail_at) {
    setup(v.inner);
    v.fail_at = fail_at;
  }
};

// Every access of read_emulation_context fails in turn.
TEST(vmcs_context_fail, read_returns_the_first_failure) {
  run ok(0);
  const auto c = em::read_emulation_context(ok.v, ok.regs, {});
  ASSERT_TRUE(c);
  ASSERT_GT(ok.v.log.size(), 40u);  // GPR/RIP/RFLAGS, 8 segments x 4, tables, CRs, ...
  for (unsigned n = 1; n <= ok.v.log.size(); ++n) {
    run r(n);
    const auto got = em::read_emulation_context(r.v, r.regs, {});
    ASSERT_FALSE(got) << "access " << n << " (field " << std::hex << ok.v.log[n - 1] << ") failed unnoticed";
    EXPECT_EQ(got.error().field_encoding, ok.v.log[n - 1]) << "access " << n;
    EXPECT_EQ(got.error().error, vmx::vm_instruction_error::unsupported_vmcs_component);
  }
}

em::context changed(const em::context& before) {
  em::context after = before;
  for (unsigned i = 0; i < 16; ++i) after.gpr[i] = before.gpr[i] + 0x100 + i;
  after.rip = before.rip + 3;
  after.rflags = x86::rflags{0x246};
  const em::sreg all[] = {em::sreg::es, em::sreg::cs, em::sreg::ss, em::sreg::ds, em::sreg::fs, em::sreg::gs};
  for (unsigned i = 0; i < 6; ++i)
    after[all[i]] = em::segment{static_cast<std::uint16_t>(0x18 + 8 * i), 0x1000u * (i + 1), 0xfff + i,
                                em::segment_ar{0xc093}};
  after.ldtr = em::segment{0x50, 0x7000, 0x37, em::segment_ar{0x82}};
  after.tr = em::segment{0x58, 0x8000, 0x67, em::segment_ar{0x8b}};
  after.gdtr = em::descriptor_table{0x9000, 0x5f};
  after.idtr = em::descriptor_table{0xa000, 0xfff};
  return after;
}

// A `done` outcome that changes every segment register, LDTR, TR, GDTR and IDTR, with a MOV
// SS shadow and a single-step trap: every access fails in turn.
TEST(vmcs_context_fail, apply_returns_the_first_failure_and_writes_nothing_after_it) {
  em::outcome o = em::outcome::make_done();
  o.mov_ss_shadow = true;
  o.single_step = true;
  run ok(0);
  const em::context before = *em::read_emulation_context(ok.v, ok.regs, {});
  const em::context after = changed(before);
  ok.v.log.clear();
  ok.v.is_write.clear();
  ok.v.written.clear();
  ASSERT_TRUE(em::apply_emulation(ok.v, ok.regs, before, after, o));
  // What the successful call wrote (SDM 25.4.1 field by field; interruptibility: blocking by
  // STI (bit 0) replaced by blocking by MOV SS (bit 1); pending debug exceptions BS (bit 14)).
  const auto& s = ok.v.inner;
  EXPECT_EQ(s.peek(vmx::fields::guest_es_selector), 0x18u);
  EXPECT_EQ(s.peek(vmx::fields::guest_gs_base), 0x6000u);
  EXPECT_EQ(s.peek(vmx::fields::guest_fs_limit), 0xfff + 4u);
  EXPECT_EQ(s.peek(vmx::fields::guest_ds_access_rights), 0xc093u);
  EXPECT_EQ(s.peek(vmx::fields::guest_ldtr_selector), 0x50u);
  EXPECT_EQ(s.peek(vmx::fields::guest_ldtr_base), 0x7000u);
  EXPECT_EQ(s.peek(vmx::fields::guest_tr_limit), 0x67u);
  EXPECT_EQ(s.peek(vmx::fields::guest_gdtr_base), 0x9000u);
  EXPECT_EQ(s.peek(vmx::fields::guest_gdtr_limit), 0x5fu);
  EXPECT_EQ(s.peek(vmx::fields::guest_idtr_base), 0xa000u);
  EXPECT_EQ(s.peek(vmx::fields::guest_idtr_limit), 0xfffu);
  EXPECT_EQ(s.peek(vmx::fields::guest_interruptibility_state), 0x2u);
  EXPECT_EQ(s.peek(vmx::fields::guest_pending_debug_exceptions), 0x4000u);
  const std::vector<std::uint32_t> log = ok.v.log;
  ASSERT_GE(log.size(), 6u * 4 + 2 * 4 + 4 + 4);
  for (unsigned n = 1; n <= log.size(); ++n) {
    run r(0);
    static_cast<void>(em::read_emulation_context(r.v, r.regs, {}));
    r.v.log.clear();
    r.v.written.clear();
    r.v.count = 0;
    r.v.fail_at = n;
    const auto got = em::apply_emulation(r.v, r.regs, before, after, o);
    ASSERT_FALSE(got) << "access " << n << " (field " << std::hex << log[n - 1] << ") failed unnoticed";
    EXPECT_EQ(got.error().field_encoding, log[n - 1]) << "access " << n;
    // Nothing after the failed access: the log stops there.
    EXPECT_EQ(r.v.log.size(), n) << "access " << n;
    std::vector<std::uint32_t> done_before;
    for (unsigned i = 0; i + 1 < n; ++i)
      if (ok.v.is_write[i]) done_before.push_back(log[i]);
    EXPECT_EQ(r.v.written, done_before) << "access " << n;
  }
}

// An exception outcome: the injection reads the pending event and writes the new one; each of
// those accesses fails in turn. A real-mode guest (CR0.PE = 0) gets no error code (SDM 25.8.3:
// "deliver error code" must be 0 when CR0.PE = 0, for unrestricted guests).
TEST(vmcs_context_fail, exception_injection_failures_and_real_mode) {
  run ok(0);
  const em::context c = *em::read_emulation_context(ok.v, ok.regs, {});
  ok.v.log.clear();
  const auto gp = em::outcome::make_exception(x86::vector::gp, 0x10);
  const auto a = em::apply_emulation(ok.v, ok.regs, c, c, gp);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::injected);
  EXPECT_FALSE(a->load_cr2);
  // Valid, hardware exception (type 3), deliver error code, vector 13 (SDM 25.8.3 Table 25-17).
  EXPECT_EQ(ok.v.inner.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b0du);
  EXPECT_EQ(ok.v.inner.peek(vmx::fields::vm_entry_exception_error_code), 0x10u);
  const std::vector<std::uint32_t> log = ok.v.log;
  ASSERT_FALSE(log.empty());
  for (unsigned n = 1; n <= log.size(); ++n) {
    run r(0);
    static_cast<void>(em::read_emulation_context(r.v, r.regs, {}));
    r.v.log.clear();
    r.v.count = 0;
    r.v.fail_at = n;
    const auto got = em::apply_emulation(r.v, r.regs, c, c, gp);
    ASSERT_FALSE(got) << "access " << n;
    EXPECT_EQ(got.error().field_encoding, log[n - 1]) << "access " << n;
  }
  run rm(0);
  em::context real = c;
  real.cr0 = x86::cr0{0x10};
  const auto b = em::apply_emulation(rm.v, rm.regs, real, real, gp);
  ASSERT_TRUE(b);
  EXPECT_EQ(rm.v.inner.peek(vmx::fields::vm_entry_interruption_info), 0x8000'030du);  // no error code
}

// needs_io and unsupported: nothing is accessed, the kind says what is left to the caller.
TEST(vmcs_context_fail, needs_io_and_unsupported_touch_nothing) {
  run r(0);
  const em::context c = *em::read_emulation_context(r.v, r.regs, {});
  r.v.log.clear();
  em::outcome io;
  io.kind = em::outcome_kind::needs_io;
  io.address = 0x3f8;
  io.size = 1;
  io.write = true;
  io.value = 0x41;
  auto a = em::apply_emulation(r.v, r.regs, c, c, io);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::needs_access);
  em::context d = c;
  em::complete_access(d, io, 0x99);
  EXPECT_EQ(d.pending.what, em::completion::kind::pio);
  EXPECT_TRUE(d.pending.write);
  EXPECT_EQ(d.pending.value, 0x41u);  // a write completes with its own value
  a = em::apply_emulation(r.v, r.regs, c, c, em::outcome::make_unsupported(em::unsupported_reason::instruction));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, em::applied_outcome::kind_type::unsupported);
  EXPECT_TRUE(r.v.log.empty());
}

}  // namespace
