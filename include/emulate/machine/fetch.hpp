// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's front end: fetch the instruction bytes at CS:RIP through the
/// guest's paging (execute access, at most 15 bytes, split at page boundaries) and decode them.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "core.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_fetch : protected machine_core<T, R, P> {
 protected:
  using base = machine_core<T, R, P>;
  using base::base;
  using base::gp0;
  using base::ud;
  using base::map;
  using base::needs;
  using base::ctx_;
  using base::ram_;

  // ---------------------------------------------------------------- fetch
  constexpr outcome fetch_decode(instruction& in) noexcept {
    const code_size cs = ctx_.code();
    const bool long_mode = ctx_.mode() == cpu_mode::long64;
    std::uint64_t avail = max_instruction_length;
    if (!long_mode) {
      const segment& c = ctx_[sreg::cs];
      if (ctx_.rip > c.limit) return gp0();
      const std::uint64_t room = std::uint64_t{c.limit} - ctx_.rip + 1;
      if (room < avail) avail = room;
    }
    const auto lin = linearize(ctx_, sreg::cs, ctx_.rip, 1, segment_access::execute);
    if (!lin) return gp0();
    std::array<std::uint8_t, max_instruction_length> bytes{};
    std::uint64_t have = 0;
    pfec access = pfec::fetch;
    if (ctx_.effective_cpl() == 3) access.set(pfec::user);
    while (true) {
      // Fetch up to the page end (or the limit), decode; fetch the next page only if the
      // instruction needs it, so a fault on it is reported only then (SDM 6.15 #PF).
      const std::uint64_t at = lin->value() + have;
      const std::uint64_t to_page_end = x86::page_size_4k - (at & 0xfff);
      std::uint64_t n = avail - have;
      if (n > to_page_end) n = to_page_end;
      auto m = map(gva{long_mode ? at : (at & 0xffff'ffffu)}, static_cast<unsigned>(n), access, false);
      if (!m) return m.error();
      if (!ram_.read(m->address[0], bytes.data() + have, static_cast<std::size_t>(n)))
        return outcome::make_unsupported(unsupported_reason::fetch_not_ram);
      have += n;
      const auto d = decode(bytes.data(), static_cast<std::size_t>(have), cs);
      if (d) {
        in = *d;
        break;
      }
      switch (d.error()) {
        case decode_error::truncated:
          if (have < avail) continue;
          return gp0();  // the instruction runs past the CS limit (SDM 6.15, #GP)
        case decode_error::too_long: return gp0();  // SDM 2.3.11
        case decode_error::invalid: return ud();
        case decode_error::unsupported: return outcome::make_unsupported(unsupported_reason::instruction);
      }
    }
    return outcome::make_done();
  }

};

}  // namespace hvkit::emulate::detail
