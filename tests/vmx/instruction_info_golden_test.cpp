// SPDX-License-Identifier: MIT
// Every field of the VM-exit instruction-information decoders (vmx/instruction_info.hpp) and
// of the three interruption-information fields (vmx/interruption_info.hpp) against the bit
// positions of the SDM's tables, typed by hand: Vol. 3C 28.2.5 "Information for VM Exits Due
// to Instruction Execution" (the "Format of the VM-Exit Instruction-Information Field as
// Used for ..." tables) and 25.8.3 / 25.9.2 / 25.9.3 ("Format of the VM-Entry
// Interruption-Information Field", "Format of the VM-Exit Interruption-Information Field",
// "Format of the IDT-Vectoring Information Field"). Bits the tables call undefined are set
// to 1 around each field so that they cannot leak in. rt() keeps the decoders at run time.
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/vmx/instruction_info.hpp>
#include <hvkit/vmx/interruption_info.hpp>

namespace vmx = hvkit::vmx;

namespace {

std::uint32_t rt(std::uint32_t v) {
  volatile std::uint32_t x = v;
  return x;
}

// The memory-operand fields every memory-operand table shares (bits 1:0 "Scaling: 0 = no
// scaling 1 = scale by 2 2 = scale by 4 3 = scale by 8", 9:7 "Address size: 0 = 16-bit
// 1 = 32-bit 2 = 64-bit", 17:15 "Segment register: 0 = ES 1 = CS 2 = SS 3 = DS 4 = FS 5 = GS",
// 21:18 "IndexReg: 0 = RAX 1 = RCX ... 8-15 represent R8-R15", 22 "IndexReg invalid (0 = valid;
// 1 = invalid)", 26:23 "BaseReg (encoded as IndexReg above)", 27 "BaseReg invalid (0 = valid;
// 1 = invalid)"), checked on decoder T over every encoding.
template <class T>
void check_memory_operand_fields() {
  const unsigned scale[4] = {1, 2, 4, 8};
  for (std::uint32_t s = 0; s < 4; ++s) EXPECT_EQ(T{rt(s)}.scale(), scale[s]);
  EXPECT_EQ(T{rt(0u << 7)}.addr_size(), vmx::address_size::a16);
  EXPECT_EQ(T{rt(1u << 7)}.addr_size(), vmx::address_size::a32);
  EXPECT_EQ(T{rt(2u << 7)}.addr_size(), vmx::address_size::a64);
  for (std::uint32_t seg = 0; seg < 6; ++seg) EXPECT_EQ(T{rt(seg << 15)}.segment(), seg);
  for (std::uint32_t r = 0; r < 16; ++r) {
    EXPECT_EQ(T{rt(r << 18)}.index_reg(), r);
    EXPECT_EQ(T{rt(r << 23)}.base_reg(), r);
    // Every other bit set (bits 21:18 resp. 26:23 cleared first).
    EXPECT_EQ(T{rt((r << 18) | ~(0xfu << 18))}.index_reg(), r);
    EXPECT_EQ(T{rt((r << 23) | ~(0xfu << 23))}.base_reg(), r);
  }
  EXPECT_TRUE(T{rt(0)}.index_valid());
  EXPECT_FALSE(T{rt(1u << 22)}.index_valid());
  EXPECT_TRUE(T{rt(~(1u << 22))}.index_valid());
  EXPECT_TRUE(T{rt(0)}.base_valid());
  EXPECT_FALSE(T{rt(1u << 27)}.base_valid());
  EXPECT_TRUE(T{rt(~(1u << 27))}.base_valid());
  // All-ones elsewhere does not change scaling, address size or segment.
  EXPECT_EQ(T{rt(~0x3u | 2u)}.scale(), 4u);
  EXPECT_EQ(T{rt(~(7u << 7) | (1u << 7))}.addr_size(), vmx::address_size::a32);
  EXPECT_EQ(T{rt(~(7u << 15) | (5u << 15))}.segment(), 5u);
}

// "Format of the VM-Exit Instruction-Information Field as Used for LIDT, LGDT, SIDT, or SGDT":
// the memory-operand fields above, 11 "Operand size: 0 = 16-bit 1 = 32-bit", 29:28
// "Instruction identity: 0 = SGDT 1 = SIDT 2 = LGDT 3 = LIDT".
// "... as Used for LLDT, LTR, SLDT, and STR": 6:3 "Reg1", 10 "Mem/Reg (0 = memory;
// 1 = register)", 29:28 "Instruction identity: 0 = SLDT 1 = STR 2 = LLDT 3 = LTR".
TEST(vmx_instruction_info_golden, descriptor_table_instructions) {
  using d = vmx::descriptor_table_info;
  using i = d::instruction;
  check_memory_operand_fields<d>();
  const i gdtr_idtr[4] = {i::sgdt, i::sidt, i::lgdt, i::lidt};
  const i ldtr_tr[4] = {i::sldt, i::str, i::lldt, i::ltr};
  for (std::uint32_t id = 0; id < 4; ++id) {
    EXPECT_EQ(d{rt(id << 28)}.which(true), gdtr_idtr[id]);
    EXPECT_EQ(d{rt(id << 28)}.which(false), ldtr_tr[id]);
    // Bits 31:30 are undefined in both tables.
    EXPECT_EQ(d{rt((id << 28) | 0xc000'0000u)}.which(true), gdtr_idtr[id]);
    EXPECT_EQ(d{rt((id << 28) | 0xc000'0000u)}.which(false), ldtr_tr[id]);
  }
  EXPECT_TRUE(d{rt(1u << 11)}.operand_size_32());
  EXPECT_FALSE(d{rt(~(1u << 11))}.operand_size_32());
  EXPECT_TRUE(d{rt(1u << 10)}.register_operand());
  EXPECT_FALSE(d{rt(~(1u << 10))}.register_operand());
  for (std::uint32_t r = 0; r < 16; ++r) {
    EXPECT_EQ(d{rt(r << 3)}.reg1(), r);
    EXPECT_EQ(d{rt((r << 3) | ~(0xfu << 3))}.reg1(), r);
  }
  // LIDT [rbp + rsi*8 + disp] with a 32-bit operand size, 64-bit addressing, SS:
  // scaling 3, asize 2, opsize 1, seg 2, index 6 (RSI), base 5 (RBP), identity 3:
  // 3 | 2<<7 | 1<<11 | 2<<15 | 6<<18 | 5<<23 | 3<<28 = 0x3299'0903.
  const d lidt{rt(0x3299'0903u)};
  EXPECT_EQ(lidt.scale(), 8u);
  EXPECT_EQ(lidt.addr_size(), vmx::address_size::a64);
  EXPECT_TRUE(lidt.operand_size_32());
  EXPECT_EQ(lidt.segment(), 2u);
  EXPECT_EQ(lidt.index_reg(), 6u);
  EXPECT_EQ(lidt.base_reg(), 5u);
  EXPECT_TRUE(lidt.index_valid() && lidt.base_valid());
  EXPECT_EQ(lidt.which(true), i::lidt);
  EXPECT_EQ(lidt.raw(), 0x3299'0903u);
  // STR r9d: reg1 9, register (bit 10), index and base invalid (22, 27), identity 1:
  // 9<<3 | 1<<10 | 1<<22 | 1<<27 | 1<<28 = 0x1840'0448.
  const d str{rt(0x1840'0448u)};
  EXPECT_TRUE(str.register_operand());
  EXPECT_EQ(str.reg1(), 9u);
  EXPECT_FALSE(str.index_valid() || str.base_valid());
  EXPECT_EQ(str.which(false), i::str);
}

// "... as Used for INVEPT, INVPCID, and INVVPID": memory-operand fields, 10 "Cleared to 0",
// 31:28 "Reg2 (same encoding as IndexReg above)".
// "... as Used for VMCLEAR, VMPTRLD, VMPTRST, VMXON, XRSTORS, and XSAVES": memory-operand
// fields, 31:28 undefined.
// "... as Used for VMREAD and VMWRITE": 6:3 "Reg1 (undefined for memory instructions)",
// 10 "Mem/Reg (0 = memory; 1 = register)", 31:28 "Reg2 (same encoding as IndexReg above)".
TEST(vmx_instruction_info_golden, vmx_instructions) {
  using v = vmx::vmx_instruction_info;
  check_memory_operand_fields<v>();
  for (std::uint32_t r = 0; r < 16; ++r) {
    EXPECT_EQ(v{rt(r << 28)}.reg2(), r);
    EXPECT_EQ(v{rt((r << 28) | 0x0fff'ffffu)}.reg2(), r);
    EXPECT_EQ(v{rt(r << 3)}.reg1(), r);
    EXPECT_EQ(v{rt((r << 3) | ~(0xfu << 3))}.reg1(), r);
  }
  EXPECT_TRUE(v{rt(1u << 10)}.register_operand());
  EXPECT_FALSE(v{rt(~(1u << 10))}.register_operand());
  // INVPCID rdx, [rax]: type in RDX (reg2 2), base RAX valid, index invalid, DS, 64-bit:
  // 2<<7 | 3<<15 | 1<<22 | 0<<23 | 2<<28 = 0x2041'8100.
  const v invpcid{rt(0x2041'8100u)};
  EXPECT_EQ(invpcid.reg2(), 2u);
  EXPECT_TRUE(invpcid.base_valid());
  EXPECT_EQ(invpcid.base_reg(), 0u);
  EXPECT_FALSE(invpcid.index_valid());
  EXPECT_EQ(invpcid.segment(), 3u);
  EXPECT_EQ(invpcid.addr_size(), vmx::address_size::a64);
  EXPECT_FALSE(invpcid.register_operand());
  // VMWRITE r14, r13 (encoding in r14 = reg2, value in r13 = reg1, register form):
  // 13<<3 | 1<<10 | 14<<28 = 0xe000'0468.
  const v vmwrite{rt(0xe000'0468u)};
  EXPECT_EQ(vmwrite.reg1(), 13u);
  EXPECT_EQ(vmwrite.reg2(), 14u);
  EXPECT_TRUE(vmwrite.register_operand());
  EXPECT_EQ(vmwrite.raw(), 0xe000'0468u);
}

// "... as Used for INS and OUTS": 6:0 undefined, 9:7 "Address size: 0 = 16-bit 1 = 32-bit
// 2 = 64-bit", 14:10 undefined, 17:15 "Segment register: 0 = ES 1 = CS 2 = SS 3 = DS 4 = FS
// 5 = GS (undefined for VM exits due to execution of INS)", 31:18 undefined.
TEST(vmx_instruction_info_golden, ins_outs) {
  using o = vmx::ins_outs_info;
  const vmx::address_size sizes[3] = {vmx::address_size::a16, vmx::address_size::a32, vmx::address_size::a64};
  for (std::uint32_t a = 0; a < 3; ++a) {
    EXPECT_EQ(o{rt(a << 7)}.addr_size(), sizes[a]);
    EXPECT_EQ(o{rt((a << 7) | ~(7u << 7))}.addr_size(), sizes[a]);
  }
  for (std::uint32_t s = 0; s < 6; ++s) {
    EXPECT_EQ(o{rt(s << 15)}.segment(), s);
    EXPECT_EQ(o{rt((s << 15) | ~(7u << 15))}.segment(), s);
  }
  // REP OUTSB with a GS override, 32-bit addressing: 1<<7 | 5<<15 = 0x2'8080.
  const o outs{rt(0x2'8080u)};
  EXPECT_EQ(outs.addr_size(), vmx::address_size::a32);
  EXPECT_EQ(outs.segment(), 5u);
  EXPECT_EQ(outs.raw(), 0x2'8080u);
  EXPECT_EQ(o{}.raw(), 0u);
}

// "... as Used for RDRAND, RDSEED, TPAUSE, and UMWAIT": 2:0 undefined, 6:3 "Operand register
// (destination for RDRAND and RDSEED; source for TPAUSE and UMWAIT)", 10:7 undefined,
// 12:11 "Operand size: 0 = 16-bit 1 = 32-bit 2 = 64-bit", 31:13 undefined.
TEST(vmx_instruction_info_golden, register_operand_instructions) {
  using r = vmx::register_operand_info;
  using s = r::operand_size;
  for (std::uint32_t g = 0; g < 16; ++g) {
    EXPECT_EQ(r{rt(g << 3)}.reg(), g);
    EXPECT_EQ(r{rt((g << 3) | ~(0xfu << 3))}.reg(), g);
  }
  const s sizes[3] = {s::o16, s::o32, s::o64};
  for (std::uint32_t z = 0; z < 3; ++z) {
    EXPECT_EQ(r{rt(z << 11)}.size(), sizes[z]);
    EXPECT_EQ(r{rt((z << 11) | ~(3u << 11))}.size(), sizes[z]);
  }
  // RDSEED r10 with a 64-bit operand: 10<<3 | 2<<11 = 0x1050.
  const r rdseed{rt(0x1050u)};
  EXPECT_EQ(rdseed.reg(), 10u);
  EXPECT_EQ(rdseed.size(), s::o64);
  EXPECT_EQ(rdseed.raw(), 0x1050u);
  EXPECT_EQ(r{}.raw(), 0u);
}

// The interruption-information fields: 7:0 "Vector of interrupt or exception", 10:8
// "Interruption type", 11 "Deliver error code" (entry) / "Error code valid" (exit and IDT
// vectoring), 12 "NMI unblocking due to IRET" (exit) / undefined (IDT vectoring) / reserved
// (entry, 30:12 "Reserved"), 31 "Valid". Interruption types of the VM-entry table: "0: External
// interrupt 1: Reserved 2: Non-maskable interrupt (NMI) 3: Hardware exception (e.g., #PF)
// 4: Software interrupt (INT n) 5: Privileged software exception (INT1) 6: Software exception
// (INT3 or INTO) 7: Other event".
TEST(vmx_interruption_info_golden, the_three_fields) {
  using t = vmx::interruption_type;
  const t types[8] = {t::external_interrupt, t::reserved, t::nmi, t::hardware_exception,
                      t::software_interrupt, t::privileged_software_exception, t::software_exception,
                      t::other_event};
  for (std::uint32_t k = 0; k < 8; ++k) {
    EXPECT_EQ(vmx::exit_interruption_info{rt(k << 8)}.type(), types[k]);
    EXPECT_EQ(vmx::idt_vectoring_info{rt((k << 8) | ~(7u << 8))}.type(), types[k]);
    EXPECT_EQ(vmx::entry_interruption_info{rt(k << 8)}.type(), types[k]);
    // Software events are the types 4, 5 and 6 (SDM 27.6.1.1: "software interrupts,
    // privileged software exceptions, and software exceptions").
    EXPECT_EQ(vmx::is_software_event(types[k]), k >= 4 && k <= 6) << k;
  }
  for (std::uint32_t v = 0; v < 256; v += 17) {
    EXPECT_EQ(vmx::exit_interruption_info{rt(v)}.vector(), v);
    EXPECT_EQ(vmx::idt_vectoring_info{rt(v | 0xffff'ff00u)}.vector(), v);
  }
  EXPECT_TRUE(vmx::exit_interruption_info{rt(1u << 11)}.has_error_code());
  EXPECT_FALSE(vmx::exit_interruption_info{rt(~(1u << 11))}.has_error_code());
  EXPECT_TRUE(vmx::exit_interruption_info{rt(1u << 12)}.nmi_unblocking());
  EXPECT_FALSE(vmx::exit_interruption_info{rt(~(1u << 12))}.nmi_unblocking());
  EXPECT_TRUE(vmx::idt_vectoring_info{rt(1u << 31)}.valid());
  EXPECT_FALSE(vmx::idt_vectoring_info{rt(~(1u << 31))}.valid());
  // A #PF with an error code, valid, NMI unblocking: 0x8000'1b0e.
  const vmx::exit_interruption_info pf{rt(0x8000'1b0eu)};
  EXPECT_TRUE(pf.valid() && pf.has_error_code() && pf.nmi_unblocking());
  EXPECT_EQ(pf.vector(), 14u);
  EXPECT_EQ(pf.type(), t::hardware_exception);
  // The entry field from the builder: #GP (13) with error code = 0x8000'0b0d; an external
  // interrupt 0x30 without = 0x8000'0030; pending MTF (type 7, vector 0) = 0x8000'0700.
  EXPECT_EQ(vmx::entry_interruption_info::make(static_cast<std::uint8_t>(rt(13)), t::hardware_exception, true).raw(), 0x8000'0b0du);
  EXPECT_EQ(vmx::entry_interruption_info::make(static_cast<std::uint8_t>(rt(0x30)), t::external_interrupt, false).raw(), 0x8000'0030u);
  EXPECT_EQ(vmx::entry_interruption_info::make(static_cast<std::uint8_t>(rt(0)), t::other_event, false).raw(), 0x8000'0700u);
  // IDT vectoring to the entry field: bits 30:12 cleared, the rest kept. An NMI being
  // delivered with undefined bit 12 and bits 30:13 set: 0xffff'f202 -> 0x8000'0202.
  const vmx::idt_vectoring_info nmi{rt(0xffff'f202u)};
  EXPECT_EQ(nmi.to_entry().raw(), 0x8000'0202u);
  EXPECT_TRUE(nmi.to_entry() == vmx::entry_interruption_info{0x8000'0202u});
  EXPECT_FALSE(nmi.to_entry() == vmx::entry_interruption_info{0x8000'0200u});
}

}  // namespace
