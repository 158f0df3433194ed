// SPDX-License-Identifier: MIT
/// @file
/// @brief The VM-exit instruction-information field (SDM Vol. 3C 28.2.5, Tables 28-9 to
/// 28-15): INS/OUTS, descriptor-table instructions (LGDT/LIDT/SGDT/SIDT, LLDT/LTR/SLDT/STR),
/// VMX instructions (INVEPT/INVPCID/INVVPID, VMCLEAR/VMPTRLD/VMPTRST/VMXON/XSAVES/XRSTORS,
/// VMREAD/VMWRITE) and RDRAND/RDSEED/TPAUSE/UMWAIT.
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"

namespace hvkit::vmx {

/// Address size of the memory operand (bits 9:7).
enum class address_size : std::uint8_t { a16 = 0, a32 = 1, a64 = 2 };

namespace detail {
class instruction_info_base {
 public:
  using scaling_bits = x86::bitfield<std::uint32_t, 0, 2>;
  using reg1_bits = x86::bitfield<std::uint32_t, 3, 4>;
  using address_size_bits = x86::bitfield<std::uint32_t, 7, 3>;
  using mem_reg_bit = x86::bitflag<std::uint32_t, 10>;
  using segment_bits = x86::bitfield<std::uint32_t, 15, 3>;
  using index_bits = x86::bitfield<std::uint32_t, 18, 4>;
  using index_invalid_bit = x86::bitflag<std::uint32_t, 22>;
  using base_bits = x86::bitfield<std::uint32_t, 23, 4>;
  using base_invalid_bit = x86::bitflag<std::uint32_t, 27>;

  constexpr instruction_info_base() noexcept = default;
  constexpr explicit instruction_info_base(std::uint32_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint32_t raw() const noexcept { return raw_; }
  /// Index scaling: 1, 2, 4 or 8 (bits 1:0 hold log2).
  [[nodiscard]] constexpr unsigned scale() const noexcept { return 1u << scaling_bits::get(raw_); }
  [[nodiscard]] constexpr address_size addr_size() const noexcept { return static_cast<address_size>(address_size_bits::get(raw_)); }
  /// Segment register of the memory operand: 0 ES, 1 CS, 2 SS, 3 DS, 4 FS, 5 GS.
  [[nodiscard]] constexpr unsigned segment() const noexcept { return segment_bits::get(raw_); }
  /// Index register (0 = RAX ... 15 = R15), if index_valid().
  [[nodiscard]] constexpr unsigned index_reg() const noexcept { return index_bits::get(raw_); }
  [[nodiscard]] constexpr bool index_valid() const noexcept { return !index_invalid_bit::get(raw_); }
  [[nodiscard]] constexpr unsigned base_reg() const noexcept { return base_bits::get(raw_); }
  [[nodiscard]] constexpr bool base_valid() const noexcept { return !base_invalid_bit::get(raw_); }

 protected:
  std::uint32_t raw_ = 0;
};
}  // namespace detail

/// LGDT, LIDT, SGDT, SIDT (Table 28-10) and LLDT, LTR, SLDT, STR (Table 28-11).
class descriptor_table_info : public detail::instruction_info_base {
 public:
  enum class instruction : std::uint8_t { sgdt, sidt, lgdt, lidt, sldt, str, lldt, ltr };
  using identity_bits = x86::bitfield<std::uint32_t, 28, 2>;
  using operand_size_bit = x86::bitflag<std::uint32_t, 11>;
  using instruction_info_base::instruction_info_base;

  /// The instruction. `gdtr_idtr` says which exit reason delivered the field (46 for
  /// GDTR/IDTR, 47 for LDTR/TR), because both tables use bits 29:28 for the identity.
  [[nodiscard]] constexpr instruction which(bool gdtr_idtr) const noexcept {
    return static_cast<instruction>(identity_bits::get(raw_) + (gdtr_idtr ? 0u : 4u));
  }
  /// GDTR/IDTR only, bit 11: 1 = 32-bit operand size, 0 = 16-bit (64-bit mode ignores it).
  [[nodiscard]] constexpr bool operand_size_32() const noexcept { return operand_size_bit::get(raw_); }
  /// LDTR/TR only, bit 10: the operand is a register (reg1()), else memory.
  [[nodiscard]] constexpr bool register_operand() const noexcept { return mem_reg_bit::get(raw_); }
  [[nodiscard]] constexpr unsigned reg1() const noexcept { return reg1_bits::get(raw_); }
};

/// INVEPT/INVPCID/INVVPID (Table 28-12), VMCLEAR/VMPTRLD/VMPTRST/VMXON/XRSTORS/XSAVES
/// (Table 28-13, reg2 undefined), VMREAD/VMWRITE (Table 28-14).
class vmx_instruction_info : public detail::instruction_info_base {
 public:
  using reg2_bits = x86::bitfield<std::uint32_t, 28, 4>;
  using instruction_info_base::instruction_info_base;
  /// VMREAD/VMWRITE bit 10: the r/m operand is a register (reg1()), else memory.
  [[nodiscard]] constexpr bool register_operand() const noexcept { return mem_reg_bit::get(raw_); }
  /// VMREAD/VMWRITE: the register operand (bits 6:3).
  [[nodiscard]] constexpr unsigned reg1() const noexcept { return reg1_bits::get(raw_); }
  /// INVEPT/INVPCID/INVVPID: the type register; VMREAD/VMWRITE: the encoding register (bits 31:28).
  [[nodiscard]] constexpr unsigned reg2() const noexcept { return reg2_bits::get(raw_); }
};

/// INS/OUTS with "unconditional I/O exiting" or I/O bitmaps and the INS/OUTS reporting
/// capability (IA32_VMX_BASIC bit 54), SDM 28.2.5 Table 28-9: address size in bits 9:7 and,
/// for OUTS, the source segment in bits 17:15 (undefined for INS, which always uses ES).
class ins_outs_info {
 public:
  using address_size_bits = x86::bitfield<std::uint32_t, 7, 3>;
  using segment_bits = x86::bitfield<std::uint32_t, 15, 3>;
  constexpr ins_outs_info() noexcept = default;
  constexpr explicit ins_outs_info(std::uint32_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint32_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr address_size addr_size() const noexcept { return static_cast<address_size>(address_size_bits::get(raw_)); }
  /// OUTS only: 0 ES, 1 CS, 2 SS, 3 DS, 4 FS, 5 GS.
  [[nodiscard]] constexpr unsigned segment() const noexcept { return segment_bits::get(raw_); }

 private:
  std::uint32_t raw_ = 0;
};

/// RDRAND, RDSEED, TPAUSE and UMWAIT, SDM 28.2.5 Table 28-15: the register operand in bits
/// 6:3 and its operand size in bits 12:11 (0 = 16-bit, 1 = 32-bit, 2 = 64-bit).
class register_operand_info {
 public:
  enum class operand_size : std::uint8_t { o16 = 0, o32 = 1, o64 = 2 };
  using reg_bits = x86::bitfield<std::uint32_t, 3, 4>;
  using operand_size_bits = x86::bitfield<std::uint32_t, 11, 2>;
  static_assert(x86::fields_disjoint<reg_bits, operand_size_bits>());
  constexpr register_operand_info() noexcept = default;
  constexpr explicit register_operand_info(std::uint32_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint32_t raw() const noexcept { return raw_; }
  /// The destination (RDRAND/RDSEED) or source (TPAUSE/UMWAIT) register, 0 = RAX ... 15 = R15.
  [[nodiscard]] constexpr unsigned reg() const noexcept { return reg_bits::get(raw_); }
  /// The operand size; the raw value 3 is not used by the processor.
  [[nodiscard]] constexpr operand_size size() const noexcept { return static_cast<operand_size>(operand_size_bits::get(raw_)); }

 private:
  std::uint32_t raw_ = 0;
};

}  // namespace hvkit::vmx
