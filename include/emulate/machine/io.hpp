// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator machine's port I/O: IN and OUT with the I/O permission check (IOPL, the
/// TSS I/O permission bit map, SDM Vol. 1 19.5), device accesses through the platform.
/// A layer of detail::machine (emulate/emulator.hpp): internal, no API of its own.
#pragma once

#include "segment_load.hpp"

namespace hvkit::emulate::detail {

template <translator T, guest_ram R, platform P>
class machine_io : protected machine_segments<T, R, P> {
 protected:
  using base = machine_segments<T, R, P>;
  using base::base;
  using base::gp0;
  using base::map;
  using base::device_access;
  using base::needs;
  using base::read_system;
  using base::gpr;
  using base::set_gpr;
  using base::alu_mask;
  using base::done;
  using base::ctx_;

  /// The I/O permission check (SDM Vol. 1 19.5 (I/O privilege level), 19.5.2 (I/O
  /// permission bit map)): needed in protected mode when CPL > IOPL, and always in
  /// virtual-8086 mode. The TSS reads are implicit supervisor reads.
  constexpr result<void, outcome> io_permitted(std::uint16_t port, unsigned size) noexcept {
    if (ctx_.mode() == cpu_mode::real) return {};
    if (ctx_.mode() != cpu_mode::vm86 && ctx_.effective_cpl() <= ctx_.rflags.iopl_value()) return {};
    const segment& tr = ctx_.tr;
    const std::uint8_t type = tr.ar.type();
    if ((type != system_type::tss_available && type != system_type::tss_busy) || tr.limit < 0x67)
      return unexpected(gp0());
    auto map_base = read_system(tr.base + 0x66, 2);  // the I/O map base address (TSS offset 66H)
    if (!map_base) return unexpected(map_base.error());
    const std::uint64_t off = *map_base + port / 8;
    if (off + 1 > tr.limit) return unexpected(gp0());
    auto bits = read_system(tr.base + off, 2);
    if (!bits) return unexpected(bits.error());
    const std::uint64_t want = ((std::uint64_t{1} << size) - 1) << (port & 7);
    if ((*bits & want) != 0) return unexpected(gp0());
    return {};
  }

  constexpr result<std::uint64_t, outcome> port_in(std::uint16_t port, unsigned size) noexcept {
    std::uint64_t v = 0;
    if (device_access(completion::kind::pio, port, size, false, v)) return v & alu_mask(size);
    outcome o;
    o.kind = outcome_kind::needs_io;
    o.address = port;
    o.size = static_cast<std::uint8_t>(size);
    return unexpected(needs(o));
  }
  constexpr result<void, outcome> port_out(std::uint16_t port, unsigned size, std::uint64_t v) noexcept {
    std::uint64_t out = v & alu_mask(size);
    if (device_access(completion::kind::pio, port, size, true, out)) return {};
    outcome o;
    o.kind = outcome_kind::needs_io;
    o.address = port;
    o.size = static_cast<std::uint8_t>(size);
    o.write = true;
    o.value = v & alu_mask(size);
    return unexpected(needs(o));
  }

  constexpr outcome port_op(const instruction& in) noexcept {
    const bool is_in = in.op == mnemonic::in;
    const operand& port_operand = is_in ? in.src : in.dst;
    const std::uint16_t port = port_operand.kind == operand_kind::imm ? static_cast<std::uint16_t>(in.imm & 0xff)
                                                                      : static_cast<std::uint16_t>(ctx_.gpr[2]);
    const unsigned size = in.operand_size;
    if (auto r = io_permitted(port, size); !r) return r.error();
    if (is_in) {
      auto v = port_in(port, size);
      if (!v) return v.error();
      set_gpr(0, size, false, *v);
    } else {
      if (auto r = port_out(port, size, ctx_.gpr[0]); !r) return r.error();
    }
    return done();
  }

};

}  // namespace hvkit::emulate::detail
