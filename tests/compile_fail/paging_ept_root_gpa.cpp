// SPDX-License-Identifier: MIT
// EPT tables live at host-physical addresses: the EPTP's root is an x86::hpa, and a guest-
// physical address does not convert to it ("a gpa is not an hpa", for EPT too).
#include <hvkit/paging/ept_entry.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  const paging::ept_pointer good = paging::make_ept_pointer(x86::hpa{0x10000}, 4, false);
  const x86::hpa root = good.root(52);
#ifdef HVKIT_COMPILE_FAIL
  const paging::ept_pointer bad = paging::make_ept_pointer(x86::gpa{0x10000}, 4, false);
  return bad.raw() == good.raw() ? 0 : 1;
#endif
  return root.value() == 0x10000 ? 0 : 1;
}
