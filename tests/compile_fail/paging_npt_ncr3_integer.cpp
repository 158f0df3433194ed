// SPDX-License-Identifier: MIT
// nCR3 as a plain integer (the form npt_walker once took) no longer compiles: the caller
// says it is host-physical with x86::hpa{...}.
#include <hvkit/paging/npt.hpp>

int main() {
  const std::uint64_t ncr3 = 0x10000;
  const hvkit::paging::npt_walker_4level good(hvkit::x86::hpa{ncr3}, {}, {});
#ifdef HVKIT_COMPILE_FAIL
  const hvkit::paging::npt_walker_4level bad(ncr3, {}, {});
  return bad.root() == good.root() ? 0 : 1;
#endif
  return good.root().value() == 0x10000 ? 0 : 1;
}
