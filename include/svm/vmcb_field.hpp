// SPDX-License-Identifier: MIT
/// @file
/// @brief A VMCB field as a type: `field<Offset, Bytes, Access, Typed>` names a run of bytes
/// of the VMCB (AMD APM Vol. 2, Appendix B, Tables B-1 "VMCB Layout, Control Area" and B-2
/// "VMCB Layout, State Save Area"), its width, its value type and who may write it.
///
/// The VMCB is plain memory (APM 15.5.1 "Basic Operation": VMRUN takes its physical address in
/// rAX), so a field is an offset and a width, not an encoding as on VMX. Offsets here are from
/// the start of the 4 KiB VMCB; Table B-2 lists state-save offsets relative to the save area,
/// which starts at 400h (the field adds 400h). What the type refuses at compile time:
/// - a width other than 1, 2, 4 or 8 bytes, a field not naturally aligned, or one that does
///   not fit in the page;
/// - a field overlapping a reserved area of Tables B-1 / B-2 (reserved_areas below);
/// - (in vmcb.hpp) a write of a field the processor writes on #VMEXIT (EXITCODE, EXITINFO1,
///   EXITINFO2, EXITINTINFO, nRIP, the fetched-byte count): `field_access::read_only`;
/// - (in vmcb.hpp) a value of the wrong width or of another register type.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace hvkit::svm {

/// The size of a VMCB: one 4 KiB page, 4 KiB aligned (APM 15.5.1).
inline constexpr std::size_t vmcb_size = 4096;
/// Where the state-save area starts (APM Appendix B: the control area is 000h-3FFh).
inline constexpr std::uint16_t state_save_offset = 0x400;

/// Which of the two VMCB areas a field lies in.
enum class vmcb_area : std::uint8_t { control, state_save };

/// Who writes a field.
enum class field_access : std::uint8_t {
  read_write,  ///< the hypervisor writes it before VMRUN (and the processor may save it on #VMEXIT)
  read_only,   ///< the processor writes it on #VMEXIT (exit information); the hypervisor only reads
};

/// A byte range [first, last] of the VMCB.
struct byte_range {
  std::uint16_t first;
  std::uint16_t last;
  [[nodiscard]] constexpr bool overlaps(std::uint16_t offset, unsigned bytes) const noexcept {
    return offset <= last && offset + bytes - 1 >= first;
  }
};

/// The reserved areas of Tables B-1 and B-2 (offsets from the start of the VMCB). A field may
/// not overlap any of them. Areas newer APM revisions assign to features hvkit does not model
/// (SEV-ES/SNP, the LBR stack, ...) are simply not listed as fields; only areas the APM marks
/// reserved are listed here.
inline constexpr std::array<byte_range, 12> reserved_areas{{
    // Table B-1, control area.
    {0x018, 0x03b},  // after the intercept vectors, before PAUSE_FILTER_THRESHOLD
    {0x05d, 0x05f},  // bits 63:40 of the ASID / TLB_CONTROL quadword
    {0x0c4, 0x0c7},  // bits 63:32 of the VMCB clean-bits quadword
    {0x0e8, 0x0ef},
    {0x100, 0x107},
    {0x3e0, 0x3ff},  // reserved for host usage (the processor neither reads nor writes it)
    // Table B-2, state-save area (Table offset + 400h).
    {0x4a0, 0x4ca},
    {0x4cc, 0x4cf},
    {0x4d8, 0x547},
    {0x580, 0x5d7},
    {0x648, 0x667},
    {0x698, 0x6df},
}};

/// True if `bytes` bytes at `offset` touch a reserved area.
[[nodiscard]] constexpr bool overlaps_reserved(std::uint16_t offset, unsigned bytes) noexcept {
  for (const auto& r : reserved_areas)
    if (r.overlaps(offset, bytes)) return true;
  return false;
}

namespace detail {
template <unsigned Bytes> struct uint_of_bytes;
template <> struct uint_of_bytes<1> { using type = std::uint8_t; };
template <> struct uint_of_bytes<2> { using type = std::uint16_t; };
template <> struct uint_of_bytes<4> { using type = std::uint32_t; };
template <> struct uint_of_bytes<8> { using type = std::uint64_t; };
}  // namespace detail

/// A VMCB field: `Bytes` bytes at `Offset`, little-endian (APM 15.5.1: the VMCB holds the
/// values as the processor stores them in memory). `Typed` is the architectural register the
/// field holds (x86::cr0, x86::efer, x86::selector, ...) or void.
template <std::uint16_t Offset, unsigned Bytes, field_access Access = field_access::read_write, class Typed = void>
struct field {
  static_assert(Bytes == 1 || Bytes == 2 || Bytes == 4 || Bytes == 8, "a VMCB field is 1, 2, 4 or 8 bytes wide");
  static_assert(Offset % Bytes == 0, "a VMCB field is naturally aligned (APM Appendix B)");
  static_assert(Offset + Bytes <= vmcb_size, "a VMCB field lies inside the 4 KiB VMCB");
  static_assert(!overlaps_reserved(Offset, Bytes), "VMCB field in a reserved area (APM Appendix B, Tables B-1/B-2)");

  static constexpr std::uint16_t offset = Offset;
  static constexpr unsigned bytes = Bytes;
  static constexpr unsigned bits = Bytes * 8;
  static constexpr vmcb_area area = Offset < state_save_offset ? vmcb_area::control : vmcb_area::state_save;
  static constexpr field_access access = Access;
  static constexpr bool read_only = Access == field_access::read_only;
  /// The unsigned type of the field's bytes.
  using value_type = typename detail::uint_of_bytes<Bytes>::type;
  /// The register type it holds, or void.
  using typed_type = Typed;
};

/// Is `T` a field<>?
template <class T>
inline constexpr bool is_field_v = false;
template <std::uint16_t O, unsigned B, field_access A, class T>
inline constexpr bool is_field_v<field<O, B, A, T>> = true;
template <class T>
concept vmcb_field = is_field_v<std::remove_cvref_t<T>>;

}  // namespace hvkit::svm
