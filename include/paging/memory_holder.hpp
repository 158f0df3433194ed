// SPDX-License-Identifier: MIT
/// @file
/// @brief How a walker holds its guest_memory during one walk: a flat view by value (three
/// words the compiler keeps in registers), any other memory type by pointer (it may hold
/// state, or be expensive to copy).
#pragma once

#include <type_traits>

#include "guest_memory.hpp"

namespace hvkit::paging::detail {

template <class M>
struct is_flat_memory : std::false_type {};
template <class B>
struct is_flat_memory<basic_flat_memory<B>> : std::true_type {};

/// Pointer-like access to the memory of one walk.
template <class M>
struct memory_holder {
  M* p;
  constexpr explicit memory_holder(M* m) noexcept : p(m) {}
  constexpr M* operator->() const noexcept { return p; }
  constexpr M& operator*() const noexcept { return *p; }
};
template <class M>
  requires is_flat_memory<std::remove_const_t<M>>::value
struct memory_holder<M> {
  std::remove_const_t<M> v;
  constexpr explicit memory_holder(M* m) noexcept : v(*m) {}
  constexpr const std::remove_const_t<M>* operator->() const noexcept { return &v; }
  constexpr std::remove_const_t<M>* operator->() noexcept { return &v; }
  constexpr const std::remove_const_t<M>& operator*() const noexcept { return v; }
};

}  // namespace hvkit::paging::detail
