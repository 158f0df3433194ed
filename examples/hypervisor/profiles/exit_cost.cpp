// SPDX-License-Identifier: MIT
// The exit-cost guest profile (profiles/exit_cost.hpp). Nothing here runs per exit except
// the I/O callback, and that prints only the guest's console bytes (between rows, off the
// measured loops): port 0x700 costs a compare and a return.
#include "exit_cost.hpp"

#include "../console.hpp"
#include "../hv.hpp"

extern "C" const unsigned char exit_cost_blob_start[];
extern "C" const unsigned char exit_cost_blob_end[];
extern "C" std::uint32_t boot_multiboot_info;

namespace hv::exit_cost {

namespace {

constexpr std::uint16_t port_console = 0xE9, port_end = 0xF4;
constexpr std::uint64_t load_gpa = 0x1000000;  // examples/exit-cost/guest/guest.ld

bool io(core::vcpu_state& v, const core::io_access& a, std::uint64_t& value) {
  if (a.in) {
    value = ~0ull;  // no device: all ones, as on a PC
    return true;
  }
  if (a.port == port_console) {
    // Each byte as it comes: the guest writes whole lines between its rows, while the
    // hypervisor prints nothing, so its lines reach the log unbroken.
    console_putc(static_cast<char>(value & 0xFF));
    return true;
  }
  if (a.port == port_end) {
    v.status = core::run_status::done;
    return false;
  }
  return true;  // port 0x700 and any other: discarded
}

}  // namespace

constinit const core::guest_profile profile{"exit_cost", exit_cost_blob_start, exit_cost_blob_end, load_gpa, 0, io};

bool requested() {
  // Multiboot information (Multiboot 0.6.96, 3.3): flags bit 2, the command line at +16.
  const std::uint64_t mbi = ::boot_multiboot_info;
  if (::boot_multiboot_magic != 0x2BADB002 || mbi == 0) return false;
  if (!(*reinterpret_cast<const volatile std::uint32_t*>(mbi) & (1u << 2))) return false;
  const char* s = reinterpret_cast<const char*>(
      static_cast<std::uint64_t>(*reinterpret_cast<const volatile std::uint32_t*>(mbi + 16)));
  constexpr char word[] = "exit-cost";
  for (const char* w = s; *w; ++w) {
    if (w != s && w[-1] != ' ') continue;
    unsigned i = 0;
    while (word[i] && w[i] == word[i]) ++i;
    if (!word[i] && (w[i] == '\0' || w[i] == ' ')) return true;
  }
  return false;
}

}  // namespace hv::exit_cost
