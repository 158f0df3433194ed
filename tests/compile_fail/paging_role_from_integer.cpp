// SPDX-License-Identifier: MIT
// A role is a typed value: a raw integer does not silently become a cpu_role.
#include <hvkit/paging/role.hpp>

namespace paging = hvkit::paging;

constexpr bool is_paging(paging::cpu_role r) { return r.paging(); }
#ifdef HVKIT_COMPILE_FAIL
static_assert(is_paging(4u));
#else
static_assert(is_paging(paging::cpu_role{4u}));
#endif
