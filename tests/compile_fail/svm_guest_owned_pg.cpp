// SPDX-License-Identifier: MIT
// An SVM CR intercept policy that lets the guest own CR0.PG (an MMU-role bit other than WP)
// must not compile: the same x86::guest_owned_set check as for VMX masks.
#include <hvkit/svm/cr_intercepts.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;

#ifdef HVKIT_COMPILE_FAIL
using policy = x86::guest_owned_set<x86::cr0::wp | x86::cr0::pg, x86::cr4{}>;
#else
using policy = x86::guest_owned_set<x86::cr0::wp, x86::cr4{}>;
#endif
constexpr auto c = svm::make_cr_intercepts<policy>({true});
static_assert(c.cr0_write == svm::cr0_write_intercept::none);
