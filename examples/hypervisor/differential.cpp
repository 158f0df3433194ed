// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the CPU as the oracle. Differential paging (hvkit::paging::guest_walker against the emulated CPU) and the nested EPT comparison (paging::nested_walker over paging::ept_walker against the CPU's EPT-violation exits).
#include "hv.hpp"
#include "svm/svm.hpp"
#include "core/shadow_paging.hpp"

namespace hv {

/// Entry `i` of a walk path, and the path of a fault if the walker reports one (the
/// walk_result layout is being slimmed down: both forms are accepted).
template <class P>
hvkit::paging::walked_entry path_entry(const P& p, unsigned i) {
  if constexpr (requires { p[i]; }) return p[i];
  else return p.entries[i];
}
template <class F>
const hvkit::paging::walk_path* fault_path(const F& f) {
  if constexpr (requires { f.path; }) return &f.path;
  else return nullptr;
}

/// What the CPU did for one differential paging case (both hypercalls decode into it).
struct cpu_case {
  std::uint64_t la;
  x86::pfec access;
  bool implicit;
  std::uint64_t ad;        ///< A/D flags the CPU set (hc::ad_dirty_shift layout)
  std::uint32_t pkru;
  std::uint32_t result;    ///< 0, or 0x100 | vector
  std::uint32_t error;
  std::uint64_t cr2;
};

/// Index of the paging mode in run_state::pg_mode_* (4-level, 32-bit, PAE).
unsigned mode_slot(x86::paging_mode m) {
  return m == x86::paging_mode::two_level ? 1 : (m == x86::paging_mode::pae ? 2 : 0);
}

/// The comparison shared by every paging mode: hvkit's walker (`walker`, built for the
/// guest's live registers and, with PAE, the PDPTE registers) repeats the case against the
/// same memory, with the entries restored to their state before the access.
///
/// Comparison rules: the outcome must be identical (no fault, or #PF with the same error
/// code and CR2 = the linear address). A/D: on success the CPU and hvkit must set exactly
/// the same A flags (every entry used; PAE PDPTEs have none) and D flag (the leaf of a
/// write). On a faulting walk hvkit sets nothing; the SDM allows a processor to set A flags
/// of entries it used before the fault (SDM Vol. 3A 4.8), so A flags set by the CPU on a
/// faulting walk are counted apart, not as mismatches; a D flag there is a mismatch.
/// Bochs 2.7 errata B1-B3 are classified by narrow rules and counted apart.
std::uint64_t compare_paging_case(core::context& x, const cpu_case& c, const pg::guest_walker& walker,
                                  const pg::mmu_context& mmu, const guest_paging_regs& live) {
  const x86::rflags rflags = live.rflags;
  const x86::cr4 cr4 = live.cr4;
  pg::walk_request req{};
  req.linear = x86::gva{c.la};
  req.access = c.access;
  req.rflags = rflags;
  req.pkru = c.pkru;  // the guest's PKRU (the host cannot read it: its own CR4.PKE is 0)
  pg::flat_memory mem = guest_ram_view(x.vcpu.ram);
  const pg::walk_result res = walker.walk(mem, mmu, req);
  const unsigned slot = mode_slot(walker.state().mode);

  std::uint32_t hv_result = 0, hv_error = 0;
  std::uint64_t hv_ad = 0;
  if (res.has_value()) {
    const pg::walk_path& path = res.value().path;
    for (unsigned i = 0; i < path.count; ++i) {
      const pg::walked_entry e = path_entry(path, i);
      std::uint8_t* p = guest_ram(x.vcpu.ram, e.address.value(), 4);
      std::uint32_t now = p ? *reinterpret_cast<volatile std::uint32_t*>(p) : 0;  // A/D: bits 5, 6
      if (now & 0x20) hv_ad |= 1ull << (e.level - 1);
      if (now & 0x40) hv_ad |= 1ull << (hc::ad_dirty_shift + e.level - 1);
    }
  } else {
    const pg::walk_fault& f = res.error();
    hv_result = 0x100 | static_cast<std::uint32_t>(f.vector);
    hv_error = static_cast<std::uint32_t>(f.error_code.raw());
    if (f.kind == pg::fault_kind::unbacked) hv_result = 0xFFFF;  // a paging structure outside RAM: never expected
  }
  ++x.checks.pg_cases;
  ++x.checks.pg_mode_cases[slot];
  if (res.has_value() && c.result == 0) {
    if (res.value().page_shift > 12) ++x.checks.pg_mode_large_ok[slot];
    if (res.value().address.value() >= hc::pse36_alias_gpa) ++x.checks.pg_pse36_ok;  // PSE-36: PA bit 32 reached
  }
  if (c.result != 0) {
    ++x.checks.pg_cpu_faults;
    ++x.checks.pg_mode_faults[slot];
  }
  unsigned kind = c.access.test(x86::pfec::write) ? 1 : (c.access.test(x86::pfec::fetch) ? 2 : 0);
  if (c.access.test(x86::pfec::user)) kind += 3;
  if (c.implicit) kind = 6;
  ++x.checks.pg_by_kind[kind][c.result != 0 ? 1 : 0];
  bool same = c.result == hv_result;
  if (same && hv_result != 0) same = c.error == hv_error && c.cr2 == c.la;
  if (same && hv_result == 0) same = c.ad == hv_ad;
  // QEMU 7.2 TCG erratum Q1 (docs/hypervisor.md): a #PF for a reserved bit reports P = 0.
  // SDM Vol. 3A 4.7: "bit 3 of the error code can be set only if bit 0 is also set" (reserved
  // bits are checked only in present entries); APM Vol. 2 8.4.2 likewise. Classified only
  // when everything else agrees (vector, CR2, every other error-code bit); counted apart, the
  // first case printed.
  if (!same && c.result == (0x100 | 14) && hv_result == c.result && (hv_error & 0x9u) == 0x9u &&
      c.error == (hv_error & ~0x1u) && c.cr2 == c.la) {
    if (x.checks.pg_errata_q1++ == 0 && ++x.checks.results->errata)
      kprintf("HVKIT ERRATUM rsvd_page_fault_without_p.%s la=0x%llx access=0x%llx cpu_error=0x%x sdm_error=0x%x\n",
              x.vcpu.cfg ? x.vcpu.cfg->name : "?", (unsigned long long)c.la, (unsigned long long)c.access.raw(), c.error,
              hv_error);
    return 0;
  }
  // Bochs 2.7 erratum B3 (docs/bochs-and-qemu-facts.md): RFLAGS.AC = 1 lets an implicit
  // supervisor access reach a user-mode page under CR4.SMAP. SDM Vol. 3A 4.6.1: implicit
  // accesses to user-mode addresses are denied whatever AC says. Counted apart.
  if (!same && c.implicit && c.result == 0 && hv_result == (0x100 | 14) && (hv_error & ~0x1u) == 0 &&
      cr4.test(x86::cr4::smap) && req.rflags.test(x86::rflags::ac)) {
    ++x.checks.pg_errata_b3;
    ++x.checks.pg_mode_b3[slot];
    return 0;  // the CPU's A/D flags follow its (wrong) success: nothing more to compare
  }
  // Bochs 2.7 errata B1/B2 (docs/bochs-and-qemu-facts.md), protection keys. B1: Bochs
  // applies PKRU to supervisor-mode addresses (SDM 4.6.2: PKRU governs user-mode addresses
  // only). B2: Bochs ignores PKRU for supervisor data accesses to user-mode addresses (SDM
  // 4.6.1 applies the key, and 4.7 reports PK even when paging rights deny as well).
  // Classified from the translation's U/S and counted apart.
  if (!same && cr4.test(x86::cr4::pke)) {
    const pg::walk_result t = walker.translate(mem, x86::gva{c.la});
    if (t.has_value()) {
      const bool user_page = t.value().rights.test(pg::pte_access::user);
      const bool user_access = c.access.test(x86::pfec::user);
      // B1: PK on a supervisor-mode address (any CPL): the CPU adds PK to hvkit's outcome.
      const bool b1 = !user_page && c.result == (0x100 | 14) && (c.error & 0x20) &&
                      (hv_result == 0 || (c.error & ~0x20u) == hv_error);
      // B2: no PK for a supervisor data access to a user-mode address: the CPU drops the PK
      // part of hvkit's outcome (succeeds, or faults without PK).
      const bool b2 = user_page && !user_access && !c.access.test(x86::pfec::fetch) && hv_result == (0x100 | 14) &&
                      (hv_error & 0x20) && (c.result == 0 || (c.result == hv_result && c.error == (hv_error & ~0x20u)));
      if (b1 || b2) {
        ++(b1 ? x.checks.pg_errata_b1 : x.checks.pg_errata_b2);
        return 0;
      }
    }
  }
  if (same && hv_result != 0 && c.ad != 0) {
    if ((c.ad >> hc::ad_dirty_shift) != 0) same = false;
    else ++x.checks.pg_a_on_fault;
  }
  if (!same) {
    ++x.checks.pg_mismatches;
    ++x.checks.pg_mode_mismatches[slot];
    if (x.checks.pg_mismatches <= 8) {
      kprintf("HVKIT MISMATCH paging mode=%u case=%llu la=0x%llx access=0x%llx cr0=0x%llx cr4=0x%llx efer=0x%llx ac=%d "
              "cpu=0x%x/err=0x%x/cr2=0x%llx/ad=0x%llx hvkit=0x%x/err=0x%x/ad=0x%llx\n",
              slot, (unsigned long long)x.checks.pg_cases, (unsigned long long)c.la, (unsigned long long)c.access.raw(),
              (unsigned long long)live.cr0.raw(), (unsigned long long)cr4.raw(),
              (unsigned long long)live.efer.raw(), req.rflags.test(x86::rflags::ac) ? 1 : 0, c.result,
              c.error, (unsigned long long)c.cr2, (unsigned long long)c.ad, hv_result, hv_error,
              (unsigned long long)hv_ad);
      const pg::walk_path* path = res.has_value() ? &res.value().path : fault_path(res.error());
      for (unsigned i = 0; path && i < path->count; ++i)
        if (const pg::walked_entry e = path_entry(*path, i); true)
        kprintf("HVKIT MISMATCH   level=%u entry@0x%llx=0x%016llx\n", e.level, (unsigned long long)e.address.value(),
                (unsigned long long)e.value);
    }
  }
  return same ? 0 : 1;
}

/// The guest's paging registers at this exit from the VMCS (the VMX backend's paging_regs()).
guest_paging_regs vmcs_paging_regs(const core::vcpu_state& st) {
  if (core::shadow::enabled()) {
    // Shadow paging: the real CR0.WP is 1 and the real CR3 the shadow root; the guest's
    // values are the read shadows' host-owned bits and the CR3 it loaded.
    const x86::cr0 cr0 = hvkit::vmx::guest_visible_cr0(
        x86::cr0{vmread(fields::guest_cr0)}, x86::cr0{vmread(fields::cr0_read_shadow)}, vmread(fields::cr0_guest_host_mask));
    const x86::cr4 cr4 = hvkit::vmx::guest_visible_cr4(
        x86::cr4{vmread(fields::guest_cr4)}, x86::cr4{vmread(fields::cr4_read_shadow)}, vmread(fields::cr4_guest_host_mask));
    return {cr0, cr4, core::shadow::guest_efer(st), core::shadow::guest_cr3(st),
            x86::rflags{vmread(fields::guest_rflags)}};
  }
  return {x86::cr0{vmread(fields::guest_cr0)}, x86::cr4{vmread(fields::guest_cr4)},
          x86::efer{vmread(fields::guest_ia32_efer)}, x86::cr3{vmread(fields::guest_cr3)},
          x86::rflags{vmread(fields::guest_rflags)}};
}

/// The guest's paging registers as hvkit sees them: role and root.
pg::mmu_context live_guest_mmu(const guest_paging_regs& g, const pg::cpu_properties& props) {
  const pg::cpu_role role = pg::make_cpu_role(g.cr0, g.cr4, g.efer);
  return {role, x86::cr3_root(g.cr3, role.mode(), props.maxphyaddr)};
}

/// hc::paging_case (the 64-bit guest, 4-level paging): the case in registers.
std::uint64_t handle_paging_case(core::context& x, guest_regs& r, const guest_paging_regs& live) {
  cpu_case c{};
  c.la = r[x86::gpr::rbx];
  // Bit 31 of the access word marks an implicit supervisor access (x86::pfec keeps that
  // software flag at bit 48).
  c.implicit = (r[x86::gpr::rcx] >> 31) & 1;
  c.access = c.implicit ? x86::pfec::implicit_access : x86::pfec{r[x86::gpr::rcx] & 0x7FFFFFFF};
  c.ad = (r[x86::gpr::rcx] >> 32) & 0xFF;
  c.pkru = static_cast<std::uint32_t>((r[x86::gpr::rcx] >> 40) & 0xFF);
  c.result = static_cast<std::uint32_t>(r[x86::gpr::rdx]);
  c.error = static_cast<std::uint32_t>(r[x86::gpr::rdx] >> 32);
  c.cr2 = r[x86::gpr::rsi];
  const pg::cpu_properties props = guest_cpu_properties(x.vcpu.cpu->model);
  const pg::mmu_context mmu = live_guest_mmu(live, props);
  return compare_paging_case(x, c, pg::guest_walker{mmu, props}, mmu, live);
}

/// hc::paging_case32 (the 32-bit guest: 32-bit or PAE paging): the case in a
/// hc::paging_case_block. With PAE paging the MOV to CR3 before the access loaded the PDPTE
/// registers: hvkit's paging::load_pdptrs must raise #GP exactly when the CPU did (SDM
/// 4.4.1); the walk then uses load_pdptrs' snapshot (walker_pae never re-reads the PDPT),
/// which must equal the PDPTE registers the CPU saved in the VMCS at this exit (SDM Vol. 3C
/// 28.3.4, with EPT).
std::uint64_t handle_paging_case32(core::context& x, guest_regs& r, const guest_paging_regs& live) {
  const std::uint8_t* p = guest_ram(x.vcpu.ram, r[x86::gpr::rbx] & 0xFFFFFFFFu, sizeof(hc::paging_case_block));
  if (!p) return ~0ull;
  hc::paging_case_block b;
  __builtin_memcpy(&b, p, sizeof b);
  const pg::cpu_properties props = guest_cpu_properties(x.vcpu.cpu->model);
  const pg::mmu_context mmu = live_guest_mmu(live, props);
  pg::pdpte_snapshot pdptes{};
  if (mmu.role().mode() == x86::paging_mode::pae) {
    pg::flat_memory mem = guest_ram_view(x.vcpu.ram);
    if (svm::active()) {
      // QEMU 7.2 TCG erratum Q3 (docs/hypervisor.md): under nested paging its legacy-PAE walk
      // sets bit 5 (A) in the PDPTE it uses, a reserved bit of a PAE PDPTE (APM Vol. 2 5.3.3,
      // Figure 5-11; SDM Table 4-8). PDPTE 0 is the guest's fixed entry (never written with
      // bit 5): found set, it is the CPU's write; counted, the first case printed, and the
      // guest's value restored so that the later cases test what the guest wrote.
      const x86::gpa p0 = x86::cr3_root(x86::cr3{b.cr3}, x86::paging_mode::pae, props.maxphyaddr);
      if (const auto e0 = mem.read64(p0); e0 && (*e0 & 1) && (*e0 & 0x20)) {
        if (x.checks.pdpte_errata_q3++ == 0 && ++x.checks.results->errata)
          kprintf("HVKIT ERRATUM pae_pdpte_accessed_bit_written cr3=0x%x pdpte0=0x%016llx\n", b.cr3,
                  (unsigned long long)*e0);
        if (std::uint8_t* w = guest_ram(x.vcpu.ram, p0.value(), 8)) *reinterpret_cast<volatile std::uint64_t*>(w) = *e0 & ~0x20ull;
      }
    }
    // The MOV to CR3 the guest did for this case (SDM 4.4.1: #GP(0) on a reserved bit).
    const auto tried = pg::load_pdptrs(x86::cr3{b.cr3}, mem, props.maxphyaddr);
    const bool cpu_gp = (b.cr3_result & 0xFFFF) == (0x100 | 13) && (b.cr3_result >> 16) == 0;
    bool hv_gp = !tried && tried.error().kind == pg::pdptr_error::kind_type::reserved_bit;
    if (svm::active() && !core::shadow::enabled() && hv_gp) {
      // AMD with nested paging (APM 15.25.10, legacy PAE mode): MOV to CR3 loads no PDPTEs;
      // the walk reads them, and a reserved bit in the one it uses is a #PF with P and RSV
      // and the access's W, U/S and I/D bits. The cases' test address uses PDPTE 3.
      ++x.checks.pdpte_loads;
      ++x.checks.pdpte_walk_rsv;
      const guest_paging_regs& g = live;
      const bool implicit = (b.access >> 31) & 1, fetch = !implicit && (b.access & 0x10);
      const std::uint32_t id = fetch && (g.efer.test(x86::efer::nxe) || g.cr4.test(x86::cr4::smep)) ? 0x10u : 0u;
      const std::uint32_t err = 1u | 8u | (implicit ? 0u : (b.access & 0x6u)) | id;
      if (b.cr3_result != 0 || b.result != (0x100u | 14) || b.error != err || b.cr2 != b.la) {
        // QEMU 7.2 TCG erratum Q2 (docs/hypervisor.md): under nested paging its legacy-PAE walk
        // does not check PDPTE reserved bits (APM 15.25.10 / 5.3.3: a reserved bit in the PDPTE
        // the walk uses is a #PF with P and RSV). Classified only when the CPU's outcome is
        // exactly hvkit's walk through the same PDPTEs with their reserved bits cleared.
        if (b.cr3_result == 0) {
          pg::pdpte_snapshot s{};
          s.pdpt = x86::cr3_root(x86::cr3{b.cr3}, x86::paging_mode::pae, props.maxphyaddr);
          s.loaded = true;
          const std::uint64_t rsvd = pg::pae_pdpte_reserved(props.maxphyaddr);
          for (unsigned i = 0; i < 4; ++i) {
            const auto v = mem.read64(s.pdpt + 8u * i);
            s.entries[i] = v ? (*v & ~rsvd) : 0;
          }
          pg::walk_request req{};
          req.linear = x86::gva{b.la};
          req.access = implicit ? x86::pfec::implicit_access : x86::pfec{b.access & 0x7FFFFFFF};
          req.rflags = g.rflags;
          const pg::walk_result w = pg::guest_walker{mmu, props, s}.check(mem, mmu, req);
          bool same = w.has_value() ? b.result == 0
                                    : b.result == (0x100u | static_cast<std::uint32_t>(w.error().vector)) &&
                                                b.error == static_cast<std::uint32_t>(w.error().error_code.raw()) &&
                                                b.cr2 == b.la;
          // The reserved bit the walk does check (QEMU's own A in PDPTE 0 before it was
          // restored) with erratum Q1's error code: RSVD without P.
          const bool q1 = b.result == (0x100u | 14) && b.error == (err & ~1u) && b.cr2 == b.la;
          if (q1) {
            if (x.checks.pg_errata_q1++ == 0 && ++x.checks.results->errata)
              kprintf("HVKIT ERRATUM rsvd_page_fault_without_p.pdpte la=0x%x cpu_error=0x%x sdm_error=0x%x\n", b.la,
                      b.error, err);
            return 0;
          }
          // With Bochs erratum B3 as well (QEMU has it too): RFLAGS.AC = 1 lets an implicit
          // supervisor access reach a user-mode page under CR4.SMAP (compare_paging_case).
          const bool b3 = !w.has_value() && implicit && b.result == 0 && w.error().vector == x86::vector::pf &&
                          (static_cast<std::uint32_t>(w.error().error_code.raw()) & ~0x1u) == 0 &&
                          g.cr4.test(x86::cr4::smap) && g.rflags.test(x86::rflags::ac);
          if (b3) {
            ++x.checks.pg_errata_b3;
            ++x.checks.pg_mode_b3[2];
            same = true;
          }
          if (!same && x.checks.pdpte_mismatches < 8)
            kprintf("HVKIT INFO pdpte_walk without reserved bits: %s vector=%u error=0x%x kind=%u\n",
                    w.has_value() ? "ok" : "fault", w.has_value() ? 0u : static_cast<unsigned>(w.error().vector),
                    w.has_value() ? 0u : static_cast<unsigned>(w.error().error_code.raw()),
                    w.has_value() ? 0u : static_cast<unsigned>(w.error().kind));
          if (same) {
            if (x.checks.pdpte_errata_q2++ == 0 && ++x.checks.results->errata)
              kprintf("HVKIT ERRATUM pae_pdpte_reserved_bits_not_checked cr3=0x%x pdpte3=0x%016llx la=0x%x cpu=0x%x/0x%x "
                      "apm: #PF error=0x%x\n",
                      b.cr3, (unsigned long long)*mem.read64(s.pdpt + 24u), b.la, b.result, b.error, err);
            return 0;
          }
        }
        ++x.checks.pdpte_mismatches;
        if (x.checks.pdpte_mismatches <= 8)
          kprintf("HVKIT MISMATCH pdpte_walk cr3=0x%x cpu=0x%x result=0x%x error=0x%x cr2=0x%x hvkit: #PF error=0x%x "
                  "reserved_pdpte%u=0x%llx\n",
                  b.cr3, b.cr3_result, b.result, b.error, b.cr2, err, static_cast<unsigned>(tried.error().index),
                  (unsigned long long)tried.error().value);
        return 1;
      }
      return 0;
    }
    ++x.checks.pdpte_loads;
    if (cpu_gp) ++x.checks.pdpte_gp;
    if (cpu_gp != hv_gp || (b.cr3_result != 0 && !cpu_gp)) {
      ++x.checks.pdpte_mismatches;
      kprintf("HVKIT MISMATCH pdpte_load cr3=0x%x cpu=0x%x hvkit=%s pdpte3=0x%016llx access=0x%x result=0x%x error=0x%x\n",
              b.cr3, b.cr3_result, hv_gp ? "#GP" : "ok",
              (unsigned long long)*reinterpret_cast<const volatile std::uint64_t*>(guest_ram(x.vcpu.ram, (b.cr3 & ~31u) + 24, 8)),
              b.access, b.result, b.error);
      return 1;
    }
    if (cpu_gp) return 0;  // no access was done
    const auto now = pg::load_pdptrs(live.cr3, mem, props.maxphyaddr);
    if (!now) {
      ++x.checks.pdpte_mismatches;
      return 1;
    }
    pdptes = now.value();
    // The PDPTE registers the CPU saved (VMX with EPT only: the VMCB has none). Under shadow
    // paging the guest's PDPTE registers are the shadow MMU's (loaded by its MOV to CR3; the
    // CPU's are those of the shadow root).
    const bool own = svm::active() || core::shadow::enabled();
    const std::uint64_t* held = core::shadow::enabled() ? core::shadow::mmu(x.vcpu).pdptes().entries.data() : pdptes.entries.data();
    const std::uint64_t regs[4] = {own ? held[0] : vmread(fields::guest_pdpte0), own ? held[1] : vmread(fields::guest_pdpte1),
                                   own ? held[2] : vmread(fields::guest_pdpte2), own ? held[3] : vmread(fields::guest_pdpte3)};
    for (unsigned i = 0; i < 4; ++i)
      if (regs[i] != pdptes.entries[i]) {
        if (++x.checks.pdpte_register_mismatches <= 4)
          kprintf("HVKIT MISMATCH pdpte_register index=%u vmcs=0x%016llx memory=0x%016llx\n", i,
                  (unsigned long long)regs[i], (unsigned long long)pdptes.entries[i]);
        break;
      }
  }
  cpu_case c{};
  c.la = b.la;
  c.implicit = (b.access >> 31) & 1;
  c.access = c.implicit ? x86::pfec::implicit_access : x86::pfec{b.access & 0x7FFFFFFF};
  c.ad = b.ad;
  if (svm::active() && mmu.role().mode() == x86::paging_mode::pae && (c.ad & 0x4)) {
    // Erratum Q3 (above): the CPU set bit 5 of the PDPTE it used (level 3 in the guest's A/D
    // mask), which a PAE PDPTE does not have. Counted; the rest of the case is compared.
    if (x.checks.pdpte_errata_q3++ == 0 && ++x.checks.results->errata)
      kprintf("HVKIT ERRATUM pae_pdpte_accessed_bit_written.case la=0x%x ad=0x%x\n", b.la, b.ad);
    c.ad &= ~0x4ull;
  }
  c.result = b.result;
  c.error = b.error;
  c.cr2 = b.cr2;
  return compare_paging_case(x, c, pg::guest_walker{mmu, props, pdptes}, mmu, live);
}

// ---- nested (EPT) differential -----------------------------------------------------------
// The guest's test tables and data page are reached through an EPT alias of the scratch
// area at GPA 512 GiB + [28 MiB, 30 MiB) (hc::ept_alias_gpa), with its own EPT PML4E, PDPT,
// PD and PT: every level of that subtree is randomised per case without touching the
// guest's own mappings. Its tables are vmx_host's (ept_alias_pdpt, _pd, _pt).
constexpr unsigned alias_pml4_index = hc::ept_alias_gpa >> 39;
constexpr unsigned alias_pd_index = (0x1C00000 >> 21) & 511;

std::uint64_t ept_perm_bits(unsigned p) { return p & 7; }  // bit 0 R, 1 W, 2 X

/// The alias subtree in its default state: RWX at every level, 4 KiB write-back pages.
/// With `on` false the alias is removed.
void ept_alias_reset(const vmx_host& h, bool on) {
  namespace v = hvkit::vmx;
  std::uint64_t* const ept_alias_pdpt = h.ept_alias_pdpt;
  std::uint64_t* const ept_alias_pd = h.ept_alias_pd;
  std::uint64_t* const ept_alias_pt = h.ept_alias_pt;
  std::uint64_t* const ept_pml4 = h.ept_pml4;
  const auto ec = v::ept_capabilities_from(h.caps.ept_vpid_cap, core::host_maxphyaddr());
  const v::ept_permissions rwx{true, true, true, false};
  if (on) {
    for (std::uint64_t i = 0; i < 512; ++i)
      ept_alias_pt[i] = v::make_ept_leaf(x86::hpa{0x1C00000 + (i << 12)}, v::ept_level::pte, rwx,
                                         hvkit::paging::ept_memory_type::wb, ec).value().raw();
    for (unsigned i = 0; i < 512; ++i) ept_alias_pd[i] = ept_alias_pdpt[i] = 0;
    ept_alias_pd[alias_pd_index] =
        v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_alias_pt)}, rwx, ec).value().raw();
    ept_alias_pdpt[0] =
        v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_alias_pd)}, rwx, ec).value().raw();
    ept_pml4[alias_pml4_index] =
        v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(ept_alias_pdpt)}, rwx, ec).value().raw();
  } else {
    ept_pml4[alias_pml4_index] = 0;
  }
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
}
void ept_scratch_split(const vmx_host& h, bool on) { ept_alias_reset(h, on); }

/// Sets the EPT permissions of one scratch page of the alias (no permission = not present).
void ept_set_page(const vmx_host& h, std::uint64_t gpa, unsigned perms) {
  std::uint64_t& e = h.ept_alias_pt[(gpa - 0x1C00000) >> 12];
  e = (e & ~7ull) | ept_perm_bits(perms);
}

/// The memory the nested walk reads: host-physical memory from 1 MiB (the EPT tables live in
/// the hypervisor's image) to the end of guest A's RAM. EPT maps guest A identically.
hvkit::paging::flat_memory host_memory_view() {
  return {reinterpret_cast<std::uint8_t*>(0x100000), layout::guest_mem_base + layout::guest_mem_size - 0x100000,
          x86::gpa{0x100000}};
}

/// Applies one case's EPT layout (hc::ept_arm RDX, see hypercall.hpp): the three pages'
/// EPT PTE permissions, the permissions of the alias' EPT PDE, PDPTE and PML4E, an EPT
/// large page (2 MiB at the PDE, 1 GiB at the PDPTE, where IA32_VMX_EPT_VPID_CAP allows),
/// and a misconfiguration (SDM Vol. 3C 29.3.3.1) at one level: write without read, a
/// reserved bit above MAXPHYADDR, a reserved bit 3 in a non-leaf entry or a reserved memory
/// type (2) in a leaf. Large pages and table entries are built by hvkit::vmx; only the
/// deliberately broken bits are patched in here.
void ept_apply_case(const vmx_host& h, std::uint64_t d) {
  namespace v = hvkit::vmx;
  std::uint64_t* const ept_alias_pdpt = h.ept_alias_pdpt;
  std::uint64_t* const ept_alias_pd = h.ept_alias_pd;
  std::uint64_t* const ept_alias_pt = h.ept_alias_pt;
  std::uint64_t* const ept_pml4 = h.ept_pml4;
  const auto ec = v::ept_capabilities_from(h.caps.ept_vpid_cap, core::host_maxphyaddr());
  ept_alias_reset(h, true);
  ept_set_page(h, hc::ept_test_data_gpa, d & 7);
  ept_set_page(h, hc::ept_test_pt_gpa, (d >> 8) & 7);
  ept_set_page(h, hc::ept_test_pd_gpa, (d >> 16) & 7);
  const unsigned pde_perm = (d >> 24) & 7, pdpte_perm = (d >> 27) & 7, pml4e_perm = (d >> 32) & 7;
  const unsigned size = (d >> 36) & 3, mis = (d >> 40) & 3, mis_level = (d >> 42) & 3;
  auto perms = [](unsigned p) { return v::ept_permissions{(p & 1) != 0, (p & 2) != 0, (p & 4) != 0, false}; };
  auto with_perm = [](std::uint64_t e, unsigned p) { return (e & ~7ull) | ept_perm_bits(p); };
  ept_alias_pd[alias_pd_index] = with_perm(ept_alias_pd[alias_pd_index], pde_perm);
  ept_alias_pdpt[0] = with_perm(ept_alias_pdpt[0], pdpte_perm);
  ept_pml4[alias_pml4_index] = with_perm(ept_pml4[alias_pml4_index], pml4e_perm);
  bool leaf2m = false, leaf1g = false;
  if (size == 2 && pde_perm != 0) {
    if (auto l = v::make_ept_leaf(x86::hpa{0x1C00000}, v::ept_level::pde, perms(pde_perm),
                                  hvkit::paging::ept_memory_type::wb, ec)) {
      ept_alias_pd[alias_pd_index] = l.value().raw();
      leaf2m = true;
    }
  } else if (size == 3 && pdpte_perm != 0) {
    if (auto l = v::make_ept_leaf(x86::hpa{0}, v::ept_level::pdpte, perms(pdpte_perm),
                                  hvkit::paging::ept_memory_type::wb, ec)) {
      ept_alias_pdpt[0] = l.value().raw();
      leaf1g = true;
    }
  }
  if (mis != 0) {
    // The level: 0 the data page's EPT PTE, 1 the PDE, 2 the PDPTE, 3 the PML4E.
    std::uint64_t* e = mis_level == 0 ? &ept_alias_pt[(hc::ept_test_data_gpa - 0x1C00000) >> 12]
                       : mis_level == 1 ? &ept_alias_pd[alias_pd_index]
                       : mis_level == 2 ? &ept_alias_pdpt[0]
                                        : &ept_pml4[alias_pml4_index];
    const bool leaf = mis_level == 0 || (mis_level == 1 && leaf2m) || (mis_level == 2 && leaf1g);
    if (mis == 1) *e = (*e & ~7ull) | 2;  // write without read
    else if (mis == 2) *e |= 1ull << 45;  // above MAXPHYADDR (40 on Bochs' models)
    else if (leaf) *e = (*e & ~0x38ull) | (2ull << 3);  // memory type 2: reserved
    else *e |= 1ull << 3;  // reserved in a non-leaf entry (bits 7:3 / 6:3)
  }
  static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
}

/// hc::ept_arm: apply the case's EPT permissions and predict the access with hvkit's nested
/// walker (the guest's 4-level tables read through EPT, SDM Vol. 3C 29.3.3), guest A/D
/// updates included (their EPT write check is part of the prediction) and then undone so
/// that the CPU starts from the same state.
void handle_ept_arm(const vmx_host& h, core::check_counters& k, const cpuid_ns::guest_cpu_model& model, guest_regs& r) {
  namespace pg = hvkit::paging;
  const std::uint64_t la = r[x86::gpr::rbx];
  const x86::pfec access{r[x86::gpr::rcx]};
  ept_apply_case(h, r[x86::gpr::rdx]);

  const pg::cpu_properties props = guest_cpu_properties(model);
  const x86::cr0 cr0{vmread(fields::guest_cr0)};
  const x86::cr4 cr4{vmread(fields::guest_cr4)};
  const x86::efer efer{vmread(fields::guest_ia32_efer)};
  const pg::cpu_role role = pg::make_cpu_role(cr0, cr4, efer);
  const pg::mmu_context mmu{role, x86::cr3_root(x86::cr3{vmread(fields::guest_cr3)}, role.mode(), props.maxphyaddr)};
  // The walker's capabilities from IA32_VMX_EPT_VPID_CAP (one decoder:
  // vmx::ept_capabilities_from); MBEC off.
  const pg::ept_capabilities ecap = hvkit::vmx::ept_capabilities_from(h.caps.ept_vpid_cap, core::host_maxphyaddr(), false);
  auto ew = pg::ept_walker::make(pg::ept_pointer{h.eptp}, ecap);
  pg::walk_request req{};
  req.linear = x86::gva{la};
  req.access = access;
  req.rflags = x86::rflags{vmread(fields::guest_rflags)};
  pg::flat_memory mem = host_memory_view();
  k.ept_pred_ok = k.ept_pred_ept = k.ept_pred_misconfig = false;
  k.ept_pred_result = 0xFFFF;
  if (ew) {
    const pg::nested_walker<pg::format::ia32e<4>, pg::ept_walker> nw{pg::basic_walker<pg::format::ia32e<4>>{mmu, props},
                                                                      ew.value()};
    const pg::nested_result res = nw.walk(mem, mmu, req);
    if (res.has_value()) {
      k.ept_pred_ok = true;
      k.ept_pred_result = 0;
      const pg::walk_path& path = res.value().guest.path;
      for (unsigned i = 0; i < path.count; ++i) {  // undo the guest A/D updates
        const pg::walked_entry e = path_entry(path, i);
        if (std::uint8_t* p = guest_ram(core::conformance_ram, e.address.value(), 8)) *reinterpret_cast<volatile std::uint64_t*>(p) = e.value;
      }
    } else {
      const pg::walk_fault& f = res.error();
      if (f.stage == pg::walk_stage::ept) {
        k.ept_pred_ept = true;
        k.ept_pred_misconfig = f.kind == pg::fault_kind::ept_misconfig;
        k.ept_pred_qual = f.qualification.raw();
        k.ept_pred_gpa = f.guest_physical.value();
        k.ept_pred_la = f.linear.value();
      } else {
        k.ept_pred_result = 0x100 | static_cast<std::uint32_t>(f.vector);
        k.ept_pred_error = static_cast<std::uint32_t>(f.error_code.raw());
      }
    }
  }
  k.ept_seen = k.ept_seen_misconfig = false;
  k.ept_seen_qual = k.ept_seen_gpa = k.ept_seen_la = 0;
  k.ept_armed = true;
}

/// An EPT violation or misconfiguration in the alias while a case is armed: record what
/// the CPU reported, put the alias back to its default (RWX, 4 KiB pages) and let the guest
/// retry the access.
bool ept_case_exit(const vmx_host& h, core::check_counters& k, bool misconfig) {
  const std::uint64_t gpa = vmread(fields::guest_physical_address);
  if (!k.ept_armed || gpa < hc::ept_alias_gpa + 0x1C00000 || gpa >= hc::ept_alias_gpa + 0x1E00000) return false;
  if (!k.ept_seen) {
    k.ept_seen = true;
    k.ept_seen_misconfig = misconfig;
    k.ept_seen_qual = misconfig ? 0 : vmread(fields::exit_qualification);
    k.ept_seen_gpa = gpa;
    k.ept_seen_la = misconfig ? 0 : vmread(fields::guest_linear_address);
  }
  ept_alias_reset(h, true);
  return true;
}
bool ept_case_violation(const vmx_host& h, core::check_counters& k) { return ept_case_exit(h, k, false); }
bool ept_case_misconfig(const vmx_host& h, core::check_counters& k) { return ept_case_exit(h, k, true); }

/// hc::ept_check: compare. Qualification bits 0-5 (access, EPT rights), 7 (linear address
/// valid) and 8 (final translation vs paging-structure access) must agree; bit 6 (XU) is
/// only defined with mode-based execute control, which is off. Then the GPA and the linear
/// address. Without a predicted EPT violation, the CPU must not have exited and the guest
/// must have seen the predicted outcome (success, or #PF with the same error code).
std::uint64_t handle_ept_check(const vmx_host& h, core::check_counters& k, guest_regs& r) {
  const auto cpu_result = static_cast<std::uint32_t>(r[x86::gpr::rbx]);
  const auto cpu_error = static_cast<std::uint32_t>(r[x86::gpr::rcx]);
  constexpr std::uint64_t qmask = 0x1BF;  // bits 0-5, 7, 8
  bool same;
  if (k.ept_pred_misconfig) {
    // A misconfiguration exit has no qualification and no linear address (SDM Vol. 3C 28.2.1).
    same = k.ept_seen && k.ept_seen_misconfig && k.ept_seen_gpa == k.ept_pred_gpa;
  } else if (k.ept_pred_ept) {
    same = k.ept_seen && !k.ept_seen_misconfig && (k.ept_seen_qual & qmask) == (k.ept_pred_qual & qmask) &&
           k.ept_seen_gpa == k.ept_pred_gpa && k.ept_seen_la == k.ept_pred_la;
  } else {
    same = !k.ept_seen && cpu_result == k.ept_pred_result && (cpu_result == 0 || cpu_error == k.ept_pred_error);
  }
  // Bochs 2.7 erratum (see docs/hypervisor.md): without EPT A/D (EPTP bit 6 = 0) it sets the
  // A/D flags of guest paging-structure entries without checking EPT write permission. SDM
  // Vol. 3C 29.3.3.2: an A/D update is a write to the guest paging structure, so a
  // read-only page-table page causes an EPT violation (qualification bit 1 set, bit 8 0).
  // Cases where hvkit predicts exactly that violation and the CPU did not exit are counted
  // apart; the rest of the comparison applies to every other case.
  const bool ad_write_erratum = !same && k.ept_pred_ept && !k.ept_pred_misconfig && !k.ept_seen &&
                                (k.ept_pred_qual & 0x2) && !(k.ept_pred_qual & 0x100);
  if (ad_write_erratum) {
    ++k.ept_errata;
    same = true;
  }
  ++k.ept_cases;
  if (k.ept_seen) ++(k.ept_seen_misconfig ? k.ept_misconfigs : k.ept_violations);
  if (k.ept_seen_misconfig) ++k.ept_misconfig_by_kind[(r[x86::gpr::rsi] >> 52) & 3];  // kind 0: not one we planted
  if ((r[x86::gpr::rsi] >> 48) & 3) ++k.ept_large_cases;
  if (cpu_result != 0) ++k.ept_guest_faults;
  if (!same && ++k.ept_mismatches <= 12)
    kprintf("HVKIT MISMATCH ept case=%llu case_info=0x%llx cpu: ept=%d qual=0x%llx gpa=0x%llx la=0x%llx guest=0x%x/0x%x "
            "hvkit: ept=%d qual=0x%llx gpa=0x%llx la=0x%llx guest=0x%x/0x%x\n",
            (unsigned long long)k.ept_cases, (unsigned long long)r[x86::gpr::rsi],
            k.ept_seen ? (k.ept_seen_misconfig ? 2 : 1) : 0,
            (unsigned long long)k.ept_seen_qual, (unsigned long long)k.ept_seen_gpa,
            (unsigned long long)k.ept_seen_la, cpu_result, cpu_error,
            k.ept_pred_ept ? (k.ept_pred_misconfig ? 2 : 1) : 0,
            (unsigned long long)k.ept_pred_qual, (unsigned long long)k.ept_pred_gpa,
            (unsigned long long)k.ept_pred_la, k.ept_pred_result, k.ept_pred_error);
  k.ept_armed = false;
  ept_alias_reset(h, true);
  return same ? 0 : 1;
}

}  // namespace hv
