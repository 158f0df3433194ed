// SPDX-License-Identifier: MIT
// The generated <hvkit/version.hpp> carries project(VERSION) (the oracle is CMake's own
// PROJECT_VERSION, passed on the command line).
#include <hvkit/version.hpp>

#include <cstring>

static_assert(HVKIT_VERSION == EXPECTED_MAJOR * 10000 + EXPECTED_MINOR * 100 + EXPECTED_PATCH);
static_assert(hvkit::version.major == EXPECTED_MAJOR && hvkit::version.minor == EXPECTED_MINOR &&
              hvkit::version.patch == EXPECTED_PATCH);

int main() { return std::strcmp(hvkit::version.string, EXPECTED_VERSION) == 0 && std::strcmp(HVKIT_VERSION_STRING, EXPECTED_VERSION) == 0 ? 0 : 1; }
