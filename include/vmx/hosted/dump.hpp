// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: print a VMCS (or any field list of it) and VMX failures with `std::fprintf`.
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/vmx/hosted/dump.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cinttypes>
#include <cstdio>

#include "../backend.hpp"
#include "../field_lists.hpp"
#include "../fields.hpp"
#include "../vm_fail.hpp"

namespace hvkit::vmx::hosted {

/// Prints one line per field of `list`: "name (encoding) = value", or the VMREAD failure.
/// Returns the number of lines printed.
template <class List, vmcs_backend B>
std::size_t dump(std::FILE* out, const List& list, B& vmcs) {
  std::size_t n = 0;
  lists::for_each_field(list, [&](auto f) {
    using F = decltype(f);
    const field_info* info = find_field(F::encoding);
    const char* name = info ? info->name : "?";
    auto v = vmread(vmcs, f);
    if (v)
      std::fprintf(out, "%-40s (0x%04" PRIx32 ") = 0x%0*" PRIx64 "\n", name, F::encoding,
                   static_cast<int>(bits_of(F::encoding) / 4), static_cast<std::uint64_t>(v.value()));
    else
      std::fprintf(out, "%-40s (0x%04" PRIx32 ") : VMREAD failed (%s, error %" PRIu32 ")\n", name, F::encoding,
                   v.error().how == vm_fail::kind::valid ? "VMfailValid" : "VMfailInvalid",
                   static_cast<std::uint32_t>(v.error().error));
    ++n;
  });
  return n;
}

/// Prints a vm_fail.
inline void print(std::FILE* out, const vm_fail& f) {
  std::fprintf(out, "%s, VM-instruction error %" PRIu32 ", field 0x%04" PRIx32 "\n",
               f.how == vm_fail::kind::valid ? "VMfailValid" : "VMfailInvalid", static_cast<std::uint32_t>(f.error),
               f.field_encoding);
}

}  // namespace hvkit::vmx::hosted
