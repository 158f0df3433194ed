// SPDX-License-Identifier: MIT
/// @file
/// @brief The guest_memory concept the walkers read page tables through, a bounds-checked
/// flat view over a host buffer, and an adapter for user callbacks.
///
/// A walker never touches memory directly: it calls `read32`/`read64` (fallible: memory
/// that is not backed is a typed error, never an out-of-range read) and, to set accessed and
/// dirty flags, `cmpxchg32`/`cmpxchg64`. A type that only models `guest_memory` (a memory
/// dump, say) is read-only: the walkers then never update A/D flags. A type that also models
/// `writable_guest_memory` gets A/D updates unless the walk request switches them off.
///
/// Addresses are in the address space the memory object exposes: guest-physical for a
/// single-stage walk, the output space of the second stage (L1 guest-physical or host-
/// physical) for the memory behind an EPT walk.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "../x86/address.hpp"
#include "../x86/result.hpp"

namespace hvkit::paging {

/// Why a guest-memory access failed.
enum class memory_error : std::uint8_t {
  none = 0,
  unbacked,   ///< no memory behind (part of) the address
  read_only,  ///< a compare-exchange on memory that cannot be written
};

/// Readable guest memory: 4- and 8-byte little-endian reads at a physical address.
template <class M>
concept guest_memory = requires(const M& m, x86::gpa a) {
  { m.read32(a) } -> std::same_as<result<std::uint32_t, memory_error>>;
  { m.read64(a) } -> std::same_as<result<std::uint64_t, memory_error>>;
};

/// Guest memory the walker may update A/D flags in: compare-exchange returns true if the
/// value at `a` was `expected` and is now `desired`, false if it held something else.
template <class M>
concept writable_guest_memory =
    guest_memory<M> && requires(M& m, x86::gpa a, std::uint32_t e32, std::uint64_t e64) {
      { m.cmpxchg32(a, e32, e32) } -> std::same_as<result<bool, memory_error>>;
      { m.cmpxchg64(a, e64, e64) } -> std::same_as<result<bool, memory_error>>;
    };

namespace detail {
template <class T>
[[nodiscard]] constexpr T load_le(const std::uint8_t* p) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (!std::is_constant_evaluated()) {  // one load instead of a byte loop
      T v;
      __builtin_memcpy(&v, p, sizeof(T));
      return v;
    }
  }
  T v = 0;
  for (unsigned i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}
template <class T>
constexpr void store_le(std::uint8_t* p, T v) noexcept {
  for (unsigned i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
}  // namespace detail

/// A bounds-checked view of guest memory held in one host buffer, the byte at `data[0]`
/// being guest-physical address `base`. `Byte` is `const std::uint8_t` for a read-only
/// view (no A/D updates) or `std::uint8_t` for a writable one.
template <class Byte>
class basic_flat_memory {
  static_assert(std::is_same_v<std::remove_const_t<Byte>, std::uint8_t>, "a flat view is over bytes");

 public:
  static constexpr bool writable = !std::is_const_v<Byte>;

  constexpr basic_flat_memory() noexcept = default;
  /// `size` bytes at `data`, mapped at guest-physical `base`.
  constexpr basic_flat_memory(Byte* data, std::size_t size, x86::gpa base = x86::gpa{0}) noexcept
      : data_(data), size_(size), base_(base), end4_(size >= 4 ? size - 3 : 0), end8_(size >= 8 ? size - 7 : 0) {}

  [[nodiscard]] constexpr x86::gpa base() const noexcept { return base_; }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }

  /// True if the `n` bytes at `a` lie inside the buffer (no wrap-around): an address below
  /// the base wraps to an offset >= size.
  [[nodiscard]] constexpr bool contains(x86::gpa a, std::size_t n) const noexcept {
    const std::uint64_t off = a.value() - base_.value();
    return off < size_ && size_ - off >= n;
  }

  [[nodiscard, gnu::always_inline]] constexpr result<std::uint32_t, memory_error> read32(x86::gpa a) const noexcept {
    const std::uint64_t off = a.value() - base_.value();
    if (!fits<4>(off)) return unexpected(memory_error::unbacked);
    return detail::load_le<std::uint32_t>(data_ + off);
  }
  [[nodiscard, gnu::always_inline]] constexpr result<std::uint64_t, memory_error> read64(x86::gpa a) const noexcept {
    const std::uint64_t off = a.value() - base_.value();
    if (!fits<8>(off)) return unexpected(memory_error::unbacked);
    return detail::load_le<std::uint64_t>(data_ + off);
  }

  /// read32()/read64() as a test with an out parameter: what the walkers use on their hot
  /// path (no result object whose flag the compiler keeps beside the branch).
  template <class T>
    requires(std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>)
  [[nodiscard, gnu::always_inline]] constexpr bool try_read(x86::gpa a, T& out) const noexcept {
    const std::uint64_t off = a.value() - base_.value();
    if (!fits<sizeof(T)>(off)) [[unlikely]] return false;
    out = detail::load_le<T>(data_ + off);
    return true;
  }

  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg32(x86::gpa a, std::uint32_t expected,
                                                               std::uint32_t desired) noexcept
    requires writable
  {
    return cas<std::uint32_t>(a, expected, desired);
  }
  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg64(x86::gpa a, std::uint64_t expected,
                                                               std::uint64_t desired) noexcept
    requires writable
  {
    return cas<std::uint64_t>(a, expected, desired);
  }

 private:
  // contains() for the entry sizes, one compare against the precomputed end offset.
  template <std::size_t N>
  [[nodiscard, gnu::always_inline]] constexpr bool fits(std::uint64_t off) const noexcept {
    static_assert(N == 4 || N == 8);
    return off < (N == 4 ? end4_ : end8_);
  }

  template <class T>
  [[nodiscard]] constexpr result<bool, memory_error> cas(x86::gpa a, T expected, T desired) noexcept {
    const std::uint64_t off = a.value() - base_.value();
    if (!fits<sizeof(T)>(off)) return unexpected(memory_error::unbacked);
    std::uint8_t* p = data_ + off;
    // An aligned entry is updated atomically, as the processor does (SDM 4.8: the A/D
    // update is a locked operation); constant evaluation and unaligned host buffers use
    // plain byte accesses.
    if (!std::is_constant_evaluated() && reinterpret_cast<std::uintptr_t>(p) % sizeof(T) == 0) {
      T exp = expected;
      return __atomic_compare_exchange_n(reinterpret_cast<T*>(p), &exp, desired, false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST);
    }
    if (detail::load_le<T>(p) != expected) return false;
    detail::store_le<T>(p, desired);
    return true;
  }

  Byte* data_ = nullptr;
  std::size_t size_ = 0;
  x86::gpa base_{};
  // One past the last offset at which 4 (8) bytes fit, 0 if none do: a walk's entry reads
  // are then one subtraction and one compare (an address below the base wraps to an offset
  // that is never below these).
  std::size_t end4_ = 0;
  std::size_t end8_ = 0;
};

/// A read-only flat view (memory dumps): walks through it never set A/D flags.
using flat_view = basic_flat_memory<const std::uint8_t>;
/// A writable flat view: walks may set A/D flags.
using flat_memory = basic_flat_memory<std::uint8_t>;

static_assert(guest_memory<flat_view> && !writable_guest_memory<flat_view>);
static_assert(writable_guest_memory<flat_memory>);

namespace detail {
/// Reads the `T` (std::uint32_t or std::uint64_t) at `a` into `out`; false if `a` is not
/// backed. The walkers' entry read: a flat view's try_read(), else read32()/read64().
template <class T, class M>
[[nodiscard, gnu::always_inline]] constexpr bool read_entry(const M& m, x86::gpa a, T& out) noexcept {
  if constexpr (requires { m.try_read(a, out); }) {
    return m.try_read(a, out);
  } else {
    const auto v = [&] {
      if constexpr (sizeof(T) == 4) {
        return m.read32(a);
      } else {
        return m.read64(a);
      }
    }();
    if (!v) [[unlikely]] return false;
    out = *v;
    return true;
  }
}
}  // namespace detail

/// Read-only guest memory over a user callable, with static dispatch (the callable is stored
/// by value and called directly). `Read` is
/// `(x86::gpa a, unsigned bytes, std::uint64_t& out) -> bool` with `bytes` 4 or 8: it stores
/// the little-endian value zero-extended in `out` and returns false if `a` is not backed.
template <class Read>
class callback_view {
 public:
  constexpr explicit callback_view(Read r) noexcept : read_(std::move(r)) {}
  [[nodiscard]] constexpr result<std::uint32_t, memory_error> read32(x86::gpa a) const noexcept {
    std::uint64_t v = 0;
    if (!read_(a, 4u, v)) return unexpected(memory_error::unbacked);
    return static_cast<std::uint32_t>(v);
  }
  [[nodiscard]] constexpr result<std::uint64_t, memory_error> read64(x86::gpa a) const noexcept {
    std::uint64_t v = 0;
    if (!read_(a, 8u, v)) return unexpected(memory_error::unbacked);
    return v;
  }

 protected:
  Read read_;
};

/// Writable guest memory over user callables: `Read` as for callback_view, and `Cas`
/// `(x86::gpa a, unsigned bytes, std::uint64_t expected, std::uint64_t desired) ->
/// hvkit::result<bool, memory_error>` (true if the value was exchanged).
template <class Read, class Cas>
class callback_memory : public callback_view<Read> {
 public:
  constexpr callback_memory(Read r, Cas c) noexcept : callback_view<Read>(std::move(r)), cas_(std::move(c)) {}
  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg32(x86::gpa a, std::uint32_t e, std::uint32_t d) noexcept {
    return cas_(a, 4u, std::uint64_t{e}, std::uint64_t{d});
  }
  [[nodiscard]] constexpr result<bool, memory_error> cmpxchg64(x86::gpa a, std::uint64_t e, std::uint64_t d) noexcept {
    return cas_(a, 8u, e, d);
  }

 private:
  Cas cas_;
};

/// Read-only guest memory from a read callable.
template <class Read>
[[nodiscard]] constexpr callback_view<Read> make_callback_memory(Read r) noexcept {
  return callback_view<Read>(std::move(r));
}
/// Writable guest memory from a read and a compare-exchange callable.
template <class Read, class Cas>
[[nodiscard]] constexpr callback_memory<Read, Cas> make_callback_memory(Read r, Cas c) noexcept {
  return callback_memory<Read, Cas>(std::move(r), std::move(c));
}

}  // namespace hvkit::paging
