// SPDX-License-Identifier: MIT
// The consumer's own paging/mmu.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <paging/mmu.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_paging_mmu_hpp = "paging/mmu.hpp"; }
