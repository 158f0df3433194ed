// SPDX-License-Identifier: MIT
/// @file
/// @brief VMCB clean bits (AMD APM Vol. 2, 15.15 "VMCB State Caching"): which groups of VMCB
/// fields the hypervisor left unchanged since the last VMRUN of this VMCB on this CPU, so the
/// processor may use its cached copy. `clean_tracker` wraps a VMCB: every store that changes a
/// field marks its group dirty; before VMRUN, prepare_vmrun() writes VMCB_CLEAN (0C0h). When
/// the processor does not support clean bits (CPUID Fn8000_000A EDX[5] = 0) the tracker writes
/// nothing and costs one branch.
///
/// Groups (15.15.3 "VMCB Clean Field"): 0 I (intercept vectors, TSC_OFFSET, pause filter),
/// 1 IOPM (IOPM_BASE_PA, MSRPM_BASE_PA), 2 ASID, 3 TPR (060h: V_TPR ... V_INTR_VECTOR),
/// 4 NP (NP_ENABLE, N_CR3, G_PAT), 5 CRx (CR0, CR3, CR4, EFER), 6 DRx (DR6, DR7), 7 DT (GDTR,
/// IDTR), 8 SEG (ES, CS, SS, DS and CPL), 9 CR2, 10 LBR (DBGCTL, BR_FROM/TO,
/// LASTEXCPFROM/TO), 11 AVIC (APIC_BAR, backing page, logical and physical tables). Fields
/// outside every group (RIP, RSP, RAX, RFLAGS, EVENTINJ, TLB_CONTROL, ...) are read on every
/// VMRUN. The hypervisor must clear every bit the first time a VMCB runs and whenever it runs
/// on another CPU or another VMCB ran in between on this one (invalidate()).
#pragma once

#include <cstdint>

#include "vmcb.hpp"

namespace hvkit::svm {

/// The clean-bit groups.
enum class clean_bit : std::uint8_t { intercepts = 0, iopm = 1, asid = 2, tpr = 3, np = 4, crx = 5, drx = 6, dt = 7, seg = 8, cr2 = 9, lbr = 10, avic = 11 };

/// Every defined group.
inline constexpr std::uint32_t all_clean_bits = 0xfff;

/// The group a VMCB byte belongs to, or -1 if the processor reads it on every VMRUN.
[[nodiscard]] constexpr int clean_bit_of(std::uint16_t offset) noexcept {
  auto in = [offset](unsigned lo, unsigned hi) { return offset >= lo && offset <= hi; };
  if (in(0x000, 0x017) || in(0x03c, 0x03f) || in(0x050, 0x057)) return 0;
  if (in(0x040, 0x04f)) return 1;
  if (in(0x058, 0x05b)) return 2;
  if (in(0x060, 0x067)) return 3;
  if (in(0x090, 0x097) || in(0x0b0, 0x0b7) || in(0x668, 0x66f)) return 4;
  if (in(0x4d0, 0x4d7) || in(0x548, 0x55f)) return 5;
  if (in(0x560, 0x56f)) return 6;
  if (in(0x460, 0x46f) || in(0x480, 0x48f)) return 7;
  if (in(0x400, 0x43f) || offset == 0x4cb) return 8;
  if (in(0x640, 0x647)) return 9;
  if (in(0x670, 0x697)) return 10;
  if (in(0x098, 0x09f) || in(0x0e0, 0x0e7) || in(0x0f0, 0x0ff)) return 11;
  return -1;
}

/// A VMCB with clean-bit tracking; itself a vmcb_memory, so svm::write() goes through it.
template <vmcb_memory M>
class clean_tracker {
 public:
  /// `supported`: CPUID Fn8000_000A EDX[5] (VmcbClean).
  constexpr clean_tracker(M& vmcb, bool supported) noexcept : m_(&vmcb), supported_(supported) {}

  [[nodiscard]] constexpr std::uint64_t load(std::uint16_t offset, unsigned bytes) const noexcept {
    return m_->load(offset, bytes);
  }
  /// A store that changes the value marks the field's group dirty.
  constexpr void store(std::uint16_t offset, unsigned bytes, std::uint64_t v) noexcept {
    if (supported_ && m_->load(offset, bytes) != v) {
      for (unsigned i = 0; i < bytes; ++i) {
        const int b = clean_bit_of(static_cast<std::uint16_t>(offset + i));
        if (b >= 0) clean_ &= ~(std::uint32_t{1} << b);
      }
    }
    m_->store(offset, bytes, v);
  }
  /// Nothing may be taken from the processor's cache (first run, another CPU, another VMCB ran).
  constexpr void invalidate() noexcept { clean_ = 0; }
  /// Mark a group dirty by hand (after changing the MSRPM/IOPM contents, say).
  constexpr void mark_dirty(clean_bit b) noexcept { clean_ &= ~(std::uint32_t{1} << static_cast<unsigned>(b)); }
  /// Before VMRUN: write VMCB_CLEAN; afterwards everything counts as cached again.
  /// A no-op (no store) when clean bits are not supported.
  constexpr void prepare_vmrun() noexcept {
    if (!supported_) return;
    m_->store(fields::vmcb_clean.offset, fields::vmcb_clean.bytes, clean_);
    clean_ = all_clean_bits;
  }
  [[nodiscard]] constexpr std::uint32_t clean() const noexcept { return clean_; }
  [[nodiscard]] constexpr bool supported() const noexcept { return supported_; }
  [[nodiscard]] constexpr M& vmcb() const noexcept { return *m_; }

 private:
  M* m_;
  bool supported_;
  std::uint32_t clean_ = 0;  // nothing cached before the first VMRUN
};

}  // namespace hvkit::svm
