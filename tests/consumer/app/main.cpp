#include <x86/cr.hpp>
#include <x86/cr3.hpp>
#include <x86/paging_mode.hpp>

#include <cstdio>

namespace x86 = hvkit::x86;

int main() {
  constexpr auto mode = x86::paging_mode_of(x86::cr0{0x80010033}, x86::cr4{0x20}, x86::efer{0x500});
  static_assert(mode == x86::paging_mode::four_level);
  const auto root = x86::cr3_root(x86::cr3{0x1234'5018}, mode, 46);
  if (root.value() != 0x1234'5000) return 1;
  std::printf("consumer ok: 4-level root 0x%llx\n", static_cast<unsigned long long>(root.value()));
  return 0;
}
