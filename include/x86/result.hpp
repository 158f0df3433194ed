// SPDX-License-Identifier: MIT
/// @file
/// @brief `result<T, E>`: a freestanding value-or-error type with std::expected's names.
///
/// No exceptions, no heap. Accessing value() of an error (or error() of a value) is a
/// contract violation (HVKIT_EXPECTS), never undefined behaviour: the value and the error
/// share one union, and the member that is not active is never read. That check is the one
/// HVKIT_DISABLE_CONTRACTS does not remove: with contracts disabled, such an access executes
/// `__builtin_trap()` instead of calling the violation handler (a read of the inactive member
/// would be undefined behaviour). After a has_value() test (or `if (r)`) the compiler drops
/// the repeated test, so correct code pays nothing for it in either configuration.
/// The accessors are forced inline: in large inlined callers (a nested page walk) GCC
/// otherwise left `*r` as an out-of-line call on the hot path, with the result spilled to
/// memory around it.
#pragma once

#include <type_traits>
#include <utility>

#include "contract.hpp"

/// The guard of result's accessors: HVKIT_EXPECTS, or with contracts disabled a bare trap
/// (never nothing: the alternative is a read of a union's inactive member). In constant
/// evaluation either one is a compile error. #undef'd at the end of this file.
#ifdef HVKIT_DISABLE_CONTRACTS
#define HVKIT_RESULT_EXPECTS(cond) ((cond) ? static_cast<void>(0) : __builtin_trap())
#else
#define HVKIT_RESULT_EXPECTS(cond) HVKIT_EXPECTS(cond)
#endif

namespace hvkit {

/// Wraps an error for construction of a result (like std::unexpected).
template <class E>
class unexpected {
 public:
  constexpr explicit unexpected(E e) noexcept : error_(std::move(e)) {}
  [[nodiscard, gnu::always_inline]] constexpr const E& error() const& noexcept { return error_; }
  [[nodiscard]] constexpr E& error() & noexcept { return error_; }

 private:
  E error_;
};
template <class E>
unexpected(E) -> unexpected<E>;

namespace detail {
/// Tag of result's constructor that default-initializes the value instead of
/// value-initializing it (see result(detail::default_init_t)).
struct default_init_t {
  explicit constexpr default_init_t() noexcept = default;
};
inline constexpr default_init_t default_init{};

/// The value member of result's union: a wrapper only so that the value can start its
/// lifetime default-initialized (a mem-initializer can only value-initialize).
template <class T>
struct result_value {
  T v;
  constexpr result_value() noexcept(std::is_nothrow_default_constructible_v<T>) : v() {}
  constexpr explicit result_value(default_init_t) noexcept {}
  constexpr explicit result_value(const T& x) noexcept : v(x) {}
  constexpr explicit result_value(T&& x) noexcept : v(std::move(x)) {}
};
}  // namespace detail

/// A T or an E, in one discriminated union: `has_` says which member is active, and only
/// that member is ever read (no type punning; HVKIT_RESULT_EXPECTS guards every accessor,
/// contracts enabled or not). T and E must be trivially copyable and
/// trivially destructible (every architectural value is), so the union and the result are
/// too: a copy is a plain copy of the bytes, and the type stays a literal type usable in
/// constant evaluation (each constructor's mem-initializer starts the active member).
template <class T, class E>
class [[nodiscard]] result {
  static_assert(std::is_trivially_destructible_v<T> && std::is_trivially_destructible_v<E>,
                "hvkit::result holds trivially destructible values only");
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_copyable_v<E>,
                "hvkit::result holds trivially copyable values only");
  static_assert(std::is_default_constructible_v<T> && std::is_default_constructible_v<E>,
                "hvkit::result holds default-constructible values only");

 public:
  using value_type = T;
  using error_type = E;

  /// A value-initialized T (as `T{}`).
  constexpr result() noexcept(std::is_nothrow_default_constructible_v<T>) : value_(), has_(true) {}
  /// A default-initialized T (as `T t;`: members without a default member initializer are
  /// indeterminate until written): for a producer that writes every member of the value
  /// before anything reads it and would otherwise pay for clearing it first (the nested
  /// page walk builds its translation in place this way).
  constexpr explicit result(detail::default_init_t d) noexcept : value_(d), has_(true) {}
  constexpr result(const T& v) noexcept : value_(v), has_(true) {}  // NOLINT(google-explicit-constructor)
  constexpr result(T&& v) noexcept : value_(std::move(v)), has_(true) {}  // NOLINT(google-explicit-constructor)
  template <class G>
    requires std::is_convertible_v<const G&, E>
  constexpr result(const unexpected<G>& u) noexcept : error_(u.error()), has_(false) {}  // NOLINT

  [[nodiscard, gnu::always_inline]] constexpr bool has_value() const noexcept { return has_; }
  [[gnu::always_inline]] constexpr explicit operator bool() const noexcept { return has_; }

  [[nodiscard, gnu::always_inline]] constexpr const T& value() const& noexcept {
    HVKIT_RESULT_EXPECTS(has_);
    return value_.v;
  }
  [[nodiscard, gnu::always_inline]] constexpr T& value() & noexcept {
    HVKIT_RESULT_EXPECTS(has_);
    return value_.v;
  }
  [[nodiscard, gnu::always_inline]] constexpr const E& error() const& noexcept {
    HVKIT_RESULT_EXPECTS(!has_);
    return error_;
  }
  [[nodiscard, gnu::always_inline]] constexpr const T& operator*() const& noexcept { return value(); }
  [[nodiscard, gnu::always_inline]] constexpr T& operator*() & noexcept { return value(); }
  [[nodiscard, gnu::always_inline]] constexpr const T* operator->() const noexcept { return &value(); }
  [[nodiscard, gnu::always_inline]] constexpr T* operator->() noexcept { return &value(); }

  /// The value, or `fallback` on error.
  [[nodiscard]] constexpr T value_or(T fallback) const noexcept { return has_ ? value_.v : fallback; }

 private:
  union {
    detail::result_value<T> value_;  ///< active when has_
    E error_;                        ///< active when !has_
  };
  bool has_;
};

/// A success-or-error with no value.
template <class E>
class [[nodiscard]] result<void, E> {
  static_assert(std::is_trivially_destructible_v<E>, "hvkit::result holds trivially destructible values only");

 public:
  using value_type = void;
  using error_type = E;

  constexpr result() noexcept : has_(true) {}
  template <class G>
    requires std::is_convertible_v<const G&, E>
  constexpr result(const unexpected<G>& u) noexcept : error_(u.error()), has_(false) {}  // NOLINT

  [[nodiscard, gnu::always_inline]] constexpr bool has_value() const noexcept { return has_; }
  [[gnu::always_inline]] constexpr explicit operator bool() const noexcept { return has_; }
  [[gnu::always_inline]] constexpr void value() const noexcept { HVKIT_RESULT_EXPECTS(has_); }
  [[nodiscard, gnu::always_inline]] constexpr const E& error() const& noexcept {
    HVKIT_RESULT_EXPECTS(!has_);
    return error_;
  }

 private:
  E error_{};
  bool has_;
};

}  // namespace hvkit

#undef HVKIT_RESULT_EXPECTS
