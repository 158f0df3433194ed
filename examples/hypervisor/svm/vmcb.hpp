/// @file
/// @brief The VMCB as the SVM backend of the reference hypervisor uses it: byte offsets of
/// the fields it reads and writes, the intercept bits and the exit codes (AMD APM Vol. 2,
/// Appendix B, Tables B-1 "VMCB Layout, Control Area" and B-2 "VMCB Layout, State Save
/// Area"; Appendix C "SVM Intercept Exit Codes").
///
/// Stand-in until the library's include/svm/ (typed VMCB fields) lands; then this file goes
/// and the backend uses the typed fields.
#pragma once

#include <cstdint>

namespace hv::svm {

// ---- control area (Table B-1) ----------------------------------------------------------
namespace off {
inline constexpr unsigned intercept_cr = 0x000;     ///< 15:0 reads of CR0-15, 31:16 writes
inline constexpr unsigned intercept_dr = 0x004;
inline constexpr unsigned intercept_exceptions = 0x008;
inline constexpr unsigned intercept_misc1 = 0x00C;  ///< INTR ... SHUTDOWN
inline constexpr unsigned intercept_misc2 = 0x010;  ///< VMRUN ... XSETBV
inline constexpr unsigned iopm_base_pa = 0x040;
inline constexpr unsigned msrpm_base_pa = 0x048;
inline constexpr unsigned tsc_offset = 0x050;
inline constexpr unsigned guest_asid = 0x058;       ///< 32 bits
inline constexpr unsigned tlb_control = 0x05C;      ///< 8 bits
inline constexpr unsigned vintr = 0x060;
inline constexpr unsigned interrupt_shadow = 0x068; ///< bit 0
inline constexpr unsigned exitcode = 0x070;
inline constexpr unsigned exitinfo1 = 0x078;
inline constexpr unsigned exitinfo2 = 0x080;
inline constexpr unsigned exitintinfo = 0x088;
inline constexpr unsigned np_enable = 0x090;        ///< bit 0 NP_ENABLE
inline constexpr unsigned eventinj = 0x0A8;
inline constexpr unsigned n_cr3 = 0x0B0;
inline constexpr unsigned clean_bits = 0x0C0;
inline constexpr unsigned next_rip = 0x0C8;
// ---- state save area (Table B-2); a segment is selector(16) attrib(16) limit(32) base(64)
inline constexpr unsigned es = 0x400, cs = 0x410, ss = 0x420, ds = 0x430, fs = 0x440, gs = 0x450;
inline constexpr unsigned gdtr = 0x460, ldtr = 0x470, idtr = 0x480, tr = 0x490;
inline constexpr unsigned cpl = 0x4CB;              ///< 8 bits
inline constexpr unsigned efer = 0x4D0;
inline constexpr unsigned cr4 = 0x548, cr3 = 0x550, cr0 = 0x558, dr7 = 0x560, dr6 = 0x568;
inline constexpr unsigned rflags = 0x570, rip = 0x578, rsp = 0x5D8, rax = 0x5F8;
inline constexpr unsigned star = 0x600, lstar = 0x608, cstar = 0x610, sfmask = 0x618, kernel_gs_base = 0x620;
inline constexpr unsigned sysenter_cs = 0x628, sysenter_esp = 0x630, sysenter_eip = 0x638, cr2 = 0x640;
inline constexpr unsigned g_pat = 0x668;
}  // namespace off

// ---- intercept vectors (Table B-1, offsets 0x00C and 0x010) ------------------------------
namespace icpt1 {
inline constexpr std::uint32_t intr = 1u << 0, nmi = 1u << 1, smi = 1u << 2, init = 1u << 3;
inline constexpr std::uint32_t cr0_sel_write = 1u << 5;  ///< writes of CR0 bits other than TS/MP
inline constexpr std::uint32_t idtr_read = 1u << 6, gdtr_read = 1u << 7, ldtr_read = 1u << 8, tr_read = 1u << 9;
inline constexpr std::uint32_t idtr_write = 1u << 10, gdtr_write = 1u << 11, ldtr_write = 1u << 12, tr_write = 1u << 13;
inline constexpr std::uint32_t cpuid = 1u << 18, hlt = 1u << 24, invlpga = 1u << 26;
inline constexpr std::uint32_t ioio_prot = 1u << 27, msr_prot = 1u << 28, shutdown = 1u << 31;
}  // namespace icpt1
namespace icpt2 {
inline constexpr std::uint32_t vmrun = 1u << 0, vmmcall = 1u << 1, vmload = 1u << 2, vmsave = 1u << 3;
inline constexpr std::uint32_t stgi = 1u << 4, clgi = 1u << 5, skinit = 1u << 6;
}  // namespace icpt2

// ---- exit codes (Appendix C) -------------------------------------------------------------
namespace exit {
inline constexpr std::uint64_t cr0_write = 0x10, cr4_write = 0x14;
inline constexpr std::uint64_t excp_base = 0x40;
inline constexpr std::uint64_t intr = 0x60, nmi = 0x61;
inline constexpr std::uint64_t cr0_sel_write = 0x65;
inline constexpr std::uint64_t idtr_read = 0x66, gdtr_read = 0x67, ldtr_read = 0x68, tr_read = 0x69;
inline constexpr std::uint64_t idtr_write = 0x6A, gdtr_write = 0x6B, ldtr_write = 0x6C, tr_write = 0x6D;
inline constexpr std::uint64_t cpuid = 0x72, hlt = 0x78, invlpga = 0x7A, ioio = 0x7B, msr = 0x7C, shutdown = 0x7F;
inline constexpr std::uint64_t vmrun = 0x80, vmmcall = 0x81, vmload = 0x82, vmsave = 0x83, stgi = 0x84, clgi = 0x85,
                               skinit = 0x86;
inline constexpr std::uint64_t npf = 0x400;
inline constexpr std::uint64_t invalid = ~0ull;  ///< VMEXIT_INVALID: a VMRUN consistency check failed
}  // namespace exit

/// EVENTINJ / EXITINTINFO (APM 15.20, Figure 15-4): vector 7:0, type 10:8, EV 11, V 31,
/// error code 63:32.
inline constexpr std::uint64_t event_valid = 1ull << 31, event_has_error = 1ull << 11;
inline constexpr std::uint64_t event_type_exception = 3;

/// MSRs (APM Vol. 2, 15.30): VM_HSAVE_PA, and EFER.SVME (bit 12).
inline constexpr std::uint32_t msr_vm_hsave_pa = 0xC0010117;
inline constexpr std::uint64_t efer_svme = 1ull << 12;

/// A VMCB in host memory (identity-mapped): 64-bit access to its bytes.
struct vmcb_ref {
  std::uint8_t* p;
  template <class T = std::uint64_t>
  T get(unsigned o) const {
    T v;
    __builtin_memcpy(&v, p + o, sizeof v);
    return v;
  }
  template <class T = std::uint64_t>
  void set(unsigned o, T v) const {
    __builtin_memcpy(p + o, &v, sizeof v);
  }
};

}  // namespace hv::svm
