// SPDX-License-Identifier: MIT
// The consumer's own x86/address.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <x86/address.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_x86_address_hpp = "x86/address.hpp"; }
