// SPDX-License-Identifier: MIT
// The event and VM-entry rules of issue 25 (items 1-6), each golden case typed from the
// SDM sentence quoted beside it (Intel SDM Vol. 3C, current edition), never computed by the
// code under test. Each test was run against the old rule and failed there (see the report
// of the change that added it).
#include <gtest/gtest.h>

#include <string_view>

#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/interruptibility.hpp>
#include <hvkit/vmx/reinjection.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/vmx/vm_entry_checks.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
using hvkit::test::rt;

// ---- 25.1: NMI unblocking due to IRET is undefined with NMI exiting 1, virtual NMIs 0 ----
// SDM 28.2.2 (VM-exit interruption information): "Bit 12 is undefined in any of the
// following cases: - If the "NMI exiting" VM-execution control is 1 and the "virtual NMIs"
// VM-execution control is 0. ..." The exit qualification of EPT violations (28.2.1) states
// the same condition for its bit 12.
TEST(nmi_unblocking, undefined_with_nmi_exiting_and_no_virtual_nmis) {
  using R = vmx::exit_reason;
  using pb = vmx::pin_based;
  vmx::exit_event_info x;
  x.reason = R::exception_or_nmi;
  x.exit_info = vmx::exit_interruption_info{rt(0x8000'1b0du)};  // #GP, bit 12 set
  x.pin = pb::nmi_exiting;                                       // virtual NMIs 0: undefined
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  x.pin = pb::nmi_exiting | pb::virtual_nmis;  // defined: virtual-NMI blocking before IRET
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  x.pin = pb{};  // NMI exiting 0: defined (blocking by NMI before IRET)
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  x.reason = R::ept_violation;
  x.exit_info = {};
  x.qualification = 0x1000 | 0x181;
  x.pin = pb::nmi_exiting;
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  x.pin = pb::nmi_exiting | pb::virtual_nmis;
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);

  // Through the VMCS (the case): exit information 0x80001b0d, NMI exiting 1,
  // virtual NMIs 0, interruptibility 0: complete_exit_events leaves it 0.
  vmx::soft_vmcs v;
  v.store(vmx::fields::pin_based_controls, std::uint32_t{0x8});  // NMI exiting (bit 3)
  v.store(vmx::fields::vm_exit_interruption_info, std::uint32_t{0x8000'1b0du});
  v.store(vmx::fields::guest_interruptibility_state, std::uint32_t{0});
  ASSERT_TRUE(vmx::complete_exit_events(v, R::exception_or_nmi));
  EXPECT_EQ(v.peek(vmx::fields::guest_interruptibility_state), 0u);
  // With virtual NMIs too, bit 12 is defined: blocking by NMI is set again.
  v.store(vmx::fields::pin_based_controls, std::uint32_t{0x28});
  ASSERT_TRUE(vmx::complete_exit_events(v, R::exception_or_nmi));
  EXPECT_EQ(v.peek(vmx::fields::guest_interruptibility_state), 0x8u);
}

// ---- 25.2: RTM in the pending debug exceptions refused only under blocking by MOV SS ----
// SDM 27.3.1.5 (Checks on Guest Non-Register State), pending debug exceptions: "The
// following checks are performed if bit 16 (RTM) is 1: - Bits 11:0, bits 15:13, and bits
// 63:17 (bits 31:17 on processors that do not support Intel 64 architecture) must be 0; bit
// 12 must be 1. - The processor must support for RTM by enumerating CPUID.(EAX=07H,ECX=0):
// EBX[bit 11] as 1. - The interruptibility-state field must not indicate blocking by MOV SS
// (bit 1 in that field must be 0)."
namespace {
vmx::vm_entry_state rtm_state(std::uint32_t interruptibility, std::uint64_t pending) {
  vmx::vm_entry_state s{};
  s.interruptibility = interruptibility;
  s.pending_debug_exceptions = pending;
  s.guest_rflags = x86::rflags{0x202};  // IF = 1 (blocking by STI needs it), TF = 0
  return s;
}
/// Whether VM-entry rule `name` fails on snapshot `s` for processor `env`.
bool rule_fails(std::string_view name, const vmx::vm_entry_state& s, const vmx::vm_entry_env& env) {
  bool found = false, failed = false;
  vmx::for_each_vm_entry_rule([&](const vmx::vm_entry_rule& r) {
    if (std::string_view{r.info.name} != name) return;
    found = true;
    failed = static_cast<bool>(r.check(s, env));
  });
  EXPECT_TRUE(found) << name;
  return failed;
}
bool rtm_rule_fails(const vmx::vm_entry_state& s, bool rtm) {
  vmx::vm_entry_env env{};
  env.rtm = rtm;
  return rule_fails("guest_pending_debug_rtm_invalid", s, env);
}
}  // namespace

TEST(pending_debug_rtm, sti_blocking_allowed_mov_ss_refused) {
  constexpr std::uint64_t rtm = 1u << 16, enabled_bp = 1u << 12;
  EXPECT_FALSE(rtm_rule_fails(rtm_state(0, rtm | enabled_bp), true));
  EXPECT_FALSE(rtm_rule_fails(rtm_state(0x1, rtm | enabled_bp), true));  // blocking by STI: allowed
  EXPECT_TRUE(rtm_rule_fails(rtm_state(0x2, rtm | enabled_bp), true));   // blocking by MOV SS
  EXPECT_TRUE(rtm_rule_fails(rtm_state(0, rtm), true));                  // bit 12 must be 1
  EXPECT_TRUE(rtm_rule_fails(rtm_state(0, rtm | enabled_bp | 0x1), true));        // bits 11:0 must be 0
  EXPECT_TRUE(rtm_rule_fails(rtm_state(0, rtm | enabled_bp | (1u << 14)), true));  // bit 14 (BS) must be 0
}

// ---- 25.3: #CP and the deliver-error-code rule agree (current SDM text) ----
// SDM 27.2.1.3: "The field's deliver-error-code bit must be 0 if any of the following
// holds: (1) the interruption type is not hardware exception; (2) bit 0 is clear in the CR0
// field in the guest-state area; or (3) IA32_VMX_BASIC[56] is read as 0 and the vector is in
// one of the following ranges: 0-7, 9, 15, 16, or 18-31." #CP is 21: without BASIC[56] it
// is injected without an error code; with it (SDM A.1: "software can use VM entry to deliver
// a hardware exception with or without an error code, regardless of vector") the
// architectural #CP error code (SDM Table 6-1) may be delivered.
TEST(cp_error_code, constructor_and_check_agree) {
  using E = vmx::injection_error;
  const auto cp = vmx::hardware_exception(rt(x86::vector::cp), 0x5);
  EXPECT_EQ(cp.info.raw(), 0x8000'0315u);  // valid, hardware exception, vector 21, no error code
  EXPECT_EQ(vmx::check_injection_fields(cp), E::none);
  const auto cp_any = vmx::hardware_exception(rt(x86::vector::cp), 0x5, true, true);
  EXPECT_EQ(cp_any.info.raw(), 0x8000'0b15u);  // with BASIC[56]: error code 5 delivered
  EXPECT_EQ(cp_any.error_code, 0x5u);
  EXPECT_EQ(vmx::check_injection_fields(cp_any, {.any_error_code = true}), E::none);
  // The check itself: #CP with an error code only with BASIC[56].
  EXPECT_EQ(vmx::check_injection_fields(cp_any), E::error_code_mismatch);
  EXPECT_EQ(vmx::check_injection_fields(cp, {.any_error_code = true}), E::none);
  // The merge builds #CP the same way (a #CP queued on nothing).
  EXPECT_EQ(vmx::queue_exception({}, {x86::vector::cp, 5}).event.info.raw(), 0x8000'0315u);
}

// ---- 25.4: deliver-error-code with "unrestricted guest" 0 and CR0.PE 0 ----
// The current SDM text (27.2.1.3, quoted at 25.3 above and: "must be 1 if each of the
// following holds: (1) the interruption type is hardware exception; (2) bit 0 (corresponding
// to CR0.PE) is set in the CR0 field in the guest-state area; (3) IA32_VMX_BASIC[56] is read
// as 0 ...; and (4) the vector indicates ... #GP (13) ...") looks at CR0.PE alone. Editions
// up to about 2016 said "(1) either (a) the 'unrestricted guest' VM-execution control is 0;
// or (b) bit 0 (corresponding to CR0.PE) is set": vm_entry_env::error_code_older_wording.
TEST(error_code_rule, cr0_pe_alone_by_default) {
  vmx::vm_entry_state s{};  // "unrestricted guest" 0 (no secondary controls), CR0.PE = 0
  vmx::vm_entry_env env{};
  s.entry_interruption_info = 0x8000'030du;  // #GP without an error code
  EXPECT_FALSE(rule_fails("injection_error_code_missing", s, env));
  s.entry_interruption_info = 0x8000'0b0du;  // #GP with one
  EXPECT_TRUE(rule_fails("injection_error_code_unexpected", s, env));
  // The older wording: "unrestricted guest" 0 counts as protected mode.
  env.error_code_older_wording = true;
  EXPECT_FALSE(rule_fails("injection_error_code_unexpected", s, env));
  s.entry_interruption_info = 0x8000'030du;
  EXPECT_TRUE(rule_fails("injection_error_code_missing", s, env));
  // CR0.PE = 1: both wordings require it.
  env.error_code_older_wording = false;
  s.guest_cr0 = x86::cr0::pe;
  EXPECT_TRUE(rule_fails("injection_error_code_missing", s, env));
}

// ---- 25.6: NMI under blocking by STI is a processor property; in SMM for check_vm_entry ----
// SDM 27.3.1.5: "A processor may require bit 0 (blocking by STI) to be 0 if the valid bit
// (bit 31) in the VM-entry interruption-information field is 1 and the interruption type
// (bits 10:8) in that field has value 2, indicating NMI. Other processors may not make this
// requirement." and "Bit 2 (blocking by SMI) must be 0 if the processor is not in SMM."
TEST(nmi_under_sti, property_of_the_processor_for_both_checks) {
  using S = vmx::entry_state_error;
  const auto nmi = vmx::nmi();
  const vmx::interruptibility_state sti{rt(0x1u)};
  const x86::rflags if1{0x202};
  vmx::entry_state_environment env{};
  EXPECT_TRUE(env.nmi_refused_under_sti);  // the documented default
  EXPECT_EQ(vmx::check_entry_state(nmi, sti, vmx::activity_state::active, if1, env), S::nmi_under_sti);
  env.nmi_refused_under_sti = false;
  EXPECT_EQ(vmx::check_entry_state(nmi, sti, vmx::activity_state::active, if1, env), S::none);

  vmx::vm_entry_state s{};
  s.entry_interruption_info = 0x8000'0202u;  // NMI
  s.interruptibility = 0x1;
  s.guest_rflags = if1;
  vmx::vm_entry_env venv{};
  EXPECT_TRUE(venv.nmi_refused_under_sti);
  EXPECT_TRUE(rule_fails("guest_sti_blocking_with_nmi_injection", s, venv));
  venv.nmi_refused_under_sti = false;
  EXPECT_FALSE(rule_fails("guest_sti_blocking_with_nmi_injection", s, venv));

  // Blocking by SMI: refused outside SMM, allowed in SMM, by both.
  const vmx::interruptibility_state smi{rt(0x4u)};
  env.in_smm = false;
  EXPECT_EQ(vmx::check_entry_state({}, smi, vmx::activity_state::active, if1, env), S::smi_blocking_outside_smm);
  env.in_smm = true;
  EXPECT_EQ(vmx::check_entry_state({}, smi, vmx::activity_state::active, if1, env), S::none);
  s = {};
  s.interruptibility = 0x4;
  EXPECT_TRUE(rule_fails("guest_smi_blocking_outside_smm", s, venv));
  venv.in_smm = true;
  EXPECT_FALSE(rule_fails("guest_smi_blocking_outside_smm", s, venv));
}
