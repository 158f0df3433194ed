// SPDX-License-Identifier: MIT
// The consumer's own paging/guest_memory.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <paging/guest_memory.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_paging_guest_memory_hpp = "paging/guest_memory.hpp"; }
