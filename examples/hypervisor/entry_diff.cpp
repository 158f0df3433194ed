// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: the CPU as the oracle for the VM-entry checks (issue 18).
//
// Start from the hypervisor's own valid VMCS (setup_vmcs), mutate one to three fields at
// random (fixed seed), ask hvkit::vmx::check_vm_entry for its verdict, execute VMLAUNCH and
// compare what the CPU did: success, VMfailValid with its error number, or a VM-entry
// failure exit (reason 33/34) with its exit qualification. A successful entry comes back at
// once: the VMX-preemption timer is active with value 0, so the VM exit happens before the
// guest executes an instruction (SDM Vol. 3C 26.5.1). Each case runs on a freshly cleared
// VMCS (VMCLEAR + VMPTRLD, every field restored from the baseline).
//
// Classification of a case:
//   agree       the CPU did what hvkit said;
//   erratum     the CPU deviates from the SDM in a known, documented way (docs/hypervisor.md,
//               "Bochs errata of the VM-entry checks"): hvkit's verdict with that rule
//               removed (or with Bochs' extra check added) is what the CPU did;
//   kvm erratum under Linux KVM (CPUID leaf 0x40000000 "KVMKVMKVM"): what KVM's nested VM
//               entry on Bochs did, explained by a model of KVM's checks followed by the
//               Bochs model's (docs/hypervisor.md, "KVM as a second CPU model"); counted apart;
//   mismatch    anything else (the run fails if there is one).
// Mutations of the host state are invalid by construction (the host never runs on a
// mutated host state): a case whose host mutation hvkit does not refuse is not executed
// and counted as host_unsafe (the run fails if there is one).
//
// Also here: print_vm_entry_diagnosis(), what the hypervisor prints when a VM entry fails.
#include "hv.hpp"

#include <hvkit/vmx/vm_entry_checks.hpp>

extern "C" {
int entry_diff_launch();
void entry_diff_exit();
}

// VMLAUNCH with HOST_RSP = this stack; a VM exit (HOST_RIP = entry_diff_exit) returns 0,
// VMfailInvalid 1, VMfailValid 2. The guest's general-purpose registers are whatever the
// host had; the callee-saved ones are restored from the stack on either path.
asm(R"(
  .text
  .globl entry_diff_launch
entry_diff_launch:
  push %rbp
  push %rbx
  push %r12
  push %r13
  push %r14
  push %r15
  sub $8, %rsp
  mov $0x6C14, %eax
  vmwrite %rsp, %rax
  jbe 1f
  vmlaunch
1:
  mov $2, %eax
  jz 2f
  mov $1, %eax
2:
  add $8, %rsp
  pop %r15
  pop %r14
  pop %r13
  pop %r12
  pop %rbx
  pop %rbp
  ret
  .globl entry_diff_exit
entry_diff_exit:
  xor %eax, %eax
  jmp 2b
)");

namespace hv {

namespace v = hvkit::vmx;

namespace {

alignas(4096) std::uint8_t link_page[4096];      // a VMCS-shaped page for the link pointer
alignas(4096) std::uint8_t vapic_page[4096];     // virtual-APIC page
alignas(4096) std::uint64_t msr_page[512];       // VM-entry MSR-load area
alignas(4096) std::uint64_t exit_msr_page[512];  // VM-exit MSR-store/load area

constexpr std::uint32_t case_count = 12000;
constexpr std::uint64_t seed = 0x1857'e47a'd1ff'0018ull;

std::uint64_t rng_state;
std::uint64_t rnd() {
  std::uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
unsigned rnd_below(unsigned n) { return static_cast<unsigned>(rnd() % n); }
template <class T, std::size_t N>
T pick(const T (&a)[N]) {
  return a[rnd_below(N)];
}

// ---- the baseline VMCS ----------------------------------------------------------------
std::uint64_t base_value[v::field_count];
bool base_ok[v::field_count];

std::uint64_t rd(std::uint32_t enc) {
  v::hw::current_vmcs c;
  auto r = c.read(enc);
  return r ? r.value() : 0;
}
void wr(std::uint32_t enc, std::uint64_t val) {
  v::hw::current_vmcs c;
  static_cast<void>(c.write(enc, val));
}

void capture_baseline() {
  for (std::size_t i = 0; i < v::field_count; ++i) {
    const auto& f = v::field_table[i];
    base_ok[i] = false;
    if (f.declared_type == v::field_type::exit_info) continue;
    v::hw::current_vmcs c;
    auto r = c.read(f.encoding);
    if (!r) continue;
    base_ok[i] = true;
    base_value[i] = r.value();
  }
}
bool fresh_vmcs() {
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(vmcs_region)};
  if (!v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs)) return false;
  for (std::size_t i = 0; i < v::field_count; ++i)
    if (base_ok[i]) wr(v::field_table[i].encoding, base_value[i]);
  return true;
}

// ---- what the CPU did -------------------------------------------------------------------
struct cpu_outcome {
  v::vm_entry_outcome outcome = v::vm_entry_outcome::success;
  std::uint32_t error = 0, exit_reason = 0;
  std::uint64_t qualification = 0;
  bool fail_invalid = false;
};
cpu_outcome launch() {
  const int rc = entry_diff_launch();
  cpu_outcome o{};
  if (rc == 1) {
    o.fail_invalid = true;
  } else if (rc == 2) {
    o.outcome = v::vm_entry_outcome::vm_fail_valid;
    o.error = static_cast<std::uint32_t>(rd(fields::vm_instruction_error.encoding));
  } else {
    o.exit_reason = static_cast<std::uint32_t>(rd(fields::exit_reason.encoding));
    if (o.exit_reason & 0x8000'0000u) {
      o.outcome = v::vm_entry_outcome::entry_failure;
      o.qualification = rd(fields::exit_qualification.encoding);
    }
  }
  return o;
}
bool same(const cpu_outcome& c, const v::vm_entry_verdict& p) {
  if (c.fail_invalid || c.outcome != p.outcome) return false;
  switch (c.outcome) {
    case v::vm_entry_outcome::success: return true;
    case v::vm_entry_outcome::vm_fail_valid: return c.error == static_cast<std::uint32_t>(p.error);
    case v::vm_entry_outcome::entry_failure: return c.exit_reason == p.exit_reason && c.qualification == p.exit_qualification;
  }
  return false;
}
void print_outcome(v::vm_entry_outcome o, std::uint32_t error, std::uint32_t reason, std::uint64_t q) {
  switch (o) {
    case v::vm_entry_outcome::success: kprintf("success"); break;
    case v::vm_entry_outcome::vm_fail_valid: kprintf("VMfailValid(%u)", error); break;
    case v::vm_entry_outcome::entry_failure:
      kprintf("exit(%u,qual=%llu)", reason & 0xffffu, (unsigned long long)q);
      break;
  }
}

// ---- the processor for hvkit ------------------------------------------------------------
bool msr_write_faults(std::uint32_t index, std::uint64_t value) {
  // WRMSR #GP(0) for a non-canonical IA32_SYSENTER_ESP/EIP or IA32_KERNEL_GS_BASE, and for
  // an MSR the processor does not have (SDM Vol. 4; Bochs runs with ignore_bad_msrs=0).
  const bool canonical = static_cast<std::uint64_t>(static_cast<std::int64_t>(value << 16) >> 16) == value;
  if (index == 0x175 || index == 0x176 || index == 0xc000'0102u) return !canonical;
  if (index == 0x174) return false;
  return true;  // every other index this run uses is refused by an earlier rule or is unknown
}
v::vm_entry_env make_env() {
  v::vm_entry_env e{};
  e.caps = vcaps;
  e.maxphyaddr = (cpuid(0x80000000).eax >= 0x80000008) ? (cpuid(0x80000008).eax & 0xff) : 36;
  const cpuid_regs l7 = cpuid(7, 0);
  e.linear = ((l7.ecx >> 16) & 1) ? x86::linear_width::la57 : x86::linear_width::la48;
  e.sgx = (l7.ebx >> 2) & 1;
  e.rtm = (l7.ebx >> 11) & 1;
  e.in_ia32e_mode = true;
  e.msr_write_faults = msr_write_faults;
  return e;
}
/// Host physical memory the checks may read: [1 MiB, 128 MiB), identity-mapped.
hvkit::paging::flat_view host_memory() {
  return {reinterpret_cast<const std::uint8_t*>(std::uintptr_t{0x100000}), 127u << 20, x86::gpa{0x100000}};
}

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
enum probe_kind : unsigned { probe_none, probe_rtm, probe_error_code, probe_count };
const char* const probe_name[probe_count] = {"-", "rtm_pending_debug_under_blocking", "error_code_cp_and_pe0"};
struct mutation_log {
  static constexpr unsigned max = 8;
  std::uint32_t enc[max]{};
  std::uint64_t val[max]{};
  unsigned n = 0;
  bool host = false;        // touched the host-state area or the host address-space size
  bool activity_risk = false;
  unsigned probe = 0;       // a targeted case of issue 25 (probe_rtm, probe_error_code), counted apart
};
constinit mutation_log mlog{};
void put(std::uint32_t enc, std::uint64_t val) {
  wr(enc, val);
  if (mlog.n < mutation_log::max) {
    mlog.enc[mlog.n] = enc;
    mlog.val[mlog.n] = val;
    ++mlog.n;
  }
}
void put_or(std::uint32_t enc, std::uint64_t bits) { put(enc, rd(enc) | bits); }
void put_xor(std::uint32_t enc, std::uint64_t bits) { put(enc, rd(enc) ^ bits); }
void put_clear(std::uint32_t enc, std::uint64_t bits) { put(enc, rd(enc) & ~bits); }

constexpr std::uint32_t sel_enc(unsigned s) { return 0x0800 + 2 * s; }
constexpr std::uint32_t base_enc(unsigned s) { return 0x6806 + 2 * s; }
constexpr std::uint32_t limit_enc(unsigned s) { return 0x4800 + 2 * s; }
constexpr std::uint32_t ar_enc(unsigned s) { return 0x4814 + 2 * s; }
constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }

// A coherent 32-bit protected-mode guest (IA-32e mode guest = 0): EFER.LMA/LME clear, CS
// a 32-bit code segment. CR4.PAE stays 1, so it uses PAE paging.
void make_guest32() {
  put_clear(fields::vm_entry_controls.encoding, v::entry_controls::ia32e_mode_guest.raw());
  put_clear(fields::guest_ia32_efer.encoding, (x86::efer::lme | x86::efer::lma).raw());
  put(fields::guest_cs_access_rights.encoding, 0xc09b);
}
void make_v86() {
  make_guest32();
  put_or(fields::guest_rflags.encoding, x86::rflags::vm.raw());
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

void mutate_segment() {
  const unsigned s = rnd_below(8);
  switch (rnd_below(10)) {
    case 0: case 1: case 2: put_xor(ar_enc(s), bit(rnd_below(17))); break;
    case 3: put(ar_enc(s), (rd(ar_enc(s)) & ~0xfull) | rnd_below(16)); break;
    case 4: put(ar_enc(s), rnd() & 0x1f0ff); break;
    case 5: {
      const std::uint32_t l[] = {0xffff, 0xfffff, 0xffffffff, 0xfffff000, 0x67, 0, 0x100fff, 0xffffe};
      put(limit_enc(s), pick(l));
      break;
    }
    case 6: {
      const std::uint64_t b[] = {bit(32), bit(47), 0xffff'8000'0000'0000ull, 0x0000'8000'0000'0000ull, 0x1000};
      put(base_enc(s), pick(b));
      break;
    }
    case 7: put_xor(sel_enc(s), bit(rnd_below(5))); break;
    case 8: put_xor(ar_enc(s), bit(16)); break;  // usable <-> unusable
    default: put_xor(ar_enc(s), (bit(rnd_below(2) + 5)));  // a DPL bit
  }
}
void mutate_control_register() {
  switch (rnd_below(4)) {
    case 0: {
      const unsigned b[] = {0, 1, 2, 3, 5, 16, 18, 29, 30, 31};
      put_xor(fields::guest_cr0.encoding, bit(pick(b)));
      break;
    }
    case 1: put_xor(fields::guest_cr4.encoding, bit(rnd_below(25))); break;
    case 2: put_or(fields::guest_cr3.encoding, bit(36 + rnd_below(28))); break;
    default: {
      const unsigned b[] = {0, 8, 10, 11, 12, 14, 1};
      put_xor(fields::guest_ia32_efer.encoding, bit(pick(b)));
    }
  }
}
void mutate_mode() {
  switch (rnd_below(6)) {
    case 0: put_xor(fields::vm_entry_controls.encoding, v::entry_controls::ia32e_mode_guest.raw()); break;
    case 1: make_guest32(); break;
    case 2: make_v86(); break;
    case 3: {  // unrestricted guest, sometimes in real mode
      put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
      if (rnd_below(2)) {
        make_guest32();
        put_clear(fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
        if (rnd_below(2)) put(fields::guest_cs_access_rights.encoding, 0x93 | (rnd_below(2) ? 0x60 : 0));
      }
      break;
    }
    case 4: {  // CS.L with CS.D
      put_or(fields::guest_cs_access_rights.encoding, bit(14));
      break;
    }
    default: {  // CPL 3 (consistent) or half of it
      put(sel_enc(1), 0x0b);
      put(ar_enc(1), 0xa0fb);
      if (rnd_below(2)) {
        put(sel_enc(2), 0x13);
        put(ar_enc(2), 0xc0f3);
      }
    }
  }
}
void mutate_pdptes() {
  make_guest32();
  if (rnd_below(4) == 0)  // without EPT the PDPTEs come from the PDPT at CR3
    put_clear(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_ept.raw());
  for (unsigned i = 0; i < 4; ++i) {
    const std::uint64_t bad[] = {0, 0x1001, 0x1003, 0x1005, 0x1021, 0x1101, 0x1001 | bit(45), 0x1001 | bit(63), 0x1000,
                                 0x1001 | bit(52)};
    put(fields::guest_pdpte0.encoding + 2 * i, rnd_below(3) ? 0x1001 + 0x1000 * i : pick(bad));
  }
}
void mutate_rflags() {
  const unsigned b[] = {1, 3, 5, 8, 9, 14, 15, 16, 17, 21, 22, 63};
  put_xor(fields::guest_rflags.encoding, bit(pick(b)));
}
void mutate_nonregister() {
  switch (rnd_below(4)) {
    case 0: {
      const std::uint32_t a[] = {0, 1, 1, 2, 3, 4, 7};
      const std::uint32_t s = pick(a);
      if (s == 2 || s == 3) mlog.activity_risk = true;
      put(fields::guest_activity_state.encoding, s);
      break;
    }
    case 1: {
      const std::uint32_t i[] = {1, 2, 3, 4, 8, 0x10, 0x12, 0x20, 9, 0x100};
      put(fields::guest_interruptibility_state.encoding, pick(i));
      if (rnd_below(2)) put_or(fields::guest_rflags.encoding, x86::rflags::if_.raw());
      break;
    }
    case 2: {
      const unsigned b[] = {0, 1, 2, 3, 4, 12, 13, 14, 15, 16, 17, 40};
      std::uint64_t p = 0;
      for (unsigned k = 0, n = 1 + rnd_below(2); k < n; ++k) p |= bit(pick(b));
      put(fields::guest_pending_debug_exceptions.encoding, p);
      if (rnd_below(2)) put(fields::guest_interruptibility_state.encoding, 1 + rnd_below(2));
      if (rnd_below(2)) put_or(fields::guest_rflags.encoding, (x86::rflags::if_ | x86::rflags::tf).raw());
      break;
    }
    default: {  // the VMCS link pointer
      const std::uint64_t page = reinterpret_cast<std::uint64_t>(link_page);
      const std::uint32_t rev = vcaps.revision_id();
      const std::uint64_t p[] = {page, page, page | 0x800, bit(45), page + 0x1000};
      const std::uint32_t r[] = {rev, rev, rev ^ 1, rev | 0x8000'0000u};
      *reinterpret_cast<volatile std::uint32_t*>(link_page) = pick(r);
      put(fields::vmcs_link_pointer.encoding, pick(p));
    }
  }
}
void mutate_injection() {
  const unsigned vec[] = {0, 1, 2, 3, 6, 8, 13, 14, 17, 18, 21, 32, 255};
  const unsigned type = rnd_below(8);
  std::uint32_t info = 0x8000'0000u | (type << 8) | pick(vec);
  if (rnd_below(2)) info |= bit(11);
  if (rnd_below(10) == 0) info |= bit(12 + rnd_below(19));
  put(fields::vm_entry_interruption_info.encoding, info);
  const std::uint32_t ec[] = {0, 0, 5, 0x10000, 0x8000'0000u, 0xffff};
  put(fields::vm_entry_exception_error_code.encoding, pick(ec));
  const std::uint32_t len[] = {0, 1, 2, 3, 15, 16};
  put(fields::vm_entry_instruction_length.encoding, pick(len));
  if (rnd_below(2)) put_or(fields::guest_rflags.encoding, x86::rflags::if_.raw());
}
void mutate_controls() {
  switch (rnd_below(7)) {
    case 0: {
      unsigned b;
      do b = rnd_below(8); while (b == 6);  // the preemption timer stays on
      put_xor(fields::pin_based_controls.encoding, bit(b));
      break;
    }
    case 1: put_xor(fields::primary_processor_based_controls.encoding, bit(rnd_below(32))); break;
    case 2: put_xor(fields::secondary_processor_based_controls.encoding, bit(rnd_below(32))); break;
    case 3: {
      unsigned b;
      do b = rnd_below(32); while (b == 9);  // host address-space size: see mutate_host
      put_xor(fields::primary_vm_exit_controls.encoding, bit(b));
      break;
    }
    case 4: put_xor(fields::vm_entry_controls.encoding, bit(rnd_below(32))); break;
    case 5: {  // TPR shadow with a virtual-APIC page and a threshold against VTPR
      put_or(fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_tpr_shadow.raw());
      put(fields::virtual_apic_page_address.encoding, reinterpret_cast<std::uint64_t>(vapic_page) | (rnd_below(8) ? 0 : 0x80));
      vapic_page[0x80] = static_cast<std::uint8_t>(rnd());
      put(fields::tpr_threshold.encoding, rnd_below(20));
      if (rnd_below(3) == 0)
        put_xor(fields::secondary_processor_based_controls.encoding, bit(pick(apic_virtualization_bits)));
      break;
    }
    default: {  // EPTP, CR3-target count, VPID
      switch (rnd_below(3)) {
        case 0: put_xor(fields::ept_pointer.encoding, bit(rnd_below(12)) | (rnd_below(4) ? 0 : bit(45))); break;
        case 1: put(fields::cr3_target_count.encoding, rnd_below(7)); break;
        default:
          put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_vpid.raw());
          put(fields::virtual_processor_id.encoding, rnd_below(2));
      }
    }
  }
}
void mutate_msr_areas() {
  switch (rnd_below(3)) {
    case 0: {  // VM-exit MSR-store or -load area (never used: the checks refuse or the count is 0)
      const std::uint64_t base = reinterpret_cast<std::uint64_t>(exit_msr_page);
      const std::uint64_t a[] = {base + 4, base + 8, bit(45), base + 1};
      const bool store = rnd_below(2);
      put(store ? fields::vm_exit_msr_store_address.encoding : fields::vm_exit_msr_load_address.encoding, pick(a));
      put(store ? fields::vm_exit_msr_store_count.encoding : fields::vm_exit_msr_load_count.encoding, 1 + rnd_below(2));
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
      put(fields::vm_entry_msr_load_address.encoding, rnd_below(10) ? base : base + 8);
      put(fields::vm_entry_msr_load_count.encoding, n);
    }
  }
}
void mutate_guest_misc() {
  switch (rnd_below(7)) {
    case 0: put(fields::guest_rip.encoding, rnd_below(2) ? noncanonical() : bit(32) | 0x1000); break;
    case 1: put(rnd_below(2) ? fields::guest_ia32_sysenter_esp.encoding : fields::guest_ia32_sysenter_eip.encoding,
                noncanonical());
      break;
    case 2: put(rnd_below(2) ? fields::guest_gdtr_base.encoding : fields::guest_idtr_base.encoding, noncanonical()); break;
    case 3: put(rnd_below(2) ? fields::guest_gdtr_limit.encoding : fields::guest_idtr_limit.encoding, 0x10000); break;
    case 4:
      put_or(fields::vm_entry_controls.encoding, v::entry_controls::load_debug_controls.raw());
      if (rnd_below(2)) put(fields::guest_dr7.encoding, 0x400 | bit(32 + rnd_below(32)));
      else put(fields::guest_ia32_debugctl.encoding, bit(pick(debugctl_bits)));
      break;
    case 5: {
      put_or(fields::vm_entry_controls.encoding, v::entry_controls::load_ia32_pat.raw());
      const std::uint64_t pat[] = {0x0007'0406'0007'0406ull, 0x0007'0406'0007'0402ull, 0x0007'0406'0008'0406ull,
                                   0x0303'0303'0303'0303ull};
      put(fields::guest_ia32_pat.encoding, pick(pat));
      break;
    }
    default: put_xor(fields::guest_ia32_efer.encoding, bit(12));  // SVME: reserved on Intel
  }
}
/// Host-state mutations, each invalid by construction (SDM 27.2.2-27.2.4).
void mutate_host() {
  mlog.host = true;
  switch (rnd_below(12)) {
    case 0: put_or(0x0c00 + 2 * rnd_below(7), 1 + rnd_below(7)); break;  // RPL/TI of a host selector
    case 1: put(rnd_below(2) ? fields::host_cs_selector.encoding : fields::host_tr_selector.encoding, 0); break;
    case 2: {
      const std::uint32_t e[] = {fields::host_fs_base.encoding, fields::host_gs_base.encoding, fields::host_tr_base.encoding,
                                 fields::host_gdtr_base.encoding, fields::host_idtr_base.encoding,
                                 fields::host_ia32_sysenter_esp.encoding, fields::host_ia32_sysenter_eip.encoding,
                                 fields::host_rip.encoding};
      put(pick(e), noncanonical());
      break;
    }
    case 3: put_or(fields::host_cr3.encoding, bit(52 + rnd_below(12))); break;
    case 4: put_clear(fields::host_cr0.encoding, bit(pick(host_cr0_fixed1_bits))); break;
    case 5: put_clear(fields::host_cr4.encoding, bit(pick(host_cr4_fixed1_bits))); break;
    case 6: put_or(fields::host_ia32_efer.encoding, bit(pick(efer_reserved_bits))); break;
    case 7: put_clear(fields::host_ia32_efer.encoding, bit(pick(efer_lme_lma_bits))); break;
    case 8: put_clear(fields::primary_vm_exit_controls.encoding, v::exit_controls::host_address_space_size.raw()); break;
    case 9:
      put_or(fields::primary_vm_exit_controls.encoding, v::exit_controls::load_ia32_pat.raw());
      put(fields::host_ia32_pat.encoding, pick(bad_host_pat));
      break;
    case 10: put_or(fields::host_cr4.encoding, bit(pick(cr4_reserved_bits))); break;
    default: put_or(fields::host_cr0.encoding, bit(pick(cr0_reserved_bits)));
  }
}

/// Combinations that reach the rules single-field mutations rarely reach.
void mutate_targeted() {
  switch (rnd_below(18)) {
    case 16: {  // RTM in the pending debug exceptions under blocking by STI or MOV SS (SDM 27.3.1.5)
      mlog.probe = probe_rtm;
      const std::uint64_t p[] = {bit(16) | bit(12), bit(16) | bit(12), bit(16), bit(16) | bit(12) | bit(14),
                                 bit(16) | bit(12) | bit(0)};
      put(fields::guest_pending_debug_exceptions.encoding, pick(p));
      const std::uint32_t blk[] = {0, 1, 1, 2};
      put(fields::guest_interruptibility_state.encoding, pick(blk));
      put_or(fields::guest_rflags.encoding, x86::rflags::if_.raw());
      break;
    }
    case 17: {  // deliver-error-code: #CP (21), and CR0.PE = 0 without "unrestricted guest"
      mlog.probe = probe_error_code;
      const std::uint32_t vec[] = {21, 21, 13, 14, 6, 8};
      std::uint32_t info = 0x8000'0300u | pick(vec);
      if (rnd_below(2)) info |= bit(11);
      put(fields::vm_entry_interruption_info.encoding, info);
      put(fields::vm_entry_exception_error_code.encoding, rnd_below(2) ? 0 : 0x18);
      if (rnd_below(3)) {  // a 32-bit guest with CR0.PE = PG = 0 ("unrestricted guest" stays 0)
        make_guest32();
        put_clear(fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
      }
      break;
    }
    case 0: {  // I/O and MSR bitmaps
      const std::uint64_t a[] = {0x20'0000, 0x20'0800, bit(45), 0x20'0001};
      if (rnd_below(2)) {
        put_or(fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_io_bitmaps.raw());
        put(fields::io_bitmap_a.encoding, pick(a));
        put(fields::io_bitmap_b.encoding, pick(a));
      } else {
        put_or(fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_msr_bitmaps.raw());
        put(fields::msr_bitmap.encoding, pick(a));
      }
      break;
    }
    case 1: {  // APIC-access page, x2APIC virtualization
      const std::uint64_t a[] = {0x20'0000, 0x20'0010, bit(46)};
      put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::virtualize_apic_accesses.raw());
      put(fields::apic_access_address.encoding, pick(a));
      if (rnd_below(2)) {
        put_or(fields::primary_processor_based_controls.encoding, v::primary_proc_based::use_tpr_shadow.raw());
        put(fields::virtual_apic_page_address.encoding, reinterpret_cast<std::uint64_t>(vapic_page));
        put(fields::tpr_threshold.encoding, 0);
        put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::virtualize_x2apic_mode.raw());
      }
      break;
    }
    case 2:  // "save VMX-preemption timer" without the timer; RFLAGS bit 1 clear keeps the
             // guest from running should the CPU accept the controls
      put_clear(fields::pin_based_controls.encoding, v::pin_based::activate_preemption_timer.raw());
      put_or(fields::primary_vm_exit_controls.encoding, v::exit_controls::save_preemption_timer.raw());
      put(fields::guest_rflags.encoding, 0);
      break;
    case 3:  // unrestricted guest: CR0.PG without PE, or an IA-32e guest without paging
      put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
      put_clear(fields::guest_cr0.encoding, rnd_below(2) ? x86::cr0::pe.raw() : x86::cr0::pg.raw());
      break;
    case 4:  // CR4.PCIDE outside IA-32e mode, CR4.CET without CR0.WP
      if (rnd_below(2)) {
        make_guest32();
        put_or(fields::guest_cr4.encoding, x86::cr4::pcide.raw());
      } else {
        put_or(fields::guest_cr4.encoding, x86::cr4::cet.raw());
        put_clear(fields::guest_cr0.encoding, x86::cr0::wp.raw());
      }
      break;
    case 5:  // a usable LDTR
      put(fields::guest_ldtr_selector.encoding, rnd_below(2) ? 0x24 : 0x20);
      put(fields::guest_ldtr_limit.encoding, rnd_below(2) ? 0xfff : 0xfffff);
      put(fields::guest_ldtr_access_rights.encoding, pick(ldtr_ar_values));
      break;
    case 6: {  // virtual-8086 mode with one field off
      make_v86();
      const unsigned seg = rnd_below(6);
      switch (rnd_below(4)) {
        case 0: put(limit_enc(seg), 0xfffff); break;
        case 1: put(ar_enc(seg), 0xf2); break;
        case 2: put(base_enc(seg), rd(base_enc(seg)) + 0x10); break;
        default:  // VM flag in real mode (unrestricted guest)
          put_or(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::unrestricted_guest.raw());
          put_clear(fields::guest_cr0.encoding, (x86::cr0::pe | x86::cr0::pg).raw());
      }
      break;
    }
    case 7:  // SS.DPL against SS.RPL (CS.RPL = SS.RPL = 3, SS.DPL 0)
      put(sel_enc(1), 0x0b);
      put(sel_enc(2), 0x13);
      if (rnd_below(2)) put(ar_enc(1), 0xa0fb);
      break;
    case 8: case 9: {  // an injected event with blocking
      const std::uint32_t ev[] = {0x8000'0020u, 0x8000'0202u, 0x8000'0202u, 0x8000'0306u};
      put(fields::vm_entry_interruption_info.encoding, pick(ev));
      const std::uint32_t blk[] = {1, 2, 8, 9, 0};
      put(fields::guest_interruptibility_state.encoding, pick(blk));
      put_or(fields::guest_rflags.encoding, x86::rflags::if_.raw());
      if (rnd_below(2))
        put_or(fields::pin_based_controls.encoding, (v::pin_based::nmi_exiting | v::pin_based::virtual_nmis).raw());
      if (rnd_below(3) == 0) put(fields::guest_activity_state.encoding, 1);
      break;
    }
    case 10:  // host address-space size clear with a consistent host EFER
      mlog.host = true;
      put_clear(fields::primary_vm_exit_controls.encoding, v::exit_controls::host_address_space_size.raw());
      put_clear(fields::host_ia32_efer.encoding, (x86::efer::lme | x86::efer::lma).raw());
      break;
    case 11:  // conforming code segment, DPL against SS.DPL
      put(ar_enc(1), 0xa09f | (rnd_below(2) ? 0x60 : 0));
      break;
    case 12:  // SS unusable, or FS/GS unusable with odd bits
      put_or(ar_enc(rnd_below(2) ? 2 : 4 + rnd_below(2)), bit(16));
      break;
    case 13:  // TR: 16-bit busy TSS in a 32-bit guest
      make_guest32();
      put(fields::guest_tr_access_rights.encoding, rnd_below(2) ? 0x83 : 0x8b);
      break;
    default: {  // the addresses of optional features: PML, VM functions, VMCS shadowing, #VE, SPP
      namespace sp = v::entry_rules;
      const std::uint64_t a[] = {0x20'0000, 0x20'0008, bit(45), 0x20'0800};
      if (rnd_below(3) == 0)
        put_clear(fields::secondary_processor_based_controls.encoding, v::secondary_proc_based::enable_ept.raw());
      switch (rnd_below(5)) {
        case 0:
          put_or(fields::secondary_processor_based_controls.encoding, sp::p2::enable_pml.raw());
          put(fields::pml_address.encoding, pick(a));
          break;
        case 1:
          put_or(fields::secondary_processor_based_controls.encoding, sp::p2::enable_vm_functions.raw());
          put(fields::vm_function_controls.encoding, rnd_below(3) ? 1 : 2);
          put(fields::eptp_list_address.encoding, pick(a));
          break;
        case 2:
          put_or(fields::secondary_processor_based_controls.encoding, sp::p2::vmcs_shadowing.raw());
          put(fields::vmread_bitmap_address.encoding, pick(a));
          put(fields::vmwrite_bitmap_address.encoding, pick(a));
          break;
        case 3:
          put_or(fields::secondary_processor_based_controls.encoding, sp::p2::ept_violation_ve.raw());
          put(fields::ve_information_address.encoding, pick(a));
          break;
        default:
          put_or(fields::secondary_processor_based_controls.encoding, sp::p2::sub_page_write_permissions.raw());
      }
    }
  }
}

void mutate_once() {
  switch (rnd_below(25)) {
    case 22: case 23: case 24: mutate_targeted(); break;
    case 0: case 1: case 2: case 3: mutate_segment(); break;
    case 4: case 5: mutate_control_register(); break;
    case 6: case 7: mutate_mode(); break;
    case 8: mutate_pdptes(); break;
    case 9: mutate_rflags(); break;
    case 10: case 11: case 12: mutate_nonregister(); break;
    case 13: case 14: mutate_injection(); break;
    case 15: case 16: mutate_controls(); break;
    case 17: case 18: mutate_msr_areas(); break;
    case 19: case 20: mutate_guest_misc(); break;
    default: mutate_host();
  }
}

// ---- Bochs errata (docs/hypervisor.md) -----------------------------------------------------------
// Bochs as a model: hvkit's rules, less the checks Bochs does not make, plus the checks it
// makes that the SDM does not list, in Bochs' order where it differs. A case hvkit and the
// CPU disagree on is explained when the model with the errata switched on says what the
// CPU did: by one erratum alone if one suffices (it gets the count), else by all together
// (the first that changes hvkit's verdict gets it).
enum erratum_id : unsigned {
  e_rip_canonical,     // 27.3.1.4: RIP canonical (IA-32e guest, CS.L = 1) not checked
  e_debugctl,          // 27.3.1.1: IA32_DEBUGCTL reserved bits not checked
  // 27.2.1.3: deliver-error-code by the older SDM text ("unrestricted guest" 0 counts as CR0.PE
  // 1); before e_error_code_bit, which (Bochs with CET checks no error code at all) explains
  // such cases too, so that they are counted here
  e_ec_older_wording,
  e_error_code_bit,    // 27.2.1.3: deliver-error-code must be 0 for non-exception events: not checked
  e_pending_bs,        // 27.3.1.5: pending-debug BS consistency not checked
  e_activity_event,    // 27.3.1.5: events the activity state blocks not refused
  e_pending_high,      // 27.3.1.5: pending-debug bits 63:32 not checked
  e_cs_dpl,            // 27.3.1.2: CS.DPL compared with CS.RPL, not SS.DPL (differs with unrestricted guest)
  e_entry_to_smm,      // 27.2.1.3: "entry to SMM" refused by a guest-state check (exit 33), not error 7
  e_tsc_multiplier,    // Bochs: "use TSC scaling" with TSC multiplier 0 refused (error 7); no SDM check
  e_link_first,        // order: the VMCS link pointer checked before the rest of 27.3.1.5 (and the IF check of 27.3.1.4)
  e_nmi_sti_qual,      // 27.3.1.5 / 28.2.1: NMI injection with STI blocking: qualification 0, not 3
  e_ia32e_no_paging,   // 27.3.1.1: an IA-32e mode guest needs CR0.PG = 1 (unrestricted guest): not checked
  e_vnmi_blocking,     // 27.3.1.5: NMI blocking with an injected NMI under virtual NMIs: not checked
  e_vm_real_mode,      // 27.3.1.4: RFLAGS.VM needs CR0.PE = 1 (unrestricted guest): not checked
  erratum_count
};
struct erratum_info {
  const char* name;
  std::uint64_t cases;
};
erratum_info errata[erratum_count] = {
    {"guest_rip_not_checked_canonical", 0},       {"guest_debugctl_reserved_bits_not_checked", 0},
    {"error_code_rule_older_wording", 0},
    {"injection_error_code_bit_not_checked", 0},  {"pending_debug_bs_not_checked", 0},
    {"injected_event_vs_activity_not_checked", 0}, {"pending_debug_bits_63_32_not_checked", 0},
    {"cs_dpl_checked_against_cs_rpl", 0},         {"entry_to_smm_checked_as_guest_state", 0},
    {"tsc_multiplier_zero_refused", 0},           {"vmcs_link_pointer_checked_first", 0},
    {"nmi_injection_sti_blocking_qualification_0", 0},
    {"ia32e_guest_without_paging_not_checked", 0},
    {"nmi_blocking_with_virtual_nmi_injection_not_checked", 0},
    {"rflags_vm_in_real_mode_not_checked", 0},
};

struct diff_case {
  const v::vm_entry_state& s;
  const v::vm_entry_env& env;
  const hvkit::paging::flat_view& mem;
  const v::vm_entry_verdict& pred;
  const cpu_outcome& cpu;
  std::uint64_t tsc_multiplier;
};

bool named(const v::vm_entry_rule& r, const char* n) { return str_eq(r.info.name, n); }
/// Bochs' CS.DPL rule: non-conforming code DPL = CS.RPL, conforming DPL <= CS.RPL, type 3
/// (unrestricted guest) DPL 0.
bool bochs_cs_dpl_ok(const v::vm_entry_state& s) {
  const std::uint32_t ar = s.seg[1].access_rights;
  const unsigned t = ar & 0xf, dpl = (ar >> 5) & 3, rpl = s.seg[1].selector & 3;
  if (t == 9 || t == 11) return dpl == rpl;
  if (t == 13 || t == 15) return rpl >= dpl;
  if (t == 3) return dpl == 0;
  return true;
}
/// The model's verdict with the errata in `mask`.
/// How the Bochs model is run: on the hypervisor's VMCS (Bochs alone), or as the hardware
/// under KVM on the VMCS KVM builds from it (KVM has made the control and host-state checks
/// in software already, and may have loaded the MSR-load list itself).
struct bochs_phase {
  const v::vm_entry_state* state = nullptr;  // default: the case's state
  const v::vm_entry_env* env = nullptr;      // default: the case's env
  bool hardware_under_kvm = false;           // skip the control and host-state rules
};
v::vm_entry_verdict bochs_model(const diff_case& c, unsigned mask, const bochs_phase& ph = {}) {
  auto on = [&](erratum_id e) { return (mask >> e) & 1u; };
  v::vm_entry_state s = ph.state ? *ph.state : c.s;
  v::vm_entry_env env = ph.env ? *ph.env : c.env;
  if (on(e_ec_older_wording)) env.error_code_older_wording = true;
  if (on(e_pending_high)) s.pending_debug_exceptions &= 0xffff'ffffu;
  auto skipped = [&](const v::vm_entry_rule& r) {
    return (on(e_rip_canonical) && named(r, "guest_rip_not_canonical")) ||
           (on(e_debugctl) && named(r, "guest_debugctl_reserved")) ||
           (on(e_error_code_bit) && named(r, "injection_error_code_unexpected")) ||
           (on(e_pending_bs) && named(r, "guest_pending_debug_bs_mismatch")) ||
           (on(e_activity_event) && named(r, "guest_activity_blocks_injected_event")) ||
           (on(e_ia32e_no_paging) && named(r, "ia32e_guest_without_paging")) ||
           (on(e_vnmi_blocking) && named(r, "guest_nmi_blocking_with_virtual_nmi_injection")) ||
           (on(e_vm_real_mode) && named(r, "guest_rflags_vm_invalid") && !s.ia32e_guest()) ||
           (on(e_cs_dpl) && named(r, "guest_cs_dpl") && bochs_cs_dpl_ok(s)) ||
           (on(e_entry_to_smm) && named(r, "smm_controls_outside_smm") && !s.entry.test(v::entry_controls::deactivate_dual_monitor));
  };
  const bool smm_guest_fail = on(e_entry_to_smm) && s.entry.test(v::entry_controls::entry_to_smm);
  const bool tsc_fail = on(e_tsc_multiplier) && s.secondary().test(v::secondary_proc_based::use_tsc_scaling) &&
                        c.tsc_multiplier == 0;
  // Collect the first failing rule of each kind, in hvkit's (SDM) order.
  const v::vm_entry_rule* first_ctl = nullptr;
  const v::vm_entry_rule* first_host = nullptr;
  const v::vm_entry_rule* first_guest_early = nullptr;  // 27.3.1.1-27.3.1.4
  const v::vm_entry_rule* first_link = nullptr;
  const v::vm_entry_rule* first_nonreg = nullptr;       // the rest of 27.3.1.5
  const v::vm_entry_rule* first_pdpte = nullptr;
  v::vm_entry_hit h_ctl{}, h_host{}, h_early{}, h_link{}, h_nonreg{}, h_pdpte{};
  v::for_each_vm_entry_violation(s, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit& h) {
    if (skipped(r)) return;
    if (ph.hardware_under_kvm &&
        (r.info.phase == v::vm_entry_phase::controls || r.info.phase == v::vm_entry_phase::host_state))
      return;
    auto take = [&](const v::vm_entry_rule*& slot, v::vm_entry_hit& hs) {
      if (!slot) slot = &r, hs = h;
    };
    switch (r.info.phase) {
      case v::vm_entry_phase::controls: take(first_ctl, h_ctl); break;
      case v::vm_entry_phase::host_state: take(first_host, h_host); break;
      default:
        if (r.info.qualification == v::entry_failure_qualification::vmcs_link_pointer) take(first_link, h_link);
        else if (r.info.qualification == v::entry_failure_qualification::pdpte_load) take(first_pdpte, h_pdpte);
        // Bochs checks RFLAGS.IF for an injected external interrupt with the
        // interruptibility state, after the link pointer.
        else if (str_eq(r.info.section, "27.3.1.5") ||
                 (on(e_link_first) && named(r, "guest_rflags_if_clear_for_external_interrupt")))
          take(first_nonreg, h_nonreg);
        else take(first_guest_early, h_early);
    }
  });
  if (first_ctl) return v::make_verdict(first_ctl->info, h_ctl);
  if (tsc_fail) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::vm_fail_valid;
    t.error = v::vm_instruction_error::entry_invalid_control_fields;
    return t;
  }
  if (first_host) return v::make_verdict(first_host->info, h_host);
  auto exit33 = [](std::uint64_t q) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::entry_failure;
    t.exit_reason = 0x8000'0021u;
    t.exit_qualification = q;
    return t;
  };
  if (first_guest_early) return v::make_verdict(first_guest_early->info, h_early);
  // Bochs' own CS.DPL rule can fail where the SDM's passes (unrestricted guest).
  if (on(e_cs_dpl) && !s.guest_rflags.test(x86::rflags::vm) && !bochs_cs_dpl_ok(s)) return exit33(0);
  if (on(e_link_first) && first_link) return v::make_verdict(first_link->info, h_link);
  if (first_nonreg) {
    v::vm_entry_verdict t = v::make_verdict(first_nonreg->info, h_nonreg);
    if (on(e_nmi_sti_qual) && t.exit_qualification == 3) t.exit_qualification = 0;
    return t;
  }
  if (first_link) return v::make_verdict(first_link->info, h_link);
  if (smm_guest_fail) return exit33(0);
  if (first_pdpte) return v::make_verdict(first_pdpte->info, h_pdpte);
  return v::check_msr_load_area(s.entry_msr_load_address, s.entry_msr_load_count, env, c.mem);
}
/// The erratum that explains the case, or erratum_count.
unsigned explain(const diff_case& c) {
  for (unsigned e = 0; e < erratum_count; ++e)
    if (same(c.cpu, bochs_model(c, 1u << e))) return e;
  const unsigned all = (1u << erratum_count) - 1;
  if (!same(c.cpu, bochs_model(c, all))) return erratum_count;
  // Several together: the first whose removal from the full model changes the verdict.
  for (unsigned e = 0; e < erratum_count; ++e)
    if (!same(c.cpu, bochs_model(c, all & ~(1u << e)))) return e;
  return erratum_count;
}

// ---- KVM errata (docs/hypervisor.md, "KVM as a second CPU model") ------------------------
// Under Linux KVM (nested VMX) the VMLAUNCH of the hypervisor is emulated: KVM checks the
// hypervisor's VMCS in software, builds its own VMCS for the guest from it and enters that
// on the processor beneath, here Bochs, whose checks (with its errata, above) come last. A
// KVM erratum is a place where that composition deviates from the SDM. The KVM model runs
// in KVM's order:
//   1. the control and host-state checks (VMfailValid 7 / 8): hvkit's rules;
//   2. KVM's own guest-state checks in software (exit 33): CR0/CR4 fixed bits, DR7, PAT,
//      then the VMCS link pointer (qualification 4), then EFER, BNDCFGS and the activity state;
//   3. building the VMCS it enters: the width of CR3 (exit 33), then the PDPTEs of a PAE
//      guest without EPT, read from the PDPT at CR3 (exit 33, qualification 2);
//   4. the VM-entry MSR-load list, entry by entry with KVM's WRMSR (exit 34, index);
//   5. a guest entered in the HLT activity state with nothing to wake it is not entered on
//      the processor at all: KVM halts the virtual CPU in software until its emulated
//      VMX-preemption timer makes the VM exit; with an event to deliver it is entered in
//      the active state;
//   6. KVM's own segment checks for a guest without "unrestricted guest" (the segments it
//      could not run natively; exit 33), then the processor's checks (the TPR threshold,
//      then the Bochs model with all its errata) on the VMCS KVM built, where an unusable CS
//      has access rights 0x10000. (A halted guest of stage 5 gets KVM's segment checks too.)
// With no KVM erratum switched on, the stages collapse to the SDM's order (the Bochs model);
// each erratum moves or removes exactly one check. A case is attributed as for Bochs: to the
// one erratum whose model says what the entry did, else (all together) to the first whose
// removal changes the verdict.
enum kvm_erratum_id : unsigned {
  k_tpr_threshold,     // 27.2.1.1 order: TPR threshold checks left to the processor (after stages 2-5)
  k_link_first,        // 27.3.1.5 order: link pointer checked after CR0/CR4/DR7/PAT only (stage 2)
  k_pdptes_first,      // 27.3.1.6 order: PAE PDPTEs without EPT loaded before the processor's guest checks
  k_msr_load_first,    // 27.4 after 27.3: the MSR-load list is loaded before the processor's guest checks
  k_cs_unusable,       // 27.3.1.2: CS' unusable bit is ignored; KVM enters CS with access rights 0x10000
  k_debugctl,          // 27.3.1.1: valid IA32_DEBUGCTL bits 6, 11, 14, 15 refused (exit 33)
  k_halted_unchecked,  // 27.3.1.5: HLT never reaches the processor: no checks (or active-state checks)
  k_sysenter_msr_load, // 27.4: a non-canonical IA32_SYSENTER_ESP/EIP in the MSR-load list is accepted
  kvm_erratum_count
};
erratum_info kvm_errata[kvm_erratum_count] = {
    {"tpr_threshold_not_checked", 0},
    {"vmcs_link_pointer_checked_before_guest_state", 0},
    {"pae_pdptes_loaded_before_guest_state", 0},
    {"msr_load_list_loaded_before_guest_state", 0},
    {"unusable_cs_entered_with_access_rights_0x10000", 0},
    {"guest_debugctl_valid_bits_refused", 0},
    {"halted_guest_not_checked", 0},
    {"msr_load_sysenter_not_canonical_accepted", 0},
};
/// KVM's WRMSR for the MSR-load list: IA32_SYSENTER_ESP/EIP take any value (made canonical).
bool kvm_msr_write_faults(std::uint32_t index, std::uint64_t value) {
  if (index == 0x175 || index == 0x176) return false;
  return msr_write_faults(index, value);
}
bool named_any(const v::vm_entry_rule& r, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (named(r, n)) return true;
  return false;
}
/// Stage 5: HLT, and neither an injected event nor an interrupt- or NMI-window exit that
/// could end the halt at once.
bool kvm_halts_in_software(const v::vm_entry_state& s) {
  using pp = v::primary_proc_based;
  if (s.activity_state != 1) return false;
  if (s.entry_interruption_info & 0x8000'0000u) return false;
  if (s.proc.test(pp::interrupt_window_exiting) && s.guest_rflags.test(x86::rflags::if_)) return false;
  if (s.proc.test(pp::nmi_window_exiting) && (s.interruptibility & 8)) return false;
  return true;
}
v::vm_entry_verdict kvm_model(const diff_case& c, unsigned kmask) {
  auto on = [&](kvm_erratum_id e) { return (kmask >> e) & 1u; };
  const v::vm_entry_state& s = c.s;
  v::vm_entry_env env = c.env;
  if (on(k_sysenter_msr_load)) env.msr_write_faults = kvm_msr_write_faults;
  auto exit33 = [](std::uint64_t q) {
    v::vm_entry_verdict t{};
    t.outcome = v::vm_entry_outcome::entry_failure;
    t.exit_reason = 0x8000'0021u;
    t.exit_qualification = q;
    return t;
  };
  // Stages 1 and 2.
  const v::vm_entry_rule *ctl = nullptr, *host = nullptr, *sw1 = nullptr, *link = nullptr, *sw2 = nullptr,
                         *pdpte = nullptr, *tpr = nullptr, *cr3 = nullptr;
  v::vm_entry_hit h_ctl{}, h_host{}, h_sw1{}, h_link{}, h_sw2{}, h_pdpte{}, h_tpr{}, h_cr3{};
  v::for_each_vm_entry_violation(s, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit& h) {
    auto take = [&](const v::vm_entry_rule*& slot, v::vm_entry_hit& hs) {
      if (!slot) slot = &r, hs = h;
    };
    if (on(k_tpr_threshold) && named_any(r, {"tpr_threshold_reserved", "tpr_threshold_above_vtpr"})) {
      take(tpr, h_tpr);
      return;
    }
    if (r.info.phase == v::vm_entry_phase::controls) take(ctl, h_ctl);
    else if (r.info.phase == v::vm_entry_phase::host_state) take(host, h_host);
    else if (r.info.qualification == v::entry_failure_qualification::vmcs_link_pointer) take(link, h_link);
    else if (r.info.qualification == v::entry_failure_qualification::pdpte_load) take(pdpte, h_pdpte);
    else if (named_any(r, {"guest_cr0_fixed_bits", "guest_cr0_pg_without_pe", "guest_cr4_fixed_bits", "guest_dr7_high",
                           "guest_pat_invalid"}))
      take(sw1, h_sw1);
    else if (named(r, "guest_cr3_beyond_maxphyaddr")) take(cr3, h_cr3);
    // KVM checks IA-32e mode against CR0.PG and CR4.PAE in software too (after the link
    // pointer, before EFER): first seen as exit 33 where the processor would have refused the
    // TPR threshold first (case 10618 under kvm_intel 6.1: IA-32e guest with CR0 0x10031).
    else if (named_any(r, {"ia32e_guest_without_paging", "ia32e_guest_without_pae", "guest_efer_reserved",
                           "guest_efer_lma_mismatch", "guest_efer_lme_mismatch", "guest_bndcfgs_invalid",
                           "guest_activity_state_unsupported"}))
      take(sw2, h_sw2);
  });
  if (ctl) return v::make_verdict(ctl->info, h_ctl);
  if (host) return v::make_verdict(host->info, h_host);
  // Stage 2 in KVM's order, once a later stage refuses the entry (or with k_link_first).
  const v::vm_entry_verdict st2 = sw1    ? v::make_verdict(sw1->info, h_sw1)
                                  : link ? v::make_verdict(link->info, h_link)
                                  : sw2  ? v::make_verdict(sw2->info, h_sw2)
                                         : v::vm_entry_verdict{};
  if (on(k_link_first) && (sw1 || link)) return st2;
  // Stage 3: CR3 (its width), then the PDPTEs without EPT.
  const v::vm_entry_verdict st3 = !st2.ok() ? st2 : cr3 ? v::make_verdict(cr3->info, h_cr3) : st2;
  if (on(k_pdptes_first) && !s.ept() && pdpte) return st3.ok() ? v::make_verdict(pdpte->info, h_pdpte) : st3;
  // KVM's own segment checks for a guest without "unrestricted guest" (those it could not
  // run natively), made in software just before it enters the processor (exit 33). Its data-
  // segment check looks at S, P and DPL against RPL, not at the accessed bit (SDM 27.3.1.2
  // requires it): a halted guest, never given to the processor, is entered with ES type 2
  // (case 5294 under kvm_intel 6.1: ES access rights 0xc092, activity HLT: success).
  auto kvm_segment_refused = [&](const v::vm_entry_state& x) {
    bool bad = false;
    if (!x.unrestricted_guest())
      v::for_each_vm_entry_violation(x, env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit&) {
        if (named_any(r, {"guest_segment_s_clear", "guest_segment_not_present", "guest_tr_type", "guest_tr_unusable",
                          "guest_cs_type",
                          "guest_ss_type", "guest_ss_rpl_not_cs_rpl", "guest_ldtr_type", "guest_cs_dpl", "guest_ss_dpl",
                          "guest_data_segment_dpl", "guest_v86_base", "guest_v86_limit", "guest_v86_access_rights"}))
          bad = true;
      });
    return bad;
  };
  // Stage 4.
  v::vm_entry_state hw = s;
  const v::vm_entry_verdict msr = v::check_msr_load_area(s.entry_msr_load_address, s.entry_msr_load_count, env, c.mem);
  if (on(k_msr_load_first)) {
    if (!msr.ok()) return st3.ok() ? msr : st3;
    hw.entry_msr_load_count = 0;
  }
  // Stage 5. KVM never passes the HLT activity state to the processor: it halts the virtual
  // CPU itself, before entering (nothing to wake it) or after (an event to deliver).
  if (on(k_halted_unchecked) && s.activity_state == 1) {
    if (kvm_halts_in_software(s)) {
      if (!st3.ok()) return st3;
      if (!msr.ok()) return msr;
      return kvm_segment_refused(s) ? exit33(0) : v::vm_entry_verdict{};
    }
    hw.activity_state = 0;
  }
  // Stage 6.
  if (on(k_debugctl) && s.entry.test(v::entry_controls::load_debug_controls) &&
      (s.guest_debugctl & (bit(6) | bit(11) | bit(14) | bit(15))))
    return exit33(0);
  // KVM keeps only the unusable bit of an unusable segment's access rights (0x10000);
  // for CS the processor then checks type 0.
  if (on(k_cs_unusable) && (hw.seg[1].access_rights & bit(16))) hw.seg[1].access_rights = 0x10000;
  // The TPR threshold is checked by the processor only, on the VMCS KVM enters; a guest
  // without "unrestricted guest" whose segments KVM could not run natively is refused by KVM
  // (exit 33) just before that entry.
  if (tpr) {
    if (!st3.ok()) return st3;
    if (kvm_segment_refused(hw)) return exit33(0);
    return v::make_verdict(tpr->info, h_tpr);
  }
  bochs_phase ph{};
  ph.state = &hw;
  ph.env = &env;
  ph.hardware_under_kvm = true;
  return bochs_model(c, (1u << erratum_count) - 1, ph);
}
/// The KVM erratum that explains the case, or kvm_erratum_count.
unsigned explain_kvm(const diff_case& c) {
  for (unsigned e = 0; e < kvm_erratum_count; ++e)
    if (same(c.cpu, kvm_model(c, 1u << e))) return e;
  const unsigned all = (1u << kvm_erratum_count) - 1;
  if (!same(c.cpu, kvm_model(c, all))) return kvm_erratum_count;
  for (unsigned e = 0; e < kvm_erratum_count; ++e)
    if (!same(c.cpu, kvm_model(c, all & ~(1u << e)))) return e;
  return kvm_erratum_count;
}

// ---- the run --------------------------------------------------------------------------
struct counts {
  std::uint64_t cases, executed, agree, errata, kvm_errata, mismatches, host_unsafe, not_executed;
  std::uint64_t bochs_panic_injection;  // not launched: Bochs panics (type 7 without MTF)
  std::uint64_t kvm_model_off_on_agree; // agreeing cases the full KVM model gets wrong
  std::uint64_t by_outcome[4];  // CPU: success, VMfail 7, VMfail 8, exit 33/34
  std::uint64_t multi_violation;
  // The targeted cases of issue 25, per probe_kind: executed, agreeing, explained by an erratum.
  std::uint64_t probe_executed[probe_count], probe_agree[probe_count], probe_errata[probe_count];
};
constinit counts cnt{};
bool under_kvm = false;

/// How often each rule decided hvkit's verdict (first failing check), by rule position.
constexpr unsigned rule_total = static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count);
std::uint32_t decided[rule_total];
template <class F>
void for_each_rule_info(F&& f) {
  unsigned i = 0;
  v::for_each_vm_entry_rule([&](const v::vm_entry_rule& r) { f(i++, r.info); });
  for (const auto& r : v::entry_rules::msr_load_rules) f(i++, r.info);
}
void count_decided(const v::vm_entry_rule_info* info) {
  if (!info) return;
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (&r == info) ++decided[i];
  });
}


void print_mutations() {
  for (unsigned i = 0; i < mlog.n; ++i) {
    const auto* f = v::find_field(mlog.enc[i]);
    kprintf(" %s=0x%llx", f ? f->name : "?", (unsigned long long)mlog.val[i]);
  }
}

}  // namespace

void print_vm_entry_diagnosis(const char* context) {
  v::hw::current_vmcs vmcs;
  const auto r = v::check_vm_entry(vmcs, make_env(), host_memory());
  if (!r) {
    kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=vmread_failed\n", context);
    return;
  }
  const v::vm_entry_verdict& d = r.value();
  if (d.ok()) {
    kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=no_check_fails (a check hvkit does not model)\n", context);
    return;
  }
  const auto* f1 = v::find_field(d.hit.field);
  const auto* f2 = v::find_field(d.hit.field2);
  kprintf("HVKIT INFO vm_entry_diagnosis context=%s hvkit=", context);
  print_outcome(d.outcome, static_cast<std::uint32_t>(d.error), d.exit_reason, d.exit_qualification);
  kprintf(" check=%s sdm=%s %s=0x%llx", d.rule->name, d.rule->section, f1 ? f1->name : "field",
          (unsigned long long)d.hit.value);
  if (f2) kprintf(" %s=0x%llx", f2->name, (unsigned long long)d.hit.value2);
  if (d.rule->phase == v::vm_entry_phase::msr_load)
    kprintf(" msr_index=0x%x msr_value=0x%llx", d.msr.index, (unsigned long long)d.msr.value);
  kprintf("\n");
}

/// Linux KVM's hypervisor CPUID signature (leaf 0x40000000: "KVMKVMKVM\0\0\0").
bool running_under_kvm() {
  if (((cpuid(1).ecx >> 31) & 1) == 0) return false;  // no hypervisor present
  const cpuid_regs r = cpuid(0x40000000);
  return r.ebx == 0x4b4d564bu && r.ecx == 0x564b4d56u && r.edx == 0x4du;
}

bool entry_diff_run() {
  static const run_config cfg{"entry_diff", false, false, 0, run_status::done};
  run = run_state{};
  run.cfg = &cfg;
  run.status = run_status::running;
  kprintf("HVKIT RUN entry_diff begin cases=%u seed=0x%llx\n", case_count, (unsigned long long)seed);
  const hc::guest_header* g = load_guest(false);
  const x86::hpa vmcs{reinterpret_cast<std::uint64_t>(vmcs_region)};
  *reinterpret_cast<std::uint32_t*>(vmcs_region) = vcaps.revision_id();
  if (!g || !v::hw::vmclear(vmcs) || !v::hw::vmptrld(vmcs) || !setup_vmcs(*g)) {
    result("vm_entry_differential", false, "reason=setup_failed");
    return false;
  }
  // Come back at once: VMX-preemption timer active with value 0.
  wr(fields::pin_based_controls.encoding, rd(fields::pin_based_controls.encoding) | v::pin_based::activate_preemption_timer.raw());
  wr(fields::vmx_preemption_timer_value.encoding, 0);
  wr(fields::host_rip.encoding, reinterpret_cast<std::uint64_t>(&entry_diff_exit));
  *reinterpret_cast<std::uint32_t*>(link_page) = vcaps.revision_id();
  // The baseline guest has RFLAGS.IF = 1 (the PICs masked, so nothing is delivered to it):
  // Linux KVM emulates the timer for a guest hypervisor; with a value of 0 it forces the
  // exit with a self-IPI right after entering the guest, and a Bochs 2.7 erratum blocks that
  // host interrupt while the guest runs with IF = 0 (docs/hypervisor.md, "External
  // interrupts stay blocked after VM entry"): under KVM on Bochs the guest then ran to its
  // first VMCALL. Cases that clear IF again may run guest code before exiting there; any
  // exit counts as a successful entry.
  outb(0x21, 0xFF);
  outb(0xA1, 0xFF);
  wr(fields::guest_rflags.encoding, rd(fields::guest_rflags.encoding) | x86::rflags::if_.raw());
  capture_baseline();
  const v::vm_entry_env env = make_env();
  const auto mem = host_memory();
  under_kvm = running_under_kvm();
  kprintf("HVKIT INFO entry_diff cpu_model=%s\n", under_kvm ? "kvm_on_bochs" : "bochs");

  // The baseline itself enters.
  {
    static_cast<void>(fresh_vmcs());
    v::hw::current_vmcs c;
    const auto r = v::check_vm_entry(c, env, mem);
    const cpu_outcome o = launch();
    const bool ok = r && r.value().ok() && !o.fail_invalid && o.outcome == v::vm_entry_outcome::success &&
                    (o.exit_reason & 0xffff) == static_cast<std::uint32_t>(v::exit_reason::preemption_timer);
    if (!ok) {
      result("vm_entry_differential", false, "reason=baseline_does_not_enter exit_reason=0x%x error=%u", o.exit_reason,
             o.error);
      return false;
    }
  }

  rng_state = seed;
  cnt = counts{};
  for (auto& d : decided) d = 0;
  unsigned printed = 0;
  for (std::uint32_t n = 0; n < case_count; ++n) {
    if (!fresh_vmcs()) {
      result("vm_entry_differential", false, "reason=vmclear_failed case=%u", n);
      return false;
    }
    mlog = mutation_log{};
    const unsigned k = 1 + (rnd_below(10) < 6 ? 0 : rnd_below(10) < 7 ? 1 : 2);
    for (unsigned i = 0; i < k; ++i) mutate_once();
    ++cnt.cases;

    v::hw::current_vmcs c;
    const auto st = v::read_vm_entry_state(c, mem);
    if (!st) {
      result("vm_entry_differential", false, "reason=vmread_failed case=%u", n);
      return false;
    }
    const v::vm_entry_verdict pred = v::check_vm_entry_state(st.value(), env).ok()
                                         ? v::check_msr_load_area(st.value().entry_msr_load_address,
                                                                  st.value().entry_msr_load_count, env, mem)
                                         : v::check_vm_entry_state(st.value(), env);
    unsigned nviol = 0;
    v::for_each_vm_entry_violation(st.value(), env, [&](const v::vm_entry_rule&, const v::vm_entry_hit&) { ++nviol; });
    if (nviol > 1) ++cnt.multi_violation;
    // Never run the host on a mutated host state, never wait for a SIPI.
    if (mlog.host && !(pred.outcome == v::vm_entry_outcome::vm_fail_valid &&
                       pred.error == v::vm_instruction_error::entry_invalid_host_state)) {
      const bool controls_first = pred.outcome == v::vm_entry_outcome::vm_fail_valid;
      if (!controls_first) {
        ++cnt.host_unsafe;
        if (printed++ < 40) {
          kprintf("HVKIT INFO entry_diff host_unsafe case=%u hvkit=%s:", n, pred.rule ? pred.rule->name : "success");
          print_mutations();
          kprintf("\n");
        }
        continue;
      }
    }
    // Bochs accepts an IA-32e mode guest without paging (erratum) and panics when that
    // guest also has CR0.PE = 0 ("EFER.LMA is set when CR0.PE=0"): never launch one.
    const bool bochs_panics = st.value().ia32e_guest() && !st.value().guest_cr0.test(x86::cr0::pe) &&
                              pred.outcome != v::vm_entry_outcome::vm_fail_valid;
    // Bochs 2.7 without the monitor trap flag (corei7_skylake_x) does not refuse an injected
    // event of type 7 (other event, reserved without MTF: SDM 27.2.1.3) and panics when it
    // injects it ("VMENTER: unsupported event injection type 7"): never launch one on Bochs.
    // KVM refuses it itself (VMfailValid 7), so under KVM it is launched.
    const std::uint32_t inj = st.value().entry_interruption_info;
    const bool mtf = vcaps.primary_caps().may_be_one & v::primary_proc_based::monitor_trap_flag.raw();
    const bool bochs_panics_injection = !under_kvm && !mtf && (inj & 0x8000'0000u) && ((inj >> 8) & 7) == 7;
    if (bochs_panics_injection) {
      ++cnt.not_executed;
      ++cnt.bochs_panic_injection;
      continue;
    }
    if ((mlog.activity_risk && pred.outcome != v::vm_entry_outcome::vm_fail_valid) || bochs_panics) {
      ++cnt.not_executed;
      continue;
    }
    const cpu_outcome o = launch();
    ++cnt.executed;
    ++cnt.probe_executed[mlog.probe];
    count_decided(pred.rule);
    cnt.by_outcome[o.outcome == v::vm_entry_outcome::success         ? 0
                   : o.outcome == v::vm_entry_outcome::vm_fail_valid ? (o.error == 7 ? 1 : 2)
                                                                     : 3]++;
    const diff_case dc{st.value(), env, mem, pred, o, rd(fields::tsc_multiplier.encoding)};
    if (same(o, pred)) {
      ++cnt.agree;
      ++cnt.probe_agree[mlog.probe];
      // How faithful the KVM model is: where KVM did what hvkit said, the model with every
      // KVM erratum on should say so too (reported, not a failure: the errata are narrow
      // predicates, but their composition is an inference from the outcomes).
      if (under_kvm && !same(o, kvm_model(dc, (1u << kvm_erratum_count) - 1))) {
        if (cnt.kvm_model_off_on_agree++ < 40) {
          kprintf("HVKIT INFO entry_diff kvm_model_differs case=%u hvkit=%s errata_alone:", n,
                  pred.rule ? pred.rule->name : "success");
          for (unsigned e = 0; e < kvm_erratum_count; ++e)
            if (!same(o, kvm_model(dc, 1u << e))) kprintf(" %s", kvm_errata[e].name);
          kprintf(" model=");
          const v::vm_entry_verdict m = kvm_model(dc, (1u << kvm_erratum_count) - 1);
          print_outcome(m.outcome, static_cast<std::uint32_t>(m.error), m.exit_reason, m.exit_qualification);
          kprintf(":");
          print_mutations();
          kprintf("\n");
        }
      }
      continue;
    }
    // An erratum?
    const unsigned e = explain(dc);
    if (e < erratum_count) {
      if (errata[e].cases++ == 0) {
        kprintf("HVKIT INFO entry_diff erratum=%s first_case=%u cpu=", errata[e].name, n);
        print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
        kprintf(" hvkit=%s:", pred.rule ? pred.rule->name : "-");
        print_mutations();
        kprintf("\n");
      }
      ++cnt.errata;
      ++cnt.probe_errata[mlog.probe];
      continue;
    }
    const unsigned ke = under_kvm ? explain_kvm(dc) : kvm_erratum_count;
    if (ke < kvm_erratum_count) {
      if (kvm_errata[ke].cases++ == 0) {
        kprintf("HVKIT INFO entry_diff kvm_erratum=%s first_case=%u cpu=", kvm_errata[ke].name, n);
        print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
        kprintf(" hvkit=%s:", pred.rule ? pred.rule->name : "-");
        print_mutations();
        kprintf("\n");
      }
      ++cnt.kvm_errata;
      ++cnt.probe_errata[mlog.probe];
      continue;
    }
    ++cnt.mismatches;
    if (printed++ < (under_kvm ? 400u : 60u)) {
      kprintf("HVKIT INFO entry_diff mismatch case=%u hvkit=", n);
      print_outcome(pred.outcome, static_cast<std::uint32_t>(pred.error), pred.exit_reason, pred.exit_qualification);
      kprintf(" rule=%s cpu=%s", pred.rule ? pred.rule->name : "-", o.fail_invalid ? "VMfailInvalid " : "");
      print_outcome(o.outcome, o.error, o.exit_reason, o.qualification);
      kprintf(" violations=%u:", nviol);
      print_mutations();
      if (under_kvm) {
        kprintf(" rules:");
        v::for_each_vm_entry_violation(st.value(), env, [&](const v::vm_entry_rule& r, const v::vm_entry_hit&) {
          kprintf(" %s", r.info.name);
        });
        const auto& sv = st.value();
        if (sv.entry_msr_load_count)
          for (unsigned i = 0; i < sv.entry_msr_load_count && i < 3; ++i)
            kprintf(" msr[%u]=0x%llx:0x%llx", i, (unsigned long long)msr_page[2 * i], (unsigned long long)msr_page[2 * i + 1]);
      }
      kprintf("\n");
    }
  }

  const bool pass = cnt.executed >= 10000 && cnt.mismatches == 0 && cnt.host_unsafe == 0;
  result("vm_entry_differential", pass,
         "cases=%llu executed=%llu agree=%llu errata=%llu kvm_errata=%llu mismatches=%llu host_unsafe=%llu not_executed=%llu "
         "cpu_success=%llu cpu_vmfail7=%llu cpu_vmfail8=%llu cpu_entry_failure=%llu multi_violation=%llu rules=%u "
         "not_launched_type7=%llu model=%s",
         (unsigned long long)cnt.cases, (unsigned long long)cnt.executed, (unsigned long long)cnt.agree,
         (unsigned long long)cnt.errata, (unsigned long long)cnt.kvm_errata, (unsigned long long)cnt.mismatches, (unsigned long long)cnt.host_unsafe,
         (unsigned long long)cnt.not_executed, (unsigned long long)cnt.by_outcome[0],
         (unsigned long long)cnt.by_outcome[1], (unsigned long long)cnt.by_outcome[2],
         (unsigned long long)cnt.by_outcome[3], (unsigned long long)cnt.multi_violation,
         static_cast<unsigned>(v::vm_entry_rule_count + v::msr_load_rule_count),
         (unsigned long long)cnt.bochs_panic_injection, under_kvm ? "kvm_on_bochs" : "bochs");
  for (unsigned k = probe_rtm; k < probe_count; ++k)
    kprintf("HVKIT INFO entry_diff probe=%s executed=%llu agree=%llu errata=%llu\n", probe_name[k],
            (unsigned long long)cnt.probe_executed[k], (unsigned long long)cnt.probe_agree[k],
            (unsigned long long)cnt.probe_errata[k]);
  unsigned covered = 0;
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info&) { covered += decided[i] ? 1 : 0; });
  if (under_kvm)
    kprintf("HVKIT INFO entry_diff kvm_model_check agreeing_cases=%llu full_kvm_model_differs=%llu\n",
            (unsigned long long)cnt.agree, (unsigned long long)cnt.kvm_model_off_on_agree);
  kprintf("HVKIT INFO entry_diff rules_deciding_a_case=%u of %u; never:", covered, rule_total);
  for_each_rule_info([&](unsigned i, const v::vm_entry_rule_info& r) {
    if (!decided[i]) kprintf(" %s", r.name);
  });
  kprintf("\n");
  for (unsigned i = 0; i < erratum_count; ++i)
    if (errata[i].cases) kprintf("HVKIT ERRATUM vm_entry_%s.entry_diff cases=%llu\n", errata[i].name, (unsigned long long)errata[i].cases);
  for (unsigned i = 0; i < kvm_erratum_count; ++i)
    if (kvm_errata[i].cases)
      kprintf("HVKIT ERRATUM vm_entry_kvm_%s.entry_diff cases=%llu\n", kvm_errata[i].name,
              (unsigned long long)kvm_errata[i].cases);

  // A deliberately broken guest state and host state: what the hypervisor prints.
  static_cast<void>(fresh_vmcs());
  wr(fields::guest_tr_access_rights.encoding, 0x89);  // an available (not busy) TSS
  const cpu_outcome g1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=guest_tr_type cpu_exit_reason=0x%x qualification=%llu\n", g1.exit_reason,
          (unsigned long long)g1.qualification);
  print_vm_entry_diagnosis("demo_guest_tr_not_busy");
  static_cast<void>(fresh_vmcs());
  wr(fields::host_tr_selector.encoding, 0);
  const cpu_outcome h1 = launch();
  kprintf("HVKIT INFO vm_entry_demo broken=host_tr_selector cpu_error=%u\n", h1.error);
  print_vm_entry_diagnosis("demo_host_tr_null");

  run.status = run_status::done;
  kprintf("HVKIT RUN entry_diff end status=done exits=0 host_tsc=0\n");
  return pass;
}

}  // namespace hv
