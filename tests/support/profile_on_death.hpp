// SPDX-License-Identifier: MIT
// Death tests under source-based coverage: the child process of EXPECT_DEATH ends with a trap
// (SIGILL, the default contract handler) or abort() (SIGABRT), and a process killed by a
// signal never writes its profile, so the path that violates a contract would count as never
// run. Including this header installs, in a coverage build only (the profile runtime's
// __llvm_profile_write_file is linked in), handlers for SIGILL, SIGTRAP and SIGABRT that
// write the profile, then die of the same signal: the death test sees the same death.
#pragma once

#include <csignal>
#include <initializer_list>

extern "C" int __llvm_profile_write_file(void) __attribute__((weak));

namespace hvkit::test {

inline void write_profile_then_die(int sig) {
  __llvm_profile_write_file();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

inline const bool profile_on_death = [] {
  if (__llvm_profile_write_file != nullptr)
    for (int sig : {SIGILL, SIGTRAP, SIGABRT}) std::signal(sig, write_profile_then_die);
  return true;
}();

}  // namespace hvkit::test
