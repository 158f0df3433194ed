// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator's context from a VMCS and back: read_emulation_context() fills an
/// emulate::context from a VMCS backend and a vmx::register_file in one call;
/// apply_emulation() applies an outcome: registers, RIP, RFLAGS, segments and descriptor
/// tables of a `done` instruction (with the interrupt shadow and single-step trap it leaves),
/// the exception to inject (merged with an event already set up, SDM 6.15), and the MMIO /
/// port access a needs_* outcome asks the caller to complete (complete_access()).
///
/// Glue between vmx/ and emulate/: it lives here, above both (emulate/ may include vmx/).
/// Segment access rights in the VMCS have the emulator's segment_ar layout, the unusable
/// bit 16 included (SDM Vol. 3C 25.4.1); CPL is SS.DPL (same section).
#pragma once

#include <cstdint>

#include "context.hpp"
#include "cpu_model.hpp"
#include "outcome.hpp"
#include "segment.hpp"
#include "../vmx/backend.hpp"
#include "../vmx/event_injection.hpp"
#include "../vmx/fields.hpp"
#include "../vmx/guest_mode.hpp"
#include "../vmx/guest_context.hpp"
#include "../vmx/interruptibility.hpp"
#include "../vmx/register_file.hpp"
#include "../vmx/skip.hpp"
#include "../vmx/vmcs_reader.hpp"
#include "../x86/exception_merge.hpp"

namespace hvkit::emulate {

namespace detail {
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
struct vmcs_segment {
  vmx::field<S> selector;
  vmx::field<B> base;
  vmx::field<L> limit;
  vmx::field<A> ar;
};
template <std::uint32_t S, std::uint32_t B, std::uint32_t L, std::uint32_t A>
constexpr vmcs_segment<S, B, L, A> seg_fields(vmx::field<S>, vmx::field<B>, vmx::field<L>, vmx::field<A>) noexcept {
  return {};
}
#define HVKIT_EMULATE_DETAIL_SEG(x)                                                                      \
  seg_fields(vmx::fields::guest_##x##_selector, vmx::fields::guest_##x##_base, vmx::fields::guest_##x##_limit, \
             vmx::fields::guest_##x##_access_rights)
inline constexpr auto seg_es = HVKIT_EMULATE_DETAIL_SEG(es);
inline constexpr auto seg_cs = HVKIT_EMULATE_DETAIL_SEG(cs);
inline constexpr auto seg_ss = HVKIT_EMULATE_DETAIL_SEG(ss);
inline constexpr auto seg_ds = HVKIT_EMULATE_DETAIL_SEG(ds);
inline constexpr auto seg_fs = HVKIT_EMULATE_DETAIL_SEG(fs);
inline constexpr auto seg_gs = HVKIT_EMULATE_DETAIL_SEG(gs);
inline constexpr auto seg_ldtr = HVKIT_EMULATE_DETAIL_SEG(ldtr);
inline constexpr auto seg_tr = HVKIT_EMULATE_DETAIL_SEG(tr);
#undef HVKIT_EMULATE_DETAIL_SEG

template <class R, class F>
constexpr segment read_seg(R& r, F f) noexcept {
  return {r.get(f.selector), r.get(f.base), r.get(f.limit), segment_ar{r.get(f.ar)}};
}
template <vmx::vmcs_backend B, class F>
constexpr result<void, vmx::vm_fail> write_seg(B& b, F f, const segment& s) noexcept {
  if (auto r = vmx::vmwrite(b, f.selector, s.selector); !r) return r;
  if (auto r = vmx::vmwrite(b, f.base, s.base); !r) return r;
  if (auto r = vmx::vmwrite(b, f.limit, s.limit); !r) return r;
  return vmx::vmwrite(b, f.ar, s.ar.raw());
}
}  // namespace detail

/// The emulator's view of the guest from the VMCS and the register file.
template <vmx::vmcs_backend B>
[[nodiscard]] constexpr result<context, vmx::vm_fail> read_emulation_context(B& b, vmx::register_file<B>& regs,
                                                                             const vmx::guest_cpu_config& g) noexcept {
  context c{};
  for (unsigned i = 0; i < 16; ++i) {
    auto v = regs.read(i);
    if (!v) return unexpected(v.error());
    c.gpr[i] = v.value();
  }
  auto rip = regs.rip();
  if (!rip) return unexpected(rip.error());
  c.rip = rip.value();
  auto fl = regs.rflags();
  if (!fl) return unexpected(fl.error());
  c.rflags = fl.value();
  vmx::vmcs_reader<B> r(b);
  c[sreg::es] = detail::read_seg(r, detail::seg_es);
  c[sreg::cs] = detail::read_seg(r, detail::seg_cs);
  c[sreg::ss] = detail::read_seg(r, detail::seg_ss);
  c[sreg::ds] = detail::read_seg(r, detail::seg_ds);
  c[sreg::fs] = detail::read_seg(r, detail::seg_fs);
  c[sreg::gs] = detail::read_seg(r, detail::seg_gs);
  c.ldtr = detail::read_seg(r, detail::seg_ldtr);
  c.tr = detail::read_seg(r, detail::seg_tr);
  c.gdtr = {r.get(vmx::fields::guest_gdtr_base), static_cast<std::uint16_t>(r.get(vmx::fields::guest_gdtr_limit))};
  c.idtr = {r.get(vmx::fields::guest_idtr_base), static_cast<std::uint16_t>(r.get(vmx::fields::guest_idtr_limit))};
  const auto m0 = r.get(vmx::fields::cr0_guest_host_mask);
  const auto m4 = r.get(vmx::fields::cr4_guest_host_mask);
  c.cr0 = vmx::guest_visible_cr0(x86::cr0{r.get(vmx::fields::guest_cr0)}, x86::cr0{r.get(vmx::fields::cr0_read_shadow)}, m0);
  c.cr4 = vmx::guest_visible_cr4(x86::cr4{r.get(vmx::fields::guest_cr4)}, x86::cr4{r.get(vmx::fields::cr4_read_shadow)}, m4);
  c.cr3 = x86::cr3{r.get(vmx::fields::guest_cr3)};
  c.efer = vmx::guest_efer(r);  // LMA from "IA-32e mode guest", as vmx/ reads it (vmx/guest_mode.hpp)
  c.dr[7] = r.get(vmx::fields::guest_dr7);
  c.cpl = static_cast<std::uint8_t>(c[sreg::ss].ar.dpl());
  apply_cpu_model(c, g);
  return r.finish(c);
}

/// What apply_emulation() did, and what is left to the caller.
struct applied_outcome {
  enum class kind_type : std::uint8_t {
    done,         ///< state written back; `what` names side effects beyond the context
    injected,     ///< an exception was set up for injection (`injected`)
    shutdown,     ///< the exception met a pending #DF: triple fault
    needs_access, ///< complete the MMIO / port access (complete_access()) and emulate again
    unsupported,  ///< nothing changed: the caller decides (#UD is the architectural default)
  } kind = kind_type::done;
  event what = event::none;
  vmx::injected_event injected{};
  /// #PF: VM entry does not load CR2 (SDM 27.3.2 lists what it loads), so the hypervisor
  /// loads this value into the real CR2 before VM entry.
  bool load_cr2 = false;
  std::uint64_t cr2 = 0;
};

namespace detail {
template <vmx::vmcs_backend B>
constexpr result<applied_outcome, vmx::vm_fail> inject(B& b, x86::exception_event e, bool protected_mode,
                                                       std::uint64_t cr2) noexcept {
  auto q = vmx::inject_exception(b, e, protected_mode);
  if (!q) return unexpected(q.error());
  applied_outcome a;
  if (q.value().verdict == x86::merge_verdict::shutdown) {
    a.kind = applied_outcome::kind_type::shutdown;
    return a;
  }
  a.kind = applied_outcome::kind_type::injected;
  a.injected = q.value().event;
  if (e.v == x86::vector::pf) {
    a.load_cr2 = true;
    a.cr2 = cr2;
  }
  return a;
}
}  // namespace detail

/// Applies outcome `o` of emulating from context `before` to context `after`.
/// - done: changed GPRs, RIP, RFLAGS, segment registers, LDTR/TR, GDTR/IDTR are written
///   (GPRs and RIP/RFLAGS through the register file: flush() it before entry); the
///   interrupt shadow becomes MOV SS blocking if the instruction loaded SS, else none (the
///   instruction completed: SDM 6.8.3); a single-step trap becomes pending debug exception
///   BS. CR, DR, MSR writes, HLT and INVLPG are reported in `what` for the caller.
/// - exception: set up for injection (merged with a pending event), CR2 returned for #PF.
/// - needs_io / needs_mmio: nothing written; complete_access() and emulate again.
/// - unsupported: nothing written.
template <vmx::vmcs_backend B>
constexpr result<applied_outcome, vmx::vm_fail> apply_emulation(B& b, vmx::register_file<B>& regs, const context& before,
                                                                const context& after, const outcome& o) noexcept {
  applied_outcome a;
  switch (o.kind) {
    case outcome_kind::exception:
      return detail::inject(b, x86::exception_event{o.vector, o.error_code}, before.cr0.test(x86::cr0::pe), o.cr2);
    case outcome_kind::needs_io:
    case outcome_kind::needs_mmio: a.kind = applied_outcome::kind_type::needs_access; return a;
    case outcome_kind::unsupported: a.kind = applied_outcome::kind_type::unsupported; return a;
    case outcome_kind::done: break;
  }
  a.what = o.what;
  for (unsigned i = 0; i < 16; ++i)
    if (after.gpr[i] != before.gpr[i]) regs.write(i, after.gpr[i]);
  regs.set_rip(after.rip);
  if (!(after.rflags == before.rflags)) regs.set_rflags(after.rflags);
  auto seg = [&](const segment& n, const segment& old, auto f) -> result<void, vmx::vm_fail> {
    if (n == old) return {};
    return detail::write_seg(b, f, n);
  };
  if (auto r = seg(after[sreg::es], before[sreg::es], detail::seg_es); !r) return unexpected(r.error());
  if (auto r = seg(after[sreg::cs], before[sreg::cs], detail::seg_cs); !r) return unexpected(r.error());
  if (auto r = seg(after[sreg::ss], before[sreg::ss], detail::seg_ss); !r) return unexpected(r.error());
  if (auto r = seg(after[sreg::ds], before[sreg::ds], detail::seg_ds); !r) return unexpected(r.error());
  if (auto r = seg(after[sreg::fs], before[sreg::fs], detail::seg_fs); !r) return unexpected(r.error());
  if (auto r = seg(after[sreg::gs], before[sreg::gs], detail::seg_gs); !r) return unexpected(r.error());
  if (auto r = seg(after.ldtr, before.ldtr, detail::seg_ldtr); !r) return unexpected(r.error());
  if (auto r = seg(after.tr, before.tr, detail::seg_tr); !r) return unexpected(r.error());
  if (!(after.gdtr == before.gdtr)) {
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_gdtr_base, after.gdtr.base); !r) return unexpected(r.error());
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_gdtr_limit, std::uint32_t{after.gdtr.limit}); !r) return unexpected(r.error());
  }
  if (!(after.idtr == before.idtr)) {
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_idtr_base, after.idtr.base); !r) return unexpected(r.error());
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_idtr_limit, std::uint32_t{after.idtr.limit}); !r) return unexpected(r.error());
  }
  // The interrupt shadow after the instruction (SDM 6.8.3; Vol. 3C Table 25-3).
  auto is = vmx::vmread(b, vmx::fields::guest_interruptibility_state);
  if (!is) return unexpected(is.error());
  using vis = vmx::interruptibility_state;
  const vis s{is.value()};
  const vis n = o.mov_ss_shadow ? s.without(vis::shadow).with(vis::blocking_by_mov_ss) : s.without(vis::shadow);
  if (!(n == s))
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_interruptibility_state, n.raw()); !r) return unexpected(r.error());
  if (o.single_step) {
    auto pd = vmx::vmread(b, vmx::fields::guest_pending_debug_exceptions);
    if (!pd) return unexpected(pd.error());
    if (auto r = vmx::vmwrite(b, vmx::fields::guest_pending_debug_exceptions, pd.value() | vmx::pending_dbg_bs); !r)
      return unexpected(r.error());
  }
  return a;
}

/// Completes the access a needs_io / needs_mmio outcome asked for: a read returns `value`,
/// a write is taken as done. Emulate again with the same context afterwards.
constexpr void complete_access(context& c, const outcome& o, std::uint64_t value = 0) noexcept {
  HVKIT_EXPECTS(o.kind == outcome_kind::needs_io || o.kind == outcome_kind::needs_mmio);
  c.pending.what = o.kind == outcome_kind::needs_io ? completion::kind::pio : completion::kind::mmio;
  c.pending.address = o.address;
  c.pending.size = o.size;
  c.pending.write = o.write;
  c.pending.value = o.write ? o.value : value;
}

}  // namespace hvkit::emulate
