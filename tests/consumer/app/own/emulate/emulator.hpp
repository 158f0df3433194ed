// SPDX-License-Identifier: MIT
// The consumer's own emulate/emulator.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <emulate/emulator.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_emulate_emulator_hpp = "emulate/emulator.hpp"; }
