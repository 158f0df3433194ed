// SPDX-License-Identifier: MIT
// An EPT enumeration's pages are host-physical (SDM 29.3: EPT translates guest-physical
// addresses to physical ones): ept_mappings yields host_mapping, whose `output` is an
// x86::hpa and does not convert to an x86::gpa (which it was typed as while one mapping
// struct served the guest and the EPT enumerations).
#include <cstdint>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mappings.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  static const std::uint8_t image[0x2000] = {};
  const paging::flat_view mem(image, sizeof image);
  auto pages = paging::ept_mappings<paging::flat_view>::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false),
                                                             paging::ept_capabilities{}, mem);
  if (!pages) return 1;
  for (const auto& m : *pages) {  // the tables are empty: only the types matter here
    if (!m) continue;
#ifdef HVKIT_COMPILE_FAIL
    const x86::gpa bad = m->output;
    return bad.value() == 0 ? 0 : 1;
#else
    const x86::hpa good = m->output;
    return good.value() == 0 ? 0 : 1;
#endif
  }
  return 0;
}
