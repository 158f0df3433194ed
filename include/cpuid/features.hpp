// SPDX-License-Identifier: MIT
/// @file
/// @brief Named CPUID feature bits, grouped in feature words, and `feature_set`.
///
/// A feature is a (word, bit) pair; a word is one register of one (leaf, subleaf). The bit
/// numbers are those of the SDM Vol. 2A CPUID tables (Intel) and the AMD APM vol. 3
/// Appendix E (AMD); `named_features` lists each with its name, which is the Linux
/// /proc/cpuinfo name where the kernel shows the flag.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "leaf.hpp"

namespace hvkit::cpuid {

/// The feature words hvkit names. `kvm_features` and `kvm_hints` live in the KVM paravirt
/// leaf base+1, whose leaf number depends on the configurable base.
enum class word : std::uint8_t {
  leaf1_ecx,
  leaf1_edx,
  leaf6_eax,
  leaf7_0_ebx,
  leaf7_0_ecx,
  leaf7_0_edx,
  leaf7_1_eax,
  leaf7_1_edx,
  leaf7_2_edx,
  leafd_1_eax,
  leaf14_0_ebx,
  leaf19_ebx,
  ext1_ecx,   ///< 0x80000001 ECX
  ext1_edx,   ///< 0x80000001 EDX
  ext7_edx,   ///< 0x80000007 EDX
  ext8_ebx,   ///< 0x80000008 EBX
  ext1f_eax,  ///< 0x8000001F EAX
  ext21_eax,  ///< 0x80000021 EAX
  kvm_features,  ///< KVM paravirt leaf base+1, EAX (stable features)
  kvm_hints,     ///< KVM paravirt leaf base+1, EDX (hints, may change across migration)
};
inline constexpr std::size_t word_count = 20;

/// Where a word lives. For the KVM words `leaf` is the offset from the paravirt base.
struct word_location {
  std::uint32_t leaf;
  std::uint32_t subleaf;
  reg r;
  bool hypervisor_relative;
};

inline constexpr std::array<word_location, word_count> word_locations{{
    {0x1, 0, reg::ecx, false},
    {0x1, 0, reg::edx, false},
    {0x6, 0, reg::eax, false},
    {0x7, 0, reg::ebx, false},
    {0x7, 0, reg::ecx, false},
    {0x7, 0, reg::edx, false},
    {0x7, 1, reg::eax, false},
    {0x7, 1, reg::edx, false},
    {0x7, 2, reg::edx, false},
    {0xd, 1, reg::eax, false},
    {0x14, 0, reg::ebx, false},
    {0x19, 0, reg::ebx, false},
    {0x80000001, 0, reg::ecx, false},
    {0x80000001, 0, reg::edx, false},
    {0x80000007, 0, reg::edx, false},
    {0x80000008, 0, reg::ebx, false},
    {0x8000001f, 0, reg::eax, false},
    {0x80000021, 0, reg::eax, false},
    {0x1, 0, reg::eax, true},
    {0x1, 0, reg::edx, true},
}};

/// The location of word `w`; `hv_base` is the KVM paravirt base (0x40000000 or 0x40000100).
[[nodiscard]] constexpr word_location locate(word w, std::uint32_t hv_base = leaves::hypervisor_base) noexcept {
  word_location l = word_locations[static_cast<std::size_t>(w)];
  if (l.hypervisor_relative) l.leaf += hv_base;
  return l;
}

/// One feature bit: a word and a bit number in it.
struct feature {
  word w;
  std::uint8_t bit;
  [[nodiscard]] constexpr std::uint32_t mask() const noexcept { return std::uint32_t{1} << bit; }
  friend constexpr bool operator==(const feature&, const feature&) noexcept = default;
};

/// A set of features: one 32-bit mask per word.
class feature_set {
 public:
  constexpr feature_set() noexcept = default;
  constexpr feature_set(std::initializer_list<feature> fs) noexcept {
    for (const feature& f : fs) words_[static_cast<std::size_t>(f.w)] |= f.mask();
  }
  /// The set with every bit of every word.
  [[nodiscard]] static constexpr feature_set all() noexcept {
    feature_set s;
    for (auto& w : s.words_) w = ~std::uint32_t{0};
    return s;
  }
  [[nodiscard]] constexpr bool test(feature f) const noexcept { return (words_[static_cast<std::size_t>(f.w)] & f.mask()) != 0; }
  // The std::bitset convention of x86::flags: set/reset change the set and return it,
  // with/without return a changed copy.
  /// Sets `f` (or clears it if `on` is false); returns this set.
  constexpr feature_set& set(feature f, bool on = true) noexcept {
    auto& w = words_[static_cast<std::size_t>(f.w)];
    w = on ? (w | f.mask()) : (w & ~f.mask());
    return *this;
  }
  /// Clears `f`; returns this set.
  constexpr feature_set& reset(feature f) noexcept { return set(f, false); }
  /// A copy with `f` set (or cleared if `on` is false).
  [[nodiscard]] constexpr feature_set with(feature f, bool on = true) const noexcept {
    feature_set c = *this;
    c.set(f, on);
    return c;
  }
  /// A copy with `f` clear.
  [[nodiscard]] constexpr feature_set without(feature f) const noexcept { return with(f, false); }
  [[nodiscard]] constexpr std::uint32_t get(word w) const noexcept { return words_[static_cast<std::size_t>(w)]; }
  constexpr void put(word w, std::uint32_t v) noexcept { words_[static_cast<std::size_t>(w)] = v; }
  [[nodiscard]] constexpr bool none() const noexcept {
    for (auto w : words_)
      if (w != 0) return false;
    return true;
  }

  constexpr feature_set& operator&=(const feature_set& b) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) words_[i] &= b.words_[i];
    return *this;
  }
  constexpr feature_set& operator|=(const feature_set& b) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) words_[i] |= b.words_[i];
    return *this;
  }
  constexpr feature_set& operator^=(const feature_set& b) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) words_[i] ^= b.words_[i];
    return *this;
  }

  [[nodiscard]] friend constexpr feature_set operator&(feature_set a, const feature_set& b) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) a.words_[i] &= b.words_[i];
    return a;
  }
  [[nodiscard]] friend constexpr feature_set operator|(feature_set a, const feature_set& b) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) a.words_[i] |= b.words_[i];
    return a;
  }
  [[nodiscard]] friend constexpr feature_set operator^(feature_set a, const feature_set& b) noexcept { return a ^= b; }
  [[nodiscard]] friend constexpr feature_set operator~(feature_set a) noexcept {
    for (auto& w : a.words_) w = ~w;
    return a;
  }
  friend constexpr bool operator==(const feature_set&, const feature_set&) noexcept = default;

 private:
  std::array<std::uint32_t, word_count> words_{};
};

/// Named features. The comment gives the bit as LEAF[.SUBLEAF]:REG[bit].
namespace feat {
// CPUID.1:ECX (SDM Vol. 2A, Table 3-10)
inline constexpr feature sse3{word::leaf1_ecx, 0};
inline constexpr feature pclmulqdq{word::leaf1_ecx, 1};
inline constexpr feature dtes64{word::leaf1_ecx, 2};
inline constexpr feature monitor{word::leaf1_ecx, 3};
inline constexpr feature ds_cpl{word::leaf1_ecx, 4};
inline constexpr feature vmx{word::leaf1_ecx, 5};
inline constexpr feature smx{word::leaf1_ecx, 6};
inline constexpr feature est{word::leaf1_ecx, 7};
inline constexpr feature tm2{word::leaf1_ecx, 8};
inline constexpr feature ssse3{word::leaf1_ecx, 9};
inline constexpr feature cnxt_id{word::leaf1_ecx, 10};
inline constexpr feature sdbg{word::leaf1_ecx, 11};
inline constexpr feature fma{word::leaf1_ecx, 12};
inline constexpr feature cx16{word::leaf1_ecx, 13};
inline constexpr feature xtpr{word::leaf1_ecx, 14};
inline constexpr feature pdcm{word::leaf1_ecx, 15};
inline constexpr feature pcid{word::leaf1_ecx, 17};
inline constexpr feature dca{word::leaf1_ecx, 18};
inline constexpr feature sse4_1{word::leaf1_ecx, 19};
inline constexpr feature sse4_2{word::leaf1_ecx, 20};
inline constexpr feature x2apic{word::leaf1_ecx, 21};
inline constexpr feature movbe{word::leaf1_ecx, 22};
inline constexpr feature popcnt{word::leaf1_ecx, 23};
inline constexpr feature tsc_deadline{word::leaf1_ecx, 24};
inline constexpr feature aes{word::leaf1_ecx, 25};
inline constexpr feature xsave{word::leaf1_ecx, 26};
inline constexpr feature osxsave{word::leaf1_ecx, 27};  ///< dynamic: mirrors CR4.OSXSAVE
inline constexpr feature avx{word::leaf1_ecx, 28};
inline constexpr feature f16c{word::leaf1_ecx, 29};
inline constexpr feature rdrand{word::leaf1_ecx, 30};
inline constexpr feature hypervisor{word::leaf1_ecx, 31};  ///< 0 on bare metal; set by hypervisors
// CPUID.1:EDX (SDM Vol. 2A, Table 3-11)
inline constexpr feature fpu{word::leaf1_edx, 0};
inline constexpr feature vme{word::leaf1_edx, 1};
inline constexpr feature de{word::leaf1_edx, 2};
inline constexpr feature pse{word::leaf1_edx, 3};
inline constexpr feature tsc{word::leaf1_edx, 4};
inline constexpr feature msr{word::leaf1_edx, 5};
inline constexpr feature pae{word::leaf1_edx, 6};
inline constexpr feature mce{word::leaf1_edx, 7};
inline constexpr feature cx8{word::leaf1_edx, 8};
inline constexpr feature apic{word::leaf1_edx, 9};
inline constexpr feature sep{word::leaf1_edx, 11};
inline constexpr feature mtrr{word::leaf1_edx, 12};
inline constexpr feature pge{word::leaf1_edx, 13};
inline constexpr feature mca{word::leaf1_edx, 14};
inline constexpr feature cmov{word::leaf1_edx, 15};
inline constexpr feature pat{word::leaf1_edx, 16};
inline constexpr feature pse36{word::leaf1_edx, 17};
inline constexpr feature psn{word::leaf1_edx, 18};
inline constexpr feature clflush{word::leaf1_edx, 19};
inline constexpr feature ds{word::leaf1_edx, 21};
inline constexpr feature acpi{word::leaf1_edx, 22};
inline constexpr feature mmx{word::leaf1_edx, 23};
inline constexpr feature fxsr{word::leaf1_edx, 24};
inline constexpr feature sse{word::leaf1_edx, 25};
inline constexpr feature sse2{word::leaf1_edx, 26};
inline constexpr feature ss{word::leaf1_edx, 27};
inline constexpr feature htt{word::leaf1_edx, 28};
inline constexpr feature tm{word::leaf1_edx, 29};
inline constexpr feature pbe{word::leaf1_edx, 31};
// CPUID.6:EAX (thermal and power management)
inline constexpr feature dtherm{word::leaf6_eax, 0};
inline constexpr feature turbo{word::leaf6_eax, 1};
inline constexpr feature arat{word::leaf6_eax, 2};  ///< APIC timer always running
inline constexpr feature pln{word::leaf6_eax, 4};
inline constexpr feature pts{word::leaf6_eax, 6};
inline constexpr feature hwp{word::leaf6_eax, 7};
inline constexpr feature hwp_notify{word::leaf6_eax, 8};
inline constexpr feature hwp_act_window{word::leaf6_eax, 9};
inline constexpr feature hwp_epp{word::leaf6_eax, 10};
inline constexpr feature hwp_pkg_req{word::leaf6_eax, 11};
inline constexpr feature hfi{word::leaf6_eax, 19};
// CPUID.7.0:EBX
inline constexpr feature fsgsbase{word::leaf7_0_ebx, 0};
inline constexpr feature tsc_adjust{word::leaf7_0_ebx, 1};
inline constexpr feature sgx{word::leaf7_0_ebx, 2};
inline constexpr feature bmi1{word::leaf7_0_ebx, 3};
inline constexpr feature hle{word::leaf7_0_ebx, 4};
inline constexpr feature avx2{word::leaf7_0_ebx, 5};
inline constexpr feature fdp_excptn_only{word::leaf7_0_ebx, 6};
inline constexpr feature smep{word::leaf7_0_ebx, 7};
inline constexpr feature bmi2{word::leaf7_0_ebx, 8};
inline constexpr feature erms{word::leaf7_0_ebx, 9};
inline constexpr feature invpcid{word::leaf7_0_ebx, 10};
inline constexpr feature rtm{word::leaf7_0_ebx, 11};
inline constexpr feature rdt_m{word::leaf7_0_ebx, 12};
inline constexpr feature zero_fcs_fds{word::leaf7_0_ebx, 13};
inline constexpr feature mpx{word::leaf7_0_ebx, 14};
inline constexpr feature rdt_a{word::leaf7_0_ebx, 15};
inline constexpr feature avx512f{word::leaf7_0_ebx, 16};
inline constexpr feature avx512dq{word::leaf7_0_ebx, 17};
inline constexpr feature rdseed{word::leaf7_0_ebx, 18};
inline constexpr feature adx{word::leaf7_0_ebx, 19};
inline constexpr feature smap{word::leaf7_0_ebx, 20};
inline constexpr feature avx512ifma{word::leaf7_0_ebx, 21};
inline constexpr feature clflushopt{word::leaf7_0_ebx, 23};
inline constexpr feature clwb{word::leaf7_0_ebx, 24};
inline constexpr feature intel_pt{word::leaf7_0_ebx, 25};
inline constexpr feature avx512pf{word::leaf7_0_ebx, 26};
inline constexpr feature avx512er{word::leaf7_0_ebx, 27};
inline constexpr feature avx512cd{word::leaf7_0_ebx, 28};
inline constexpr feature sha_ni{word::leaf7_0_ebx, 29};
inline constexpr feature avx512bw{word::leaf7_0_ebx, 30};
inline constexpr feature avx512vl{word::leaf7_0_ebx, 31};
// CPUID.7.0:ECX
inline constexpr feature prefetchwt1{word::leaf7_0_ecx, 0};
inline constexpr feature avx512vbmi{word::leaf7_0_ecx, 1};
inline constexpr feature umip{word::leaf7_0_ecx, 2};
inline constexpr feature pku{word::leaf7_0_ecx, 3};
inline constexpr feature ospke{word::leaf7_0_ecx, 4};  ///< dynamic: mirrors CR4.PKE
inline constexpr feature waitpkg{word::leaf7_0_ecx, 5};
inline constexpr feature avx512_vbmi2{word::leaf7_0_ecx, 6};
inline constexpr feature shstk{word::leaf7_0_ecx, 7};  ///< CET shadow stack
inline constexpr feature gfni{word::leaf7_0_ecx, 8};
inline constexpr feature vaes{word::leaf7_0_ecx, 9};
inline constexpr feature vpclmulqdq{word::leaf7_0_ecx, 10};
inline constexpr feature avx512_vnni{word::leaf7_0_ecx, 11};
inline constexpr feature avx512_bitalg{word::leaf7_0_ecx, 12};
inline constexpr feature tme{word::leaf7_0_ecx, 13};
inline constexpr feature avx512_vpopcntdq{word::leaf7_0_ecx, 14};
inline constexpr feature la57{word::leaf7_0_ecx, 16};
inline constexpr feature rdpid{word::leaf7_0_ecx, 22};
inline constexpr feature kl{word::leaf7_0_ecx, 23};  ///< Key Locker
inline constexpr feature bus_lock_detect{word::leaf7_0_ecx, 24};
inline constexpr feature cldemote{word::leaf7_0_ecx, 25};
inline constexpr feature movdiri{word::leaf7_0_ecx, 27};
inline constexpr feature movdir64b{word::leaf7_0_ecx, 28};
inline constexpr feature enqcmd{word::leaf7_0_ecx, 29};
inline constexpr feature sgx_lc{word::leaf7_0_ecx, 30};
inline constexpr feature pks{word::leaf7_0_ecx, 31};
// CPUID.7.0:EDX
inline constexpr feature avx512_4vnniw{word::leaf7_0_edx, 2};
inline constexpr feature avx512_4fmaps{word::leaf7_0_edx, 3};
inline constexpr feature fsrm{word::leaf7_0_edx, 4};
inline constexpr feature uintr{word::leaf7_0_edx, 5};
inline constexpr feature avx512_vp2intersect{word::leaf7_0_edx, 8};
inline constexpr feature srbds_ctrl{word::leaf7_0_edx, 9};
inline constexpr feature md_clear{word::leaf7_0_edx, 10};
inline constexpr feature rtm_always_abort{word::leaf7_0_edx, 11};
inline constexpr feature tsx_force_abort{word::leaf7_0_edx, 13};
inline constexpr feature serialize{word::leaf7_0_edx, 14};
inline constexpr feature hybrid_cpu{word::leaf7_0_edx, 15};
inline constexpr feature tsxldtrk{word::leaf7_0_edx, 16};
inline constexpr feature pconfig{word::leaf7_0_edx, 18};
inline constexpr feature arch_lbr{word::leaf7_0_edx, 19};
inline constexpr feature ibt{word::leaf7_0_edx, 20};  ///< CET indirect-branch tracking
inline constexpr feature amx_bf16{word::leaf7_0_edx, 22};
inline constexpr feature avx512_fp16{word::leaf7_0_edx, 23};
inline constexpr feature amx_tile{word::leaf7_0_edx, 24};
inline constexpr feature amx_int8{word::leaf7_0_edx, 25};
inline constexpr feature spec_ctrl{word::leaf7_0_edx, 26};  ///< IBRS and IBPB (IA32_SPEC_CTRL, IA32_PRED_CMD)
inline constexpr feature intel_stibp{word::leaf7_0_edx, 27};
inline constexpr feature flush_l1d{word::leaf7_0_edx, 28};  ///< IA32_FLUSH_CMD
inline constexpr feature arch_capabilities{word::leaf7_0_edx, 29};  ///< IA32_ARCH_CAPABILITIES
inline constexpr feature core_capabilities{word::leaf7_0_edx, 30};
inline constexpr feature spec_ctrl_ssbd{word::leaf7_0_edx, 31};
// CPUID.7.1:EAX
inline constexpr feature sha512{word::leaf7_1_eax, 0};
inline constexpr feature sm3{word::leaf7_1_eax, 1};
inline constexpr feature sm4{word::leaf7_1_eax, 2};
inline constexpr feature avx_vnni{word::leaf7_1_eax, 4};
inline constexpr feature avx512_bf16{word::leaf7_1_eax, 5};
inline constexpr feature cmpccxadd{word::leaf7_1_eax, 7};
inline constexpr feature arch_perfmon_ext{word::leaf7_1_eax, 8};
inline constexpr feature fzrm{word::leaf7_1_eax, 10};
inline constexpr feature fsrs{word::leaf7_1_eax, 11};
inline constexpr feature fsrc{word::leaf7_1_eax, 12};
inline constexpr feature fred{word::leaf7_1_eax, 17};
inline constexpr feature lkgs{word::leaf7_1_eax, 18};
inline constexpr feature amx_fp16{word::leaf7_1_eax, 21};
inline constexpr feature avx_ifma{word::leaf7_1_eax, 23};
inline constexpr feature lam{word::leaf7_1_eax, 26};
// CPUID.7.1:EDX
inline constexpr feature avx_vnni_int8{word::leaf7_1_edx, 4};
inline constexpr feature avx_ne_convert{word::leaf7_1_edx, 5};
inline constexpr feature amx_complex{word::leaf7_1_edx, 8};
inline constexpr feature avx_vnni_int16{word::leaf7_1_edx, 10};
inline constexpr feature prefetchiti{word::leaf7_1_edx, 14};
inline constexpr feature avx10{word::leaf7_1_edx, 19};
inline constexpr feature apx_f{word::leaf7_1_edx, 21};
// CPUID.7.2:EDX (speculation controls in IA32_SPEC_CTRL)
inline constexpr feature psfd{word::leaf7_2_edx, 0};        ///< SPEC_CTRL bit 7
inline constexpr feature ipred_ctrl{word::leaf7_2_edx, 1};  ///< SPEC_CTRL bits 3, 4
inline constexpr feature rrsba_ctrl{word::leaf7_2_edx, 2};  ///< SPEC_CTRL bits 5, 6
inline constexpr feature ddpd_u{word::leaf7_2_edx, 3};      ///< SPEC_CTRL bit 8
inline constexpr feature bhi_ctrl{word::leaf7_2_edx, 4};    ///< SPEC_CTRL bit 10
inline constexpr feature mcdt_no{word::leaf7_2_edx, 5};
// CPUID.0xD.1:EAX (SDM Vol. 1, 13.2)
inline constexpr feature xsaveopt{word::leafd_1_eax, 0};
inline constexpr feature xsavec{word::leafd_1_eax, 1};
inline constexpr feature xgetbv1{word::leafd_1_eax, 2};
inline constexpr feature xsaves{word::leafd_1_eax, 3};
inline constexpr feature xfd{word::leafd_1_eax, 4};
// CPUID.0x14.0:EBX (processor trace)
inline constexpr feature pt_cr3_filter{word::leaf14_0_ebx, 0};
inline constexpr feature pt_psb_cyc{word::leaf14_0_ebx, 1};
inline constexpr feature pt_ip_filter{word::leaf14_0_ebx, 2};
inline constexpr feature pt_mtc{word::leaf14_0_ebx, 3};
inline constexpr feature pt_ptwrite{word::leaf14_0_ebx, 4};
inline constexpr feature pt_power_event{word::leaf14_0_ebx, 5};
// CPUID.0x19:EBX (Key Locker)
inline constexpr feature aeskle{word::leaf19_ebx, 0};
inline constexpr feature wide_kl{word::leaf19_ebx, 2};
inline constexpr feature kl_iwkey_backup{word::leaf19_ebx, 4};
// CPUID.0x80000001:ECX (AMD APM vol. 3, E.3.6)
inline constexpr feature lahf_lm{word::ext1_ecx, 0};
inline constexpr feature cmp_legacy{word::ext1_ecx, 1};
inline constexpr feature svm{word::ext1_ecx, 2};
inline constexpr feature extapic{word::ext1_ecx, 3};
inline constexpr feature cr8_legacy{word::ext1_ecx, 4};
inline constexpr feature abm{word::ext1_ecx, 5};
inline constexpr feature sse4a{word::ext1_ecx, 6};
inline constexpr feature misalignsse{word::ext1_ecx, 7};
inline constexpr feature prefetchw{word::ext1_ecx, 8};  ///< /proc/cpuinfo: 3dnowprefetch
inline constexpr feature osvw{word::ext1_ecx, 9};
inline constexpr feature ibs{word::ext1_ecx, 10};
inline constexpr feature xop{word::ext1_ecx, 11};
inline constexpr feature skinit{word::ext1_ecx, 12};
inline constexpr feature wdt{word::ext1_ecx, 13};
inline constexpr feature lwp{word::ext1_ecx, 15};
inline constexpr feature fma4{word::ext1_ecx, 16};
inline constexpr feature tce{word::ext1_ecx, 17};
inline constexpr feature nodeid_msr{word::ext1_ecx, 19};
inline constexpr feature tbm{word::ext1_ecx, 21};
inline constexpr feature topoext{word::ext1_ecx, 22};
inline constexpr feature perfctr_core{word::ext1_ecx, 23};
inline constexpr feature perfctr_nb{word::ext1_ecx, 24};
inline constexpr feature bpext{word::ext1_ecx, 26};
inline constexpr feature ptsc{word::ext1_ecx, 27};
inline constexpr feature perfctr_llc{word::ext1_ecx, 28};
inline constexpr feature mwaitx{word::ext1_ecx, 29};
// CPUID.0x80000001:EDX
inline constexpr feature syscall{word::ext1_edx, 11};
inline constexpr feature mp{word::ext1_edx, 19};
inline constexpr feature nx{word::ext1_edx, 20};
inline constexpr feature mmxext{word::ext1_edx, 22};
inline constexpr feature fxsr_opt{word::ext1_edx, 25};
inline constexpr feature pdpe1gb{word::ext1_edx, 26};
inline constexpr feature rdtscp{word::ext1_edx, 27};
inline constexpr feature lm{word::ext1_edx, 29};
inline constexpr feature amd_3dnowext{word::ext1_edx, 30};
inline constexpr feature amd_3dnow{word::ext1_edx, 31};
// CPUID.0x80000007:EDX
inline constexpr feature invariant_tsc{word::ext7_edx, 8};
inline constexpr feature cpb{word::ext7_edx, 9};
// CPUID.0x80000008:EBX (AMD; speculation controls)
inline constexpr feature clzero{word::ext8_ebx, 0};
inline constexpr feature irperf{word::ext8_ebx, 1};
inline constexpr feature xsaveerptr{word::ext8_ebx, 2};
inline constexpr feature invlpgb{word::ext8_ebx, 3};
inline constexpr feature rdpru{word::ext8_ebx, 4};
inline constexpr feature mba{word::ext8_ebx, 6};
inline constexpr feature mcommit{word::ext8_ebx, 8};
inline constexpr feature wbnoinvd{word::ext8_ebx, 9};
inline constexpr feature amd_ibpb{word::ext8_ebx, 12};  ///< IA32_PRED_CMD.IBPB
inline constexpr feature amd_ibrs{word::ext8_ebx, 14};
inline constexpr feature amd_stibp{word::ext8_ebx, 15};
inline constexpr feature amd_ibrs_always_on{word::ext8_ebx, 16};
inline constexpr feature amd_stibp_always_on{word::ext8_ebx, 17};
inline constexpr feature amd_ibrs_preferred{word::ext8_ebx, 18};
inline constexpr feature amd_ibrs_same_mode{word::ext8_ebx, 19};
inline constexpr feature amd_ppin{word::ext8_ebx, 23};
inline constexpr feature amd_ssbd{word::ext8_ebx, 24};
inline constexpr feature virt_ssbd{word::ext8_ebx, 25};  ///< AMD VIRT_SPEC_CTRL (MSR 0xC001011F)
inline constexpr feature amd_ssb_no{word::ext8_ebx, 26};
inline constexpr feature cppc{word::ext8_ebx, 27};
inline constexpr feature amd_psfd{word::ext8_ebx, 28};
inline constexpr feature btc_no{word::ext8_ebx, 29};
inline constexpr feature amd_ibpb_ret{word::ext8_ebx, 30};
// CPUID.0x8000001F:EAX (AMD memory encryption)
inline constexpr feature sme{word::ext1f_eax, 0};
inline constexpr feature sev{word::ext1f_eax, 1};
inline constexpr feature vm_page_flush{word::ext1f_eax, 2};
inline constexpr feature sev_es{word::ext1f_eax, 3};
inline constexpr feature sev_snp{word::ext1f_eax, 4};
// CPUID.0x80000021:EAX (AMD extended features 2)
inline constexpr feature no_nested_data_bp{word::ext21_eax, 0};
inline constexpr feature lfence_rdtsc{word::ext21_eax, 2};  ///< LFENCE always serializing
inline constexpr feature null_sel_clr_base{word::ext21_eax, 6};
inline constexpr feature autoibrs{word::ext21_eax, 8};
inline constexpr feature no_smm_ctl_msr{word::ext21_eax, 9};
inline constexpr feature sbpb{word::ext21_eax, 27};  ///< IA32_PRED_CMD.SBPB (bit 7)
inline constexpr feature ibpb_brtype{word::ext21_eax, 28};
inline constexpr feature srso_no{word::ext21_eax, 29};
}  // namespace feat

/// A feature with its name. `in_proc_cpuinfo` is true when Linux shows the flag in
/// /proc/cpuinfo under exactly this name (taken straight from this CPUID bit).
struct named_feature {
  const char* name;
  feature f;
  bool in_proc_cpuinfo;
};

inline constexpr named_feature named_features[] = {
    {"pni", feat::sse3, true}, {"pclmulqdq", feat::pclmulqdq, true}, {"dtes64", feat::dtes64, true},
    {"monitor", feat::monitor, true}, {"ds_cpl", feat::ds_cpl, true}, {"vmx", feat::vmx, true},
    {"smx", feat::smx, true}, {"est", feat::est, true}, {"tm2", feat::tm2, true},
    {"ssse3", feat::ssse3, true}, {"cid", feat::cnxt_id, true}, {"sdbg", feat::sdbg, true},
    {"fma", feat::fma, true}, {"cx16", feat::cx16, true}, {"xtpr", feat::xtpr, true},
    {"pdcm", feat::pdcm, true}, {"pcid", feat::pcid, true}, {"dca", feat::dca, true},
    {"sse4_1", feat::sse4_1, true}, {"sse4_2", feat::sse4_2, true}, {"x2apic", feat::x2apic, true},
    {"movbe", feat::movbe, true}, {"popcnt", feat::popcnt, true},
    {"tsc_deadline_timer", feat::tsc_deadline, true}, {"aes", feat::aes, true},
    {"xsave", feat::xsave, true}, {"osxsave", feat::osxsave, false}, {"avx", feat::avx, true},
    {"f16c", feat::f16c, true}, {"rdrand", feat::rdrand, true}, {"hypervisor", feat::hypervisor, true},
    {"fpu", feat::fpu, true}, {"vme", feat::vme, true}, {"de", feat::de, true}, {"pse", feat::pse, true},
    {"tsc", feat::tsc, true}, {"msr", feat::msr, true}, {"pae", feat::pae, true}, {"mce", feat::mce, true},
    {"cx8", feat::cx8, true}, {"apic", feat::apic, true}, {"sep", feat::sep, true},
    {"mtrr", feat::mtrr, true}, {"pge", feat::pge, true}, {"mca", feat::mca, true},
    {"cmov", feat::cmov, true}, {"pat", feat::pat, true}, {"pse36", feat::pse36, true},
    {"pn", feat::psn, true}, {"clflush", feat::clflush, true}, {"dts", feat::ds, true},
    {"acpi", feat::acpi, true}, {"mmx", feat::mmx, true}, {"fxsr", feat::fxsr, true},
    {"sse", feat::sse, true}, {"sse2", feat::sse2, true}, {"ss", feat::ss, true}, {"ht", feat::htt, true},
    {"tm", feat::tm, true}, {"pbe", feat::pbe, true},
    {"dtherm", feat::dtherm, true}, {"ida", feat::turbo, true}, {"arat", feat::arat, true},
    {"pln", feat::pln, true}, {"pts", feat::pts, true}, {"hwp", feat::hwp, true},
    {"hwp_notify", feat::hwp_notify, true}, {"hwp_act_window", feat::hwp_act_window, true},
    {"hwp_epp", feat::hwp_epp, true}, {"hwp_pkg_req", feat::hwp_pkg_req, true}, {"hfi", feat::hfi, true},
    {"fsgsbase", feat::fsgsbase, true}, {"tsc_adjust", feat::tsc_adjust, true}, {"sgx", feat::sgx, true},
    {"bmi1", feat::bmi1, true}, {"hle", feat::hle, true}, {"avx2", feat::avx2, true},
    {"fdp_excptn_only", feat::fdp_excptn_only, false}, {"smep", feat::smep, true},
    {"bmi2", feat::bmi2, true}, {"erms", feat::erms, true}, {"invpcid", feat::invpcid, true},
    {"rtm", feat::rtm, true}, {"cqm", feat::rdt_m, true}, {"zero_fcs_fds", feat::zero_fcs_fds, false},
    {"mpx", feat::mpx, false}, {"rdt_a", feat::rdt_a, true}, {"avx512f", feat::avx512f, true},
    {"avx512dq", feat::avx512dq, true}, {"rdseed", feat::rdseed, true}, {"adx", feat::adx, true},
    {"smap", feat::smap, true}, {"avx512ifma", feat::avx512ifma, true},
    {"clflushopt", feat::clflushopt, true}, {"clwb", feat::clwb, true},
    {"intel_pt", feat::intel_pt, true}, {"avx512pf", feat::avx512pf, true},
    {"avx512er", feat::avx512er, true}, {"avx512cd", feat::avx512cd, true},
    {"sha_ni", feat::sha_ni, true}, {"avx512bw", feat::avx512bw, true}, {"avx512vl", feat::avx512vl, true},
    {"prefetchwt1", feat::prefetchwt1, false}, {"avx512vbmi", feat::avx512vbmi, true},
    {"umip", feat::umip, true}, {"pku", feat::pku, true}, {"ospke", feat::ospke, false},
    {"waitpkg", feat::waitpkg, true}, {"avx512_vbmi2", feat::avx512_vbmi2, true},
    {"shstk", feat::shstk, false}, {"gfni", feat::gfni, true}, {"vaes", feat::vaes, true},
    {"vpclmulqdq", feat::vpclmulqdq, true}, {"avx512_vnni", feat::avx512_vnni, true},
    {"avx512_bitalg", feat::avx512_bitalg, true}, {"tme", feat::tme, true},
    {"avx512_vpopcntdq", feat::avx512_vpopcntdq, true}, {"la57", feat::la57, true},
    {"rdpid", feat::rdpid, true}, {"kl", feat::kl, false}, {"bus_lock_detect", feat::bus_lock_detect, true},
    {"cldemote", feat::cldemote, true}, {"movdiri", feat::movdiri, true},
    {"movdir64b", feat::movdir64b, true}, {"enqcmd", feat::enqcmd, true}, {"sgx_lc", feat::sgx_lc, true},
    {"pks", feat::pks, false},
    {"avx512_4vnniw", feat::avx512_4vnniw, true}, {"avx512_4fmaps", feat::avx512_4fmaps, true},
    {"fsrm", feat::fsrm, true}, {"uintr", feat::uintr, false},
    {"avx512_vp2intersect", feat::avx512_vp2intersect, true}, {"srbds_ctrl", feat::srbds_ctrl, false},
    {"md_clear", feat::md_clear, true}, {"rtm_always_abort", feat::rtm_always_abort, false},
    {"tsx_force_abort", feat::tsx_force_abort, false}, {"serialize", feat::serialize, true},
    {"hybrid_cpu", feat::hybrid_cpu, false}, {"tsxldtrk", feat::tsxldtrk, true},
    {"pconfig", feat::pconfig, true}, {"arch_lbr", feat::arch_lbr, true}, {"ibt", feat::ibt, false},
    {"amx_bf16", feat::amx_bf16, true}, {"avx512_fp16", feat::avx512_fp16, true},
    {"amx_tile", feat::amx_tile, true}, {"amx_int8", feat::amx_int8, true},
    {"spec_ctrl", feat::spec_ctrl, false}, {"intel_stibp", feat::intel_stibp, false},
    {"flush_l1d", feat::flush_l1d, true}, {"arch_capabilities", feat::arch_capabilities, true},
    {"core_capabilities", feat::core_capabilities, false}, {"spec_ctrl_ssbd", feat::spec_ctrl_ssbd, false},
    {"sha512", feat::sha512, false}, {"sm3", feat::sm3, false}, {"sm4", feat::sm4, false},
    {"avx_vnni", feat::avx_vnni, true}, {"avx512_bf16", feat::avx512_bf16, true},
    {"cmpccxadd", feat::cmpccxadd, false}, {"arch_perfmon_ext", feat::arch_perfmon_ext, false},
    {"fzrm", feat::fzrm, false}, {"fsrs", feat::fsrs, false}, {"fsrc", feat::fsrc, false},
    {"fred", feat::fred, false}, {"lkgs", feat::lkgs, false}, {"amx_fp16", feat::amx_fp16, false},
    {"avx_ifma", feat::avx_ifma, false}, {"lam", feat::lam, false},
    {"avx_vnni_int8", feat::avx_vnni_int8, false}, {"avx_ne_convert", feat::avx_ne_convert, false},
    {"amx_complex", feat::amx_complex, false}, {"avx_vnni_int16", feat::avx_vnni_int16, false},
    {"prefetchiti", feat::prefetchiti, false}, {"avx10", feat::avx10, false}, {"apx_f", feat::apx_f, false},
    {"psfd", feat::psfd, false}, {"ipred_ctrl", feat::ipred_ctrl, false},
    {"rrsba_ctrl", feat::rrsba_ctrl, false}, {"ddpd_u", feat::ddpd_u, false},
    {"bhi_ctrl", feat::bhi_ctrl, false}, {"mcdt_no", feat::mcdt_no, false},
    {"xsaveopt", feat::xsaveopt, true}, {"xsavec", feat::xsavec, true}, {"xgetbv1", feat::xgetbv1, true},
    {"xsaves", feat::xsaves, true}, {"xfd", feat::xfd, false},
    {"pt_cr3_filter", feat::pt_cr3_filter, false}, {"pt_psb_cyc", feat::pt_psb_cyc, false},
    {"pt_ip_filter", feat::pt_ip_filter, false}, {"pt_mtc", feat::pt_mtc, false},
    {"pt_ptwrite", feat::pt_ptwrite, false}, {"pt_power_event", feat::pt_power_event, false},
    {"aeskle", feat::aeskle, false}, {"wide_kl", feat::wide_kl, false},
    {"kl_iwkey_backup", feat::kl_iwkey_backup, false},
    {"lahf_lm", feat::lahf_lm, true}, {"cmp_legacy", feat::cmp_legacy, true}, {"svm", feat::svm, true},
    {"extapic", feat::extapic, true}, {"cr8_legacy", feat::cr8_legacy, true}, {"abm", feat::abm, true},
    {"sse4a", feat::sse4a, true}, {"misalignsse", feat::misalignsse, true},
    {"3dnowprefetch", feat::prefetchw, true}, {"osvw", feat::osvw, true}, {"ibs", feat::ibs, true},
    {"xop", feat::xop, true}, {"skinit", feat::skinit, true}, {"wdt", feat::wdt, true},
    {"lwp", feat::lwp, true}, {"fma4", feat::fma4, true}, {"tce", feat::tce, true},
    {"nodeid_msr", feat::nodeid_msr, true}, {"tbm", feat::tbm, true}, {"topoext", feat::topoext, true},
    {"perfctr_core", feat::perfctr_core, true}, {"perfctr_nb", feat::perfctr_nb, true},
    {"bpext", feat::bpext, true}, {"ptsc", feat::ptsc, true}, {"perfctr_llc", feat::perfctr_llc, true},
    {"mwaitx", feat::mwaitx, true},
    {"syscall", feat::syscall, true}, {"mp", feat::mp, true}, {"nx", feat::nx, true},
    {"mmxext", feat::mmxext, true}, {"fxsr_opt", feat::fxsr_opt, true}, {"pdpe1gb", feat::pdpe1gb, true},
    {"rdtscp", feat::rdtscp, true}, {"lm", feat::lm, true}, {"3dnowext", feat::amd_3dnowext, true},
    {"3dnow", feat::amd_3dnow, true},
    {"invariant_tsc", feat::invariant_tsc, false}, {"cpb", feat::cpb, false},
    {"clzero", feat::clzero, true}, {"irperf", feat::irperf, true}, {"xsaveerptr", feat::xsaveerptr, true},
    {"invlpgb", feat::invlpgb, false}, {"rdpru", feat::rdpru, true}, {"mba", feat::mba, false},
    {"mcommit", feat::mcommit, false}, {"wbnoinvd", feat::wbnoinvd, true},
    {"amd_ibpb", feat::amd_ibpb, false}, {"amd_ibrs", feat::amd_ibrs, false},
    {"amd_stibp", feat::amd_stibp, false}, {"amd_ibrs_always_on", feat::amd_ibrs_always_on, false},
    {"amd_stibp_always_on", feat::amd_stibp_always_on, false},
    {"amd_ibrs_preferred", feat::amd_ibrs_preferred, false},
    {"amd_ibrs_same_mode", feat::amd_ibrs_same_mode, false}, {"amd_ppin", feat::amd_ppin, true},
    {"amd_ssbd", feat::amd_ssbd, false}, {"virt_ssbd", feat::virt_ssbd, false},
    {"amd_ssb_no", feat::amd_ssb_no, false}, {"cppc", feat::cppc, true}, {"amd_psfd", feat::amd_psfd, false},
    {"btc_no", feat::btc_no, false}, {"amd_ibpb_ret", feat::amd_ibpb_ret, false},
    {"sme", feat::sme, true}, {"sev", feat::sev, true}, {"vm_page_flush", feat::vm_page_flush, false},
    {"sev_es", feat::sev_es, true}, {"sev_snp", feat::sev_snp, true},
    {"no_nested_data_bp", feat::no_nested_data_bp, false}, {"lfence_rdtsc", feat::lfence_rdtsc, false},
    {"null_sel_clr_base", feat::null_sel_clr_base, false}, {"autoibrs", feat::autoibrs, false},
    {"no_smm_ctl_msr", feat::no_smm_ctl_msr, false}, {"sbpb", feat::sbpb, false},
    {"ibpb_brtype", feat::ibpb_brtype, false}, {"srso_no", feat::srso_no, false},
};

/// The named feature called `name`, or nullptr (constexpr string compare, no libc).
[[nodiscard]] constexpr const named_feature* find_named(const char* name) noexcept {
  for (const named_feature& n : named_features) {
    const char* a = n.name;
    const char* b = name;
    while (*a != '\0' && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == *b) return &n;
  }
  return nullptr;
}

}  // namespace hvkit::cpuid
