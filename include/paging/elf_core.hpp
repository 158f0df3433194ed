// SPDX-License-Identifier: MIT
/// @file
/// @brief Reading an ELF core file of a whole guest, as QEMU's `dump-guest-memory` (and
/// libvirt's `virsh dump --memory-only`, which asks QEMU for it) writes it: its PT_LOAD
/// segments become the regions of a region_view (guest-physical address = p_paddr), its
/// "QEMU" notes give each vCPU's registers, CR0-CR4 among them.
///
/// A dump is untrusted input: every offset and size is checked against the file before it
/// is used (a typed error, never a read outside the buffer); nothing is allocated (the
/// caller gives the array the regions go to). Formats read:
///  - ELF64, little-endian, e_type ET_CORE (4), e_machine EM_X86_64 (62): what QEMU writes
///    for an x86-64 guest. ELF32 cores (QEMU writes them for a guest that never entered
///    long mode) are refused with `elf_core_error::elf32`.
///  - Program headers (System V gABI, "Program Header"): p_type PT_LOAD (1) with p_filesz
///    bytes at p_offset; bytes between p_filesz and p_memsz are not in the file and stay
///    unbacked. PT_NOTE (4) segments hold the notes. An e_phnum of PN_XNUM (0xffff) means
///    the count is in sh_info of section header 0 (gABI, "Extended numbering").
///  - Notes: a 12-byte header (namesz, descsz, type), the name and the descriptor each
///    padded to 4 bytes. A note named "QEMU" holds QEMU's CPU state of one vCPU
///    (qemu_cpu_state below; the layout is QEMU's, version 1).
///  - Dumps written with paging (`dump-guest-memory -p`) map guest-*virtual* ranges, several
///    of them onto the same physical page: their segments overlap physically and are
///    refused (`overlapping`). Write the dump without -p: the walkers translate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "../x86/address.hpp"
#include "../x86/result.hpp"
#include "guest_memory.hpp"
#include "region_memory.hpp"

namespace hvkit::paging {

/// Why a file is not a usable ELF core.
enum class elf_core_error : std::uint8_t {
  none = 0,
  truncated,           ///< shorter than its ELF header, or a table or note runs past the end
  not_elf,             ///< no ELF magic (0x7f 'E' 'L' 'F')
  elf32,               ///< ELFCLASS32 (only ELF64 is read)
  big_endian,          ///< ELFDATA2MSB
  not_core,            ///< e_type is not ET_CORE
  not_x86_64,          ///< e_machine is not EM_X86_64
  bad_program_headers, ///< e_phentsize is not 56, or the table is outside the file
  segment_outside_file,///< a PT_LOAD's file bytes are not all inside the file
  too_many_regions,    ///< more PT_LOAD segments than the caller's array holds
  overlapping,         ///< two PT_LOAD segments overlap in guest-physical addresses
  address_wraps,       ///< p_paddr + p_filesz is past 2^64 - 1
  bad_note,            ///< a note's sizes run past its segment
};

/// One segment register as QEMU saves it (its selector, limit, attribute flags in the
/// descriptor's bit positions: S, type and DPL at 8-15, P 15, L 21, D/B 22, G 23; base).
struct qemu_segment {
  std::uint32_t selector = 0;
  std::uint32_t limit = 0;
  std::uint32_t flags = 0;
  std::uint64_t base = 0;
};

/// The registers of one vCPU from its "QEMU" note (QEMU's QEMUCPUState, version 1: the
/// version and size words, RAX..R15 in that order, RIP, RFLAGS, the segments CS, DS, ES,
/// FS, GS, SS, LDTR, TR, GDTR, IDTR of 24 bytes each, CR0..CR4; later fields, such as
/// KernelGSBase, follow when `size` says they are there). EFER is not in it.
struct qemu_cpu_state {
  std::uint32_t version = 0;
  std::uint32_t size = 0;
  std::uint64_t gpr[16]{};  ///< RAX, RBX, RCX, RDX, RSI, RDI, RSP, RBP, R8..R15
  std::uint64_t rip = 0;
  std::uint64_t rflags = 0;
  qemu_segment cs{}, ds{}, es{}, fs{}, gs{}, ss{}, ldtr{}, tr{}, gdtr{}, idtr{};
  std::uint64_t cr[5]{};    ///< CR0, CR1 (0), CR2, CR3, CR4

  /// CS.L: the vCPU was in 64-bit mode, so EFER.LMA (and LME) were set (SDM 3.4.5: L is
  /// only meaningful, and only set by a 64-bit OS, in IA-32e mode).
  [[nodiscard]] constexpr bool cs_long() const noexcept { return (cs.flags >> 21) & 1u; }
};

/// What parse_elf_core() found.
struct elf_core {
  std::size_t regions = 0;   ///< PT_LOAD segments with file bytes, written to the caller's array
  std::size_t cpus = 0;      ///< "QEMU" notes seen (one per vCPU)
  bool has_cpu_state = false;
  qemu_cpu_state cpu0{};     ///< the first vCPU's registers (has_cpu_state)
};

namespace detail {
[[nodiscard]] constexpr std::uint64_t elf_le(const std::uint8_t* p, unsigned n) noexcept {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}
// True if [off, off + n) lies inside a file of `size` bytes (no overflow).
[[nodiscard]] constexpr bool elf_fits(std::uint64_t off, std::uint64_t n, std::uint64_t size) noexcept {
  return off <= size && n <= size - off;
}
constexpr std::uint64_t qemu_state_v1_size = 8 + 18 * 8 + 10 * 24 + 5 * 8;  // 432 bytes

[[nodiscard]] constexpr qemu_cpu_state parse_qemu_state(const std::uint8_t* d) noexcept {
  qemu_cpu_state s;
  s.version = static_cast<std::uint32_t>(elf_le(d, 4));
  s.size = static_cast<std::uint32_t>(elf_le(d + 4, 4));
  const std::uint8_t* p = d + 8;
  for (auto& r : s.gpr) r = elf_le(p, 8), p += 8;
  s.rip = elf_le(p, 8), p += 8;
  s.rflags = elf_le(p, 8), p += 8;
  for (qemu_segment* g : {&s.cs, &s.ds, &s.es, &s.fs, &s.gs, &s.ss, &s.ldtr, &s.tr, &s.gdtr, &s.idtr}) {
    g->selector = static_cast<std::uint32_t>(elf_le(p, 4));
    g->limit = static_cast<std::uint32_t>(elf_le(p + 4, 4));
    g->flags = static_cast<std::uint32_t>(elf_le(p + 8, 4));
    g->base = elf_le(p + 16, 8);  // after a 4-byte pad
    p += 24;
  }
  for (auto& c : s.cr) c = elf_le(p, 8), p += 8;
  return s;
}

// Reads the notes of one PT_NOTE segment into `out`.
[[nodiscard]] constexpr elf_core_error parse_notes(const std::uint8_t* n, std::uint64_t size, elf_core& out) noexcept {
  std::uint64_t at = 0;
  while (size - at >= 12) {
    const std::uint64_t namesz = elf_le(n + at, 4), descsz = elf_le(n + at + 4, 4);
    const std::uint64_t name_at = at + 12;
    const std::uint64_t desc_at = name_at + ((namesz + 3) & ~std::uint64_t{3});
    const std::uint64_t next = desc_at + ((descsz + 3) & ~std::uint64_t{3});
    if (!elf_fits(name_at, namesz, size) || !elf_fits(desc_at, descsz, size) || next > size) {
      return elf_core_error::bad_note;
    }
    const std::uint8_t* name = n + name_at;
    const bool qemu = namesz >= 4 && name[0] == 'Q' && name[1] == 'E' && name[2] == 'M' && name[3] == 'U' &&
                      (namesz == 4 || name[4] == 0);
    if (qemu && descsz >= qemu_state_v1_size) {
      if (out.cpus == 0) {
        out.cpu0 = parse_qemu_state(n + desc_at);
        out.has_cpu_state = true;
      }
      ++out.cpus;
    }
    at = next;
  }
  return elf_core_error::none;
}
}  // namespace detail

/// Parses the ELF core file of `size` bytes at `data`: its PT_LOAD segments go, sorted by
/// guest-physical address, to `regions` (at most `max_regions`; their `data` point into
/// the file, which must outlive them), its "QEMU" notes to the result. region_view::make()
/// accepts the regions as they are.
[[nodiscard]] constexpr result<elf_core, elf_core_error> parse_elf_core(const std::uint8_t* data, std::size_t size,
                                                                       memory_region* regions,
                                                                       std::size_t max_regions) noexcept {
  using detail::elf_fits;
  using detail::elf_le;
  if (size < 64) return unexpected(size >= 4 && data[0] == 0x7f && data[1] == 'E' && data[2] == 'L' && data[3] == 'F'
                                       ? elf_core_error::truncated
                                       : elf_core_error::not_elf);
  if (data[0] != 0x7f || data[1] != 'E' || data[2] != 'L' || data[3] != 'F') return unexpected(elf_core_error::not_elf);
  if (data[4] == 1) return unexpected(elf_core_error::elf32);  // EI_CLASS: ELFCLASS32
  if (data[4] != 2) return unexpected(elf_core_error::not_elf);
  if (data[5] == 2) return unexpected(elf_core_error::big_endian);  // EI_DATA: ELFDATA2MSB
  if (data[5] != 1) return unexpected(elf_core_error::not_elf);
  if (elf_le(data + 16, 2) != 4) return unexpected(elf_core_error::not_core);     // e_type ET_CORE
  if (elf_le(data + 18, 2) != 62) return unexpected(elf_core_error::not_x86_64);  // e_machine EM_X86_64
  const std::uint64_t phoff = elf_le(data + 32, 8), shoff = elf_le(data + 40, 8);
  const std::uint64_t phentsize = elf_le(data + 54, 2);
  std::uint64_t phnum = elf_le(data + 56, 2);
  if (phnum == 0xffff) {  // PN_XNUM: the count is section header 0's sh_info
    if (!elf_fits(shoff, 64, size)) return unexpected(elf_core_error::bad_program_headers);
    phnum = elf_le(data + shoff + 44, 4);
  }
  if (phnum != 0 && (phentsize != 56 || phnum > size / 56 || !elf_fits(phoff, phnum * 56, size))) {
    return unexpected(elf_core_error::bad_program_headers);
  }
  elf_core out;
  for (std::uint64_t i = 0; i < phnum; ++i) {
    const std::uint8_t* ph = data + phoff + i * 56;
    const std::uint64_t type = elf_le(ph, 4), offset = elf_le(ph + 8, 8), paddr = elf_le(ph + 24, 8);
    const std::uint64_t filesz = elf_le(ph + 32, 8);
    if (type == 4) {  // PT_NOTE
      if (!elf_fits(offset, filesz, size)) return unexpected(elf_core_error::bad_note);
      if (const auto e = detail::parse_notes(data + offset, filesz, out); e != elf_core_error::none) return unexpected(e);
      continue;
    }
    if (type != 1 || filesz == 0) continue;  // PT_LOAD with bytes in the file only
    if (!elf_fits(offset, filesz, size)) return unexpected(elf_core_error::segment_outside_file);
    if (paddr + filesz < paddr) return unexpected(elf_core_error::address_wraps);
    if (out.regions == max_regions) return unexpected(elf_core_error::too_many_regions);
    // Insertion by address (dumps list their segments in address order: one compare each).
    std::size_t at = out.regions;
    while (at > 0 && regions[at - 1].base.value() > paddr) {
      regions[at] = regions[at - 1];
      --at;
    }
    regions[at] = memory_region{x86::gpa{paddr}, data + offset, static_cast<std::size_t>(filesz)};
    ++out.regions;
  }
  for (std::size_t i = 1; i < out.regions; ++i) {
    if (regions[i].base.value() < regions[i - 1].end()) return unexpected(elf_core_error::overlapping);
  }
  return out;
}

}  // namespace hvkit::paging
