// SPDX-License-Identifier: MIT
// make_cpu_role(cr0, cr4, efer): passing CR4 where CR0 goes must not compile.
#include <hvkit/paging/role.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
constexpr auto r = paging::make_cpu_role(x86::cr4{0x20}, x86::cr0{0x80010001}, x86::efer{0x500});
#else
constexpr auto r = paging::make_cpu_role(x86::cr0{0x80010001}, x86::cr4{0x20}, x86::efer{0x500});
#endif
static_assert(r.cr0_wp());
