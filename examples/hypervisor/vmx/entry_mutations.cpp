// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the mutations of the VM-entry differential (vmx/entry_diff.cpp):
// one to three VMCS fields changed at random (fixed seed) from the valid baseline, each kind
// of field with the values that exercise its checks (SDM Vol. 3C 27.2, 27.3), and the
// targeted cases of the rules the random ones reach too rarely.
#include "entry_diff.hpp"

namespace hv::entry_detail {

// ---- mutations ----------------------------------------------------------------------------
constexpr unsigned apic_virtualization_bits[] = {0, 4, 8, 9};
constexpr unsigned debugctl_bits[] = {0, 1, 2, 5, 6, 11, 14, 15, 16, 40};
constexpr unsigned host_cr0_fixed1_bits[] = {0, 5, 31};
constexpr unsigned host_cr4_fixed1_bits[] = {5, 13};
constexpr unsigned efer_reserved_bits[] = {1, 12, 14, 9};
constexpr unsigned efer_lme_lma_bits[] = {8, 10};
constexpr std::uint64_t bad_host_pat[] = {0x0007'0406'0007'0402ull, 0x0707'0707'0707'0708ull};
constexpr unsigned cr4_reserved_bits[] = {31, 40, 63};
constexpr unsigned cr0_reserved_bits[] = {32, 40, 63};
constexpr std::uint32_t ldtr_ar_values[] = {0x82, 0x83, 0x02, 0x92, 0x8082, 0x10082};
const char* const probe_name[probe_count] = {"-", "rtm_pending_debug_under_blocking", "error_code_cp_and_pe0"};
void put(mutation_log& log, std::uint32_t enc, std::uint64_t val) {
  wr(enc, val);
  if (log.n < mutation_log::max) {
    log.enc[log.n] = enc;
    log.val[log.n] = val;
    ++log.n;
  }
}
void put_or(mutation_log& log, std::uint32_t enc, std::uint64_t bits) { put(log, enc, rd(enc) | bits); }
void put_xor(mutation_log& log, std::uint32_t enc, std::uint64_t bits) { put(log, enc, rd(enc) ^ bits); }
void put_clear(mutation_log& log, std::uint32_t enc, std::uint64_t bits) { put(log, enc, rd(enc) & ~bits); }


namespace {
/// The mutations of one case, over the differential's random numbers and pages (mutation_env,
/// entry_diff_run's).
struct mutator {
  const mutation_env& env;
  std::uint8_t* const link_page = env.pages.link_page;
  std::uint8_t* const vapic_page = env.pages.vapic_page;
  std::uint64_t* const msr_page = env.pages.msr_page;
  std::uint64_t* const exit_msr_page = env.pages.exit_msr_page;
  const hvkit::vmx::vmx_capabilities& vcaps = env.caps;

  std::uint64_t rnd() { return env.rng.next(); }
  unsigned rnd_below(unsigned n) { return env.rng.below(n); }
  template <class T, std::size_t N>
  T pick(const T (&a)[N]) {
    return a[rnd_below(N)];
  }

  // A coherent 32-bit protected-mode guest (IA-32e mode guest = 0): EFER.LMA/LME clear, CS
  // a 32-bit code segment. CR4.PAE stays 1, so it uses PAE paging.
  void make_guest32(mutation_log& log) {
    put_clear(log, fields::vm_entry_controls.encoding, v::entry_controls::ia32e_mode_guest.raw());
    put_clear(log, fields::guest_ia32_efer.encoding, (x86::efer::lme | x86::efer::lma).raw());
    put(log, fields::guest_cs_access_rights.encoding, 0xc09b);
  }
  void make_v86(mutation_log& log) {
    make_guest32(log);
    put_or(log, fields::guest_rflags.encoding, x86::rflags::vm.raw());
    for (unsigned s = 0; s < 6; ++s) {
      const std::uint16_t sel = static_cast<std::uint16_t>(0x1000 + 0x100 * s);
      wr(sel_enc(s), sel);
      wr(base_enc(s), std::uint64_t{sel} << 4);
      wr(limit_enc(s), 0xffff);
      wr(ar_enc(s), 0xf3);
    }
  }
  std::uint64_t noncanonical() {
    const std::uint64_t c[] = {bit(47), 0x0000'8000'0000'1000ull, 0xffff'7fff'ffff'f000ull, bit(63), bit(56),
                               0x00ff'ffff'ffff'f000ull};
    return pick(c);
  }

  void mutate_segment(mutation_log& log) {
    const unsigned s = rnd_below(8);
    switch (rnd_below(10)) {
      case 0: case 1: case 2: put_xor(log, ar_enc(s), bit(rnd_below(17))); break;
      case 3: put(log, ar_enc(s), (rd(ar_enc(s)) & ~0xfull) | rnd_below(16)); break;
      case 4: put(log, ar_enc(s), rnd() & 0x1f0ff); break;
      case 5: {
        const std::uint32_t l[] = {0xffff, 0xfffff, 0xffffffff, 0xfffff000, 0x67, 0, 0x100fff, 0xffffe};
        put(log, limit_enc(s), pick(l));
        break;
      }
      case 6: {
        const std::uint64_t b[] = {bit(32), bit(47), 0xffff'8000'0000'0000ull, 0x0000'8000'0000'0000ull, 0x1000};
        put(log, base_enc(s), pick(b));
        break;
      }
      case 7: put_xor(log, sel_enc(s), bit(rnd_below(5))); break;
      case 8: put_xor(log, ar_enc(s), bit(16)); break;  // usable <-> unusable
      default: put_xor(log, ar_enc(s), (bit(rnd_below(2) + 5)));  // a DPL bit
    }
  }
  void mutate_control_register(mutation_log& log) {
    switch (rnd_below(4)) {
      case 0: {
        const unsigned b[] = {0, 1, 2, 3, 5, 16, 18, 29, 30, 31};
        put_xor(log, fields::guest_cr0.encoding, bit(pick(b)));
        break;
      }
      case 1: put_xor(log, fields::guest_cr4.encoding, bit(rnd_below(25))); break;
      case 2: put_or(log, fields::guest_cr3.encoding, bit(36 + rnd_below(28))); break;
      default: {
        const unsigned b[] = {0, 8, 10, 11, 12, 14, 1};
        put_xor(log, fields::guest_ia32_efer.encoding, bit(pick(b)));
      }
    }
  }
  void mutate_mode(mutation_log& log) {
    switch (rnd_below(6)) {
      case 0: put_xor(log, fields::vm_entry_controls.encoding, v::entry_controls::ia32e_mode_guest.raw()); break;
      case 1: make_guest32(log); break;
      case 2: make_v86(log); break;
      case 3: {  // unrestricted guest, sometimes in real mode
        put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
        if (rnd_below(2)) {
          make_guest32(log);
          put_clear(log, fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
          if (rnd_below(2)) put(log, fields::guest_cs_access_rights.encoding, 0x93 | (rnd_below(2) ? 0x60 : 0));
        }
        break;
      }
      case 4: {  // CS.L with CS.D
        put_or(log, fields::guest_cs_access_rights.encoding, bit(14));
        break;
      }
      default: {  // CPL 3 (consistent) or half of it
        put(log, sel_enc(1), 0x0b);
        put(log, ar_enc(1), 0xa0fb);
        if (rnd_below(2)) {
          put(log, sel_enc(2), 0x13);
          put(log, ar_enc(2), 0xc0f3);
        }
      }
    }
  }
  void mutate_pdptes(mutation_log& log) {
    make_guest32(log);
    if (rnd_below(4) == 0)  // without EPT the PDPTEs come from the PDPT at CR3
      put_clear(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_ept.raw());
    for (unsigned i = 0; i < 4; ++i) {
      const std::uint64_t bad[] = {0, 0x1001, 0x1003, 0x1005, 0x1021, 0x1101, 0x1001 | bit(45), 0x1001 | bit(63), 0x1000,
                                   0x1001 | bit(52)};
      put(log, fields::guest_pdpte0.encoding + 2 * i, rnd_below(3) ? 0x1001 + 0x1000 * i : pick(bad));
    }
  }
  void mutate_rflags(mutation_log& log) {
    const unsigned b[] = {1, 3, 5, 8, 9, 14, 15, 16, 17, 21, 22, 63};
    put_xor(log, fields::guest_rflags.encoding, bit(pick(b)));
  }
  void mutate_nonregister(mutation_log& log) {
    switch (rnd_below(4)) {
      case 0: {
        const std::uint32_t a[] = {0, 1, 1, 2, 3, 4, 7};
        const std::uint32_t s = pick(a);
        if (s == 2 || s == 3) log.activity_risk = true;
        put(log, fields::guest_activity_state.encoding, s);
        break;
      }
      case 1: {
        const std::uint32_t i[] = {1, 2, 3, 4, 8, 0x10, 0x12, 0x20, 9, 0x100};
        put(log, fields::guest_interruptibility_state.encoding, pick(i));
        if (rnd_below(2)) put_or(log, fields::guest_rflags.encoding, x86::rflags::if_.raw());
        break;
      }
      case 2: {
        const unsigned b[] = {0, 1, 2, 3, 4, 12, 13, 14, 15, 16, 17, 40};
        std::uint64_t p = 0;
        for (unsigned k = 0, n = 1 + rnd_below(2); k < n; ++k) p |= bit(pick(b));
        put(log, fields::guest_pending_debug_exceptions.encoding, p);
        if (rnd_below(2)) put(log, fields::guest_interruptibility_state.encoding, 1 + rnd_below(2));
        if (rnd_below(2)) put_or(log, fields::guest_rflags.encoding, (x86::rflags::if_ | x86::rflags::tf).raw());
        break;
      }
      default: {  // the VMCS link pointer
        const std::uint64_t page = reinterpret_cast<std::uint64_t>(link_page);
        const std::uint32_t rev = vcaps.revision_id();
        const std::uint64_t p[] = {page, page, page | 0x800, bit(45), page + 0x1000};
        const std::uint32_t r[] = {rev, rev, rev ^ 1, rev | 0x8000'0000u};
        *reinterpret_cast<volatile std::uint32_t*>(link_page) = pick(r);
        put(log, fields::vmcs_link_pointer.encoding, pick(p));
      }
    }
  }
  void mutate_injection(mutation_log& log) {
    const unsigned vec[] = {0, 1, 2, 3, 6, 8, 13, 14, 17, 18, 21, 32, 255};
    const unsigned type = rnd_below(8);
    std::uint32_t info = 0x8000'0000u | (type << 8) | pick(vec);
    if (rnd_below(2)) info |= bit(11);
    if (rnd_below(10) == 0) info |= bit(12 + rnd_below(19));
    put(log, fields::vm_entry_interruption_info.encoding, info);
    const std::uint32_t ec[] = {0, 0, 5, 0x10000, 0x8000'0000u, 0xffff};
    put(log, fields::vm_entry_exception_error_code.encoding, pick(ec));
    const std::uint32_t len[] = {0, 1, 2, 3, 15, 16};
    put(log, fields::vm_entry_instruction_length.encoding, pick(len));
    if (rnd_below(2)) put_or(log, fields::guest_rflags.encoding, x86::rflags::if_.raw());
  }
  void mutate_controls(mutation_log& log) {
    switch (rnd_below(7)) {
      case 0: {
        unsigned b;
        do b = rnd_below(8); while (b == 6);  // the preemption timer stays on
        put_xor(log, fields::pin_based_controls.encoding, bit(b));
        break;
      }
      case 1: put_xor(log, fields::primary_processor_based_controls.encoding, bit(rnd_below(32))); break;
      case 2: put_xor(log, fields::secondary_processor_based_controls.encoding, bit(rnd_below(32))); break;
      case 3: {
        unsigned b;
        do b = rnd_below(32); while (b == 9);  // host address-space size: see mutate_host
        put_xor(log, fields::primary_vm_exit_controls.encoding, bit(b));
        break;
      }
      case 4: put_xor(log, fields::vm_entry_controls.encoding, bit(rnd_below(32))); break;
      case 5: {  // TPR shadow with a virtual-APIC page and a threshold against VTPR
        put_or(log, fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_tpr_shadow.raw());
        put(log, fields::virtual_apic_page_address.encoding, reinterpret_cast<std::uint64_t>(vapic_page) | (rnd_below(8) ? 0 : 0x80));
        vapic_page[0x80] = static_cast<std::uint8_t>(rnd());
        put(log, fields::tpr_threshold.encoding, rnd_below(20));
        if (rnd_below(3) == 0)
          put_xor(log, fields::secondary_processor_based_controls.encoding, bit(pick(apic_virtualization_bits)));
        break;
      }
      default: {  // EPTP, CR3-target count, VPID
        switch (rnd_below(3)) {
          case 0: put_xor(log, fields::ept_pointer.encoding, bit(rnd_below(12)) | (rnd_below(4) ? 0 : bit(45))); break;
          case 1: put(log, fields::cr3_target_count.encoding, rnd_below(7)); break;
          default:
            put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_vpid.raw());
            put(log, fields::virtual_processor_id.encoding, rnd_below(2));
        }
      }
    }
  }
  void mutate_msr_areas(mutation_log& log) {
    switch (rnd_below(3)) {
      case 0: {  // VM-exit MSR-store or -load area (never used: the checks refuse or the count is 0)
        const std::uint64_t base = reinterpret_cast<std::uint64_t>(exit_msr_page);
        const std::uint64_t a[] = {base + 4, base + 8, bit(45), base + 1};
        const bool store = rnd_below(2);
        put(log, store ? fields::vm_exit_msr_store_address.encoding : fields::vm_exit_msr_load_address.encoding, pick(a));
        put(log, store ? fields::vm_exit_msr_store_count.encoding : fields::vm_exit_msr_load_count.encoding, 1 + rnd_below(2));
        break;
      }
      default: {  // VM-entry MSR-load list
        const std::uint64_t base = reinterpret_cast<std::uint64_t>(msr_page);
        const unsigned n = 1 + rnd_below(3);
        for (unsigned i = 0; i < n; ++i) {
          struct {
            std::uint64_t lo, value;
          } const e[] = {{0x174, 0x10},
                         {0x175, 0x1000},
                         {0x175, bit(47)},
                         {0x176, 0xffff'8000'0000'0000ull},
                         {0xc000'0102u, 0x1234'5000},
                         {0xc000'0102u, 0x0000'8000'0000'0000ull},
                         {0xc000'0100u, 0},
                         {0xc000'0101u, 0},
                         {0x808, 0},
                         {0x8ff, 0},
                         {0x9b, 0},
                         {0x1'0000'0174ull, 0},
                         {0xffff'ffffu, 0}};
          const auto& x = e[rnd_below(sizeof e / sizeof e[0])];
          msr_page[2 * i] = x.lo;
          msr_page[2 * i + 1] = x.value;
        }
        put(log, fields::vm_entry_msr_load_address.encoding, rnd_below(10) ? base : base + 8);
        put(log, fields::vm_entry_msr_load_count.encoding, n);
      }
    }
  }
  void mutate_guest_misc(mutation_log& log) {
    switch (rnd_below(7)) {
      case 0: put(log, fields::guest_rip.encoding, rnd_below(2) ? noncanonical() : bit(32) | 0x1000); break;
      case 1: put(log, rnd_below(2) ? fields::guest_ia32_sysenter_esp.encoding : fields::guest_ia32_sysenter_eip.encoding,
                  noncanonical());
        break;
      case 2: put(log, rnd_below(2) ? fields::guest_gdtr_base.encoding : fields::guest_idtr_base.encoding, noncanonical()); break;
      case 3: put(log, rnd_below(2) ? fields::guest_gdtr_limit.encoding : fields::guest_idtr_limit.encoding, 0x10000); break;
      case 4:
        put_or(log, fields::vm_entry_controls.encoding, v::entry_controls::load_debug_controls.raw());
        if (rnd_below(2)) put(log, fields::guest_dr7.encoding, 0x400 | bit(32 + rnd_below(32)));
        else put(log, fields::guest_ia32_debugctl.encoding, bit(pick(debugctl_bits)));
        break;
      case 5: {
        put_or(log, fields::vm_entry_controls.encoding, v::entry_controls::load_ia32_pat.raw());
        const std::uint64_t pat[] = {0x0007'0406'0007'0406ull, 0x0007'0406'0007'0402ull, 0x0007'0406'0008'0406ull,
                                     0x0303'0303'0303'0303ull};
        put(log, fields::guest_ia32_pat.encoding, pick(pat));
        break;
      }
      default: put_xor(log, fields::guest_ia32_efer.encoding, bit(12));  // SVME: reserved on Intel
    }
  }
  /// Host-state mutations, each invalid by construction (SDM 27.2.2-27.2.4).
  void mutate_host(mutation_log& log) {
    log.host = true;
    switch (rnd_below(12)) {
      case 0: put_or(log, 0x0c00 + 2 * rnd_below(7), 1 + rnd_below(7)); break;  // RPL/TI of a host selector
      case 1: put(log, rnd_below(2) ? fields::host_cs_selector.encoding : fields::host_tr_selector.encoding, 0); break;
      case 2: {
        const std::uint32_t e[] = {fields::host_fs_base.encoding, fields::host_gs_base.encoding, fields::host_tr_base.encoding,
                                   fields::host_gdtr_base.encoding, fields::host_idtr_base.encoding,
                                   fields::host_ia32_sysenter_esp.encoding, fields::host_ia32_sysenter_eip.encoding,
                                   fields::host_rip.encoding};
        put(log, pick(e), noncanonical());
        break;
      }
      case 3: put_or(log, fields::host_cr3.encoding, bit(52 + rnd_below(12))); break;
      case 4: put_clear(log, fields::host_cr0.encoding, bit(pick(host_cr0_fixed1_bits))); break;
      case 5: put_clear(log, fields::host_cr4.encoding, bit(pick(host_cr4_fixed1_bits))); break;
      case 6: put_or(log, fields::host_ia32_efer.encoding, bit(pick(efer_reserved_bits))); break;
      case 7: put_clear(log, fields::host_ia32_efer.encoding, bit(pick(efer_lme_lma_bits))); break;
      case 8: put_clear(log, fields::primary_vm_exit_controls.encoding, v::exit_controls::host_address_space_size.raw()); break;
      case 9:
        put_or(log, fields::primary_vm_exit_controls.encoding, v::exit_controls::load_ia32_pat.raw());
        put(log, fields::host_ia32_pat.encoding, pick(bad_host_pat));
        break;
      case 10: put_or(log, fields::host_cr4.encoding, bit(pick(cr4_reserved_bits))); break;
      default: put_or(log, fields::host_cr0.encoding, bit(pick(cr0_reserved_bits)));
    }
  }

  /// Combinations that reach the rules single-field mutations rarely reach.
  void mutate_targeted(mutation_log& log) {
    switch (rnd_below(18)) {
      case 16: {  // RTM in the pending debug exceptions under blocking by STI or MOV SS (SDM 27.3.1.5)
        log.probe = probe_rtm;
        const std::uint64_t p[] = {bit(16) | bit(12), bit(16) | bit(12), bit(16), bit(16) | bit(12) | bit(14),
                                   bit(16) | bit(12) | bit(0)};
        put(log, fields::guest_pending_debug_exceptions.encoding, pick(p));
        const std::uint32_t blk[] = {0, 1, 1, 2};
        put(log, fields::guest_interruptibility_state.encoding, pick(blk));
        put_or(log, fields::guest_rflags.encoding, x86::rflags::if_.raw());
        break;
      }
      case 17: {  // deliver-error-code: #CP (21), and CR0.PE = 0 without "unrestricted guest"
        log.probe = probe_error_code;
        const std::uint32_t vec[] = {21, 21, 13, 14, 6, 8};
        std::uint32_t info = 0x8000'0300u | pick(vec);
        if (rnd_below(2)) info |= bit(11);
        put(log, fields::vm_entry_interruption_info.encoding, info);
        put(log, fields::vm_entry_exception_error_code.encoding, rnd_below(2) ? 0 : 0x18);
        if (rnd_below(3)) {  // a 32-bit guest with CR0.PE = PG = 0 ("unrestricted guest" stays 0)
          make_guest32(log);
          put_clear(log, fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
        }
        break;
      }
      case 0: {  // I/O and MSR bitmaps
        const std::uint64_t a[] = {0x20'0000, 0x20'0800, bit(45), 0x20'0001};
        if (rnd_below(2)) {
          put_or(log, fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_io_bitmaps.raw());
          put(log, fields::io_bitmap_a.encoding, pick(a));
          put(log, fields::io_bitmap_b.encoding, pick(a));
        } else {
          put_or(log, fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_msr_bitmaps.raw());
          put(log, fields::msr_bitmap.encoding, pick(a));
        }
        break;
      }
      case 1: {  // APIC-access page, x2APIC virtualization
        const std::uint64_t a[] = {0x20'0000, 0x20'0010, bit(46)};
        put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::virtualize_apic_accesses.raw());
        put(log, fields::apic_access_address.encoding, pick(a));
        if (rnd_below(2)) {
          put_or(log, fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_tpr_shadow.raw());
          put(log, fields::virtual_apic_page_address.encoding, reinterpret_cast<std::uint64_t>(vapic_page));
          put(log, fields::tpr_threshold.encoding, 0);
          put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::virtualize_x2apic_mode.raw());
        }
        break;
      }
      case 2:  // "save VMX-preemption timer" without the timer; RFLAGS bit 1 clear keeps the
               // guest from running should the CPU accept the controls
        put_clear(log, fields::pin_based_controls.encoding, v::pin_based::activate_preemption_timer.raw());
        put_or(log, fields::primary_vm_exit_controls.encoding, v::exit_controls::save_preemption_timer.raw());
        put(log, fields::guest_rflags.encoding, 0);
        break;
      case 3:  // unrestricted guest: CR0.PG without PE, or an IA-32e guest without paging
        put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
        put_clear(log, fields::guest_cr0.encoding, rnd_below(2) ? x86::cr0::pe.raw() : x86::cr0::pg.raw());
        break;
      case 4:  // CR4.PCIDE outside IA-32e mode, CR4.CET without CR0.WP
        if (rnd_below(2)) {
          make_guest32(log);
          put_or(log, fields::guest_cr4.encoding, x86::cr4::pcide.raw());
        } else {
          put_or(log, fields::guest_cr4.encoding, x86::cr4::cet.raw());
          put_clear(log, fields::guest_cr0.encoding, x86::cr0::wp.raw());
        }
        break;
      case 5:  // a usable LDTR
        put(log, fields::guest_ldtr_selector.encoding, rnd_below(2) ? 0x24 : 0x20);
        put(log, fields::guest_ldtr_limit.encoding, rnd_below(2) ? 0xfff : 0xfffff);
        put(log, fields::guest_ldtr_access_rights.encoding, pick(ldtr_ar_values));
        break;
      case 6: {  // virtual-8086 mode with one field off
        make_v86(log);
        const unsigned seg = rnd_below(6);
        switch (rnd_below(4)) {
          case 0: put(log, limit_enc(seg), 0xfffff); break;
          case 1: put(log, ar_enc(seg), 0xf2); break;
          case 2: put(log, base_enc(seg), rd(base_enc(seg)) + 0x10); break;
          default:  // VM flag in real mode (unrestricted guest)
            put_or(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
            put_clear(log, fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
        }
        break;
      }
      case 7:  // SS.DPL against SS.RPL (CS.RPL = SS.RPL = 3, SS.DPL 0)
        put(log, sel_enc(1), 0x0b);
        put(log, sel_enc(2), 0x13);
        if (rnd_below(2)) put(log, ar_enc(1), 0xa0fb);
        break;
      case 8: case 9: {  // an injected event with blocking
        const std::uint32_t ev[] = {0x8000'0020u, 0x8000'0202u, 0x8000'0202u, 0x8000'0306u};
        put(log, fields::vm_entry_interruption_info.encoding, pick(ev));
        const std::uint32_t blk[] = {1, 2, 8, 9, 0};
        put(log, fields::guest_interruptibility_state.encoding, pick(blk));
        put_or(log, fields::guest_rflags.encoding, x86::rflags::if_.raw());
        if (rnd_below(2))
          put_or(log, fields::pin_based_controls.encoding, (v::pin_based::nmi_exiting | v::pin_based::virtual_nmis).raw());
        if (rnd_below(3) == 0) put(log, fields::guest_activity_state.encoding, 1);
        break;
      }
      case 10:  // host address-space size clear with a consistent host EFER
        log.host = true;
        put_clear(log, fields::primary_vm_exit_controls.encoding, v::exit_controls::host_address_space_size.raw());
        put_clear(log, fields::host_ia32_efer.encoding, (x86::efer::lme | x86::efer::lma).raw());
        break;
      case 11:  // conforming code segment, DPL against SS.DPL
        put(log, ar_enc(1), 0xa09f | (rnd_below(2) ? 0x60 : 0));
        break;
      case 12:  // SS unusable, or FS/GS unusable with odd bits
        put_or(log, ar_enc(rnd_below(2) ? 2 : 4 + rnd_below(2)), bit(16));
        break;
      case 13:  // TR: 16-bit busy TSS in a 32-bit guest
        make_guest32(log);
        put(log, fields::guest_tr_access_rights.encoding, rnd_below(2) ? 0x83 : 0x8b);
        break;
      default: {  // the addresses of optional features: PML, VM functions, VMCS shadowing, #VE, SPP
        namespace sp = v::entry_rules;
        const std::uint64_t a[] = {0x20'0000, 0x20'0008, bit(45), 0x20'0800};
        if (rnd_below(3) == 0)
          put_clear(log, fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_ept.raw());
        switch (rnd_below(5)) {
          case 0:
            put_or(log, fields::secondary_processor_based_controls.encoding, sp::p2::enable_pml.raw());
            put(log, fields::pml_address.encoding, pick(a));
            break;
          case 1:
            put_or(log, fields::secondary_processor_based_controls.encoding, sp::p2::enable_vm_functions.raw());
            put(log, fields::vm_function_controls.encoding, rnd_below(3) ? 1 : 2);
            put(log, fields::eptp_list_address.encoding, pick(a));
            break;
          case 2:
            put_or(log, fields::secondary_processor_based_controls.encoding, sp::p2::vmcs_shadowing.raw());
            put(log, fields::vmread_bitmap_address.encoding, pick(a));
            put(log, fields::vmwrite_bitmap_address.encoding, pick(a));
            break;
          case 3:
            put_or(log, fields::secondary_processor_based_controls.encoding, sp::p2::ept_violation_ve.raw());
            put(log, fields::ve_information_address.encoding, pick(a));
            break;
          default:
            put_or(log, fields::secondary_processor_based_controls.encoding, sp::p2::sub_page_write_permissions.raw());
        }
      }
    }
  }

  void once(mutation_log& log) {
    switch (rnd_below(25)) {
      case 22: case 23: case 24: mutate_targeted(log); break;
      case 0: case 1: case 2: case 3: mutate_segment(log); break;
      case 4: case 5: mutate_control_register(log); break;
      case 6: case 7: mutate_mode(log); break;
      case 8: mutate_pdptes(log); break;
      case 9: mutate_rflags(log); break;
      case 10: case 11: case 12: mutate_nonregister(log); break;
      case 13: case 14: mutate_injection(log); break;
      case 15: case 16: mutate_controls(log); break;
      case 17: case 18: mutate_msr_areas(log); break;
      case 19: case 20: mutate_guest_misc(log); break;
      default: mutate_host(log);
    }
  }
};
}  // namespace

void mutate_once(const mutation_env& env, mutation_log& log) { mutator{env}.once(log); }


}  // namespace hv::entry_detail
