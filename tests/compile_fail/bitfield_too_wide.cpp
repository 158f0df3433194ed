// SPDX-License-Identifier: MIT
// Setting a value wider than its field must not compile in constant evaluation.
#include <cstdint>
#include <hvkit/x86/bitfield.hpp>

using iopl = hvkit::x86::bitfield<std::uint64_t, 12, 2, std::uint8_t>;

#ifdef HVKIT_COMPILE_FAIL
constexpr std::uint64_t bad = iopl::set(0, 4);  // 4 needs 3 bits
#else
constexpr std::uint64_t good = iopl::set(0, 3);
static_assert(good == 0x3000);
#endif
