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
bool rtm_rule_fails(const vmx::vm_entry_state& s, bool rtm) {
  vmx::vm_entry_env env{};
  env.rtm = rtm;
  bool failed = false;
  for (const auto& r : vmx::entry_rules::guest_rules)
    if (std::string_view{r.info.name} == "guest_pending_debug_rtm_invalid" && r.check(s, env)) failed = true;
  return failed;
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
