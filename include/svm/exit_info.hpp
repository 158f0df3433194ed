// SPDX-License-Identifier: MIT
/// @file
/// @brief Decoders for EXITINFO1 / EXITINFO2 (VMCB 078h / 080h) by exit code: IOIO, MSR, CR
/// and DR accesses (with and without decode assists), exceptions, INTn, INVLPG and nested
/// page faults (AMD APM Vol. 2, 15.7.1, 15.10.2, 15.11, 15.12, 15.25.6, 15.33).
#pragma once

#include <cstdint>

#include "exit_code.hpp"
#include "../x86/address.hpp"
#include "../x86/bitfield.hpp"

namespace hvkit::svm {

/// IOIO intercept information (15.10.2 "IN and OUT Behavior", Figure 15-2): EXITINFO1.
/// EXITINFO2 holds the rIP of the instruction after the IN/OUT.
class ioio_info {
 public:
  using in_bit = x86::bitflag<std::uint64_t, 0>;   ///< TYPE: 1 = IN, 0 = OUT
  using str_bit = x86::bitflag<std::uint64_t, 2>;  ///< string (INS/OUTS)
  using rep_bit = x86::bitflag<std::uint64_t, 3>;  ///< REP prefix
  using sz8_bit = x86::bitflag<std::uint64_t, 4>;
  using sz16_bit = x86::bitflag<std::uint64_t, 5>;
  using sz32_bit = x86::bitflag<std::uint64_t, 6>;
  using a16_bit = x86::bitflag<std::uint64_t, 7>;
  using a32_bit = x86::bitflag<std::uint64_t, 8>;
  using a64_bit = x86::bitflag<std::uint64_t, 9>;
  using seg_field = x86::bitfield<std::uint64_t, 10, 3, std::uint8_t>;  ///< effective segment (decode assists)
  using port_field = x86::bitfield<std::uint64_t, 16, 16, std::uint16_t>;
  static_assert(x86::fields_disjoint<in_bit, str_bit, rep_bit, sz8_bit, sz16_bit, sz32_bit, a16_bit, a32_bit, a64_bit,
                                     seg_field, port_field>());

  constexpr explicit ioio_info(std::uint64_t exit_info_1) noexcept : raw_(exit_info_1) {}
  [[nodiscard]] constexpr std::uint64_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr bool in() const noexcept { return in_bit::get(raw_); }
  [[nodiscard]] constexpr bool string() const noexcept { return str_bit::get(raw_); }
  [[nodiscard]] constexpr bool rep() const noexcept { return rep_bit::get(raw_); }
  [[nodiscard]] constexpr std::uint16_t port() const noexcept { return port_field::get(raw_); }
  /// The operand size in bytes (1, 2, 4), or 0 if no size bit (or more than one) is set.
  [[nodiscard]] constexpr unsigned size() const noexcept {
    const bool b = sz8_bit::get(raw_), w = sz16_bit::get(raw_), d = sz32_bit::get(raw_);
    if (b + w + d != 1) return 0;
    return b ? 1 : w ? 2 : 4;
  }
  /// The address size in bits (16, 32, 64) of a string instruction, or 0 if not exactly one is set.
  [[nodiscard]] constexpr unsigned address_size() const noexcept {
    const bool a = a16_bit::get(raw_), b = a32_bit::get(raw_), c = a64_bit::get(raw_);
    if (a + b + c != 1) return 0;
    return a ? 16 : b ? 32 : 64;
  }
  /// The effective segment (0 ES, 1 CS, 2 SS, 3 DS, 4 FS, 5 GS); reported with decode assists.
  [[nodiscard]] constexpr std::uint8_t segment() const noexcept { return seg_field::get(raw_); }

 private:
  std::uint64_t raw_;
};

/// MSR intercept (15.11): EXITINFO1 is 0 for RDMSR, 1 for WRMSR; the MSR number is in ECX.
[[nodiscard]] constexpr bool msr_is_write(std::uint64_t exit_info_1) noexcept { return exit_info_1 == 1; }

/// A MOV CRx / MOV DRx intercept with decode assists (15.33.1 "MOV CRx/DRx Intercepts"):
/// EXITINFO1 bit 63 = 1 for MOV (then bits 3:0 are the GPR), 0 for the other instructions
/// that read or write CR0 (CLTS, LMSW, SMSW). Without decode assists EXITINFO1 holds no
/// information and the hypervisor decodes the instruction (emulate/).
struct cr_access {
  enum class source : std::uint8_t {
    mov,          ///< MOV to/from CRx or DRx, GPR in `gpr`
    other,        ///< CLTS, LMSW or SMSW (decode the instruction for which)
    not_decoded,  ///< the processor does not report decode assists: decode the instruction
  };
  source from = source::not_decoded;
  std::uint8_t gpr = 0;  ///< 0 RAX ... 15 R15, for source::mov
  friend constexpr bool operator==(const cr_access&, const cr_access&) noexcept = default;
};
/// Decode EXITINFO1 of a CR/DR read or write exit (or CR0_SEL_WRITE). `decode_assists` is
/// CPUID Fn8000_000A EDX[7].
[[nodiscard]] constexpr cr_access decode_cr_access(std::uint64_t exit_info_1, bool decode_assists) noexcept {
  if (!decode_assists) return {cr_access::source::not_decoded, 0};
  if ((exit_info_1 >> 63) != 0) return {cr_access::source::mov, static_cast<std::uint8_t>(exit_info_1 & 0xf)};
  return {cr_access::source::other, 0};
}

/// A CR write trap (exit codes 90h-9Fh): EXITINFO1 is the new value of the CR.
[[nodiscard]] constexpr std::uint64_t cr_write_trap_value(std::uint64_t exit_info_1) noexcept { return exit_info_1; }

/// INTn intercept with decode assists (15.33.4): EXITINFO1 holds the vector.
[[nodiscard]] constexpr std::uint8_t swint_vector(std::uint64_t exit_info_1) noexcept {
  return static_cast<std::uint8_t>(exit_info_1 & 0xff);
}
/// INVLPG / INVLPGA with decode assists (15.33.5): EXITINFO1 holds the linear address.
[[nodiscard]] constexpr x86::gva invlpg_address(std::uint64_t exit_info_1) noexcept { return x86::gva{exit_info_1}; }

/// An exception intercept (15.12 "Exception Intercepts"): EXITINFO1 is the error code the
/// exception would push (meaningful only for vectors that push one); for #PF EXITINFO2 is
/// the faulting linear address (what CR2 would receive).
struct exception_info {
  unsigned vector = 0;
  std::uint32_t error_code = 0;
  std::uint64_t exit_info_2 = 0;
  [[nodiscard]] constexpr x86::gva fault_address() const noexcept { return x86::gva{exit_info_2}; }
};
[[nodiscard]] constexpr exception_info decode_exception(exit_code c, std::uint64_t exit_info_1,
                                                        std::uint64_t exit_info_2) noexcept {
  HVKIT_EXPECTS(is_exception(c));
  return {exception_vector(c), static_cast<std::uint32_t>(exit_info_1), exit_info_2};
}

/// The #NPF error code (15.25.6 "Nested versus Guest Page Faults, Fault Ordering"): EXITINFO1
/// is a #PF-style error code for the nested walk plus two bits saying which access faulted;
/// EXITINFO2 is the faulting guest-physical address.
class npf_error_code {
 public:
  using present = x86::bitflag<std::uint64_t, 0>;    ///< P: the nested entry was present (a protection fault)
  using write = x86::bitflag<std::uint64_t, 1>;      ///< RW: the access was a write
  using user = x86::bitflag<std::uint64_t, 2>;       ///< US: a user access (nested walks check every access as user)
  using reserved = x86::bitflag<std::uint64_t, 3>;   ///< RSV: a reserved bit set in a nested entry
  using fetch = x86::bitflag<std::uint64_t, 4>;      ///< ID: an instruction fetch
  using shadow_stack = x86::bitflag<std::uint64_t, 6>;  ///< SS: a shadow-stack access
  /// Bit 32: the fault occurred translating the guest's final physical address (the access
  /// the instruction made).
  using final_translation = x86::bitflag<std::uint64_t, 32>;
  /// Bit 33: the fault occurred translating a guest page-table access (the guest's own walk).
  using guest_page_table = x86::bitflag<std::uint64_t, 33>;
  static_assert(x86::fields_disjoint<present, write, user, reserved, fetch, shadow_stack, final_translation,
                                     guest_page_table>());

  constexpr npf_error_code() noexcept = default;
  constexpr explicit npf_error_code(std::uint64_t exit_info_1) noexcept : raw_(exit_info_1) {}
  [[nodiscard]] constexpr std::uint64_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr bool is_present() const noexcept { return present::get(raw_); }
  [[nodiscard]] constexpr bool is_write() const noexcept { return write::get(raw_); }
  [[nodiscard]] constexpr bool is_user() const noexcept { return user::get(raw_); }
  [[nodiscard]] constexpr bool is_reserved() const noexcept { return reserved::get(raw_); }
  [[nodiscard]] constexpr bool is_fetch() const noexcept { return fetch::get(raw_); }
  [[nodiscard]] constexpr bool is_shadow_stack() const noexcept { return shadow_stack::get(raw_); }
  [[nodiscard]] constexpr bool is_final_translation() const noexcept { return final_translation::get(raw_); }
  [[nodiscard]] constexpr bool is_guest_page_table_walk() const noexcept { return guest_page_table::get(raw_); }
  /// The low 32 bits: the #PF-format error code.
  [[nodiscard]] constexpr std::uint32_t pfec() const noexcept { return static_cast<std::uint32_t>(raw_); }
  /// Build one (tests, and a nested hypervisor reflecting #NPF into its guest).
  [[nodiscard]] static constexpr npf_error_code make(std::uint32_t pfec, bool final_translation_access,
                                                     bool guest_page_table_walk) noexcept {
    std::uint64_t r = pfec;
    r = final_translation::set(r, final_translation_access);
    r = guest_page_table::set(r, guest_page_table_walk);
    return npf_error_code{r};
  }
  friend constexpr bool operator==(npf_error_code, npf_error_code) noexcept = default;

 private:
  std::uint64_t raw_ = 0;
};

/// A decoded #NPF exit.
struct npf_info {
  npf_error_code error{};
  x86::gpa address{};
};
[[nodiscard]] constexpr npf_info decode_npf(std::uint64_t exit_info_1, std::uint64_t exit_info_2) noexcept {
  return {npf_error_code{exit_info_1}, x86::gpa{exit_info_2}};
}

}  // namespace hvkit::svm
