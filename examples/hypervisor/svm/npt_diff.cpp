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
constexpr std::uint64_t np_p = 1, np_rw = 2, np_us = 4, np_ps = 0x80, np_nx = 1ull << 63;
constexpr std::uint64_t alias_base = hc::ept_alias_gpa;  // 512 GiB
constexpr std::uint64_t region = 0x1C00000;               // guest [28 MiB, 30 MiB)

/// The properties the differential predicts with: the guest CPU model's MAXPHYADDR and 1-GByte
/// pages, the library's defaults for the two properties measured below.
pg::cpu_properties npt_diff_properties(const cpuid_ns::guest_cpu_model& m) { return guest_cpu_properties(m); }


unsigned host_maxphyaddr() { return core::host_maxphyaddr(); }

/// The alias (conformance_npt::alias_*, entry 1 of guest A's nested PML4) mapping [28 MiB,
/// 30 MiB) read-write in 4 KiB pages.
void npt_alias_reset(conformance_npt& npt, current_vmcb& vmcb) {
  std::uint64_t *const npt_alias_pt = npt.alias_pt, *const npt_alias_pd = npt.alias_pd;
  std::uint64_t *const npt_alias_pdpt = npt.alias_pdpt;
  for (std::uint64_t i = 0; i < 512; ++i) npt_alias_pt[i] = (region + (i << 12)) | np_p | np_rw | np_us;
  for (unsigned i = 0; i < 512; ++i) npt_alias_pd[i] = npt_alias_pdpt[i] = 0;
  npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | np_p | np_rw | np_us;
  npt_alias_pdpt[0] = pa(npt_alias_pd) | np_p | np_rw | np_us;
  npt.pml4[1] = pa(npt_alias_pdpt) | np_p | np_rw | np_us;
  set_tlb_control(vmcb, sv::tlb_control::flush_all);  // the nested entries changed: flush (15.16.1)
}

std::uint64_t perm_entry(const npt_diff_state& nd, unsigned p) {
  // Without host NXE bit 63 is reserved (15.25.5): the no-NXE cases leave it clear.
  return (p & 1 ? np_p : 0) | (p & 2 ? np_rw : 0) | np_us | (p & 4 || nd.host_nxe_off ? 0 : np_nx);
}

/// Applies hc::ept_arm's layout (hypercall.hpp) to the alias.
unsigned npt_apply_case(conformance_npt& npt, current_vmcb& vmcb, const npt_diff_state& nd, std::uint64_t d) {
  npt_alias_reset(npt, vmcb);
  std::uint64_t *const npt_pml4 = npt.pml4, *const npt_alias_pt = npt.alias_pt, *const npt_alias_pd = npt.alias_pd;
  std::uint64_t *const npt_alias_pdpt = npt.alias_pdpt;
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
  npt_pml4[1] = pa(npt_alias_pdpt) | perm_entry(nd, perm[5]);
  std::uint64_t* leaf = &npt_alias_pt[2];
  if (size == 3) {
    npt_alias_pdpt[0] = perm_entry(nd, perm[4]) | np_ps;  // 1 GiB at host 0 (this one case)
    leaf = &npt_alias_pdpt[0];
  } else {
    npt_alias_pdpt[0] = pa(npt_alias_pd) | perm_entry(nd, perm[4]);
    if (size == 2) {
      npt_alias_pd[(region >> 21) & 511] = region | perm_entry(nd, perm[3]) | np_ps;
      leaf = &npt_alias_pd[(region >> 21) & 511];
    } else {
      npt_alias_pd[(region >> 21) & 511] = pa(npt_alias_pt) | perm_entry(nd, perm[3]);
      npt_alias_pt[1] = (region + 0x1000) | perm_entry(nd, perm[1]);
      npt_alias_pt[2] = (region + 0x2000) | perm_entry(nd, perm[0]);
      npt_alias_pt[3] = (region + 0x3000) | perm_entry(nd, perm[2]);
    }
  }
  if (bad) {
    std::uint64_t* at[4] = {leaf, &npt_alias_pd[(region >> 21) & 511], &npt_alias_pdpt[0], &npt_pml4[1]};
    *at[level] |= bad;
  }
  if (nd.pml4e_bit8) npt_pml4[1] |= 1ull << 8;  // issue 25 item 8
  return size;
}

/// The memory the nested walk reads: host-physical memory from 1 MiB (the nested page tables
/// live in the hypervisor's image) to the end of guest A's RAM.
pg::flat_memory host_ram_view() {
  return {reinterpret_cast<std::uint8_t*>(0x100000), layout::guest_mem_base + layout::guest_mem_size - 0x100000,
          x86::gpa{0x100000}};
}

/// The outcome hvkit predicts for the armed case under processor properties `props`.
struct npt_prediction {
  bool npf = false;
  std::uint64_t info = 0, gpa = 0;
  std::uint32_t result = 0, error = 0;
};
npt_prediction npt_predict(current_vmcb& vmcb, const guest_paging_regs& g, std::uint64_t la, x86::pfec access,
                           const pg::cpu_properties& props) {
  npt_prediction p;
  const pg::cpu_role role = pg::make_cpu_role(g.cr0, g.cr4, g.efer);
  const pg::mmu_context mmu{role, x86::cr3_root(g.cr3, role.mode(), props.maxphyaddr)};
  // The nested tables have the host's format at VMRUN (long mode, 4 levels) and its EFER.NXE
  // (15.25.3, 15.25.5): the host's own CR4 and EFER, as VMRUN does not switch them.
  using host_format = pg::format::ia32e<4>;
  const pg::npt_walker<host_format> npt{x86::hpa{sv::read(vmcb, fld::n_cr3)},
                                        pg::make_npt_host(x86::cr4{read_cr4()}, x86::efer{rdmsr(x86::msr::ia32_efer)}),
                                        props};
  const pg::nested_walker<pg::format::ia32e<4>, pg::npt_walker<host_format>> walker{
      pg::basic_walker<pg::format::ia32e<4>>{mmu, props}, npt};
  pg::walk_request req{};
  req.linear = x86::gva{la};
  req.access = access;
  req.rflags = g.rflags;
  const pg::nested_result res = walker.check(host_ram_view(), mmu, req);
  if (res.has_value()) return p;
  const pg::walk_fault& f = res.error();
  const auto npf = sv::npf_from_fault(f);
  if (npf.has_value()) {
    p.npf = true;
    p.info = npf.value().error.raw();
    p.gpa = npf.value().address.value();
  } else if (npf.error() == sv::not_npf::guest_stage) {
    p.result = 0x100 | static_cast<std::uint32_t>(f.vector);
    p.error = static_cast<std::uint32_t>(f.error_code.hardware_bits().raw());
  } else {
    p.result = 0xFFFF;  // no architectural outcome (unbacked memory): a mismatch
  }
  return p;
}
}  // namespace

/// hc::ept_arm on SVM: apply the layout, predict with the library's nested walk over NPT. The
/// walk only checks (no A/D writes): the guest's entries have A clear, and the NPT stage
/// treats every guest page-table access as a write whether or not it sets A (15.25.5).
void npt_arm(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd, const cpuid_ns::guest_cpu_model& model,
             guest_regs& r) {
  using enum x86::gpr;
  const std::uint64_t la = r[rbx];
  const x86::pfec access{r[rcx]};
  nd.armed = true;
  nd.seen = false;
  // Issue 25 items 7-8: every third case without host NXE (if the host has NX), every fifth
  // of the others with bit 8 in the nested PML4E.
  const bool host_nx = (cpuid(0x80000001).edx >> 20) & 1;
  nd.host_nxe_off = host_nx && nd.cases % 3 == 1;
  nd.pml4e_bit8 = !nd.host_nxe_off && nd.cases % 5 == 2;  // one question per case
  if (nd.host_nxe_off) wrmsr(x86::msr::ia32_efer, rdmsr(x86::msr::ia32_efer) & ~x86::efer::nxe.raw());
  const unsigned size = npt_apply_case(npt, vmcb, nd, r[rdx]);
  if (size) ++nd.large_cases;
  const pg::cpu_properties props = npt_diff_properties(model);
  const guest_paging_regs live = live_paging_regs(vmcb);
  const npt_prediction p = npt_predict(vmcb, live, la, access, props);
  nd.pred_npf = p.npf;
  nd.pred_info = p.info;
  nd.pred_gpa = p.gpa;
  nd.pred_result = p.result;
  nd.pred_error = p.error;
  nd.alt_differs = false;
  if (nd.host_nxe_off || nd.pml4e_bit8) {
    pg::cpu_properties alt = props;
    if (nd.host_nxe_off) alt.npf_fetch_id_without_nxe = !alt.npf_fetch_id_without_nxe;
    if (nd.pml4e_bit8) alt.amd_nonleaf_bit8 = !alt.amd_nonleaf_bit8;
    const npt_prediction q = npt_predict(vmcb, live, la, access, alt);
    nd.alt_pred_npf = q.npf;
    nd.alt_pred_info = q.info;
    nd.alt_pred_gpa = q.gpa;
    nd.alt_pred_result = q.result;
    nd.alt_pred_error = q.error;
    nd.alt_differs = q.npf != p.npf || q.info != p.info || q.gpa != p.gpa || q.result != p.result || q.error != p.error;
  }
}

/// A #NPF inside the alias while a case is armed: recorded, the alias made RWX again, the
/// guest retries (and completes the access).
bool npt_case_npf(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd) {
  const sv::npf_info npf = sv::decode_npf(sv::read(vmcb, fld::exit_info_1), sv::read(vmcb, fld::exit_info_2));
  const std::uint64_t gpa = npf.address.value();
  if (!nd.armed || gpa < alias_base || gpa >= alias_base + (1ull << 30)) return false;
  if (!nd.seen) {
    nd.seen = true;
    nd.seen_info = npf.error.raw();
    nd.seen_gpa = gpa;
  }
  npt_alias_reset(npt, vmcb);
  return true;
}

/// hc::ept_check on SVM: compare. The error code bits P, W, U, RSV, I/D and bits 32/33 must
/// agree, and the guest-physical address.
std::uint64_t npt_check(conformance_npt& npt, current_vmcb& vmcb, npt_diff_state& nd, guest_regs& r, core::tally& t) {
  using enum x86::gpr;
  const auto cpu_result = static_cast<std::uint32_t>(r[rbx]);
  const auto cpu_error = static_cast<std::uint32_t>(r[rcx]);
  using E = sv::npf_error_code;
  constexpr std::uint64_t mask = E::present::mask | E::write::mask | E::user::mask | E::reserved::mask |
                                 E::fetch::mask | E::final_translation::mask | E::guest_page_table::mask;
  const auto agrees = [&](bool npf, std::uint64_t info, std::uint64_t gpa, std::uint32_t result, std::uint32_t error) {
    if (npf) return nd.seen && (nd.seen_info & mask) == (info & mask) && nd.seen_gpa == gpa;
    return !nd.seen && cpu_result == result && (cpu_result == 0 || cpu_error == error);
  };
  bool same;
  if (nd.pred_npf) {
    same = agrees(true, nd.pred_info, nd.pred_gpa, 0, 0);
    // QEMU 7.2 TCG erratum Q1 on the nested stage: a #NPF for a reserved bit reports P = 0
    // (APM 15.25.6: EXITINFO1 has the #PF error-code layout, where RSVD implies P; SDM 4.7).
    // Classified only when the address and every other bit agree; counted apart.
    if (!same && nd.seen && nd.seen_gpa == nd.pred_gpa && (nd.pred_info & (E::present::mask | E::reserved::mask)) ==
                                                           (E::present::mask | E::reserved::mask) &&
        (nd.seen_info & mask) == (nd.pred_info & mask & ~E::present::mask)) {
      if (nd.errata_q1++ == 0 && ++t.errata)
        kprintf("HVKIT ERRATUM rsvd_npf_without_p case_info=0x%llx gpa=0x%llx cpu_exitinfo1=0x%llx apm_exitinfo1=0x%llx\n",
                (unsigned long long)r[rsi], (unsigned long long)nd.seen_gpa, (unsigned long long)nd.seen_info,
                (unsigned long long)nd.pred_info);
      same = true;
    }
  } else {
    same = agrees(false, 0, 0, nd.pred_result, nd.pred_error);
  }
  if (nd.host_nxe_off) {
    ++nd.nonxe_cases;
    if (nd.seen && ((r[rsi] >> 8) & 3) == 2) ++nd.nonxe_fetch_npfs;
  }
  if (nd.pml4e_bit8) ++nd.bit8_cases;
  bool property_answer = false;  // the CPU followed the flipped property: measured, no mismatch
  if (nd.alt_differs && !same) {
    // Which hypothesis the CPU followed (the default's, or the flipped property's). Both are
    // processor behaviours the properties allow; npt_diff_report requires that a CPU answers
    // each question the same way every time.
    property_answer =
        agrees(nd.alt_pred_npf, nd.alt_pred_info, nd.alt_pred_gpa, nd.alt_pred_result, nd.alt_pred_error);
    // The same with QEMU's erratum Q1 (a reserved-bit #NPF without P), attributed as above.
    if (!property_answer && nd.alt_pred_npf && nd.seen && nd.seen_gpa == nd.alt_pred_gpa &&
        (nd.alt_pred_info & (E::present::mask | E::reserved::mask)) == (E::present::mask | E::reserved::mask) &&
        (nd.seen_info & mask) == (nd.alt_pred_info & mask & ~E::present::mask)) {
      property_answer = true;
      if (nd.errata_q1++ == 0) ++t.errata;
    }
  }
  if (nd.alt_differs) {
    const pg::cpu_properties props{};  // the defaults of the two measured properties (as in npt_arm)
    const bool alt = property_answer;
    if (nd.host_nxe_off && !nd.pml4e_bit8) {
      ++nd.id_split;
      if (same) ++(props.npf_fetch_id_without_nxe ? nd.id_set : nd.id_clear);
      if (alt) ++(props.npf_fetch_id_without_nxe ? nd.id_clear : nd.id_set);
    } else if (nd.pml4e_bit8 && !nd.host_nxe_off) {
      ++nd.bit8_split;
      if (same) ++(props.amd_nonleaf_bit8 ? nd.bit8_reserved : nd.bit8_ignored);
      if (alt) ++(props.amd_nonleaf_bit8 ? nd.bit8_ignored : nd.bit8_reserved);
    }
  }
  if (nd.host_nxe_off) wrmsr(x86::msr::ia32_efer, rdmsr(x86::msr::ia32_efer) | x86::efer::nxe.raw());
  nd.host_nxe_off = false;
  nd.pml4e_bit8 = false;
  ++nd.cases;
  if (nd.seen) {
    ++nd.npfs;
    const E seen{nd.seen_info};
    if (seen.is_guest_page_table_walk()) ++nd.table_npfs;
    if (seen.is_reserved()) ++nd.rsv_npfs;
  }
  if (cpu_result != 0) ++nd.guest_faults;
  if (!same && !property_answer && ++nd.mismatches <= 12)
    kprintf("HVKIT MISMATCH npt case=%llu case_info=0x%llx cpu: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x "
            "hvkit: npf=%d info=0x%llx gpa=0x%llx guest=0x%x/0x%x\n",
            (unsigned long long)nd.cases, (unsigned long long)r[rsi], nd.seen ? 1 : 0,
            (unsigned long long)nd.seen_info, (unsigned long long)nd.seen_gpa, cpu_result, cpu_error,
            nd.pred_npf ? 1 : 0, (unsigned long long)nd.pred_info, (unsigned long long)nd.pred_gpa, nd.pred_result,
            nd.pred_error);
  nd.armed = false;
  nd.seen = false;
  npt_alias_reset(npt, vmcb);
  return same || property_answer ? 0 : 1;
}



void npt_diff_report(core::tally& t, conformance_npt& npt, const npt_diff_state& nd,
                     const cpuid_ns::guest_cpu_model& model) {
  result(t, "npt_differential", nd.cases >= 2000 && nd.mismatches == 0 && nd.table_npfs > 0 && nd.rsv_npfs > 0,
         "cases=%llu mismatches=%llu npfs=%llu guest_table_npfs=%llu reserved_bit_npfs=%llu large_page_cases=%llu "
         "guest_faults=%llu qemu_q1_errata=%llu",
         (unsigned long long)nd.cases, (unsigned long long)nd.mismatches, (unsigned long long)nd.npfs,
         (unsigned long long)nd.table_npfs, (unsigned long long)nd.rsv_npfs, (unsigned long long)nd.large_cases,
         (unsigned long long)nd.guest_faults, (unsigned long long)nd.errata_q1);
  npt.pml4[1] = 0;  // the alias exists only during this run
  // Issue 25 items 7-8: the CPU's answer where the two values of a property predict
  // differently (the differential above uses the defaults).
  const pg::cpu_properties props = npt_diff_properties(model);
  kprintf("HVKIT NPT-PROPERTY npf_fetch_id_without_nxe default=%d no_nxe_cases=%llu no_nxe_fetch_npfs=%llu "
          "split=%llu cpu_id_set=%llu cpu_id_clear=%llu\n",
          props.npf_fetch_id_without_nxe ? 1 : 0, (unsigned long long)nd.nonxe_cases,
          (unsigned long long)nd.nonxe_fetch_npfs, (unsigned long long)nd.id_split, (unsigned long long)nd.id_set,
          (unsigned long long)nd.id_clear);
  kprintf("HVKIT NPT-PROPERTY amd_nonleaf_bit8 default=%d bit8_cases=%llu split=%llu cpu_reserved=%llu "
          "cpu_ignored=%llu\n",
          props.amd_nonleaf_bit8 ? 1 : 0, (unsigned long long)nd.bit8_cases, (unsigned long long)nd.bit8_split,
          (unsigned long long)nd.bit8_reserved, (unsigned long long)nd.bit8_ignored);
  // Each property answered, and the same way in every case (a CPU that mixes is wrong).
  const bool id_ok = nd.id_split > 0 && (nd.id_set == 0 || nd.id_clear == 0) && nd.id_set + nd.id_clear == nd.id_split;
  const bool bit8_ok = nd.bit8_split > 0 && (nd.bit8_reserved == 0 || nd.bit8_ignored == 0) &&
                       nd.bit8_reserved + nd.bit8_ignored == nd.bit8_split;
  result(t, "npt_properties", id_ok && bit8_ok,
         "npf_fetch_id_without_nxe=%s (%llu/%llu, default %d) amd_nonleaf_bit8=%s (%llu/%llu, default %d)",
         nd.id_set ? "1" : "0", (unsigned long long)(nd.id_set ? nd.id_set : nd.id_clear),
         (unsigned long long)nd.id_split, props.npf_fetch_id_without_nxe ? 1 : 0, nd.bit8_reserved ? "1" : "0",
         (unsigned long long)(nd.bit8_reserved ? nd.bit8_reserved : nd.bit8_ignored),
         (unsigned long long)nd.bit8_split, props.amd_nonleaf_bit8 ? 1 : 0);
}

}  // namespace hv::svm
