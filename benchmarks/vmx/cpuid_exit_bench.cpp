// SPDX-License-Identifier: MIT
// A CPUID exit handled end to end: read RAX/RCX and the guest-visible CR4, answer from the
// guest's hvkit::cpuid policy, write RAX-RDX, skip the instruction, write back before entry.
//  BM_cpuid_exit/register_file_cached  vmx::register_file over cached_vmcs<soft_vmcs>
//                                      (on_vm_exit, lazy reads, flush at entry)
//  BM_cpuid_exit/vmread_per_access     the same handler written with a VMREAD/VMWRITE at
//                                      every access, straight on the soft_vmcs
// The counters report the VMREADs and VMWRITEs that reach the backend per exit: on hardware
// each one is an instruction of tens to hundreds of cycles (an exit of its own when nested
// without VMCS shadowing), which the software backend cannot show in time.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdlib>

#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/vmx/cached_vmcs.hpp>
#include <hvkit/vmx/guest_context.hpp>
#include <hvkit/vmx/register_file.hpp>
#include <hvkit/vmx/skip.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace cpuid = hvkit::cpuid;

namespace {

const cpuid::policy& guest_policy() {
  static const cpuid::policy p = [] {
    cpuid::table<> host;
    if (!cpuid::read_all(cpuid::host_source{}, host)) std::abort();
    cpuid::hypervisor_caps hv;
    hv.passthrough = cpuid::feature_set::all();
    auto b = cpuid::build_policy(host, hv, cpuid::policy_config{});
    if (!b) std::abort();
    return b.value();
  }();
  return p;
}

// The leaves a booting kernel asks for, cycled.
constexpr std::array<std::uint32_t, 8> leaves{0x0, 0x1, 0x7, 0xd, 0x80000000, 0x80000001, 0x80000008, 0x6};

void fill(vmx::soft_vmcs& v) {
  v.store(vmx::fields::guest_rip, vmx::natural_t{0xffff'ffff'8100'0000});
  v.store(vmx::fields::guest_rflags, vmx::natural_t{0x246});
  v.store(vmx::fields::vm_exit_instruction_length, std::uint32_t{2});
  v.store(vmx::fields::vm_entry_controls, std::uint32_t{0x200});      // IA-32e mode guest
  v.store(vmx::fields::guest_cs_access_rights, std::uint32_t{0xa09b});
  v.store(vmx::fields::guest_cr4, vmx::natural_t{0x3606e0});
  v.store(vmx::fields::cr4_read_shadow, vmx::natural_t{0x1606e0});
  v.store(vmx::fields::cr4_guest_host_mask, vmx::natural_t{0x2000});
}

void BM_cpuid_exit_register_file(benchmark::State& state) {
  const cpuid::policy& p = guest_policy();
  vmx::soft_vmcs soft;
  fill(soft);
  vmx::cached_vmcs cache(soft);
  vmx::gpr_block g;
  vmx::register_file<vmx::cached_vmcs<vmx::soft_vmcs>> regs(cache, g);
  benchmark::DoNotOptimize(&soft);
  unsigned i = 0;
  std::uint64_t exits = 0;
  soft.reset_counts();
  for (auto _ : state) {
    benchmark::ClobberMemory();
    // VM exit: nothing is available any more.
    cache.on_vm_exit();
    regs.on_vm_exit();
    regs.write(x86::gpr::rax, leaves[i++ % leaves.size()]);  // what the exit stub saved
    const auto leaf = static_cast<std::uint32_t>(regs.read(x86::gpr::rax).value());
    const auto sub = static_cast<std::uint32_t>(regs.read(x86::gpr::rcx).value());
    cpuid::vcpu_state vs{};
    vs.cr4 = vmx::read_guest_visible_cr4(cache).value();
    const cpuid::regs a = p.answer(leaf, sub, vs);
    regs.write(x86::gpr::rax, a.eax);
    regs.write(x86::gpr::rbx, a.ebx);
    regs.write(x86::gpr::rcx, a.ecx);
    regs.write(x86::gpr::rdx, a.edx);
    auto s = vmx::skip_instruction(regs);
    benchmark::DoNotOptimize(s);
    // VM entry: write back.
    (void)regs.flush();
    (void)cache.flush();
    soft.store(vmx::fields::guest_rip, vmx::natural_t{0xffff'ffff'8100'0000});  // the next CPUID
    benchmark::DoNotOptimize(regs.gprs().slot.data());
    ++exits;
  }
  state.counters["vmreads_per_exit"] = static_cast<double>(soft.reads()) / static_cast<double>(exits);
  state.counters["vmwrites_per_exit"] = static_cast<double>(soft.writes()) / static_cast<double>(exits);
}
BENCHMARK(BM_cpuid_exit_register_file)->Name("BM_cpuid_exit/register_file_cached");

// The baseline: the glue a hypervisor writes by hand, a VMREAD at every access.
void BM_cpuid_exit_vmread_per_access(benchmark::State& state) {
  const cpuid::policy& p = guest_policy();
  vmx::soft_vmcs soft;
  fill(soft);
  std::array<std::uint64_t, 16> gprs{};
  benchmark::DoNotOptimize(&soft);
  unsigned i = 0;
  std::uint64_t exits = 0;
  soft.reset_counts();
  for (auto _ : state) {
    benchmark::ClobberMemory();
    gprs[0] = leaves[i++ % leaves.size()];
    const auto leaf = static_cast<std::uint32_t>(gprs[0]);
    const auto sub = static_cast<std::uint32_t>(gprs[1]);
    cpuid::vcpu_state vs{};
    const auto m4 = vmx::vmread(soft, vmx::fields::cr4_guest_host_mask).value();
    vs.cr4 = vmx::guest_visible_cr4(x86::cr4{vmx::vmread(soft, vmx::fields::guest_cr4).value()},
                                    x86::cr4{vmx::vmread(soft, vmx::fields::cr4_read_shadow).value()}, m4);
    const cpuid::regs a = p.answer(leaf, sub, vs);
    gprs[0] = a.eax;
    gprs[3] = a.ebx;
    gprs[1] = a.ecx;
    gprs[2] = a.edx;
    // Skip: RIP + length in the code segment's width, shadows cleared, TF checked.
    const std::uint64_t rip = vmx::vmread(soft, vmx::fields::guest_rip).value();
    const std::uint32_t len = vmx::vmread(soft, vmx::fields::vm_exit_instruction_length).value();
    const bool ia32e = (vmx::vmread(soft, vmx::fields::vm_entry_controls).value() >> 9) & 1u;
    const std::uint32_t cs = vmx::vmread(soft, vmx::fields::guest_cs_access_rights).value();
    (void)vmx::vmwrite(soft, vmx::fields::guest_rip, vmx::advance_ip(rip, len, vmx::ip_width_of(ia32e, cs)));
    const std::uint32_t is = vmx::vmread(soft, vmx::fields::guest_interruptibility_state).value();
    if (is & 3u) (void)vmx::vmwrite(soft, vmx::fields::guest_interruptibility_state, is & ~3u);
    if (vmx::vmread(soft, vmx::fields::guest_rflags).value() & 0x100u)
      (void)vmx::vmwrite(soft, vmx::fields::guest_pending_debug_exceptions, vmx::natural_t{0x4000});
    soft.store(vmx::fields::guest_rip, vmx::natural_t{0xffff'ffff'8100'0000});
    benchmark::DoNotOptimize(gprs.data());
    ++exits;
  }
  state.counters["vmreads_per_exit"] = static_cast<double>(soft.reads()) / static_cast<double>(exits);
  state.counters["vmwrites_per_exit"] = static_cast<double>(soft.writes()) / static_cast<double>(exits);
}
BENCHMARK(BM_cpuid_exit_vmread_per_access)->Name("BM_cpuid_exit/vmread_per_access");

}  // namespace
