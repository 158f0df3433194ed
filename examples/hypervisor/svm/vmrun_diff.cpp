// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, SVM backend: the CPU as the oracle for VMRUN's consistency
// checks (AMD APM Vol. 2, 15.5.1 "Canonicalization and Consistency Checks", 15.20 "Event
// Injection", 15.25.3/15.25.4 nested paging), the SVM counterpart of vmx/entry_diff.cpp.
//
// Start from a valid VMCB of this file's own (a 64-bit guest under nested paging whose first
// instruction is VMMCALL, every exception intercepted), apply one to three mutations (the
// fixed list first: each mutation alone, then random combinations with a fixed seed), ask
// hvkit::svm::vmrun_violations for its verdict, execute VMRUN and compare what the CPU did:
// #VMEXIT(VMEXIT_INVALID, exit code -1) or an entered guest (any other exit code: VMMCALL,
// an intercepted exception, #NPF, ...). The VMCB comes from library types (svm/vmcb.hpp,
// vmcb_fields.hpp); only the VMRUN itself (svm_vmrun, svm_entry.cpp) is the backend's.
//
// Classification of a case:
//   agree     the CPU did what hvkit said;
//   erratum   the CPU deviates from the APM in a known, documented way (docs/svm.md,
//             "VMRUN differential"): hvkit's verdict with that check removed (or with the
//             CPU's extra check added) is what the CPU did; counted per erratum;
//   mismatch  anything else (the run fails if there is one).
// The CPU model is named in every summary line (Bochs, or Linux KVM on it: CPUID leaf
// 0x40000000 "KVMKVMKVM"); under KVM no KVM model exists yet, so a KVM deviation is a mismatch
// printed with its mutations, violations and exit code.
#include "svm.hpp"
#include "svm_internal.hpp"

#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/vmcb.hpp>
#include <hvkit/svm/vmcb_fields.hpp>
#include <hvkit/svm/vmrun_checks.hpp>

#include "../hv.hpp"

extern "C" void svm_vmrun(hv::vmx::guest_regs* regs, std::uint64_t vmcb_pa, std::uint64_t host_save_pa,
                          std::uint64_t host_if);

namespace hv::svm {

namespace {

namespace hs = hvkit::svm;
namespace f = hvkit::svm::fields;
using hs::vmrun_error;

/// The differential's own pages (the boot's pool, taken when it runs): the VMCB VMRUN runs,
/// the valid one every case starts from and the case as VMRUN got it, the host's VMSAVE area,
/// permission maps that intercept everything and the nested page table.
struct diff_pages {
  hs::vmcb_page *vmcb, *baseline, *before;
  std::uint8_t* host_save;
  std::uint8_t *msrpm, *iopm;  ///< 8 KiB, 12 KiB
  std::uint64_t *npt_pml4, *npt_pdpt, *npt_pd;
};
diff_pages take_diff_pages(core::page_pool& pool) {
  diff_pages d{};
  d.vmcb = &make<hs::vmcb_page>(pool);
  d.baseline = &make<hs::vmcb_page>(pool);
  d.before = &make<hs::vmcb_page>(pool);
  d.host_save = pool.take_page();
  d.msrpm = static_cast<std::uint8_t*>(pool.take_bytes(8192));
  d.iopm = static_cast<std::uint8_t*>(pool.take_bytes(12288));
  d.npt_pml4 = pool.take_table();
  d.npt_pdpt = pool.take_table();
  d.npt_pd = pool.take_table();
  return d;
}

// The guest: its page tables and one VMMCALL in guest RAM, 2 MiB below the boot page tables
// of the conformance guest (the diff runs after every conformance run).
constexpr std::uint64_t g_pml4 = layout::guest_mem_base + layout::guest_mem_size - 0x200000;
constexpr std::uint64_t g_pdpt = g_pml4 + 0x1000, g_pd = g_pml4 + 0x2000;
constexpr std::uint64_t g_code = g_pml4 + 0x10000, g_stack = g_pml4 + 0x20000;

struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  unsigned below(unsigned n) { return static_cast<unsigned>(next() % n); }
};

// ---- the processor: what the checks depend on --------------------------------------------
struct cpu_facts {
  hs::vmrun_environment env;
  bool nx = false;
  bool under_kvm = false;
  bool qemu_tcg = false;  ///< QEMU's TCG: the brand string (CPUID Fn8000_0002-4) starts "QEMU TCG"
};

bool bit_of(std::uint32_t r, unsigned b) { return (r >> b) & 1u; }

/// The CR4 and EFER bits this processor implements, from CPUID (APM Vol. 2, 3.1.3 "CR4
/// Register", 3.1.7 "Extended Feature Enable Register"; Vol. 3 Appendix E for the bits).
cpu_facts read_facts() {
  cpu_facts c{};
  const auto l1 = cpuid(1);
  const auto l7 = cpuid(0, 0).eax >= 7 ? cpuid(7, 0) : cpuid_regs{};
  const auto l71 = cpuid(0, 0).eax >= 7 && l7.eax >= 1 ? cpuid(7, 1) : cpuid_regs{};
  const auto e0 = cpuid(0x80000000);
  const auto e1 = cpuid(0x80000001);
  const auto e8 = e0.eax >= 0x80000008 ? cpuid(0x80000008) : cpuid_regs{};
  const auto e21 = e0.eax >= 0x80000021 ? cpuid(0x80000021) : cpuid_regs{};
  c.env.maxphyaddr = e8.eax & 0xff;
  if (!x86::is_valid_maxphyaddr(c.env.maxphyaddr)) c.env.maxphyaddr = 36;
  c.env.long_mode = bit_of(e1.edx, 29);
  c.nx = bit_of(e1.edx, 20);
  using C = x86::cr4;
  C cr4 = C::pce;  // RDPMC at CPL > 0: architectural since the Pentium Pro
  const struct {
    std::uint32_t reg;
    unsigned b;
    C bit;
  } cr4_gates[] = {
      {l1.edx, 1, C::vme},          {l1.edx, 1, C::pvi},         {l1.edx, 4, C::tsd},     {l1.edx, 2, C::de},
      {l1.edx, 3, C::pse},          {l1.edx, 6, C::pae},         {l1.edx, 7, C::mce},     {l1.edx, 13, C::pge},
      {l1.edx, 24, C::osfxsr},      {l1.edx, 25, C::osxmmexcpt}, {l7.ecx, 2, C::umip},    {l7.ecx, 16, C::la57},
      {l1.ecx, 5, C::vmxe},         {l1.ecx, 6, C::smxe},        {l7.ebx, 0, C::fsgsbase}, {l1.ecx, 17, C::pcide},
      {l1.ecx, 26, C::osxsave},     {l7.ecx, 23, C::kl},         {l7.ebx, 7, C::smep},    {l7.ebx, 20, C::smap},
      {l7.ecx, 3, C::pke},          {l7.ecx, 7, C::cet},         {l7.ecx, 31, C::pks},    {l7.edx, 5, C::uintr},
      {l71.eax, 6, C::lass},        {l71.eax, 26, C::lam_sup},   {l71.eax, 17, C::fred},
  };
  for (const auto& g : cr4_gates)
    if (bit_of(g.reg, g.b)) cr4 = cr4 | g.bit;
  c.env.cr4_supported = cr4;
  using E = x86::efer;
  E efer = E::svme;
  if (bit_of(e1.edx, 11)) efer = efer | E::sce;
  if (c.env.long_mode) efer = efer | E::lme | E::lma;
  if (c.nx) efer = efer | E::nxe;
  if (bit_of(e1.edx, 25)) efer = efer | E::ffxsr;
  if (bit_of(e1.ecx, 17)) efer = efer | E::tce;
  if (bit_of(e21.eax, 8)) efer = efer | E::autoibrs;
  // EFER.LMSLE has no CPUID bit saying it is there (Fn8000_0008 EBX[20] says it is not):
  // hvkit treats it as not implemented.
  c.env.efer_supported = efer;
  c.env.host_paging = (read_cr0() & x86::cr0::pg.raw()) != 0;
  c.env.host_long_mode = true;  // the hypervisor runs in long mode
  const auto k = cpuid(0x40000000);
  c.under_kvm = k.ebx == 0x4b4d564b && k.ecx == 0x564b4d56 && k.edx == 0x4d;  // "KVMKVMKVM\0\0\0"
  if (e0.eax >= 0x80000004) {
    const auto b = cpuid(0x80000002);
    c.qemu_tcg = b.eax == 0x554d4551 && b.ebx == 0x47435420;  // "QEMU", " TCG"
  }
  return c;
}

// ---- the baseline ----------------------------------------------------------------------------
void build_guest_memory(const diff_pages& d) {
  constexpr std::uint64_t p = 1, rw = 2, us = 4, ps = 0x80;
  std::uint64_t *const diff_npt_pml4 = d.npt_pml4, *const diff_npt_pdpt = d.npt_pdpt, *const diff_npt_pd = d.npt_pd;
  // Nested page table: guest RAM identity-mapped with 2 MiB pages, nothing else.
  for (unsigned i = 0; i < 512; ++i) diff_npt_pml4[i] = diff_npt_pdpt[i] = diff_npt_pd[i] = 0;
  diff_npt_pml4[0] = pa(diff_npt_pdpt) | p | rw | us;
  diff_npt_pdpt[0] = pa(diff_npt_pd) | p | rw | us;
  for (std::uint64_t a = layout::guest_mem_base; a < layout::guest_mem_base + layout::guest_mem_size; a += 0x200000)
    diff_npt_pd[a >> 21] = a | p | rw | us | ps;
  // The guest's 4-level tables: linear [0, 1 GiB) identity, 2 MiB pages, user-accessible.
  auto* pml4 = reinterpret_cast<std::uint64_t*>(guest_ram(core::conformance_ram, g_pml4, 0x3000));
  auto* pdpt = pml4 + 512;
  auto* pd = pml4 + 1024;
  for (unsigned i = 0; i < 512; ++i) pml4[i] = pdpt[i] = 0;
  pml4[0] = g_pdpt | p | rw | us;
  pdpt[0] = g_pd | p | rw | us;
  for (unsigned i = 0; i < 512; ++i) pd[i] = (std::uint64_t{i} << 21) | p | rw | us | ps;
  std::uint8_t* code = guest_ram(core::conformance_ram, g_code, 16);
  code[0] = 0x0f, code[1] = 0x01, code[2] = 0xd9;  // VMMCALL
  code[3] = 0xf4;                                  // HLT (intercepted too)
  for (unsigned i = 0; i < 8192; ++i) d.msrpm[i] = 0xff;
  for (unsigned i = 0; i < 12288; ++i) d.iopm[i] = 0xff;
}

void set_segment(hs::vmcb_view& v, hs::segment s, std::uint16_t sel, std::uint16_t attrib, std::uint32_t limit,
                 std::uint64_t base) {
  hs::store_segment(v, s, hs::segment_state{x86::selector{sel}, attrib, limit, base});
}

/// A valid 64-bit guest (APM 15.5.1): EFER.SVME, the VMRUN intercept, ASID 1, maps inside
/// the physical-address width, nested paging with the power-on PAT.
void build_baseline(const diff_pages& d, const cpu_facts& facts) {
  *d.baseline = hs::vmcb_page{};
  hs::vmcb_view v{*d.baseline};
  hs::intercept_set is{};
  for (auto i : {hs::intercept::vmrun, hs::intercept::vmmcall, hs::intercept::vmload, hs::intercept::vmsave,
                 hs::intercept::stgi, hs::intercept::clgi, hs::intercept::skinit, hs::intercept::hlt,
                 hs::intercept::cpuid, hs::intercept::shutdown, hs::intercept::ioio_prot, hs::intercept::msr_prot,
                 hs::intercept::invlpga, hs::intercept::intr, hs::intercept::nmi})
    is.set(i);
  for (unsigned vec = 0; vec < 32; ++vec) is.set(hs::exception(vec));  // every fault exits at once
  is.store(v);
  hs::write(v, f::iopm_base_pa, pa(d.iopm));
  hs::write(v, f::msrpm_base_pa, pa(d.msrpm));
  hs::write(v, f::guest_asid, std::uint32_t{1});
  hs::write(v, f::tlb_control, std::uint8_t{1});  // flush this guest's TLB entries (15.16.1)
  hs::write(v, f::nested_control, std::uint64_t{1});
  hs::write(v, f::n_cr3, pa(d.npt_pml4));
  hs::write(v, f::g_pat, std::uint64_t{0x0007'0406'0007'0406});  // power-on PAT (APM Vol. 2, 7.8.2)
  set_segment(v, hs::segment::cs, 0x08, 0xa9b, 0xffffffff, 0);  // 64-bit code, L=1 D=0
  for (auto s : {hs::segment::ss, hs::segment::ds, hs::segment::es, hs::segment::fs, hs::segment::gs})
    set_segment(v, s, 0x10, 0xc93, 0xffffffff, 0);
  set_segment(v, hs::segment::tr, 0x18, 0x08b, 0x67, 0);
  set_segment(v, hs::segment::ldtr, 0, 0, 0, 0);
  hs::write(v, f::efer, x86::efer::svme | x86::efer::lme | x86::efer::lma | (facts.nx ? x86::efer::nxe : x86::efer{}));
  hs::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::et | x86::cr0::ne | x86::cr0::wp);
  hs::write(v, f::cr3, g_pml4);
  hs::write(v, f::cr4, x86::cr4::pae);
  hs::write(v, f::dr6, std::uint64_t{0xffff0ff0});
  hs::write(v, f::dr7, std::uint64_t{0x400});
  hs::write(v, f::rflags, std::uint64_t{0x2});
  hs::write(v, f::rip, g_code);
  hs::write(v, f::rsp, g_stack);
}

// ---- mutations -------------------------------------------------------------------------------
using view = hs::vmcb_view;
/// What a mutation draws from and depends on: the cases' random numbers, the processor's
/// MAXPHYADDR and the differential's permission maps.
struct mutation_input {
  rng& gen;
  unsigned maxphyaddr;
  std::uint64_t msrpm_pa, iopm_pa;
  std::uint64_t next() { return gen.next(); }
  unsigned below(unsigned n) { return gen.below(n); }
};
struct mutation {
  const char* name;
  void (*apply)(view&, mutation_input&);
};

std::uint64_t cr0_of(view& v) { return hs::read(v, f::cr0); }
void set_cr0(view& v, std::uint64_t c) { hs::write(v, f::cr0, c); }
std::uint64_t efer_of(view& v) { return hs::read(v, f::efer); }
void set_efer(view& v, std::uint64_t e) { hs::write(v, f::efer, e); }
std::uint64_t cr4_of(view& v) { return hs::read(v, f::cr4); }
void set_cr4(view& v, std::uint64_t c) { hs::write(v, f::cr4, c); }
std::uint64_t high_bit(mutation_input& r) { return std::uint64_t{1} << (32 + r.below(32)); }
std::uint64_t beyond_maxphyaddr(mutation_input& r) {
  const unsigned m = r.maxphyaddr;
  return std::uint64_t{1} << (m + r.below(64 - m));
}
/// A map base `pages_below` pages under 2^MAXPHYADDR (an n-page map fits iff pages_below >= n).
std::uint64_t map_near_top(const mutation_input& r, unsigned pages_below) {
  return (std::uint64_t{1} << r.maxphyaddr) - std::uint64_t{pages_below} * 0x1000;
}
std::uint16_t cs_attrib(view& v) { return hs::read(v, f::cs_attrib); }
void set_cs_attrib(view& v, std::uint16_t a) { hs::write(v, f::cs_attrib, a); }
/// A vector: mostly 0-33 (the exceptions, the NMI, the reserved ones, the first interrupts).
unsigned some_vector(mutation_input& r) { return r.below(4) == 0 ? r.below(256) : r.below(34); }

// The APM's rules (15.5.1, 15.20, 15.25.4) one by one, a legal neighbour of each, and state
// the APM says VMRUN canonicalizes or does not check.
constexpr mutation mutations[] = {
    {"efer_svme_clear", [](view& v, mutation_input&) { set_efer(v, efer_of(v) & ~x86::efer::svme.raw()); }},
    {"cr0_nw_without_cd", [](view& v, mutation_input&) { set_cr0(v, (cr0_of(v) | x86::cr0::nw.raw()) & ~x86::cr0::cd.raw()); }},
    {"cr0_nw_with_cd", [](view& v, mutation_input&) { set_cr0(v, cr0_of(v) | x86::cr0::nw.raw() | x86::cr0::cd.raw()); }},
    {"cr0_cd", [](view& v, mutation_input&) { set_cr0(v, cr0_of(v) | x86::cr0::cd.raw()); }},
    {"cr0_high_bit", [](view& v, mutation_input& r) { set_cr0(v, cr0_of(v) | high_bit(r)); }},
    {"cr0_ts_mp_em_am", [](view& v, mutation_input& r) { set_cr0(v, cr0_of(v) ^ (r.next() & (x86::cr0::mp | x86::cr0::em | x86::cr0::ts | x86::cr0::am).raw())); }},
    {"cr3_beyond_maxphyaddr", [](view& v, mutation_input& r) { hs::write(v, f::cr3, hs::read(v, f::cr3) | beyond_maxphyaddr(r)); }},
    {"cr3_low_bits", [](view& v, mutation_input& r) { hs::write(v, f::cr3, hs::read(v, f::cr3) | (r.next() & 0xfff)); }},
    {"cr4_any_bit", [](view& v, mutation_input& r) { set_cr4(v, cr4_of(v) | (std::uint64_t{1} << r.below(64))); }},
    {"cr4_bit_below_32", [](view& v, mutation_input& r) { set_cr4(v, cr4_of(v) | (std::uint64_t{1} << r.below(32))); }},
    {"cr4_pae_clear", [](view& v, mutation_input&) { set_cr4(v, cr4_of(v) & ~x86::cr4::pae.raw()); }},
    {"dr6_high_bit", [](view& v, mutation_input& r) { hs::write(v, f::dr6, hs::read(v, f::dr6) | high_bit(r)); }},
    {"dr6_low_bits", [](view& v, mutation_input& r) { hs::write(v, f::dr6, r.next() & 0xffffffff); }},
    {"dr7_high_bit", [](view& v, mutation_input& r) { hs::write(v, f::dr7, hs::read(v, f::dr7) | high_bit(r)); }},
    {"dr7_low_bits", [](view& v, mutation_input& r) { hs::write(v, f::dr7, (r.next() & 0xffff2c00) | 0x400); }},
    {"efer_any_bit", [](view& v, mutation_input& r) { set_efer(v, efer_of(v) | (std::uint64_t{1} << r.below(64))); }},
    {"efer_bit_below_16", [](view& v, mutation_input& r) { set_efer(v, efer_of(v) | (std::uint64_t{1} << r.below(16))); }},
    {"efer_tce", [](view& v, mutation_input&) { set_efer(v, efer_of(v) | x86::efer::tce.raw()); }},  // CPUID says (TCE)
    {"efer_lme_clear", [](view& v, mutation_input&) { set_efer(v, efer_of(v) & ~x86::efer::lme.raw()); }},
    {"efer_lma_clear", [](view& v, mutation_input&) { set_efer(v, efer_of(v) & ~x86::efer::lma.raw()); }},
    {"cr0_pe_clear", [](view& v, mutation_input&) { set_cr0(v, cr0_of(v) & ~x86::cr0::pe.raw()); }},
    {"cr0_pg_clear", [](view& v, mutation_input&) { set_cr0(v, cr0_of(v) & ~x86::cr0::pg.raw()); }},
    {"cs_d_set", [](view& v, mutation_input&) { set_cs_attrib(v, cs_attrib(v) | hs::attrib::db); }},
    {"cs_l_clear", [](view& v, mutation_input&) { set_cs_attrib(v, cs_attrib(v) & ~hs::attrib::l); }},
    // A 32-bit guest with PAE paging: EFER.LME/LMA clear, CS a 32-bit code segment.
    {"legacy_pae_guest", [](view& v, mutation_input&) {
       set_efer(v, efer_of(v) & ~(x86::efer::lme.raw() | x86::efer::lma.raw()));
       set_cs_attrib(v, 0xc9b);
     }},
    // CS.L and CS.D both set outside long mode: not one of the APM's illegal combinations.
    {"legacy_guest_cs_l_and_d", [](view& v, mutation_input&) {
       set_efer(v, efer_of(v) & ~(x86::efer::lme.raw() | x86::efer::lma.raw()));
       set_cs_attrib(v, 0xe9b);
     }},
    // Legacy PAE paging without nested paging: CR3 is a host address and its four "PDPTEs"
    // are this file's PML4 entries (RW and US set: reserved bits of a PDPTE). VMRUN does not
    // load PDPTEs in the APM's list of checks.
    {"legacy_pae_guest_no_npt", [](view& v, mutation_input&) {
       set_efer(v, efer_of(v) & ~(x86::efer::lme.raw() | x86::efer::lma.raw()));
       set_cs_attrib(v, 0xc9b);
       hs::write(v, f::nested_control, std::uint64_t{0});
     }},
    // Paged real mode (CR0.PG = 1, CR0.PE = 0, EFER.LME = 0): not an illegal combination.
    {"paged_real_mode", [](view& v, mutation_input&) {
       set_efer(v, efer_of(v) & ~(x86::efer::lme.raw() | x86::efer::lma.raw()));
       set_cr0(v, cr0_of(v) & ~x86::cr0::pe.raw());
       set_cs_attrib(v, 0x09b);
     }},
    {"vmrun_intercept_clear", [](view& v, mutation_input&) { hs::set_intercept(v, hs::intercept::vmrun, false); }},
    {"msrpm_beyond_maxphyaddr", [](view& v, mutation_input& r) { hs::write(v, f::msrpm_base_pa, beyond_maxphyaddr(r)); }},
    {"msrpm_end_beyond", [](view& v, mutation_input& r) { hs::write(v, f::msrpm_base_pa, map_near_top(r, 1)); }},
    {"msrpm_end_at_top", [](view& v, mutation_input& r) { hs::write(v, f::msrpm_base_pa, map_near_top(r, 2)); }},
    {"msrpm_offset_bits", [](view& v, mutation_input& r) { hs::write(v, f::msrpm_base_pa, r.msrpm_pa | (r.next() & 0xfff)); }},
    {"iopm_beyond_maxphyaddr", [](view& v, mutation_input& r) { hs::write(v, f::iopm_base_pa, beyond_maxphyaddr(r)); }},
    {"iopm_end_beyond", [](view& v, mutation_input& r) { hs::write(v, f::iopm_base_pa, map_near_top(r, 1 + r.below(2))); }},
    {"iopm_end_at_top", [](view& v, mutation_input& r) { hs::write(v, f::iopm_base_pa, map_near_top(r, 3)); }},
    {"iopm_offset_bits", [](view& v, mutation_input& r) { hs::write(v, f::iopm_base_pa, r.iopm_pa | (r.next() & 0xfff)); }},
    {"eventinj_any", [](view& v, mutation_input& r) {
       const std::uint64_t ev = some_vector(r) | (std::uint64_t{r.below(8)} << 8) | (r.below(2) ? 0x800u : 0) |
                                0x80000000u | (r.below(8) == 0 ? (std::uint64_t{1} << (12 + r.below(19))) : 0) |
                                (r.next() & 0xffff'0000'0000'0000ull);
       hs::write(v, f::event_injection, static_cast<std::uint64_t>(ev));
     }},
    {"eventinj_exception", [](view& v, mutation_input& r) {
       hs::write(v, f::event_injection, std::uint64_t{0x80000300u | r.below(34) | (r.below(2) ? 0x800u : 0)});
     }},
    {"eventinj_br_or_of", [](view& v, mutation_input& r) {  // impossible in a 64-bit guest
       hs::write(v, f::event_injection, std::uint64_t{0x80000304u + r.below(2)});
     }},
    {"eventinj_reserved_bits", [](view& v, mutation_input& r) {
       hs::write(v, f::event_injection, std::uint64_t{0x8000030d} | (std::uint64_t{1} << (12 + r.below(19))));
     }},
    {"eventinj_not_valid", [](view& v, mutation_input& r) { hs::write(v, f::event_injection, r.next() & ~std::uint64_t{0x80000000}); }},
    {"asid_zero", [](view& v, mutation_input&) { hs::write(v, f::guest_asid, std::uint32_t{0}); }},
    {"asid_any", [](view& v, mutation_input& r) { hs::write(v, f::guest_asid, static_cast<std::uint32_t>(1 + r.below(0xffff))); }},
    {"ncr3_beyond_maxphyaddr", [](view& v, mutation_input& r) { hs::write(v, f::n_cr3, hs::read(v, f::n_cr3) | beyond_maxphyaddr(r)); }},
    {"g_pat_any_byte", [](view& v, mutation_input& r) {
       const unsigned b = r.below(8);
       const std::uint64_t t = r.below(2) ? r.below(8) : r.below(256);
       hs::write(v, f::g_pat, static_cast<std::uint64_t>((hs::read(v, f::g_pat) & ~(0xffull << (8 * b))) | (t << (8 * b))));
     }},
    {"nested_paging_off", [](view& v, mutation_input&) { hs::write(v, f::nested_control, std::uint64_t{0}); }},
    // 15.5.1: VMRUN canonicalizes segment bases (no check): ES/SS/DS, GDTR and IDTR (FS, GS,
    // TR, LDTR are VMLOAD's, not VMRUN's).
    {"segment_base_noncanonical", [](view& v, mutation_input& r) {
       const std::uint64_t b = static_cast<std::uint64_t>(0x0000'8000'0000'0000ull | (r.next() & 0x7fff'ffff'f000ull));
       switch (r.below(5)) {
         case 0: hs::write(v, f::es_base, b); break;
         case 1: hs::write(v, f::ds_base, b); break;
         case 2: hs::write(v, f::ss_base, b); break;
         case 3: hs::write(v, f::gdtr_base, b); break;
         default: hs::write(v, f::idtr_base, b); break;
       }
     }},
    {"rflags_bits", [](view& v, mutation_input& r) { hs::write(v, f::rflags, (r.next() & 0x2c0cd5) | 0x2); }},  // not VM, not TF
    {"cpl_3", [](view& v, mutation_input&) { hs::write(v, f::cpl, std::uint8_t{3}); }},
};
constexpr unsigned mutation_count = sizeof(mutations) / sizeof(mutations[0]);

// ---- the CPU's deviations (docs/svm.md, "VMRUN differential") ---------------------------------
// Each erratum is a deviation of Bochs 2.7's VMRUN from the APM, seen in these cases and named
// after what Bochs does. model_invalid() is hvkit's verdict with the chosen errata applied:
// a check Bochs does not make is dropped (or replaced by the weaker check Bochs makes), a
// check Bochs makes that the APM does not list is added.
enum erratum_id : unsigned {
  cr3_mbz_not_checked,                 // 15.5.1 "Any MBZ bit of CR3 is set": Bochs checks no CR3 bit
  lme_pg_without_pe_not_checked,       // 15.5.1 "EFER.LME and CR0.PG ... CR0.PE is zero": Bochs enters
                                       // "paged real mode" with EFER.LMA = 1 (and reports a panic)
  permission_map_end_not_checked,      // 15.5.1 "MSR or IOIO intercept tables extend to ...": Bochs
                                       // checks the base address only, not the map's last byte
  eventinj_reserved_bits_not_checked,  // 15.20 / Figure 15-3 bits 30:12 reserved: Bochs ignores them
  eventinj_reserved_vector_accepted,   // 15.20 TYPE 3 with a vector that is not an exception:
                                       // Bochs refuses only vector 2 and vectors >= 32
  cs_l_and_d_checked_outside_long_mode,  // 15.5.1 refuses CS.L = CS.D = 1 only with EFER.LME,
                                         // CR0.PG, CR4.PAE set: Bochs refuses it in any mode
  eventinj_impossible_in_64bit_accepted,  // 15.20 an exception impossible in the guest's mode
                                          // (#BR, #OF in 64-bit mode): Bochs 2.7 injects it
  pae_pdptes_checked_at_vmrun,         // not an APM check: without nested paging, Bochs refuses a
                                       // legacy PAE guest whose PDPTEs have reserved bits set
  efer_tce_refused_though_enumerated,  // 15.5.1 "Any MBZ bit of EFER": EFER.TCE (bit 15) is not MBZ
                                       // where CPUID Fn8000_0001 ECX[17] says TCE (ryzen): Bochs
                                       // refuses it
  // Under nested KVM (kvm_amd 6.1 on Bochs, docs/hypervisor.md): KVM checks the hypervisor's
  // VMCB itself, then runs its own VMCB on Bochs, whose errata above still show unless KVM
  // checks the rule first (CR3, CR0.PE, the permission maps' ends: KVM refuses those itself).
  kvm_g_pat_not_checked,               // 15.25.4: with nested paging, G_PAT with a reserved type
                                       // fails VMRUN; KVM enters the guest
  kvm_cr3_checked_in_any_mode,         // KVM refuses CR3 bits at or above MAXPHYADDR whatever the
                                       // mode; hvkit's 15.5.1 rule takes CR3's MBZ bits from the
                                       // guest's mode (63:MAXPHYADDR in long mode only)
  kvm_msrpm_ending_at_top_refused,     // 15.5.1: only an MSRPM that extends to MAXPHYADDR or above
                                       // fails; KVM refuses the 8 KiB MSRPM whose last byte is the
                                       // last one below 2^MAXPHYADDR (as if it were 12 KiB long)
  kvm_pae_pdptes_checked_by_lma,       // not an APM check: without nested paging KVM refuses a guest
                                       // it takes for legacy PAE (CR0.PG, CR4.PAE and EFER.LMA
                                       // clear, whatever LME) whose PDPTEs have reserved bits
  // QEMU 7.2 TCG (-cpu max; docs/hypervisor.md, SVM errata), each named after what QEMU does:
  qemu_ncr3_mbz_not_checked,           // 15.25.4: nCR3 with a bit at or above MAXPHYADDR: QEMU enters
  qemu_g_pat_not_checked,              // 15.25.4: G_PAT with a reserved memory type: QEMU enters
  qemu_msrpm_ending_at_top_refused,    // 15.5.1: QEMU refuses the MSRPM whose 8 KiB end just below
                                       // 2^MAXPHYADDR (as if it were 12 KiB long, like KVM)
  qemu_cr4_legacy_bits_not_gated,      // 15.5.1 "Any MBZ bit of CR4": CR4 bits whose feature CPUID
                                       // does not enumerate (VME, PVI, TSD, DE, PSE, MCE, PGE,
                                       // OSFXSR, OSXMMEXCPT, PCIDE): QEMU accepts them whatever
                                       // CPUID says
  qemu_efer_ffxsr_not_gated,           // 15.5.1 "Any MBZ bit of EFER": EFER.FFXSR without CPUID
                                       // Fn8000_0001 EDX[25]: QEMU accepts it
  qemu_cr3_checked_in_any_mode,        // 15.5.1 checks CR3's MBZ bits 63:MAXPHYADDR in long mode
                                       // only; QEMU refuses them whatever the mode (as KVM does)
  erratum_count
};
/// Errata of the CPU model in use: Bochs' alone, or KVM's with the Bochs errata it lets through.
constexpr unsigned bochs_errata = (1u << kvm_g_pat_not_checked) - 1;
constexpr unsigned qemu_errata = ((1u << erratum_count) - 1) & ~((1u << qemu_ncr3_mbz_not_checked) - 1);
constexpr unsigned kvm_errata = ((1u << erratum_count) - 1) & ~bochs_errata & ~qemu_errata;
/// QEMU's TCG shares Bochs' EVENTINJ deviations (the same rules, the same first
/// cases printed under the QEMU model).
constexpr unsigned qemu_shared_errata = (1u << eventinj_reserved_bits_not_checked) |
                                        (1u << eventinj_reserved_vector_accepted) |
                                        (1u << eventinj_impossible_in_64bit_accepted);
// KVM checks these rules itself; and without nested paging KVM shadows the guest's tables, so
// Bochs never sees its PDPTEs (KVM's own PDPTE check is kvm_pae_pdptes_checked_by_lma).
constexpr unsigned bochs_errata_kvm_checks_first = (1u << cr3_mbz_not_checked) | (1u << lme_pg_without_pe_not_checked) |
                                                   (1u << permission_map_end_not_checked) |
                                                   (1u << pae_pdptes_checked_at_vmrun);
unsigned model_errata(const cpu_facts& facts) {
  if (facts.qemu_tcg) return qemu_errata | qemu_shared_errata;
  return facts.under_kvm ? kvm_errata | (bochs_errata & ~bochs_errata_kvm_checks_first) : bochs_errata;
}
struct erratum {
  const char* name;
  std::uint64_t cases = 0;
  bool printed = false;
};
/// The errata's names; their counts are the run's (vmrun_diff_run()'s copy of this table).
constexpr erratum erratum_table[erratum_count] = {
    {"cr3_mbz_not_checked"},           {"lme_pg_without_pe_not_checked"},     {"permission_map_end_not_checked"},
    {"eventinj_reserved_bits_not_checked"}, {"eventinj_reserved_vector_accepted"}, {"cs_l_and_d_checked_outside_long_mode"},
    {"eventinj_impossible_in_64bit_accepted"}, {"pae_pdptes_checked_at_vmrun"},
    {"efer_tce_refused_though_enumerated"},
    {"kvm_g_pat_not_checked"}, {"kvm_cr3_checked_in_any_mode"}, {"kvm_msrpm_ending_at_top_refused"},
    {"kvm_pae_pdptes_checked_by_lma"},
    {"qemu_ncr3_mbz_not_checked"}, {"qemu_g_pat_not_checked"}, {"qemu_msrpm_ending_at_top_refused"},
    {"qemu_cr4_legacy_bits_not_gated"}, {"qemu_efer_ffxsr_not_gated"}, {"qemu_cr3_checked_in_any_mode"},
};

struct case_state {
  hs::vmrun_error_set hvkit;  // every rule hvkit finds violated
  const hs::vmcb_view* v;     // the VMCB as VMRUN got it
  const cpu_facts& facts;     // the processor's
};

/// EVENTINJ as Bochs checks it with errata `mask`: reserved bits 30:12 ignored, TYPE 3 refused
/// for vector 2 and vectors >= 32 only.
bool eventinj_invalid(const case_state& c, unsigned mask) {
  std::uint64_t raw = hs::read(*c.v, f::event_injection);
  if ((mask >> eventinj_reserved_bits_not_checked) & 1u) raw &= ~hs::event_bits::reserved;
  const hs::event_info i{raw};
  const bool lme = (hs::read(*c.v, f::efer) & x86::efer::lme.raw()) != 0, pg = (hs::read(*c.v, f::cr0) & x86::cr0::pg.raw()) != 0;
  const bool guest_64 = lme && pg && (hs::read(*c.v, f::cs_attrib) & hs::attrib::l) != 0;
  const auto e = hs::check_eventinj(i, guest_64 && !((mask >> eventinj_impossible_in_64bit_accepted) & 1u));
  if (e == hs::injection_error::not_an_exception && ((mask >> eventinj_reserved_vector_accepted) & 1u))
    return i.vector() == 2 || i.vector() >= 32;
  return e != hs::injection_error::none;
}

/// Bochs' extra check: nested paging off, CR0.PG and CR4.PAE set, EFER.LME clear (legacy PAE
/// paging, also in "paged real mode" with CR0.PE clear), and a present PDPTE at CR3 with a reserved bit (bits 2:1, 8:5, 63:MAXPHYADDR;
/// APM Vol. 2, 5.3.3, Figure 5-11). CR3 is then a host physical address; outside guest RAM
/// (where this file's tables are) the model says "no".
/// `mode_bit`: the EFER bit whose being clear means legacy PAE (Bochs: LME; KVM: LMA).
bool pdptes_reserved(const case_state& c, std::uint64_t mode_bit = x86::efer::lme.raw()) {
  const std::uint64_t cr0 = hs::read(*c.v, f::cr0);
  if ((hs::read(*c.v, f::nested_control) & 1) != 0 || (cr0 & x86::cr0::pg.raw()) == 0 ||
      (hs::read(*c.v, f::cr4) & x86::cr4::pae.raw()) == 0 || (hs::read(*c.v, f::efer) & mode_bit) != 0)
    return false;
  const std::uint64_t base = hs::read(*c.v, f::cr3) & 0xffff'ffe0u;
  if (base < layout::guest_mem_base || base + 32 > layout::guest_mem_base + layout::guest_mem_size) return false;
  const auto* pdpte = reinterpret_cast<const std::uint64_t*>(guest_ram(core::conformance_ram, base, 32));
  for (unsigned i = 0; i < 4; ++i)
    if ((pdpte[i] & 1) != 0 && ((pdpte[i] & 0x1e6) != 0 || (pdpte[i] >> c.facts.env.maxphyaddr) != 0)) return true;
  return false;
}

/// A check the CPU makes that the APM does not list refuses the case (errata `mask`).
bool extra_check_fires(const case_state& c, unsigned mask) {
  const cpu_facts& facts = c.facts;
  const auto on = [mask](erratum_id e) { return ((mask >> e) & 1u) != 0; };
  const auto cs = hs::read(*c.v, f::cs_attrib);
  if (on(cs_l_and_d_checked_outside_long_mode) && (cs & hs::attrib::l) != 0 && (cs & hs::attrib::db) != 0) return true;
  if (on(pae_pdptes_checked_at_vmrun) && pdptes_reserved(c)) return true;
  if (on(efer_tce_refused_though_enumerated) && (hs::read(*c.v, f::efer) & x86::efer::tce.raw()) != 0) return true;
  if ((on(kvm_cr3_checked_in_any_mode) || on(qemu_cr3_checked_in_any_mode)) && (hs::read(*c.v, f::cr3) >> facts.env.maxphyaddr) != 0) return true;
  if ((on(kvm_msrpm_ending_at_top_refused) || on(qemu_msrpm_ending_at_top_refused)) &&
      (((hs::read(*c.v, f::msrpm_base_pa) & ~std::uint64_t{0xfff}) + 0x3000 - 1) >> facts.env.maxphyaddr) != 0)
    return true;
  return on(kvm_pae_pdptes_checked_by_lma) && pdptes_reserved(c, x86::efer::lma.raw());
}

/// The CPU's verdict (true: VMEXIT_INVALID) predicted by hvkit's rules with errata `mask`.
bool model_invalid(const case_state& c, unsigned mask) {
  const cpu_facts& facts = c.facts;
  hs::vmrun_error_set v = c.hvkit;
  const auto on = [mask](erratum_id e) { return ((mask >> e) & 1u) != 0; };
  if (on(cr3_mbz_not_checked)) v &= ~hs::bit(vmrun_error::cr3_mbz);
  if (on(lme_pg_without_pe_not_checked)) v &= ~hs::bit(vmrun_error::lme_pg_without_pe);
  if (on(permission_map_end_not_checked)) {
    v &= ~(hs::bit(vmrun_error::msrpm_address) | hs::bit(vmrun_error::iopm_address));
    const unsigned m = facts.env.maxphyaddr;
    if ((hs::read(*c.v, f::msrpm_base_pa) >> m) != 0) v |= hs::bit(vmrun_error::msrpm_address);
    if ((hs::read(*c.v, f::iopm_base_pa) >> m) != 0) v |= hs::bit(vmrun_error::iopm_address);
  }
  if (on(eventinj_reserved_bits_not_checked) || on(eventinj_reserved_vector_accepted) ||
      on(eventinj_impossible_in_64bit_accepted)) {
    v &= ~hs::bit(vmrun_error::event_injection);
    if (eventinj_invalid(c, mask)) v |= hs::bit(vmrun_error::event_injection);
  }
  if (on(kvm_g_pat_not_checked) || on(qemu_g_pat_not_checked)) v &= ~hs::bit(vmrun_error::g_pat_invalid);
  if (on(qemu_ncr3_mbz_not_checked)) v &= ~hs::bit(vmrun_error::ncr3_mbz);
  if (on(qemu_cr4_legacy_bits_not_gated) || on(qemu_efer_ffxsr_not_gated)) {
    // hvkit's own rules with the bits QEMU accepts counted as supported.
    hs::vmrun_environment env = facts.env;
    using C = x86::cr4;
    if (on(qemu_cr4_legacy_bits_not_gated))
      env.cr4_supported = env.cr4_supported | C::vme | C::pvi | C::tsd | C::de | C::pse | C::mce | C::pge |
                          C::osfxsr | C::osxmmexcpt | C::pcide;
    if (on(qemu_efer_ffxsr_not_gated)) env.efer_supported = env.efer_supported | x86::efer::ffxsr;
    const hs::vmrun_error_set w = hs::vmrun_violations(*c.v, env);
    const hs::vmrun_error_set m = hs::bit(vmrun_error::cr4_mbz) | hs::bit(vmrun_error::efer_mbz);
    v = (v & ~m) | (w & m);
  }
  return v != 0 || extra_check_fires(c, mask);
}

// ---- running a case --------------------------------------------------------------------------
constexpr std::uint64_t exit_invalid = ~std::uint64_t{0};
constexpr std::uint64_t exit_sentinel = 0x5a5a'5a5aull;

/// VMRUN on the differential's VMCB; the exit code (VMEXIT_INVALID = -1).
std::uint64_t vmrun_once(const diff_pages& d, svm_host& h, core::tally& t) {
  hv::vmx::guest_regs regs{};
  hs::vmcb_view v{*d.vmcb};
  hs::processor_write(v, f::exit_code, exit_sentinel);
  svm_vmrun(&regs, pa(d.vmcb), pa(d.host_save), 0);
  const std::uint64_t code = hs::read(v, f::exit_code);
  // QEMU 7.2 TCG writes VMEXIT_INVALID as the 32-bit 0xFFFF_FFFF (svm.cpp's
  // vmexit_invalid_exitcode_32bit erratum): read as the APM's -1, counted there.
  return code == 0xFFFF'FFFFull ? note_exitcode_32bit(h, t, code) : code;
}

struct counters {
  std::uint64_t cases, agree, errata, mismatches, model_off_on_agree, cpu_invalid, cpu_ran, hvkit_invalid, multi_violation, no_exit_code;
  std::uint64_t by_exit[4];  // VMMCALL, exception, #NPF, other
};

void print_mutations(const std::uint8_t* applied, unsigned n) {
  for (unsigned i = 0; i < n; ++i) kprintf("%s%s", i ? "+" : "", mutations[applied[i]].name);
}
void print_violations(hs::vmrun_error_set s) {
  if (s == 0) kprintf("none");
  bool first = true;
  for (unsigned e = 1; e < hs::vmrun_error_count; ++e)
    if ((s >> e) & 1u) {
      kprintf("%s%s", first ? "" : "+", hs::name(static_cast<vmrun_error>(e)));
      first = false;
    }
}
void print_cpu(std::uint64_t code) {
  if (code == exit_invalid)
    kprintf("VMEXIT_INVALID");
  else
    kprintf("entered(exit=0x%llx)", (unsigned long long)code);
}

}  // namespace

bool vmrun_diff_run(svm_host& h, core::page_pool& pool, core::tally& t) {
  constexpr unsigned random_cases = 3000;
  constexpr std::uint64_t seed = 0x5653'4d52'554e'3139ull;  // "VSMRUN19"
  const cpu_facts facts = read_facts();
  const diff_pages d = take_diff_pages(pool);
  erratum errata[erratum_count];  // the run's counts
  for (unsigned e = 0; e < erratum_count; ++e) errata[e] = erratum_table[e];
  const unsigned model_mask = model_errata(facts);
  const char* model = facts.qemu_tcg ? "qemu_tcg" : facts.under_kvm ? "kvm_on_bochs" : "bochs";
  const auto vendor = cpuid(0);
  char vend[13];
  __builtin_memcpy(vend, &vendor.ebx, 4);
  __builtin_memcpy(vend + 4, &vendor.edx, 4);
  __builtin_memcpy(vend + 8, &vendor.ecx, 4);
  vend[12] = 0;
  const unsigned total = mutation_count + random_cases;
  kprintf("HVKIT RUN vmrun_diff begin cases=%u seed=0x%llx\n", total, (unsigned long long)seed);
  kprintf("HVKIT INFO vmrun_diff cpu_model=%s vendor=%s family_model_stepping=0x%x maxphyaddr=%u long_mode=%d "
          "cr4_supported=0x%llx efer_supported=0x%llx mutations=%u rules=%u\n",
          model, vend, cpuid(1).eax, facts.env.maxphyaddr, facts.env.long_mode ? 1 : 0,
          (unsigned long long)facts.env.cr4_supported.raw(), (unsigned long long)facts.env.efer_supported.raw(),
          mutation_count, hs::vmrun_error_count - 1);
  build_guest_memory(d);
  build_baseline(d, facts);

  // The baseline must enter the guest and exit on its VMMCALL (exit code 81h).
  *d.vmcb = *d.baseline;
  {
    hs::vmcb_view bv{*d.vmcb};
    const auto pre = hs::vmrun_violations(bv, facts.env);
    const std::uint64_t code = vmrun_once(d, h, t);
    if (pre != 0 || code != 0x81) {
      kprintf("HVKIT INFO vmrun_diff baseline violations=");
      print_violations(pre);
      kprintf(" cpu=");
      print_cpu(code);
      kprintf("\n");
      result(t, "vmrun_differential", false, "reason=baseline model=%s", model);
      kprintf("HVKIT RUN vmrun_diff end status=done exits=0 host_tsc=0\n");
      return false;
    }
  }

  counters cnt{};
  std::uint64_t violated[hs::vmrun_error_count] = {};  // cases violating the rule
  std::uint64_t decided[hs::vmrun_error_count] = {};   // ... as the only rule, the CPU agreeing
  std::uint64_t per_mutation_invalid[mutation_count] = {};
  std::uint64_t per_mutation_cases[mutation_count] = {};
  rng r{seed};
  mutation_input in{r, facts.env.maxphyaddr, pa(d.msrpm), pa(d.iopm)};
  for (unsigned n = 0; n < total; ++n) {
    std::uint8_t applied[3];
    unsigned count = 1;
    if (n < mutation_count) {
      applied[0] = static_cast<std::uint8_t>(n);  // each mutation alone first
    } else {
      count = 1 + r.below(3);
      for (unsigned i = 0; i < count; ++i) applied[i] = static_cast<std::uint8_t>(r.below(mutation_count));
    }
    *d.vmcb = *d.baseline;
    hs::vmcb_view v{*d.vmcb};
    for (unsigned i = 0; i < count; ++i) mutations[applied[i]].apply(v, in);
    const hs::vmrun_error_set pred = hs::vmrun_violations(v, facts.env);
    // Snapshot what the classification needs before VMRUN overwrites the VMCB on #VMEXIT.
    *d.before = *d.vmcb;
    const std::uint64_t code = vmrun_once(d, h, t);
    hs::vmcb_view bv{*d.before};
    const case_state c{pred, &bv, facts};  // (bv: before)
    const bool cpu_invalid = code == exit_invalid;
    const bool hv_invalid = pred != 0;
    ++cnt.cases;
    for (unsigned i = 0; i < count; ++i) {
      ++per_mutation_cases[applied[i]];
      if (cpu_invalid) ++per_mutation_invalid[applied[i]];
    }
    if (code == exit_sentinel) ++cnt.no_exit_code;
    if (cpu_invalid) {
      ++cnt.cpu_invalid;
    } else {
      ++cnt.cpu_ran;
      const unsigned k = code == 0x81 ? 0 : (code >= 0x40 && code < 0x60) ? 1 : code == 0x400 ? 2 : 3;
      ++cnt.by_exit[k];
    }
    if (hv_invalid) ++cnt.hvkit_invalid;
    if ((pred & (pred - 1)) != 0) ++cnt.multi_violation;  // more than one bit (no libgcc popcount here)
    for (unsigned e = 1; e < hs::vmrun_error_count; ++e)
      if ((pred >> e) & 1u) {
        ++violated[e];
        // Decided: the only rule violated, the CPU refusing, and no check of the CPU's that
        // the APM does not list (an erratum) refusing the case as well.
        if (pred == hs::bit(static_cast<vmrun_error>(e)) && cpu_invalid &&
            !extra_check_fires(case_state{pred, &bv, facts}, model_mask))
          ++decided[e];
      }
    if (cpu_invalid == hv_invalid) {
      ++cnt.agree;
      // The errata model's faithfulness: on an agreeing case it must agree too.
      if (model_invalid(c, model_mask) != cpu_invalid && ++cnt.model_off_on_agree <= 5) {
        kprintf("HVKIT INFO vmrun_diff errata_model_off case=%u mutations=", n);
        print_mutations(applied, count);
        kprintf(" hvkit=");
        print_violations(pred);
        kprintf(" cpu=");
        print_cpu(code);
        kprintf(" eventinj=0x%llx\n", (unsigned long long)hs::read(bv, f::event_injection));
      }
      continue;
    }
    // One erratum alone, then all of them together (attributed to each that changes the verdict).
    int which = -1;
    for (unsigned e = 0; e < erratum_count && which < 0; ++e)
      if (((model_mask >> e) & 1u) && model_invalid(c, 1u << e) == cpu_invalid) which = static_cast<int>(e);
    unsigned attributed = 0;
    if (which >= 0) {
      attributed = 1u << which;
    } else if (model_invalid(c, model_mask) == cpu_invalid) {
      for (unsigned e = 0; e < erratum_count; ++e)
        if (((model_mask >> e) & 1u) && model_invalid(c, model_mask & ~(1u << e)) != cpu_invalid)
          attributed |= 1u << e;
    }
    if (attributed != 0) {
      ++cnt.errata;
      for (unsigned e = 0; e < erratum_count; ++e)
        if ((attributed >> e) & 1u) {
          ++errata[e].cases;
          if (!errata[e].printed) {
            errata[e].printed = true;
            kprintf("HVKIT INFO vmrun_diff erratum=%s first_case=%u mutations=", errata[e].name, n);
            print_mutations(applied, count);
            kprintf(" hvkit=");
            print_violations(pred);
            kprintf(" cpu=");
            print_cpu(code);
            kprintf("\n");
          }
        }
      continue;
    }
    ++cnt.mismatches;
    if (cnt.mismatches <= 40) {
      kprintf("HVKIT INFO vmrun_diff mismatch case=%u mutations=", n);
      print_mutations(applied, count);
      kprintf(" hvkit=");
      print_violations(pred);
      kprintf(" cpu=");
      print_cpu(code);
      kprintf(" efer=0x%llx cr0=0x%llx cr4=0x%llx cs_attrib=0x%x eventinj=0x%llx\n",
              (unsigned long long)hs::read(bv, f::efer), (unsigned long long)hs::read(bv, f::cr0),
              (unsigned long long)hs::read(bv, f::cr4), hs::read(bv, f::cs_attrib),
              (unsigned long long)hs::read(bv, f::event_injection));
    }
  }

  unsigned rules_decided = 0, rules_possible = 0;
  kprintf("HVKIT INFO vmrun_diff rules:");
  for (unsigned e = 1; e < hs::vmrun_error_count; ++e) {
    kprintf(" %s=%llu/%llu", hs::name(static_cast<vmrun_error>(e)), (unsigned long long)decided[e],
            (unsigned long long)violated[e]);
    if (violated[e]) ++rules_possible;
    if (decided[e]) ++rules_decided;
  }
  kprintf(" (alone and VMEXIT_INVALID / violated)\n");
  kprintf("HVKIT INFO vmrun_diff mutations:");
  for (unsigned m = 0; m < mutation_count; ++m)
    kprintf(" %s=%llu/%llu", mutations[m].name, (unsigned long long)per_mutation_invalid[m],
            (unsigned long long)per_mutation_cases[m]);
  kprintf(" (VMEXIT_INVALID / cases)\n");
  // The line a reader wants: N cases, M agree, K attributed to erratum X.
  kprintf("HVKIT INFO vmrun_diff summary model=%s: %llu cases, %llu agree", model, (unsigned long long)cnt.cases,
          (unsigned long long)cnt.agree);
  for (unsigned e = 0; e < erratum_count; ++e)
    if (errata[e].cases) kprintf(", %llu attributed to erratum %s", (unsigned long long)errata[e].cases, errata[e].name);
  kprintf(", %llu mismatches\n", (unsigned long long)cnt.mismatches);
  // Under KVM the Bochs errata model is not expected to be faithful (KVM checks vmcb12 first).
  const bool pass = cnt.cases == total && cnt.mismatches == 0 && cnt.no_exit_code == 0 && cnt.cpu_invalid > 0 &&
                    cnt.cpu_ran > 0 && (facts.under_kvm || cnt.model_off_on_agree == 0);
  result(t, "vmrun_differential", pass,
         "cases=%llu agree=%llu errata=%llu mismatches=%llu cpu_invalid=%llu cpu_entered=%llu hvkit_invalid=%llu "
         "multi_violation=%llu errata_model_off_on_agree=%llu exits_vmmcall=%llu exits_exception=%llu exits_npf=%llu exits_other=%llu "
         "rules_decided=%u rules_violated=%u rules=%u model=%s",
         (unsigned long long)cnt.cases, (unsigned long long)cnt.agree, (unsigned long long)cnt.errata,
         (unsigned long long)cnt.mismatches, (unsigned long long)cnt.cpu_invalid, (unsigned long long)cnt.cpu_ran,
         (unsigned long long)cnt.hvkit_invalid, (unsigned long long)cnt.multi_violation,
         (unsigned long long)cnt.model_off_on_agree,
         (unsigned long long)cnt.by_exit[0], (unsigned long long)cnt.by_exit[1], (unsigned long long)cnt.by_exit[2],
         (unsigned long long)cnt.by_exit[3], rules_decided, rules_possible, hs::vmrun_error_count - 1, model);
  for (unsigned e = 0; e < erratum_count; ++e)
    if (errata[e].cases) {
      ++t.errata;
      kprintf("HVKIT ERRATUM vmrun_%s.vmrun_diff cases=%llu\n", errata[e].name, (unsigned long long)errata[e].cases);
    }
  kprintf("HVKIT RUN vmrun_diff end status=done exits=0 host_tsc=0\n");
  return pass;
}

}  // namespace hv::svm
