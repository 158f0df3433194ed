// SPDX-License-Identifier: MIT
// Guest memory whose compare-exchange does not succeed, for the walkers' A/D-update tests
// (walk_golden_test.cpp: EPT; walk_adopt_test.cpp: NPT and the guest's entries through NPT).
// The walkers' contract (file comment of paging/walker.hpp): the A/D writes are
// compare-exchanges; when an entry changed in between, the walk is redone (at most
// paging::max_ad_retries times), then the walk gives up with retry_exhausted; memory that
// refuses the write is an unbacked fault at that entry. Reads go to the image unchanged.
#pragma once

#include <cstdint>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/x86/address.hpp>
#include <hvkit/x86/result.hpp>

namespace test_support {

struct racing_memory {
  enum class how {
    refuse,       ///< every compare-exchange fails with memory_error::unbacked
    lose,         ///< every compare-exchange is lost (the entry keeps changing): false
    other_agent,  ///< another CPU writes the desired value first: false, memory updated
    vanish,       ///< another CPU clears bit 0 (P of a paging or NPT entry) first: false
  };
  hvkit::paging::flat_memory inner;
  how mode = how::refuse;
  unsigned cas = 0;  ///< compare-exchanges attempted

  [[nodiscard]] hvkit::result<std::uint32_t, hvkit::paging::memory_error> read32(hvkit::x86::gpa a) const {
    return inner.read32(a);
  }
  [[nodiscard]] hvkit::result<std::uint64_t, hvkit::paging::memory_error> read64(hvkit::x86::gpa a) const {
    return inner.read64(a);
  }
  hvkit::result<bool, hvkit::paging::memory_error> cmpxchg32(hvkit::x86::gpa a, std::uint32_t e, std::uint32_t d) {
    return race(a, e, d);
  }
  hvkit::result<bool, hvkit::paging::memory_error> cmpxchg64(hvkit::x86::gpa a, std::uint64_t e, std::uint64_t d) {
    return race(a, e, d);
  }

 private:
  template <class V>
  hvkit::result<bool, hvkit::paging::memory_error> race(hvkit::x86::gpa a, V e, V d) {
    ++cas;
    const auto other = [&](V v) {
      if constexpr (sizeof(V) == 4) {
        static_cast<void>(inner.cmpxchg32(a, e, v));
      } else {
        static_cast<void>(inner.cmpxchg64(a, e, v));
      }
    };
    switch (mode) {
      case how::refuse: return hvkit::unexpected(hvkit::paging::memory_error::unbacked);
      case how::lose: return false;
      case how::other_agent: other(d); return false;
      case how::vanish: other(static_cast<V>(e & ~V{1})); return false;
    }
    return false;
  }
};
static_assert(hvkit::paging::writable_guest_memory<racing_memory>);

}  // namespace test_support
