// SPDX-License-Identifier: MIT
// The output of a nested walk's second stage (NPT here; EPT alike) is host-physical (APM
// 15.25.4): nested_translation::l1_address() and second.address are x86::hpa, and an hpa
// is not accepted where a gpa is expected (an ept_request's guest-physical address).
#include <cstdint>

#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  static const std::uint8_t image[0x1000] = {};
  const paging::flat_view mem(image, sizeof image);
  const paging::npt_walker_4level npt(x86::hpa{0}, {}, {});
  const auto s = npt.translate(mem, x86::gpa{0x5000});
  if (!s) return 0;  // not present (the tables are empty): only the types matter here
  paging::ept_request req{};
  req.address = x86::gpa{s->address.value()};  // an explicit conversion compiles
#ifdef HVKIT_COMPILE_FAIL
  req.address = s->address;
#endif
  return req.address.value() == 0 ? 0 : 1;
}
