// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: every processor of the machine (smp/smp.hpp).
//
// The bootstrap processor finds the processors in the ACPI MADT (ACPI 6.x 5.2.12: "Processor
// Local APIC Structure", type 0, flags bit 0 "Enabled"), copies the AP trampoline to
// smp::trampoline_base and starts each application processor with the MP initialization
// protocol (SDM Vol. 3A 9.4.4.1 "Typical BSP Initialization Sequence"): an INIT IPI, then a
// start-up IPI whose vector is the trampoline's page number, a second one if the first did
// not start it. The trampoline (real mode, CS = 1000H) enters protected mode, then IA-32e mode
// with the hypervisor's page tables (SDM Vol. 3A 10.8.5 "Initializing IA-32e Mode"), and jumps
// to hv_ap_entry with the AP's stack and its `cpu`; the BSP starts the next AP once this one
// has reported itself in long mode (the trampoline's data are per start).
#include "smp.hpp"

#include <new>

// The CR0, CR4 and EFER numbers the trampoline writes are checked against the library's typed
// values in boot.cpp (static_assert), as the bootstrap processor's 32-bit entry's are.
asm(R"(
  .set TB, 0x10000                   /* smp::trampoline_base */
  .section .rodata.ap_trampoline, "a"
  .balign 16
  .globl ap_trampoline_start, ap_trampoline_end, ap_trampoline_cr3, ap_trampoline_stack
  .globl ap_trampoline_cpu, ap_trampoline_entry
  .code16
ap_trampoline_start:
  cli
  cld
  mov %cs, %ax
  mov %ax, %ds
  lgdtl (ap_gdt_ptr - ap_trampoline_start)
  mov %cr0, %eax
  or $1, %eax                        /* CR0.PE */
  mov %eax, %cr0
  ljmpl $0x08, $(TB + ap_pm32 - ap_trampoline_start)
  .code32
ap_pm32:
  mov $0x10, %eax
  mov %eax, %ds
  mov %eax, %es
  mov %eax, %ss
  mov %cr4, %eax
  or $0x20, %eax                     /* CR4.PAE */
  mov %eax, %cr4
  mov (TB + ap_trampoline_cr3 - ap_trampoline_start), %eax
  mov %eax, %cr3
  mov $0xC0000080, %ecx              /* IA32_EFER.LME */
  rdmsr
  or $0x100, %eax
  wrmsr
  mov %cr0, %eax
  and $0x9FFFFFFF, %eax              /* caches on: CD, NW clear (INIT keeps them) */
  or $0x80010001, %eax               /* PG | WP | PE */
  mov %eax, %cr0
  ljmp $0x18, $(TB + ap_lm64 - ap_trampoline_start)
  .code64
ap_lm64:
  mov $0x10, %eax
  mov %eax, %ds
  mov %eax, %es
  mov %eax, %ss
  mov (TB + ap_trampoline_stack - ap_trampoline_start), %rsp
  mov (TB + ap_trampoline_cpu - ap_trampoline_start), %rdi
  mov (TB + ap_trampoline_entry - ap_trampoline_start), %rax
  sub $8, %rsp                       /* as after a CALL: RSP + 8 is 16-byte aligned */
  jmp *%rax
  .balign 8
ap_gdt:
  .quad 0
  .quad 0x00CF9A000000FFFF           /* 0x08: 32-bit code */
  .quad 0x00CF92000000FFFF           /* 0x10: data */
  .quad 0x00AF9A000000FFFF           /* 0x18: 64-bit code */
ap_gdt_ptr:
  .word ap_gdt_ptr - ap_gdt - 1
  .long TB + ap_gdt - ap_trampoline_start
  .balign 8
ap_trampoline_cr3: .quad 0
ap_trampoline_stack: .quad 0
ap_trampoline_cpu: .quad 0
ap_trampoline_entry: .quad 0
ap_trampoline_end:
  .text
)");

extern "C" {
extern const unsigned char ap_trampoline_start[], ap_trampoline_end[], ap_trampoline_cr3[], ap_trampoline_stack[],
    ap_trampoline_cpu[], ap_trampoline_entry[];
[[noreturn]] void hv_ap_entry(hv::smp::cpu* c);
}

namespace hv::smp {
namespace {

std::uint8_t rd8(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint8_t*>(a); }
std::uint32_t rd32(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint32_t*>(a); }

bool checksum_ok(std::uint64_t a, std::uint32_t n) {
  std::uint8_t s = 0;
  for (std::uint32_t i = 0; i < n; ++i) s = static_cast<std::uint8_t>(s + rd8(a + i));
  return s == 0;
}

/// The RSDP: "RSD PTR " on a 16-byte boundary in the first KiB of the EBDA or in
/// [E0000H, FFFFFH) (ACPI 6.x 5.2.5.1), checksum over its first 20 bytes.
std::uint64_t find_rsdp() {
  auto scan = [](std::uint64_t from, std::uint64_t to) -> std::uint64_t {
    for (std::uint64_t a = from; a + 20 <= to; a += 16)
      if (rd32(a) == 0x20445352 && rd32(a + 4) == 0x20525450 && checksum_ok(a, 20)) return a;  // "RSD PTR "
    return 0;
  };
  std::uint64_t bda_ebda = 0x40E;  // BIOS data area: the EBDA's segment
  asm("" : "+r"(bda_ebda));       // an address, not an object the compiler knows
  const std::uint64_t ebda = std::uint64_t{*reinterpret_cast<const volatile std::uint16_t*>(bda_ebda)} << 4;
  if (ebda >= 0x80000 && ebda < 0xA0000)
    if (std::uint64_t r = scan(ebda, ebda + 1024)) return r;
  return scan(0xE0000, 0x100000);
}

/// The enabled local APICs of the MADT ("APIC" in the RSDT): their APIC IDs, BSP included.
unsigned madt_apic_ids(std::uint32_t* ids, unsigned max) {
  const std::uint64_t rsdp = find_rsdp();
  if (!rsdp) return 0;
  const std::uint64_t rsdt = rd32(rsdp + 16);
  if (rd32(rsdt) != 0x54445352) return 0;  // "RSDT"
  const std::uint32_t len = rd32(rsdt + 4);
  unsigned n = 0;
  for (std::uint32_t off = 36; off + 4 <= len; off += 4) {
    const std::uint64_t t = rd32(rsdt + off);
    if (rd32(t) != 0x43495041) continue;  // "APIC"
    const std::uint32_t tlen = rd32(t + 4);
    for (std::uint32_t e = 44; e + 2 <= tlen; e += rd8(t + e + 1)) {
      const std::uint8_t type = rd8(t + e), elen = rd8(t + e + 1);
      if (elen < 2) break;
      if (type == 0 && elen >= 8 && (rd32(t + e + 4) & 1) && n < max) ids[n++] = rd8(t + e + 3);
      if (type == 9 && elen >= 16 && (rd32(t + e + 8) & 1) && n < max) ids[n++] = rd32(t + e + 4);  // x2APIC
    }
  }
  return n;
}

// ---- the xAPIC's ICR (SDM Vol. 3A 11.6.1, Figure 11-12), the host's own local APIC ------
void icr_send(std::uint64_t xapic_base, std::uint32_t apic_id, std::uint32_t low) {
  auto* apic = reinterpret_cast<volatile std::uint32_t*>(xapic_base);
  apic[0x310 / 4] = apic_id << 24;  // ICR[63:56]: destination
  apic[0x300 / 4] = low;            // the write of ICR[31:0] sends
  for (int i = 0; i < 1000000 && (apic[0x300 / 4] & (1u << 12)); ++i) asm volatile("pause");  // delivery status
}
constexpr std::uint32_t icr_init = 0x00004500;  // INIT, level assert, physical
constexpr std::uint32_t icr_sipi = 0x00004600;  // start-up | vector

void wait_tsc(std::uint64_t cycles) {
  const std::uint64_t t0 = rdtsc();
  while (rdtsc() - t0 < cycles) asm volatile("pause");
}

/// Waits until the AP has left `cpu_phase::off`: it set `long_mode` in hv_ap_entry, after its
/// last read of the trampoline's data, and may be past it already (`virt_on` once its enable
/// function returned). Waiting for `long_mode` itself missed an AP that ran on in parallel:
/// under QEMU TCG (one host thread per processor) the AP reached `virt_on` between two of the
/// BSP's reads and the BSP gave up on a processor that was up (`run --linux --qemu-tcg --smp
/// 2`: "started=0" after 2.2e9 TSC, the AP waiting for `go` in ap_main); Bochs, which
/// interleaves its processors in short slices, always let the BSP see `long_mode`.
bool wait_started(const cpu& c, std::uint64_t cycles) {
  const std::uint64_t t0 = rdtsc();
  while (c.phase == cpu_phase::off) {
    if (rdtsc() - t0 > cycles) return false;
    asm volatile("pause");
  }
  return true;
}

void set_gs_base(cpu& c) { wrmsr(0xC0000101, reinterpret_cast<std::uint64_t>(&c)); }  // IA32_GS_BASE

/// A value-initialized `T` in zeroed pages of `pool` (its default member initializers
/// applied: page_pool::take is for types valid as all-zero bytes).
template <class T>
T* make_in(core::page_pool& pool, std::size_t n = 1) {
  T* p = static_cast<T*>(pool.take_bytes(sizeof(T) * n, alignof(T)));
  for (std::size_t i = 0; i < n; ++i) ::new (p + i) T{};
  return p;
}

}  // namespace

machine& start_processors(core::page_pool& pool, bool (*enable)(cpu&), void (*attach)(cpu&, core::page_pool&)) {
  const std::uint32_t bsp_id = cpuid(1).ebx >> 24;
  std::uint32_t ids[max_cpus] = {};
  unsigned found = madt_apic_ids(ids, max_cpus);
  if (found == 0) {
    ids[0] = bsp_id;
    found = 1;
  }
  unsigned n = 1;  // the BSP and the MADT's others
  for (unsigned i = 0; i < found; ++i) n += ids[i] != bsp_id && n < max_cpus;
  machine& m = *make_in<machine>(pool);
  m.cpus = make_in<cpu>(pool, n);
  m.ap_enable = enable;
  m.xapic_base = xapic_page_of(rdmsr(x86::msr::ia32_apic_base));
  m.host = &current_host_tables();
  // Index 0 is the BSP; the others in MADT order.
  m.count = 1;
  m.cpus[0].apic_id = bsp_id;
  for (unsigned i = 0; i < found; ++i)
    if (ids[i] != bsp_id && m.count < n) m.cpus[m.count++].apic_id = ids[i];
  for (unsigned i = 0; i < m.count; ++i) {
    cpu& c = m.cpus[i];
    c.self = &c;
    c.m = &m;
    c.index = i;
    c.mp = i == 0 ? hvkit::x86::mp_state::running : hvkit::x86::mp_state::wait_for_sipi;
    if (attach) attach(c, pool);  // before the processor runs: its `enable` may use it
  }
  m.cpus[0].phase = cpu_phase::long_mode;
  set_gs_base(m.cpus[0]);
  kprintf("HVKIT SMP processors=%u (MADT local APICs: %u) bsp_apic_id=%u\n", m.count, found, bsp_id);
  if (m.count == 1) return m;

  const std::size_t size = static_cast<std::size_t>(ap_trampoline_end - ap_trampoline_start);
  auto* dst = reinterpret_cast<unsigned char*>(trampoline_base);
  __builtin_memcpy(dst, ap_trampoline_start, size);
  auto slot = [&](const unsigned char* label) {
    return reinterpret_cast<volatile std::uint64_t*>(trampoline_base + static_cast<std::uint64_t>(label - ap_trampoline_start));
  };
  *slot(ap_trampoline_cr3) = read_cr3();
  *slot(ap_trampoline_entry) = reinterpret_cast<std::uint64_t>(&hv_ap_entry);
  for (unsigned i = 1; i < m.count; ++i) {
    cpu& c = m.cpus[i];
    *slot(ap_trampoline_stack) = reinterpret_cast<std::uint64_t>(c.stack + sizeof c.stack);
    *slot(ap_trampoline_cpu) = reinterpret_cast<std::uint64_t>(&c);
    const std::uint64_t t0 = rdtsc();
    icr_send(m.xapic_base, c.apic_id, icr_init);
    wait_tsc(1000000);
    icr_send(m.xapic_base, c.apic_id, icr_sipi | static_cast<std::uint32_t>(trampoline_base >> 12));
    bool up = wait_started(c, 200000000);
    if (!up) {  // the second SIPI of the protocol (ignored by a processor already started)
      icr_send(m.xapic_base, c.apic_id, icr_sipi | static_cast<std::uint32_t>(trampoline_base >> 12));
      up = wait_started(c, 2000000000);
    }
    kprintf("HVKIT SMP cpu=%u apic_id=%u started=%d tsc=%llu\n", i, c.apic_id, up ? 1 : 0,
            (unsigned long long)(rdtsc() - t0));
    if (!up) {
      m.count = i;  // the processors after a dead one are not used
      break;
    }
  }
  return m;
}

void ap_main(cpu& c) {
  if (!c.m->ap_enable(c)) {
    kprintf("HVKIT ERROR smp cpu=%u: VMXON or SVM enable failed\n", c.index);
    c.phase = cpu_phase::failed;
    for (;;) asm volatile("cli; hlt");
  }
  c.phase = cpu_phase::virt_on;
  while (!c.m->go) asm volatile("pause");
  c.m->ap_run(c);
  for (;;) asm volatile("cli; hlt");
}

}  // namespace hv::smp

/// The AP's first C++: the hypervisor's GDT and IDT (its TR is loaded by the first VM exit,
/// from the VMCS host-state area), GS base = its `cpu`, then smp::ap_main.
extern "C" void hv_ap_entry(hv::smp::cpu* c) {
  hv::load_host_tables(*c->m->host, false);
  hv::wrmsr(0xC0000101, reinterpret_cast<std::uint64_t>(c));  // IA32_GS_BASE: this_cpu()
  c->phase = hv::smp::cpu_phase::long_mode;
  hv::smp::ap_main(*c);
}
