// SPDX-License-Identifier: MIT
/// @file
/// @brief `vmcs_reader<Backend>`: many VMREADs, one error check. Each get() returns the
/// field's value (0 after a failure) and the first failure is kept, so code that fills a
/// structure from a dozen fields checks once at the end instead of after every read.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "../x86/result.hpp"

namespace hvkit::vmx {

template <vmcs_backend B>
class vmcs_reader {
 public:
  constexpr explicit vmcs_reader(B& b) noexcept : b_(&b) {}
  template <std::uint32_t E>
  [[nodiscard]] constexpr typename field<E>::value_type get(field<E> f) noexcept {
    if (failed_) return {};
    auto r = vmread(*b_, f);
    if (!r) {
      failed_ = true;
      error_ = r.error();
      return {};
    }
    return r.value();
  }
  [[nodiscard]] constexpr bool failed() const noexcept { return failed_; }
  [[nodiscard]] constexpr vm_fail error() const noexcept { return error_; }
  /// `v` if every read succeeded, else the first failure.
  template <class T>
  [[nodiscard]] constexpr result<T, vm_fail> finish(T v) const noexcept {
    if (failed_) return unexpected(error_);
    return v;
  }

 private:
  B* b_;
  bool failed_ = false;
  vm_fail error_{};
};

}  // namespace hvkit::vmx
