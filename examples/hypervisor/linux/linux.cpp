// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: an unmodified Linux kernel as the guest.
//
// GRUB loads the hypervisor (multiboot, command line "linux <kernel command line>") with
// two modules, the kernel's bzImage and the initramfs. The hypervisor
//   - places them by the Linux x86 boot protocol (Documentation/arch/x86/boot.rst in the
//     kernel tree: setup header at 0x1F1, 64-bit entry at the protected-mode code + 0x200
//     with RSI = boot_params, identity-mapped page tables, __BOOT_CS 0x10 / __BOOT_DS 0x18)
//     with an e820 map that is the firmware's map minus the hypervisor's own memory;
//   - maps guest RAM, the legacy low megabyte and the MMIO space above RAM with an identity
//     EPT (the hypervisor's memory [1 MiB, 16 MiB) is not mapped);
//   - passes the devices through: no external-interrupt exiting, no HLT exiting, I/O not
//     intercepted except the ports listed in io_intercepts below; the guest owns COM1, the
//     hypervisor logs on port 0xE9;
//   - answers CPUID from the hvkit::cpuid policy, RDMSR/WRMSR through an MSR bitmap and the
//     MSR policy derived from it (unknown MSRs #GP), XSETBV against the policy's XCR0, CR
//     accesses through vmx::evaluate_cr_write with CR0.WP (and CR4.CET) guest-owned, VMX
//     instructions #UD; a triple fault ends the run with a report (the host survives).
//
// One vCPU per processor of the machine (smp/smp.hpp): the guest's application processors
// are started by the guest, with INIT and SIPI through its (passed-through) local APIC: each
// AP's VMCS starts in the wait-for-SIPI activity state (SDM Vol. 3C 25.4.1, activity state
// 3), the INIT and SIPI become an INIT exit (reason 3) and a SIPI exit (reason 4) on that
// processor, whose handler (vmx/vmx_smp.cpp) loads the post-INIT state, then CS = vector <<
// 8, IP = 0 in real mode (unrestricted guest), and makes the vCPU active.
#include "linux/linux.hpp"

#include "hv.hpp"
#include <hvkit/vmx/io_bitmap.hpp>
#include <hvkit/vmx/msr_bitmap.hpp>

#include "vmx/vmx_backend.hpp"
#include "smp/smp.hpp"
#include <hvkit/vmx/init_sipi.hpp>

extern "C" std::uint32_t boot_multiboot_info;

namespace hv::lx {

bool active = false;

namespace {

// ---- multiboot v1 information (Multiboot Specification 0.6.96, section 3.3) ----------
constexpr std::uint32_t multiboot_loader_magic = 0x2BADB002;
struct module_info {
  std::uint64_t start, end;
};
struct memory_range {
  std::uint64_t base, length;
  std::uint32_t type;  // e820 types: 1 RAM, 2 reserved, 3 ACPI, 4 NVS, 5 unusable
};
char hv_cmdline[1024];
module_info modules[4];
unsigned module_count;
memory_range host_map[64];
unsigned host_map_count;

std::uint32_t rd32(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint32_t*>(a); }
std::uint64_t rd64(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint64_t*>(a); }

/// Copies what the hypervisor needs out of GRUB's structures (they may lie anywhere in low
/// memory, which becomes the guest's).
bool read_multiboot() {
  const std::uint64_t mbi = boot_multiboot_info;
  if (::boot_multiboot_magic != multiboot_loader_magic || mbi == 0) return false;
  const std::uint32_t flags = rd32(mbi);
  hv_cmdline[0] = '\0';
  if (flags & (1u << 2)) {
    const char* s = reinterpret_cast<const char*>(static_cast<std::uint64_t>(rd32(mbi + 16)));
    std::size_t i = 0;
    for (; s[i] && i + 1 < sizeof hv_cmdline; ++i) hv_cmdline[i] = s[i];
    hv_cmdline[i] = '\0';
  }
  module_count = 0;
  if (flags & (1u << 3)) {
    const std::uint32_t n = rd32(mbi + 20), addr = rd32(mbi + 24);
    for (std::uint32_t i = 0; i < n && module_count < 4; ++i)
      modules[module_count++] = {rd32(addr + 16 * i), rd32(addr + 16 * i + 4)};
  }
  host_map_count = 0;
  if (flags & (1u << 6)) {
    const std::uint64_t first = rd32(mbi + 48), end = first + rd32(mbi + 44);
    for (std::uint64_t e = first; e < end && host_map_count < 64; e += rd32(e) + 4)
      host_map[host_map_count++] = {rd64(e + 4), rd64(e + 12), rd32(e + 20)};
  }
  return true;
}

bool starts_with(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return false;
  return true;
}

/// The kernel command line: what follows the word "linux" on the hypervisor's command line
/// (GRUB passes "linux ..." or "<image path> linux ..."); nullptr if there is no such word.
const char* linux_args() {
  const char* c = hv_cmdline;
  for (int word = 0; word < 2; ++word) {
    while (*c == ' ') ++c;
    if (starts_with(c, "linux") && (c[5] == '\0' || c[5] == ' ')) {
      c += 5;
      while (*c == ' ') ++c;
      return c;
    }
    while (*c && *c != ' ') ++c;
  }
  return nullptr;
}

// ---- guest-physical layout ------------------------------------------------------------
constexpr std::uint64_t mib = 0x100000;
/// The hypervisor's memory: never guest RAM, never mapped by the guest's EPT.
constexpr std::uint64_t hidden_base = mib, hidden_end = 16 * mib;
static_assert(hidden_end == layout::guest_mem_base, "linker.ld keeps the hypervisor image below 16 MiB");
// Low-memory structures the hypervisor writes for the kernel's first instruction (the
// kernel copies boot_params and the command line early, and builds its own GDT and page
// tables).
constexpr std::uint64_t gdt_gpa = 0x6000, tss_gpa = 0x6800, boot_params_gpa = 0x7000, cmdline_gpa = 0x8000;
constexpr std::uint64_t page_tables_gpa = 0x20000;  // PML4, PDPT, 4 PDs: identity map of 4 GiB
constexpr std::uint64_t kernel_gpa = 16 * mib;        // LOAD_PHYSICAL_ADDR of x86-64 kernels

// Boot protocol offsets (Documentation/arch/x86/zero-page.rst and boot.rst).
namespace bp {
constexpr std::size_t e820_entries = 0x1E8, setup_sects = 0x1F1, header = 0x202, version = 0x206;
constexpr std::size_t type_of_loader = 0x210, loadflags = 0x211, code32_start = 0x214;
constexpr std::size_t ramdisk_image = 0x218, ramdisk_size = 0x21C, cmd_line_ptr = 0x228;
constexpr std::size_t kernel_alignment = 0x230, relocatable = 0x234, xloadflags = 0x236;
constexpr std::size_t cmdline_size = 0x238, init_size = 0x260, e820_table = 0x2D0;
constexpr std::uint32_t header_magic = 0x53726448;  // "HdrS"
}  // namespace bp

struct placement {
  std::uint64_t kernel_src, kernel_size, initrd_src, initrd_size;
  std::uint64_t initrd_gpa, init_size, setup_size;
};
placement place;

/// Is [a, a+n) inside a RAM range of the firmware's map and outside the hypervisor's?
bool guest_ram_range(std::uint64_t a, std::uint64_t n) {
  if (a < hidden_end && a + n > hidden_base) return false;
  for (unsigned i = 0; i < host_map_count; ++i)
    if (host_map[i].type == 1 && a >= host_map[i].base && a + n <= host_map[i].base + host_map[i].length)
      return true;
  return false;
}

template <class T>
T& at(std::uint64_t gpa) {
  return *reinterpret_cast<T*>(gpa);
}

bool load_kernel() {
  if (module_count < 2) {
    kprintf("HVKIT ERROR linux: need two multiboot modules (bzImage, initramfs), got %u\n", module_count);
    return false;
  }
  const std::uint64_t k = modules[0].start, ksize = modules[0].end - modules[0].start;
  if (ksize < 0x1000 || rd32(k + bp::header) != bp::header_magic) {
    kprintf("HVKIT ERROR linux: module 0 is not a bzImage (no HdrS)\n");
    return false;
  }
  const std::uint16_t version = *reinterpret_cast<const std::uint16_t*>(k + bp::version);
  const std::uint16_t xlf = *reinterpret_cast<const std::uint16_t*>(k + bp::xloadflags);
  const std::uint8_t relocatable = *reinterpret_cast<const std::uint8_t*>(k + bp::relocatable);
  // The 64-bit entry needs boot protocol 2.12 (xloadflags) and XLF_KERNEL_64 (bit 0).
  if (version < 0x20c || !(xlf & 1) || !relocatable) {
    kprintf("HVKIT ERROR linux: boot protocol 0x%x xloadflags=0x%x relocatable=%u: no 64-bit entry\n", version, xlf,
            relocatable);
    return false;
  }
  // The load address must be a multiple of the kernel's required alignment (boot protocol
  // 2.05+: kernel_alignment; a relocatable kernel runs where it is loaded).
  const std::uint32_t alignment = rd32(k + bp::kernel_alignment);
  if (alignment == 0 || (kernel_gpa % alignment) != 0) {
    kprintf("HVKIT ERROR linux: load address 0x%llx not aligned to kernel_alignment 0x%x\n",
            (unsigned long long)kernel_gpa, alignment);
    return false;
  }
  unsigned sects = *reinterpret_cast<const std::uint8_t*>(k + bp::setup_sects);
  if (sects == 0) sects = 4;
  place.setup_size = (sects + 1) * 512ull;
  place.kernel_src = k + place.setup_size;
  place.kernel_size = ksize - place.setup_size;
  place.init_size = rd32(k + bp::init_size);
  place.initrd_src = modules[1].start;
  place.initrd_size = modules[1].end - modules[1].start;
  // The kernel decompresses itself in [kernel_gpa, kernel_gpa + init_size); the initramfs
  // goes above that (2 MiB aligned), copied first so that moving the kernel cannot
  // overwrite it.
  place.initrd_gpa = (kernel_gpa + place.init_size + 2 * mib - 1) & ~(2 * mib - 1);
  if (!guest_ram_range(kernel_gpa, place.init_size) || !guest_ram_range(place.initrd_gpa, place.initrd_size)) {
    kprintf("HVKIT ERROR linux: not enough guest RAM for kernel (init_size 0x%llx) and initramfs (0x%llx)\n",
            (unsigned long long)place.init_size, (unsigned long long)place.initrd_size);
    return false;
  }
  if (place.kernel_src < place.initrd_gpa + place.initrd_size && place.kernel_src + place.kernel_size > place.initrd_gpa) {
    kprintf("HVKIT ERROR linux: the bzImage module overlaps the initramfs destination\n");
    return false;
  }
  // Everything the kernel's entry needs: boot_params with the setup header copied from the
  // image (0x1F1 up to 0x202 + the byte at 0x201), the loader fields, the e820 map.
  for (std::uint64_t i = 0; i < 4096; i += 8) at<std::uint64_t>(boot_params_gpa + i) = 0;
  const std::size_t hdr_end = 0x202 + *reinterpret_cast<const std::uint8_t*>(k + 0x201);
  __builtin_memcpy(reinterpret_cast<void*>(boot_params_gpa + bp::setup_sects), reinterpret_cast<const void*>(k + bp::setup_sects),
                   hdr_end - bp::setup_sects);
  __builtin_memmove(reinterpret_cast<void*>(place.initrd_gpa), reinterpret_cast<const void*>(place.initrd_src),
                    place.initrd_size);
  __builtin_memmove(reinterpret_cast<void*>(kernel_gpa), reinterpret_cast<const void*>(place.kernel_src), place.kernel_size);

  at<std::uint8_t>(boot_params_gpa + bp::type_of_loader) = 0xFF;  // "undefined" loader
  at<std::uint8_t>(boot_params_gpa + bp::loadflags) |= 0x01;        // LOADED_HIGH
  at<std::uint32_t>(boot_params_gpa + bp::code32_start) = static_cast<std::uint32_t>(kernel_gpa);
  at<std::uint32_t>(boot_params_gpa + bp::ramdisk_image) = static_cast<std::uint32_t>(place.initrd_gpa);
  at<std::uint32_t>(boot_params_gpa + bp::ramdisk_size) = static_cast<std::uint32_t>(place.initrd_size);
  at<std::uint32_t>(boot_params_gpa + bp::cmd_line_ptr) = static_cast<std::uint32_t>(cmdline_gpa);

  // Command line: everything after "linux " on the hypervisor's own command line.
  const char* c = linux_args();
  const std::uint32_t max_cmdline = *reinterpret_cast<const std::uint32_t*>(k + bp::cmdline_size);
  std::size_t n = 0;
  for (; c[n] && n + 1 < 4096 && n < max_cmdline; ++n) at<char>(cmdline_gpa + n) = c[n];
  at<char>(cmdline_gpa + n) = '\0';

  // e820: the firmware's map with the hypervisor's range taken out of RAM (marked
  // reserved, so the kernel neither uses nor probes it).
  struct e820 {
    std::uint64_t addr, size;
    std::uint32_t type;
  } __attribute__((packed));
  static_assert(sizeof(e820) == 20);
  auto* table = reinterpret_cast<e820*>(boot_params_gpa + bp::e820_table);
  unsigned count = 0;
  auto add = [&](std::uint64_t a, std::uint64_t s, std::uint32_t t) {
    if (s != 0 && count < 128) table[count++] = {a, s, t};
  };
  for (unsigned i = 0; i < host_map_count; ++i) {
    const memory_range& m = host_map[i];
    const std::uint64_t end = m.base + m.length;
    if (m.type != 1 || end <= hidden_base || m.base >= hidden_end) {
      add(m.base, m.length, m.type);
      continue;
    }
    if (m.base < hidden_base) add(m.base, hidden_base - m.base, 1);
    const std::uint64_t hb = m.base > hidden_base ? m.base : hidden_base, he = end < hidden_end ? end : hidden_end;
    add(hb, he - hb, 2);
    if (end > hidden_end) add(hidden_end, end - hidden_end, 1);
  }
  at<std::uint8_t>(boot_params_gpa + bp::e820_entries) = static_cast<std::uint8_t>(count);
  for (unsigned i = 0; i < count; ++i)
    kprintf("HVKIT LINUX e820 0x%016llx-0x%016llx type %u\n", (unsigned long long)table[i].addr,
            (unsigned long long)(table[i].addr + table[i].size), table[i].type);

  // GDT: __BOOT_CS = 0x10 (64-bit code), __BOOT_DS = 0x18, 0x20 a TSS (VM entry needs a
  // usable TR; the kernel loads its own).
  auto* gdt = reinterpret_cast<std::uint64_t*>(gdt_gpa);
  gdt[0] = gdt[1] = 0;
  gdt[2] = 0x00AF9A000000FFFF;
  gdt[3] = 0x00CF92000000FFFF;
  gdt[4] = 0x67 | ((tss_gpa & 0xFFFFFF) << 16) | (0x8Bull << 40);
  gdt[5] = 0;
  // Identity map of the low 4 GiB with 2 MiB pages (the boot protocol's requirement for
  // the kernel, boot_params and the command line).
  auto* pml4 = reinterpret_cast<std::uint64_t*>(page_tables_gpa);
  auto* pdpt = pml4 + 512;
  auto* pd = pml4 + 1024;
  for (int i = 0; i < 512; ++i) pml4[i] = pdpt[i] = 0;
  pml4[0] = reinterpret_cast<std::uint64_t>(pdpt) | 0x3;
  for (int i = 0; i < 4; ++i) pdpt[i] = reinterpret_cast<std::uint64_t>(pd + 512 * i) | 0x3;
  for (std::uint64_t i = 0; i < 2048; ++i) pd[i] = (i << 21) | 0x83;
  kprintf("HVKIT LINUX kernel protocol=0x%x setup=%llu bytes, payload 0x%llx bytes -> 0x%llx (init_size 0x%llx); "
          "initramfs 0x%llx bytes 0x%llx -> 0x%llx; cmdline \"%s\"\n",
          version, (unsigned long long)place.setup_size, (unsigned long long)place.kernel_size,
          (unsigned long long)kernel_gpa, (unsigned long long)place.init_size, (unsigned long long)place.initrd_size,
          (unsigned long long)place.initrd_src, (unsigned long long)place.initrd_gpa, reinterpret_cast<const char*>(cmdline_gpa));
  return true;
}

// ---- EPT: identity over guest RAM, the low megabyte and MMIO; the hypervisor unmapped ----
alignas(4096) std::uint64_t ept_l4[512];
alignas(4096) std::uint64_t ept_l3[512];
alignas(4096) std::uint64_t ept_l2[4][512];
alignas(4096) std::uint64_t ept_l1_low[512];  // [0, 2 MiB) in 4 KiB pages: only [0, 1 MiB) mapped
std::uint64_t linux_eptp;

/// Memory type of the 2 MiB (or 4 KiB) frame at `a`: write-back if the firmware's map says
/// RAM, ACPI or NVS there, uncacheable otherwise (MMIO). With EPT the EPT memory type takes
/// the place of the MTRRs (SDM Vol. 3C 29.3.7.2).
hvkit::paging::ept_memory_type frame_type(std::uint64_t a, std::uint64_t size) {
  for (unsigned i = 0; i < host_map_count; ++i) {
    const memory_range& m = host_map[i];
    if ((m.type == 1 || m.type == 3 || m.type == 4) && a < m.base + m.length && a + size > m.base)
      return hvkit::paging::ept_memory_type::wb;
  }
  return hvkit::paging::ept_memory_type::uc;
}

bool build_linux_ept() {
  namespace v = hvkit::vmx;
  const unsigned maxphyaddr = guest_cpu_properties().maxphyaddr;
  const auto ec = v::ept_capabilities_from(vcaps.ept_vpid_cap, maxphyaddr);
  const v::ept_permissions rwx{true, true, true, false};
  auto table = [&](const void* next) {
    return v::make_ept_table_entry(x86::hpa{reinterpret_cast<std::uint64_t>(next)}, rwx, ec);
  };
  auto l4 = table(ept_l3);
  auto eptp = v::make_eptp(x86::hpa{reinterpret_cast<std::uint64_t>(ept_l4)}, hvkit::paging::ept_memory_type::wb, 4,
                           false, ec);
  if (!l4 || !eptp) return false;
  ept_l4[0] = l4.value().raw();
  for (int g = 0; g < 4; ++g) {
    auto l3 = table(ept_l2[g]);
    if (!l3) return false;
    ept_l3[g] = l3.value().raw();
  }
  auto low = table(ept_l1_low);
  if (!low) return false;
  ept_l2[0][0] = low.value().raw();
  for (std::uint64_t a = 0; a < hidden_base; a += 0x1000) {
    auto leaf = v::make_ept_leaf(x86::hpa{a}, v::ept_level::pte, rwx, frame_type(a, 0x1000), ec, false);
    if (!leaf) return false;
    ept_l1_low[a >> 12] = leaf.value().raw();
  }
  for (std::uint64_t a = hidden_end; a < (4ull << 30); a += 2 * mib) {
    auto leaf = v::make_ept_leaf(x86::hpa{a}, v::ept_level::pde, rwx, frame_type(a, 2 * mib), ec, false);
    if (!leaf) return false;
    ept_l2[a >> 30][(a >> 21) & 511] = leaf.value().raw();
  }
  linux_eptp = eptp.value().raw();
  return true;
}

// ---- MSR and I/O bitmaps ----------------------------------------------------------------
constinit hvkit::vmx::msr_bitmap msr_bits = hvkit::vmx::msr_bitmap::all_exit();
constinit hvkit::vmx::io_bitmaps io_bits{};

/// Ports the hypervisor intercepts; every other port goes to the device (passed through).
///   0xE9: the guest's own log lines (its /init marks phases there): the hypervisor prints
///         them as "HVKIT GUEST <line>" so its channel stays one stream.
///   0x8900: Bochs' shutdown port: the guest's power-off ends the run with the summary.
///   0x64, 0x92, 0xCF9: the reset controls (keyboard controller pulse, fast A20/INIT port,
///         PCI reset control): a guest reboot ends the run instead of resetting the machine.
constexpr std::uint16_t io_intercepts[] = {0xE9, 0x8900, 0x64, 0x92, 0xCF9};

void build_bitmaps() {
  namespace m = x86::msr;
  // No exit: state the VMCS switches (FS/GS base, SYSENTER, PAT with the load/save PAT
  // controls) or the host never uses (the SYSCALL MSRs, KERNEL_GS_BASE); the local APIC,
  // which is passed through with its device (APIC base, x2APIC registers when the policy
  // offers x2APIC, TSC deadline when it offers that).
  for (std::uint32_t msr : {m::ia32_fs_base, m::ia32_gs_base, m::ia32_kernel_gs_base, m::ia32_star, m::ia32_lstar,
                            m::ia32_cstar, m::ia32_fmask, m::ia32_sysenter_cs, m::ia32_sysenter_esp,
                            m::ia32_sysenter_eip, m::ia32_pat, std::uint32_t{0x1B}})
    static_cast<void>(msr_bits.pass_through(msr));
  static_cast<void>(msr_bits.set_intercept(0x10, hvkit::vmx::msr_access::read, false));  // IA32_TSC reads
  if (guest_msrs.tsc_deadline) static_cast<void>(msr_bits.pass_through(m::ia32_tsc_deadline));
  if (guest_policy.has(cpuid_ns::feat::x2apic))
    for (std::uint32_t msr = 0x800; msr <= 0x8FF; ++msr) static_cast<void>(msr_bits.pass_through(msr));
  // ... except writes of the x2APIC ICR: the guest's IPIs (smp/smp_ipi.cpp).
  static_cast<void>(msr_bits.set_intercept(0x830, hvkit::vmx::msr_access::write, true));
  for (std::uint16_t port : io_intercepts) io_bits.set_intercept(port, true);
}

// ---- counters -------------------------------------------------------------------------------
struct linux_state {
  core::exit_counters at_mark;  // exits when the guest reached its shell prompt
  bool marked;
  std::uint64_t tsc_start, tsc_mark;
  std::uint64_t msr_gp_logged;
  std::uint64_t io_exits;
  bool shutdown, reset;
  const char* end_reason;
  // The CR0.WP toggles, the MTRRs the guest sees (a copy of the host's, the guest's writes
  // kept; with EPT the EPT memory type, not the MTRRs, decides: SDM Vol. 3C 29.3.7.2) and
  // IA32_MISC_ENABLE are per vCPU: lx::vcpu_data.
  smp::machine* m;
  char line[1024];
  unsigned line_len;
};
linux_state ls;

std::uint64_t cr_exits_now() { return smp::this_cpu().st.exits.of(core::exit_kind::cr_access); }

/// Every vCPU's exits, added up.
core::exit_counters all_exits() {
  core::exit_counters t{};
  for (unsigned i = 0; ls.m && i < ls.m->count; ++i) {
    const core::exit_counters& e = ls.m->cpus[i].st.exits;
    t.total += e.total;
    for (unsigned k = 0; k < core::exit_slots; ++k) t.by_slot[k] += e.by_slot[k];
    for (unsigned k = 0; k < core::exit_kind_count; ++k) t.by_kind[k] += e.by_kind[k];
  }
  return t;
}

// ---- exit handlers --------------------------------------------------------------------------
/// Index into the virtual MTRR file, or -1 (SDM Vol. 3A 12.11: IA32_MTRRCAP 0xFE,
/// IA32_MTRR_DEF_TYPE 0x2FF, fixed ranges 0x250/0x258/0x259/0x268-0x26F, variable pairs
/// from 0x200).
int mtrr_fixed_index(std::uint32_t m) {
  if (m == 0x250) return 0;
  if (m == 0x258) return 1;
  if (m == 0x259) return 2;
  if (m >= 0x268 && m <= 0x26F) return static_cast<int>(m - 0x268 + 3);
  return -1;
}

/// The MSRs this hypervisor implements itself for the Linux guest, beyond the MSR policy:
/// IA32_MISC_ENABLE (every Intel CPU of family 6 has it and Linux reads it unguarded early;
/// Bochs 2.7 does not implement it), IA32_BIOS_SIGN_ID (the microcode revision: writes are
/// the architectural "load the revision" trigger, reads give 0), and the MTRRs when the
/// policy offers MTRR (the guest profile's MSR hook: pass if the MSR is not one of them).
core::msr_hook platform_msr(bool write, std::uint32_t m, std::uint64_t& v) {
  vcpu_data& d = smp::this_cpu().lx;
  if (write && m == 0x830) return smp::icr_write(smp::this_cpu(), v);  // x2APIC ICR (smp/smp_ipi.cpp)
  bool gp = false;
  std::uint64_t out = 0;
  if (m == 0x1A0) {  // IA32_MISC_ENABLE: fast strings, no BTS, no PEBS (SDM Vol. 4 Table 2-2)
    if (write) gp = v != d.misc_enable;  // nothing in it is changeable here
    out = d.misc_enable;
  } else if (m == 0x8B) {  // IA32_BIOS_SIGN_ID
    out = 0;
  } else if (guest_policy.has(cpuid_ns::feat::mtrr) &&
             (m == 0xFE || m == 0x2FF || mtrr_fixed_index(m) >= 0 || (m >= 0x200 && m < 0x220))) {
    const std::uint64_t cap = rdmsr(0xFE);
    const unsigned vcnt = cap & 0xFF;
    if (!d.mtrr_loaded) {
      d.mtrr_def_type = rdmsr(0x2FF);
      for (std::uint32_t i = 0; i < 11; ++i)
        d.mtrr_fixed[i] = (cap & (1u << 8)) ? rdmsr(i == 0 ? 0x250 : i == 1 ? 0x258 : i == 2 ? 0x259 : 0x268 + i - 3) : 0;
      for (unsigned i = 0; i < 2 * vcnt && i < 32; ++i) d.mtrr_var[i] = rdmsr(0x200 + i);
      d.mtrr_loaded = true;
    }
    std::uint64_t* slot = nullptr;
    if (m == 0xFE) {
      gp = write;  // read-only
      out = cap;
    } else if (m == 0x2FF) {
      slot = &d.mtrr_def_type;
    } else if (mtrr_fixed_index(m) >= 0) {
      if (!(cap & (1u << 8))) gp = true;
      else slot = &d.mtrr_fixed[mtrr_fixed_index(m)];
    } else if (m - 0x200 < 2 * vcnt) {
      slot = &d.mtrr_var[m - 0x200];
    } else {
      gp = true;
    }
    if (slot) {
      if (write) *slot = v;
      out = *slot;
    }
  } else {
    return core::msr_hook::pass;
  }
  if (gp) return core::msr_hook::gp;
  ++d.msr_emulated;
  if (!write) v = out;
  return core::msr_hook::done;
}

void guest_log_char(char c) {
  if (c == '\n' || ls.line_len + 1 >= sizeof ls.line) {
    ls.line[ls.line_len] = '\0';
    kprintf("HVKIT GUEST %s\n", ls.line);
    if (starts_with(ls.line, "HVKIT-GUEST MARK shell") && !ls.marked) {
      ls.marked = true;
      ls.at_mark = all_exits();
      ls.tsc_mark = rdtsc();
      kprintf("HVKIT LINUX mark shell tsc=%llu exits=%llu\n", (unsigned long long)(ls.tsc_mark - ls.tsc_start),
              (unsigned long long)ls.at_mark.total);
    }
    ls.line_len = 0;
    if (c == '\n') return;
  }
  if (c != '\r') ls.line[ls.line_len++] = c;
}

/// I/O exits (only the intercepted ports; the access decoded by the backend).
template <core::backend B>
core::hook linux_io(B& b) {
  ++ls.io_exits;
  const core::io_access io = b.io();
  const unsigned size = io.size;
  const bool in = io.in;
  const std::uint16_t port = io.port;
  if (io.string) {  // INS/OUTS to an intercepted port: not emulated, the instruction is skipped
    kprintf("HVKIT LINUX io_string_skipped port=0x%x\n", port);
    b.skip();
    return core::hook::resume;
  }
  const std::uint32_t mask = size == 4 ? 0xFFFFFFFFu : (1u << (8 * size)) - 1;
  const auto value = static_cast<std::uint32_t>(b.gpr(x86::gpr::rax)) & mask;
  if (!in) {
    const bool reset = (port == 0x64 && size == 1 && value == 0xFE) || (port == 0x92 && size == 1 && (value & 1)) ||
                       (port == 0xCF9 && size == 1 && (value & 4));
    if (reset) {
      kprintf("HVKIT LINUX guest_reset port=0x%x value=0x%x\n", port, value);
      ls.reset = true;
      ls.end_reason = "guest_reset";
      return core::hook::stop;
    }
    if (port == 0xE9) {  // one line buffer for every vCPU
      if (ls.m) ls.m->lock.lock();
      guest_log_char(static_cast<char>(value));
      if (ls.m) ls.m->lock.unlock();
      b.skip();
      return core::hook::resume;
    }
    if (port == 0x8900) {
      static const char word[] = "Shutdown";
      static unsigned matched = 0;
      matched = (static_cast<char>(value) == word[matched]) ? matched + 1 : (static_cast<char>(value) == 'S' ? 1 : 0);
      if (matched == 8) {
        ls.shutdown = true;
        ls.end_reason = "guest_shutdown";
        return core::hook::stop;
      }
      b.skip();
      return core::hook::resume;
    }
  }
  // Passed through as it would have been without the intercept (0x64 status reads, PCI
  // configuration accesses that include 0xCF9, ...).
  std::uint32_t got = 0;
  if (in) {
    if (port == 0xE9 || port == 0x8900) got = mask;  // nothing there for the guest
    else if (size == 1) { std::uint8_t b; asm volatile("inb %1, %0" : "=a"(b) : "Nd"(port)); got = b; }
    else if (size == 2) { std::uint16_t w; asm volatile("inw %1, %0" : "=a"(w) : "Nd"(port)); got = w; }
    else { std::uint32_t d; asm volatile("inl %1, %0" : "=a"(d) : "Nd"(port)); got = d; }
    b.set_gpr(x86::gpr::rax, (size == 4) ? got : ((b.gpr(x86::gpr::rax) & ~static_cast<std::uint64_t>(mask)) | got));
  } else {
    if (size == 1) asm volatile("outb %b0, %1" ::"a"(value), "Nd"(port));
    else if (size == 2) asm volatile("outw %w0, %1" ::"a"(value), "Nd"(port));
    else asm volatile("outl %0, %1" ::"a"(value), "Nd"(port));
  }
  b.skip();
  return core::hook::resume;
}

/// The Linux guest's hypercalls (hc_wp_begin/hc_wp_end of the hvkit_wp module), KVM's
/// -KVM_ENOSYS for anything else and for CPL > 0.
template <core::backend B>
core::hook linux_hypercall(B& b) {
  if (b.cpl() != 0) {  // hypercalls are for the guest kernel only
    b.set_gpr(x86::gpr::rax, static_cast<std::uint64_t>(-1000));  // KVM's -KVM_ENOSYS
    b.skip();
    return core::hook::resume;
  }
  vcpu_data& d = smp::this_cpu().lx;
  switch (b.gpr(x86::gpr::rax)) {
    case hc_wp_begin:
      d.wp_intercepted = b.gpr(x86::gpr::rbx) != 0;
      b.set_cr0_wp_intercept(d.wp_intercepted);
      d.wp_mark = cr_exits_now();
      b.set_gpr(x86::gpr::rax, 0);
      break;
    case hc_wp_end: {
      const unsigned k = d.wp_intercepted ? 1 : 0;
      d.wp_toggles[k] = b.gpr(x86::gpr::rbx);
      d.wp_mismatch[k] = b.gpr(x86::gpr::rcx);
      d.wp_exits[k] = cr_exits_now() - d.wp_mark;
      d.wp_seen[k] = true;
      kprintf("HVKIT LINUX wp cpu=%u mode=%s toggles=%llu cr_exits=%llu guest_mismatches=%llu\n",
              smp::this_cpu().index, k ? "intercepted" : "guest_owned", (unsigned long long)d.wp_toggles[k],
              (unsigned long long)d.wp_exits[k], (unsigned long long)d.wp_mismatch[k]);
      b.set_gpr(x86::gpr::rax, d.wp_exits[k]);
      d.wp_intercepted = false;
      b.set_cr0_wp_intercept(false);
      break;
    }
    default:
      b.set_gpr(x86::gpr::rax, static_cast<std::uint64_t>(-1000));  // unknown hypercall: -KVM_ENOSYS, as KVM answers
  }
  b.skip();
  return core::hook::resume;
}

void report(const char* what) {
  kprintf("HVKIT LINUX exit %s reason=%llu qualification=0x%llx rip=0x%llx gpa=0x%llx\n", what,
          (unsigned long long)(vmread(fields::exit_reason) & 0xFFFF), (unsigned long long)vmread(fields::exit_qualification),
          (unsigned long long)vmread(fields::guest_rip), (unsigned long long)vmread(fields::guest_physical_address));
}

// ---- the VMCS for the kernel's 64-bit entry ----------------------------------------------
template <class C>
bool ok_controls(const char* what, const hvkit::result<C, hvkit::vmx::control_error<C>>& r) {
  if (r.has_value()) return true;
  kprintf("HVKIT ERROR linux: control %s unsupported=0x%llx\n", what, (unsigned long long)r.error().unsupported.raw());
  return false;
}

constexpr run_config linux_run{"linux", false, false, 0, run_status::done};

/// The current VMCS for vCPU `c`: the BSP's at the kernel's 64-bit entry, an AP's in the
/// post-INIT state waiting for a SIPI (unrestricted guest: its SIPI starts it in real mode).
bool setup_linux_vmcs(smp::cpu& c) {
  namespace v = hvkit::vmx;
  const bool ap = c.index != 0;
  const auto pin = v::adjust_controls(vcaps.pin_caps(), v::pin_based{});
  const auto proc = v::adjust_controls(vcaps.primary_caps(), v::primary_proc_based::use_msr_bitmaps |
                                                                 v::primary_proc_based::use_io_bitmaps |
                                                                 v::primary_proc_based::activate_secondary_controls);
  const auto proc2 = v::adjust_controls(vcaps.secondary_caps(), ap ? v::secondary_proc_based::enable_ept |
                                                                          v::secondary_proc_based::unrestricted_guest
                                                                    : v::secondary_proc_based::enable_ept);
  const auto exitc = v::adjust_controls(vcaps.exit_caps(), v::exit_controls::host_address_space_size |
                                                               v::exit_controls::save_ia32_efer |
                                                               v::exit_controls::load_ia32_efer |
                                                               v::exit_controls::save_ia32_pat |
                                                               v::exit_controls::load_ia32_pat);
  const auto entry = v::adjust_controls(vcaps.entry_caps(), (ap ? v::entry_controls{} : v::entry_controls::ia32e_mode_guest) |
                                                                v::entry_controls::load_ia32_efer |
                                                                v::entry_controls::load_ia32_pat);
  if (!ok_controls("pin", pin) || !ok_controls("proc", proc) || !ok_controls("proc2", proc2) ||
      !ok_controls("exit", exitc) || !ok_controls("entry", entry))
    return false;
  vmwrite(fields::pin_based_controls, pin.value().raw());
  vmwrite(fields::primary_processor_based_controls, proc.value().raw());
  vmwrite(fields::secondary_processor_based_controls, proc2.value().raw());
  vmwrite(fields::primary_vm_exit_controls, exitc.value().raw());
  vmwrite(fields::vm_entry_controls, entry.value().raw());
  write_common_controls(linux_eptp);
  vmwrite(fields::msr_bitmap, reinterpret_cast<std::uint64_t>(msr_bits.bytes().data()));
  vmwrite(fields::io_bitmap_a, reinterpret_cast<std::uint64_t>(io_bits.a().data()));
  vmwrite(fields::io_bitmap_b, reinterpret_cast<std::uint64_t>(io_bits.b().data()));

  // CR0/CR4: the guest-owned policy (CR0.TS, CR0.WP, and the CR4 bits that never affect
  // translation, CET among them, as far as the guest may set them).
  const v::cr_mask_features features{true, guest_cr4_allowed()};
  const v::guest_owned_bits owned = v::make_guest_owned<policy_wp_guest_owned>(features);
  const x86::cr0 guest_cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe;
  if (!write_guest_crs(owned, guest_cr0, x86::cr4::pae, page_tables_gpa)) {
    kprintf("HVKIT ERROR linux: a VMX fixed CR bit would be guest-owned\n");
    return false;
  }
  c.st.cr0_mask = owned.cr0_mask();
  c.st.cr4_mask = owned.cr4_mask();
  if (!ap)
    kprintf("HVKIT LINUX cr0_guest_host_mask=0x%016llx cr4_guest_host_mask=0x%016llx\n", (unsigned long long)c.st.cr0_mask,
            (unsigned long long)c.st.cr4_mask);

  // Host state as for the conformance runs, with PAT (the exit controls load it); GS base
  // = this processor's smp::cpu (smp::this_cpu after every exit).
  write_host_state(true);
  vmwrite(fields::host_gs_base, reinterpret_cast<std::uint64_t>(&c));
  if (ap) {
    // Power-on state (Table 10-1 RESET column: CR0 60000010H), then as after INIT: the
    // vCPU waits for the guest's SIPI (IA32_VMX_MISC[8]: the activity state is enterable).
    const std::uint32_t signature = guest_policy.answer(1, 0, {}).eax;
    const x86::reset_state power_on = x86::state_after_reset(signature);
    smp::write_reset_state(c, x86::state_after_init(signature, power_on.cr0_value, power_on.efer_value),
                           hvkit::vmx::activity_state::wait_for_sipi);
    vmwrite(fields::guest_ia32_sysenter_cs, 0);
    vmwrite(fields::guest_ia32_sysenter_esp, 0);
    vmwrite(fields::guest_ia32_sysenter_eip, 0);
    vmwrite(fields::vmcs_link_pointer, ~0ull);
    vmwrite(fields::guest_ia32_pat, 0x0007040600070406ull);
    return true;
  }
  // Guest state: the boot protocol's 64-bit entry (__BOOT_CS 0x10, __BOOT_DS 0x18, a TSS at
  // 0x20; RIP = startup_64, interrupts off as the protocol requires).
  write_flat_guest_state({0x10, 0x18, 0x20, true, tss_gpa, gdt_gpa, 6 * 8 - 1, 0, 0, 0, kernel_gpa + 0x200,
                          x86::efer::lme | x86::efer::lma});
  vmwrite(fields::guest_ia32_pat, 0x0007040600070406ull);  // the power-on PAT (SDM Vol. 3A 13.12.4)
  c.st.guest_efer = (x86::efer::lme | x86::efer::lma).raw();
  c.st.mmu = hvkit::paging::mmu_context::make(guest_cr0, x86::cr4::pae, x86::efer::lme | x86::efer::lma,
                                              x86::gpa{page_tables_gpa});
  return true;
}

/// The policy's leaves the runner derives the expected /proc/cpuinfo flags from, answered
/// for a guest with CR4.OSXSAVE set and XCR0 = every component the policy offers.
void print_policy() {
  cpuid_ns::vcpu_state vs{};
  // The dynamic bits as Linux leaves them: CR4.OSXSAVE set, CR4.PKE set when PKU is offered.
  vs.cr4 = guest_policy.has(cpuid_ns::feat::pku) ? x86::cr4::osxsave | x86::cr4::pke : x86::cr4::osxsave;
  vs.xcr0 = guest_policy.xcr0_components();
  const std::uint32_t kb = guest_policy.kvm_base();
  const std::uint32_t leaves[][2] = {{0, 0},       {1, 0},          {6, 0},          {7, 0},          {7, 1},
                                     {0xd, 0},     {0xd, 1},        {0xd, 2},        {0x14, 0},       {0x80000001, 0},
                                     {0x80000007, 0}, {0x80000008, 0}, {kb, 0},       {kb + 1, 0}};
  for (const auto& l : leaves) {
    const cpuid_ns::regs a = guest_policy.answer(l[0], l[1], vs);
    kprintf("HVKIT POLICY CPUID 0x%08x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x\n", l[0], l[1], a.eax, a.ebx, a.ecx, a.edx);
  }
  kprintf("HVKIT POLICY XCR0 0x%llx pred_cmd_bits=0x%llx ibpb=%d\n", (unsigned long long)guest_policy.xcr0_components().raw(),
          (unsigned long long)guest_msrs.pred_cmd_bits, guest_msrs.pred_cmd_bits != 0 ? 1 : 0);
}

void print_exits(const char* phase, const core::exit_counters& c) {
  for (unsigned i = 0; i < exit_reason_slots; ++i)
    if (c.by_slot[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", phase, i, reason_name(i), (unsigned long long)c.by_slot[i]);
}

}  // namespace

bool requested() { return read_multiboot() && linux_args() != nullptr; }

namespace {

/// The Linux guest as a profile over the core (core/exit_loop.hpp): its own hypercalls and
/// port I/O, its platform MSRs before the MSR policy, and an end to the run on anything a
/// kernel should not do here (a second-stage fault: every guest-physical address it may use
/// is mapped; a triple fault: reported, the host survives). CPUID, the MSR policy, CR
/// accesses, XSETBV and the VMX instructions (#UD: the guest's CPUID offers no VMX) are the
/// core's.
struct linux_profile {
  template <core::backend B>
  core::hook exit(B& b, core::context& c, const core::exit_info& e) {
    using K = core::exit_kind;
    switch (e.kind) {
      case K::io: return linux_io(b);
      case K::hypercall: return linux_hypercall(b);
      case K::cpuid: case K::msr_read: case K::msr_write: case K::xsetbv: case K::virt_instruction:
        return core::hook::pass;
      case K::cr_access:
        if (b.cr_access()) return core::hook::resume;
        ls.end_reason = "cr_access_not_handled";
        return core::hook::stop;
      case K::triple_fault:
        // The guest is dead; the hypervisor is not: report and end the run (SDM Vol. 3C
        // 27.2: a triple fault in VMX non-root operation is a VM exit).
        report("guest_triple_fault");
        ls.end_reason = "guest_triple_fault";
        c.vcpu.status = core::run_status::triple_fault;
        return core::hook::stop;
      case K::memory:
      case K::misconfig:
        report(e.name);
        ls.end_reason = "ept_fault";
        return core::hook::stop;
      default:
        report(e.kind == K::entry_failed ? "vm_entry_failed" : "unexpected_exit");
        if (e.kind == K::entry_failed) print_vm_entry_diagnosis("linux");
        ls.end_reason = "unexpected_exit";
        return core::hook::stop;
    }
  }
  core::msr_hook msr(core::context&, bool write, std::uint32_t m, std::uint64_t& v) { return platform_msr(write, m, v); }
  void msr_refused(bool write, std::uint32_t m, std::uint64_t v, std::uint64_t rip) {
    if (ls.msr_gp_logged++ < 40)
      kprintf("HVKIT LINUX msr_gp %s 0x%x value=0x%llx rip=0x%llx\n", write ? "wrmsr" : "rdmsr", m,
              (unsigned long long)(write ? v : 0), (unsigned long long)rip);
  }
};

}  // namespace

bool handle_exit(vmx_backend& b) {
  smp::cpu& cpu = smp::this_cpu();
  // The guest's INIT and SIPI to this vCPU (vmx/vmx_smp.cpp).
  if (!b.reason.entry_failure() && smp::handle_init_sipi(cpu, b.reason.basic())) return true;
  cpu.just_started = false;
  if (cpu.index != 0 && cpu.st.exits.total < 24)  // an AP's way from its SIPI to long mode, for the log
    kprintf("HVKIT SMP vcpu=%u exit reason=%u rip=0x%llx qualification=0x%llx rax=0x%llx rcx=0x%llx rdx=0x%llx\n",
            cpu.index, b.reason.basic_raw(), (unsigned long long)vmread(fields::guest_rip),
            (unsigned long long)vmread(fields::exit_qualification), (unsigned long long)b.regs.gprs()[x86::gpr::rax],
            (unsigned long long)b.regs.gprs()[x86::gpr::rcx], (unsigned long long)b.regs.gprs()[x86::gpr::rdx]);
  vmx_backend mine{b.regs, b.events, b.reason, cpu.st};
  core::context c = smp::context_of(cpu);
  const bool resume = core::handle_exit(mine, c, linux_profile{});
  smp::fix_smi_blocking(cpu);
  return resume;
}

namespace {

bool has_word(const char* word) {
  for (const char* c = linux_args(); c && *c; ++c)
    if (starts_with(c, word)) return true;
  return false;
}

/// The end of the run, on the processor whose vCPU stopped (the first one; any other that
/// stops later halts): every vCPU's numbers, the checks, the verdict.
/// IA32_MISC_ENABLE as every vCPU reads it: fast strings, no BTS, no PEBS (SDM Vol. 4 Table 2-2).
constexpr std::uint64_t m_misc_enable = 1u | (1u << 11) | (1u << 12);

[[noreturn]] void finish(smp::cpu& me, int rc) {
  smp::machine& m = *me.m;
  if (__atomic_exchange_n(&m.finished, 1u, __ATOMIC_ACQ_REL) != 0)
    for (;;) asm volatile("cli; hlt");
  active = false;
  if (rc != 0) {
    kprintf("HVKIT ERROR linux: VM entry failed on cpu %u (%s, VM-instruction error %llu)\n", me.index,
            rc == 1 ? "VMfailInvalid" : "VMfailValid",
            (unsigned long long)(rc == 2 ? vmread(fields::vm_instruction_error) : 0));
    ls.end_reason = "vm_entry_failed";
  }
  const std::uint64_t tsc_end = rdtsc();
  if (ls.line_len) guest_log_char('\n');
  const core::exit_counters total = all_exits();
  kprintf("HVKIT LINUX end reason=%s tsc=%llu exits=%llu cpu=%u\n", ls.end_reason,
          (unsigned long long)(tsc_end - ls.tsc_start), (unsigned long long)total.total, me.index);
  if (ls.marked) print_exits("boot", ls.at_mark);
  print_exits("total", total);
  std::uint64_t msr_gp = 0, msr_emulated = 0, xsetbv_ok = 0, xsetbv_gp = 0, vmx_ud = 0, cr_gp = 0;
  unsigned started = 0, wp_ok_cpus = 0;
  for (unsigned i = 0; i < m.count; ++i) {
    const smp::cpu& c = m.cpus[i];
    const vcpu_data& d = c.lx;
    msr_gp += c.st.msr_gp;
    msr_emulated += d.msr_emulated;
    xsetbv_ok += c.st.xsetbv_ok;
    xsetbv_gp += c.st.xsetbv_gp;
    vmx_ud += c.st.virt_ud_injected;
    cr_gp += c.st.cr_gp_injected;
    if (c.index == 0 || c.sipi_exits > 0) ++started;
    const bool wp = d.wp_seen[0] && d.wp_seen[1] && d.wp_toggles[0] == 10000 && d.wp_toggles[1] == 10000 &&
                    d.wp_exits[0] == 0 && d.wp_exits[1] == d.wp_toggles[1] && d.wp_mismatch[0] == 0 &&
                    d.wp_mismatch[1] == 0;
    if (wp) ++wp_ok_cpus;
    kprintf("HVKIT LINUX vcpu %u apic_id=%u exits=%llu init_exits=%llu held_inits=%llu sipi_exits=%llu sipi_vector=0x%llx "
            "wp_guest_owned=%llu/%llu wp_intercepted=%llu/%llu cr_exits=%llu msr_exits=%llu icr_writes=%llu sipis_sent=%llu "
            "virtual_inits=%llu\n",
            c.index, c.apic_id, (unsigned long long)c.st.exits.total, (unsigned long long)c.init_exits,
            (unsigned long long)c.held_inits,
            (unsigned long long)c.sipi_exits, (unsigned long long)c.sipi_vector, (unsigned long long)d.wp_exits[0],
            (unsigned long long)d.wp_toggles[0], (unsigned long long)d.wp_exits[1], (unsigned long long)d.wp_toggles[1],
            (unsigned long long)c.st.exits.of(core::exit_kind::cr_access),
            (unsigned long long)(c.st.exits.of(core::exit_kind::msr_read) + c.st.exits.of(core::exit_kind::msr_write)),
            (unsigned long long)c.icr_writes, (unsigned long long)c.sipis_sent, (unsigned long long)c.virtual_inits);
  }
  kprintf("HVKIT LINUX counts msr_gp=%llu msr_emulated=%llu xsetbv_ok=%llu xsetbv_gp=%llu io_exits=%llu vmx_ud=%llu "
          "cr_gp=%llu guest_xcr0=0x%llx\n",
          (unsigned long long)msr_gp, (unsigned long long)msr_emulated, (unsigned long long)xsetbv_ok,
          (unsigned long long)xsetbv_gp, (unsigned long long)ls.io_exits, (unsigned long long)vmx_ud,
          (unsigned long long)cr_gp, (unsigned long long)m.cpus[0].st.guest_xcr0);
  std::uint64_t held = 0;
  for (unsigned i = 0; i < m.count; ++i) held += m.cpus[i].held_inits;
  if (held) kprintf("HVKIT ERRATUM bochs_init_after_sipi count=%llu\n", (unsigned long long)held);
  std::uint64_t smi = 0;
  for (unsigned i = 0; i < m.count; ++i) smi += m.cpus[i].smi_blocking_cleared;
  if (smi) kprintf("HVKIT ERRATUM bochs_smi_blocking_after_sipi exits=%llu\n", (unsigned long long)smi);
  result("linux_shell_reached", ls.marked, "tsc=%llu", (unsigned long long)(ls.tsc_mark - ls.tsc_start));
  if (m.count > 1)
    result("linux_smp_vcpus_started", started == m.count, "vcpus=%u started_by_guest_sipi=%u", m.count, started - 1);
  // The hostile run ("hvkit.triple_fault" on the guest's command line): the guest's triple
  // fault must end in a report, with the hypervisor (and the machine) still running.
  if (has_word("hvkit.triple_fault")) {
    result("linux_triple_fault_contained", str_eq(ls.end_reason, "guest_triple_fault"),
           "end=%s", ls.end_reason);
    kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", results_pass, results_fail, results_errata);
    const bool ok = results_fail == 0 && results_pass > 0;
    kprintf("HVKIT DONE %s\n", ok ? "PASS" : "FAIL");
    machine_exit(ok);
  }
  result("linux_clean_shutdown", ls.shutdown, "end=%s", ls.end_reason);
  const vcpu_data& d0 = m.cpus[0].lx;
  result("linux_wp_exits_per_toggle", wp_ok_cpus == m.count,
         "vcpus=%u vcpus_ok=%u guest_owned_toggles=%llu guest_owned_cr_exits=%llu intercepted_toggles=%llu "
         "intercepted_cr_exits=%llu",
         m.count, wp_ok_cpus, (unsigned long long)d0.wp_toggles[0], (unsigned long long)d0.wp_exits[0],
         (unsigned long long)d0.wp_toggles[1], (unsigned long long)d0.wp_exits[1]);
  kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", results_pass, results_fail, results_errata);
  const bool pass = results_fail == 0 && results_pass > 0;
  kprintf("HVKIT DONE %s\n", pass ? "PASS" : "FAIL");
  machine_exit(pass);
}

/// An AP's vCPU: its VMCS (waiting for the guest's SIPI), then the guest until it stops.
[[noreturn]] void run_ap(smp::cpu& c) {
  c.lx.misc_enable = m_misc_enable;
  c.st.cfg = &linux_run;
  c.st.status = run_status::running;
  c.st.guest_xcr0 = 1;
  c.st.x2apic_id = c.apic_id;
  if (!smp::load_vmcs(c) || !setup_linux_vmcs(c)) {
    kprintf("HVKIT ERROR linux: the VMCS of cpu %u\n", c.index);
    c.phase = smp::cpu_phase::failed;
    for (;;) asm volatile("cli; hlt");
  }
  c.phase = smp::cpu_phase::guest;
  finish(c, vmx_enter(&c.st.regs, 0));
}

}  // namespace

[[noreturn]] void boot() {
  console_use_port_e9();
  kprintf("\nHVKIT BOOT hvkit reference hypervisor, Linux guest (log on port 0xE9; COM1 is the guest's)\n");
  kprintf("HVKIT LINUX hypervisor_cmdline \"%s\" modules=%u\n", hv_cmdline, module_count);
  setup_host_tables();
  if (((cpuid(1).ecx >> 5) & 1) == 0) {
    kprintf("HVKIT SKIP this CPU has no VMX (CPUID.1:ECX.VMX=0)\nHVKIT DONE SKIP\n");
    machine_exit(true);
  }
  read_capabilities();
  // Every processor: started now, each waits in VMX root operation for `go`.
  smp::machine& m = smp::start_processors();
  smp::cpu& bsp = m.cpus[0];
  ls = linux_state{};
  ls.m = &m;
  ls.end_reason = "running";
  bsp.lx.misc_enable = m_misc_enable;
  bsp.st.cfg = &linux_run;
  bsp.st.status = run_status::running;
  bsp.st.guest_xcr0 = 1;
  bsp.st.x2apic_id = bsp.apic_id;
  const bool wfs = hvkit::vmx::activity_state_supported(vcaps.misc, hvkit::vmx::activity_state::wait_for_sipi);
  kprintf("HVKIT SMP vmx_misc=0x%llx wait_for_sipi=%d\n", (unsigned long long)vcaps.misc, wfs ? 1 : 0);
  bool ok = build_cpuid_policy(true, m.count) && smp::vmx_on(bsp) && build_linux_ept() && load_kernel();
  if (ok) result("vmx_enable", true, "revision=0x%x cpus=%u", vcaps.revision_id(), m.count);
  if (ok && m.count > 1 && !wfs) {
    kprintf("HVKIT ERROR linux: SMP needs the wait-for-SIPI activity state (IA32_VMX_MISC[8])\n");
    ok = false;
  }
  if (ok) {
    print_policy();
    build_bitmaps();
    ok = smp::load_vmcs(bsp) && setup_linux_vmcs(bsp);
  }
  int rc = 0;
  if (ok) {
    if (caps.ept_vpid & (1ull << 26)) static_cast<void>(hvkit::vmx::hw::invept(hvkit::vmx::hw::invept_type::all_context, 0));
    // The APs: their VMCS and the wait-for-SIPI guest, before the guest's BSP can send INIT.
    m.ap_run = run_ap;
    __atomic_store_n(&m.go, 1u, __ATOMIC_RELEASE);
    for (unsigned i = 1; i < m.count; ++i)
      while (m.cpus[i].phase != smp::cpu_phase::guest && m.cpus[i].phase != smp::cpu_phase::failed) asm volatile("pause");
    kprintf("HVKIT LINUX start rip=0x%llx rsi=0x%llx vcpus=%u\n", (unsigned long long)(kernel_gpa + 0x200),
            (unsigned long long)boot_params_gpa, m.count);
    bsp.st.regs[x86::gpr::rsi] = boot_params_gpa;
    active = true;
    ls.tsc_start = rdtsc();
    bsp.phase = smp::cpu_phase::guest;
    rc = vmx_enter(&bsp.st.regs, 0);
  } else {
    ls.end_reason = "setup_failed";
  }
  finish(bsp, rc);
}

}  // namespace hv::lx
