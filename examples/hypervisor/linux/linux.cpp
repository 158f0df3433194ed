// SPDX-License-Identifier: MIT
// hvkit reference hypervisor: an unmodified Linux kernel as the guest, on either vendor.
//
// GRUB loads the hypervisor (multiboot, command line "linux <kernel command line>") with
// two modules, the kernel's bzImage and the initramfs. The hypervisor
//   - places them by the Linux x86 boot protocol (Documentation/arch/x86/boot.rst in the
//     kernel tree: setup header at 0x1F1, 64-bit entry at the protected-mode code + 0x200
//     with RSI = boot_params, identity-mapped page tables, __BOOT_CS 0x10 / __BOOT_DS 0x18)
//     with an e820 map that is the firmware's map minus the hypervisor's own memory;
//   - maps guest RAM, the legacy low megabyte and the MMIO space above RAM with an identity
//     second stage, EPT or NPT (the hypervisor's memory [1 MiB, 16 MiB) is not mapped);
//   - passes the devices through: no external-interrupt exiting or INTR intercept, no HLT
//     exiting, I/O not intercepted except the ports of lx::io_intercepts; the guest owns
//     COM1, the hypervisor logs on port 0xE9;
//   - answers CPUID from the hvkit::cpuid policy, RDMSR/WRMSR through an MSR bitmap or
//     permission map and the MSR policy derived from it (unknown MSRs #GP), XSETBV against
//     the policy's XCR0, CR accesses through the core with CR0.WP (and CR4.CET) guest-owned,
//     VMX/SVM instructions #UD; a triple fault ends the run with a report (the host survives).
// This file is the vendor-neutral part (linux_profile.hpp has the exit hooks); the VMCS and
// EPT are in vmx/vmx_linux.cpp, the VMCB and NPT in svm/svm_linux.cpp.
//
// On VMX one vCPU per processor of the machine (smp/smp.hpp): the guest's application
// processors are started by the guest, with INIT and SIPI through its (passed-through) local
// APIC: each AP's VMCS starts in the wait-for-SIPI activity state (SDM Vol. 3C 25.4.1,
// activity state 3), the INIT and SIPI become an INIT exit (reason 3) and a SIPI exit
// (reason 4) on that processor, whose handler (vmx/vmx_smp.cpp) loads the post-INIT state,
// then CS = vector << 8, IP = 0 in real mode (unrestricted guest), and makes the vCPU
// active. On SVM one vCPU.
#include <hvkit/x86/apic_base.hpp>

#include "linux/linux_profile.hpp"

#include "svm/svm.hpp"

extern "C" std::uint32_t boot_multiboot_info;

namespace hv::lx {

namespace {
// ---- multiboot v1 information (Multiboot Specification 0.6.96, section 3.3) ----------
constexpr std::uint32_t multiboot_loader_magic = 0x2BADB002;

std::uint32_t rd32(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint32_t*>(a); }
std::uint64_t rd64(std::uint64_t a) { return *reinterpret_cast<const volatile std::uint64_t*>(a); }

/// Copies what the hypervisor needs out of GRUB's structures into `b` (they may lie anywhere
/// in low memory, which becomes the guest's).
bool read_multiboot(boot_info& b) {
  const std::uint64_t mbi = boot_multiboot_info;
  if (::boot_multiboot_magic != multiboot_loader_magic || mbi == 0) return false;
  const std::uint32_t flags = rd32(mbi);
  b.cmdline[0] = '\0';
  if (flags & (1u << 2)) {
    const char* s = reinterpret_cast<const char*>(static_cast<std::uint64_t>(rd32(mbi + 16)));
    std::size_t i = 0;
    for (; s[i] && i + 1 < sizeof b.cmdline; ++i) b.cmdline[i] = s[i];
    b.cmdline[i] = '\0';
  }
  b.module_count = 0;
  if (flags & (1u << 3)) {
    const std::uint32_t n = rd32(mbi + 20), addr = rd32(mbi + 24);
    for (std::uint32_t i = 0; i < n && b.module_count < 4; ++i)
      b.modules[b.module_count++] = {rd32(addr + 16 * i), rd32(addr + 16 * i + 4)};
  }
  b.host_map_count = 0;
  if (flags & (1u << 6)) {
    const std::uint64_t first = rd32(mbi + 48), end = first + rd32(mbi + 44);
    for (std::uint64_t e = first; e < end && b.host_map_count < 64; e += rd32(e) + 4)
      b.host_map[b.host_map_count++] = {rd64(e + 4), rd64(e + 12), rd32(e + 20)};
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
const char* linux_args(const boot_info& b) {
  const char* c = b.cmdline;
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

/// Is [a, a+n) inside a RAM range of the firmware's map and outside the hypervisor's?
bool guest_ram_range(const boot_info& b, std::uint64_t a, std::uint64_t n) {
  if (a < hidden_end && a + n > hidden_base) return false;
  for (unsigned i = 0; i < b.host_map_count; ++i)
    if (b.host_map[i].type == 1 && a >= b.host_map[i].base && a + n <= b.host_map[i].base + b.host_map[i].length)
      return true;
  return false;
}

template <class T>
T& at(std::uint64_t gpa) {
  return *reinterpret_cast<T*>(gpa);
}

bool load_kernel(const boot_info& b) {
  if (b.module_count < 2) {
    kprintf("HVKIT ERROR linux: need two multiboot modules (bzImage, initramfs), got %u\n", b.module_count);
    return false;
  }
  placement place{};
  const std::uint64_t k = b.modules[0].start, ksize = b.modules[0].end - b.modules[0].start;
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
  place.initrd_src = b.modules[1].start;
  place.initrd_size = b.modules[1].end - b.modules[1].start;
  // The kernel decompresses itself in [kernel_gpa, kernel_gpa + init_size); the initramfs
  // goes above that (2 MiB aligned), copied first so that moving the kernel cannot
  // overwrite it.
  place.initrd_gpa = (kernel_gpa + place.init_size + 2 * mib - 1) & ~(2 * mib - 1);
  if (!guest_ram_range(b, kernel_gpa, place.init_size) || !guest_ram_range(b, place.initrd_gpa, place.initrd_size)) {
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
  const char* c = linux_args(b);
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
  for (unsigned i = 0; i < b.host_map_count; ++i) {
    const memory_range& m = b.host_map[i];
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


}  // namespace

bool ram_like(const boot_info& b, std::uint64_t a, std::uint64_t size) {
  for (unsigned i = 0; i < b.host_map_count; ++i) {
    const memory_range& m = b.host_map[i];
    if ((m.type == 1 || m.type == 3 || m.type == 4) && a < m.base + m.length && a + size > m.base) return true;
  }
  return false;
}

std::uint64_t ram_end(const boot_info& b) {
  std::uint64_t end = 0;
  for (unsigned i = 0; i < b.host_map_count; ++i) {
    const memory_range& m = b.host_map[i];
    if (m.type == 1 && m.base < second_stage_end) {
      const std::uint64_t e = m.base + m.length < second_stage_end ? m.base + m.length : second_stage_end;
      if (e > end) end = e;
    }
  }
  return end;
}

hvkit::cpuid::feature_set denied_features() {
  namespace feat = hvkit::cpuid::feat;
  hvkit::cpuid::feature_set deny;
  // FSRM is a performance hint the guest never needs, withheld because Bochs 2.7's REP MOVSB
  // corrupts memory on the short-copy path Linux selects with it; MCE/MCA withheld because
  // this hypervisor virtualizes no machine-check banks (their MSRs would #GP). Thermal and
  // power management (ACPI thermal MSRs, TM/TM2, EST, the leaf 6 features), the debug store
  // and PERF_CAPABILITIES (DS, DTES64, DS-CPL, PDCM) for the same reason: their MSRs are not
  // virtualized here. On AMD likewise: IBS, the watchdog timer, the core performance
  // counter extension, OS visible workarounds (OSVW_ID_LENGTH, which Linux reads without a
  // fault handler) and the node ID MSR (read the same way), secure memory encryption and
  // SEV (not virtualized; with SEV offered the decompressor reads SEV_STATUS 0xC0010131
  // before it has an IDT), and MONITORX/MWAITX (Bochs' ryzen model: an MWAITX idle loop
  // never wakes).
  for (const hvkit::cpuid::feature f :
       {feat::fsrm, feat::mce, feat::mca, feat::acpi, feat::tm, feat::tm2, feat::est, feat::dtherm, feat::turbo,
        feat::pln, feat::pts, feat::hwp, feat::hwp_notify, feat::hwp_act_window, feat::hwp_epp, feat::hwp_pkg_req,
        feat::hfi, feat::pdcm, feat::ds, feat::dtes64, feat::ds_cpl, feat::ibs, feat::wdt, feat::perfctr_core,
        feat::osvw, feat::nodeid_msr, feat::sme, feat::sev, feat::mwaitx})
    deny.set(f);
  return deny;
}

/// Every vCPU's exits, added up.
core::exit_counters all_exits(const linux_state& ls) {
  if (!ls.m) return ls.solo_st->exits;
  core::exit_counters t{};
  for (unsigned i = 0; i < ls.m->count; ++i) {
    const core::exit_counters& e = ls.m->cpus[i].st.exits;
    t.total += e.total;
    for (unsigned k = 0; k < core::exit_slots; ++k) t.by_slot[k] += e.by_slot[k];
    for (unsigned k = 0; k < core::exit_kind_count; ++k) t.by_kind[k] += e.by_kind[k];
  }
  return t;
}

// ---- platform MSRs and the guest's channel ------------------------------------------------
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

/// WRMSR IA32_APIC_BASE (reads are not intercepted): the local APIC is the processor's own, so
/// a write the guest's CPU would accept is done on the real MSR. The processor's rules are
/// applied first, for the guest's CPU (x86::check_apic_base_write with the policy's
/// MAXPHYADDR and x2APIC: EXTD #GPs where the policy hides x2APIC; SDM Vol. 3A 11.4.4,
/// 11.12.5), so the host's WRMSR never faults. What passing the APIC through cannot give: a
/// new APIC page. The hypervisor's IPI emulation (smp/smp_ipi.cpp) and, on SVM, the
/// write-protected xAPIC page of the nested page table are at the page found at boot, so a
/// write that moves it #GPs (logged; Linux never moves it).
core::msr_hook apic_base_write(linux_state& ls, std::uint64_t v) {
  const x86::apic_base current{rdmsr(x86::msr::ia32_apic_base)};
  const x86::apic_base value{v};
  const auto mode = x86::check_apic_base_write(current, value, ls.cpu->model.maxphyaddr,
                                               ls.cpu->cpuid.has(cpuid_ns::feat::x2apic));
  if (!mode) {
    kprintf("HVKIT LINUX apic_base_gp cpu=%u value=0x%llx current=0x%llx fault=%u\n", this_index(ls),
            (unsigned long long)v, (unsigned long long)current.raw(), static_cast<unsigned>(mode.error()));
    return core::msr_hook::gp;
  }
  if (value.page() != current.page()) {
    kprintf("HVKIT LINUX apic_base_move_refused cpu=%u value=0x%llx current=0x%llx\n", this_index(ls),
            (unsigned long long)v, (unsigned long long)current.raw());
    return core::msr_hook::gp;
  }
  wrmsr(x86::msr::ia32_apic_base, v);
  ++this_vcpu(ls).msr_emulated;
  return core::msr_hook::done;
}

/// The MSRs this hypervisor implements itself for the Linux guest, beyond the MSR policy:
/// IA32_MISC_ENABLE (every Intel CPU of family 6 has it and Linux reads it unguarded early;
/// Bochs 2.7 does not implement it), IA32_BIOS_SIGN_ID (the microcode revision: writes are
/// the architectural "load the revision" trigger, reads give 0), and the MTRRs when the
/// policy offers MTRR (the guest profile's MSR hook: pass if the MSR is not one of them).
core::msr_hook platform_msr(linux_state& ls, bool write, std::uint32_t m, std::uint64_t& v) {
  if (write && m == 0x830 && ls.m) return smp::icr_write(smp::this_cpu(), v);  // x2APIC ICR (smp/smp_ipi.cpp)
  if (write && m == x86::msr::ia32_apic_base) return apic_base_write(ls, v);
  vcpu_data& d = this_vcpu(ls);
  bool gp = false;
  std::uint64_t out = 0;
  if (m == 0x1A0 && ls.intel) {  // IA32_MISC_ENABLE: fast strings, no BTS, no PEBS (SDM Vol. 4 Table 2-2)
    if (write) gp = v != d.misc_enable;  // nothing in it is changeable here
    out = d.misc_enable;
  } else if (m == 0x8B) {  // IA32_BIOS_SIGN_ID (AMD: PATCH_LEVEL)
    out = 0;
  } else if (!ls.intel && (m == 0xC0010010 || m == 0xC0010015 || m == 0xC001001F || m == 0xC0010055)) {
    // AMD SYSCFG, HWCR, NB_CFG and the interrupt-pending message register (APM Vol. 2
    // Appendix A; the BKDGs of families 0Fh-15h): platform MSRs every AMD processor of these
    // families has, which Linux reads and writes without a fault handler (SYSCFG's memory-
    // map bits; the PCI host bridge code sets NB_CFG's extended configuration space bit; the
    // family 0Fh/10h C1E check reads the last). Kept as the guest writes them, zero at reset
    // (no C1E, no memory above TOM2); they control nothing here.
    std::uint64_t& slot = ls.amd_platform[m == 0xC0010010 ? 0 : m == 0xC0010015 ? 1 : m == 0xC001001F ? 2 : 3];
    if (write) slot = v;
    out = slot;
  } else if (ls.cpu->cpuid.has(cpuid_ns::feat::mtrr) &&
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

void guest_log_char(linux_state& ls, char c) {
  if (c == '\n' || ls.line_len + 1 >= sizeof ls.line) {
    ls.line[ls.line_len] = '\0';
    kprintf("HVKIT GUEST %s\n", ls.line);
    if (starts_with(ls.line, "HVKIT-GUEST MARK shell") && !ls.marked) {
      ls.marked = true;
      ls.at_mark = all_exits(ls);
      ls.tsc_mark = rdtsc();
      kprintf("HVKIT LINUX mark shell tsc=%llu exits=%llu\n", (unsigned long long)(ls.tsc_mark - ls.tsc_start),
              (unsigned long long)ls.at_mark.total);
    }
    ls.line_len = 0;
    if (c == '\n') return;
  }
  if (c != '\r') ls.line[ls.line_len++] = c;
}


namespace {

/// for a guest with CR4.OSXSAVE set and XCR0 = every component the policy offers.
void print_policy(const linux_state& ls) {
  cpuid_ns::vcpu_state vs{};
  // The dynamic bits as Linux leaves them: CR4.OSXSAVE set, CR4.PKE set when PKU is offered.
  vs.cr4 = ls.cpu->cpuid.has(cpuid_ns::feat::pku) ? x86::cr4::osxsave | x86::cr4::pke : x86::cr4::osxsave;
  vs.xcr0 = ls.cpu->cpuid.xcr0_components();
  const std::uint32_t kb = ls.cpu->cpuid.kvm_base();
  const std::uint32_t leaves[][2] = {{0, 0},       {1, 0},          {6, 0},          {7, 0},          {7, 1},
                                     {0xd, 0},     {0xd, 1},        {0xd, 2},        {0x14, 0},       {0x80000001, 0},
                                     {0x80000007, 0}, {0x80000008, 0}, {kb, 0},       {kb + 1, 0}};
  for (const auto& l : leaves) {
    const cpuid_ns::regs a = ls.cpu->cpuid.answer(l[0], l[1], vs);
    kprintf("HVKIT POLICY CPUID 0x%08x 0x%x 0x%08x 0x%08x 0x%08x 0x%08x\n", l[0], l[1], a.eax, a.ebx, a.ecx, a.edx);
  }
  kprintf("HVKIT POLICY XCR0 0x%llx pred_cmd_bits=0x%llx ibpb=%d\n", (unsigned long long)ls.cpu->cpuid.xcr0_components().raw(),
          (unsigned long long)ls.cpu->msrs.pred_cmd_bits, ls.cpu->msrs.pred_cmd_bits != 0 ? 1 : 0);
}


}  // namespace

void print_exits(const char* phase, const core::exit_counters& c, unsigned (*code)(unsigned),
                 const char* (*name)(unsigned)) {
  for (unsigned i = 0; i < core::exit_slots; ++i)
    if (c.by_slot[i])
      kprintf("HVKIT EXITS %s %u %s %llu\n", phase, code(i), name(i), (unsigned long long)c.by_slot[i]);
}

bool requested() {
  boot_info b;  // the copy boot() makes again (nothing writes low memory in between)
  return read_multiboot(b) && linux_args(b) != nullptr;
}

namespace {
/// The boot's verdict from its results; ends the machine.
[[noreturn]] void summary(const core::tally& t) {
  const int pass = t.pass, fail = t.fail, errata = t.errata;
  kprintf("HVKIT SUMMARY pass=%d fail=%d errata=%d\n", pass, fail, errata);
  const bool ok = fail == 0 && pass > 0;
  kprintf("HVKIT DONE %s\n", ok ? "PASS" : "FAIL");
  machine_exit(ok);
}

/// The exit names of the vendor that ran (for the HVKIT EXITS lines).
unsigned vmx_code(unsigned s) { return s; }
const char* vmx_name(unsigned s) { return reason_name(s); }
}  // namespace

namespace {
bool has_word(const linux_state& ls, const char* word) {
  for (const char* c = linux_args(ls.boot); c && *c; ++c)
    if (starts_with(c, word)) return true;
  return false;
}
}  // namespace

hvkit::cpuid::feature_set emulated_features(const linux_state& ls) {
  hvkit::cpuid::feature_set f{};
  if (has_word(ls, "hvkit.pv_send_ipi")) f.set(hvkit::cpuid::kvm::features::pv_send_ipi);
  return f;
}

[[noreturn]] void boot(core::guest_cpu& cpu) {
  // The Linux boot's own: its pages (what the processor reads by physical address), its
  // results, the run; handed down by reference (this function never returns).
  core::page_pool pool = core::boot_page_pool();
  core::tally results{};
  linux_state ls{};
  ls.pool = &pool;
  ls.results = &results;
  static_cast<void>(read_multiboot(ls.boot));  // requested() read it already
  console_use_port_e9();
  kprintf("\nHVKIT BOOT hvkit reference hypervisor, Linux guest (log on port 0xE9; COM1 is the guest's)\n");
  kprintf("HVKIT LINUX hypervisor_cmdline \"%s\" modules=%u\n", ls.boot.cmdline, ls.boot.module_count);
  setup_host_tables(pool);
  const bool vmx = (cpuid(1).ecx >> 5) & 1;
  const bool svm = !vmx && svm::available();
  if (!vmx && !svm) {
    kprintf("HVKIT SKIP this CPU has neither VMX (CPUID.1:ECX.VMX=0) nor SVM with nested paging\nHVKIT DONE SKIP\n");
    machine_exit(true);
  }
  kprintf("HVKIT INFO backend=%s\n", vmx ? "vmx" : "svm");
  run_state solo_st{};  // the vCPU without SMP (SVM): boot()'s, which never returns
  solo_st.cfg = &linux_run;
  solo_st.results = &results;
  solo_st.cpu = &cpu;
  solo_st.status = run_status::running;
  ls.cpu = &cpu;
  ls.solo_st = &solo_st;
  ls.shadow = core::shadow::take(pool, true);
  const cpuid_regs v0 = cpuid(0);
  ls.intel = v0.ebx == 0x756E6547 && v0.edx == 0x49656E69 && v0.ecx == 0x6C65746E;  // "GenuineIntel"
  ls.vmx = vmx;
  ls.pv_send_ipi = emulated_features(ls).test(hvkit::cpuid::kvm::features::pv_send_ipi);
  ls.solo.misc_enable = misc_enable_value;
  solo_st.guest_xcr0 = 1;
  ls.end_reason = "running";
  // VMX: every processor started, the vCPU state per processor (ls.m, this_state()).
  bool ok = (vmx ? prepare_vmx(ls, cpu) : prepare_svm(ls, cpu)) && load_kernel(ls.boot);
  if (ok) {
    // The emulator's and the walkers' view of guest RAM: the whole identity map from the
    // first page to the end of RAM (instructions the SVM backend decodes, the page tables
    // it walks: the kernel's 32-bit trampoline runs in the low megabyte). It includes the
    // hypervisor's own [1 MiB, 16 MiB), which the second stage does not map: a guest's
    // page tables cannot reach it through the CPU's walk, only through a stale TLB entry.
    const core::guest_ram_range ram{0x1000, ram_end(ls.boot) - 0x1000};
    solo_st.ram = ram;
    for (unsigned i = 0; ls.m && i < ls.m->count; ++i) ls.m->cpus[i].st.ram = ls.m->cpus[i].sg_st.ram = ram;
    print_policy(ls);
    // The guest's XSETBV is executed on the host: needs CR4.OSXSAVE there.
    if ((cpuid(1).ecx >> 26) & 1) write_cr4(read_cr4() | x86::cr4::osxsave.raw());
    kprintf("HVKIT LINUX start rip=0x%llx rsi=0x%llx vcpus=%u\n", (unsigned long long)(kernel_gpa + 0x200),
            (unsigned long long)boot_params_gpa, ls.m ? ls.m->count : 1u);
    this_state(ls).regs[x86::gpr::rsi] = boot_params_gpa;
    ls.tsc_start = rdtsc();
    if (!(vmx ? enter_vmx(ls) : enter_svm(ls)) && str_eq(ls.end_reason, "running")) ls.end_reason = "vm_entry_failed";
  } else {
    ls.end_reason = "setup_failed";
  }
  finish(ls, 0);
}

[[noreturn]] void finish(linux_state& ls, unsigned cpu_index) {
  if (ls.m && __atomic_exchange_n(&ls.m->finished, 1u, __ATOMIC_ACQ_REL) != 0)
    for (;;) asm volatile("cli; hlt");
  const std::uint64_t tsc_end = rdtsc();
  if (ls.line_len) guest_log_char(ls, '\n');
  const core::exit_counters total = all_exits(ls);
  kprintf("HVKIT LINUX end reason=%s tsc=%llu exits=%llu cpu=%u\n", ls.end_reason,
          (unsigned long long)(tsc_end - ls.tsc_start), (unsigned long long)total.total, cpu_index);
  unsigned (*code)(unsigned) = ls.vmx ? vmx_code : svm::exit_slot_code;
  const char* (*name)(unsigned) = ls.vmx ? vmx_name : svm::exit_slot_name;
  if (ls.marked) print_exits("boot", ls.at_mark, code, name);
  print_exits("total", total, code, name);
  // Every vCPU: its state and its profile data (ls.m: a vCPU per processor, both backends).
  const unsigned count = ls.m ? ls.m->count : 1;
  std::uint64_t msr_gp = 0, msr_emulated = 0, xsetbv_ok = 0, xsetbv_gp = 0, vmx_ud = 0, cr_gp = 0, held = 0, smi = 0;
  unsigned started = 0, wp_ok_cpus = 0;
  for (unsigned i = 0; i < count; ++i) {
    const run_state& st = ls.m ? ls.m->cpus[i].st : *ls.solo_st;
    const vcpu_data& d = ls.m ? ls.m->cpus[i].lx : ls.solo;
    msr_gp += st.msr_gp;
    msr_emulated += d.msr_emulated;
    xsetbv_ok += st.xsetbv_ok;
    xsetbv_gp += st.xsetbv_gp;
    vmx_ud += st.virt_ud_injected;
    cr_gp += st.cr_gp_injected;
    const bool wp = d.wp_seen[0] && d.wp_seen[1] && d.wp_toggles[0] == 10000 && d.wp_toggles[1] == 10000 &&
                    d.wp_exits[0] == (core::shadow::enabled() ? d.wp_toggles[0] : 0) && d.wp_exits[1] == d.wp_toggles[1] && d.wp_mismatch[0] == 0 &&
                    d.wp_mismatch[1] == 0;
    if (wp) ++wp_ok_cpus;
    if (!ls.m) {
      ++started;
      continue;
    }
    const smp::cpu& c = ls.m->cpus[i];
    if (c.index == 0 || c.sipi_exits > 0 || c.sipis_applied > 0) ++started;
    held += c.held_inits;
    smi += c.smi_blocking_cleared;
    kprintf("HVKIT LINUX vcpu %u apic_id=%u exits=%llu init_exits=%llu held_inits=%llu sipi_exits=%llu sipi_vector=0x%llx "
            "wp_guest_owned=%llu/%llu wp_intercepted=%llu/%llu cr_exits=%llu msr_exits=%llu icr_writes=%llu sipis_sent=%llu "
            "virtual_inits=%llu virtual_sipis=%llu xapic_icr_writes=%llu pv_send_ipi_calls=%llu pv_send_ipi_targets=%llu\n",
            c.index, c.apic_id, (unsigned long long)c.st.exits.total, (unsigned long long)c.init_exits,
            (unsigned long long)c.held_inits,
            (unsigned long long)c.sipi_exits, (unsigned long long)c.sipi_vector, (unsigned long long)d.wp_exits[0],
            (unsigned long long)d.wp_toggles[0], (unsigned long long)d.wp_exits[1], (unsigned long long)d.wp_toggles[1],
            (unsigned long long)c.st.exits.of(core::exit_kind::cr_access),
            (unsigned long long)(c.st.exits.of(core::exit_kind::msr_read) + c.st.exits.of(core::exit_kind::msr_write)),
            (unsigned long long)c.icr_writes, (unsigned long long)c.sipis_sent, (unsigned long long)c.virtual_inits,
            (unsigned long long)c.sipis_applied, (unsigned long long)c.xapic_writes, (unsigned long long)c.pv_ipi_calls,
            (unsigned long long)c.pv_ipi_targets);
  }
  // Each processor's IBPB tracker (svm::physical_cpu / vmx::physical_cpu, skip_same_guest)
  // against the switches it saw, the second guest's among them (docs/smp.md, "IBPB per
  // processor"), and its check.
  if (ls.m && count > 1) smp::report_ibpb(*ls.m, *ls.results);
  const run_state& st0 = ls.m ? ls.m->cpus[0].st : *ls.solo_st;
  kprintf("HVKIT LINUX counts msr_gp=%llu msr_emulated=%llu xsetbv_ok=%llu xsetbv_gp=%llu io_exits=%llu vmx_ud=%llu "
          "cr_gp=%llu guest_xcr0=0x%llx\n",
          (unsigned long long)msr_gp, (unsigned long long)msr_emulated, (unsigned long long)xsetbv_ok,
          (unsigned long long)xsetbv_gp, (unsigned long long)ls.io_exits, (unsigned long long)vmx_ud,
          (unsigned long long)cr_gp, (unsigned long long)st0.guest_xcr0);
  if (held) kprintf("HVKIT ERRATUM bochs_init_after_sipi count=%llu\n", (unsigned long long)held);
  if (smi) kprintf("HVKIT ERRATUM bochs_smi_blocking_after_sipi exits=%llu\n", (unsigned long long)smi);
  if (core::shadow::enabled()) core::shadow::print_cache_report(st0, "linux");
  core::tally& t = *ls.results;
  result(t, "linux_shell_reached", ls.marked, "tsc=%llu", (unsigned long long)(ls.tsc_mark - ls.tsc_start));
  if (count > 1)
    result(t, "linux_smp_vcpus_started", started == count, "vcpus=%u started_by_guest_sipi=%u", count, started - 1);
  // The hostile run ("hvkit.triple_fault" on the guest's command line): the guest's triple
  // fault must end in a report, with the hypervisor (and the machine) still running.
  if (has_word(ls, "hvkit.triple_fault")) {
    result(t, "linux_triple_fault_contained", str_eq(ls.end_reason, "guest_triple_fault"),
           "end=%s", ls.end_reason);
    summary(t);
  }
  result(t, "linux_clean_shutdown", ls.shutdown, "end=%s", ls.end_reason);
  const vcpu_data& d0 = ls.m ? ls.m->cpus[0].lx : ls.solo;
  result(t, "linux_wp_exits_per_toggle", wp_ok_cpus == count,
         "vcpus=%u vcpus_ok=%u guest_owned_toggles=%llu guest_owned_cr_exits=%llu intercepted_toggles=%llu "
         "intercepted_cr_exits=%llu",
         count, wp_ok_cpus, (unsigned long long)d0.wp_toggles[0], (unsigned long long)d0.wp_exits[0],
         (unsigned long long)d0.wp_toggles[1], (unsigned long long)d0.wp_exits[1]);
  summary(t);
}

}  // namespace hv::lx
