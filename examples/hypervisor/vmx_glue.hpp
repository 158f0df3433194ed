/// @file
/// @brief Minimal VMX glue: VMCS field encodings, control bits, capability MSRs and the
/// VMX instructions, kept in one place so they can be swapped for include/vmx/ when it
/// lands. Encodings: SDM Vol. 3D Appendix B; control bits: SDM Vol. 3C 25.6 / 25.7 / 25.8
/// ("VM-Execution/VM-Exit/VM-Entry Control Fields"); capability MSRs: Appendix A.
#pragma once

#include <cstdint>

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

// ---- VMCS field encodings (SDM Vol. 3D Appendix B) -----------------------------------
enum class field : std::uint32_t {
  // 16-bit
  vpid = 0x0000,
  guest_es_sel = 0x0800, guest_cs_sel = 0x0802, guest_ss_sel = 0x0804, guest_ds_sel = 0x0806,
  guest_fs_sel = 0x0808, guest_gs_sel = 0x080A, guest_ldtr_sel = 0x080C, guest_tr_sel = 0x080E,
  host_es_sel = 0x0C00, host_cs_sel = 0x0C02, host_ss_sel = 0x0C04, host_ds_sel = 0x0C06,
  host_fs_sel = 0x0C08, host_gs_sel = 0x0C0A, host_tr_sel = 0x0C0C,
  // 64-bit
  io_bitmap_a = 0x2000, io_bitmap_b = 0x2002, msr_bitmap = 0x2004,
  exit_msr_store_addr = 0x2006, exit_msr_load_addr = 0x2008, entry_msr_load_addr = 0x200A,
  tsc_offset = 0x2010, ept_pointer = 0x201A,
  guest_physical_address = 0x2400,
  vmcs_link_pointer = 0x2800, guest_debugctl = 0x2802, guest_pat = 0x2804, guest_efer = 0x2806,
  host_pat = 0x2C00, host_efer = 0x2C02,
  // 32-bit
  pin_controls = 0x4000, proc_controls = 0x4002, exception_bitmap = 0x4004,
  pf_error_mask = 0x4006, pf_error_match = 0x4008, cr3_target_count = 0x400A,
  exit_controls = 0x400C, exit_msr_store_count = 0x400E, exit_msr_load_count = 0x4010,
  entry_controls = 0x4012, entry_msr_load_count = 0x4014, entry_interruption_info = 0x4016,
  entry_exception_error_code = 0x4018, entry_instruction_length = 0x401A,
  proc_controls2 = 0x401E,
  vm_instruction_error = 0x4400, exit_reason = 0x4402, exit_interruption_info = 0x4404,
  exit_interruption_error_code = 0x4406, idt_vectoring_info = 0x4408,
  idt_vectoring_error_code = 0x440A, exit_instruction_length = 0x440C,
  exit_instruction_info = 0x440E,
  guest_es_limit = 0x4800, guest_cs_limit = 0x4802, guest_ss_limit = 0x4804, guest_ds_limit = 0x4806,
  guest_fs_limit = 0x4808, guest_gs_limit = 0x480A, guest_ldtr_limit = 0x480C, guest_tr_limit = 0x480E,
  guest_gdtr_limit = 0x4810, guest_idtr_limit = 0x4812,
  guest_es_ar = 0x4814, guest_cs_ar = 0x4816, guest_ss_ar = 0x4818, guest_ds_ar = 0x481A,
  guest_fs_ar = 0x481C, guest_gs_ar = 0x481E, guest_ldtr_ar = 0x4820, guest_tr_ar = 0x4822,
  guest_interruptibility = 0x4824, guest_activity_state = 0x4826, guest_sysenter_cs = 0x482A,
  host_sysenter_cs = 0x4C00,
  // natural width
  cr0_guest_host_mask = 0x6000, cr4_guest_host_mask = 0x6002,
  cr0_read_shadow = 0x6004, cr4_read_shadow = 0x6006,
  exit_qualification = 0x6400, guest_linear_address = 0x640A,
  guest_cr0 = 0x6800, guest_cr3 = 0x6802, guest_cr4 = 0x6804,
  guest_es_base = 0x6806, guest_cs_base = 0x6808, guest_ss_base = 0x680A, guest_ds_base = 0x680C,
  guest_fs_base = 0x680E, guest_gs_base = 0x6810, guest_ldtr_base = 0x6812, guest_tr_base = 0x6814,
  guest_gdtr_base = 0x6816, guest_idtr_base = 0x6818, guest_dr7 = 0x681A, guest_rsp = 0x681C,
  guest_rip = 0x681E, guest_rflags = 0x6820, guest_pending_dbg = 0x6822,
  guest_sysenter_esp = 0x6824, guest_sysenter_eip = 0x6826,
  host_cr0 = 0x6C00, host_cr3 = 0x6C02, host_cr4 = 0x6C04, host_fs_base = 0x6C06,
  host_gs_base = 0x6C08, host_tr_base = 0x6C0A, host_gdtr_base = 0x6C0C, host_idtr_base = 0x6C0E,
  host_sysenter_esp = 0x6C10, host_sysenter_eip = 0x6C12, host_rsp = 0x6C14, host_rip = 0x6C16,
};

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

// ---- instructions -------------------------------------------------------------------
/// Result of a VMX instruction: RFLAGS.CF = VMfailInvalid, ZF = VMfailValid (SDM Vol. 3C 31.2).
enum class vm_status : std::uint8_t { ok = 0, fail_invalid = 1, fail_valid = 2 };

inline vm_status flags_to_status(bool cf, bool zf) {
  return cf ? vm_status::fail_invalid : (zf ? vm_status::fail_valid : vm_status::ok);
}

inline vm_status vmxon(std::uint64_t phys) {
  bool cf, zf;
  asm volatile("vmxon %2" : "=@ccc"(cf), "=@ccz"(zf) : "m"(phys) : "memory", "cc");
  return flags_to_status(cf, zf);
}
inline vm_status vmclear(std::uint64_t phys) {
  bool cf, zf;
  asm volatile("vmclear %2" : "=@ccc"(cf), "=@ccz"(zf) : "m"(phys) : "memory", "cc");
  return flags_to_status(cf, zf);
}
inline vm_status vmptrld(std::uint64_t phys) {
  bool cf, zf;
  asm volatile("vmptrld %2" : "=@ccc"(cf), "=@ccz"(zf) : "m"(phys) : "memory", "cc");
  return flags_to_status(cf, zf);
}
inline vm_status vmwrite_raw(field f, std::uint64_t v) {
  bool cf, zf;
  asm volatile("vmwrite %3, %2"
               : "=@ccc"(cf), "=@ccz"(zf)
               : "r"(static_cast<std::uint64_t>(f)), "rm"(v)
               : "memory", "cc");
  return flags_to_status(cf, zf);
}
inline std::uint64_t vmread(field f) {
  std::uint64_t v = 0;
  asm volatile("vmread %1, %0" : "=rm"(v) : "r"(static_cast<std::uint64_t>(f)) : "cc");
  return v;
}
inline void invept_all_context() {
  struct {
    std::uint64_t eptp, reserved;
  } desc{0, 0};
  asm volatile("invept %0, %1" ::"m"(desc), "r"(2ull) : "memory", "cc");
}

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
