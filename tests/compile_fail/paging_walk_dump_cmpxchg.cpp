// SPDX-License-Identifier: MIT
// A read-only flat view (a memory dump) has no compare-exchange: a walker can never set A/D
// flags in it.
#include <cstdint>

#include <hvkit/paging/guest_memory.hpp>

int main() {
  static const std::uint8_t dump[16] = {};
  hvkit::paging::flat_view v(dump, sizeof dump);
  auto r = v.read64(hvkit::x86::gpa{0});
#ifdef HVKIT_COMPILE_FAIL
  auto c = v.cmpxchg64(hvkit::x86::gpa{0}, 0, 1);
  static_cast<void>(c);
#endif
  return r.has_value() ? 0 : 1;
}
