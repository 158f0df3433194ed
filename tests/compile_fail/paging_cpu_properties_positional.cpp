// SPDX-License-Identifier: MIT
// paging::cpu_properties is built by name only: the positional form older callers wrote,
// cpu_properties{maxphyaddr, gbpages, false}, would silently keep PSE-36 on (a property
// added later), so it must not compile; the designated form does.
#include <hvkit/paging/walker.hpp>

int main() {
  const unsigned maxphyaddr = 40;
  const bool gbpages = true;
  hvkit::paging::cpu_properties props{.maxphyaddr = maxphyaddr, .gbpages = gbpages, .amd_nonleaf_bit8 = false};
#ifdef HVKIT_COMPILE_FAIL
  props = hvkit::paging::cpu_properties{maxphyaddr, gbpages, false};
#endif
  return props.maxphyaddr == 40 && props.pse36 ? 0 : 1;
}
