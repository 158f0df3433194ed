// SPDX-License-Identifier: MIT
// Golden texts of the exit printers: vmx/hosted/print_exit.hpp (exit qualifications, SDM
// Vol. 3C Tables 28-1 to 28-7; interruption and IDT-vectoring information, Tables 25-17,
// 25-19, 25-20) and svm/hosted/print.hpp (APM Vol. 2: exit codes Table C-1, IOIO Figure 15-2,
// MOV CRx decode assists 15.33.1, exception intercepts 15.12, #NPF 15.25.6, EVENTINJ 15.20,
// intercept bits Table B-1). Each raw value is built from the table's bit positions (the
// comment gives them), and the expected text is what those bits mean.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

#include <hvkit/svm/hosted/print.hpp>
#include <hvkit/vmx/hosted/print_exit.hpp>

namespace {

using namespace hvkit;

template <class T>
std::string streamed(const T& v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

TEST(VmxExitPrint, DebugQualification) {
  // Table 28-1: B0-B3 bits 3:0, BLD 11, BD 13, BS 14, RTM 16.
  EXPECT_EQ(to_string(vmx::debug_qualification{0x4009}), "B0 B3 BS");
  EXPECT_EQ(to_string(vmx::debug_qualification{0x2000}), "BD");
  EXPECT_EQ(to_string(vmx::debug_qualification{0x10800}), "BLD RTM");
  EXPECT_EQ(to_string(vmx::debug_qualification{0}), "none");
}

TEST(VmxExitPrint, TaskSwitchQualification) {
  // Table 28-2: selector bits 15:0, source bits 31:30 (0 CALL, 1 IRET, 2 JMP, 3 task gate in IDT).
  EXPECT_EQ(to_string(vmx::task_switch_qualification{0x40000028}), "task switch to TSS 0x0028 by IRET");
  EXPECT_EQ(to_string(vmx::task_switch_qualification{0xc0000030}), "task switch to TSS 0x0030 by task gate in IDT");
  EXPECT_EQ(to_string(vmx::task_switch_qualification{0x80000008}), "task switch to TSS 0x0008 by JMP");
}

TEST(VmxExitPrint, CrAccessQualification) {
  // Table 28-3: CR bits 3:0, access type 5:4 (0 MOV to, 1 MOV from, 2 CLTS, 3 LMSW), LMSW
  // operand type bit 6 (1 memory), GPR 11:8 (0 RAX, 1 RCX, 2 RDX, 3 RBX, ... 15 R15), LMSW
  // source data 31:16.
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x104}), "MOV to CR4 from rcx");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x313}), "MOV from CR3 to rbx");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0xf00}), "MOV to CR0 from r15");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x418}), "MOV from CR8 to rsp");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x20}), "CLTS");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x10030}), "LMSW 0x0001 from a register");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{0x000f0070}), "LMSW 0x000f from memory");
}

TEST(VmxExitPrint, MovDrQualification) {
  // Table 28-4: DR bits 2:0, direction bit 4 (1 = MOV from DR), GPR 11:8.
  EXPECT_EQ(to_string(vmx::mov_dr_qualification{0x7}), "MOV to DR7 from rax");
  EXPECT_EQ(to_string(vmx::mov_dr_qualification{0x216}), "MOV from DR6 to rdx");
}

TEST(VmxExitPrint, IoQualification) {
  // Table 28-5: size - 1 in bits 2:0, direction bit 3 (1 = IN), string 4, REP 5, operand
  // encoding 6 (1 = immediate), port 31:16.
  EXPECT_EQ(to_string(vmx::io_qualification{0x00600048}), "IN 1 byte, port 0x0060 (immediate)");
  EXPECT_EQ(to_string(vmx::io_qualification{0x03f80031}), "REP OUTS 2 bytes, port 0x03f8 (DX)");
  EXPECT_EQ(to_string(vmx::io_qualification{0x0cfc000b}), "IN 4 bytes, port 0x0cfc (DX)");
  EXPECT_EQ(to_string(vmx::io_qualification{0x00800010}), "OUTS 1 byte, port 0x0080 (DX)");
}

TEST(VmxExitPrint, ApicAccessQualification) {
  // Table 28-6: offset bits 11:0 (linear accesses), access type 15:12 (0 linear read,
  // 1 linear write, 2 linear fetch, 3 linear during event delivery, 10 physical during event
  // delivery, 15 physical fetch or execution), asynchronous bit 16.
  EXPECT_EQ(to_string(vmx::apic_access_qualification{0x1080}), "linear write at offset 0x080");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{0x00300}), "linear read at offset 0x300");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{0xa000}), "physical access during event delivery");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{0x1f000}),
            "physical access for an instruction fetch or execution, asynchronous");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{0x5000}), "access type 5");
}

TEST(VmxExitPrint, EptViolationQualification) {
  // Table 28-7: read 0, write 1, fetch 2, readable 3, writable 4, executable 5, user
  // executable 6, linear address valid 7, translated access 8 (if 7), user-mode address 9,
  // writable page 10, execute-disable page 11 (9-11 if 7 and 8, advanced information), NMI
  // unblocking 12, shadow-stack access 13, supervisor shadow-stack 14, guest-paging
  // verification 15, asynchronous 16.
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x181}), "read; translation ---; final address");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x1a2}), "write; translation --x; final address");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x09}), "read; translation r--; no guest linear address");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x83}),
            "read, write; translation ---; guest paging-structure entry");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0xf84}),
            "fetch; translation ---; final address; user-mode address, writable page, execute-disable page");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x1199}), "read; translation rw-; final address; NMI unblocking due to IRET");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x6f}), "read, write, fetch; translation r-x ux; no guest linear address");
  // Bits 9-11 without bit 8 are not advanced information: not printed.
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0xe81}), "read; translation ---; guest paging-structure entry");
  EXPECT_EQ(to_string(vmx::ept_violation_qualification{0x1e002}),
            "write; translation ---; no guest linear address; shadow-stack access, supervisor shadow-stack page, "
            "guest-paging verification, asynchronous");
}

TEST(VmxExitPrint, InterruptionInformation) {
  // Tables 25-17/25-19/25-20: vector 7:0, type 10:8 (0 external interrupt, 2 NMI, 3 hardware
  // exception, 4 software interrupt, 5 privileged software exception, 6 software exception,
  // 7 other event), error code valid 11, NMI unblocking 12 (exit information), valid 31.
  EXPECT_EQ(to_string(vmx::idt_vectoring_info{0x80000b0e}), "vector 14 (#PF) hardware_exception, error code");
  EXPECT_EQ(to_string(vmx::idt_vectoring_info{0x80000030}), "vector 48 external_interrupt");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{0x80000202}), "vector 2 (NMI) nmi");
  EXPECT_EQ(to_string(vmx::entry_interruption_info{0x80000603}), "vector 3 (#BP) software_exception");
  EXPECT_EQ(to_string(vmx::entry_interruption_info{0x80000480}), "vector 128 software_interrupt");
  EXPECT_EQ(to_string(vmx::entry_interruption_info{0x80000501}), "vector 1 (#DB) privileged_software_exception");
  EXPECT_EQ(to_string(vmx::entry_interruption_info{0x80000700}), "vector 0 other_event");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{0x80001b0d}),
            "vector 13 (#GP) hardware_exception, error code, NMI unblocking due to IRET");
  EXPECT_EQ(to_string(vmx::idt_vectoring_info{0x00000b0e}), "invalid (0x00000b0e)");
  EXPECT_EQ(streamed(vmx::idt_vectoring_info{0}), "invalid (0x00000000)");
}

TEST(SvmPrint, ExitCodes) {
  // Table C-1.
  EXPECT_EQ(to_string(svm::exit_code{0x14}), "CR4_WRITE");
  EXPECT_EQ(to_string(svm::exit_code{0x4e}), "EXCP14");
  EXPECT_EQ(to_string(svm::exit_code{0x7b}), "IOIO");
  EXPECT_EQ(to_string(svm::exit_code{0x7c}), "MSR");
  EXPECT_EQ(to_string(svm::exit_code{0x400}), "NPF");
  EXPECT_EQ(to_string(svm::exit_code{~std::uint64_t{0}}), "INVALID");
  EXPECT_EQ(to_string(svm::exit_code{0x500}), "exit_code(0x500)");
  EXPECT_EQ(streamed(svm::exit_code{0x81}), "VMMCALL");
}

TEST(SvmPrint, IoioInfo) {
  // Figure 15-2: TYPE 0 (1 = IN), STR 2, REP 3, SZ8 4, SZ16 5, SZ32 6, A16 7, A32 8, A64 9,
  // SEG 12:10 (decode assists), PORT 31:16.
  EXPECT_EQ(to_string(svm::ioio_info{0x00600011}), "IN 1 byte, port 0x0060");
  EXPECT_EQ(to_string(svm::ioio_info{0x03f80d2c}), "REP OUTS 2 bytes, port 0x03f8, a32, DS");
  EXPECT_EQ(to_string(svm::ioio_info{0x0cfc0041}), "IN 4 bytes, port 0x0cfc");
  EXPECT_EQ(to_string(svm::ioio_info{0x00800001}), "IN (no single size bit), port 0x0080");
}

TEST(SvmPrint, CrAccessExceptionAndNpf) {
  // 15.33.1: EXITINFO1 bit 63 = MOV, GPR in bits 3:0.
  EXPECT_EQ(to_string(svm::decode_cr_access(0x8000000000000003, true)), "MOV with rbx");
  EXPECT_EQ(to_string(svm::decode_cr_access(0, true)), "CLTS, LMSW or SMSW");
  EXPECT_EQ(to_string(svm::decode_cr_access(0x8000000000000003, false)), "not decoded (no decode assists)");
  // 15.12: EXITINFO1 = error code, EXITINFO2 = the #PF address.
  EXPECT_EQ(to_string(svm::decode_exception(svm::exit_code{0x4e}, 0x2, 0x7f0000001000)),
            "#PF, error code 0x2, address 0x00007f0000001000");
  EXPECT_EQ(to_string(svm::decode_exception(svm::exit_code{0x4d}, 0x18, 0)), "#GP, error code 0x18");
  EXPECT_EQ(to_string(svm::decode_exception(svm::exit_code{0x46}, 0, 0)), "#UD");
  // 15.25.6: P 0, RW 1, US 2, RSV 3, ID 4, SS 6; bit 32 final translation, bit 33 guest
  // page-table access; EXITINFO2 the guest-physical address.
  EXPECT_EQ(to_string(svm::decode_npf(0x100000006, 0x1234000)),
            "gpa 0x0000000001234000: 0x100000006 [W U] final translation");
  EXPECT_EQ(to_string(svm::npf_error_code{0x20000000f}), "0x20000000f [P W U RSV] guest page-table access");
  EXPECT_EQ(to_string(svm::npf_error_code{0x100000015}), "0x100000015 [P U ID] final translation");
  EXPECT_EQ(to_string(svm::npf_error_code{0x40}), "0x40 [SS]");
}

TEST(SvmPrint, EventInjection) {
  // 15.20: VECTOR 7:0, TYPE 10:8 (0 INTR, 2 NMI, 3 exception, 4 software interrupt), EV 11,
  // V 31, ERRORCODE 63:32; bits 30:12 reserved.
  EXPECT_EQ(to_string(svm::event_info{0x0000000280000b0e}), "vector 14 (#PF) exception, error code 0x2");
  EXPECT_EQ(to_string(svm::event_info{0x80000030}), "vector 48 intr");
  EXPECT_EQ(to_string(svm::event_info{0x80000202}), "vector 2 (NMI) nmi");
  EXPECT_EQ(to_string(svm::event_info{0x80000480}), "vector 128 soft_int");
  EXPECT_EQ(to_string(svm::event_info{0x80000503}), "vector 3 type 5");
  EXPECT_EQ(to_string(svm::event_info{0x80001306}), "vector 6 (#UD) exception, reserved bits 0x1000");
  EXPECT_EQ(to_string(svm::event_info{0x30e}), "invalid (0x30e)");
  EXPECT_EQ(to_string(svm::check_eventinj(svm::event_info{0x80000503})), "reserved_type");
}

TEST(SvmPrint, InterceptsAndSets) {
  // Table B-1: word 0 CR reads 15:0 and writes 31:16, word 1 DR, word 2 exceptions, word 3
  // bit 18 CPUID, bit 28 MSR_PROT, word 4 bit 0 VMRUN, bits 31:16 of word 4 CR write traps.
  EXPECT_EQ(to_string(svm::cr_write(4)), "cr4_write");
  EXPECT_EQ(to_string(svm::dr_read(7)), "dr7_read");
  EXPECT_EQ(to_string(svm::exception(14u)), "excp14");
  EXPECT_EQ(to_string(svm::intercept::cpuid), "cpuid");
  EXPECT_EQ(to_string(svm::cr_write_trap(3)), "cr3_write_trap");
  EXPECT_EQ(to_string(svm::intercept::tlbsync), "tlbsync");
  EXPECT_EQ(to_string(static_cast<svm::intercept>(170)), "intercept(170)");
  svm::intercept_set s;
  EXPECT_EQ(to_string(s), "{}");
  s.set(svm::intercept::vmrun).set(svm::cr_write(4)).set(svm::exception(14u)).set(svm::intercept::cpuid);
  s.set(svm::intercept::msr_prot).set(svm::cr_read(0));
  EXPECT_EQ(to_string(s), "{cr0_read cr4_write excp14 cpuid msr_prot vmrun}");
  // The same from the raw words: word 0 = 0x00100001, word 2 = 1 << 14, word 3 = bits 18 and
  // 28, word 4 = bit 0.
  EXPECT_EQ(to_string(svm::intercept_set({0x00100001, 0, 0x4000, 0x10040000, 0x1, 0})),
            "{cr0_read cr4_write excp14 cpuid msr_prot vmrun}");
  EXPECT_EQ(streamed(svm::intercept_set({0, 0, 0, 0, 0, 0x10})), "{tlbsync}");
}

TEST(SvmPrint, Enumerations) {
  EXPECT_EQ(to_string(svm::tlb_control::flush_asid), "flush_asid");
  EXPECT_EQ(to_string(svm::clean_bit::np), "np");
  EXPECT_EQ(to_string(svm::segment::tr), "tr");
  EXPECT_EQ(to_string(svm::cr0_write_intercept::selective), "selective");
  EXPECT_EQ(to_string(svm::vmrun_error::asid_zero), "asid_zero");
  EXPECT_EQ(to_string(svm::not_npf::guest_stage), "guest_stage");
  EXPECT_EQ(to_string(svm::event_type::soft_int), "soft_int");
  EXPECT_EQ(to_string(static_cast<svm::vmrun_error>(200)), "vmrun_error(200)");
}

}  // namespace
