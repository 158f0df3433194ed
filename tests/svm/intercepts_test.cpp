// SPDX-License-Identifier: MIT
// Intercept bits against Table B-1 (word offset and bit as printed in the APM) and exit codes
// against Appendix C, Table C-1.
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include <hvkit/svm/exit_code.hpp>
#include <hvkit/svm/intercepts.hpp>

namespace svm = hvkit::svm;
using svm::intercept;

namespace {

// Where the APM puts a bit: (VMCB byte offset of the 32-bit word, bit in it).
struct place {
  intercept i;
  unsigned offset;
  unsigned bit;
};
constexpr place places[] = {
    {svm::cr_read(0), 0x000, 0},     {svm::cr_read(3), 0x000, 3},      {svm::cr_write(0), 0x000, 16},
    {svm::cr_write(8), 0x000, 24},   {svm::dr_read(7), 0x004, 7},      {svm::dr_write(7), 0x004, 23},
    {svm::exception(14), 0x008, 14}, {svm::exception(hvkit::x86::vector::ac), 0x008, 17},
    {intercept::intr, 0x00c, 0},     {intercept::nmi, 0x00c, 1},       {intercept::vintr, 0x00c, 4},
    {intercept::cr0_selective_write, 0x00c, 5}, {intercept::idtr_read, 0x00c, 6}, {intercept::tr_write, 0x00c, 13},
    {intercept::rdtsc, 0x00c, 14},   {intercept::cpuid, 0x00c, 18},    {intercept::iret, 0x00c, 20},
    {intercept::intn, 0x00c, 21},    {intercept::pause, 0x00c, 23},    {intercept::hlt, 0x00c, 24},
    {intercept::invlpg, 0x00c, 25},  {intercept::ioio_prot, 0x00c, 27}, {intercept::msr_prot, 0x00c, 28},
    {intercept::task_switch, 0x00c, 29}, {intercept::shutdown, 0x00c, 31}, {intercept::vmrun, 0x010, 0},
    {intercept::vmmcall, 0x010, 1},  {intercept::stgi, 0x010, 4},      {intercept::skinit, 0x010, 6},
    {intercept::rdtscp, 0x010, 7},   {intercept::icebp, 0x010, 8},     {intercept::wbinvd, 0x010, 9},
    {intercept::xsetbv, 0x010, 13},  {intercept::rdpru, 0x010, 14},    {intercept::efer_write_trap, 0x010, 15},
    {svm::cr_write_trap(0), 0x010, 16}, {svm::cr_write_trap(4), 0x010, 20}, {intercept::invlpgb, 0x014, 0},
    {intercept::invpcid, 0x014, 2},  {intercept::tlbsync, 0x014, 4},
};

TEST(Intercepts, BitsAreWhereTableB1PutsThem) {
  for (const auto& p : places) {
    svm::soft_vmcb v;
    svm::set_intercept(v, p.i);
    for (unsigned off = 0; off < 0x18; ++off) {
      const std::uint8_t expected = off == p.offset + p.bit / 8 ? static_cast<std::uint8_t>(1u << (p.bit % 8)) : 0;
      EXPECT_EQ(v.page().bytes[off], expected) << static_cast<unsigned>(p.i) << " byte " << off;
    }
    EXPECT_TRUE(svm::intercepted(v, p.i));
    svm::set_intercept(v, p.i, false);
    EXPECT_FALSE(svm::intercepted(v, p.i));
  }
}

TEST(Intercepts, SetRoundTripsThroughTheVmcb) {
  svm::intercept_set s;
  s.set(intercept::vmrun).set(intercept::cpuid).set(svm::exception(14)).set(svm::cr_write(0));
  svm::soft_vmcb v;
  s.store(v);
  EXPECT_EQ(svm::intercept_set::load(v), s);
  EXPECT_EQ(s.word(3), 1u << 18);
  EXPECT_EQ(s.word(4), 1u);
  EXPECT_EQ(s.word(2), 1u << 14);
  EXPECT_EQ(s.word(0), 1u << 16);
  svm::intercept_set t;
  t.set(intercept::hlt);
  EXPECT_TRUE((s | t).test(intercept::hlt));
  EXPECT_TRUE((s | t).test(intercept::cpuid));
  EXPECT_FALSE(s.test(intercept::hlt));
}

// Appendix C, Table C-1, typed by hand.
struct code_row {
  std::uint64_t code;
  const char* name;
};
constexpr code_row codes[] = {
    {0x00, "CR0_READ"},   {0x03, "CR3_READ"},     {0x10, "CR0_WRITE"},    {0x14, "CR4_WRITE"},  {0x18, "CR8_WRITE"},
    {0x27, "DR7_READ"},   {0x37, "DR7_WRITE"},    {0x40, "EXCP0"},        {0x4e, "EXCP14"},     {0x5f, "EXCP31"},
    {0x60, "INTR"},       {0x61, "NMI"},          {0x62, "SMI"},          {0x63, "INIT"},       {0x64, "VINTR"},
    {0x65, "CR0_SEL_WRITE"}, {0x66, "IDTR_READ"}, {0x6d, "TR_WRITE"},     {0x6e, "RDTSC"},      {0x6f, "RDPMC"},
    {0x70, "PUSHF"},      {0x71, "POPF"},         {0x72, "CPUID"},        {0x73, "RSM"},        {0x74, "IRET"},
    {0x75, "SWINT"},      {0x76, "INVD"},         {0x77, "PAUSE"},        {0x78, "HLT"},        {0x79, "INVLPG"},
    {0x7a, "INVLPGA"},    {0x7b, "IOIO"},         {0x7c, "MSR"},          {0x7d, "TASK_SWITCH"}, {0x7e, "FERR_FREEZE"},
    {0x7f, "SHUTDOWN"},   {0x80, "VMRUN"},        {0x81, "VMMCALL"},      {0x82, "VMLOAD"},     {0x83, "VMSAVE"},
    {0x84, "STGI"},       {0x85, "CLGI"},         {0x86, "SKINIT"},       {0x87, "RDTSCP"},     {0x88, "ICEBP"},
    {0x89, "WBINVD"},     {0x8a, "MONITOR"},      {0x8b, "MWAIT"},        {0x8c, "MWAIT_CONDITIONAL"},
    {0x8d, "XSETBV"},     {0x8e, "RDPRU"},        {0x8f, "EFER_WRITE_TRAP"}, {0x90, "CR0_WRITE_TRAP"},
    {0x9f, "CR15_WRITE_TRAP"}, {0xa0, "INVLPGB"}, {0xa1, "INVLPGB_ILLEGAL"}, {0xa2, "INVPCID"}, {0xa3, "MCOMMIT"},
    {0xa4, "TLBSYNC"},    {0x400, "NPF"},         {0x401, "AVIC_INCOMPLETE_IPI"}, {0x402, "AVIC_NOACCEL"},
    {0x403, "VMGEXIT"},   {0xffff'ffff'ffff'ffffull, "INVALID"}, {0xffff'ffff'ffff'fffeull, "BUSY"},
    {0xffff'ffff'ffff'fffdull, "IDLE_REQUIRED"}, {0xffff'ffff'ffff'fffcull, "INVALID_PMC"},
};

TEST(ExitCodes, NamesMatchTableC1) {
  for (const auto& r : codes) {
    const char* n = svm::name(static_cast<svm::exit_code>(r.code));
    ASSERT_NE(n, nullptr) << r.code;
    EXPECT_STREQ(n, r.name) << r.code;
  }
  EXPECT_EQ(svm::raw(svm::exit_code::npf), 0x400u);
  EXPECT_EQ(svm::raw(svm::exit_code::ioio), 0x7bu);
  EXPECT_EQ(svm::raw(svm::exit_code::msr), 0x7cu);
  EXPECT_EQ(svm::raw(svm::exit_code::vmmcall), 0x81u);
  EXPECT_EQ(svm::name(static_cast<svm::exit_code>(0xa5 + 0x100)), nullptr);
  EXPECT_EQ(svm::name(static_cast<svm::exit_code>(0x404)), nullptr);
  EXPECT_TRUE(svm::is_vmrun_failure(svm::exit_code::invalid));
  EXPECT_FALSE(svm::is_vmrun_failure(svm::exit_code::npf));
  EXPECT_EQ(svm::exception_vector(svm::exit_code{0x4e}), 14u);
  EXPECT_EQ(svm::cr_dr_number(svm::cr_write_exit(4)), 4u);
  EXPECT_TRUE(svm::is_cr_write_trap(svm::cr_write_trap_exit(3)));
}

// Two independently typed tables agree: each intercept's #VMEXIT code is its bit number.
TEST(ExitCodes, EveryInterceptExitsWithItsBitNumber) {
  const std::pair<intercept, svm::exit_code> pairs[] = {
      {intercept::cpuid, svm::exit_code::cpuid},     {intercept::msr_prot, svm::exit_code::msr},
      {intercept::ioio_prot, svm::exit_code::ioio},  {intercept::intn, svm::exit_code::swint},
      {intercept::vmrun, svm::exit_code::vmrun},     {intercept::cr0_selective_write, svm::exit_code::cr0_sel_write},
      {intercept::tlbsync, svm::exit_code::tlbsync}, {intercept::efer_write_trap, svm::exit_code::efer_write_trap},
      {svm::cr_write(0), svm::exit_code::cr0_write}, {svm::exception(14), svm::exit_code{0x4e}},
      {svm::cr_write_trap(8), svm::cr_write_trap_exit(8)}, {intercept::shutdown, svm::exit_code::shutdown},
  };
  for (const auto& [i, c] : pairs) EXPECT_EQ(static_cast<std::uint64_t>(i), svm::raw(c)) << svm::name(c);
}

}  // namespace
