// SPDX-License-Identifier: MIT
// ept_walker::translate(mem, ept_request) was the checked walk with EPT A/D; it is now walk()
// (check() without A/D), and translate(mem, gpa) is the raw translation. Old code that passes
// an ept_request to translate must not compile (a silently different meaning otherwise).
#include <hvkit/paging/ept_walker.hpp>

#include <array>
#include <cstdint>

int main() {
  std::array<std::uint8_t, 0x4000> bytes{};
  const hvkit::paging::flat_view mem(bytes.data(), bytes.size());
  const auto w = hvkit::paging::ept_walker::make(hvkit::paging::ept_pointer{0x1000 | (3u << 3) | 6u},
                                                 hvkit::paging::ept_capabilities{});
  hvkit::paging::ept_request req{};
  req.address = hvkit::x86::gpa{0x1000};
  int n = 0;
  n += w->walk(mem, req) ? 1 : 0;
  n += w->check(mem, req) ? 1 : 0;
  n += w->translate(mem, req.address) ? 1 : 0;
#ifdef HVKIT_COMPILE_FAIL
  n += w->translate(mem, req) ? 1 : 0;
#endif
  return n;
}
