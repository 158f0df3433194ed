// SPDX-License-Identifier: MIT
/// @file
/// @brief SVM #VMEXIT codes (AMD APM Vol. 2, Appendix C "SVM Intercept Exit Codes",
/// Table C-1), their names, and the classification helpers an exit handler switches on.
///
/// EXITCODE is 64 bits (VMCB 070h); the codes that report a failed VMRUN or a busy VMSA are
/// negative (-1 VMEXIT_INVALID, ...), so the enum's underlying type is std::uint64_t and those
/// are written as two's complement.
#pragma once

#include <cstdint>

#include "../x86/contract.hpp"

namespace hvkit::svm {

enum class exit_code : std::uint64_t {
  cr0_read = 0x00,   ///< 00h-0Fh: read of CR0-CR15 (cr_read_exit(n))
  cr0_write = 0x10,  ///< 10h-1Fh: write of CR0-CR15 (cr_write_exit(n))
  dr0_read = 0x20,   ///< 20h-2Fh: read of DR0-DR15
  dr0_write = 0x30,  ///< 30h-3Fh: write of DR0-DR15
  excp0 = 0x40,      ///< 40h-5Fh: exception vector 0-31 (exception_exit(v))
  intr = 0x60,
  nmi = 0x61,
  smi = 0x62,
  init = 0x63,
  vintr = 0x64,
  cr0_sel_write = 0x65,  ///< the selective CR0 write intercept
  idtr_read = 0x66,
  gdtr_read = 0x67,
  ldtr_read = 0x68,
  tr_read = 0x69,
  idtr_write = 0x6a,
  gdtr_write = 0x6b,
  ldtr_write = 0x6c,
  tr_write = 0x6d,
  rdtsc = 0x6e,
  rdpmc = 0x6f,
  pushf = 0x70,
  popf = 0x71,
  cpuid = 0x72,
  rsm = 0x73,
  iret = 0x74,
  swint = 0x75,
  invd = 0x76,
  pause = 0x77,
  hlt = 0x78,
  invlpg = 0x79,
  invlpga = 0x7a,
  ioio = 0x7b,
  msr = 0x7c,
  task_switch = 0x7d,
  ferr_freeze = 0x7e,
  shutdown = 0x7f,
  vmrun = 0x80,
  vmmcall = 0x81,
  vmload = 0x82,
  vmsave = 0x83,
  stgi = 0x84,
  clgi = 0x85,
  skinit = 0x86,
  rdtscp = 0x87,
  icebp = 0x88,
  wbinvd = 0x89,
  monitor = 0x8a,
  mwait = 0x8b,
  mwait_conditional = 0x8c,
  xsetbv = 0x8d,
  rdpru = 0x8e,
  efer_write_trap = 0x8f,
  cr0_write_trap = 0x90,  ///< 90h-9Fh: CR0-CR15 write traps
  invlpgb = 0xa0,
  invlpgb_illegal = 0xa1,
  invpcid = 0xa2,
  mcommit = 0xa3,
  tlbsync = 0xa4,
  npf = 0x400,                  ///< nested page fault (15.25.6)
  avic_incomplete_ipi = 0x401,
  avic_noaccel = 0x402,
  vmgexit = 0x403,
  invalid = ~std::uint64_t{0},       ///< -1: VMRUN found invalid guest state (15.5.1)
  busy = ~std::uint64_t{0} - 1,      ///< -2: the VMSA was busy (SEV-SNP)
  idle_required = ~std::uint64_t{0} - 2,  ///< -3 (SEV-SNP)
  invalid_pmc = ~std::uint64_t{0} - 3,    ///< -4
};

[[nodiscard]] constexpr std::uint64_t raw(exit_code c) noexcept { return static_cast<std::uint64_t>(c); }

[[nodiscard]] constexpr exit_code cr_read_exit(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<exit_code>(0x00 + n);
}
[[nodiscard]] constexpr exit_code cr_write_exit(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<exit_code>(0x10 + n);
}
[[nodiscard]] constexpr exit_code dr_read_exit(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<exit_code>(0x20 + n);
}
[[nodiscard]] constexpr exit_code dr_write_exit(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<exit_code>(0x30 + n);
}
[[nodiscard]] constexpr exit_code exception_exit(unsigned vector) noexcept {
  HVKIT_EXPECTS(vector < 32);
  return static_cast<exit_code>(0x40 + vector);
}
[[nodiscard]] constexpr exit_code cr_write_trap_exit(unsigned n) noexcept {
  HVKIT_EXPECTS(n < 16);
  return static_cast<exit_code>(0x90 + n);
}

[[nodiscard]] constexpr bool is_cr_read(exit_code c) noexcept { return raw(c) <= 0x0f; }
[[nodiscard]] constexpr bool is_cr_write(exit_code c) noexcept { return raw(c) >= 0x10 && raw(c) <= 0x1f; }
[[nodiscard]] constexpr bool is_dr_read(exit_code c) noexcept { return raw(c) >= 0x20 && raw(c) <= 0x2f; }
[[nodiscard]] constexpr bool is_dr_write(exit_code c) noexcept { return raw(c) >= 0x30 && raw(c) <= 0x3f; }
[[nodiscard]] constexpr bool is_exception(exit_code c) noexcept { return raw(c) >= 0x40 && raw(c) <= 0x5f; }
[[nodiscard]] constexpr bool is_cr_write_trap(exit_code c) noexcept { return raw(c) >= 0x90 && raw(c) <= 0x9f; }
/// The CR or DR number of a CR/DR read, write or write-trap exit.
[[nodiscard]] constexpr unsigned cr_dr_number(exit_code c) noexcept { return static_cast<unsigned>(raw(c) & 0xf); }
/// The vector of an exception exit.
[[nodiscard]] constexpr unsigned exception_vector(exit_code c) noexcept {
  HVKIT_EXPECTS(is_exception(c));
  return static_cast<unsigned>(raw(c) - 0x40);
}
/// VMRUN failed the consistency checks or could not run the VMSA: no guest ran (APM 15.5.1).
[[nodiscard]] constexpr bool is_vmrun_failure(exit_code c) noexcept { return raw(c) >= raw(exit_code::invalid_pmc); }

namespace detail {
inline constexpr const char* cr_read_names[16] = {
    "CR0_READ", "CR1_READ", "CR2_READ",  "CR3_READ",  "CR4_READ",  "CR5_READ",  "CR6_READ",  "CR7_READ",
    "CR8_READ", "CR9_READ", "CR10_READ", "CR11_READ", "CR12_READ", "CR13_READ", "CR14_READ", "CR15_READ"};
inline constexpr const char* cr_write_names[16] = {
    "CR0_WRITE", "CR1_WRITE", "CR2_WRITE",  "CR3_WRITE",  "CR4_WRITE",  "CR5_WRITE",  "CR6_WRITE",  "CR7_WRITE",
    "CR8_WRITE", "CR9_WRITE", "CR10_WRITE", "CR11_WRITE", "CR12_WRITE", "CR13_WRITE", "CR14_WRITE", "CR15_WRITE"};
inline constexpr const char* dr_read_names[16] = {
    "DR0_READ", "DR1_READ", "DR2_READ",  "DR3_READ",  "DR4_READ",  "DR5_READ",  "DR6_READ",  "DR7_READ",
    "DR8_READ", "DR9_READ", "DR10_READ", "DR11_READ", "DR12_READ", "DR13_READ", "DR14_READ", "DR15_READ"};
inline constexpr const char* dr_write_names[16] = {
    "DR0_WRITE", "DR1_WRITE", "DR2_WRITE",  "DR3_WRITE",  "DR4_WRITE",  "DR5_WRITE",  "DR6_WRITE",  "DR7_WRITE",
    "DR8_WRITE", "DR9_WRITE", "DR10_WRITE", "DR11_WRITE", "DR12_WRITE", "DR13_WRITE", "DR14_WRITE", "DR15_WRITE"};
inline constexpr const char* excp_names[32] = {
    "EXCP0",  "EXCP1",  "EXCP2",  "EXCP3",  "EXCP4",  "EXCP5",  "EXCP6",  "EXCP7",  "EXCP8",  "EXCP9",  "EXCP10",
    "EXCP11", "EXCP12", "EXCP13", "EXCP14", "EXCP15", "EXCP16", "EXCP17", "EXCP18", "EXCP19", "EXCP20", "EXCP21",
    "EXCP22", "EXCP23", "EXCP24", "EXCP25", "EXCP26", "EXCP27", "EXCP28", "EXCP29", "EXCP30", "EXCP31"};
/// 60h-8Fh in order.
inline constexpr const char* misc_names[48] = {
    "INTR",       "NMI",        "SMI",         "INIT",        "VINTR",      "CR0_SEL_WRITE", "IDTR_READ",
    "GDTR_READ",  "LDTR_READ",  "TR_READ",     "IDTR_WRITE",  "GDTR_WRITE", "LDTR_WRITE",    "TR_WRITE",
    "RDTSC",      "RDPMC",      "PUSHF",       "POPF",        "CPUID",      "RSM",           "IRET",
    "SWINT",      "INVD",       "PAUSE",       "HLT",         "INVLPG",     "INVLPGA",       "IOIO",
    "MSR",        "TASK_SWITCH", "FERR_FREEZE", "SHUTDOWN",   "VMRUN",      "VMMCALL",       "VMLOAD",
    "VMSAVE",     "STGI",       "CLGI",        "SKINIT",      "RDTSCP",     "ICEBP",         "WBINVD",
    "MONITOR",    "MWAIT",      "MWAIT_CONDITIONAL", "XSETBV", "RDPRU",     "EFER_WRITE_TRAP"};
inline constexpr const char* cr_write_trap_names[16] = {
    "CR0_WRITE_TRAP",  "CR1_WRITE_TRAP",  "CR2_WRITE_TRAP",  "CR3_WRITE_TRAP", "CR4_WRITE_TRAP",  "CR5_WRITE_TRAP",
    "CR6_WRITE_TRAP",  "CR7_WRITE_TRAP",  "CR8_WRITE_TRAP",  "CR9_WRITE_TRAP", "CR10_WRITE_TRAP", "CR11_WRITE_TRAP",
    "CR12_WRITE_TRAP", "CR13_WRITE_TRAP", "CR14_WRITE_TRAP", "CR15_WRITE_TRAP"};
inline constexpr const char* a0_names[5] = {"INVLPGB", "INVLPGB_ILLEGAL", "INVPCID", "MCOMMIT", "TLBSYNC"};
}  // namespace detail

/// The APM's name of an exit code without the "VMEXIT_" prefix ("CR0_WRITE", "EXCP14", "NPF",
/// "INVALID"), or nullptr for a code Table C-1 does not list.
[[nodiscard]] constexpr const char* name(exit_code c) noexcept {
  const std::uint64_t v = raw(c);
  if (v <= 0x0f) return detail::cr_read_names[v];
  if (v <= 0x1f) return detail::cr_write_names[v - 0x10];
  if (v <= 0x2f) return detail::dr_read_names[v - 0x20];
  if (v <= 0x3f) return detail::dr_write_names[v - 0x30];
  if (v <= 0x5f) return detail::excp_names[v - 0x40];
  if (v <= 0x8f) return detail::misc_names[v - 0x60];
  if (v <= 0x9f) return detail::cr_write_trap_names[v - 0x90];
  if (v <= 0xa4) return detail::a0_names[v - 0xa0];
  switch (c) {
    case exit_code::npf: return "NPF";
    case exit_code::avic_incomplete_ipi: return "AVIC_INCOMPLETE_IPI";
    case exit_code::avic_noaccel: return "AVIC_NOACCEL";
    case exit_code::vmgexit: return "VMGEXIT";
    case exit_code::invalid: return "INVALID";
    case exit_code::busy: return "BUSY";
    case exit_code::idle_required: return "IDLE_REQUIRED";
    case exit_code::invalid_pmc: return "INVALID_PMC";
    default: return nullptr;
  }
}

}  // namespace hvkit::svm
