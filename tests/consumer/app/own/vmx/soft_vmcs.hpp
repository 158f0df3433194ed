// SPDX-License-Identifier: MIT
// The consumer's own vmx/soft_vmcs.hpp: same path as an hvkit header. hvkit's internal includes must
// never pick this up (if they did, hvkit's declarations would be missing and the build
// would fail); the consumer's #include <vmx/soft_vmcs.hpp> must.
#pragma once
namespace app { inline constexpr const char* own_vmx_soft_vmcs_hpp = "vmx/soft_vmcs.hpp"; }
