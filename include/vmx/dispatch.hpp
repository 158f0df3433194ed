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
///
/// An exit without an overload goes to `unhandled`. An overload that exists but cannot be
/// called with the backend being dispatched over (one taking `soft_vmcs&` while dispatching
/// over `cached_vmcs<soft_vmcs>`) does not compile: it would otherwise send that exit to
/// `unhandled` without a word. Take the backend as `auto&` (or its exact type).
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

namespace detail {
/// Binds to a reference of any type: asks "does the handler have an overload for this exit,
/// whatever VMCS type it takes?" Declared only (never called).
struct any_vmcs_backend {
  template <class T>
  operator T&() const noexcept;
};

/// True if `Handler` has a call operator for `Exit` that takes some VMCS type, but not `B`.
/// Asked only when the call with `B` fails, so a generic (`auto&`) overload is never
/// instantiated with the probe.
template <class Handler, class B, class Exit>
consteval bool exit_overload_for_other_backend() noexcept {
  if constexpr (requires(Handler& h, B& v) { h(Exit{}, v); }) return false;
  else return requires(Handler& h, any_vmcs_backend& v) { h(Exit{}, v); };
}
/// The same for `entry_failed(reason, vmcs)`.
template <class Handler, class B>
consteval bool entry_failed_for_other_backend() noexcept {
  if constexpr (requires(Handler& h, B& v, exit_reason_field r) { h.entry_failed(r, v); }) return false;
  else return requires(Handler& h, any_vmcs_backend& v, exit_reason_field r) { h.entry_failed(r, v); };
}

/// Fails to compile (naming Handler, B and Exit in the instantiation context) if the handler
/// has an overload for `Exit` that cannot take backend `B`.
template <class Handler, class B, class Exit>
constexpr void check_exit_overload() noexcept {
  static_assert(!exit_overload_for_other_backend<Handler, B, Exit>(),
                "vmx::dispatch_exit: the handler has an overload for this exit, but it cannot be called with the "
                "VMCS backend being dispatched over (e.g. soft_vmcs& while dispatching over "
                "cached_vmcs<soft_vmcs>); the exit would silently go to unhandled. Take the backend as auto& or "
                "as its exact type.");
}
}  // namespace detail

/// Dispatches an exit whose exit-reason field is `r`.
template <class Handler, vmcs_backend B>
constexpr typename Handler::result_type dispatch_exit(Handler& h, B& vmcs, exit_reason_field r) noexcept {
  if (r.entry_failure()) [[unlikely]] {
    if constexpr (requires { h.entry_failed(r, vmcs); }) {
      return h.entry_failed(r, vmcs);
    } else {
      static_assert(!detail::entry_failed_for_other_backend<Handler, B>(),
                    "vmx::dispatch_exit: the handler's entry_failed cannot be called with the VMCS backend being "
                    "dispatched over; VM-entry failures would silently go to unhandled. Take the backend as auto& "
                    "or as its exact type.");
      return h.unhandled(r, vmcs);
    }
  }
  if constexpr (requires { h(cr_access_exit{}, vmcs); }) {
    if (r.basic() == exit_reason::cr_access) {
      auto q = vmread(vmcs, fields::exit_qualification);
      if (!q) return h.unhandled(r, vmcs);
      return h(cr_access_exit{cr_access_qualification{q.value()}}, vmcs);
    }
  } else {
    detail::check_exit_overload<Handler, B, cr_access_exit>();
  }
  switch (r.basic()) {
#define HVKIT_VMX_DETAIL_CASE(n)                                                     \
  case exit_reason::n:                                                               \
    if constexpr (requires { h(exit_tag<exit_reason::n>{}, vmcs); }) {               \
      return h(exit_tag<exit_reason::n>{}, vmcs);                                    \
    } else {                                                                         \
      detail::check_exit_overload<Handler, B, exit_tag<exit_reason::n>>();           \
      return h.unhandled(r, vmcs);                                                   \
    }
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
