// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: memory images from files (raw dumps at a guest-physical address, several
/// of them with holes between, or an ELF core from QEMU's `dump-guest-memory` / `virsh
/// dump`), as one region_view for the walkers; and the names of the image and read errors.
///
/// @code
///   paging::memory_image img;
///   if (auto r = img.add_file("guest.core"); !r) { std::cerr << to_string(r.error()) << '\n'; return 1; }
///   const auto mem = img.view();                       // result<region_view, region_error>
///   const auto& cpu = img.core()->cpu0;                // CR0 = cpu.cr[0], CR3 = cpu.cr[3] ...
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/paging/hosted/image.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../elf_core.hpp"
#include "../read_virtual.hpp"
#include "../region_memory.hpp"
#include "print.hpp"

namespace hvkit::paging {

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(region_error e) noexcept {
  switch (e) {
    case region_error::none: return "none";
    case region_error::unsorted: return "unsorted";
    case region_error::overlapping: return "overlapping";
    case region_error::wraps: return "wraps";
    case region_error::no_data: return "no_data";
  }
  return {};
}
/// See name(region_error).
[[nodiscard]] inline std::string to_string(region_error e) { return ::hvkit::hosted::enum_string(name(e), "region_error", e); }

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(elf_core_error e) noexcept {
  switch (e) {
    case elf_core_error::none: return "none";
    case elf_core_error::truncated: return "truncated";
    case elf_core_error::not_elf: return "not_elf";
    case elf_core_error::elf32: return "elf32";
    case elf_core_error::big_endian: return "big_endian";
    case elf_core_error::not_core: return "not_core";
    case elf_core_error::not_x86_64: return "not_x86_64";
    case elf_core_error::bad_program_headers: return "bad_program_headers";
    case elf_core_error::segment_outside_file: return "segment_outside_file";
    case elf_core_error::too_many_regions: return "too_many_regions";
    case elf_core_error::overlapping: return "overlapping";
    case elf_core_error::address_wraps: return "address_wraps";
    case elf_core_error::bad_note: return "bad_note";
  }
  return {};
}
/// See name(elf_core_error).
[[nodiscard]] inline std::string to_string(elf_core_error e) {
  return ::hvkit::hosted::enum_string(name(e), "elf_core_error", e);
}

/// See x86/hosted/format.hpp for the conventions.
[[nodiscard]] constexpr std::string_view name(read_failure e) noexcept {
  switch (e) {
    case read_failure::translation: return "translation";
    case read_failure::memory: return "memory";
  }
  return {};
}
/// See name(read_failure).
[[nodiscard]] inline std::string to_string(read_failure e) { return ::hvkit::hosted::enum_string(name(e), "read_failure", e); }

/// "gva 0x...: <walk fault>" or "gva 0x... -> gpa 0x...: not in memory", with the bytes read.
[[nodiscard]] inline std::string to_string(const read_fault& f) {
  std::string s = "gva " + ::hvkit::hosted::hex16(f.address.value());
  if (f.what == read_failure::translation) s += ": " + to_string(f.walk);
  else s += " -> gpa " + ::hvkit::hosted::hex16(f.physical.value()) + ": not in memory";
  return s + " (after " + std::to_string(f.bytes_read) + " bytes)";
}

/// Why a memory image could not be built.
struct image_error {
  enum class kind_type : std::uint8_t { cannot_read, elf_core, regions } kind = kind_type::cannot_read;
  int errno_value = 0;      ///< kind == cannot_read: errno of the failed open or read
  elf_core_error elf{};     ///< kind == elf_core
  region_error region{};    ///< kind == regions: the file's regions overlap others (or wrap)
};
/// "cannot read: <strerror>", "not a usable ELF core: <error>", "regions: <error>".
[[nodiscard]] inline std::string to_string(const image_error& e) {
  switch (e.kind) {
    case image_error::kind_type::cannot_read: return std::string("cannot read: ") + std::strerror(e.errno_value);
    case image_error::kind_type::elf_core: return "not a usable ELF core: " + to_string(e.elf);
    case image_error::kind_type::regions: return "regions: " + to_string(e.region);
  }
  return "image_error";
}

/// A guest's memory from files: raw dumps at given guest-physical addresses and ELF cores,
/// owned here and seen through view(). Regions of all files together must not overlap.
class memory_image {
 public:
  /// Adds `path`: an ELF core (recognised by its magic) adds its PT_LOAD segments and its
  /// CPU state (core()); any other file is raw memory whose first byte is at `base`.
  result<void, image_error> add_file(const std::string& path, x86::gpa base = x86::gpa{0}) {
    std::vector<std::uint8_t> bytes;
    if (auto r = read_file(path, bytes); !r) return r;
    if (bytes.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F') {
      return add_core(std::move(bytes));
    }
    return add_raw(std::move(bytes), base);
  }

  /// Adds raw memory whose first byte is at `base`.
  result<void, image_error> add_raw(std::vector<std::uint8_t> bytes, x86::gpa base) {
    const auto before = regions_;
    files_.push_back(std::move(bytes));
    const auto& f = files_.back();
    regions_.push_back(memory_region{base, f.data(), f.size()});
    return settle(before);
  }

  /// Adds an ELF core file's regions and (for the first core) its CPU state.
  result<void, image_error> add_core(std::vector<std::uint8_t> bytes) {
    const auto before = regions_;
    files_.push_back(std::move(bytes));
    const auto& f = files_.back();
    std::vector<memory_region> found(f.size() / 56 + 1);  // at most one per program header
    const auto c = parse_elf_core(f.data(), f.size(), found.data(), found.size());
    if (!c) {
      files_.pop_back();
      return unexpected(image_error{image_error::kind_type::elf_core, 0, c.error(), {}});
    }
    regions_.insert(regions_.end(), found.begin(), found.begin() + static_cast<std::ptrdiff_t>(c->regions));
    auto r = settle(before);
    if (r && !core_) core_ = *c;
    return r;
  }

  /// The guest_memory over every region (sorted; add_*() already refused overlaps).
  [[nodiscard]] result<region_view, region_error> view() const { return region_view::make(regions_.data(), regions_.size()); }
  [[nodiscard]] const std::vector<memory_region>& regions() const noexcept { return regions_; }
  /// The first ELF core's notes, if a core was added.
  [[nodiscard]] const std::optional<elf_core>& core() const noexcept { return core_; }

 private:
  static result<void, image_error> read_file(const std::string& path, std::vector<std::uint8_t>& out) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return unexpected(image_error{image_error::kind_type::cannot_read, errno, {}, {}});
    std::uint8_t chunk[65536];
    for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) out.insert(out.end(), chunk, chunk + n);
    const bool bad = std::ferror(f) != 0;
    const int err = errno;
    std::fclose(f);
    if (bad) return unexpected(image_error{image_error::kind_type::cannot_read, err, {}, {}});
    return {};
  }
  // Sorts the regions; if they no longer make a view, restores `before` (and drops the file).
  result<void, image_error> settle(const std::vector<memory_region>& before) {
    std::stable_sort(regions_.begin(), regions_.end(),
                     [](const memory_region& a, const memory_region& b) { return a.base.value() < b.base.value(); });
    if (const auto v = view(); !v) {
      regions_ = before;
      files_.pop_back();
      return unexpected(image_error{image_error::kind_type::regions, 0, {}, v.error()});
    }
    return {};
  }

  std::vector<std::vector<std::uint8_t>> files_;  // each file's bytes; regions point into them
  std::vector<memory_region> regions_;
  std::optional<elf_core> core_;
};

}  // namespace hvkit::paging

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<paging::region_error> = true;
template <>
inline constexpr bool enable_printing<paging::elf_core_error> = true;
template <>
inline constexpr bool enable_printing<paging::read_failure> = true;
template <>
inline constexpr bool enable_printing<paging::read_fault> = true;
template <>
inline constexpr bool enable_printing<paging::image_error> = true;
}  // namespace hvkit::hosted
