// SPDX-License-Identifier: MIT
/// @file
/// @brief Basic VM-exit reasons (SDM Vol. 3D Appendix C) and the exit-reason field
/// (SDM Vol. 3C 28.2.1 "Basic VM-Exit Information"; bit layout below).
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"

namespace hvkit::vmx {

/// Basic exit reasons, SDM Appendix C (Table C-1). Numbers 35, 38, 42 and 71 are unused.
enum class exit_reason : std::uint16_t {
  exception_or_nmi = 0,
  external_interrupt = 1,
  triple_fault = 2,
  init_signal = 3,
  sipi = 4,
  io_smi = 5,
  other_smi = 6,
  interrupt_window = 7,
  nmi_window = 8,
  task_switch = 9,
  cpuid = 10,
  getsec = 11,
  hlt = 12,
  invd = 13,
  invlpg = 14,
  rdpmc = 15,
  rdtsc = 16,
  rsm = 17,
  vmcall = 18,
  vmclear = 19,
  vmlaunch = 20,
  vmptrld = 21,
  vmptrst = 22,
  vmread = 23,
  vmresume = 24,
  vmwrite = 25,
  vmxoff = 26,
  vmxon = 27,
  cr_access = 28,
  mov_dr = 29,
  io_instruction = 30,
  rdmsr = 31,
  wrmsr = 32,
  invalid_guest_state = 33,
  msr_loading = 34,
  mwait = 36,
  monitor_trap_flag = 37,
  monitor = 39,
  pause = 40,
  machine_check_event = 41,
  tpr_below_threshold = 43,
  apic_access = 44,
  virtualized_eoi = 45,
  gdtr_idtr_access = 46,
  ldtr_tr_access = 47,
  ept_violation = 48,
  ept_misconfiguration = 49,
  invept = 50,
  rdtscp = 51,
  preemption_timer = 52,
  invvpid = 53,
  wbinvd_wbnoinvd = 54,
  xsetbv = 55,
  apic_write = 56,
  rdrand = 57,
  invpcid = 58,
  vmfunc = 59,
  encls = 60,
  rdseed = 61,
  pml_full = 62,
  xsaves = 63,
  xrstors = 64,
  pconfig = 65,
  spp_event = 66,
  umwait = 67,
  tpause = 68,
  loadiwkey = 69,
  enclv = 70,
  enqcmd_pasid_translation_failure = 72,
  enqcmds_pasid_translation_failure = 73,
  bus_lock = 74,
  instruction_timeout = 75,
  seamcall = 76,
  tdcall = 77,
  rdmsrlist = 78,
  wrmsrlist = 79,
};

/// X-macro over every basic exit reason name (the enumerators of exit_reason).
#define HVKIT_VMX_EXIT_REASONS(X) \
  X(exception_or_nmi) X(external_interrupt) X(triple_fault) X(init_signal) \
  X(sipi) X(io_smi) X(other_smi) X(interrupt_window) \
  X(nmi_window) X(task_switch) X(cpuid) X(getsec) \
  X(hlt) X(invd) X(invlpg) X(rdpmc) \
  X(rdtsc) X(rsm) X(vmcall) X(vmclear) \
  X(vmlaunch) X(vmptrld) X(vmptrst) X(vmread) \
  X(vmresume) X(vmwrite) X(vmxoff) X(vmxon) \
  X(cr_access) X(mov_dr) X(io_instruction) X(rdmsr) \
  X(wrmsr) X(invalid_guest_state) X(msr_loading) X(mwait) \
  X(monitor_trap_flag) X(monitor) X(pause) X(machine_check_event) \
  X(tpr_below_threshold) X(apic_access) X(virtualized_eoi) X(gdtr_idtr_access) \
  X(ldtr_tr_access) X(ept_violation) X(ept_misconfiguration) X(invept) \
  X(rdtscp) X(preemption_timer) X(invvpid) X(wbinvd_wbnoinvd) \
  X(xsetbv) X(apic_write) X(rdrand) X(invpcid) \
  X(vmfunc) X(encls) X(rdseed) X(pml_full) \
  X(xsaves) X(xrstors) X(pconfig) X(spp_event) \
  X(umwait) X(tpause) X(loadiwkey) X(enclv) \
  X(enqcmd_pasid_translation_failure) X(enqcmds_pasid_translation_failure) X(bus_lock) X(instruction_timeout) \
  X(seamcall) X(tdcall) X(rdmsrlist) X(wrmsrlist)

/// One past the largest basic exit reason listed.
inline constexpr unsigned exit_reason_limit = 80;

/// True if `n` is a basic exit reason the SDM defines: one of the enumerators, as listed by
/// HVKIT_VMX_EXIT_REASONS (the one list of defined reasons; the unused numbers are not
/// spelled a second time).
[[nodiscard]] constexpr bool is_defined_exit_reason(unsigned n) noexcept {
  if (n >= exit_reason_limit) return false;
  switch (static_cast<exit_reason>(n)) {
#define HVKIT_VMX_DETAIL_DEFINED(r) \
  case exit_reason::r:              \
    return true;
    HVKIT_VMX_EXIT_REASONS(HVKIT_VMX_DETAIL_DEFINED)
#undef HVKIT_VMX_DETAIL_DEFINED
  }
  return false;
}
static_assert(is_defined_exit_reason(exit_reason_limit - 1) && !is_defined_exit_reason(exit_reason_limit),
              "exit_reason_limit must be one past the largest listed exit reason");

/// The name of a basic exit reason ("?" if undefined).
[[nodiscard]] constexpr const char* exit_reason_name(exit_reason r) noexcept {
  switch (r) {
#define HVKIT_VMX_DETAIL_NAME(n) \
  case exit_reason::n:           \
    return #n;
    HVKIT_VMX_EXIT_REASONS(HVKIT_VMX_DETAIL_NAME)
#undef HVKIT_VMX_DETAIL_NAME
  }
  return "?";
}

/// The 32-bit exit-reason VMCS field (SDM 28.2.1, "Basic VM-Exit Information").
class exit_reason_field {
 public:
  using basic_bits = x86::bitfield<std::uint32_t, 0, 16>;
  using bus_lock_detected_bit = x86::bitflag<std::uint32_t, 26>;   ///< a bus lock was asserted
  using enclave_mode_bit = x86::bitflag<std::uint32_t, 27>;        ///< exit from enclave mode
  using pending_mtf_bit = x86::bitflag<std::uint32_t, 28>;         ///< pending MTF exit (SMM)
  using from_vmx_root_bit = x86::bitflag<std::uint32_t, 29>;       ///< exit from VMX root (SMM)
  using entry_failure_bit = x86::bitflag<std::uint32_t, 31>;       ///< VM-entry failure
  static_assert(x86::fields_disjoint<basic_bits, bus_lock_detected_bit, enclave_mode_bit, pending_mtf_bit,
                                     from_vmx_root_bit, entry_failure_bit>());

  constexpr exit_reason_field() noexcept = default;
  constexpr explicit exit_reason_field(std::uint32_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint32_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr std::uint16_t basic_raw() const noexcept { return static_cast<std::uint16_t>(basic_bits::get(raw_)); }
  [[nodiscard]] constexpr exit_reason basic() const noexcept { return static_cast<exit_reason>(basic_raw()); }
  [[nodiscard]] constexpr bool bus_lock_detected() const noexcept { return bus_lock_detected_bit::get(raw_); }
  [[nodiscard]] constexpr bool enclave_mode() const noexcept { return enclave_mode_bit::get(raw_); }
  [[nodiscard]] constexpr bool pending_mtf() const noexcept { return pending_mtf_bit::get(raw_); }
  [[nodiscard]] constexpr bool from_vmx_root() const noexcept { return from_vmx_root_bit::get(raw_); }
  [[nodiscard]] constexpr bool entry_failure() const noexcept { return entry_failure_bit::get(raw_); }

 private:
  std::uint32_t raw_ = 0;
};

}  // namespace hvkit::vmx
