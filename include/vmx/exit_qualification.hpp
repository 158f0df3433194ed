// SPDX-License-Identifier: MIT
/// @file
/// @brief Decoders for exit qualifications (SDM Vol. 3C 28.2.1, Tables 28-1 to 28-7):
/// debug exceptions, task switch, control-register access, MOV DR, I/O, APIC access and
/// EPT violation. Each is a typed view over the 64-bit exit-qualification value.
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"

namespace hvkit::vmx {

namespace detail {
/// A read-only typed view over a 64-bit exit qualification.
class qualification {
 public:
  constexpr qualification() noexcept = default;
  constexpr explicit qualification(std::uint64_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint64_t raw() const noexcept { return raw_; }

 protected:
  template <class Field>
  [[nodiscard]] constexpr auto get() const noexcept { return Field::get(raw_); }

 private:
  std::uint64_t raw_ = 0;
};
template <unsigned Bit>
using q_flag = x86::bitflag<std::uint64_t, Bit>;
template <unsigned Offset, unsigned Width, class V = std::uint64_t>
using q_field = x86::bitfield<std::uint64_t, Offset, Width, V>;
}  // namespace detail

/// Debug exceptions (#DB, and single-step/breakpoint traps), Table 28-1.
class debug_qualification : public detail::qualification {
 public:
  using qualification::qualification;
  /// B0-B3 (bits 3:0): which breakpoint conditions were met.
  [[nodiscard]] constexpr unsigned breakpoints() const noexcept { return static_cast<unsigned>(get<detail::q_field<0, 4>>()); }
  [[nodiscard]] constexpr bool bus_lock() const noexcept { return get<detail::q_flag<11>>(); }      ///< BLD
  [[nodiscard]] constexpr bool debug_register_access() const noexcept { return get<detail::q_flag<13>>(); }  ///< BD
  [[nodiscard]] constexpr bool single_step() const noexcept { return get<detail::q_flag<14>>(); }   ///< BS
  [[nodiscard]] constexpr bool rtm() const noexcept { return get<detail::q_flag<16>>(); }
};

/// Task switch, Table 28-2.
class task_switch_qualification : public detail::qualification {
 public:
  enum class source : std::uint8_t { call = 0, iret = 1, jmp = 2, task_gate_in_idt = 3 };
  using qualification::qualification;
  [[nodiscard]] constexpr std::uint16_t tss_selector() const noexcept { return static_cast<std::uint16_t>(get<detail::q_field<0, 16>>()); }
  [[nodiscard]] constexpr source initiated_by() const noexcept { return static_cast<source>(get<detail::q_field<30, 2>>()); }
};

/// Control-register access, Table 28-3.
class cr_access_qualification : public detail::qualification {
 public:
  enum class access : std::uint8_t { mov_to_cr = 0, mov_from_cr = 1, clts = 2, lmsw = 3 };
  using qualification::qualification;
  /// Bits 3:0: the control register (0, 3, 4 or 8; 0 for CLTS and LMSW).
  [[nodiscard]] constexpr unsigned cr() const noexcept { return static_cast<unsigned>(get<detail::q_field<0, 4>>()); }
  [[nodiscard]] constexpr access type() const noexcept { return static_cast<access>(get<detail::q_field<4, 2>>()); }
  /// Bit 6 (LMSW only): the operand is in memory (else in a register).
  [[nodiscard]] constexpr bool lmsw_memory_operand() const noexcept { return get<detail::q_flag<6>>(); }
  /// Bits 11:8 (MOV CR only): the general-purpose register, 0 = RAX ... 15 = R15.
  [[nodiscard]] constexpr unsigned gpr() const noexcept { return static_cast<unsigned>(get<detail::q_field<8, 4>>()); }
  /// Bits 31:16 (LMSW only): the LMSW source data.
  [[nodiscard]] constexpr std::uint16_t lmsw_source() const noexcept { return static_cast<std::uint16_t>(get<detail::q_field<16, 16>>()); }
};

/// MOV DR, Table 28-4.
class mov_dr_qualification : public detail::qualification {
 public:
  using qualification::qualification;
  [[nodiscard]] constexpr unsigned dr() const noexcept { return static_cast<unsigned>(get<detail::q_field<0, 3>>()); }
  /// Bit 4: 1 = MOV from DR, 0 = MOV to DR.
  [[nodiscard]] constexpr bool from_dr() const noexcept { return get<detail::q_flag<4>>(); }
  [[nodiscard]] constexpr unsigned gpr() const noexcept { return static_cast<unsigned>(get<detail::q_field<8, 4>>()); }
};

/// I/O instructions, Table 28-5.
class io_qualification : public detail::qualification {
 public:
  using qualification::qualification;
  /// Access size in bytes: bits 2:0 hold size - 1 (0, 1 or 3).
  [[nodiscard]] constexpr unsigned size() const noexcept { return static_cast<unsigned>(get<detail::q_field<0, 3>>()) + 1; }
  /// Bit 3: 1 = IN, 0 = OUT.
  [[nodiscard]] constexpr bool in() const noexcept { return get<detail::q_flag<3>>(); }
  [[nodiscard]] constexpr bool string() const noexcept { return get<detail::q_flag<4>>(); }
  [[nodiscard]] constexpr bool rep() const noexcept { return get<detail::q_flag<5>>(); }
  /// Bit 6: 1 = immediate port operand, 0 = DX.
  [[nodiscard]] constexpr bool immediate_operand() const noexcept { return get<detail::q_flag<6>>(); }
  [[nodiscard]] constexpr std::uint16_t port() const noexcept { return static_cast<std::uint16_t>(get<detail::q_field<16, 16>>()); }
};

/// APIC access, Table 28-6.
class apic_access_qualification : public detail::qualification {
 public:
  enum class access : std::uint8_t {
    linear_read = 0,
    linear_write = 1,
    linear_fetch = 2,
    linear_event_delivery = 3,
    physical_event_delivery = 10,
    physical_fetch_or_execution = 15,
  };
  using qualification::qualification;
  /// Bits 11:0: offset in the APIC page (linear accesses).
  [[nodiscard]] constexpr unsigned offset() const noexcept { return static_cast<unsigned>(get<detail::q_field<0, 12>>()); }
  [[nodiscard]] constexpr access type() const noexcept { return static_cast<access>(get<detail::q_field<12, 4>>()); }
  /// Bit 16: asynchronous to instruction execution.
  [[nodiscard]] constexpr bool asynchronous() const noexcept { return get<detail::q_flag<16>>(); }
};

/// EPT violation, Table 28-7.
class ept_violation_qualification : public detail::qualification {
 public:
  using qualification::qualification;
  [[nodiscard]] constexpr bool read() const noexcept { return get<detail::q_flag<0>>(); }
  [[nodiscard]] constexpr bool write() const noexcept { return get<detail::q_flag<1>>(); }
  [[nodiscard]] constexpr bool fetch() const noexcept { return get<detail::q_flag<2>>(); }
  /// Bits 3-5: the permissions of the translation (AND over the EPT walk): readable,
  /// writable, executable (supervisor-executable with mode-based execute control).
  [[nodiscard]] constexpr bool readable() const noexcept { return get<detail::q_flag<3>>(); }
  [[nodiscard]] constexpr bool writable() const noexcept { return get<detail::q_flag<4>>(); }
  [[nodiscard]] constexpr bool executable() const noexcept { return get<detail::q_flag<5>>(); }
  /// Bit 6: user-mode executable (mode-based execute control).
  [[nodiscard]] constexpr bool user_executable() const noexcept { return get<detail::q_flag<6>>(); }
  /// Bit 7: the guest linear-address field is valid.
  [[nodiscard]] constexpr bool linear_address_valid() const noexcept { return get<detail::q_flag<7>>(); }
  /// Bit 8 (if bit 7): 1 = access to the translated address, 0 = a guest paging-structure access.
  [[nodiscard]] constexpr bool translated_access() const noexcept { return get<detail::q_flag<8>>(); }
  /// Bits 9-11 (advanced VM-exit information for EPT violations, if bits 7 and 8 are set):
  /// user-mode linear address, read/write page, execute-disable page.
  [[nodiscard]] constexpr bool user_mode_address() const noexcept { return get<detail::q_flag<9>>(); }
  [[nodiscard]] constexpr bool writable_page() const noexcept { return get<detail::q_flag<10>>(); }
  [[nodiscard]] constexpr bool execute_disable_page() const noexcept { return get<detail::q_flag<11>>(); }
  /// Bit 12: NMI unblocking due to IRET.
  [[nodiscard]] constexpr bool nmi_unblocking() const noexcept { return get<detail::q_flag<12>>(); }
  [[nodiscard]] constexpr bool shadow_stack_access() const noexcept { return get<detail::q_flag<13>>(); }
  [[nodiscard]] constexpr bool supervisor_shadow_stack() const noexcept { return get<detail::q_flag<14>>(); }
  [[nodiscard]] constexpr bool guest_paging_verification() const noexcept { return get<detail::q_flag<15>>(); }
  [[nodiscard]] constexpr bool asynchronous() const noexcept { return get<detail::q_flag<16>>(); }
};

}  // namespace hvkit::vmx
