// SPDX-License-Identifier: MIT
/// @file
/// @brief Physical memory layout shared by the hypervisor and the conformance guest.
///
/// Host physical memory (Bochs: 128 MiB):
///   [1 MiB, 16 MiB)   hypervisor image, stacks, VMXON/VMCS regions, EPT tables
///   [16 MiB, 32 MiB)  guest memory, identity-mapped by EPT (GPA == HPA)
/// EPT maps nothing else: the hypervisor's own memory is unreachable from the guest and a
/// guest access to it is an EPT violation.
#pragma once

#include <cstdint>

namespace hv::layout {

inline constexpr std::uint64_t guest_mem_base = 0x1000000;  // 16 MiB
inline constexpr std::uint64_t guest_mem_size = 0x1000000;  // 16 MiB
inline constexpr std::uint64_t guest_load_gpa = guest_mem_base;  // guest/guest.ld
/// Boot page tables the hypervisor writes for the guest's first instruction (identity map
/// of the low 4 GiB with 2 MiB pages); the guest replaces them with its own.
inline constexpr std::uint64_t guest_boot_pt_gpa = guest_mem_base + guest_mem_size - 0x100000;
/// The MMIO test device: a guest-physical page that EPT leaves unmapped on purpose.
inline constexpr std::uint64_t mmio_device_gpa = 0xD0000000;
inline constexpr std::uint64_t mmio_device_size = 0x1000;
/// Test device registers (64-bit, little endian; byte-granular access):
///   0x00 id (read-only, "HVKITDEV")   0x08 scratch (read/write)
///   0x10 writes so far (read-only)    0x18 reads so far (read-only)
///   0x20-0xFFF read as 0, writes ignored
inline constexpr std::uint64_t mmio_device_id = 0x56454454494B5648;  // "HVKITDEV"
/// Guest-physical addresses that are neither guest RAM nor a device read as all ones and
/// drop writes (as unbacked physical addresses do on a PC); the hypervisor's own memory is
/// such an address for the guest.
inline constexpr std::uint64_t hypervisor_image_gpa = 0x100000;

}  // namespace hv::layout
