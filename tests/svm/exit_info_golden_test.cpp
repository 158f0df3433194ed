// SPDX-License-Identifier: MIT
// Every field of the SVM exit-information decoders (svm/exit_info.hpp) and every row of the
// exit-code table (svm/exit_code.hpp), typed by hand from AMD APM Vol. 2: Figure 15-2
// "EXITINFO1 for IOIO Intercept" (15.10.2), 15.11 "MSR Intercepts", 15.33.1 "MOV CRx/DRx
// Intercepts" ... in 15.33 "Decode Assists", 15.12 "Exception Intercepts", 15.25.6 "Nested
// versus Guest Page Faults, Fault Ordering" and Appendix C Table C-1 "SVM Intercept Exit
// Codes". rt() keeps the decoders at run time.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <hvkit/svm/exit_code.hpp>
#include <hvkit/svm/exit_info.hpp>

namespace svm = hvkit::svm;

namespace {

std::uint64_t rt(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

// Figure 15-2 "EXITINFO1 for IOIO Intercept": bit 0 TYPE ("1 = IN instruction, 0 = OUT"),
// 1 reserved, 2 STR ("string based port access"), 3 REP ("repeated port access"), 4 SZ8,
// 5 SZ16, 6 SZ32 ("size of the port access"), 7 A16, 8 A32, 9 A64 ("address size"),
// 12:10 SEG ("effective segment number", with decode assists), 15:13 reserved, 31:16 PORT.
TEST(svm_exit_info_golden, ioio_figure_15_2) {
  using io = svm::ioio_info;
  EXPECT_TRUE(io{rt(1)}.in());
  EXPECT_FALSE(io{rt(~1ull)}.in());
  EXPECT_TRUE(io{rt(1ull << 2)}.string());
  EXPECT_FALSE(io{rt(~(1ull << 2))}.string());
  EXPECT_TRUE(io{rt(1ull << 3)}.rep());
  EXPECT_FALSE(io{rt(~(1ull << 3))}.rep());
  // Exactly one of SZ8/SZ16/SZ32 and of A16/A32/A64; none or two is malformed (0).
  EXPECT_EQ(io{rt(1ull << 4)}.size(), 1u);
  EXPECT_EQ(io{rt(1ull << 5)}.size(), 2u);
  EXPECT_EQ(io{rt(1ull << 6)}.size(), 4u);
  EXPECT_EQ(io{rt(0)}.size(), 0u);
  EXPECT_EQ(io{rt((1ull << 4) | (1ull << 6))}.size(), 0u);
  EXPECT_EQ(io{rt(0x70)}.size(), 0u);
  EXPECT_EQ(io{rt(1ull << 7)}.address_size(), 16u);
  EXPECT_EQ(io{rt(1ull << 8)}.address_size(), 32u);
  EXPECT_EQ(io{rt(1ull << 9)}.address_size(), 64u);
  EXPECT_EQ(io{rt(0)}.address_size(), 0u);
  EXPECT_EQ(io{rt((1ull << 7) | (1ull << 9))}.address_size(), 0u);
  for (unsigned s = 0; s < 6; ++s) {
    EXPECT_EQ(io{rt(std::uint64_t{s} << 10)}.segment(), s);
    EXPECT_EQ(io{rt((std::uint64_t{s} << 10) | ~(7ull << 10))}.segment(), s);
  }
  for (std::uint64_t p : {0x0000ull, 0x0060ull, 0x03f8ull, 0x8000ull, 0xcfcull, 0xffffull}) {
    EXPECT_EQ(io{rt(p << 16)}.port(), p);
    EXPECT_EQ(io{rt((p << 16) | 0xffff'ffff'0000'ffffull)}.port(), p);
  }
  // REP OUTSD through FS, 64-bit addressing, port CF8h: STR(2) REP(3) SZ32(6) A64(9) SEG=4:
  // 0x4 | 0x8 | 0x40 | 0x200 | 4 << 10 = 0x124c, port CF8h in 31:16: 0x0cf8'124c.
  const io o{rt(0x0cf8'124c)};
  EXPECT_FALSE(o.in());
  EXPECT_TRUE(o.string() && o.rep());
  EXPECT_EQ(o.size(), 4u);
  EXPECT_EQ(o.address_size(), 64u);
  EXPECT_EQ(o.segment(), 4u);
  EXPECT_EQ(o.port(), 0xcf8u);
  EXPECT_EQ(o.raw(), 0x0cf8'124cu);
}

// 15.11: "EXITINFO1 ... 0 for RDMSR and 1 for WRMSR".
TEST(svm_exit_info_golden, msr_15_11) {
  EXPECT_FALSE(svm::msr_is_write(rt(0)));
  EXPECT_TRUE(svm::msr_is_write(rt(1)));
}

// 15.33.1 "MOV CRx/DRx Intercepts": EXITINFO1[63] "1 if the intercept was caused by a MOV
// CRx/DRx instruction, 0 otherwise (LMSW, CLTS, SMSW)"; EXITINFO1[3:0] "the GPR number" of
// the MOV. Without decode assists (CPUID Fn8000_000A EDX[7] = 0) nothing is reported.
TEST(svm_exit_info_golden, mov_cr_dr_15_33_1) {
  using s = svm::cr_access::source;
  for (std::uint64_t g = 0; g < 16; ++g) {
    const auto m = svm::decode_cr_access(rt((1ull << 63) | g), true);
    EXPECT_EQ(m.from, s::mov);
    EXPECT_EQ(m.gpr, g);
    // Bits 62:4 are not part of the GPR number.
    EXPECT_EQ(svm::decode_cr_access(rt((1ull << 63) | 0x7fff'ffff'ffff'fff0ull | g), true).gpr, g);
  }
  EXPECT_EQ(svm::decode_cr_access(rt(0), true).from, s::other);
  EXPECT_EQ(svm::decode_cr_access(rt(0x7fff'ffff'ffff'ffffull), true).from, s::other);
  EXPECT_EQ(svm::decode_cr_access(rt(1ull << 63), false).from, s::not_decoded);
  EXPECT_EQ(svm::decode_cr_access(rt(0), false).from, s::not_decoded);
  // CR write traps (90h-9Fh): "EXITINFO1 holds the new value of the CR".
  EXPECT_EQ(svm::cr_write_trap_value(rt(0x0000'0000'8005'0033ull)), 0x8005'0033u);
  // INTn with decode assists (15.33.4): "EXITINFO1 ... the software interrupt vector".
  EXPECT_EQ(svm::swint_vector(rt(0x21)), 0x21u);
  EXPECT_EQ(svm::swint_vector(rt(0xff)), 0xffu);
  // INVLPG/INVLPGA with decode assists (15.33.5): "the linear address".
  EXPECT_EQ(svm::invlpg_address(rt(0xffff'8000'dead'b000ull)).value(), 0xffff'8000'dead'b000ull);
}

// 15.12 "Exception Intercepts": EXITINFO1 is the error code the exception would have pushed;
// for #PF EXITINFO2 is "the faulting address (the value that would be loaded into CR2)".
// Exit codes 40h-5Fh are EXCP0-EXCP31 (Table C-1).
TEST(svm_exit_info_golden, exceptions_15_12) {
  for (unsigned v = 0; v < 32; ++v) {
    const auto e = svm::decode_exception(svm::exit_code{rt(0x40 + v)}, rt(0xffff'ffff'0000'0000ull | v), rt(v * 0x1000));
    EXPECT_EQ(e.vector, v);
    EXPECT_EQ(e.error_code, v);  // the low 32 bits
    EXPECT_EQ(e.fault_address().value(), v * 0x1000u);
  }
  // #PF on a user write to a present page at 0x7fff'0000'1234: error code P|W|U = 7.
  const auto pf = svm::decode_exception(svm::exit_code{rt(0x4e)}, rt(7), rt(0x7fff'0000'1234ull));
  EXPECT_EQ(pf.vector, 14u);
  EXPECT_EQ(pf.error_code, 7u);
  EXPECT_EQ(pf.exit_info_2, 0x7fff'0000'1234ull);
}

// 15.25.6: "EXITINFO1 - Error code ... bit 0 (P) ... bit 1 (RW) ... bit 2 (US) ... bit 3 (RSV)
// ... bit 4 (ID) ... bit 6 (SS)"; "bit 32 - set to 1 if nested page fault occurred while
// translating the guest's final physical address"; "bit 33 - set to 1 if nested page fault
// occurred while translating the guest page tables"; "EXITINFO2 - the faulting guest
// physical address".
TEST(svm_exit_info_golden, npf_15_25_6) {
  using e = svm::npf_error_code;
  const struct {
    unsigned bit;
    bool (e::*read)() const noexcept;
    const char* name;
  } flags[] = {
      {0, &e::is_present, "P"},           {1, &e::is_write, "RW"},
      {2, &e::is_user, "US"},             {3, &e::is_reserved, "RSV"},
      {4, &e::is_fetch, "ID"},            {6, &e::is_shadow_stack, "SS"},
      {32, &e::is_final_translation, "final physical address"},
      {33, &e::is_guest_page_table_walk, "guest page tables"},
  };
  for (const auto& f : flags) {
    const std::uint64_t only = 1ull << f.bit;
    EXPECT_TRUE((e{rt(only)}.*f.read)()) << f.name;
    EXPECT_FALSE((e{rt(~only)}.*f.read)()) << f.name;
  }
  EXPECT_EQ(e{rt(0x3'0000'001full)}.pfec(), 0x1fu);
  EXPECT_EQ(e{rt(0xffff'ffff'8000'0001ull)}.pfec(), 0x8000'0001u);
  // A user instruction fetch hitting a non-present nested PTE while fetching: US|ID + bit 32.
  const auto a = svm::decode_npf(rt(0x1'0000'0014ull), rt(0x0000'0001'2345'6000ull));
  EXPECT_TRUE(a.error.is_fetch() && a.error.is_user() && a.error.is_final_translation());
  EXPECT_FALSE(a.error.is_present() || a.error.is_write() || a.error.is_guest_page_table_walk());
  EXPECT_EQ(a.address.value(), 0x1'2345'6000ull);
  // make(): the error code in bits 31:0, bits 32/33 from the arguments.
  EXPECT_EQ(e::make(static_cast<std::uint32_t>(rt(0x0f)), true, true).raw(), 0x3'0000'000full);
  EXPECT_EQ(e::make(static_cast<std::uint32_t>(rt(0x06)), false, false).raw(), 0x6ull);
  EXPECT_TRUE(e::make(0x5, false, true) == e{0x2'0000'0005ull});
  EXPECT_FALSE(e::make(0x5, false, true) == e{0x1'0000'0005ull});
  EXPECT_EQ(e{}.raw(), 0u);
}

// Table C-1 "SVM Intercept Exit Codes", every row, typed from the appendix.
std::string expected_name(std::uint64_t c) {
  const char* const misc[] = {"INTR",   "NMI",         "SMI",         "INIT",        "VINTR",     "CR0_SEL_WRITE",
                              "IDTR_READ", "GDTR_READ", "LDTR_READ",  "TR_READ",     "IDTR_WRITE", "GDTR_WRITE",
                              "LDTR_WRITE", "TR_WRITE", "RDTSC",      "RDPMC",       "PUSHF",     "POPF",
                              "CPUID",  "RSM",         "IRET",        "SWINT",       "INVD",      "PAUSE",
                              "HLT",    "INVLPG",      "INVLPGA",     "IOIO",        "MSR",       "TASK_SWITCH",
                              "FERR_FREEZE", "SHUTDOWN", "VMRUN",     "VMMCALL",     "VMLOAD",    "VMSAVE",
                              "STGI",   "CLGI",        "SKINIT",      "RDTSCP",      "ICEBP",     "WBINVD",
                              "MONITOR", "MWAIT",      "MWAIT_CONDITIONAL", "XSETBV", "RDPRU",    "EFER_WRITE_TRAP"};
  if (c <= 0x0f) return "CR" + std::to_string(c) + "_READ";
  if (c <= 0x1f) return "CR" + std::to_string(c - 0x10) + "_WRITE";
  if (c <= 0x2f) return "DR" + std::to_string(c - 0x20) + "_READ";
  if (c <= 0x3f) return "DR" + std::to_string(c - 0x30) + "_WRITE";
  if (c <= 0x5f) return "EXCP" + std::to_string(c - 0x40);
  if (c <= 0x8f) return misc[c - 0x60];
  if (c <= 0x9f) return "CR" + std::to_string(c - 0x90) + "_WRITE_TRAP";
  switch (c) {
    case 0xa0: return "INVLPGB";
    case 0xa1: return "INVLPGB_ILLEGAL";
    case 0xa2: return "INVPCID";
    case 0xa3: return "MCOMMIT";
    case 0xa4: return "TLBSYNC";
    case 0x400: return "NPF";
    case 0x401: return "AVIC_INCOMPLETE_IPI";
    case 0x402: return "AVIC_NOACCEL";
    case 0x403: return "VMGEXIT";
    case 0xffff'ffff'ffff'ffffull: return "INVALID";        // -1
    case 0xffff'ffff'ffff'fffeull: return "BUSY";           // -2
    case 0xffff'ffff'ffff'fffdull: return "IDLE_REQUIRED";  // -3
    case 0xffff'ffff'ffff'fffcull: return "INVALID_PMC";    // -4
    default: return "";
  }
}

TEST(svm_exit_code_golden, every_row_of_table_c_1) {
  std::uint64_t codes[0x500 + 8];
  std::size_t n = 0;
  for (std::uint64_t c = 0; c < 0x500; ++c) codes[n++] = c;
  for (std::uint64_t k = 1; k <= 8; ++k) codes[n++] = ~std::uint64_t{0} - (k - 1);  // -1 ... -8
  unsigned named = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t c = codes[i];
    const svm::exit_code e{rt(c)};
    const std::string want = expected_name(c);
    const char* got = svm::name(e);
    if (want.empty()) {
      EXPECT_EQ(got, nullptr) << std::hex << c;
    } else {
      ASSERT_NE(got, nullptr) << std::hex << c;
      EXPECT_EQ(std::string(got), want) << std::hex << c;
      ++named;
    }
    // The classification by range (Table C-1: 00h-0Fh CRn reads, 10h-1Fh CRn writes, 20h-2Fh
    // DRn reads, 30h-3Fh DRn writes, 40h-5Fh exceptions, 90h-9Fh CRn write traps; -1 ... -4
    // VMRUN could not run the guest).
    EXPECT_EQ(svm::is_cr_read(e), c <= 0x0f) << std::hex << c;
    EXPECT_EQ(svm::is_cr_write(e), c >= 0x10 && c <= 0x1f) << std::hex << c;
    EXPECT_EQ(svm::is_dr_read(e), c >= 0x20 && c <= 0x2f) << std::hex << c;
    EXPECT_EQ(svm::is_dr_write(e), c >= 0x30 && c <= 0x3f) << std::hex << c;
    EXPECT_EQ(svm::is_exception(e), c >= 0x40 && c <= 0x5f) << std::hex << c;
    EXPECT_EQ(svm::is_cr_write_trap(e), c >= 0x90 && c <= 0x9f) << std::hex << c;
    EXPECT_EQ(svm::is_vmrun_failure(e), c >= 0xffff'ffff'ffff'fffcull) << std::hex << c;
    if (c <= 0x3f || (c >= 0x90 && c <= 0x9f)) {
      EXPECT_EQ(svm::cr_dr_number(e), c & 0xf) << std::hex << c;
    }
    if (c >= 0x40 && c <= 0x5f) {
      EXPECT_EQ(svm::exception_vector(e), c - 0x40) << std::hex << c;
    }
  }
  // 16 + 16 + 16 + 16 CR/DR, 32 exceptions, 48 in 60h-8Fh, 16 write traps, 5 in A0h-A4h,
  // 4 at 400h-403h, 4 negative codes.
  EXPECT_EQ(named, 64u + 32u + 48u + 16u + 5u + 4u + 4u);
  // The builders: code = base + n.
  for (unsigned k = 0; k < 16; ++k) {
    const unsigned r = static_cast<unsigned>(rt(k));
    EXPECT_EQ(svm::raw(svm::cr_read_exit(r)), 0x00u + k);
    EXPECT_EQ(svm::raw(svm::cr_write_exit(r)), 0x10u + k);
    EXPECT_EQ(svm::raw(svm::dr_read_exit(r)), 0x20u + k);
    EXPECT_EQ(svm::raw(svm::dr_write_exit(r)), 0x30u + k);
    EXPECT_EQ(svm::raw(svm::cr_write_trap_exit(r)), 0x90u + k);
  }
  for (unsigned v = 0; v < 32; ++v) EXPECT_EQ(svm::raw(svm::exception_exit(static_cast<unsigned>(rt(v)))), 0x40u + v);
  // A few named enumerators against the table.
  EXPECT_EQ(svm::raw(svm::exit_code::vmmcall), 0x81u);
  EXPECT_EQ(svm::raw(svm::exit_code::npf), 0x400u);
  EXPECT_EQ(svm::raw(svm::exit_code::invalid), 0xffff'ffff'ffff'ffffull);
  EXPECT_EQ(svm::raw(svm::exit_code::invalid_pmc), 0xffff'ffff'ffff'fffcull);
}

}  // namespace
