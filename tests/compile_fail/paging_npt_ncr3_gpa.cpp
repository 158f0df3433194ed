// SPDX-License-Identifier: MIT
// nCR3 (the nested page tables' root) is host-physical: npt_walker takes an x86::hpa, and
// neither a guest-physical address nor a plain integer converts to it.
#include <hvkit/paging/npt.hpp>

int main() {
  const hvkit::paging::npt_walker_4level good(hvkit::x86::hpa{0x10000}, {}, {});
#ifdef HVKIT_COMPILE_FAIL
  const hvkit::paging::npt_walker_4level bad(hvkit::x86::gpa{0x10000}, {}, {});
  return bad.root() == good.root() ? 0 : 1;
#endif
  return good.root().value() == 0x10000 ? 0 : 1;
}
