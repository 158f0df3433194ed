/// @file
/// @brief VMX glue: what the example still needs beyond the committed include/vmx/ headers
/// (fields, hardware backend): control bits and their adjustment, capability MSR numbers,
/// exit reasons, EPT entry bits. Each block goes when its vmx/ header lands. Control bits:
/// SDM Vol. 3C 25.6 / 25.7 / 25.8; capability MSRs: Vol. 3D Appendix A; exit reasons:
/// Appendix C.
#pragma once

#include <cstdint>

#include <vmx/backend.hpp>
#include <vmx/fields.hpp>
#include <vmx/hardware.hpp>

namespace hv::vmx {

// ---- MSRs ---------------------------------------------------------------------------
namespace msr {
inline constexpr std::uint32_t feature_control = 0x3A;
inline constexpr std::uint32_t pred_cmd = 0x49;
inline constexpr std::uint32_t sysenter_cs = 0x174, sysenter_esp = 0x175, sysenter_eip = 0x176;
inline constexpr std::uint32_t pat = 0x277;
inline constexpr std::uint32_t vmx_basic = 0x480;
inline constexpr std::uint32_t vmx_pinbased = 0x481, vmx_procbased = 0x482, vmx_exit = 0x483, vmx_entry = 0x484;
inline constexpr std::uint32_t vmx_misc = 0x485;
inline constexpr std::uint32_t vmx_cr0_fixed0 = 0x486, vmx_cr0_fixed1 = 0x487;
inline constexpr std::uint32_t vmx_cr4_fixed0 = 0x488, vmx_cr4_fixed1 = 0x489;
inline constexpr std::uint32_t vmx_vmcs_enum = 0x48A, vmx_procbased2 = 0x48B, vmx_ept_vpid_cap = 0x48C;
inline constexpr std::uint32_t vmx_true_pinbased = 0x48D, vmx_true_procbased = 0x48E;
inline constexpr std::uint32_t vmx_true_exit = 0x48F, vmx_true_entry = 0x490;
inline constexpr std::uint32_t efer = 0xC0000080, fs_base = 0xC0000100, gs_base = 0xC0000101;
inline constexpr std::uint32_t kernel_gs_base = 0xC0000102, star = 0xC0000081, lstar = 0xC0000082;
inline constexpr std::uint32_t cstar = 0xC0000083, fmask = 0xC0000084, tsc_aux = 0xC0000103;
}  // namespace msr

inline constexpr std::uint64_t feature_control_lock = 1u << 0;
inline constexpr std::uint64_t feature_control_vmxon_outside_smx = 1u << 2;
/// IA32_VMX_BASIC bit 55: the TRUE_* control MSRs exist (SDM Vol. 3D A.1).
inline constexpr std::uint64_t basic_true_ctls = 1ull << 55;

// ---- VMCS access: hvkit::vmx (typed fields, hardware VMREAD/VMWRITE backend) -------
namespace fields = hvkit::vmx::fields;

/// VMREAD of a typed field, widened to 64 bits for the arithmetic in the exit handlers.
/// A failing VMREAD (no current VMCS, bad encoding) reads as 0; the handlers only run
/// with a current VMCS, and every encoding is checked at compile time by vmx/fields.hpp.
template <std::uint32_t E>
inline std::uint64_t vmread(hvkit::vmx::field<E> f) {
  hvkit::vmx::hw::current_vmcs vmcs;
  auto r = hvkit::vmx::vmread(vmcs, f);
  return r.has_value() ? static_cast<std::uint64_t>(r.value()) : 0;
}

// ---- control bits -------------------------------------------------------------------
namespace pin {
inline constexpr std::uint32_t external_interrupt_exiting = 1u << 0, nmi_exiting = 1u << 3;
}
namespace proc {
inline constexpr std::uint32_t hlt_exiting = 1u << 7, invlpg_exiting = 1u << 9;
inline constexpr std::uint32_t cr3_load_exiting = 1u << 15, cr3_store_exiting = 1u << 16;
inline constexpr std::uint32_t unconditional_io_exiting = 1u << 24, use_msr_bitmaps = 1u << 28;
inline constexpr std::uint32_t activate_secondary = 1u << 31;
}  // namespace proc
namespace proc2 {
inline constexpr std::uint32_t enable_ept = 1u << 1, descriptor_table_exiting = 1u << 2;
inline constexpr std::uint32_t enable_rdtscp = 1u << 3, enable_vpid = 1u << 5;
inline constexpr std::uint32_t unrestricted_guest = 1u << 7, enable_invpcid = 1u << 12;
inline constexpr std::uint32_t enable_xsaves = 1u << 20;
}  // namespace proc2
namespace exit_ctl {
inline constexpr std::uint32_t host_address_space_size = 1u << 9, ack_interrupt_on_exit = 1u << 15;
inline constexpr std::uint32_t save_pat = 1u << 18, load_pat = 1u << 19;
inline constexpr std::uint32_t save_efer = 1u << 20, load_efer = 1u << 21;
}  // namespace exit_ctl
namespace entry_ctl {
inline constexpr std::uint32_t ia32e_mode_guest = 1u << 9, load_pat = 1u << 14, load_efer = 1u << 15;
}

/// Adjusts wanted control bits to a capability MSR: the low half holds the bits that must
/// be 1, the high half the bits that may be 1 (SDM Vol. 3D A.3 to A.5).
constexpr std::uint32_t adjust_controls(std::uint32_t wanted, std::uint64_t cap) {
  return (wanted | static_cast<std::uint32_t>(cap)) & static_cast<std::uint32_t>(cap >> 32);
}

// ---- exit reasons (SDM Vol. 3D Appendix C) -------------------------------------------
namespace reason {
inline constexpr std::uint32_t exception_or_nmi = 0, external_interrupt = 1, triple_fault = 2;
inline constexpr std::uint32_t init_signal = 3, cpuid = 10, hlt = 12, invlpg = 14, rdtsc = 16;
inline constexpr std::uint32_t vmcall = 18, cr_access = 28, mov_dr = 29, io = 30, rdmsr = 31;
inline constexpr std::uint32_t wrmsr = 32, invalid_guest_state = 33, msr_loading = 34;
inline constexpr std::uint32_t mwait = 36, mtf = 37, monitor = 39, pause = 40;
inline constexpr std::uint32_t machine_check = 41, gdtr_idtr = 46, ldtr_tr = 47;
inline constexpr std::uint32_t ept_violation = 48, ept_misconfig = 49, invept = 50, rdtscp = 51;
inline constexpr std::uint32_t preemption_timer = 52, invvpid = 53, wbinvd = 54, xsetbv = 55;
inline constexpr std::uint32_t count = 80;
inline constexpr std::uint32_t entry_failure_bit = 1u << 31;
}  // namespace reason
const char* reason_name(std::uint32_t basic_reason);

/// VM-entry interruption-information field (SDM Vol. 3C 25.8.3).
inline constexpr std::uint32_t intr_info_valid = 1u << 31, intr_info_deliver_error_code = 1u << 11;
inline constexpr std::uint32_t intr_type_hw_exception = 3u << 8;

// ---- EPT (SDM Vol. 3C 29.3) ----------------------------------------------------------
namespace ept {
inline constexpr std::uint64_t read = 1, write = 2, exec = 4, rwx = 7;
inline constexpr std::uint64_t memtype_wb = 6ull << 3, large_page = 1ull << 7;
/// EPTP: memory type WB, page-walk length 4 (encoded as 3) (SDM Vol. 3C 25.6.11).
inline constexpr std::uint64_t eptp_wb_4level = 6 | (3 << 3);
}  // namespace ept
/// IA32_VMX_EPT_VPID_CAP bits (SDM Vol. 3D A.10).
namespace ept_cap {
inline constexpr std::uint64_t walk_4 = 1ull << 6, wb = 1ull << 14, pde_2m = 1ull << 16;
inline constexpr std::uint64_t invept = 1ull << 20, invept_all = 1ull << 26;
}

// ---- guest registers saved by vmx_exit_stub (boot.cpp) -------------------------------
struct guest_regs {
  std::uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15;
};
static_assert(sizeof(guest_regs) == 15 * 8, "boot.cpp's vmx_enter/vmx_exit_stub use these offsets");

// ---- plain x86 helpers ----------------------------------------------------------------
inline std::uint64_t rdmsr(std::uint32_t m) {
  std::uint32_t lo, hi;
  asm volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(m));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}
inline void wrmsr(std::uint32_t m, std::uint64_t v) {
  asm volatile("wrmsr" ::"c"(m), "a"(static_cast<std::uint32_t>(v)), "d"(static_cast<std::uint32_t>(v >> 32))
               : "memory");
}
struct cpuid_regs {
  std::uint32_t eax, ebx, ecx, edx;
};
inline cpuid_regs cpuid(std::uint32_t leaf, std::uint32_t subleaf = 0) {
  cpuid_regs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(subleaf));
  return r;
}
inline std::uint64_t read_cr0() { std::uint64_t v; asm volatile("mov %%cr0, %0" : "=r"(v)); return v; }
inline std::uint64_t read_cr3() { std::uint64_t v; asm volatile("mov %%cr3, %0" : "=r"(v)); return v; }
inline std::uint64_t read_cr4() { std::uint64_t v; asm volatile("mov %%cr4, %0" : "=r"(v)); return v; }
inline void write_cr0(std::uint64_t v) { asm volatile("mov %0, %%cr0" ::"r"(v) : "memory"); }
inline void write_cr4(std::uint64_t v) { asm volatile("mov %0, %%cr4" ::"r"(v) : "memory"); }
inline std::uint64_t rdtsc() {
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

}  // namespace hv::vmx
