// SPDX-License-Identifier: MIT
// The consumer's own paging/walker.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <paging/walker.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_paging_walker_hpp = "paging/walker.hpp"; }
