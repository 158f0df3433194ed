// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: the default contract-violation handler of a hosted build. It prints
/// `<file>:<line>: hvkit: precondition failed: HVKIT_EXPECTS(<condition>)` to stderr, then
/// traps (a bare SIGILL said nothing). x86/contract.hpp includes this header itself in a
/// hosted build (`__STDC_HOSTED__ == 1` and `<cstdio>` available) unless the user defined
/// `HVKIT_CONTRACT_VIOLATION` (their own handler) or `HVKIT_NO_CONTRACT_PRINT` (trap only).
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/x86/hosted/contract_print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdio>

namespace hvkit::hosted {

/// Prints where and which precondition failed, then traps. stderr is unbuffered by default;
/// the flush is for a program that made it buffered.
[[noreturn]] inline void print_contract_violation_and_trap(const char* expr, const char* file, int line) noexcept {
  std::fprintf(stderr, "%s:%d: hvkit: precondition failed: HVKIT_EXPECTS(%s)\n", file, line, expr);
  std::fflush(stderr);
  __builtin_trap();
}

}  // namespace hvkit::hosted

#ifndef HVKIT_CONTRACT_VIOLATION
#define HVKIT_CONTRACT_VIOLATION(expr, file, line) ::hvkit::hosted::print_contract_violation_and_trap(expr, file, line)
#endif
