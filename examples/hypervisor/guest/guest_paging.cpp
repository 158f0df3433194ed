// SPDX-License-Identifier: MIT
// hvkit conformance guest: the differentials with the CPU as the oracle (paging: random page
// tables and registers, each access done natively and repeated by the hypervisor's walker;
// EPT/NPT: random second-stage permissions on the guest's page-table and data pages).
#include "guest.hpp"

// ---- differential paging against the CPU --------------------------------------------
// The test region: PML4 slot 1 (linear 512 GiB) with its own PDPT, PD and PT, all
// randomised per case. Every page size lands on the same guest-physical scratch page:
//   4 KiB: PT[0] -> scratch; 2 MiB: PD[14] -> scratch 2 MiB; 1 GiB: PDPT[0] -> GPA 0, and
//   the linear offset inside that 1 GiB page is the scratch address itself.
constexpr std::uint64_t scratch_gpa = hv::layout::guest_mem_base + 0xC00000;  // 28 MiB, 2 MiB aligned
constexpr std::uint64_t test_la = (1ull << 39) + scratch_gpa;
constexpr unsigned test_pd_index = (scratch_gpa >> 21) & 511;
alignas(4096) std::uint64_t test_pdpt[512];
alignas(4096) std::uint64_t test_pd[512];
alignas(4096) std::uint64_t test_pt[512];

struct rng {
  std::uint64_t s;
  std::uint64_t next() {  // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  bool chance(unsigned one_in) { return next() % one_in == 0; }
};

inline void write_cr4(std::uint64_t v) { asm volatile("mov %0, %%cr4" ::"r"(v) : "memory"); }
inline std::uint64_t rdmsr(std::uint32_t m) {
  std::uint32_t lo, hi;
  asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(m));
  return (std::uint64_t{hi} << 32) | lo;
}
inline void wrmsr(std::uint32_t m, std::uint64_t v) {
  asm volatile("wrmsr" ::"c"(m), "a"(static_cast<std::uint32_t>(v)), "d"(static_cast<std::uint32_t>(v >> 32)) : "memory");
}
inline void flush_tlb() {
  std::uint64_t cr3;
  asm volatile("mov %%cr3, %0\n\tmov %0, %%cr3" : "=r"(cr3) : : "memory");
}

/// One random paging-structure entry pointing at `target`. Rights are mostly permissive so
/// that many walks reach the leaf; A/D start clear so that what the CPU sets is visible.
std::uint64_t random_entry(rng& g, std::uint64_t target, int level, bool large, bool nx_defined) {
  std::uint64_t e = target | pte_p;
  if (g.chance(16)) e &= ~pte_p;
  if (!g.chance(4)) e |= pte_rw;
  if (!g.chance(4)) e |= 4;  // U/S
  if (large) e |= pte_ps;
  if (g.chance(4)) e |= 1ull << 63;  // XD (reserved when EFER.NXE = 0)
  if (g.chance(24)) {
    // A reserved bit: above MAXPHYADDR (40 on Bochs' models: bit 45), PS in a PML4E, or
    // the low address bits of a large page.
    unsigned pick = static_cast<unsigned>(g.next() % 3);
    if (pick == 0) e |= 1ull << 45;
    else if (pick == 1 && level == 4) e |= pte_ps;
    else if (large) e |= 1ull << 13;
    else e |= 1ull << 45;
  }
  static_cast<void>(nx_defined);
  return e;
}

/// Snapshot of the four test entries (the ones a walk of test_la can use).
struct entries {
  std::uint64_t e[4];  // index level - 1
};
entries read_entries() {
  return {{*(volatile std::uint64_t*)&test_pt[0], *(volatile std::uint64_t*)&test_pd[test_pd_index],
           *(volatile std::uint64_t*)&test_pdpt[0], *(volatile std::uint64_t*)&pml4[1]}};
}
void write_entries(const entries& x) {
  *(volatile std::uint64_t*)&test_pt[0] = x.e[0];
  *(volatile std::uint64_t*)&test_pd[test_pd_index] = x.e[1];
  *(volatile std::uint64_t*)&test_pdpt[0] = x.e[2];
  *(volatile std::uint64_t*)&pml4[1] = x.e[3];
}

/// Performs random accesses natively and has the hypervisor repeat each with hvkit's walker
/// against the same memory and registers: reads, writes and fetches at CPL 0 and CPL 3
/// under random CR0.WP, CR4.SMEP, CR4.SMAP, EFER.NXE and RFLAGS.AC.
void check_paging_differential(std::uint64_t cases) {
  rng g{0x6876'6b69'7400'0001ull};  // fixed seed: the same cases every run
  const bool has_smep = (cpuid(7).ebx >> 7) & 1, has_smap = (cpuid(7).ebx >> 20) & 1;
  const bool has_nx = (cpuid(0x80000001).edx >> 20) & 1, has_1g = (cpuid(0x80000001).edx >> 26) & 1;
  const bool has_pku = (cpuid(7).ecx >> 3) & 1;
  *reinterpret_cast<volatile std::uint8_t*>(scratch_gpa) = 0xC3;  // RET, for fetches
  // LDT descriptor 1 (at test_la + 8): a DPL 3 data segment, accessed bit set so that
  // loading it is a pure implicit read.
  *reinterpret_cast<volatile std::uint64_t*>(scratch_gpa + 8) = 0x00CFF3000000FFFF;
  asm volatile("lldt %w0" ::"r"(sel_ldt) : "memory");
  for (const std::uint8_t* b = user_stub_start; b != user_stub_end; ++b)
    reinterpret_cast<volatile std::uint8_t*>(user_code_page)[b - user_stub_start] = *b;
  const std::uint64_t cr0_base = read_cr0() | cr0_wp, cr4_base = read_cr4(), efer_base = rdmsr(x86::msr::ia32_efer);
  std::uint64_t mismatches = 0, faults = 0;
  for (std::uint64_t i = 0; i < cases; ++i) {
    // Registers.
    bool wp = !g.chance(3), smep = has_smep && g.chance(2), smap = has_smap && g.chance(2);
    bool nxe = has_nx && !g.chance(4), ac = has_smap && g.chance(2);
    bool pke = has_pku && g.chance(3);
    const x86::cr4 cr4_typed = x86::cr4{cr4_base}
                                   .with(x86::cr4::smep, smep)
                                   .with(x86::cr4::smap, smap)
                                   .with(x86::cr4::pke, pke);
    const std::uint64_t cr4 = cr4_typed.raw();
    if (read_cr4() != cr4) write_cr4(cr4);
    // PKRU: random AD/WD bits for keys 1-3 (key 0, the guest's own pages, stays open).
    std::uint32_t pkru = pke ? static_cast<std::uint32_t>(g.next() & 0xFC) : 0;
    if (pke) asm volatile("wrpkru" ::"a"(pkru), "c"(0), "d"(0) : "memory");
    const std::uint64_t efer = x86::efer{efer_base}.with(x86::efer::nxe, nxe).raw();
    if (rdmsr(x86::msr::ia32_efer) != efer) wrmsr(x86::msr::ia32_efer, efer);
    // Entries: page size first.
    unsigned size = static_cast<unsigned>(g.next() % 8);  // 0-4: 4 KiB, 5-6: 2 MiB, 7: 1 GiB
    bool big2m = size == 5 || size == 6, big1g = size == 7 && has_1g;
    entries x{};
    x.e[3] = random_entry(g, addr(test_pdpt), 4, false, nxe);
    x.e[2] = random_entry(g, big1g ? 0 : addr(test_pd), 3, big1g, nxe);
    x.e[1] = random_entry(g, big2m ? scratch_gpa : addr(test_pt), 2, big2m, nxe);
    x.e[0] = random_entry(g, scratch_gpa, 1, false, nxe);
    // Protection key of the leaf (bits 62:59; ignored unless CR4.PKE).
    x.e[big1g ? 2 : (big2m ? 1 : 0)] |= (g.next() & 3) << 59;
    write_entries(x);
    flush_tlb();
    // The access.
    // 0 read, 1 write, 2 fetch, 3 implicit supervisor read (a descriptor-table load)
    unsigned kind = static_cast<unsigned>(g.next() % 4);
    bool user = g.chance(2);                                // CPL 3 or CPL 0
    std::uint64_t la = test_la + (kind == 2 ? 0 : (kind == 3 ? 8 : 0x100));
    // Access for the hypervisor: pfec bits; bit 31 marks an implicit supervisor access (at
    // any CPL, so without U/S).
    std::uint64_t access = kind == 3 ? 0x80000000u : ((kind == 1 ? 0x2 : (kind == 2 ? 0x10 : 0)) | (user ? 0x4 : 0));
    write_cr0(wp ? cr0_base : cr0_base & ~cr0_wp);
    if (ac) asm volatile("stac" ::: "memory");
    g_fault_error = 0;
    g_fault_cr2 = 0;
    unsigned r;
    if (user) r = probe_user(la, kind, 0x5A5A5A5A5A5A5A5Aull, user_code_page, user_stack_page + 4096);
    else if (kind == 3) r = probe_load_fs(0x0F);
    else if (kind == 0) r = probe_read64(reinterpret_cast<const std::uint64_t*>(la));
    else if (kind == 1) r = probe_write64(reinterpret_cast<std::uint64_t*>(la), 0x5A5A5A5A5A5A5A5Aull);
    else r = probe_fetch(reinterpret_cast<const void*>(la));
    std::uint64_t err = g_fault_error, cr2 = g_fault_cr2;
    asm volatile("movw %w0, %%fs" ::"r"(0) : "memory");  // FS back to null
    entries after = read_entries();
    std::uint64_t ad = 0;
    for (int lvl = 1; lvl <= 4; ++lvl) {
      if (after.e[lvl - 1] & 0x20) ad |= 1ull << (lvl - 1);
      if (after.e[lvl - 1] & 0x40) ad |= 1ull << (hc::ad_dirty_shift + lvl - 1);
    }
    if (kind == 1 && r == 0) *reinterpret_cast<volatile std::uint8_t*>(scratch_gpa) = 0xC3;
    write_entries(x);  // A/D clear again: the hypervisor walks the same state
    if (r != 0) ++faults;
    // Same registers (AC included) for the hypervisor's walk.
    std::uint64_t verdict = vmcall(hc::paging_case, la, access | (ad << 32) | (std::uint64_t{pkru} << 40),
                                   r | (err << 32), cr2);
    if (ac) asm volatile("clac" ::: "memory");
    write_cr0(cr0_base);
    if (verdict != 0) ++mismatches;
  }
  // Back to the registers the other checks expect.
  write_cr4(cr4_base);
  wrmsr(x86::msr::ia32_efer, efer_base);
  asm volatile("lldt %w0" ::"r"(0) : "memory");
  write_entries(entries{});
  flush_tlb();
  report("paging_differential_guest", mismatches == 0, cases, (faults << 32) | mismatches);
}

/// Nested (EPT) differential: the guest maps test_la + 0x2000 through a page table that lives
/// in the scratch page hc::ept_test_pt_gpa onto the data page hc::ept_test_data_gpa; the
/// hypervisor gives both pages random EPT permissions (hc::ept_arm) and predicts the access
/// with hvkit's nested walker; the guest does the access natively and reports what it saw
/// (hc::ept_check). The hypervisor lifts the permissions after the first EPT violation, so
/// the access then completes (or takes the guest #PF the guest tables decide).
void check_ept_differential(std::uint64_t cases) {
  rng g{0x6570'7464'6966'6600ull};
  auto* pt = reinterpret_cast<volatile std::uint64_t*>(hc::ept_test_pt_gpa);
  auto* epd = reinterpret_cast<volatile std::uint64_t*>(hc::ept_test_pd_gpa);
  const bool exec_only = false;  // the hypervisor's ept_set_page accepts any R/W/X pattern;
  static_cast<void>(exec_only);
  *reinterpret_cast<volatile std::uint8_t*>(hc::ept_test_data_gpa) = 0xC3;  // RET
  for (unsigned i = 0; i < 512; ++i) {
    pt[i] = 0;
    epd[i] = 0;
  }
  std::uint64_t mismatches = 0;
  for (std::uint64_t i = 0; i < cases; ++i) {
    // Guest tables: PML4[1] -> test_pdpt -> PD page -> PT page -> data page, the last three
    // (scratch pages) referenced through the EPT alias, whose every level the hypervisor
    // randomises.
    pml4[1] = addr(test_pdpt) | pte_p | pte_rw;
    test_pdpt[0] = (hc::ept_alias_gpa + hc::ept_test_pd_gpa) | pte_p | pte_rw;
    epd[test_pd_index] = (hc::ept_alias_gpa + hc::ept_test_pt_gpa) | pte_p | pte_rw;  // A clear: another EPT write
    std::uint64_t pte = (hc::ept_alias_gpa + hc::ept_test_data_gpa) | pte_p | pte_rw;
    if (g.chance(8)) pte &= ~pte_p;
    if (g.chance(4)) pte &= ~pte_rw;
    pt[2] = pte;  // A/D clear: the CPU must write them (an EPT write to the PT page)
    flush_tlb();
    // EPT permissions: R/W/X patterns the CPU accepts (W needs R; no execute-only, which
    // needs a capability), and "not present".
    // "not present" and R/W/X patterns: W needs R (W alone is a misconfiguration, chosen
    // apart below); X alone needs the execute-only capability (hvkit predicts either way).
    static constexpr std::uint8_t perms[] = {0, 1, 3, 4, 5, 7, 7, 7};
    unsigned pd = perms[g.next() % 8], pp = perms[g.next() % 8], pdp = perms[g.next() % 8];
    // Upper EPT levels of the alias (PDE, PDPTE, PML4E): mostly RWX, else random; an EPT
    // large page (2 MiB at the PDE, 1 GiB at the PDPTE); sometimes a misconfiguration.
    std::uint64_t upper = 0;
    for (unsigned lvl = 0; lvl < 3; ++lvl) {
      const std::uint64_t p = g.chance(3) ? perms[g.next() % 8] : 7;
      upper |= p << (lvl == 0 ? 24 : (lvl == 1 ? 27 : 32));
    }
    const unsigned size = static_cast<unsigned>(g.next() % 8);
    const std::uint64_t size_code = size >= 7 ? 3 : (size >= 5 ? 2 : 0);
    upper |= size_code << 36;
    if (g.chance(8)) upper |= ((1 + g.next() % 3) << 40) | ((g.next() % 4) << 42);
    unsigned kind = static_cast<unsigned>(g.next() % 3);
    std::uint64_t la = test_la + 0x2000 + (kind == 2 ? 0 : 0x100);
    std::uint64_t access = kind == 1 ? 0x2 : (kind == 2 ? 0x10 : 0);
    vmcall(hc::ept_arm, la, access, pd | (pp << 8) | (pdp << 16) | upper);
    g_fault_error = 0;
    g_fault_cr2 = 0;
    unsigned r;
    if (kind == 0) r = probe_read64(reinterpret_cast<const std::uint64_t*>(la));
    else if (kind == 1) r = probe_write64(reinterpret_cast<std::uint64_t*>(la), 0x5A5A5A5A5A5A5A5Aull);
    else r = probe_fetch(reinterpret_cast<const void*>(la));
    if (kind == 1 && r == 0) *reinterpret_cast<volatile std::uint8_t*>(hc::ept_test_data_gpa) = 0xC3;
    // RSI: the case (EPT permissions of data and PT page, access kind, guest PTE) for reports.
    std::uint64_t info = pd | (pp << 4) | (kind << 8) | ((pte & 0xFFF) << 16) | (std::uint64_t{pdp} << 32) |
                         (((upper >> 24) & 0x7FF) << 36) | (size_code << 48) | (((upper >> 40) & 0xF) << 52);
    if (vmcall(hc::ept_check, r, g_fault_error, g_fault_cr2, info) != 0) ++mismatches;
  }
  pml4[1] = 0;
  test_pdpt[0] = 0;
  flush_tlb();
  // The verdicts are the hypervisor's (it classifies the emulated CPU's errata).
  static_cast<void>(mismatches);
}
