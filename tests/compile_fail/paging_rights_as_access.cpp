// SPDX-License-Identifier: MIT
// permission_fault takes the page's rights (pte_access) and the access (x86::pfec) as
// distinct types: swapping them must not compile.
#include <hvkit/paging/permission.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

constexpr auto role = paging::make_cpu_role(x86::cr0{0x80010001}, x86::cr4{0x20}, x86::efer{0x500});
#ifdef HVKIT_COMPILE_FAIL
constexpr auto f = paging::permission_fault(role, x86::pfec::write, 0, paging::pte_access::write, x86::rflags{2}, 0);
#else
constexpr auto f = paging::permission_fault(role, paging::pte_access::write, 0, x86::pfec::write, x86::rflags{2}, 0);
#endif
static_assert(f.none());
