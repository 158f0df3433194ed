// SPDX-License-Identifier: MIT
// Event injection, re-injection after exits during event delivery, interruptibility and the
// VM-entry consistency rules. Golden values are typed from the SDM layouts (Vol. 3C 25.8.3
// Table 25-17, 25.9.2 Table 25-19, 25.9.3 Table 25-20; 28.2.3, 28.2.4; 27.2.1.3, 27.3.1.5),
// never computed by the code under test.
#include <gtest/gtest.h>

#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/interruptibility.hpp>
#include <hvkit/vmx/reinjection.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
using hvkit::test::rt;
using x86::vector;

TEST(event_injection, golden_interruption_information) {
  // valid (31) | deliver error code (11) | type (10:8) | vector (7:0)
  HVKIT_BOTH(vmx::hardware_exception(vector::gp, 0).info.raw() == 0x8000'0b0du);
  HVKIT_BOTH(vmx::hardware_exception(vector::pf, 0x2).info.raw() == 0x8000'0b0eu);
  HVKIT_BOTH(vmx::hardware_exception(vector::pf, 0x2).error_code == 0x2u);
  HVKIT_BOTH(vmx::hardware_exception(vector::ud).info.raw() == 0x8000'0306u);
  HVKIT_BOTH(vmx::hardware_exception(vector::df).info.raw() == 0x8000'0b08u);
  HVKIT_BOTH(vmx::hardware_exception(vector::ac, 0).info.raw() == 0x8000'0b11u);
  HVKIT_BOTH(vmx::hardware_exception(vector::db).info.raw() == 0x8000'0301u);
  HVKIT_BOTH(vmx::hardware_exception(vector::mc).info.raw() == 0x8000'0312u);
  // Real mode (unrestricted guest, CR0.PE = 0): no error code is pushed.
  HVKIT_BOTH(vmx::hardware_exception(vector::gp, 5, false).info.raw() == 0x8000'030du);
  HVKIT_BOTH(vmx::hardware_exception(vector::gp, 5, false).error_code == 0u);
  HVKIT_BOTH(vmx::nmi().info.raw() == 0x8000'0202u);
  HVKIT_BOTH(vmx::external_interrupt(0x20).info.raw() == 0x8000'0020u);
  HVKIT_BOTH(vmx::software_interrupt(0x80, 2).info.raw() == 0x8000'0480u);
  HVKIT_BOTH(vmx::software_interrupt(0x80, 2).instruction_length == 2u);
  HVKIT_BOTH(vmx::int3().info.raw() == 0x8000'0603u && vmx::int3().instruction_length == 1u);
  HVKIT_BOTH(vmx::into().info.raw() == 0x8000'0604u);
  HVKIT_BOTH(vmx::privileged_software_exception().info.raw() == 0x8000'0501u);
  HVKIT_BOTH(vmx::pending_mtf().info.raw() == 0x8000'0700u);
}

TEST(event_injection, error_code_exactly_for_the_vectors_that_push_one) {
  // SDM 27.2.1.3 (current text): with IA32_VMX_BASIC[56] = 0 exactly 8, 10, 11, 12, 13, 14,
  // 17; with it, the architectural error-code vectors (Table 6-1: the same and #CP, 21).
  for (bool any : {false, true})
    for (unsigned v = 0; v < 32; ++v) {
      const bool pushes =
          v == 8 || v == 10 || v == 11 || v == 12 || v == 13 || v == 14 || v == 17 || (any && v == 21);
      const auto e = vmx::hardware_exception(rt(static_cast<vector>(v)), 0x18, true, any);
      EXPECT_EQ(e.info.has_error_code(), pushes) << v;
      EXPECT_EQ(e.error_code, pushes ? 0x18u : 0u) << v;
      // And the VM-entry check agrees.
      EXPECT_EQ(vmx::check_injection_fields(e, {.any_error_code = any}), vmx::injection_error::none) << v;
      // Flipping the bit is what VM entry refuses (without BASIC[56]).
      vmx::injected_event flipped = e;
      flipped.info = vmx::entry_interruption_info{e.info.raw() ^ 0x800u};
      EXPECT_EQ(vmx::check_injection_fields(flipped, {.any_error_code = any}),
                any ? vmx::injection_error::none : vmx::injection_error::error_code_mismatch)
          << v;
    }
}

TEST(event_injection, entry_checks_on_the_fields) {
  using E = vmx::injection_error;
  using ei = vmx::entry_interruption_info;
  auto ev = [](std::uint32_t raw, std::uint32_t len = 0) { return vmx::injected_event{ei{raw}, 0, len}; };
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0100u)), E::reserved_type);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0203u)), E::nmi_vector);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0320u)), E::exception_vector);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0701u)), E::other_event_vector);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0700u), {.mtf_supported = false}), E::mtf_unsupported);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'1306u)), E::reserved_bits);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0480u, 0)), E::instruction_length);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0480u, 0), {.zero_length_allowed = true}), E::none);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0480u, 16)), E::instruction_length);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0480u, 15)), E::none);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x0000'0100u)), E::none);  // not valid: not checked
  // #CP without IA32_VMX_BASIC[56] delivers no error code.
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0315u)), E::none);
  // An error code with bits 31:16 set.
  EXPECT_EQ(vmx::check_injection_fields(vmx::injected_event{ei{0x8000'0b0du}, 0x1'0000u, 0}), E::error_code_reserved);
  EXPECT_EQ(vmx::check_injection_fields(vmx::injected_event{ei{0x8000'0b0du}, 0xffffu, 0}), E::none);
  // IA32_VMX_BASIC bit 56: any hardware exception with or without an error code, still never
  // another event type.
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0306u | 0x800u), {.any_error_code = true}), E::none);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'030du), {.any_error_code = true}), E::none);
  EXPECT_EQ(vmx::check_injection_fields(ev(0x8000'0a02u), {.any_error_code = true}), E::error_code_mismatch);
}

TEST(event_injection, written_to_and_read_from_the_vmcs) {
  vmx::soft_vmcs v;
  ASSERT_TRUE(vmx::write_injection(v, vmx::hardware_exception(vector::gp, 0x1c)));
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b0du);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_exception_error_code), 0x1cu);
  ASSERT_TRUE(vmx::write_injection(v, vmx::software_interrupt(0x21, 2)));
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0421u);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_instruction_length), 2u);
  const auto back = vmx::read_injection(v);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, vmx::software_interrupt(0x21, 2));
  ASSERT_TRUE(vmx::write_injection(v, vmx::injected_event{}));  // cancel
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0u);
}

TEST(event_injection, queueing_on_a_pending_event_merges_like_the_cpu) {
  using mv = x86::merge_verdict;
  // #GP while #PF is pending: #DF(0).
  auto q = vmx::queue_exception(rt(vmx::hardware_exception(vector::pf, 2)), {vector::gp, 0});
  EXPECT_EQ(q.verdict, mv::double_fault);
  EXPECT_EQ(q.event.info.raw(), 0x8000'0b08u);
  EXPECT_EQ(q.event.error_code, 0u);
  // #PF while #DF is pending: shutdown.
  EXPECT_EQ(vmx::queue_exception(rt(vmx::hardware_exception(vector::df)), {vector::pf, 0}).verdict, mv::shutdown);
  // #GP while an external interrupt on vector 14 or INT 13 is pending: benign, #GP replaces it.
  q = vmx::queue_exception(rt(vmx::external_interrupt(14)), {vector::gp, 0x10});
  EXPECT_EQ(q.verdict, mv::deliver_second);
  EXPECT_EQ(q.event, vmx::hardware_exception(vector::gp, 0x10));
  EXPECT_EQ(vmx::queue_exception(rt(vmx::software_interrupt(13, 2)), {vector::gp, 0}).verdict, mv::deliver_second);
  // Nothing pending: the exception itself.
  EXPECT_EQ(vmx::queue_exception(rt(vmx::injected_event{}), {vector::ud, 0}).event.info.raw(), 0x8000'0306u);
}

// ---- re-injection -------------------------------------------------------------------
namespace {
struct reinject_case {
  const char* what;
  std::uint32_t idt;          // IDT-vectoring information
  std::uint32_t idt_error;    // IDT-vectoring error code
  std::uint32_t exit_length;  // VM-exit instruction length
  std::uint32_t entry;        // expected VM-entry interruption information (0: nothing)
  std::uint32_t entry_error;  // expected VM-entry exception error code
  std::uint32_t entry_length; // expected VM-entry instruction length
  bool clear_nmi;
};
// Every interruption type IDT-vectoring information reports, with and without error code
// and instruction length. Bit 12 of IDT-vectoring information is undefined: it never
// reaches the entry field.
constexpr reinject_case reinject_cases[] = {
    {"external interrupt", 0x8000'0030u, 0, 0, 0x8000'0030u, 0, 0, false},
    {"external interrupt, stale length ignored", 0x8000'00ecu, 0, 3, 0x8000'00ecu, 0, 0, false},
    {"NMI", 0x8000'0202u, 0, 0, 0x8000'0202u, 0, 0, true},
    {"#PF with error code", 0x8000'0b0eu, 0x11, 0, 0x8000'0b0eu, 0x11, 0, false},
    {"#GP with error code 0", 0x8000'0b0du, 0, 0, 0x8000'0b0du, 0, 0, false},
    {"#DF", 0x8000'0b08u, 0, 0, 0x8000'0b08u, 0, 0, false},
    {"#UD without error code", 0x8000'0306u, 0xdead, 0, 0x8000'0306u, 0, 0, false},
    {"#DB (hardware)", 0x8000'0301u, 0, 0, 0x8000'0301u, 0, 0, false},
    {"INT 0x21", 0x8000'0421u, 0, 2, 0x8000'0421u, 0, 2, false},
    {"INT 0x80 with a prefix", 0x8000'0480u, 0, 3, 0x8000'0480u, 0, 3, false},
    {"INT1", 0x8000'0501u, 0, 1, 0x8000'0501u, 0, 1, false},
    {"INT3", 0x8000'0603u, 0, 1, 0x8000'0603u, 0, 1, false},
    {"INTO", 0x8000'0604u, 0, 1, 0x8000'0604u, 0, 1, false},
    {"undefined bit 12 set", 0x8000'1b0eu, 0x4, 0, 0x8000'0b0eu, 0x4, 0, false},
    {"not valid", 0x0000'0b0eu, 0x4, 2, 0, 0, 0, false},
};
}  // namespace

TEST(reinjection, every_event_type_golden) {
  for (const auto& c : reinject_cases) {
    const auto e = vmx::reinjection_of(vmx::idt_vectoring_info{rt(c.idt)}, c.idt_error, c.exit_length);
    EXPECT_EQ(e.info.raw(), c.entry) << c.what;
    if (c.entry == 0) continue;
    EXPECT_EQ(e.info.has_error_code() ? e.error_code : 0u, c.entry_error) << c.what;
    EXPECT_EQ(vmx::is_software_event(e.info.type()) ? e.instruction_length : 0u, c.entry_length) << c.what;
    EXPECT_EQ(vmx::check_injection_fields(e), vmx::injection_error::none) << c.what;
  }
}

TEST(reinjection, through_a_vmcs) {
  for (const auto& c : reinject_cases) {
    vmx::soft_vmcs v;
    v.store(vmx::fields::idt_vectoring_info, c.idt);
    v.store(vmx::fields::idt_vectoring_error_code, c.idt_error);
    v.store(vmx::fields::vm_exit_instruction_length, c.exit_length);
    v.store(vmx::fields::guest_interruptibility_state, std::uint32_t{0x8});  // blocking by NMI
    v.store(vmx::fields::vm_entry_interruption_info, std::uint32_t{0});     // cleared by the exit
    const auto a = vmx::complete_exit_events(v, vmx::exit_reason::ept_violation);
    ASSERT_TRUE(a) << c.what;
    EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), c.entry) << c.what;
    if (c.entry_error) {
      EXPECT_EQ(v.peek(vmx::fields::vm_entry_exception_error_code), c.entry_error) << c.what;
    }
    if (c.entry_length) {
      EXPECT_EQ(v.peek(vmx::fields::vm_entry_instruction_length), c.entry_length) << c.what;
    }
    // Re-injecting an NMI clears blocking by NMI (else VM entry fails with virtual NMIs).
    EXPECT_EQ(v.peek(vmx::fields::guest_interruptibility_state), c.clear_nmi ? 0u : 0x8u) << c.what;
  }
}

TEST(reinjection, nmi_unblocking_due_to_iret) {
  using R = vmx::exit_reason;
  vmx::exit_event_info x;
  // EPT violation, qualification bit 12, not during event delivery: set blocking by NMI.
  x.reason = R::ept_violation;
  x.qualification = 0x1000 | 0x181;
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  x.qualification = 0x181;
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  // The same bit in PML-full and SPP-related exits.
  x.qualification = 0x1000;
  x.reason = R::pml_full;
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  x.reason = R::spp_event;
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  // Other exits' qualification bit 12 means something else.
  x.reason = R::cr_access;
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  // During event delivery bit 12 is undefined.
  x.reason = R::ept_violation;
  x.idt = vmx::idt_vectoring_info{0x8000'0b0eu};
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  // Exception exits: bit 12 of the VM-exit interruption information, except for #DF.
  x = {};
  x.reason = R::exception_or_nmi;
  x.exit_info = vmx::exit_interruption_info{0x8000'1b0du};  // #GP on IRET, NMIs unblocked
  EXPECT_TRUE(vmx::events_after_exit(x).set_nmi_blocking);
  x.exit_info = vmx::exit_interruption_info{0x8000'1b08u};  // #DF
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);
  x.exit_info = vmx::exit_interruption_info{0x8000'0b0du};
  EXPECT_FALSE(vmx::events_after_exit(x).set_nmi_blocking);

  // Through the VMCS: blocking by NMI set, nothing injected.
  vmx::soft_vmcs v;
  v.store(vmx::fields::exit_qualification, std::uint64_t{0x1000 | 0x2});
  v.store(vmx::fields::guest_interruptibility_state, std::uint32_t{0x1});  // STI kept
  ASSERT_TRUE(vmx::complete_exit_events(v, R::ept_violation));
  EXPECT_EQ(v.peek(vmx::fields::guest_interruptibility_state), 0x9u);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0u);
}

// ---- interruptibility -------------------------------------------------------------
TEST(interruptibility, can_inject) {
  using is = vmx::interruptibility_state;
  using A = vmx::activity_state;
  const x86::rflags if1{0x202}, if0{0x2};
  EXPECT_TRUE(vmx::can_inject_interrupt(if1, is{0}));
  EXPECT_FALSE(vmx::can_inject_interrupt(if0, is{0}));
  EXPECT_FALSE(vmx::can_inject_interrupt(if1, is{0x1}));   // STI
  EXPECT_FALSE(vmx::can_inject_interrupt(if1, is{0x2}));   // MOV SS
  EXPECT_TRUE(vmx::can_inject_interrupt(if1, is{0x8}));    // NMI blocking does not block INTR
  EXPECT_TRUE(vmx::can_inject_interrupt(if1, is{0}, A::hlt));
  EXPECT_FALSE(vmx::can_inject_interrupt(if1, is{0}, A::wait_for_sipi));
  EXPECT_FALSE(vmx::can_inject_interrupt(if1, is{0}, A::shutdown));
  EXPECT_TRUE(vmx::can_inject_nmi(is{0}));
  EXPECT_TRUE(vmx::can_inject_nmi(is{0}, A::hlt));
  EXPECT_FALSE(vmx::can_inject_nmi(is{0x8}));
  EXPECT_FALSE(vmx::can_inject_nmi(is{0x2}));
  EXPECT_FALSE(vmx::can_inject_nmi(is{0x1}));
  EXPECT_FALSE(vmx::can_inject_nmi(is{0}, A::wait_for_sipi));
}

TEST(interruptibility, windows) {
  using P = vmx::injection_plan;
  using is = vmx::interruptibility_state;
  const x86::rflags if1{0x202}, if0{0x2};
  // Both pending, both possible: the NMI now, the interrupt waits for a window.
  EXPECT_EQ(vmx::plan_injection(false, true, true, if1, is{0}), (P{P::pick::nmi, true, false}));
  // Interrupt with IF=0: interrupt window.
  EXPECT_EQ(vmx::plan_injection(false, false, true, if0, is{0}), (P{P::pick::none, true, false}));
  EXPECT_EQ(vmx::plan_injection(false, false, true, if1, is{0}), (P{P::pick::interrupt, false, false}));
  // NMI under NMI blocking: NMI window; the interrupt can still go.
  EXPECT_EQ(vmx::plan_injection(false, true, true, if1, is{0x8}), (P{P::pick::interrupt, false, true}));
  // A re-injected event occupies the entry: both wait.
  EXPECT_EQ(vmx::plan_injection(true, true, true, if1, is{0}), (P{P::pick::none, true, true}));
  // MOV SS shadow blocks both.
  EXPECT_EQ(vmx::plan_injection(false, true, true, if1, is{0x2}), (P{P::pick::none, true, true}));
  EXPECT_EQ(vmx::plan_injection(false, false, false, if1, is{0}), (P{}));
}

TEST(interruptibility, hostile_combinations_refused) {
  using S = vmx::entry_state_error;
  using is = vmx::interruptibility_state;
  using A = vmx::activity_state;
  const x86::rflags if1{0x202}, if0{0x2};
  const auto intr = vmx::external_interrupt(0x30);
  const auto nmi = vmx::nmi();
  const auto gp = vmx::hardware_exception(vector::gp, 0);
  EXPECT_EQ(vmx::check_entry_state(intr, is{0}, A::active, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(intr, is{0}, A::active, if0, true), S::interrupt_with_if_clear);
  EXPECT_EQ(vmx::check_entry_state(intr, is{0x1}, A::active, if1, true), S::interrupt_under_shadow);
  EXPECT_EQ(vmx::check_entry_state(intr, is{0x2}, A::active, if1, true), S::interrupt_under_shadow);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0x2}, A::active, if1, true), S::nmi_under_mov_ss);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0x1}, A::active, if1, true), S::nmi_under_sti);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0x8}, A::active, if1, true), S::nmi_under_virtual_nmi_blocking);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0x8}, A::active, if1, false), S::none);  // no virtual NMIs: allowed
  EXPECT_EQ(vmx::check_entry_state(gp, is{0x1}, A::active, if1, true), S::none);    // exceptions ignore the shadow
  EXPECT_EQ(vmx::check_entry_state({}, is{0x3}, A::active, if1, true), S::sti_and_mov_ss);
  EXPECT_EQ(vmx::check_entry_state({}, is{0x1}, A::active, if0, true), S::sti_with_if_clear);
  EXPECT_EQ(vmx::check_entry_state({}, is{0x20}, A::active, if1, true), S::reserved_interruptibility_bits);
  EXPECT_EQ(vmx::check_entry_state({}, is{0x4}, A::active, if1, true), S::smi_blocking_outside_smm);
  EXPECT_EQ(vmx::check_entry_state({}, is{0x12}, A::active, if1, true), S::enclave_with_mov_ss);
  EXPECT_EQ(vmx::check_entry_state({}, is{0x1}, A::hlt, if1, true), S::shadow_while_inactive);
  EXPECT_EQ(vmx::check_entry_state({}, is{0}, static_cast<A>(4), if1, true), S::reserved_activity_state);
  // Events the activity state accepts (SDM 27.3.1.5).
  EXPECT_EQ(vmx::check_entry_state(intr, is{0}, A::hlt, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0}, A::hlt, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(vmx::hardware_exception(vector::db), is{0}, A::hlt, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(vmx::hardware_exception(vector::mc), is{0}, A::hlt, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(vmx::pending_mtf(), is{0}, A::hlt, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(gp, is{0}, A::hlt, if1, true), S::event_blocked_by_activity);
  EXPECT_EQ(vmx::check_entry_state(vmx::software_interrupt(0x80, 2), is{0}, A::hlt, if1, true),
            S::event_blocked_by_activity);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0}, A::shutdown, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(vmx::hardware_exception(vector::mc), is{0}, A::shutdown, if1, true), S::none);
  EXPECT_EQ(vmx::check_entry_state(intr, is{0}, A::shutdown, if1, true), S::event_blocked_by_activity);
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0}, A::wait_for_sipi, if1, true), S::event_blocked_by_activity);
  // A re-injected NMI over virtual-NMI blocking is what reinjection's clear_nmi_blocking avoids.
  EXPECT_EQ(vmx::check_entry_state(nmi, is{0x8}.without(is::blocking_by_nmi), A::active, if1, true), S::none);
}

TEST(event_injection, inject_exception_merges_with_the_vmcs) {
  using mv = x86::merge_verdict;
  vmx::soft_vmcs v;
  // A re-injected #PF is in the entry fields; the handler raises #GP: #DF(0) goes in.
  ASSERT_TRUE(vmx::write_injection(v, vmx::hardware_exception(vector::pf, 0x2)));
  auto q = vmx::inject_exception(v, {vector::gp, 0});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->verdict, mv::double_fault);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b08u);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_exception_error_code), 0u);
  // Another #PF now: shutdown, the fields keep the #DF.
  q = vmx::inject_exception(v, {vector::pf, 0x2});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->verdict, mv::shutdown);
  EXPECT_EQ(v.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b08u);
  // Nothing pending: the exception itself, error code as the vector pushes it.
  vmx::soft_vmcs w;
  ASSERT_TRUE(vmx::inject_exception(w, {vector::ud, 0x55}));
  EXPECT_EQ(w.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0306u);
  ASSERT_TRUE(vmx::inject_exception(w, {vector::gp, 0x18}));  // #UD pending (benign): #GP replaces it
  EXPECT_EQ(w.peek(vmx::fields::vm_entry_interruption_info), 0x8000'0b0du);
  EXPECT_EQ(w.peek(vmx::fields::vm_entry_exception_error_code), 0x18u);
}

// Every combination of injected event (type x vector), interruptibility bits 4:0 (and one
// reserved bit), activity state, RFLAGS.IF and "virtual NMIs" against a rule model written
// here, bullet by bullet, from SDM 27.3.1.5 ("Checks on Guest Non-Register State": activity
// state, interruptibility state) and the RFLAGS.IF rule of 27.3.1.4. The model says which rules a combination breaks; the
// library must refuse exactly the combinations that break one, with an error naming a rule
// that is broken.
TEST(interruptibility, entry_state_against_rule_model) {
  using S = vmx::entry_state_error;
  struct rules {
    bool reserved, sti_movss, sti_if, smi, enclave, inactive_shadow, intr_shadow, intr_if, nmi_movss, nmi_sti, nmi_vnmi,
        activity;
    bool any() const {
      return reserved || sti_movss || sti_if || smi || enclave || inactive_shadow || intr_shadow || intr_if || nmi_movss ||
             nmi_sti || nmi_vnmi || activity;
    }
    bool names(S e) const {
      switch (e) {
        case S::reserved_interruptibility_bits: return reserved;
        case S::sti_and_mov_ss: return sti_movss;
        case S::sti_with_if_clear: return sti_if;
        case S::smi_blocking_outside_smm: return smi;
        case S::enclave_with_mov_ss: return enclave;
        case S::shadow_while_inactive: return inactive_shadow;
        case S::interrupt_under_shadow: return intr_shadow;
        case S::interrupt_with_if_clear: return intr_if;
        case S::nmi_under_mov_ss: return nmi_movss;
        case S::nmi_under_sti: return nmi_sti;
        case S::nmi_under_virtual_nmi_blocking: return nmi_vnmi;
        case S::event_blocked_by_activity: return activity;
        default: return false;
      }
    }
  };
  const unsigned vectors[] = {0, 1, 2, 3, 13, 18, 0x80};
  unsigned combos = 0, refused = 0;
  for (unsigned type = 0; type < 8; ++type)
    for (unsigned vec : vectors)
      for (bool valid : {false, true})
        for (std::uint32_t bits = 0; bits < 64; ++bits)
          for (unsigned act = 0; act < 4; ++act)
            for (bool if_ : {false, true})
              for (bool vnmi : {false, true}) {
                const std::uint32_t intr = (bits & 0x1f) | ((bits & 0x20) ? 0x100u : 0u);
                const bool sti = intr & 1, movss = intr & 2, smi = intr & 4, nmi_blk = intr & 8, encl = intr & 16;
                const bool nmi_ev = valid && type == 2, ext = valid && type == 0;
                rules m{};
                m.reserved = (intr & ~0x1fu) != 0;
                m.sti_movss = sti && movss;
                m.sti_if = sti && !if_;
                m.smi = smi;  // not in SMM
                m.enclave = encl && movss;
                m.inactive_shadow = act != 0 && (sti || movss);
                m.intr_shadow = ext && (sti || movss);
                m.intr_if = ext && !if_;  // 27.3.1.4
                m.nmi_movss = nmi_ev && movss;
                m.nmi_sti = nmi_ev && sti;
                m.nmi_vnmi = nmi_ev && vnmi && nmi_blk;
                if (valid) {
                  const bool hlt_ok = type == 0 || type == 2 || (type == 3 && (vec == 1 || vec == 18)) || (type == 7 && vec == 0);
                  const bool shutdown_ok = type == 2 || (type == 3 && vec == 18);
                  m.activity = (act == 1 && !hlt_ok) || (act == 2 && !shutdown_ok) || act == 3;
                }
                const vmx::injected_event e{
                    vmx::entry_interruption_info{(valid ? 0x8000'0000u : 0u) | (type << 8) | vec}, 0, 1};
                const S got = vmx::check_entry_state(e, vmx::interruptibility_state{intr}, static_cast<vmx::activity_state>(act),
                                                     x86::rflags{if_ ? 0x202u : 0x2u}, vnmi);
                ++combos;
                if (m.any()) {
                  ++refused;
                  EXPECT_TRUE(m.names(got)) << "type " << type << " vector " << vec << " intr " << intr << " activity " << act
                                            << " IF " << if_ << " vnmi " << vnmi << " got " << static_cast<int>(got);
                } else {
                  EXPECT_EQ(got, S::none) << "type " << type << " vector " << vec << " intr " << intr << " activity " << act;
                }
              }
  EXPECT_EQ(combos, 8u * 7 * 2 * 64 * 4 * 2 * 2);
  EXPECT_GT(refused, combos / 2);
}

// SDM 27.2.1.3: the deliver-error-code bit must be 1 for "#DF (vector 8), #TS (10), #NP (11),
// #SS (12), #GP (13), #PF (14), or #AC (17)" and 0 for "0-7, 9, 15, 16, or 18-31" (with
// IA32_VMX_BASIC[56] = 0). Every vector 0-255 against that list (vectors above 31 are no
// exceptions: no error code).
TEST(event_injection, delivers_error_code_every_vector) {
  for (unsigned v = 0; v < 256; ++v) {
    const bool listed = v == 8 || v == 10 || v == 11 || v == 12 || v == 13 || v == 14 || v == 17;
    EXPECT_EQ(vmx::delivers_error_code(static_cast<std::uint8_t>(v)), listed) << "vector " << v;
  }
}
