// SPDX-License-Identifier: MIT
// Where a second-stage (EPT or NPT) fault's entry is, is host-physical (the EPT tables are
// host-physical, SDM 25.6.11; the nested page tables too, APM 15.25.4). walk_fault once held
// it in an `x86::gpa entry_address` field shared with guest-stage faults, so an EPT fault's
// table address read as a guest-physical one; now the field is a fault_entry_address, which
// converts to neither address type, and it is read typed by stage: host_entry_address()
// (x86::hpa) for a second-stage fault, guest_entry_address() (x86::gpa) for a guest-stage one.
#include <cstdint>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  static const std::uint8_t image[0x2000] = {};
  const paging::flat_view mem(image, sizeof image);
  const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x1000}, 4, false), {});
  if (!w) return 1;
  const auto t = w->translate(mem, x86::gpa{0x5000});  // the PML4E is not present
  if (t) return 1;
#ifdef HVKIT_COMPILE_FAIL
  const x86::gpa bad = t.error().entry_address;
  return bad.value() == 0x1000 ? 0 : 1;
#else
  const x86::hpa good = t.error().host_entry_address();
  return good.value() == 0x1000 ? 0 : 1;
#endif
}
