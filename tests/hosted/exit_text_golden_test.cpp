// SPDX-License-Identifier: MIT
// The VMX exit-information printers (vmx/hosted/print_exit.hpp) on the encodings
// exit_print_test.cpp leaves out, each raw value typed from the SDM table quoted.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <hvkit/vmx/hosted/print_exit.hpp>

namespace vmx = hvkit::vmx;

namespace {

std::uint64_t rt(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

// SDM Table 28-2: bits 15:0 "Selector of task-state segment (TSS) to which the guest
// attempted to switch"; bits 31:30 "Source of task switch initiation: 0: CALL instruction
// 1: IRET instruction 2: JMP instruction 3: Task gate in IDT".
TEST(vmx_exit_text_golden, task_switch_every_source) {
  EXPECT_EQ(to_string(vmx::task_switch_qualification{rt(0x0000'0028)}), "task switch to TSS 0x0028 by CALL");
  EXPECT_EQ(to_string(vmx::task_switch_qualification{rt(0x4000'0030)}), "task switch to TSS 0x0030 by IRET");
  EXPECT_EQ(to_string(vmx::task_switch_qualification{rt(0x8000'0038)}), "task switch to TSS 0x0038 by JMP");
  EXPECT_EQ(to_string(vmx::task_switch_qualification{rt(0xc000'0040)}), "task switch to TSS 0x0040 by task gate in IDT");
}

// SDM Table 28-3: bits 3:0 "Number of control register (0 for CLTS and LMSW)"; bits 5:4
// "Access type: 0 = MOV to CR 1 = MOV from CR 2 = CLTS 3 = LMSW"; bit 6 "LMSW operand type:
// 0 = register 1 = memory"; bits 11:8 "For MOV CR, the general-purpose register: 0 = RAX
// 1 = RCX 2 = RDX 3 = RBX ..."; bits 31:16 "For LMSW, the LMSW source data".
TEST(vmx_exit_text_golden, cr_access_every_type) {
  EXPECT_EQ(to_string(vmx::cr_access_qualification{rt(0x0104)}), "MOV to CR4 from rcx");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{rt(0x0313)}), "MOV from CR3 to rbx");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{rt(0x0020)}), "CLTS");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{rt(0x0001'0030)}), "LMSW 0x0001 from a register");
  EXPECT_EQ(to_string(vmx::cr_access_qualification{rt(0x000f'0070)}), "LMSW 0x000f from memory");
}

// SDM Table 28-5: bits 2:0 "Size of access: 0 = 1-byte 1 = 2-byte 3 = 4-byte"; bit 3
// "Direction of the attempted access (0 = OUT, 1 = IN)"; bit 4 "String instruction (0 = not
// string; 1 = string)"; bit 5 "REP prefixed"; bit 6 "Operand encoding (0 = DX, 1 = immediate)";
// bits 31:16 "Port number (as specified in DX or in an immediate operand)".
TEST(vmx_exit_text_golden, io_every_direction_and_form) {
  EXPECT_EQ(to_string(vmx::io_qualification{rt(0x0060'0048)}), "IN 1 byte, port 0x0060 (immediate)");
  EXPECT_EQ(to_string(vmx::io_qualification{rt(0x03f8'0031)}), "REP OUTS 2 bytes, port 0x03f8 (DX)");
  EXPECT_EQ(to_string(vmx::io_qualification{rt(0x0cf8'0003)}), "OUT 4 bytes, port 0x0cf8 (DX)");
  EXPECT_EQ(to_string(vmx::io_qualification{rt(0x01f0'0019)}), "INS 2 bytes, port 0x01f0 (DX)");
}

// SDM Table 28-6: bits 11:0 "If the APIC-access VM exit is due to a linear access, the offset
// of access within the APIC page"; bits 15:12 "Access type: 0 = linear access for a data read
// during instruction execution 1 = linear access for a data write during instruction
// execution 2 = linear access for an instruction fetch 3 = linear access (read or write)
// during event delivery 10 = guest-physical access during event delivery 15 = guest-physical
// access for an instruction fetch or during instruction execution Other values not used";
// bit 16 "This bit is set for certain accesses that are asynchronous to instruction execution".
TEST(vmx_exit_text_golden, apic_access_every_type) {
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x0080)}), "linear read at offset 0x080");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x10b0)}), "linear write at offset 0x0b0");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x2300)}), "linear fetch at offset 0x300");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x3310)}), "linear access during event delivery at offset 0x310");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0xa000)}), "physical access during event delivery");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x1'f000)}),
            "physical access for an instruction fetch or execution, asynchronous");
  // "Other values not used": printed as the number, no offset for a non-linear type.
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0x4000)}), "access type 4");
  EXPECT_EQ(to_string(vmx::apic_access_qualification{rt(0xb123)}), "access type 11");
}

// SDM Table 25-17 (and 25-19, 25-20 with the same layout): bits 7:0 "Vector of interrupt or
// exception"; bits 10:8 "Interruption type: 0: External interrupt 1: Reserved 2: Non-maskable
// interrupt (NMI) 3: Hardware exception 4: Software interrupt 5: Privileged software exception
// 6: Software exception 7: Other event"; bit 11 "Deliver error code (0 = do not deliver;
// 1 = deliver)"; bit 31 "Valid". Table 25-19 bit 12: "NMI unblocking due to IRET".
TEST(vmx_exit_text_golden, interruption_information_every_type) {
  EXPECT_EQ(to_string(vmx::entry_interruption_info{static_cast<std::uint32_t>(rt(0x0000'0b0e))}), "invalid (0x00000b0e)");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{static_cast<std::uint32_t>(rt(0x8000'0501))}),
            "vector 1 (#DB) privileged_software_exception");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{static_cast<std::uint32_t>(rt(0x8000'0604))}),
            "vector 4 (#OF) software_exception");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{static_cast<std::uint32_t>(rt(0x8000'1b0d))}),
            "vector 13 (#GP) hardware_exception, error code, NMI unblocking due to IRET");
  EXPECT_EQ(to_string(vmx::idt_vectoring_info{static_cast<std::uint32_t>(rt(0x8000'0714))}), "vector 20 other_event");
  // Vector 15 is reserved (SDM Table 6-1): no mnemonic.
  EXPECT_EQ(to_string(vmx::idt_vectoring_info{static_cast<std::uint32_t>(rt(0x8000'030f))}), "vector 15 hardware_exception");
  EXPECT_EQ(to_string(vmx::exit_interruption_info{static_cast<std::uint32_t>(rt(0x0000'1000))}), "invalid (0x00001000)");
}

}  // namespace
