// SPDX-License-Identifier: MIT
/// @file
/// @brief Completing an instruction the hypervisor emulated after a #VMEXIT on SVM: RIP
/// advanced (to nRIP when the processor saved it, else by the decoded length in the width of
/// the code segment), the interrupt shadow ended, and a single-step trap delivered when
/// RFLAGS.TF = 1.
///
/// The shared rules are x86/instruction_skip.hpp. What is SVM's own:
/// - nRIP (VMCB 0C8h) is the address of the next instruction for the intercepts that save it
///   (CPUID Fn8000_000A EDX[3], APM Vol. 2 15.7.1 "State Saved on Exit");
/// - the code segment's L and D/B bits are bits 9 and 10 of the VMCB segment attributes (the
///   descriptor's bits 55:52 in attribute bits 11:8, APM 15.5.1 "VMCB segment descriptor");
/// - the interrupt shadow is bit 0 of VMCB 068h (15.21.5 "Interrupt Shadows");
/// - there is no pending-debug-exceptions field: the single-step trap is injected as #DB with
///   DR6.BS set (VMCB DR6, 568h), merged with any event already in EVENTINJ.
#pragma once

#include <cstdint>

#include "controls.hpp"
#include "event_injection.hpp"
#include "vmcb.hpp"
#include "vmcb_fields.hpp"
#include "../x86/efer.hpp"
#include "../x86/instruction_skip.hpp"

namespace hvkit::svm {

/// The code width from the VMCB's EFER and CS attributes.
template <vmcb_memory M>
[[nodiscard]] constexpr x86::ip_width ip_width_of(const M& m) noexcept {
  const auto attrib = read(m, fields::cs_attrib);
  return x86::ip_width_of(read_typed(m, fields::efer).test(x86::efer::lma), ((attrib >> 9) & 1u) != 0,
                          ((attrib >> 10) & 1u) != 0);
}

/// What skip did.
struct skip_effects {
  std::uint64_t new_rip = 0;
  bool shadow_cleared = false;  ///< the interrupt shadow was set and is now clear
  bool single_step = false;     ///< #DB (DR6.BS) injected
  x86::merge_verdict verdict = x86::merge_verdict::deliver_second;  ///< of the #DB injection
};

namespace detail {
template <vmcb_memory M>
constexpr skip_effects finish_skip(M& m, std::uint64_t new_rip, std::uint64_t debugctl) noexcept {
  skip_effects fx;
  fx.new_rip = new_rip;
  write(m, fields::rip, new_rip);
  const auto st = read(m, fields::interrupt_state);
  if (interrupt_state::interrupt_shadow::get(st)) {
    write(m, fields::interrupt_state, interrupt_state::interrupt_shadow::set(st, false));
    fx.shadow_cleared = true;
  }
  if (x86::single_step_trap(read_typed(m, fields::rflags), debugctl)) {
    write(m, fields::dr6, static_cast<std::uint64_t>(read(m, fields::dr6) | x86::dr6_bs));
    fx.verdict = inject_exception(m, {x86::vector::db, 0});
    fx.single_step = true;
  }
  return fx;
}
}  // namespace detail

/// Skip an instruction of `length` bytes (decoded by the hypervisor). `debugctl` is the
/// guest's IA32_DEBUGCTL (the VMCB's DBGCTL with LBR virtualization).
template <vmcb_memory M>
constexpr skip_effects skip_instruction(M& m, std::uint32_t length, std::uint64_t debugctl) noexcept {
  return detail::finish_skip(m, x86::advance_ip(read(m, fields::rip), length, ip_width_of(m)), debugctl);
}
/// Skip to nRIP, as saved by the #VMEXIT (NRIP save supported, and an intercept that saves it).
template <vmcb_memory M>
constexpr skip_effects skip_to_next_rip(M& m, std::uint64_t debugctl) noexcept {
  return detail::finish_skip(m, read(m, fields::next_rip), debugctl);
}

}  // namespace hvkit::svm
