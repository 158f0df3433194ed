// SPDX-License-Identifier: MIT
// vmx::read_exit_event_info / complete_exit_events (vmx/reinjection.hpp): which VMCS fields
// an exit's event bookkeeping reads, typed from the SDM, and that a failed VMREAD of any of
// them is the result.
//   SDM Vol. 3C 28.2.4: "IDT-vectoring error code. For VM exits that set both bit 31 (valid)
//   and bit 11 (error code valid) in the IDT-vectoring information field, this field receives
//   the error code"; the VM-exit instruction length is saved "for VM exits ... during delivery
//   of a software interrupt, privileged software exception, or software exception" (28.2.5).
//   28.2.3 / 28.2.1 (Table 28-7): "NMI unblocking due to IRET" is bit 12 of the VM-exit
//   interruption information (exceptions and NMIs) and of the exit qualification (EPT
//   violations, page-modification-log-full and SPP-related events), and matters only with
//   "virtual NMIs" / "NMI exiting" (pin-based controls) and no event being delivered.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include <hvkit/vmx/reinjection.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "../support/probe_vmcs.hpp"

namespace vmx = hvkit::vmx;
namespace f = hvkit::vmx::fields;
using R = vmx::exit_reason;

namespace {

using hvkit::test::probe_vmcs;

constexpr std::uint32_t idt_info = 0x4408, idt_ec = 0x440a, insn_len = 0x440c, exit_info = 0x4404, pin = 0x4000,
                        qual = 0x6400;

struct scenario {
  const char* what;
  std::uint32_t idt;
  R reason;
  std::set<std::uint32_t> reads;  // the fields read_exit_event_info must read
};

TEST(vmx_reinjection_reads, fields_read_per_exit_and_each_failure) {
  const scenario rows[] = {
      {"#PF being delivered (hardware exception, error code)", 0x8000'0b0e, R::ept_violation, {idt_info, idt_ec}},
      {"INT 0x80 being delivered (software interrupt)", 0x8000'0480, R::ept_violation, {idt_info, insn_len}},
      {"INT3 being delivered (software exception)", 0x8000'0603, R::exception_or_nmi, {idt_info, insn_len}},
      {"INT1 being delivered (privileged software exception)", 0x8000'0501, R::task_switch, {idt_info, insn_len}},
      {"external interrupt being delivered", 0x8000'0030, R::exception_or_nmi, {idt_info}},
      {"no event, exception or NMI exit", 0, R::exception_or_nmi, {idt_info, pin, exit_info}},
      {"no event, EPT violation", 0, R::ept_violation, {idt_info, pin, qual}},
      {"no event, PML full", 0, R::pml_full, {idt_info, pin, qual}},
      {"no event, SPP-related event", 0, R::spp_event, {idt_info, pin, qual}},
      {"no event, CPUID", 0, R::cpuid, {idt_info}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    probe_vmcs v;
    v.inner.store(idt_info, row.idt);
    v.inner.store(idt_ec, 0x6);
    v.inner.store(insn_len, 2);
    auto x = vmx::read_exit_event_info(v, row.reason);
    ASSERT_TRUE(x.has_value());
    EXPECT_EQ(std::set<std::uint32_t>(v.reads.begin(), v.reads.end()), row.reads);
    for (std::uint32_t enc : row.reads) {
      probe_vmcs w;
      w.inner.store(idt_info, row.idt);
      w.failing = enc;
      auto y = vmx::read_exit_event_info(w, row.reason);
      ASSERT_FALSE(y.has_value()) << std::hex << enc;
      EXPECT_EQ(y.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc));
      // complete_exit_events fails the same way.
      probe_vmcs c;
      c.inner.store(idt_info, row.idt);
      c.failing = enc;
      auto z = vmx::complete_exit_events(c, row.reason);
      ASSERT_FALSE(z.has_value()) << std::hex << enc;
      EXPECT_EQ(z.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, enc));
    }
  }
}

// An NMI being delivered is re-injected and blocking by NMI is cleared (28.2.4 / 27.6): that
// needs the guest interruptibility state (bit 3, "Blocking by NMI", Table 25-3); a failed read
// of it is the result.
TEST(vmx_reinjection_reads, nmi_blocking_update_read_failure) {
  probe_vmcs v;
  v.inner.store(idt_info, 0x8000'0202);  // NMI being delivered
  v.inner.store(0x4824, 0x8);            // blocking by NMI
  auto ok = vmx::complete_exit_events(v, R::ept_violation);
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->clear_nmi_blocking);
  EXPECT_EQ(v.inner.read(0x4824).value(), 0u);
  probe_vmcs w;
  w.inner.store(idt_info, 0x8000'0202);
  w.failing = 0x4824;
  auto bad = vmx::complete_exit_events(w, R::ept_violation);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error(), vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmread, 0x4824));
}

// complete_exit_events is written as one pass (vmx/reinjection.hpp); it must take the same
// actions and leave the same VM-entry fields and interruptibility state behind as the three
// steps it stands for (read_exit_event_info, events_after_exit, apply_exit_event_actions),
// for every basic exit reason 0-80, both NMI-control settings that make bit 12 undefined or
// defined, and events of every interruption type being delivered or not.
TEST(vmx_reinjection_reads, one_pass_equals_the_three_steps) {
  constexpr std::uint32_t entry_info = 0x4016, entry_ec = 0x4018, entry_len = 0x401a, intr_state = 0x4824;
  const std::uint32_t idts[] = {0,           0x8000'0030, 0x8000'0202, 0x8000'0b0e, 0x8000'0308, 0x8000'0480,
                                0x8000'0501, 0x8000'0603, 0x8000'0b0d, 0x8000'1b0e, 0x0000'0b0e, 0x8000'0700};
  const std::uint32_t infos[] = {0, 0x8000'0b0e, 0x8000'1b0e, 0x8000'1b08, 0x8000'1202, 0x0000'1000, 0x8000'1306};
  int cases = 0;
  for (unsigned reason = 0; reason <= 80; ++reason)
    for (std::uint32_t pin_controls : {0u, 8u, 32u, 40u})
      for (std::uint32_t idt : idts)
        for (std::uint32_t info : infos)
          for (std::uint64_t q : {std::uint64_t{0}, std::uint64_t{0x1000}, std::uint64_t{0x1181}})
            for (std::uint32_t state : {0u, 8u}) {
              vmx::soft_vmcs a;
              a.store(idt_info, idt);
              a.store(idt_ec, 0x1a);
              a.store(insn_len, 3);
              a.store(exit_info, info);
              a.store(qual, q);
              a.store(pin, pin_controls);
              a.store(intr_state, state);
              vmx::soft_vmcs b = a;
              const auto r = static_cast<R>(reason);
              const auto one = vmx::complete_exit_events(a, r);
              const auto x = vmx::read_exit_event_info(b, r);
              ASSERT_TRUE(one.has_value() && x.has_value());
              const auto actions = vmx::events_after_exit(x.value());
              ASSERT_TRUE(vmx::apply_exit_event_actions(b, actions).has_value());
              const auto where = [&] {
                return testing::Message() << "reason " << reason << " pin " << pin_controls << std::hex << " idt "
                                          << idt << " info " << info << " qual " << q << " state " << state;
              };
              ASSERT_EQ(one.value(), actions) << where();
              for (std::uint32_t enc : {entry_info, entry_ec, entry_len, intr_state})
                ASSERT_EQ(a.read(enc).value(), b.read(enc).value()) << where() << " field " << enc;
              ++cases;
            }
  EXPECT_EQ(cases, 81 * 4 * 12 * 7 * 3 * 2);
}

}  // namespace
