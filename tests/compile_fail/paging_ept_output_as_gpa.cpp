// SPDX-License-Identifier: MIT
// A second-stage (EPT) walk outputs a host-physical address (SDM 29.3: the EPT translates a
// guest-physical address to a physical one): translation::address of an ept_walker result
// is an x86::hpa, and it does not convert to an x86::gpa (e.g. fed back as a guest-physical
// address of a further walk).
#include <cstdint>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  static const std::uint8_t image[0x1000] = {};
  const paging::flat_view mem(image, sizeof image);
  const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0}, 4, false), {});
  if (!w) return 1;
  const auto t = w->translate(mem, x86::gpa{0x5000});
  if (!t) return 0;  // not present (the tables are empty): only the types matter here
  const x86::hpa good = t->address;
#ifdef HVKIT_COMPILE_FAIL
  const x86::gpa bad = t->address;
  return bad.value() == good.value() ? 0 : 1;
#endif
  return good.value() == 0 ? 0 : 1;
}
