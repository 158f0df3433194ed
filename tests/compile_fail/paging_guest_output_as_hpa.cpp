// SPDX-License-Identifier: MIT
// A walk of the guest's own tables outputs a guest-physical address: translation::address
// of a guest walk is an x86::gpa and is not accepted where a host-physical address is
// expected (the root of an EPTP, SDM 25.6.11).
#include <cstdint>

#include <hvkit/paging/ept_entry.hpp>
#include <hvkit/paging/walker.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  paging::translation t{};
  t.address = x86::gpa{0x10000};
  const paging::ept_pointer good = paging::make_ept_pointer(x86::hpa{t.address.value()}, 4, false);
#ifdef HVKIT_COMPILE_FAIL
  const paging::ept_pointer bad = paging::make_ept_pointer(t.address, 4, false);
  return bad.raw() == good.raw() ? 0 : 1;
#endif
  return good.root(52).value() == 0x10000 ? 0 : 1;
}
