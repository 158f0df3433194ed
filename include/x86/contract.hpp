// SPDX-License-Identifier: MIT
/// @file
/// @brief The contract-check macro, overridable by the user.
///
/// `HVKIT_EXPECTS(cond)` states a precondition that only a programming error can break
/// (bad *input* from a guest or a file is reported through result<>, never through this).
/// A violation calls `HVKIT_CONTRACT_VIOLATION(expr, file, line)`. The default traps
/// (`__builtin_trap()`); in a hosted build (`__STDC_HOSTED__ == 1` with `<cstdio>` available)
/// it first prints `<file>:<line>: hvkit: precondition failed: HVKIT_EXPECTS(<condition>)` to
/// stderr (x86/hosted/contract_print.hpp; `HVKIT_NO_CONTRACT_PRINT` keeps the bare trap).
/// Define `HVKIT_CONTRACT_VIOLATION` before including any hvkit header to route violations to
/// your own panic handler (it must not return), identically in every translation unit.
/// Define `HVKIT_DISABLE_CONTRACTS` to compile the checks out (except result<>'s wrong-kind
/// access, which then traps: x86/result.hpp). In constant evaluation a
/// violation is always a compile error.
#pragma once

// Hosted builds print before they trap. The only core-to-hosted include, and only when the
// build is hosted: a freestanding build (-ffreestanding) never sees it.
#if !defined(HVKIT_CONTRACT_VIOLATION) && !defined(HVKIT_NO_CONTRACT_PRINT) && defined(__STDC_HOSTED__) && \
    __STDC_HOSTED__ == 1 && defined(__has_include)
#if __has_include(<cstdio>)
#include "hosted/contract_print.hpp"
#endif
#endif

#ifndef HVKIT_CONTRACT_VIOLATION
#define HVKIT_CONTRACT_VIOLATION(expr, file, line) __builtin_trap()
#endif

namespace hvkit::detail {
/// Not constexpr on purpose: reaching it during constant evaluation is a compile error.
[[noreturn]] inline void contract_violated(const char* expr, const char* file, int line) noexcept {
  static_cast<void>(expr);
  static_cast<void>(file);
  static_cast<void>(line);
  HVKIT_CONTRACT_VIOLATION(expr, file, line);
  __builtin_unreachable();
}
}  // namespace hvkit::detail

#ifdef HVKIT_DISABLE_CONTRACTS
#define HVKIT_EXPECTS(cond) static_cast<void>(0)
#else
#define HVKIT_EXPECTS(cond) \
  ((cond) ? static_cast<void>(0) : ::hvkit::detail::contract_violated(#cond, __FILE__, __LINE__))
#endif
