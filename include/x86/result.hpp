// SPDX-License-Identifier: MIT
/// @file
/// @brief `result<T, E>`: a freestanding value-or-error type with std::expected's names.
///
/// No exceptions, no heap. Accessing value() of an error (or error() of a value) is a
/// contract violation (HVKIT_EXPECTS), never undefined behaviour. The accessors are forced
/// inline: in large inlined callers (a nested page walk) GCC otherwise left `*r` as an
/// out-of-line call on the hot path, with the result spilled to memory around it.
#pragma once

#include <type_traits>
#include <utility>

#include "contract.hpp"

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

/// A T or an E. T and E must be trivially destructible (every architectural value is), so
/// the type stays a literal type usable in constant evaluation without a union.
template <class T, class E>
class [[nodiscard]] result {
  static_assert(std::is_trivially_destructible_v<T> && std::is_trivially_destructible_v<E>,
                "hvkit::result holds trivially destructible values only");
  static_assert(std::is_default_constructible_v<T> && std::is_default_constructible_v<E>,
                "hvkit::result holds default-constructible values only");

 public:
  using value_type = T;
  using error_type = E;

  constexpr result() noexcept(std::is_nothrow_default_constructible_v<T>) : has_(true) {}
  constexpr result(const T& v) noexcept : value_(v), has_(true) {}  // NOLINT(google-explicit-constructor)
  constexpr result(T&& v) noexcept : value_(std::move(v)), has_(true) {}  // NOLINT(google-explicit-constructor)
  template <class G>
    requires std::is_convertible_v<const G&, E>
  constexpr result(const unexpected<G>& u) noexcept : error_(u.error()), has_(false) {}  // NOLINT

  [[nodiscard, gnu::always_inline]] constexpr bool has_value() const noexcept { return has_; }
  [[gnu::always_inline]] constexpr explicit operator bool() const noexcept { return has_; }

  [[nodiscard, gnu::always_inline]] constexpr const T& value() const& noexcept {
    HVKIT_EXPECTS(has_);
    return value_;
  }
  [[nodiscard, gnu::always_inline]] constexpr T& value() & noexcept {
    HVKIT_EXPECTS(has_);
    return value_;
  }
  [[nodiscard, gnu::always_inline]] constexpr const E& error() const& noexcept {
    HVKIT_EXPECTS(!has_);
    return error_;
  }
  [[nodiscard, gnu::always_inline]] constexpr const T& operator*() const& noexcept { return value(); }
  [[nodiscard, gnu::always_inline]] constexpr T& operator*() & noexcept { return value(); }
  [[nodiscard, gnu::always_inline]] constexpr const T* operator->() const noexcept { return &value(); }
  [[nodiscard, gnu::always_inline]] constexpr T* operator->() noexcept { return &value(); }

  /// The value, or `fallback` on error.
  [[nodiscard]] constexpr T value_or(T fallback) const noexcept { return has_ ? value_ : fallback; }

 private:
  T value_{};
  E error_{};
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
  [[gnu::always_inline]] constexpr void value() const noexcept { HVKIT_EXPECTS(has_); }
  [[nodiscard, gnu::always_inline]] constexpr const E& error() const& noexcept {
    HVKIT_EXPECTS(!has_);
    return error_;
  }

 private:
  E error_{};
  bool has_;
};

}  // namespace hvkit
