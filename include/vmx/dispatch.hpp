// SPDX-License-Identifier: MIT
/// @file
/// @brief Exit dispatch by static dispatch: one switch over the basic exit reason (the
/// compiler emits a jump table), each case calling the handler's overload for that reason.
/// No function pointers, no virtual calls (the seed series removed retpolines from this path).
///
/// The handler is any object with call operators for the exits it handles:
/// @code
///   struct my_handler {
///     using result_type = bool;
///     bool operator()(vmx::cr_access_exit e, auto& vmcs);                       // first-class
///     bool operator()(vmx::exit_tag<vmx::exit_reason::cpuid>, auto& vmcs);
///     bool unhandled(vmx::exit_reason_field r, auto& vmcs);                     // everything else
///   };
///   bool keep_running = vmx::dispatch_exit(handler, vmcs);
/// @endcode
/// The CR-access exit is tested before the switch and delivered with its qualification
/// already read and decoded (cr_access_exit). A VM-entry failure (exit reason bit 31) goes to
/// `entry_failed(reason, vmcs)` if the handler has it, else to `unhandled`.
#pragma once

#include <cstdint>

#include "backend.hpp"
#include "exit_qualification.hpp"
#include "exit_reason.hpp"
#include "fields.hpp"

namespace hvkit::vmx {

/// The type that selects the handler overload for basic exit reason R.
template <exit_reason R>
struct exit_tag {
  static constexpr exit_reason reason = R;
};

/// A CR-access exit, qualification decoded.
struct cr_access_exit {
  cr_access_qualification qualification;
};

/// Dispatches an exit whose exit-reason field is `r`.
template <class Handler, vmcs_backend B>
constexpr typename Handler::result_type dispatch_exit(Handler& h, B& vmcs, exit_reason_field r) noexcept {
  if (r.entry_failure()) [[unlikely]] {
    if constexpr (requires { h.entry_failed(r, vmcs); }) return h.entry_failed(r, vmcs);
    else return h.unhandled(r, vmcs);
  }
  if constexpr (requires { h(cr_access_exit{}, vmcs); }) {
    if (r.basic() == exit_reason::cr_access) {
      auto q = vmread(vmcs, fields::exit_qualification);
      if (!q) return h.unhandled(r, vmcs);
      return h(cr_access_exit{cr_access_qualification{q.value()}}, vmcs);
    }
  }
  switch (r.basic()) {
#define HVKIT_VMX_DETAIL_CASE(n)                                             \
  case exit_reason::n:                                                       \
    if constexpr (requires { h(exit_tag<exit_reason::n>{}, vmcs); })         \
      return h(exit_tag<exit_reason::n>{}, vmcs);                            \
    else                                                                     \
      return h.unhandled(r, vmcs);
    HVKIT_VMX_EXIT_REASONS(HVKIT_VMX_DETAIL_CASE)
#undef HVKIT_VMX_DETAIL_CASE
  }
  return h.unhandled(r, vmcs);
}

/// Reads the exit-reason field from `vmcs` and dispatches it. A failed VMREAD goes to
/// `vmread_failed(fail)` if the handler has it, else to `unhandled(exit_reason_field{~0u}, vmcs)`.
template <class Handler, vmcs_backend B>
constexpr typename Handler::result_type dispatch_exit(Handler& h, B& vmcs) noexcept {
  auto r = vmread(vmcs, fields::exit_reason);
  if (!r) [[unlikely]] {
    if constexpr (requires { h.vmread_failed(r.error()); }) return h.vmread_failed(r.error());
    else return h.unhandled(exit_reason_field{~0u}, vmcs);
  }
  return dispatch_exit(h, vmcs, exit_reason_field{r.value()});
}

}  // namespace hvkit::vmx
