// SPDX-License-Identifier: MIT
// Every field of every exit-qualification decoder (vmx/exit_qualification.hpp) against the
// bit positions of the SDM's tables (Vol. 3C 28.2.1 "Basic VM-Exit Information"), typed by hand
// from the manual. Each single-bit field is checked with its bit alone (field reads 1) and
// with every other bit set (field reads 0); each multi-bit field with every encoding the table
// lists, surrounded by all-ones in the bits the table leaves undefined. The values go through
// rt() so that the decoders run at run time (coverage) rather than being folded.
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/vmx/exit_qualification.hpp>

namespace vmx = hvkit::vmx;

namespace {

std::uint64_t rt(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

// A single-bit field at `bit`: the bit alone reads true, every other bit set reads false.
template <class Q, class F>
void check_flag(unsigned bit, F read, const char* name) {
  const std::uint64_t only = std::uint64_t{1} << bit;
  EXPECT_TRUE(read(Q{rt(only)})) << name << " bit " << bit;
  EXPECT_FALSE(read(Q{rt(~only)})) << name << " bit " << bit;
  EXPECT_FALSE(read(Q{rt(0)})) << name;
}

// Table 28-1 "Exit Qualification for Debug Exceptions":
//   3:0 "B3 - B0. When set, each of these bits indicates that the corresponding breakpoint
//        condition was met."  11 "BLD"  13 "BD"  14 "BS"  16 "RTM"; 10:4, 12, 15, 63:17 not
//   currently defined.
TEST(vmx_exit_qualification_golden, debug_exceptions_table_28_1) {
  using q = vmx::debug_qualification;
  for (unsigned b = 0; b < 16; ++b) {
    EXPECT_EQ(q{rt(b)}.breakpoints(), b);
    // Undefined bits 10:4, 12, 15, 63:17 all set do not leak into B3-B0.
    EXPECT_EQ(q{rt(b | 0xffff'ffff'fffe'97f0ull)}.breakpoints(), b);
  }
  check_flag<q>(11, [](q x) { return x.bus_lock(); }, "BLD");
  check_flag<q>(13, [](q x) { return x.debug_register_access(); }, "BD");
  check_flag<q>(14, [](q x) { return x.single_step(); }, "BS");
  check_flag<q>(16, [](q x) { return x.rtm(); }, "RTM");
  // A single-step trap after a data breakpoint on DR2: B2 (bit 2) and BS (bit 14) = 0x4004.
  const q db{rt(0x4004)};
  EXPECT_EQ(db.breakpoints(), 0x4u);
  EXPECT_TRUE(db.single_step());
  EXPECT_FALSE(db.debug_register_access());
  EXPECT_EQ(db.raw(), 0x4004u);
}

// Table 28-2 "Exit Qualification for Task Switches":
//   15:0 "Selector of task-state segment (TSS) to which the guest attempted to switch"
//   31:30 "Source of task switch initiation: 0: CALL instruction 1: IRET instruction
//          2: JMP instruction 3: Task gate in IDT"; 29:16 and 63:32 not currently defined.
TEST(vmx_exit_qualification_golden, task_switch_table_28_2) {
  using q = vmx::task_switch_qualification;
  using s = q::source;
  const struct {
    std::uint64_t raw;
    std::uint16_t selector;
    s source;
  } rows[] = {
      {0x0000'0000'0000'0028ull, 0x0028, s::call},
      {0x0000'0000'4000'0030ull, 0x0030, s::iret},
      {0x0000'0000'8000'ffffull, 0xffff, s::jmp},
      {0x0000'0000'c000'0008ull, 0x0008, s::task_gate_in_idt},
      // Undefined bits 29:16 and 63:32 set.
      {0xffff'ffff'3fff'1234ull, 0x1234, s::call},
      {0xffff'ffff'ffff'0040ull, 0x0040, s::task_gate_in_idt},
  };
  for (const auto& r : rows) {
    const q x{rt(r.raw)};
    EXPECT_EQ(x.tss_selector(), r.selector) << std::hex << r.raw;
    EXPECT_EQ(x.initiated_by(), r.source) << std::hex << r.raw;
  }
}

// Table 28-3 "Exit Qualification for Control-Register Accesses":
//   3:0 "Number of control register (0 for CLTS and LMSW)"
//   5:4 "Access type: 0 = MOV to CR 1 = MOV from CR 2 = CLTS 3 = LMSW"
//   6 "LMSW operand type: 0 = register 1 = memory"
//   11:8 "For MOV CR, the general-purpose register: 0 = RAX 1 = RCX 2 = RDX 3 = RBX 4 = RSP
//         5 = RBP 6 = RSI 7 = RDI 8-15 represent R8-R15, respectively"
//   31:16 "For LMSW, the LMSW source data"; 7, 15:12, 63:32 not currently defined.
TEST(vmx_exit_qualification_golden, control_register_access_table_28_3) {
  using q = vmx::cr_access_qualification;
  using a = q::access;
  const struct {
    std::uint64_t raw;
    unsigned cr;
    a type;
    bool memory;
    unsigned gpr;
    std::uint16_t lmsw;
  } rows[] = {
      {0x0000'0000'0000'0000ull, 0, a::mov_to_cr, false, 0, 0},       // MOV CR0, RAX
      {0x0000'0000'0000'0103ull, 3, a::mov_to_cr, false, 1, 0},       // MOV CR3, RCX
      {0x0000'0000'0000'0f04ull, 4, a::mov_to_cr, false, 15, 0},      // MOV CR4, R15
      {0x0000'0000'0000'0818ull, 8, a::mov_from_cr, false, 8, 0},     // MOV R8, CR8
      {0x0000'0000'0000'0713ull, 3, a::mov_from_cr, false, 7, 0},     // MOV RDI, CR3
      {0x0000'0000'0000'0020ull, 0, a::clts, false, 0, 0},            // CLTS
      {0x0000'0000'000b'0030ull, 0, a::lmsw, false, 0, 0x000b},       // LMSW AX (0x000b)
      {0x0000'0000'ffff'0070ull, 0, a::lmsw, true, 0, 0xffff},        // LMSW [mem] (0xffff)
      {0x0000'0000'8001'0070ull, 0, a::lmsw, true, 0, 0x8001},
      // Undefined bits 7, 15:12, 63:32 set.
      {0xffff'ffff'0000'f58cull, 0xc, a::mov_to_cr, false, 5, 0},
      {0xffff'ffff'1234'f0f0ull, 0, a::lmsw, true, 0, 0x1234},
  };
  for (const auto& r : rows) {
    const q x{rt(r.raw)};
    EXPECT_EQ(x.cr(), r.cr) << std::hex << r.raw;
    EXPECT_EQ(x.type(), r.type) << std::hex << r.raw;
    EXPECT_EQ(x.lmsw_memory_operand(), r.memory) << std::hex << r.raw;
    EXPECT_EQ(x.gpr(), r.gpr) << std::hex << r.raw;
    EXPECT_EQ(x.lmsw_source(), r.lmsw) << std::hex << r.raw;
  }
  for (unsigned g = 0; g < 16; ++g) EXPECT_EQ(q{rt(std::uint64_t{g} << 8)}.gpr(), g);
  check_flag<q>(6, [](q x) { return x.lmsw_memory_operand(); }, "LMSW operand type");
}

// Table 28-4 "Exit Qualification for MOV DR":
//   2:0 "Number of debug register"  4 "Direction of access (0 = MOV to DR; 1 = MOV from DR)"
//   11:8 "General-purpose register: 0 = RAX ... 8-15 = R8-R15"; 3, 7:5, 63:12 not defined.
TEST(vmx_exit_qualification_golden, mov_dr_table_28_4) {
  using q = vmx::mov_dr_qualification;
  const struct {
    std::uint64_t raw;
    unsigned dr;
    bool from;
    unsigned gpr;
  } rows[] = {
      {0x107, 7, false, 1},   // MOV DR7, RCX
      {0x216, 6, true, 2},    // MOV RDX, DR6
      {0xf10, 0, true, 15},   // MOV R15, DR0
      {0x003, 3, false, 0},   // MOV DR3, RAX
      // Undefined bits 3, 7:5 and 63:12 set.
      {0xffff'ffff'ffff'f4edull, 5, false, 4},
      {0xffff'ffff'ffff'f0feull, 6, true, 0},
  };
  for (const auto& r : rows) {
    const q x{rt(r.raw)};
    EXPECT_EQ(x.dr(), r.dr) << std::hex << r.raw;
    EXPECT_EQ(x.from_dr(), r.from) << std::hex << r.raw;
    EXPECT_EQ(x.gpr(), r.gpr) << std::hex << r.raw;
  }
  check_flag<q>(4, [](q x) { return x.from_dr(); }, "direction");
}

// Table 28-5 "Exit Qualification for I/O Instructions":
//   2:0 "Size of access: 0 = 1-byte 1 = 2-byte 3 = 4-byte"  3 "Direction of the attempted
//   access (0 = OUT, 1 = IN)"  4 "String instruction (0 = not string; 1 = string)"
//   5 "REP prefixed (0 = not REP; 1 = REP)"  6 "Operand encoding (0 = DX, 1 = immediate)"
//   31:16 "Port number (as specified in DX or in an immediate operand)"; 15:7, 63:32 not defined.
TEST(vmx_exit_qualification_golden, io_instructions_table_28_5) {
  using q = vmx::io_qualification;
  const struct {
    std::uint64_t raw;
    unsigned size;
    bool in, string, rep, imm;
    std::uint16_t port;
  } rows[] = {
      {0x03f8'0000, 1, false, false, false, false, 0x03f8},  // OUT DX, AL
      {0x0060'004b, 4, true, false, false, true, 0x0060},    // IN EAX, 60h
      {0x01f0'0039, 2, true, true, true, false, 0x01f0},     // REP INSW
      {0x0080'0040, 1, false, false, false, true, 0x0080},   // OUT 80h, AL
      {0x0cfc'0013, 4, false, true, false, false, 0x0cfc},   // OUTSD to CFCh
      {0xffff'0009, 2, true, false, false, false, 0xffff},   // IN AX, DX (DX = FFFFh)
      // Undefined bits 15:7 and 63:32 set.
      {0xffff'ffff'0070'ff88ull, 1, true, false, false, false, 0x0070},
  };
  for (const auto& r : rows) {
    const q x{rt(r.raw)};
    EXPECT_EQ(x.size(), r.size) << std::hex << r.raw;
    EXPECT_EQ(x.in(), r.in) << std::hex << r.raw;
    EXPECT_EQ(x.string(), r.string) << std::hex << r.raw;
    EXPECT_EQ(x.rep(), r.rep) << std::hex << r.raw;
    EXPECT_EQ(x.immediate_operand(), r.imm) << std::hex << r.raw;
    EXPECT_EQ(x.port(), r.port) << std::hex << r.raw;
  }
  check_flag<q>(3, [](q x) { return x.in(); }, "direction");
  check_flag<q>(4, [](q x) { return x.string(); }, "string");
  check_flag<q>(5, [](q x) { return x.rep(); }, "REP");
  check_flag<q>(6, [](q x) { return x.immediate_operand(); }, "operand encoding");
}

// Table 28-6 "Exit Qualification for APIC-Access VM Exits from Linear Accesses and
// Guest-Physical Accesses":
//   11:0 "If the APIC-access VM exit is due to a linear access, the offset of access within
//         the APIC page."
//   15:12 "Access type: 0 = linear access for a data read during instruction execution
//          1 = linear access for a data write during instruction execution 2 = linear access
//          for an instruction fetch 3 = linear access (read or write) during event delivery
//          10 = guest-physical access during event delivery 15 = guest-physical access for an
//          instruction fetch or during instruction execution"
//   16 "This bit is set for certain accesses that are asynchronous to instruction execution
//       and not part of event delivery."; 63:17 not currently defined.
TEST(vmx_exit_qualification_golden, apic_access_table_28_6) {
  using q = vmx::apic_access_qualification;
  using a = q::access;
  const struct {
    std::uint64_t raw;
    unsigned offset;
    a type;
    bool async;
  } rows[] = {
      {0x0000'00b0, 0x0b0, a::linear_read, false},   // read of the EOI register
      {0x0000'1300, 0x300, a::linear_write, false},  // write of ICR low
      {0x0000'2000, 0x000, a::linear_fetch, false},
      {0x0000'3fff, 0xfff, a::linear_event_delivery, false},
      {0x0000'a000, 0x000, a::physical_event_delivery, false},
      {0x0001'f000, 0x000, a::physical_fetch_or_execution, true},  // e.g. Intel PT output
      // Undefined bits 63:17 set.
      {0xffff'ffff'fffe'1080ull, 0x080, a::linear_write, false},
  };
  for (const auto& r : rows) {
    const q x{rt(r.raw)};
    EXPECT_EQ(x.offset(), r.offset) << std::hex << r.raw;
    EXPECT_EQ(x.type(), r.type) << std::hex << r.raw;
    EXPECT_EQ(x.asynchronous(), r.async) << std::hex << r.raw;
  }
  // The numeric values of the access types are the table's.
  EXPECT_EQ(static_cast<unsigned>(a::linear_read), 0u);
  EXPECT_EQ(static_cast<unsigned>(a::linear_write), 1u);
  EXPECT_EQ(static_cast<unsigned>(a::linear_fetch), 2u);
  EXPECT_EQ(static_cast<unsigned>(a::linear_event_delivery), 3u);
  EXPECT_EQ(static_cast<unsigned>(a::physical_event_delivery), 10u);
  EXPECT_EQ(static_cast<unsigned>(a::physical_fetch_or_execution), 15u);
  check_flag<q>(16, [](q x) { return x.asynchronous(); }, "asynchronous");
}

// Table 28-7 "Exit Qualification for EPT Violations", one bit per row:
//   0 "Set if the access causing the EPT violation was a data read."
//   1 "... was a data write."  2 "... was an instruction fetch."
//   3 "The logical-AND of bit 0 in the EPT paging-structure entries used to translate the
//      guest-physical address ... (indicates whether the guest-physical address was readable)."
//   4 "... bit 1 ... (writeable)"  5 "... bit 2 ... (executable ...)"
//   6 "... the logical-AND of bit 10 ... (executable for user-mode linear addresses)"
//   7 "Set if the guest linear-address field is valid."
//   8 "... Set if the access causing the EPT violation is to a guest-physical address that is
//      the translation of a linear address."
//   9 "... 0 if the linear address is a supervisor-mode linear address and 1 if it is a
//      user-mode linear address."
//   10 "... 0 if paging translates the linear address to a read-only page and 1 if it
//       translates to a read/write page."
//   11 "... 0 if paging translates the linear address to an executable page and 1 if it
//       translates to an execute-disable page."
//   12 "NMI unblocking due to IRET"
//   13 "Set if the access causing the EPT violation was a shadow-stack access."
//   14 "... the same as bit 60 in the EPT paging-structure entry that maps the page"
//      (supervisor shadow stack)
//   15 "This bit is set if the EPT violation was caused as a result of guest-paging
//       verification."
//   16 "This bit is set if the access was asynchronous to instruction execution not the
//       result of event delivery."  63:17 not currently defined.
TEST(vmx_exit_qualification_golden, ept_violation_table_28_7) {
  using q = vmx::ept_violation_qualification;
  check_flag<q>(0, [](q x) { return x.read(); }, "read");
  check_flag<q>(1, [](q x) { return x.write(); }, "write");
  check_flag<q>(2, [](q x) { return x.fetch(); }, "fetch");
  check_flag<q>(3, [](q x) { return x.readable(); }, "readable");
  check_flag<q>(4, [](q x) { return x.writable(); }, "writable");
  check_flag<q>(5, [](q x) { return x.executable(); }, "executable");
  check_flag<q>(6, [](q x) { return x.user_executable(); }, "user executable");
  check_flag<q>(7, [](q x) { return x.linear_address_valid(); }, "linear address valid");
  check_flag<q>(8, [](q x) { return x.translated_access(); }, "translation of a linear address");
  check_flag<q>(9, [](q x) { return x.user_mode_address(); }, "user-mode linear address");
  check_flag<q>(10, [](q x) { return x.writable_page(); }, "read/write page");
  check_flag<q>(11, [](q x) { return x.execute_disable_page(); }, "execute-disable page");
  check_flag<q>(12, [](q x) { return x.nmi_unblocking(); }, "NMI unblocking due to IRET");
  check_flag<q>(13, [](q x) { return x.shadow_stack_access(); }, "shadow-stack access");
  check_flag<q>(14, [](q x) { return x.supervisor_shadow_stack(); }, "supervisor shadow stack");
  check_flag<q>(15, [](q x) { return x.guest_paging_verification(); }, "guest-paging verification");
  check_flag<q>(16, [](q x) { return x.asynchronous(); }, "asynchronous");
  // A write by a user-mode instruction to a page EPT maps read+execute, advanced information
  // reported: write (1), readable (3), executable (5), linear valid (7), translation (8),
  // user (9), read/write page (10): 0x7aa.
  const q w{rt(0x7aa)};
  EXPECT_TRUE(w.write() && w.readable() && w.executable() && w.linear_address_valid() && w.translated_access() &&
              w.user_mode_address() && w.writable_page());
  EXPECT_FALSE(w.read() || w.fetch() || w.writable() || w.user_executable() || w.execute_disable_page() ||
               w.nmi_unblocking() || w.asynchronous());
  EXPECT_EQ(w.raw(), 0x7aau);
}

}  // namespace
