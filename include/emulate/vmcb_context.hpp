// SPDX-License-Identifier: MIT
/// @file
/// @brief The emulator's context from a VMCB and back, the SVM twin of vmcs_context.hpp:
/// read_emulation_context() fills an emulate::context from a VMCB and an svm::register_file;
/// write_emulation_context() stores what a `done` instruction changed (registers, RIP,
/// RFLAGS, segments, descriptor tables, CR0/CR2/CR3/CR4/EFER after a CR write, the interrupt
/// shadow). Injection, the MMU actions (outcome::mmu) and the MMIO/port completion stay with
/// the caller.
///
/// Glue between svm/ and emulate/: it lives here, above both (emulate/'s core includes no
/// svm/ header; freestanding.emulate_vendor_neutral keeps it so).
/// - VMCB segment attributes are the descriptor's bits 47:40 and 55:52 (APM 15.5.1); the
///   emulator's segment_ar is the VMX layout (svm/segment.hpp converts). A segment whose P
///   attribute is clear holds no usable descriptor: it is read as unusable.
/// - A null LDTR (the emulated LLDT 0) is stored with attributes, limit and base 0, as the
///   processor's own LLDT 0 leaves them.
/// - EFER.SVME in the VMCB is the host's requirement (15.5.1), not the guest's: read without
///   it, written back with it.
/// - The interrupt shadow is bit 0 of VMCB 068h (15.21.5): set after MOV SS, else clear.
#pragma once

#include <cstdint>

#include "context.hpp"
#include "cpu_model.hpp"
#include "outcome.hpp"
#include "segment.hpp"
#include "../svm/controls.hpp"
#include "../svm/register_file.hpp"
#include "../svm/segment.hpp"
#include "../svm/vmcb.hpp"
#include "../svm/vmcb_fields.hpp"
#include "../x86/cr.hpp"
#include "../x86/efer.hpp"

namespace hvkit::emulate {

namespace detail {
/// emulate::sreg order (ES, CS, SS, DS, FS, GS).
inline constexpr svm::segment vmcb_seg_of[6] = {svm::segment::es, svm::segment::cs, svm::segment::ss,
                                                svm::segment::ds, svm::segment::fs, svm::segment::gs};

template <svm::vmcb_memory M>
constexpr segment read_vmcb_seg(const M& m, svm::segment which) noexcept {
  const svm::segment_state v = svm::load_segment(m, which);
  std::uint32_t ar = svm::to_access_rights_layout(v.attributes);
  if (!(v.attributes & svm::attrib::p)) ar |= segment_ar::unusable.raw();
  segment s;
  s.selector = v.selector.raw();
  s.ar = segment_ar{ar};
  s.limit = v.limit;
  s.base = v.base;
  return s;
}

template <svm::vmcb_memory M>
constexpr void write_vmcb_seg(M& m, svm::segment which, const segment& s) noexcept {
  const bool unusable = s.ar.test(segment_ar::unusable);
  const std::uint16_t at = unusable ? std::uint16_t{0} : svm::from_access_rights_layout(s.ar.raw());
  const bool null_ldtr = unusable && which == svm::segment::ldtr;
  svm::store_segment(m, which, {x86::selector{s.selector}, at, null_ldtr ? 0u : s.limit, null_ldtr ? 0ull : s.base});
}
}  // namespace detail

/// The emulator's view of the guest from the VMCB and the register file. `maxphyaddr` and
/// `cr4_allowed` are the guest CPU model's (the VMCB holds neither).
template <svm::vmcb_memory M>
[[nodiscard]] constexpr context read_emulation_context(const M& m, const svm::register_file<M>& regs,
                                                       std::uint8_t maxphyaddr, x86::cr4 cr4_allowed) noexcept {
  namespace f = svm::fields;
  context c;
  for (unsigned i = 0; i < 16; ++i) c.gpr[i] = regs.read(i);
  c.rip = regs.rip();
  c.rflags = regs.rflags();
  for (unsigned i = 0; i < 6; ++i) c.seg[i] = detail::read_vmcb_seg(m, detail::vmcb_seg_of[i]);
  c.ldtr = detail::read_vmcb_seg(m, svm::segment::ldtr);
  c.tr = detail::read_vmcb_seg(m, svm::segment::tr);
  c.gdtr = {svm::read(m, f::gdtr_base), static_cast<std::uint16_t>(svm::read(m, f::gdtr_limit))};
  c.idtr = {svm::read(m, f::idtr_base), static_cast<std::uint16_t>(svm::read(m, f::idtr_limit))};
  c.cr0 = svm::read_typed(m, f::cr0);
  c.cr2 = svm::read(m, f::cr2);
  c.cr3 = svm::read_typed(m, f::cr3);
  c.cr4 = svm::read_typed(m, f::cr4);
  c.efer = svm::read_typed(m, f::efer).without(x86::efer::svme);
  c.dr[6] = svm::read(m, f::dr6);
  c.dr[7] = svm::read(m, f::dr7);
  c.cpl = static_cast<std::uint8_t>(svm::read(m, f::cpl));
  c.maxphyaddr = maxphyaddr;
  c.cr4_allowed = cr4_allowed;
  return c;
}

/// The same with the CPUID-derived fields (MAXPHYADDR, LAM, the CR4 bits the guest may set)
/// from the guest CPU model.
template <svm::vmcb_memory M>
[[nodiscard]] constexpr context read_emulation_context(const M& m, const svm::register_file<M>& regs,
                                                       const cpuid::guest_cpu_model& model) noexcept {
  context c = read_emulation_context(m, regs, static_cast<std::uint8_t>(model.maxphyaddr), model.cr4_allowed);
  apply_cpu_model(c, model);
  return c;
}

/// Stores what a `done` instruction changed from `before` to `after` into the VMCB and the
/// register file (see the file comment). Only for outcome_kind::done.
template <svm::vmcb_memory M>
constexpr void write_emulation_context(M& m, svm::register_file<M>& regs, const context& before, const context& after,
                                       const outcome& o) noexcept {
  namespace f = svm::fields;
  for (unsigned i = 0; i < 16; ++i)
    if (after.gpr[i] != before.gpr[i]) regs.write(i, after.gpr[i]);
  regs.set_rip(after.rip);
  regs.set_rflags(after.rflags);
  for (unsigned i = 0; i < 6; ++i)
    if (!(after.seg[i] == before.seg[i])) detail::write_vmcb_seg(m, detail::vmcb_seg_of[i], after.seg[i]);
  if (!(after.ldtr == before.ldtr)) detail::write_vmcb_seg(m, svm::segment::ldtr, after.ldtr);
  if (!(after.tr == before.tr)) detail::write_vmcb_seg(m, svm::segment::tr, after.tr);
  if (!(after.gdtr == before.gdtr)) {
    svm::write(m, f::gdtr_limit, std::uint32_t{after.gdtr.limit});
    svm::write(m, f::gdtr_base, after.gdtr.base);
  }
  if (!(after.idtr == before.idtr)) {
    svm::write(m, f::idtr_limit, std::uint32_t{after.idtr.limit});
    svm::write(m, f::idtr_base, after.idtr.base);
  }
  if (o.what == event::cr_write) {
    svm::write(m, f::cr0, after.cr0);
    svm::write(m, f::cr2, after.cr2);
    svm::write(m, f::cr3, after.cr3);
    svm::write(m, f::cr4, after.cr4);
    svm::write(m, f::efer, after.efer | x86::efer::svme);
  }
  svm::write(m, f::interrupt_state,
             svm::interrupt_state::interrupt_shadow::set(svm::read(m, f::interrupt_state), o.mov_ss_shadow));
}

}  // namespace hvkit::emulate
