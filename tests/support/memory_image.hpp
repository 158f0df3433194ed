// SPDX-License-Identifier: MIT
// A little-endian guest-physical memory image for the walker tests: place 32- and 64-bit
// entries by address and read them back, viewed as paging::flat_memory / flat_view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>

namespace test_support {

struct memory_image {
  std::vector<std::uint8_t> bytes;
  explicit memory_image(std::size_t n) : bytes(n) {}
  void put64(std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put32(std::uint64_t a, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  std::uint64_t get64(std::uint64_t a) const {
    std::uint64_t v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= std::uint64_t{bytes[a + i]} << (8 * i);
    return v;
  }
  std::uint32_t get32(std::uint64_t a) const { return static_cast<std::uint32_t>(get64(a)); }
  hvkit::paging::flat_memory mem() { return hvkit::paging::flat_memory(bytes.data(), bytes.size()); }
  hvkit::paging::flat_view view() const { return hvkit::paging::flat_view(bytes.data(), bytes.size()); }
};

}  // namespace test_support
