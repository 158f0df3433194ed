// SPDX-License-Identifier: MIT
/// @file
/// @brief VMCB segment registers: the 16-byte VMCB segment (selector, attributes, limit, base;
/// AMD APM Vol. 2, 15.5.1, Table B-2) as one value, its load and store, and the compressed
/// attribute format.
///
/// The VMCB keeps a segment's attributes in 12 bits: bits 7:0 are the descriptor's bits
/// 47:40 (type, S, DPL, P) and bits 11:8 its bits 55:52 (AVL, L, D/B, G). VMX's access-rights
/// field puts the second group at bits 15:12 (SDM 25.4.1); to_access_rights_layout() and
/// from_access_rights_layout() convert. The limit is the expanded byte limit (G applied), as
/// for VMX.
#pragma once

#include <cstdint>

#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../x86/selector.hpp"

namespace hvkit::svm {

/// The segment registers with a full VMCB segment (GDTR and IDTR have only limit and base).
enum class segment : std::uint8_t { es = 0, cs = 1, ss = 2, ds = 3, fs = 4, gs = 5, ldtr = 7, tr = 9 };

/// VMCB offset of a segment (ES at 400h, 16 bytes each in the order ES, CS, SS, DS, FS, GS,
/// GDTR, LDTR, IDTR, TR).
[[nodiscard]] constexpr std::uint16_t offset_of(segment s) noexcept {
  return static_cast<std::uint16_t>(state_save_offset + 16u * static_cast<unsigned>(s));
}
static_assert(offset_of(segment::cs) == fields::cs_selector.offset && offset_of(segment::tr) == fields::tr_selector.offset &&
              offset_of(segment::ldtr) == fields::ldtr_selector.offset && offset_of(segment::gs) == fields::gs_selector.offset);

/// Attribute bits (compressed layout).
namespace attrib {
inline constexpr std::uint16_t accessed = 1u << 0;
inline constexpr std::uint16_t s = 1u << 4;       ///< code/data (1) or system (0)
inline constexpr std::uint16_t p = 1u << 7;       ///< present
inline constexpr std::uint16_t avl = 1u << 8;
inline constexpr std::uint16_t l = 1u << 9;       ///< 64-bit code segment
inline constexpr std::uint16_t db = 1u << 10;     ///< default operation size 32 bits
inline constexpr std::uint16_t g = 1u << 11;      ///< granularity
[[nodiscard]] constexpr unsigned type(std::uint16_t a) noexcept { return a & 0xfu; }
[[nodiscard]] constexpr unsigned dpl(std::uint16_t a) noexcept { return (a >> 5) & 3u; }
}  // namespace attrib

/// The compressed attributes of a segment descriptor (its bits 47:40 and 55:52).
[[nodiscard]] constexpr std::uint16_t attributes_from_descriptor(std::uint64_t descriptor) noexcept {
  return static_cast<std::uint16_t>(((descriptor >> 40) & 0xffu) | (((descriptor >> 52) & 0xfu) << 8));
}
/// Compressed attributes in the layout of VMX's access rights (bits 15:12 for AVL, L, D/B, G).
[[nodiscard]] constexpr std::uint32_t to_access_rights_layout(std::uint16_t a) noexcept {
  return (a & 0xffu) | ((static_cast<std::uint32_t>(a) & 0xf00u) << 4);
}
/// Access rights (VMX layout; bit 16 "unusable" and the reserved bits dropped) compressed.
[[nodiscard]] constexpr std::uint16_t from_access_rights_layout(std::uint32_t ar) noexcept {
  return static_cast<std::uint16_t>((ar & 0xffu) | ((ar >> 4) & 0xf00u));
}

/// One VMCB segment.
struct segment_state {
  x86::selector selector{};
  std::uint16_t attributes = 0;
  std::uint32_t limit = 0;
  std::uint64_t base = 0;
  friend constexpr bool operator==(const segment_state&, const segment_state&) noexcept = default;
};

template <vmcb_memory M>
[[nodiscard]] constexpr segment_state load_segment(const M& m, segment s) noexcept {
  const std::uint16_t o = offset_of(s);
  return {x86::selector{static_cast<std::uint16_t>(m.load(o, 2))}, static_cast<std::uint16_t>(m.load(o + 2, 2)),
          static_cast<std::uint32_t>(m.load(o + 4, 4)), m.load(o + 8, 8)};
}
template <vmcb_memory M>
constexpr void store_segment(M& m, segment s, const segment_state& v) noexcept {
  const std::uint16_t o = offset_of(s);
  m.store(o, 2, v.selector.raw());
  m.store(o + 2, 2, v.attributes);
  m.store(o + 4, 4, v.limit);
  m.store(o + 8, 8, v.base);
}

}  // namespace hvkit::svm
