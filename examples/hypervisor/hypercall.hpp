// SPDX-License-Identifier: MIT
/// @file
/// @brief Hypercall ABI between the conformance guest and the hypervisor (VMCALL).
///
/// RAX = hypercall number, RBX/RCX/RDX/RSI = arguments, RAX = return value.
/// Pointers are guest-physical addresses (the guest runs identity-paged); the hypervisor
/// bounds-checks them against guest memory before reading.
#pragma once

#include <cstdint>

namespace hv::hc {

enum : std::uint64_t {
  log = 1,          ///< RBX = NUL-terminated string: printed as "guest: <text>"
  mark_begin = 2,   ///< start a measured section: the hypervisor snapshots its exit counters
  mark_end = 3,     ///< RBX = name, RCX = operations done, RDX = guest-side mismatches,
                    ///< RSI = guest TSC delta: the hypervisor prints the section's result
  result = 4,       ///< RBX = name, RCX = result_*, RDX, RSI = details
  done = 5,         ///< the guest has finished: the run ends
  unexpected = 6,   ///< RBX = vector, RCX = error code, RDX = RIP, RSI = CR2: guest fault
  /// One differential paging case, right after the guest performed the access natively
  /// (control registers and RFLAGS.AC still as they were for the access):
  /// RBX = linear address, RCX = access (pfec bits; bit 31 = implicit supervisor access) |
  /// CPU A/D mask << 32 | PKRU bits 7:0 << 40 (keys 0-3),
  /// RDX = probe result (0 or 0x100 | vector) | error code << 32, RSI = CR2.
  /// The hypervisor walks the same address with hvkit and compares. RAX = 0 if they agree.
  paging_case = 7,
  /// Nested (EPT) case, before the access: RBX = linear address, RCX = access (pfec bits),
  /// RDX = the EPT layout of the alias (ept_alias_gpa): EPT PTE permissions (bit 0 R, 1 W,
  /// 2 X) of the data page (bits 2:0), the guest PT page (10:8) and the guest PD page
  /// (18:16); permissions of the alias' EPT PDE (26:24), PDPTE (29:27) and PML4E (34:32);
  /// page size (37:36: 2 = a 2 MiB EPT page at the PDE, 3 = 1 GiB at the PDPTE, else 4 KiB);
  /// a misconfiguration (41:40: 1 write without read, 2 a bit above MAXPHYADDR, 3 memory type
  /// 2 in a leaf or bit 3 in a table entry) at level 43:42 (0 data PTE, 1 PDE, 2 PDPTE,
  /// 3 PML4E). The hypervisor applies them and predicts the outcome with hvkit's nested
  /// walker.
  ept_arm = 8,
  /// After the access: RBX = probe result, RCX = error code, RDX = CR2, RSI = case
  /// description (bits 49:48 the page size). RAX = 0 if the CPU did what hvkit predicted
  /// (an EPT violation with the same qualification, GPA and linear address, an EPT
  /// misconfiguration at the same GPA, or the same guest outcome).
  ept_check = 9,
  /// One differential paging case of the 32-bit guest (32-bit or PAE paging), after the
  /// access: RBX = guest-physical address of a paging_case_block. RAX = 0 if hvkit agrees.
  paging_case32 = 10,
  /// RBX = a guest-physical page: the hypervisor removes it from EPT until the guest's next
  /// access to it, then maps it back (the re-injection check: put an exception stack there,
  /// and the access is made while the processor delivers the event). RAX = 0, ~0 if refused.
  ept_unmap_once = 11,
  /// RAX = how often the page was hit since ept_unmap_once (bits 7:0), the VM-entry
  /// instruction length (15:8) and interruption information (63:32) the hypervisor
  /// re-injected at the hit.
  ept_unmap_report = 12,
  /// The two-guest runs (cfg_spin), after guest A's fixed spins: RAX = 1 while the hypervisor
  /// still wants guest A to spin (not every vCPU has run a slice and been switched to yet: on
  /// a CPU whose timer slices are long against the guest's speed, QEMU's TCG), 0 when done.
  spin_more = 13,
};

/// The case record of hc::paging_case32 (32-bit fields: the same layout in the 32-bit guest
/// and the 64-bit hypervisor).
struct paging_case_block {
  std::uint32_t la;      ///< linear address of the access
  std::uint32_t access;  ///< pfec bits; bit 31 = implicit supervisor access
  std::uint32_t ad;      ///< A/D flags the CPU set (ad_dirty_shift layout, level 1 = PTE)
  std::uint32_t result;  ///< 0, or 0x100 | vector; 0xFFFF = not performed (the CR3 load faulted)
  std::uint32_t error;   ///< the exception's error code
  std::uint32_t cr2;
  std::uint32_t cr3;         ///< PAE: the CR3 value the guest loaded right before the access
  std::uint32_t cr3_result;  ///< PAE: that MOV to CR3 (PDPTE load): 0, or 0x100 | vector
};

/// A/D mask of a paging case: bit (level - 1) = accessed, bit (4 + level - 1) = dirty, for
/// the entries of the walk (level 1 = PTE ... 4 = PML4E).
inline constexpr unsigned ad_dirty_shift = 4;

/// RCX of hc::result.
enum : std::uint64_t {
  result_fail = 0,
  result_pass = 1,
  /// The CPU itself (not the hypervisor) deviated from the SDM: reported apart, not a
  /// failure. Only used for observations of natively executed instructions.
  result_erratum = 2,
};

/// Configuration the hypervisor passes to the guest in RDI at its first instruction.
enum : std::uint64_t {
  cfg_wp_intercepted = 1u << 0,  ///< CR0.WP is host-owned: every toggle exits
  cfg_dt_native = 1u << 1,       ///< no descriptor-table exiting: the CPU runs LTR itself
  cfg_quick = 1u << 2,           ///< only the short smoke checks (run after a hostile guest)
  cfg_triple_fault = 1u << 3,    ///< hostile: wreck the IDT and triple-fault on purpose
  cfg_ltr_only = 1u << 4,        ///< only the LTR checks (the negative-control run)
  cfg_paging_diff = 1u << 5,     ///< only the differential paging cases
  cfg_spin = 1u << 6,            ///< only spin (the two-guest IBPB run)
  cfg_ept_diff = 1u << 7,        ///< only the nested (EPT) differential cases
  cfg_hostile_b = 1u << 8,       ///< two-guest run: guest B triple-faults (hypervisor only)
  cfg_cr3_exiting = 1u << 9,     ///< MOV to/from CR3 exits (CR3-load/store exiting)
  cfg_guest32 = 1u << 10,        ///< the 32-bit guest (guest32/): 32-bit and PAE differential paging
};

/// Guest-physical pages of the EPT differential (inside the paging scratch area): the guest
/// page table of the test address and the data page, each with random EPT permissions.
inline constexpr std::uint64_t ept_test_pt_gpa = 0x1C01000;
inline constexpr std::uint64_t ept_test_data_gpa = 0x1C02000;
inline constexpr std::uint64_t ept_test_pd_gpa = 0x1C03000;  ///< the guest page directory of the test address
/// The EPT differential reaches those pages through an alias at 512 GiB + their address
/// (its own EPT PML4E, PDPT, PD and PT, randomised per case).
inline constexpr std::uint64_t ept_alias_gpa = 1ull << 39;

/// The 32-bit guest's differential test address: PDE 0x307 (32-bit paging), PDPTE 3 / PDE
/// 14 / PTE 0 (PAE paging); every translation lands on the scratch page at 28 MiB (a
/// PSE-36 4 MiB page with PA bit 32 on its EPT alias at 4 GiB + 28 MiB).
inline constexpr std::uint32_t test_la32 = 0xC1C00000;
inline constexpr std::uint64_t pse36_alias_gpa = 0x100000000ull;  ///< EPT maps [4 GiB + 28 MiB, +4 MiB) onto 28 MiB

/// First bytes of the guest image (guest/guest.cpp): how to start it.
struct guest_header {
  std::uint32_t magic;  ///< header_magic
  std::uint32_t reserved;
  std::uint64_t image_end;  ///< first byte after the guest's bss
  std::uint64_t entry;
  std::uint64_t stack_top;
  std::uint64_t gdt_base;
  std::uint64_t gdt_limit;
  std::uint64_t idt_base;
  std::uint64_t idt_limit;
  std::uint64_t tss_base;
};
inline constexpr std::uint32_t header_magic = 0x47544b48;  // "HKTG"

/// Guest GDT layout (the hypervisor's VMCS guest-state area matches it).
inline constexpr std::uint16_t guest_cs = 0x08, guest_ds = 0x10, guest_tr = 0x18;

}  // namespace hv::hc
