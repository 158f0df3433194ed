// SPDX-License-Identifier: MIT
// Exit reasons against SDM Appendix C typed by hand, the exit-qualification decoders against
// hand-built values from SDM Tables 28-1 to 28-7, instruction information (Tables 28-10 to
// 28-14), and exit dispatch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include <hvkit/vmx/dispatch.hpp>
#include <hvkit/vmx/exit_qualification.hpp>
#include <hvkit/vmx/exit_reason.hpp>
#include <hvkit/vmx/instruction_info.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
using er = vmx::exit_reason;

TEST(vmx_exit_reason, numbers_match_appendix_c) {
  struct row {
    er r;
    unsigned n;
    const char* name;
  };
  // Typed from SDM Appendix C, Table C-1.
  const row table[] = {
      {er::exception_or_nmi, 0, "exception_or_nmi"}, {er::external_interrupt, 1, "external_interrupt"},
      {er::triple_fault, 2, "triple_fault"}, {er::init_signal, 3, "init_signal"}, {er::sipi, 4, "sipi"},
      {er::io_smi, 5, "io_smi"}, {er::other_smi, 6, "other_smi"}, {er::interrupt_window, 7, "interrupt_window"},
      {er::nmi_window, 8, "nmi_window"}, {er::task_switch, 9, "task_switch"}, {er::cpuid, 10, "cpuid"},
      {er::getsec, 11, "getsec"}, {er::hlt, 12, "hlt"}, {er::invd, 13, "invd"}, {er::invlpg, 14, "invlpg"},
      {er::rdpmc, 15, "rdpmc"}, {er::rdtsc, 16, "rdtsc"}, {er::rsm, 17, "rsm"}, {er::vmcall, 18, "vmcall"},
      {er::vmclear, 19, "vmclear"}, {er::vmlaunch, 20, "vmlaunch"}, {er::vmptrld, 21, "vmptrld"},
      {er::vmptrst, 22, "vmptrst"}, {er::vmread, 23, "vmread"}, {er::vmresume, 24, "vmresume"},
      {er::vmwrite, 25, "vmwrite"}, {er::vmxoff, 26, "vmxoff"}, {er::vmxon, 27, "vmxon"},
      {er::cr_access, 28, "cr_access"}, {er::mov_dr, 29, "mov_dr"}, {er::io_instruction, 30, "io_instruction"},
      {er::rdmsr, 31, "rdmsr"}, {er::wrmsr, 32, "wrmsr"}, {er::invalid_guest_state, 33, "invalid_guest_state"},
      {er::msr_loading, 34, "msr_loading"}, {er::mwait, 36, "mwait"}, {er::monitor_trap_flag, 37, "monitor_trap_flag"},
      {er::monitor, 39, "monitor"}, {er::pause, 40, "pause"}, {er::machine_check_event, 41, "machine_check_event"},
      {er::tpr_below_threshold, 43, "tpr_below_threshold"}, {er::apic_access, 44, "apic_access"},
      {er::virtualized_eoi, 45, "virtualized_eoi"}, {er::gdtr_idtr_access, 46, "gdtr_idtr_access"},
      {er::ldtr_tr_access, 47, "ldtr_tr_access"}, {er::ept_violation, 48, "ept_violation"},
      {er::ept_misconfiguration, 49, "ept_misconfiguration"}, {er::invept, 50, "invept"}, {er::rdtscp, 51, "rdtscp"},
      {er::preemption_timer, 52, "preemption_timer"}, {er::invvpid, 53, "invvpid"},
      {er::wbinvd_wbnoinvd, 54, "wbinvd_wbnoinvd"}, {er::xsetbv, 55, "xsetbv"}, {er::apic_write, 56, "apic_write"},
      {er::rdrand, 57, "rdrand"}, {er::invpcid, 58, "invpcid"}, {er::vmfunc, 59, "vmfunc"}, {er::encls, 60, "encls"},
      {er::rdseed, 61, "rdseed"}, {er::pml_full, 62, "pml_full"}, {er::xsaves, 63, "xsaves"},
      {er::xrstors, 64, "xrstors"}, {er::pconfig, 65, "pconfig"}, {er::spp_event, 66, "spp_event"},
      {er::umwait, 67, "umwait"}, {er::tpause, 68, "tpause"}, {er::loadiwkey, 69, "loadiwkey"},
      {er::enclv, 70, "enclv"}, {er::enqcmd_pasid_translation_failure, 72, "enqcmd_pasid_translation_failure"},
      {er::enqcmds_pasid_translation_failure, 73, "enqcmds_pasid_translation_failure"}, {er::bus_lock, 74, "bus_lock"},
      {er::instruction_timeout, 75, "instruction_timeout"}, {er::seamcall, 76, "seamcall"},
      {er::tdcall, 77, "tdcall"}, {er::rdmsrlist, 78, "rdmsrlist"}, {er::wrmsrlist, 79, "wrmsrlist"},
  };
  unsigned defined = 0;
  for (const auto& r : table) {
    EXPECT_EQ(static_cast<unsigned>(r.r), r.n) << r.name;
    EXPECT_STREQ(vmx::exit_reason_name(r.r), r.name);
    EXPECT_TRUE(vmx::is_defined_exit_reason(r.n));
  }
  for (unsigned n = 0; n < 100; ++n) defined += vmx::is_defined_exit_reason(n);
  EXPECT_EQ(defined, std::size(table));
  EXPECT_STREQ(vmx::exit_reason_name(static_cast<er>(35)), "?");
  std::printf("compared %zu exit reasons with Appendix C\n", std::size(table));
}

TEST(vmx_exit_reason, field_bits) {
  // VM-entry failure due to invalid guest state: 0x80000021 (docs/bochs-and-qemu-facts.md).
  constexpr vmx::exit_reason_field f{0x8000'0021};
  HVKIT_BOTH(f.entry_failure() && f.basic() == er::invalid_guest_state);
  constexpr vmx::exit_reason_field g{0x0c00'001c};  // enclave mode + bus lock, CR access
  HVKIT_BOTH(g.basic() == er::cr_access && g.enclave_mode() && g.bus_lock_detected() && !g.entry_failure());
  HVKIT_BOTH(vmx::exit_reason_field{0x3000'0000}.pending_mtf() && vmx::exit_reason_field{0x3000'0000}.from_vmx_root());
}

TEST(vmx_exit_qualification, decoders) {
  // I/O: OUT DX, AL to port 0x3f8: size 1, out, DX operand: 0x03f8'0000.
  constexpr vmx::io_qualification out{0x03f8'0000};
  HVKIT_BOTH(out.size() == 1 && !out.in() && !out.string() && !out.immediate_operand() && out.port() == 0x3f8);
  // REP INSW from port 0x1f0 (imm not possible for INS): size 2 (1), in, string, rep.
  constexpr vmx::io_qualification ins{0x01f0'0039};
  HVKIT_BOTH(ins.size() == 2 && ins.in() && ins.string() && ins.rep() && ins.port() == 0x1f0);
  // IN EAX, 0x60 immediate: size 4 (3), in, imm.
  constexpr vmx::io_qualification in4{0x0060'004b};
  HVKIT_BOTH(in4.size() == 4 && in4.in() && in4.immediate_operand() && in4.port() == 0x60);
  // EPT violation: write to a read-only page, linear address valid, translated access.
  constexpr vmx::ept_violation_qualification ev{0x18a};
  HVKIT_BOTH(ev.write() && !ev.read() && !ev.fetch() && ev.readable() && !ev.writable() && !ev.executable() &&
             ev.linear_address_valid() && ev.translated_access());
  constexpr vmx::ept_violation_qualification ev2{0x1'3004};  // fetch, NMI unblocking, async
  HVKIT_BOTH(ev2.fetch() && ev2.nmi_unblocking() && ev2.asynchronous() && ev2.shadow_stack_access() && !ev2.linear_address_valid());
  // Debug: B1 and BS.
  constexpr vmx::debug_qualification db{0x4002};
  HVKIT_BOTH(db.breakpoints() == 2 && db.single_step() && !db.debug_register_access());
  // Task switch via IRET to selector 0x28.
  constexpr vmx::task_switch_qualification ts{0x4000'0028};
  HVKIT_BOTH(ts.tss_selector() == 0x28 && ts.initiated_by() == vmx::task_switch_qualification::source::iret);
  // APIC access: linear write at offset 0x300 (ICR low).
  constexpr vmx::apic_access_qualification aa{0x1300};
  HVKIT_BOTH(aa.offset() == 0x300 && aa.type() == vmx::apic_access_qualification::access::linear_write);
  // MOV DR7 <- RCX: dr 7, to DR, gpr 1.
  constexpr vmx::mov_dr_qualification dr{0x107};
  HVKIT_BOTH(dr.dr() == 7 && !dr.from_dr() && dr.gpr() == 1);
}

TEST(vmx_instruction_info, descriptor_table_and_vmx) {
  // LGDT [rax + rbx*4], 64-bit address size, DS: scaling 2, asize 2 (bits 9:7), seg 3, index 3, base 0, identity 2.
  constexpr std::uint32_t lgdt = 2u | (2u << 7) | (3u << 15) | (3u << 18) | (0u << 23) | (2u << 28);
  constexpr vmx::descriptor_table_info d{lgdt};
  HVKIT_BOTH(d.scale() == 4 && d.addr_size() == vmx::address_size::a64 && d.segment() == 3 && d.index_valid() &&
             d.index_reg() == 3 && d.base_valid() && d.base_reg() == 0 &&
             d.which(true) == vmx::descriptor_table_info::instruction::lgdt);
  // LTR ax (register operand, reg1 = 0): bit 10, identity 3, index and base invalid.
  constexpr std::uint32_t ltr = (1u << 10) | (1u << 22) | (1u << 27) | (3u << 28);
  constexpr vmx::descriptor_table_info t{ltr};
  HVKIT_BOTH(t.register_operand() && t.reg1() == 0 && !t.index_valid() && !t.base_valid() &&
             t.which(false) == vmx::descriptor_table_info::instruction::ltr);
  // VMREAD rdx(encoding in reg2 = r9), destination register r11 (reg1).
  constexpr std::uint32_t vr = (11u << 3) | (1u << 10) | (9u << 28);
  constexpr vmx::vmx_instruction_info v{vr};
  HVKIT_BOTH(v.register_operand() && v.reg1() == 11 && v.reg2() == 9);
  // INVEPT type in r8, descriptor [rsp]: base 4, index invalid, reg2 8.
  constexpr std::uint32_t ie = (2u << 7) | (2u << 15) | (1u << 22) | (4u << 23) | (8u << 28);
  constexpr vmx::vmx_instruction_info i{ie};
  HVKIT_BOTH(!i.register_operand() && i.base_reg() == 4 && !i.index_valid() && i.reg2() == 8 && i.segment() == 2);
}

namespace {
struct counting_handler {
  using result_type = int;
  int cr_accesses = 0, cpuids = 0, unhandled_count = 0, failures = 0;
  unsigned last_cr = 99;
  int operator()(vmx::cr_access_exit e, vmx::soft_vmcs&) {
    ++cr_accesses;
    last_cr = e.qualification.cr();
    return 28;
  }
  int operator()(vmx::exit_tag<er::cpuid>, vmx::soft_vmcs&) { return ++cpuids, 10; }
  int operator()(vmx::exit_tag<er::hlt>, vmx::soft_vmcs&) { return 12; }
  int entry_failed(vmx::exit_reason_field, vmx::soft_vmcs&) { return ++failures, -2; }
  int unhandled(vmx::exit_reason_field, vmx::soft_vmcs&) { return ++unhandled_count, -1; }
};
}  // namespace

TEST(vmx_dispatch, routes_every_reason) {
  vmx::soft_vmcs v;
  counting_handler h;
  v.store(vmx::fields::exit_qualification, std::uint64_t{0x304});
  v.store(vmx::fields::exit_reason, std::uint32_t{28});
  EXPECT_EQ(vmx::dispatch_exit(h, v), 28);
  EXPECT_EQ(h.last_cr, 4u);
  v.store(vmx::fields::exit_reason, std::uint32_t{10});
  EXPECT_EQ(vmx::dispatch_exit(h, v), 10);
  v.store(vmx::fields::exit_reason, std::uint32_t{0x8000'0021});
  EXPECT_EQ(vmx::dispatch_exit(h, v), -2);
  // Every basic reason 0..99: handled ones go to their overloads, everything else unhandled.
  int handled = 0;
  for (unsigned n = 0; n < 100; ++n) {
    const int r = vmx::dispatch_exit(h, v, vmx::exit_reason_field{n});
    const int expect = n == 28 ? 28 : n == 10 ? 10 : n == 12 ? 12 : -1;
    EXPECT_EQ(r, expect) << n;
    handled += r >= 0;
  }
  EXPECT_EQ(handled, 3);
  EXPECT_EQ(h.unhandled_count, 97);
}

// INS/OUTS (Table 28-9) and RDRAND/RDSEED/TPAUSE/UMWAIT (Table 28-15), words assembled by hand.
TEST(vmx_instruction_info, ins_outs_and_register_operand) {
  // OUTSB with a 64-bit address size (2 << 7) and an FS override (4 << 15): 0x20100.
  constexpr vmx::ins_outs_info o{0x2'0100};
  HVKIT_BOTH(o.addr_size() == vmx::address_size::a64 && o.segment() == 4u);
  HVKIT_BOTH(vmx::ins_outs_info{0x80}.addr_size() == vmx::address_size::a32);
  // RDRAND R11 (11 << 3) with a 64-bit operand (2 << 11): 0x1058.
  constexpr vmx::register_operand_info r{0x1058};
  HVKIT_BOTH(r.reg() == 11u && r.size() == vmx::register_operand_info::operand_size::o64);
  // RDSEED AX (0 << 3), 16-bit operand: 0; UMWAIT ECX (1 << 3), 32-bit operand (1 << 11): 0x808.
  HVKIT_BOTH(vmx::register_operand_info{0}.size() == vmx::register_operand_info::operand_size::o16);
  HVKIT_BOTH(vmx::register_operand_info{0x808}.reg() == 1u &&
             vmx::register_operand_info{0x808}.size() == vmx::register_operand_info::operand_size::o32);
  // Undefined bits set around the fields do not leak into them.
  HVKIT_BOTH(vmx::register_operand_info{0xffff'e787u}.reg() == 0u && vmx::register_operand_info{0xffff'e787u}.size() ==
                                                                      vmx::register_operand_info::operand_size::o16);
}
