// SPDX-License-Identifier: MIT
/// @file
/// @brief What the conformance guest's files share (guest.cpp: set-up, checks, events;
/// guest_paging.cpp: the paging and EPT/NPT differentials): the hypercalls, CPU helpers and
/// the guest's page-table root.
#pragma once

#include <cstdint>

#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/msr.hpp>

#include "../hypercall.hpp"
#include "../layout.hpp"

namespace hc = hv::hc;

extern "C" bool g_amd;             ///< an AMD CPU: VMMCALL instead of VMCALL
extern std::uint64_t g_config;     ///< hc::cfg_* from the hypervisor (RDI at entry)
extern std::uint64_t pml4[512];    ///< the guest's PML4 (slot 1: the differentials' test region)
extern std::uint64_t pt_test[512]; ///< the 4 KiB page table of the test region (guest.cpp)
/// The event checks (guest_events.cpp): injected exceptions, and re-injection of an event
/// whose delivery the hypervisor interrupted.
void check_injection();
void check_reinjection();

// The probes and the fault record of guest.cpp's assembly (a probe returns 0, or 0x100 | the
// vector of the exception it took; the handler records the error code and CR2).
extern "C" {
extern volatile std::uint64_t g_fault_error;
extern volatile std::uint64_t g_fault_cr2;
extern volatile std::uint64_t g_fault_count;  ///< exceptions the handler took
extern volatile std::uint64_t g_fault_rip;    ///< RIP of the last one
extern std::uint64_t guest_idt[512];          ///< the guest's IDT (256 16-byte gates)
extern std::uint8_t guest_tss[104], guest_tss_a[104], guest_tss_b[104];  ///< its TSSes
unsigned probe_wrmsr(std::uint32_t msr, std::uint64_t v);
unsigned probe_rdmsr(std::uint32_t msr, std::uint64_t* out);
// The event checks' probes (guest.cpp's assembly, guest_events.cpp's checks).
unsigned probe_mov_cr0(std::uint64_t v);
unsigned probe_mov_cr4(std::uint64_t v);
unsigned probe_vmxon(const void* region);
unsigned probe_vmread(std::uint64_t encoding);
unsigned probe_vmclear(const void* region);
unsigned probe_invept(const void* descriptor, std::uint64_t type);
unsigned probe_ud2();
unsigned probe_int3();
unsigned probe_int80();
extern const std::uint8_t probe_int3_next[], probe_int80_next[];
unsigned probe_write64(std::uint64_t* p, std::uint64_t v);
unsigned probe_read64(const std::uint64_t* p);
unsigned probe_load_fs(std::uint16_t selector);
unsigned probe_fetch(const void* code);
unsigned probe_user(std::uint64_t addr, unsigned kind, std::uint64_t value, std::uint64_t user_rip,
                    std::uint64_t user_rsp);
extern const std::uint8_t user_stub_start[], user_stub_end[];
}

// Identity map of the low 4 GiB with 2 MiB pages, except the 2 MiB region at test_region,
// mapped with 4 KiB pages so single pages can be made read-only.
constexpr std::uint64_t test_region = hv::layout::guest_mem_base + 0x800000;  // 24 MiB
constexpr std::uint64_t user_code_page = test_region + 0x2000;   // user-mode stub (U/S = 1)
constexpr std::uint64_t user_stack_page = test_region + 0x3000;  // its stack (U/S = 1)
constexpr std::uint16_t sel_ldt = 0x60;  // LDT for the implicit-access cases (16 bytes)

// ---- hypercalls ----------------------------------------------------------------------
inline std::uint64_t vmcall(std::uint64_t nr, std::uint64_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0,
                            std::uint64_t d = 0) {
  std::uint64_t ret;
  if (g_amd)
    asm volatile("vmmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d) : "memory");
  else
    asm volatile("vmcall" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d) : "memory");
  return ret;
}
inline std::uint64_t addr(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
inline void log(const char* s) { vmcall(hc::log, addr(s)); }
inline void report(const char* name, bool pass, std::uint64_t a = 0, std::uint64_t b = 0) {
  vmcall(hc::result, addr(name), pass ? hc::result_pass : hc::result_fail, a, b);
}
/// A check of something the CPU executed natively: a deviation is the CPU's erratum.
inline void report_native(const char* name, bool pass, std::uint64_t a = 0, std::uint64_t b = 0) {
  vmcall(hc::result, addr(name), pass ? hc::result_pass : hc::result_erratum, a, b);
}

// ---- CPU helpers -----------------------------------------------------------------------
inline std::uint64_t read_cr0() { std::uint64_t v; asm volatile("mov %%cr0, %0" : "=r"(v)); return v; }
inline std::uint64_t read_cr4() { std::uint64_t v; asm volatile("mov %%cr4, %0" : "=r"(v)); return v; }
inline void write_cr0(std::uint64_t v) { asm volatile("mov %0, %%cr0" ::"r"(v) : "memory"); }
inline void write_cr3(std::uint64_t v) { asm volatile("mov %0, %%cr3" ::"r"(v) : "memory"); }
inline std::uint64_t rdtsc() {
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
struct cpuid_regs {
  std::uint32_t eax, ebx, ecx, edx;
};
inline cpuid_regs cpuid(std::uint32_t leaf, std::uint32_t sub = 0) {
  cpuid_regs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(sub));
  return r;
}

namespace x86 = hvkit::x86;
constexpr std::uint64_t cr0_wp = x86::cr0::wp.raw();
constexpr std::uint64_t pte_p = 1, pte_rw = 2, pte_ps = 0x80;


/// The paging differential (guest_paging.cpp): random page tables, each access done natively.
void check_paging_differential(std::uint64_t cases);
/// The EPT/NPT differential (guest_paging.cpp).
void check_ept_differential(std::uint64_t cases);
