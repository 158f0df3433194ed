// SPDX-License-Identifier: MIT
// A walk translates a guest-virtual address: a guest-physical one does not convert.
#include <hvkit/paging/walker.hpp>

int main() {
  hvkit::paging::walk_request req{};
  req.linear = hvkit::x86::gva{0x1000};
#ifdef HVKIT_COMPILE_FAIL
  req.linear = hvkit::x86::gpa{0x1000};
#endif
  return req.linear.value() == 0x1000 ? 0 : 1;
}
