// SPDX-License-Identifier: MIT
// The golden table of CR0/CR4 ownership: one row per architectural bit per paging kind
// (EPT/NPT vs shadow paging), typed by hand from the SDM/APM, against
//  - x86::guest_ownable_cr0/cr4 (the shared rule),
//  - vmx::make_guest_owned with the widest policy and every CR4 bit allowed (VMX masks),
//  - svm::make_cr_intercepts with the widest policy (SVM intercepts),
// and a cross-check with paging::cr_write_actions (a separately written rule: what the MMU
// must do after a CR write): under shadow paging, no bit the guest may write without an exit
// may require any MMU action (role change, PDPTE reload, TLB flush).
//
// The rule: without EPT/NPT every bit whose change invalidates TLB entries (SDM 4.10.4.1),
// reloads the PDPTEs (SDM 4.4.1) or changes the role of the shadow pages (SDM 4.1.3, 4.6) must
// stay host-owned, and so must any bit whose legality depends on a bit the hypervisor forces in
// the real register (shadow paging forces CR0.PG and CR0.WP to 1).
//
// The SVM column is what a guest write may change without a #VMEXIT. SVM has no per-bit masks
// (APM Vol. 2, 15.9 "Instruction Intercepts"): a CR4 write is intercepted entirely, so no CR4
// bit is ever writable; for CR0 the selective write intercept (15.9.1) lets only TS and MP
// through (with nested paging only: it compares with the real CR0, whose WP shadow paging
// forces to 1), and the widest policy with nested paging (CR0.WP guest-owned) drops the CR0
// write intercept, so every CR0 bit is writable and svm::sync_cr0_role() re-reads PG and WP.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include <hvkit/paging/cr_write.hpp>
#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/vmx/cr_mask.hpp>
#include <hvkit/x86/guest_owned.hpp>

namespace x86 = hvkit::x86;
namespace vmx = hvkit::vmx;
namespace svm = hvkit::svm;
namespace paging = hvkit::paging;

namespace {

constexpr auto tdp = x86::paging_kind::two_dimensional;
constexpr auto shadow = x86::paging_kind::shadow;

struct row {
  unsigned cr;           // 0 or 4
  unsigned bit;
  const char* name;
  x86::paging_kind kind;
  bool vmx_guest_owned;  // clear in the guest/host mask
  bool svm_no_exit;      // a guest write may change it without a #VMEXIT
  const char* why;       // the SDM/APM sentence behind the decision
};

// clang-format off
constexpr row table[] = {
  // ---- CR0 ----
  {0, 0, "PE", tdp, false, true, "SDM 2.5: PE 'enables protected mode when set'; a change switches the operating mode the hypervisor tracks."},
  {0, 0, "PE", shadow, false, false, "SDM 2.5: PE switches the operating mode; with shadow paging the hypervisor also builds the shadow tables for the new mode."},
  {0, 1, "MP", tdp, false, true, "SDM 2.5: MP controls WAIT/FWAIT with TS; not in the guest-owned policy (SVM's selective intercept lets it through)."},
  {0, 1, "MP", shadow, false, false, "APM 15.9.1: the selective intercept exits on a write 'that changes' a bit other than TS/MP, compared with the real CR0, whose WP shadow paging forces to 1: a guest setting its WP back would not exit, so every CR0 write is intercepted."},
  {0, 2, "EM", tdp, false, true, "SDM 2.5: EM makes x87 instructions raise #NM; the hypervisor's FPU handling reads it."},
  {0, 2, "EM", shadow, false, false, "SDM 2.5: EM makes x87 instructions raise #NM; the hypervisor's FPU handling reads it."},
  {0, 3, "TS", tdp, true, true, "SDM 2.5: TS makes the next x87/SSE instruction raise #NM (lazy FPU switching); no translation or TLB effect."},
  {0, 3, "TS", shadow, true, false, "SDM 2.5: TS only defers x87/SSE state saving (VMX: guest-owned); SVM: the selective intercept compares with the real CR0, whose WP is forced to 1 (APM 15.9.1), so every CR0 write is intercepted."},
  {0, 4, "ET", tdp, false, true, "SDM 2.5: ET is reserved and hardwired to 1 on P6 and later; the guest reads the shadow."},
  {0, 4, "ET", shadow, false, false, "SDM 2.5: ET is reserved and hardwired to 1 on P6 and later; the guest reads the shadow."},
  {0, 5, "NE", tdp, false, true, "SDM A.7: VMX operation requires the real CR0.NE=1 (IA32_VMX_CR0_FIXED0), so the guest's NE lives in the read shadow."},
  {0, 5, "NE", shadow, false, false, "SDM A.7: VMX operation requires the real CR0.NE=1 (IA32_VMX_CR0_FIXED0), so the guest's NE lives in the read shadow."},
  {0, 16, "WP", tdp, true, true, "SDM 4.6: WP decides whether supervisor writes to read-only pages fault; with EPT/NPT the processor applies it in the guest walk and the role re-reads it from the live CR0."},
  {0, 16, "WP", shadow, false, false, "SDM 4.6: WP changes supervisor write access, which the shadow entries encode (a shadow-page role bit), and the real WP is forced to 1."},
  {0, 18, "AM", tdp, false, true, "SDM 2.5: AM enables alignment checking at CPL 3 with EFLAGS.AC; not in the guest-owned policy."},
  {0, 18, "AM", shadow, false, false, "SDM 2.5: AM enables alignment checking at CPL 3 with EFLAGS.AC; not in the guest-owned policy."},
  {0, 29, "NW", tdp, false, true, "SDM 4.4.1: a MOV to CR0 that modifies NW reloads the PDPTEs when PAE paging is in use (and NW sets the caching mode)."},
  {0, 29, "NW", shadow, false, false, "SDM 4.4.1: a MOV to CR0 that modifies NW reloads the PDPTEs when PAE paging is in use; the shadow MMU must load them."},
  {0, 30, "CD", tdp, false, true, "SDM 4.4.1: a MOV to CR0 that modifies CD reloads the PDPTEs when PAE paging is in use (and CD changes every memory type)."},
  {0, 30, "CD", shadow, false, false, "SDM 4.4.1: a MOV to CR0 that modifies CD reloads the PDPTEs when PAE paging is in use; the shadow MMU must load them."},
  {0, 31, "PG", tdp, false, true, "SDM 4.1.1: PG selects whether paging is on, the root of the MMU role; SVM with NPT re-reads it (svm::sync_cr0_role)."},
  {0, 31, "PG", shadow, false, false, "SDM 4.10.4.1: MOV to CR0 'invalidates all TLB entries (including global entries) ... if it changes the value of CR0.PG from 1 to 0'."},
  // ---- CR4 ----
  {4, 0, "VME", tdp, false, false, "SDM 2.5: VME changes interrupt and exception delivery in virtual-8086 mode, which event injection depends on."},
  {4, 0, "VME", shadow, false, false, "SDM 2.5: VME changes interrupt and exception delivery in virtual-8086 mode, which event injection depends on."},
  {4, 1, "PVI", tdp, true, false, "SDM 2.5: PVI enables the virtual interrupt flag (VIF) in protected mode; no translation or TLB effect."},
  {4, 1, "PVI", shadow, true, false, "SDM 2.5: PVI enables the virtual interrupt flag (VIF) in protected mode; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 2, "TSD", tdp, true, false, "SDM 2.5: TSD restricts RDTSC/RDTSCP to CPL 0; no translation or TLB effect."},
  {4, 2, "TSD", shadow, true, false, "SDM 2.5: TSD restricts RDTSC/RDTSCP to CPL 0; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 3, "DE", tdp, true, false, "SDM 2.5: DE makes DR4/DR5 references raise #UD and enables I/O breakpoints; no translation or TLB effect."},
  {4, 3, "DE", shadow, true, false, "SDM 2.5: DE makes DR4/DR5 references raise #UD; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 4, "PSE", tdp, false, false, "SDM 4.3: PSE enables 4-MByte pages with 32-bit paging (a role bit)."},
  {4, 4, "PSE", shadow, false, false, "SDM 4.4.1: a MOV to CR4 that modifies PSE reloads the PDPTEs under PAE paging; SDM 4.3: it is a role bit."},
  {4, 5, "PAE", tdp, false, false, "SDM 4.1.1: PAE selects the paging mode (a role bit)."},
  {4, 5, "PAE", shadow, false, false, "SDM 4.10.4.1: MOV to CR4 invalidates the current PCID's TLB entries 'if it changes the value of CR4.PAE'."},
  {4, 6, "MCE", tdp, false, false, "SDM 2.5: MCE enables the machine-check exception; machine checks are the host's."},
  {4, 6, "MCE", shadow, false, false, "SDM 2.5: MCE enables the machine-check exception; machine checks are the host's."},
  {4, 7, "PGE", tdp, true, false, "SDM 4.10.4.1/4.4.1: a PGE change flushes all TLB entries incl. global ones and reloads PAE PDPTEs; with EPT/NPT the processor does both for the guest itself, and PGE feeds no role."},
  {4, 7, "PGE", shadow, false, false, "SDM 4.10.4.1: MOV to CR4 'invalidates all TLB entries (including global entries) ... if it changes the value of CR4.PGE'; the shadow MMU must drop them too."},
  {4, 8, "PCE", tdp, true, false, "SDM 2.5: PCE allows RDPMC at any CPL; no translation or TLB effect."},
  {4, 8, "PCE", shadow, true, false, "SDM 2.5: PCE allows RDPMC at any CPL; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 9, "OSFXSR", tdp, true, false, "SDM 2.5: OSFXSR enables FXSAVE/FXRSTOR of SSE state and SSE instructions; no translation or TLB effect."},
  {4, 9, "OSFXSR", shadow, true, false, "SDM 2.5: OSFXSR enables FXSAVE/FXRSTOR of SSE state; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 10, "OSXMMEXCPT", tdp, true, false, "SDM 2.5: OSXMMEXCPT enables #XM for unmasked SIMD floating-point exceptions; no translation or TLB effect."},
  {4, 10, "OSXMMEXCPT", shadow, true, false, "SDM 2.5: OSXMMEXCPT enables #XM; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 11, "UMIP", tdp, false, false, "SDM 2.5: UMIP makes SGDT/SIDT/SLDT/SMSW/STR fault at CPL > 0; a hypervisor emulating it must see it."},
  {4, 11, "UMIP", shadow, false, false, "SDM 2.5: UMIP makes SGDT/SIDT/SLDT/SMSW/STR fault at CPL > 0; a hypervisor emulating it must see it."},
  {4, 12, "LA57", tdp, false, false, "SDM 4.5: LA57 selects 5-level paging (a role bit)."},
  {4, 12, "LA57", shadow, false, false, "SDM 4.5: LA57 selects 5-level paging, the shadow tables' depth (a role bit)."},
  {4, 13, "VMXE", tdp, false, false, "SDM A.8: VMX operation requires the real CR4.VMXE=1 (IA32_VMX_CR4_FIXED0); the guest's VMXE lives in the read shadow."},
  {4, 13, "VMXE", shadow, false, false, "SDM A.8: VMX operation requires the real CR4.VMXE=1 (IA32_VMX_CR4_FIXED0); the guest's VMXE lives in the read shadow."},
  {4, 14, "SMXE", tdp, false, false, "SDM 2.5: SMXE enables GETSEC (safer mode extensions), which the hypervisor controls."},
  {4, 14, "SMXE", shadow, false, false, "SDM 2.5: SMXE enables GETSEC (safer mode extensions), which the hypervisor controls."},
  {4, 16, "FSGSBASE", tdp, true, false, "SDM 2.5: FSGSBASE enables RDFSBASE/RDGSBASE/WRFSBASE/WRGSBASE; no translation or TLB effect."},
  {4, 16, "FSGSBASE", shadow, true, false, "SDM 2.5: FSGSBASE enables RD/WR FS/GS base instructions; SDM 4.10.4.1 lists no TLB invalidation for it."},
  {4, 17, "PCIDE", tdp, false, false, "SDM 4.10.1: PCIDE changes how CR3 is interpreted (PCID in bits 11:0)."},
  {4, 17, "PCIDE", shadow, false, false, "SDM 4.10.4.1: MOV to CR4 invalidates all TLB entries for all PCIDs 'if it changes the value of CR4.PCIDE from 1 to 0'."},
  {4, 18, "OSXSAVE", tdp, false, false, "SDM 2.5: OSXSAVE enables XSAVE/XGETBV/XSETBV and shows in CPUID.1:ECX[27], which the hypervisor's CPUID reports."},
  {4, 18, "OSXSAVE", shadow, false, false, "SDM 2.5: OSXSAVE enables XSAVE/XGETBV/XSETBV and shows in CPUID.1:ECX[27], which the hypervisor's CPUID reports."},
  {4, 19, "KL", tdp, false, false, "SDM 2.5: KL enables Key Locker (LOADIWKEY), whose wrapping key the hypervisor manages."},
  {4, 19, "KL", shadow, false, false, "SDM 2.5: KL enables Key Locker (LOADIWKEY), whose wrapping key the hypervisor manages."},
  {4, 20, "SMEP", tdp, false, false, "SDM 4.6: SMEP forbids supervisor fetches from user pages (a role bit)."},
  {4, 20, "SMEP", shadow, false, false, "SDM 4.10.4.1: MOV to CR4 invalidates the current PCID's TLB entries 'if it changes the value of CR4.SMEP from 0 to 1'."},
  {4, 21, "SMAP", tdp, false, false, "SDM 4.6: SMAP forbids supervisor data accesses to user pages (a role bit)."},
  {4, 21, "SMAP", shadow, false, false, "SDM 4.6: SMAP forbids supervisor data accesses to user pages, which the shadow entries encode (a role bit)."},
  {4, 22, "PKE", tdp, false, false, "SDM 4.6.2: PKE enables protection keys for user-mode pages (a role bit)."},
  {4, 22, "PKE", shadow, false, false, "SDM 4.6.2: PKE enables protection keys for user-mode pages (a role bit)."},
  {4, 23, "CET", tdp, true, false, "SDM 2.5: CET enables control-flow enforcement; it can be set only if CR0.WP is set, which the processor checks against the guest's own CR0 with EPT."},
  {4, 23, "CET", shadow, false, false, "SDM 2.5: CET 'can be set only if CR0.WP is set'; shadow paging forces the real WP to 1, so the write must exit for the #GP."},
  {4, 24, "PKS", tdp, false, false, "SDM 4.6.2: PKS enables protection keys for supervisor-mode pages (a role bit)."},
  {4, 24, "PKS", shadow, false, false, "SDM 4.6.2: PKS enables protection keys for supervisor-mode pages (a role bit)."},
  {4, 25, "UINTR", tdp, false, false, "SDM 2.5: UINTR enables user interrupts (SENDUIPI, UIRET), whose notification the hypervisor handles."},
  {4, 25, "UINTR", shadow, false, false, "SDM 2.5: UINTR enables user interrupts (SENDUIPI, UIRET), whose notification the hypervisor handles."},
  {4, 27, "LASS", tdp, false, false, "SDM 2.5: LASS makes accesses to the other half of the linear-address space fault before paging; the emulator's linear checks read it."},
  {4, 27, "LASS", shadow, false, false, "SDM 2.5: LASS makes accesses to the other half of the linear-address space fault before paging; the emulator's linear checks read it."},
  {4, 28, "LAM_SUP", tdp, false, false, "SDM 2.5: LAM_SUP changes which supervisor pointers are canonical (linear-address masking); the emulator reads it."},
  {4, 28, "LAM_SUP", shadow, false, false, "SDM 2.5: LAM_SUP changes which supervisor pointers are canonical (linear-address masking); the emulator reads it."},
  {4, 32, "FRED", tdp, false, false, "SDM 2.5: FRED replaces IDT event delivery with FRED event delivery, which event injection depends on."},
  {4, 32, "FRED", shadow, false, false, "SDM 2.5: FRED replaces IDT event delivery with FRED event delivery, which event injection depends on."},
};
// clang-format on

constexpr const char* kind_name(x86::paging_kind k) { return k == tdp ? "EPT/NPT" : "shadow"; }

bool bit_of(x86::cr0 c, unsigned b) { return (c.raw() >> b) & 1; }
bool bit_of(x86::cr4 c, unsigned b) { return (c.raw() >> b) & 1; }

}  // namespace

TEST(cr_ownership, golden_table_covers_every_defined_bit) {
  // One row per defined bit per paging kind (CR0: 11 bits, CR4: 28 bits).
  for (auto k : {tdp, shadow}) {
    std::uint64_t cr0_rows = 0, cr4_rows = 0;
    for (const row& r : table) {
      if (r.kind != k) continue;
      std::uint64_t& seen = r.cr == 0 ? cr0_rows : cr4_rows;
      EXPECT_EQ(seen & (std::uint64_t{1} << r.bit), 0u) << "duplicate row CR" << r.cr << "." << r.name;
      seen |= std::uint64_t{1} << r.bit;
    }
    EXPECT_EQ(cr0_rows, x86::cr0::defined.raw()) << kind_name(k);
    EXPECT_EQ(cr4_rows, x86::cr4::defined.raw()) << kind_name(k);
  }
  EXPECT_EQ(std::size(table), 2u * (11u + 28u));
}

TEST(cr_ownership, vmx_masks_and_shared_rule_match_the_table) {
  for (const row& r : table) {
    const bool ept = r.kind == tdp;
    const auto owned = vmx::make_guest_owned(vmx::cr_mask_features{ept, x86::cr4::defined});
    const bool vmx_owned = r.cr == 0 ? bit_of(owned.cr0, r.bit) : bit_of(owned.cr4, r.bit);
    const bool rule = r.cr == 0 ? bit_of(x86::guest_ownable_cr0(r.kind), r.bit) : bit_of(x86::guest_ownable_cr4(r.kind), r.bit);
    const std::uint64_t mask = r.cr == 0 ? owned.cr0_mask() : owned.cr4_mask();
    EXPECT_EQ(vmx_owned, r.vmx_guest_owned) << "VMX CR" << r.cr << "." << r.name << " (" << kind_name(r.kind) << "): " << r.why;
    EXPECT_EQ(rule, r.vmx_guest_owned) << "x86::guest_ownable CR" << r.cr << "." << r.name << " (" << kind_name(r.kind) << "): " << r.why;
    // Guest-owned <=> the bit is clear in the guest/host mask (SDM 25.6.6).
    EXPECT_EQ(((mask >> r.bit) & 1) == 0, r.vmx_guest_owned) << r.name;
  }
  // Every bit the table does not list (reserved) stays host-owned under both kinds.
  for (bool ept : {true, false}) {
    const auto owned = vmx::make_guest_owned(vmx::cr_mask_features{ept, x86::cr4::defined});
    EXPECT_EQ(~owned.cr0_mask() & ~x86::cr0::defined.raw(), 0u);
    EXPECT_EQ(~owned.cr4_mask() & ~x86::cr4::defined.raw(), 0u);
  }
}

TEST(cr_ownership, svm_intercepts_match_the_table) {
  for (const row& r : table) {
    const auto ic = svm::make_cr_intercepts(svm::cr_intercept_features{r.kind == tdp});
    // CR4 writes are intercepted entirely, or a CR4 bit is writable without an exit.
    const bool no_exit = r.cr == 0 ? bit_of(ic.cr0_writable, r.bit) : !ic.cr4_write;
    EXPECT_EQ(no_exit, r.svm_no_exit) << "SVM CR" << r.cr << "." << r.name << " (" << kind_name(r.kind) << "): " << r.why;
    // What SVM reports as owned is what VMX owns, within what SVM's granularity can grant.
    const bool svm_owned = r.cr == 0 ? bit_of(ic.cr0_owned, r.bit) : bit_of(ic.cr4_owned, r.bit);
    EXPECT_EQ(svm_owned, r.vmx_guest_owned && r.svm_no_exit) << "SVM owned CR" << r.cr << "." << r.name;
  }
}

// The cross-check against paging::cr_write_actions: under shadow paging a bit a guest may write
// without an exit (VMX or SVM) never requires an MMU action, in any paging mode; under
// two-dimensional paging it never requires more than a TLB flush or a PDPTE reload (the
// processor performs both for a write that does not exit; with EPT the loaded PDPTEs are saved
// into the VMCS guest PDPTE fields on VM exit) or, for CR0.WP (re-read from the live CR0), a
// permission refresh.
TEST(cr_ownership, guest_writable_bits_need_no_mmu_action) {
  using x86::cr0;
  using x86::cr4;
  using x86::efer;
  const cr0 cr0s[] = {cr0::pe | cr0::et | cr0::ne, cr0::pe | cr0::et | cr0::ne | cr0::pg,
                      cr0::pe | cr0::et | cr0::ne | cr0::pg | cr0::wp};
  const cr4 cr4s[] = {cr4{}, cr4::pse, cr4::pae, cr4::pae | cr4::pge, cr4::pae | cr4::pcide | cr4::pge,
                      cr4::pae | cr4::la57 | cr4::smep | cr4::smap | cr4::pke, cr4::pae | cr4::cet};
  const efer efers[] = {efer{}, efer::lme | efer::nxe};
  const paging::mmu_actions hw_done = paging::mmu_actions::flush_tlb_all | paging::mmu_actions::flush_tlb_current |
                                      paging::mmu_actions::reload_pdptrs;
  std::size_t checked = 0;
  for (const row& r : table) {
    // What the implementations let through (not the table's columns: this oracle is
    // cr_write_actions).
    const auto owned = vmx::make_guest_owned(vmx::cr_mask_features{r.kind == tdp, x86::cr4::defined});
    const auto ic = svm::make_cr_intercepts(svm::cr_intercept_features{r.kind == tdp});
    const bool vmx_owned = r.cr == 0 ? bit_of(owned.cr0, r.bit) : bit_of(owned.cr4, r.bit);
    const bool svm_no_exit = r.cr == 0 ? bit_of(ic.cr0_writable, r.bit) : !ic.cr4_write;
    if (!vmx_owned && !svm_no_exit) continue;
    // SVM with NPT drops the CR0 write intercept: PG (and the PE/CD/NW that come with it)
    // become writable, the processor does the guest's walk, and svm::sync_cr0_role re-reads
    // PG and WP. The shadow rows are the ones the rule is about; the TDP rows check VMX's.
    if (r.kind == tdp && !vmx_owned) continue;
    for (const cr0 c0 : cr0s)
      for (const cr4 c4 : cr4s)
        for (const efer e : efers) {
          const paging::cr_state before{c0, c4, e};
          paging::cr_state after = before;
          if (r.cr == 0) after.cr0 = cr0{c0.raw() ^ (std::uint64_t{1} << r.bit)};
          else after.cr4 = cr4{c4.raw() ^ (std::uint64_t{1} << r.bit)};
          const auto a = paging::cr_write_actions(before, after, r.kind);
          ++checked;
          if (r.kind == shadow) {
            EXPECT_TRUE(a.none()) << "shadow: guest-writable CR" << r.cr << "." << r.name << " needs MMU action 0x"
                                  << std::hex << unsigned(a.raw()) << std::dec << " (" << r.why << ")";
          } else {
            const auto allowed = r.cr == 0 && r.bit == 16 ? hw_done | paging::mmu_actions::refresh_permissions : hw_done;
            EXPECT_TRUE((a & ~allowed).none()) << "EPT/NPT: guest-owned CR" << r.cr << "." << r.name << " needs MMU action 0x"
                                               << std::hex << unsigned(a.raw()) << std::dec;
          }
        }
  }
  std::printf("checked %zu CR toggles of guest-writable bits against paging::cr_write_actions\n", checked);
}
