// SPDX-License-Identifier: MIT
/// @file
/// @brief Guest-owned CR bits on SVM: the x86::guest_owned_set policy expressed as CR
/// intercept settings, and keeping the MMU role in step with what the guest may change
/// without a #VMEXIT.
///
/// SVM has no CR0/CR4 guest/host masks and no read shadows (VMX: SDM 25.6.6). Ownership is
/// which CR accesses are intercepted (AMD APM Vol. 2, 15.9 "Instruction Intercepts", 15.9.1
/// "Selective CR0 Write Intercept"): a CR write is intercepted entirely or not at all, except
/// for CR0, where the selective intercept exits only on writes that change a bit other than
/// CR0.TS and CR0.MP (MOV CR0 and LMSW). So the granularity for CR0 is: nothing guest-owned
/// (write intercept), {TS, MP} (selective intercept), or everything (no intercept); for CR4:
/// nothing or everything. And because a guest read of an unintercepted CR returns the real
/// value, host-owned bits whose real value differs from the guest's (shadow paging forces
/// CR0.PG and CR0.WP to 1) need the read intercept too.
///
/// The mapping from the same policies as VMX (the policy is an x86::guest_owned_set, so a
/// policy handing out an MMU-role bit other than CR0.WP still does not compile):
/// - CR0.WP guest-owned (only with nested paging) -> no CR0 write intercept: every CR0 bit is
///   then guest-writable without an exit, which adds CR0.PG to the role bits the guest
///   changes behind the hypervisor's back. sync_cr0_role() keeps the contract: WP is
///   refreshed in O(1) exactly as paging::mmu_context::refresh_passthrough_bits() does, and a
///   changed PG (a different paging mode) rebuilds the role. The static_asserts below prove
///   that these two are the only role bits the no-intercept setting exposes.
/// - CR0.TS guest-owned -> the selective CR0 write intercept (CR0.MP becomes guest-writable
///   with it; it feeds no role), with nested paging only. The selective intercept compares the
///   written value with the real CR0 (15.9.1: a write "that changes" a bit other than TS or
///   MP), and shadow paging runs the guest with the real CR0.WP forced to 1: a guest that
///   believes WP = 0 and writes WP = 1 (TS or not) changes nothing in the real CR0 and would
///   not exit, so the shadow MMU would keep the WP = 0 role. Under shadow paging every CR0
///   write is intercepted.
/// - CR4 bits guest-owned -> not expressible without exposing role bits (PAE, PSE, SMEP,
///   SMAP, PKE, LA57, ...): CR4 writes stay intercepted and no CR4 bit is guest-owned.
#pragma once

#include <cstdint>

#include "intercepts.hpp"
#include "vmcb.hpp"
#include "../paging/mmu.hpp"
#include "../paging/role_sync.hpp"
#include "../paging/role.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"
#include "../x86/guest_owned.hpp"

namespace hvkit::svm {

/// How guest writes of CR0 are intercepted.
enum class cr0_write_intercept : std::uint8_t {
  all,        ///< CR0 write intercept (exit code 10h): every write exits
  selective,  ///< selective CR0 write intercept (65h): writes changing bits other than TS/MP exit
  none,       ///< no exit on any CR0 write
};

/// CR0 bits a guest may change without an exit under each setting (15.9.1).
[[nodiscard]] constexpr x86::cr0 cr0_guest_writable(cr0_write_intercept w) noexcept {
  switch (w) {
    case cr0_write_intercept::all: return x86::cr0{};
    case cr0_write_intercept::selective: return x86::cr0::ts | x86::cr0::mp;
    case cr0_write_intercept::none: return x86::cr0::defined;
  }
  return x86::cr0{};
}

/// The role bits the hypervisor must re-read from the VMCB's CR0 under each setting: exactly
/// role bits & guest-writable bits.
[[nodiscard]] constexpr x86::cr0 cr0_passthrough_role_bits(cr0_write_intercept w) noexcept {
  return x86::cr0_mmu_role_bits & cr0_guest_writable(w);
}
// The invariant behind sync_cr0_role(): the selective intercept exposes no role bit, and no
// intercept exposes exactly CR0.PG and CR0.WP (WP refreshed in O(1), PG by a rebuild).
static_assert(cr0_passthrough_role_bits(cr0_write_intercept::all).none());
static_assert(cr0_passthrough_role_bits(cr0_write_intercept::selective).none());
static_assert(cr0_passthrough_role_bits(cr0_write_intercept::none) == (x86::cr0::pg | x86::cr0::wp));
// The bits the selective intercept lets through (TS, MP) flush no TLB entries, reload no PDPTEs
// and feed no role (SDM 4.10.4.1, 4.4.1).
static_assert((cr0_guest_writable(cr0_write_intercept::selective) &
               (x86::cr0_tlb_flush_bits | x86::cr0_pdpte_reload_bits | x86::cr0_mmu_role_bits)).none());

/// What the CR intercept settings may depend on at run time.
struct cr_intercept_features {
  /// Nested paging on: CR0.WP may be guest-owned and the real CR0 is the guest's. With shadow
  /// paging the shadow tables encode WP, and the real CR0.PG/WP are forced to 1 (so CR0 reads
  /// and writes are intercepted).
  bool npt = false;
};

/// The CR intercepts that express a policy, and the bits the guest then owns on SVM.
struct cr_intercepts {
  bool cr0_read = true;
  cr0_write_intercept cr0_write = cr0_write_intercept::all;
  bool cr4_read = true;
  bool cr4_write = true;
  /// The CR0 bits the policy asked for that SVM can grant (the rest stay intercepted).
  x86::cr0 cr0_owned{};
  /// Every CR0 bit the guest can change without an exit (a superset of cr0_owned).
  x86::cr0 cr0_writable{};
  /// CR4: never guest-owned on SVM (see the file comment).
  x86::cr4 cr4_owned{};
  friend constexpr bool operator==(const cr_intercepts&, const cr_intercepts&) noexcept = default;

  /// Write the CR0/CR4 read, write and selective intercept bits into an intercept set
  /// (other CRs untouched).
  constexpr void apply(intercept_set& s) const noexcept {
    s.set(cr_read(0), cr0_read);
    s.set(cr_write(0), cr0_write == cr0_write_intercept::all);
    s.set(intercept::cr0_selective_write, cr0_write == cr0_write_intercept::selective);
    s.set(cr_read(4), cr4_read);
    s.set(cr_write(4), cr4_write);
  }
  /// The same, in a VMCB.
  template <vmcb_memory M>
  constexpr void apply(M& m) const noexcept {
    auto s = intercept_set::load(m);
    apply(s);
    s.store(m);
  }
};

/// The SVM intercepts for `Policy` (an x86::guest_owned_set, default the widest) under `f`.
/// CR0.WP is guest-owned only with nested paging; CR0.TS whenever the policy has it.
template <class Policy = x86::max_guest_owned>
[[nodiscard]] constexpr cr_intercepts make_cr_intercepts(cr_intercept_features f) noexcept {
  cr_intercepts r{};
  const x86::cr0 want =
      Policy::cr0_bits & x86::guest_ownable_cr0(f.npt ? x86::paging_kind::two_dimensional : x86::paging_kind::shadow);
  if (want.test(x86::cr0::wp)) {
    r.cr0_write = cr0_write_intercept::none;
  } else if (want.test(x86::cr0::ts) && f.npt) {
    // Not under shadow paging: the real CR0.WP (1) differs from the guest's (file comment).
    r.cr0_write = cr0_write_intercept::selective;
  }
  r.cr0_writable = cr0_guest_writable(r.cr0_write);
  r.cr0_owned = want & r.cr0_writable;
  r.cr0_read = !f.npt;
  r.cr4_read = !f.npt;
  r.cr4_write = true;
  return r;
}

/// The role refresh when CR0 writes do not exit is vendor-neutral (paging/role_sync.hpp);
/// its names are kept here for SVM code.
using paging::role_sync;
using paging::sync_cr0_role;

}  // namespace hvkit::svm
