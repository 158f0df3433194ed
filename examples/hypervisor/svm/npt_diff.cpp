// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend: the NPT differential (hc::ept_arm / hc::ept_check
// on SVM), hvkit's two-dimensional walk over nested paging against the CPU's #NPF exits.
#include <hvkit/paging/npt.hpp>
#include <hvkit/svm/npf.hpp>

#include "svm.hpp"
#include "svm_internal.hpp"

namespace hv::svm {

namespace {

// ---- the NPT differential -------------------------------------------------------------------
// The EPT differential's guest (check_ept_differential) on nested paging: the guest's PD page,
// PT page and data page are reached through an alias at GPA 512 GiB + their address, whose
// nested entries (PML4E, PDPTE, PDE, and the PTE of each page) get the case's permission
// patterns (bit 0 -> P, bit 1 -> RW, bit 2 clear -> NX), a 2 MiB or 1 GiB nested page, or a
// reserved bit (a bit at or above MAXPHYADDR). The access is done natively; the hypervisor
// predicts #NPF (EXITINFO1 error code and bits 32/33, EXITINFO2 the guest-physical address)
// or the guest's own outcome with hvkit's two-dimensional walk: paging::nested_walker over
// the guest's 4-level tables with paging::npt_walker as the second stage (APM 15.25.5: every
// nested access a user access, guest page-table accesses writes, NX under the host's
// EFER.NXE, the host's reserved bits), the #NPF exit information from its fault by
// svm::npf_from_fault (15.25.6). The CPU is the oracle.
alignas(4096) std::uint64_t npt_alias_pdpt[512];
alignas(4096) std::uint64_t npt_alias_pd[512];
alignas(4096) std::uint64_t npt_alias_pt[512];
constexpr std::uint64_t np_p = 1, np_rw = 2, np_us = 4, np_ps = 0x80, np_nx = 1ull << 63;
constexpr std::uint64_t alias_base = hc::ept_alias_gpa;  // 512 GiB
constexpr std::uint64_t region = 0x1C00000;               // guest [28 MiB, 30 MiB)

struct npt_diff_state {
  bool armed;
  bool pred_npf;
  std::uint64_t pred_info, pred_gpa;
  std::uint32_t pred_result, pred_error;
  bool seen;
  std::uint64_t seen_info, seen_gpa;
  std::uint64_t cases, mismatches, npfs, table_npfs, rsv_npfs, guest_faults, large_cases, errata_ad, errata_q1;
};
constinit npt_diff_state nd{};


unsigned host_maxphyaddr() { return guest_cpu_properties().maxphyaddr; }

void npt_alias_reset() {
  for (std::uint64_t i = 0; i < 512; ++i) npt_alias_pt[i] = (region + (i << 12)) | np_p | np_rw | np_us;
  for (auto& e : npt_alias_pd) e = 0;
  for (auto& e : npt_alias_pdpt) e = 0;
  npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | np_p | np_rw | np_us;
  npt_alias_pdpt[0] = pa(npt_alias_pd) | np_p | np_rw | np_us;
  npt_pml4[1] = pa(npt_alias_pdpt) | np_p | np_rw | np_us;
  set_tlb_control(sv::tlb_control::flush_all);  // the nested entries changed: flush (15.16.1)
}

std::uint64_t perm_entry(unsigned p) { return (p & 1 ? np_p : 0) | (p & 2 ? np_rw : 0) | np_us | (p & 4 ? 0 : np_nx); }

/// Applies hc::ept_arm's layout (hypercall.hpp) to the alias.
unsigned npt_apply_case(std::uint64_t d) {
  npt_alias_reset();
  unsigned perm[6] = {static_cast<unsigned>(d & 7),         static_cast<unsigned>((d >> 8) & 7),
                      static_cast<unsigned>((d >> 16) & 7), static_cast<unsigned>((d >> 24) & 7),
                      static_cast<unsigned>((d >> 27) & 7), static_cast<unsigned>((d >> 32) & 7)};
  // [0] data PTE, [1] PT page PTE, [2] PD page PTE, [3] PDE, [4] PDPTE, [5] PML4E
  const unsigned size = (d >> 36) & 3, kind = (d >> 40) & 3, level = (d >> 42) & 3;
  std::uint64_t bad = 0;
  if (kind == 1) perm[level == 0 ? 0 : level + 2] = 2;  // "W without R": not present here
  const unsigned maxpa = host_maxphyaddr();
  if (kind == 2 && maxpa < 52) bad = 1ull << maxpa;
  if (kind == 3 && maxpa < 51) bad = 1ull << 51;
  npt_pml4[1] = pa(npt_alias_pdpt) | perm_entry(perm[5]);
  std::uint64_t* leaf = &npt_alias_pt[2];
  if (size == 3) {
    npt_alias_pdpt[0] = perm_entry(perm[4]) | np_ps;  // 1 GiB at host 0 (this one case)
    leaf = &npt_alias_pdpt[0];
  } else {
    npt_alias_pdpt[0] = pa(npt_alias_pd) | perm_entry(perm[4]);
    if (size == 2) {
      npt_alias_pd[(region >> 21) & 511] = region | perm_entry(perm[3]) | np_ps;
      leaf = &npt_alias_pd[(region >> 21) & 511];
    } else {
      npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | perm_entry(perm[3]);
      npt_alias_pt[1] = (region + 0x1000) | perm_entry(perm[1]);
      npt_alias_pt[2] = (region + 0x2000) | perm_entry(perm[0]);
      npt_alias_pt[3] = (region + 0x3000) | perm_entry(perm[2]);
    }
  }
  if (bad) {
    std::uint64_t* at[4] = {leaf, &npt_alias_pd[(region >> 21) & 511], &npt_alias_pdpt[0], &npt_pml4[1]};
    *at[level] |= bad;
  }
  return size;
}

/// The memory the nested walk reads: host-physical memory from 1 MiB (the nested page tables
/// live in the hypervisor's image) to the end of guest A's RAM.
pg::flat_memory host_ram_view() {
  return {reinterpret_cast<std::uint8_t*>(0x100000), layout::guest_mem_base + layout::guest_mem_size - 0x100000,
          x86::gpa{0x100000}};
}

/// hc::ept_arm on SVM: apply the layout, predict with the library's nested walk over NPT. The
/// walk only checks (no A/D writes): the guest's entries have A clear, and the NPT stage
/// treats every guest page-table access as a write whether or not it sets A (15.25.5).
}  // namespace

void npt_arm(guest_regs& r) {
  using enum x86::gpr;
  const std::uint64_t la = r[rbx];
  const x86::pfec access{r[rcx]};
  nd.armed = true;
  nd.seen = false;
  const unsigned size = npt_apply_case(r[rdx]);
  if (size) ++nd.large_cases;
  nd.pred_npf = false;
  nd.pred_result = 0;
  nd.pred_error = 0;
  const pg::cpu_properties props = guest_cpu_properties();
  const guest_paging_regs g = live_paging_regs();
  const pg::cpu_role role = pg::make_cpu_role(g.cr0, g.cr4, g.efer);
  const pg::mmu_context mmu{role, x86::cr3_root(g.cr3, role.mode(), props.maxphyaddr)};
  // The nested tables have the host's format at VMRUN (long mode, 4 levels) and its EFER.NXE
  // (15.25.3, 15.25.5): the host's own CR4 and EFER, as VMRUN does not switch them.
  using host_format = pg::format::ia32e<4>;
  const pg::npt_walker<host_format> npt{sv::read(vmcb, fld::n_cr3),
                                        pg::make_npt_host(x86::cr4{read_cr4()}, x86::efer{rdmsr(x86::msr::ia32_efer)}),
                                        props};
  const pg::nested_walker<pg::format::ia32e<4>, pg::npt_walker<host_format>> walker{
      pg::basic_walker<pg::format::ia32e<4>>{mmu, props}, npt};
  pg::walk_request req{};
  req.linear = x86::gva{la};
  req.access = access;
  req.rflags = g.rflags;
  const pg::nested_result res = walker.check(host_ram_view(), mmu, req);
  if (res.has_value()) return;
  const pg::walk_fault& f = res.error();
  const auto npf = sv::npf_from_fault(f);
  if (npf.has_value()) {
    nd.pred_npf = true;
    nd.pred_info = npf.value().error.raw();
    nd.pred_gpa = npf.value().address.value();
  } else if (npf.error() == sv::not_npf::guest_stage) {
    nd.pred_result = 0x100 | static_cast<std::uint32_t>(f.vector);
    nd.pred_error = static_cast<std::uint32_t>(f.error_code.hardware_bits().raw());
  } else {
    nd.pred_result = 0xFFFF;  // no architectural outcome (unbacked memory): a mismatch
  }
}

/// A #NPF inside the alias while a case is armed: recorded, the alias made RWX again, the
/// guest retries (and completes the access).
bool npt_case_npf() {
  const sv::npf_info npf = sv::decode_npf(sv::read(vmcb, fld::exit_info_1), sv::read(vmcb, fld::exit_info_2));
  const std::uint64_t gpa = npf.address.value();
  if (!nd.armed || gpa < alias_base || gpa >= alias_base + (1ull << 30)) return false;
  if (!nd.seen) {
    nd.seen = true;
    nd.seen_info = npf.error.raw();
    nd.seen_gpa = gpa;
  }
  npt_alias_reset();
  return true;
}

/// hc::ept_check on SVM: compare. The error code bits P, W, U, RSV, I/D and bits 32/33 must
/// agree, and the guest-physical address.
std::uint64_t npt_check(guest_regs& r) {
  using enum x86::gpr;
  const auto cpu_result = static_cast<std::uint32_t>(r[rbx]);
  const auto cpu_error = static_cast<std::uint32_t>(r[rcx]);
  using E = sv::npf_error_code;
  constexpr std::uint64_t mask = E::present::mask | E::write::mask | E::user::mask | E::reserved::mask |
                                 E::fetch::mask | E::final_translation::mask | E::guest_page_table::mask;
  bool same;
  if (nd.pred_npf) {
    same = nd.seen && (nd.seen_info & mask) == (nd.pred_info & mask) && nd.seen_gpa == nd.pred_gpa;
    // QEMU 7.2 TCG erratum Q1 on the nested stage: a #NPF for a reserved bit reports P = 0
    // (APM 15.25.6: EXITINFO1 has the #PF error-code layout, where RSVD implies P; SDM 4.7).
    // Classified only when the address and every other bit agree; counted apart.
    if (!same && nd.seen && nd.seen_gpa == nd.pred_gpa && (nd.pred_info & (E::present::mask | E::reserved::mask)) ==
                                                           (E::present::mask | E::reserved::mask) &&
        (nd.seen_info & mask) == (nd.pred_info & mask & ~E::present::mask)) {
      if (nd.errata_q1++ == 0 && ++results_errata)
        kprintf("HVKIT ERRATUM rsvd_npf_without_p case_info=0x%llx gpa=0x%llx cpu_exitinfo1=0x%llx apm_exitinfo1=0x%llx\n",
                (unsigned long long)r[rsi], (unsigned long long)nd.seen_gpa, (unsigned long long)nd.seen_info,
                (unsigned long long)nd.pred_info);
      same = true;
    }
  } else {
    same = !nd.seen && cpu_result == nd.pred_result && (cpu_result == 0 || cpu_error == nd.pred_error);
  }
  ++nd.cases;
  if (nd.seen) {
    ++nd.npfs;
    const E seen{nd.seen_info};
    if (seen.is_guest_page_table_walk()) ++nd.table_npfs;
    if (seen.is_reserved()) ++nd.rsv_npfs;
  }
  if (cpu_result != 0) ++nd.guest_faults;
  if (!same && ++nd.mismatches <= 12)
    kprintf("HVKIT MISMATCH npt case=%llu case_info=0x%llx cpu: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x "
            "hvkit: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x\n",
            (unsigned long long)nd.cases, (unsigned long long)r[rsi], nd.seen ? 1 : 0,
            (unsigned long long)nd.seen_info, (unsigned long long)nd.seen_gpa, cpu_result, cpu_error,
            nd.pred_npf ? 1 : 0, (unsigned long long)nd.pred_info, (unsigned long long)nd.pred_gpa, nd.pred_result,
            nd.pred_error);
  nd.armed = false;
  nd.seen = false;
  npt_alias_reset();
  return same ? 0 : 1;
}



void npt_diff_reset() { nd = npt_diff_state{}; }

void npt_diff_report() {
  result("npt_differential", nd.cases >= 2000 && nd.mismatches == 0 && nd.table_npfs > 0 && nd.rsv_npfs > 0,
         "cases=%llu mismatches=%llu npfs=%llu guest_table_npfs=%llu reserved_bit_npfs=%llu large_page_cases=%llu "
         "guest_faults=%llu qemu_q1_errata=%llu",
         (unsigned long long)nd.cases, (unsigned long long)nd.mismatches, (unsigned long long)nd.npfs,
         (unsigned long long)nd.table_npfs, (unsigned long long)nd.rsv_npfs, (unsigned long long)nd.large_cases,
         (unsigned long long)nd.guest_faults, (unsigned long long)nd.errata_q1);
  npt_pml4[1] = 0;  // the alias exists only during this run
}

}  // namespace hv::svm
