// SPDX-License-Identifier: MIT
/// @file
/// @brief The KVM paravirtual CPUID leaves: the signature at a configurable base, the
/// stable feature word (EAX of base+1) and the hints word (EDX of base+1).
///
/// Bit numbers are the KVM ABI (Linux Documentation/virt/kvm/x86/cpuid.rst). Features are
/// stable for the life of a guest, across migration; hints describe the current host and
/// may change when the guest migrates (see docs/background.md §3).
#pragma once

#include <cstdint>

#include "features.hpp"
#include "leaf.hpp"

namespace hvkit::cpuid::kvm {

/// The usual base, and the base used when Hyper-V enlightenment leaves occupy 0x40000000.
inline constexpr std::uint32_t default_base = 0x40000000;
inline constexpr std::uint32_t base_above_hyperv = 0x40000100;

/// True for a base hvkit accepts: 0x40000000 + n * 0x100 inside the hypervisor range.
[[nodiscard]] constexpr bool is_valid_base(std::uint32_t base) noexcept {
  return base >= 0x40000000u && base <= 0x4000ff00u && (base & 0xffu) == 0;
}

/// "KVMKVMKVM\0\0\0" in EBX, ECX, EDX (little-endian bytes).
inline constexpr std::uint32_t signature_ebx = 0x4b4d564b;  // "KVMK"
inline constexpr std::uint32_t signature_ecx = 0x564b4d56;  // "VMKV"
inline constexpr std::uint32_t signature_edx = 0x0000004d;  // "M\0\0\0"

/// KVM_FEATURE_* bits in EAX of base+1 (stable).
namespace features {
inline constexpr feature clocksource{word::kvm_features, 0};     ///< kvmclock at MSRs 0x11, 0x12
inline constexpr feature nop_io_delay{word::kvm_features, 1};
inline constexpr feature mmu_op{word::kvm_features, 2};          ///< deprecated
inline constexpr feature clocksource2{word::kvm_features, 3};    ///< kvmclock at 0x4b564d00/01
inline constexpr feature async_pf{word::kvm_features, 4};
inline constexpr feature steal_time{word::kvm_features, 5};
inline constexpr feature pv_eoi{word::kvm_features, 6};
inline constexpr feature pv_unhalt{word::kvm_features, 7};
inline constexpr feature pv_tlb_flush{word::kvm_features, 9};
inline constexpr feature async_pf_vmexit{word::kvm_features, 10};
inline constexpr feature pv_send_ipi{word::kvm_features, 11};
inline constexpr feature poll_control{word::kvm_features, 12};
inline constexpr feature pv_sched_yield{word::kvm_features, 13};
inline constexpr feature async_pf_int{word::kvm_features, 14};
inline constexpr feature msi_ext_dest_id{word::kvm_features, 15};
inline constexpr feature hc_map_gpa_range{word::kvm_features, 16};
inline constexpr feature migration_control{word::kvm_features, 17};
inline constexpr feature clocksource_stable_bit{word::kvm_features, 24};
}  // namespace features

/// Hint bits in EDX of base+1 (may change across migration).
namespace hints {
/// KVM_HINTS_REALTIME (upstream KVM ABI): the host does not preempt this guest's vCPUs
/// indefinitely, so the guest may spin where it would otherwise yield.
inline constexpr feature realtime{word::kvm_hints, 0};
/// hvkit-proposed, NOT upstream KVM ABI: IPIs are accelerated by the APIC hardware
/// (Intel APICv IPI virtualization or AMD AVIC) on the current host, so a guest should
/// prefer the APIC's ICR over the PV_SEND_IPI hypercall. Only a guest that knows hvkit's
/// hint reads it; bit 1 is hvkit's choice and could collide with a future upstream bit.
inline constexpr feature hvkit_apic_accelerated_ipi{word::kvm_hints, 1};
}  // namespace hints

/// Every feature bit the KVM ABI defines (for masks).
inline constexpr feature_set all_features{
    features::clocksource,     features::nop_io_delay,   features::mmu_op,
    features::clocksource2,    features::async_pf,       features::steal_time,
    features::pv_eoi,          features::pv_unhalt,      features::pv_tlb_flush,
    features::async_pf_vmexit, features::pv_send_ipi,    features::poll_control,
    features::pv_sched_yield,  features::async_pf_int,   features::msi_ext_dest_id,
    features::hc_map_gpa_range, features::migration_control, features::clocksource_stable_bit};

/// Every hint bit hvkit knows (upstream and hvkit-proposed).
inline constexpr feature_set all_hints{hints::realtime, hints::hvkit_apic_accelerated_ipi};

}  // namespace hvkit::cpuid::kvm
