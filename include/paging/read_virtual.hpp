// SPDX-License-Identifier: MIT
/// @file
/// @brief Reading a range of guest-virtual memory through a walker, page by page: what a
/// debugger, an introspection tool or a dump reader does to fetch a string or a structure
/// that may cross pages. A failure names the first byte that could not be read.
///
/// Each page is translated with the walker's raw translation (`translate()`: no permission
/// check, no A/D update: a tool reads what the tables map, whatever the rights) and read
/// from the guest_memory in aligned 8-byte words (4-byte words where 8 are not backed), so
/// any type modelling guest_memory works, and a read never touches memory outside the
/// requested physical bytes' aligned words.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../x86/address.hpp"
#include "../x86/result.hpp"
#include "guest_memory.hpp"
#include "walk_result.hpp"

namespace hvkit::paging {

// GCC's -Wshadow reports the enumerator `translation` as shadowing the type paging::translation
// (walk_result.hpp); it names a scoped enumerator only (read_failure::translation).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
/// Why read_virtual() stopped.
enum class read_failure : std::uint8_t {
  translation,  ///< the walk of `address` failed (`walk` says how)
  memory,       ///< `address` translated to `physical`, which the memory does not back
};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/// A read that stopped before its end.
struct read_fault {
  read_failure what = read_failure::translation;
  x86::gva address{};          ///< the first guest-virtual byte that could not be read
  std::size_t bytes_read = 0;  ///< bytes copied to the output before it (its offset in the range)
  walk_fault walk{};           ///< the walk's fault (what == translation)
  x86::gpa physical{};         ///< the unbacked physical address of `address` (what == memory)
};

/// A walker read_virtual() can use: raw translation of one linear address over `M`.
template <class W, class M>
concept virtual_translator = requires(const W& w, const M& m, x86::gva a) {
  { w.translate(m, a) } -> std::same_as<walk_result>;
};

namespace detail {
// Copies the bytes [pa, pa + n) of `mem` to `out`; on an unbacked word returns the number
// of bytes copied before the first unbacked byte (< n), else n.
template <guest_memory M>
[[nodiscard]] constexpr std::size_t read_physical(const M& mem, std::uint64_t pa, std::uint8_t* out,
                                                  std::size_t n) noexcept {
  std::size_t done = 0;
  while (done < n) {
    const std::uint64_t a = pa + done;
    const std::uint64_t word = a & ~std::uint64_t{7};
    const unsigned skip = static_cast<unsigned>(a - word);
    std::uint64_t v = 0;
    unsigned valid = 8;  // bytes of the word that are backed, from its start
    if (const auto q = mem.read64(x86::gpa{word})) {
      v = *q;
    } else if (const auto lo = mem.read32(x86::gpa{word})) {
      v = *lo;
      valid = 4;
      if (const auto hi = mem.read32(x86::gpa{word + 4})) {
        v |= std::uint64_t{*hi} << 32;
        valid = 8;
      }
    } else {
      valid = 0;
    }
    for (unsigned i = skip; i < 8 && done < n; ++i) {
      if (i >= valid) return done;
      out[done++] = static_cast<std::uint8_t>(v >> (8 * i));
    }
  }
  return done;
}
}  // namespace detail

/// Reads `size` bytes of guest-virtual memory at `start` into `out`, translating each page
/// with `walker.translate(mem, ...)` (guest_walker, walker_4level, ...). On success returns
/// `size`. On failure returns where and why it stopped; the bytes before `bytes_read` are
/// in `out`, the rest of `out` is unchanged. The range may cross any number of pages of any
/// size (4 KiB, 2/4 MiB, 1 GiB: the translation's page size decides where the next walk is).
template <guest_memory M, virtual_translator<M> W>
[[nodiscard]] constexpr result<std::size_t, read_fault> read_virtual(const W& walker, const M& mem, x86::gva start,
                                                                    std::uint8_t* out, std::size_t size) noexcept {
  std::size_t done = 0;
  while (done < size) {
    const std::uint64_t va = start.value() + done;
    const walk_result t = walker.translate(mem, x86::gva{va});
    if (!t) {
      read_fault f;
      f.what = read_failure::translation;
      f.address = x86::gva{va};
      f.bytes_read = done;
      f.walk = t.error();
      return unexpected(f);
    }
    // The bytes left in this page: the translation's page size, at the offset of `va`.
    const std::uint64_t page = t->page_size();
    const std::uint64_t in_page = page - (va & (page - 1));
    const std::size_t n = in_page < size - done ? static_cast<std::size_t>(in_page) : size - done;
    const std::size_t got = detail::read_physical(mem, t->address.value(), out + done, n);
    if (got < n) {
      read_fault f;
      f.what = read_failure::memory;
      f.address = x86::gva{va + got};
      f.bytes_read = done + got;
      f.physical = x86::gpa{t->address.value() + got};
      return unexpected(f);
    }
    done += n;
  }
  return size;
}

}  // namespace hvkit::paging
