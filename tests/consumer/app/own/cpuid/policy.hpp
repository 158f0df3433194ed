// SPDX-License-Identifier: MIT
// The consumer's own cpuid/policy.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <cpuid/policy.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_cpuid_policy_hpp = "cpuid/policy.hpp"; }
