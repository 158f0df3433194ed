// SPDX-License-Identifier: MIT
// Recorded CPUID dumps used as golden inputs. Typed by hand, never produced by hvkit.
//  - amd_epyc_kvm: an AMD EPYC (family 0x19 model 0x11 stepping 1, "AMD EPYC") vCPU under
//    KVM with 2 vCPUs, recorded with GCC's <cpuid.h> on the CI machine.
//  - intel_spr_like: a hand-composed Intel host shaped like a Sapphire Rapids part (its
//    XSAVE offsets and sizes, AMX components 64-byte aligned), with deliberate
//    inconsistencies (MPX enumerated without MPX state, CET without CET state, PT state
//    in XSS without a PT owner in the policy).
#pragma once

#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/leaf.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace fixtures {
using hvkit::cpuid::regs;

struct rec {
  std::uint32_t leaf, subleaf;
  regs r;
};

// A recorded processor: answers from the list; unknown leaves read as zero (AMD
// semantics, which is all the tests need); topology leaves past the last level echo the
// level number in ECX as the hardware does.
template <std::size_t N>
struct recorded {
  std::array<rec, N> recs;
  constexpr regs operator()(std::uint32_t leaf, std::uint32_t subleaf) const noexcept {
    const bool indexed = hvkit::cpuid::is_indexed(leaf);
    for (const rec& x : recs)
      if (x.leaf == leaf && (!indexed || x.subleaf == subleaf)) return x.r;
    if (leaf == 0xb || leaf == 0x1f) return {0, 0, subleaf & 0xffu, 0};
    return {};
  }
};
template <class... R>
recorded(std::array<rec, sizeof...(R)>) -> recorded<sizeof...(R)>;

inline constexpr recorded<32> amd_epyc_kvm{{{
    {0x0, 0, {0x0000001c, 0x68747541, 0x444d4163, 0x69746e65}},
    {0x1, 0, {0x00a10f11, 0x00020800, 0xfffa3203, 0x178bfbff}},
    {0x6, 0, {0x00000004, 0, 0, 0}},
    {0x7, 0, {0x00000001, 0xf1bf07ab, 0x00405fc6, 0x00000010}},
    {0x7, 1, {0x00000020, 0, 0, 0}},
    {0xb, 0, {0x00000000, 0x00000001, 0x00000100, 0}},
    {0xb, 1, {0x00000005, 0x00000002, 0x00000201, 0}},
    {0xd, 0, {0x000000e7, 0x00000980, 0x00000980, 0}},
    {0xd, 1, {0x0000000f, 0x000009a8, 0x00001800, 0}},
    {0xd, 2, {0x00000100, 0x00000240, 0, 0}},
    {0xd, 5, {0x00000040, 0x00000340, 0, 0}},
    {0xd, 6, {0x00000200, 0x00000380, 0, 0}},
    {0xd, 7, {0x00000400, 0x00000580, 0, 0}},
    {0xd, 11, {0x00000010, 0, 0x00000001, 0}},
    {0xd, 12, {0x00000018, 0, 0x00000001, 0}},
    {0x40000000, 0, {0x40000001, 0x4b4d564b, 0x564b4d56, 0x0000004d}},
    {0x40000001, 0, {0x01007efb, 0, 0, 0}},
    {0x80000000, 0, {0x80000021, 0x68747541, 0x444d4163, 0x69746e65}},
    {0x80000001, 0, {0x00a10f11, 0x40000000, 0x004003f3, 0x2fd3fbff}},
    {0x80000002, 0, {0x20444d41, 0x43595045, 0, 0}},
    {0x80000005, 0, {0xff48ff40, 0xff48ff40, 0x20080140, 0x20080140}},
    {0x80000006, 0, {0x5c002200, 0x6c004200, 0x04006140, 0x0a009140}},
    {0x80000007, 0, {0, 0, 0, 0x00000100}},
    {0x80000008, 0, {0x00003030, 0x50020005, 0x00007001, 0}},
    {0x8000001a, 0, {0x00000006, 0, 0, 0}},
    {0x8000001d, 0, {0x00000121, 0x01c0003f, 0x0000003f, 0}},
    {0x8000001d, 1, {0x00000122, 0x01c0003f, 0x0000003f, 0}},
    {0x8000001d, 2, {0x00000143, 0x01c0003f, 0x000007ff, 0x00000002}},
    {0x8000001d, 3, {0x00004163, 0x03c0003f, 0x00007fff, 0x00000001}},
    {0x80000021, 0, {0x00000204, 0, 0x00000086, 0}},
    {0x2, 0, {0, 0, 0, 0}},
    {0x8000001e, 0, {0, 0, 0, 0}},
}}};

inline constexpr recorded<38> intel_spr_like{{{
    {0x0, 0, {0x00000020, 0x756e6547, 0x6c65746e, 0x49656e69}},
    {0x1, 0, {0x000806f8, 0x3f800800, 0x7ffefbff, 0xbfebfbff}},
    {0x4, 0, {0xfc004121, 0x02c0003f, 0x0000003f, 0}},
    {0x4, 1, {0xfc004122, 0x01c0003f, 0x0000003f, 0}},
    {0x4, 2, {0xfc004143, 0x03c0003f, 0x000007ff, 0}},
    {0x4, 3, {0xfc1fc163, 0x0380003f, 0x0000bfff, 0x00000004}},
    {0x6, 0, {0x000df7f7, 0x00000002, 0x00000009, 0}},
    {0x7, 0, {0x00000002, 0xf3bff7eb, 0xbb417fde, 0xffdd4410}},
    {0x7, 1, {0x00200030, 0, 0, 0}},
    {0x7, 2, {0, 0, 0, 0x00000017}},
    {0xa, 0, {0x08300805, 0, 0x0000000f, 0x00008604}},
    {0xb, 0, {0x00000001, 0x00000002, 0x00000100, 0x0000003f}},
    {0xb, 1, {0x00000007, 0x00000040, 0x00000201, 0x0000003f}},
    {0xd, 0, {0x000602e7, 0x00002b00, 0x00002b00, 0}},
    {0xd, 1, {0x0000000f, 0x00002b08, 0x00000100, 0}},
    {0xd, 2, {0x00000100, 0x00000240, 0, 0}},
    {0xd, 5, {0x00000040, 0x00000440, 0, 0}},
    {0xd, 6, {0x00000200, 0x00000480, 0, 0}},
    {0xd, 7, {0x00000400, 0x00000680, 0, 0}},
    {0xd, 8, {0x00000080, 0, 0x00000001, 0}},
    {0xd, 9, {0x00000008, 0x00000a80, 0, 0}},
    {0xd, 17, {0x00000040, 0x00000ac0, 0x00000002, 0}},
    {0xd, 18, {0x00002000, 0x00000b00, 0x00000002, 0}},
    {0x14, 0, {0x00000001, 0x0000005f, 0x00000007, 0}},
    {0x14, 1, {0x02490002, 0x003f3fff, 0, 0}},
    {0x1f, 0, {0x00000001, 0x00000002, 0x00000100, 0x0000003f}},
    {0x1f, 1, {0x00000007, 0x00000040, 0x00000201, 0x0000003f}},
    {0x20, 0, {0x00000000, 0x00000001, 0, 0}},
    {0x80000000, 0, {0x80000008, 0, 0, 0}},
    {0x80000001, 0, {0, 0, 0x00000121, 0x2c100800}},
    {0x80000002, 0, {0x65746e49, 0x2952286c, 0x6f655820, 0x2952286e}},
    {0x80000006, 0, {0, 0, 0x08007040, 0}},
    {0x80000007, 0, {0, 0, 0, 0x00000100}},
    {0x80000008, 0, {0x0000302e, 0x00000200, 0, 0}},
    {0x2, 0, {0x00feff01, 0x000000f0, 0, 0}},
    {0x5, 0, {0x00000040, 0x00000040, 0x00000003, 0x00002020}},
    {0x80000003, 0, {0, 0, 0, 0}},
    {0x80000004, 0, {0, 0, 0, 0}},
}}};

}  // namespace fixtures
