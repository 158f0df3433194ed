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

}  // namespace
