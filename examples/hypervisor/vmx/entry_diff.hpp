// SPDX-License-Identifier: MIT
/// @file
/// @brief What the VM-entry differential's two files share (vmx/entry_diff.cpp: the baseline
/// VMCS, VMLAUNCH, the Bochs and KVM models, the run; vmx/entry_mutations.cpp: the
/// mutations). Internal to examples/hypervisor/vmx.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hvkit/vmx/vm_entry_checks.hpp>

#include "../hv.hpp"

namespace hv {

namespace v = hvkit::vmx;

namespace entry_detail {

// ---- entry_diff.cpp ----------------------------------------------------------------------
extern std::uint8_t link_page[4096];      ///< a VMCS-shaped page for the link pointer
extern std::uint8_t vapic_page[4096];     ///< virtual-APIC page
extern std::uint64_t msr_page[512];       ///< VM-entry MSR-load area
extern std::uint64_t exit_msr_page[512];  ///< VM-exit MSR-store/load area
std::uint64_t rnd();
unsigned rnd_below(unsigned n);
template <class T, std::size_t N>
T pick(const T (&a)[N]) {
  return a[rnd_below(N)];
}
std::uint64_t rd(std::uint32_t enc);
void wr(std::uint32_t enc, std::uint64_t val);

// ---- entry_mutations.cpp -------------------------------------------------------------------
enum probe_kind : unsigned { probe_none, probe_rtm, probe_error_code, probe_count };
extern const char* const probe_name[probe_count];
struct mutation_log {
  static constexpr unsigned max = 8;
  std::uint32_t enc[max]{};
  std::uint64_t val[max]{};
  unsigned n = 0;
  bool host = false;        // touched the host-state area or the host address-space size
  bool activity_risk = false;
  unsigned probe = 0;       // a targeted case of issue 25 (probe_rtm, probe_error_code), counted apart
};
extern mutation_log mlog;
void put(std::uint32_t enc, std::uint64_t val);
constexpr std::uint32_t sel_enc(unsigned s) { return 0x0800 + 2 * s; }
constexpr std::uint32_t base_enc(unsigned s) { return 0x6806 + 2 * s; }
constexpr std::uint32_t limit_enc(unsigned s) { return 0x4800 + 2 * s; }
constexpr std::uint32_t ar_enc(unsigned s) { return 0x4814 + 2 * s; }
constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }
/// One to three random mutations of the current VMCS (or a targeted case).
void mutate_once();

}  // namespace entry_detail
}  // namespace hv
