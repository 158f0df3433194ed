// SPDX-License-Identifier: MIT
/// @file
/// @brief Every VMCB field hvkit models, as a typed constant (`hvkit::svm::fields::rip`, ...),
/// the field table and the consteval pass that checks it (AMD APM Vol. 2, Appendix B,
/// Table B-1 "VMCB Layout, Control Area" and Table B-2 "VMCB Layout, State Save Area").
///
/// Offsets are from the start of the VMCB (Table B-2 offsets + 400h). Where the APM lists one
/// quadword holding several things (the intercept words, the ASID and TLB_CONTROL, the virtual
/// interrupt controls) the field is the smallest naturally aligned unit the APM gives a name;
/// the bits inside are decoded by intercepts.hpp, tlb.hpp, interrupt_control.hpp. A segment
/// register is four fields (selector, attributes, limit, base: APM 15.5.1, "VMCB segment
/// descriptor": 16 bytes, selector at +0, attributes at +2, limit at +4, base at +8).
/// The guest instruction bytes (0D1h-0DFh, decode assists) are read with
/// vmcb.hpp's guest_instruction_bytes(), not as a scalar field.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vmcb_field.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/efer.hpp"
#include "../x86/rflags.hpp"
#include "../x86/selector.hpp"

/// X-macro: X(name, offset, bytes, access, typed). `rw` = field_access::read_write,
/// `ro` = field_access::read_only (written by the processor on #VMEXIT), `void` = no register type.
#define HVKIT_SVM_SEGMENT_FIELDS(X, seg, base)                   \
  X(seg##_selector, (base) + 0x0, 2, rw, x86::selector)          \
  X(seg##_attrib, (base) + 0x2, 2, rw, void)                     \
  X(seg##_limit, (base) + 0x4, 4, rw, void)                      \
  X(seg##_base, (base) + 0x8, 8, rw, void)

#define HVKIT_SVM_FIELDS(X)                                                        \
  /* Table B-1, control area */                                                   \
  X(intercept_cr, 0x000, 4, rw, void)           /* 15:0 reads, 31:16 writes */    \
  X(intercept_dr, 0x004, 4, rw, void)           /* 15:0 reads, 31:16 writes */    \
  X(intercept_exceptions, 0x008, 4, rw, void)   /* one bit per vector */          \
  X(intercept_misc1, 0x00c, 4, rw, void)        /* INTR ... SHUTDOWN */           \
  X(intercept_misc2, 0x010, 4, rw, void)        /* VMRUN ... CR write traps */    \
  X(intercept_misc3, 0x014, 4, rw, void)        /* INVLPGB, INVPCID, ... */       \
  X(pause_filter_threshold, 0x03c, 2, rw, void)                                   \
  X(pause_filter_count, 0x03e, 2, rw, void)                                       \
  X(iopm_base_pa, 0x040, 8, rw, void)                                             \
  X(msrpm_base_pa, 0x048, 8, rw, void)                                            \
  X(tsc_offset, 0x050, 8, rw, void)                                               \
  X(guest_asid, 0x058, 4, rw, void)             /* bits 31:0 of 058h */           \
  X(tlb_control, 0x05c, 1, rw, void)            /* bits 39:32 of 058h */          \
  X(interrupt_control, 0x060, 8, rw, void)      /* V_TPR, V_IRQ, ... */           \
  X(interrupt_state, 0x068, 8, rw, void)        /* interrupt shadow, GIM */       \
  X(exit_code, 0x070, 8, ro, void)                                                \
  X(exit_info_1, 0x078, 8, ro, void)                                              \
  X(exit_info_2, 0x080, 8, ro, void)                                              \
  X(exit_int_info, 0x088, 8, ro, void)                                            \
  X(nested_control, 0x090, 8, rw, void)         /* NP_ENABLE, SEV, ... */         \
  X(avic_apic_bar, 0x098, 8, rw, void)                                            \
  X(ghcb_gpa, 0x0a0, 8, rw, void)                                                 \
  X(event_injection, 0x0a8, 8, rw, void)        /* EVENTINJ */                    \
  X(n_cr3, 0x0b0, 8, rw, void)                  /* nested page table CR3 */       \
  X(virtualization_ext, 0x0b8, 8, rw, void)     /* LBR, VMSAVE/VMLOAD virt. */    \
  X(vmcb_clean, 0x0c0, 4, rw, void)             /* clean bits 31:0 */             \
  X(next_rip, 0x0c8, 8, ro, void)               /* nRIP */                        \
  X(guest_instruction_bytes_fetched, 0x0d0, 1, ro, void)                          \
  X(avic_backing_page, 0x0e0, 8, rw, void)                                        \
  X(avic_logical_table, 0x0f0, 8, rw, void)                                       \
  X(avic_physical_table, 0x0f8, 8, rw, void)                                      \
  X(vmsa_pa, 0x108, 8, rw, void)                                                  \
  /* Table B-2, state-save area (offset + 400h) */                                \
  HVKIT_SVM_SEGMENT_FIELDS(X, es, 0x400)                                          \
  HVKIT_SVM_SEGMENT_FIELDS(X, cs, 0x410)                                          \
  HVKIT_SVM_SEGMENT_FIELDS(X, ss, 0x420)                                          \
  HVKIT_SVM_SEGMENT_FIELDS(X, ds, 0x430)                                          \
  HVKIT_SVM_SEGMENT_FIELDS(X, fs, 0x440)                                          \
  HVKIT_SVM_SEGMENT_FIELDS(X, gs, 0x450)                                          \
  X(gdtr_limit, 0x464, 4, rw, void)             /* GDTR: only limit and base */   \
  X(gdtr_base, 0x468, 8, rw, void)                                                \
  HVKIT_SVM_SEGMENT_FIELDS(X, ldtr, 0x470)                                        \
  X(idtr_limit, 0x484, 4, rw, void)             /* IDTR: only limit and base */   \
  X(idtr_base, 0x488, 8, rw, void)                                                \
  HVKIT_SVM_SEGMENT_FIELDS(X, tr, 0x490)                                          \
  X(cpl, 0x4cb, 1, rw, void)                                                      \
  X(efer, 0x4d0, 8, rw, x86::efer)                                                \
  X(cr4, 0x548, 8, rw, x86::cr4)                                                  \
  X(cr3, 0x550, 8, rw, x86::cr3)                                                  \
  X(cr0, 0x558, 8, rw, x86::cr0)                                                  \
  X(dr7, 0x560, 8, rw, void)                                                      \
  X(dr6, 0x568, 8, rw, void)                                                      \
  X(rflags, 0x570, 8, rw, x86::rflags)                                            \
  X(rip, 0x578, 8, rw, void)                                                      \
  X(rsp, 0x5d8, 8, rw, void)                                                      \
  X(s_cet, 0x5e0, 8, rw, void)                                                    \
  X(ssp, 0x5e8, 8, rw, void)                                                      \
  X(isst_addr, 0x5f0, 8, rw, void)                                                \
  X(rax, 0x5f8, 8, rw, void)                                                      \
  X(star, 0x600, 8, rw, void)                                                     \
  X(lstar, 0x608, 8, rw, void)                                                    \
  X(cstar, 0x610, 8, rw, void)                                                    \
  X(sfmask, 0x618, 8, rw, void)                                                   \
  X(kernel_gs_base, 0x620, 8, rw, void)                                           \
  X(sysenter_cs, 0x628, 8, rw, void)                                              \
  X(sysenter_esp, 0x630, 8, rw, void)                                             \
  X(sysenter_eip, 0x638, 8, rw, void)                                             \
  X(cr2, 0x640, 8, rw, void)                                                      \
  X(g_pat, 0x668, 8, rw, void)                                                    \
  X(dbgctl, 0x670, 8, rw, void)                                                   \
  X(br_from, 0x678, 8, rw, void)                                                  \
  X(br_to, 0x680, 8, rw, void)                                                    \
  X(last_excp_from, 0x688, 8, rw, void)                                           \
  X(last_excp_to, 0x690, 8, rw, void)                                             \
  X(spec_ctrl, 0x6e0, 8, rw, void)

namespace hvkit::svm {

namespace detail {
inline constexpr field_access rw = field_access::read_write;
inline constexpr field_access ro = field_access::read_only;
}  // namespace detail

/// The typed constants: `svm::fields::rip` is a `field<0x578, 8>`.
namespace fields {
#define HVKIT_SVM_DETAIL_DECLARE(name, off, n, acc, typed) inline constexpr field<off, n, detail::acc, typed> name{};
HVKIT_SVM_FIELDS(HVKIT_SVM_DETAIL_DECLARE)
#undef HVKIT_SVM_DETAIL_DECLARE
}  // namespace fields

/// One row of the field table.
struct field_info {
  const char* name;
  std::uint16_t offset;
  unsigned bytes;
  field_access access;
};

/// Every modelled field, in Appendix B order.
inline constexpr field_info field_table[] = {
#define HVKIT_SVM_DETAIL_ROW(name, off, n, acc, typed) field_info{#name, off, n, detail::acc},
    HVKIT_SVM_FIELDS(HVKIT_SVM_DETAIL_ROW)
#undef HVKIT_SVM_DETAIL_ROW
};

/// How many fields the table holds.
inline constexpr std::size_t field_count = sizeof(field_table) / sizeof(field_table[0]);

/// The consteval pass over a field table: rows in ascending offset order, no two rows
/// overlapping, none in a reserved area, each naturally aligned and inside the page.
/// Returns the position of the first bad row, or N if all rows are good.
template <std::size_t N>
[[nodiscard]] consteval std::size_t first_invalid_field(const field_info (&table)[N]) {
  for (std::size_t i = 0; i < N; ++i) {
    const auto& f = table[i];
    if (f.bytes != 1 && f.bytes != 2 && f.bytes != 4 && f.bytes != 8) return i;
    if (f.offset % f.bytes != 0 || f.offset + f.bytes > vmcb_size) return i;
    if (overlaps_reserved(f.offset, f.bytes)) return i;
    if (i > 0 && table[i - 1].offset + table[i - 1].bytes > f.offset) return i;  // order and overlap
  }
  return N;
}
static_assert(first_invalid_field(field_table) == field_count, "the VMCB field table is inconsistent");

/// The table row for an offset (nullptr if no modelled field starts there).
[[nodiscard]] constexpr const field_info* find_field(std::uint16_t offset) noexcept {
  for (const auto& f : field_table)
    if (f.offset == offset) return &f;
  return nullptr;
}

}  // namespace hvkit::svm
