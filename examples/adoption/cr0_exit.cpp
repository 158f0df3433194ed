// SPDX-License-Identifier: MIT
// A MOV-to-CR0 exit handler (exit reason 28, SDM Vol. 3C 28.2.1 Table 28-3) over the software
// VMCS: check the write (#GP(0) cases of SDM Vol. 2B "MOV—Move to/from Control Registers"),
// load the guest CR0 and its read shadow, skip the instruction. The same handler runs over
// vmx::hw::current_vmcs in a real hypervisor: only the backend differs.
#include <cassert>
#include <cstdint>

#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/guest_context.hpp>
#include <hvkit/vmx/skip.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;
namespace f = vmx::fields;

// CR0 bits the VMX capability MSRs force (IA32_VMX_CR0_FIXED0/1, SDM A.7): PE, NE, PG.
constexpr vmx::cr_fixed cr0_fixed{(x86::cr0::pg | x86::cr0::ne | x86::cr0::pe).raw(), 0xffff'ffff};
// The guest's CR0 (paging, WP, NE, ET, MP, PE), and the value it writes: the same without WP.
constexpr x86::cr0 guest_cr0 = x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::mp | x86::cr0::pe;
constexpr x86::cr0 written_cr0 = guest_cr0.without(x86::cr0::wp);

template <vmx::vmcs_backend B>
vmx::cr_write_outcome on_cr_access(B& vmcs, vmx::register_file<B>& regs, const vmx::guest_cpu_config& cpu) {
  const vmx::cr_access_qualification q{vmx::vmread(vmcs, f::exit_qualification).value()};
  const vmx::cr_context c = vmx::read_cr_context(vmcs, cpu).value();
  const std::uint64_t source = vmx::cr_source_value(regs, q, c).value();  // 32 bits outside 64-bit mode
  const auto out = vmx::evaluate_cr_write(q, c, source, hvkit::paging::paging_kind::two_dimensional);
  if (out.fault != vmx::cr_write_fault::none) {
    (void)vmx::write_injection(vmcs, vmx::hardware_exception(x86::vector::gp, 0));  // RIP stays
    return out;
  }
  // The software VMCS never fails a VMWRITE of a listed field; over hardware, check each result.
  const auto v = vmx::cr0_values_for(out.after.cr0, cr0_fixed, /*unrestricted_guest=*/false);
  (void)vmx::vmwrite(vmcs, f::guest_cr0, x86::cr0{v.actual});
  (void)vmx::vmwrite(vmcs, f::cr0_read_shadow, out.after.cr0);
  (void)vmx::vmwrite(vmcs, f::guest_ia32_efer, out.after.efer);
  (void)vmx::skip_instruction(regs);
  (void)regs.flush();
  return out;
}

int main() {
  vmx::soft_vmcs vmcs;
  // A 64-bit guest (CS.L = 1, EFER.LMA) that owns CR0.TS; WP is host-owned, so clearing it exits.
  vmcs.store(f::guest_cr0, guest_cr0);
  vmcs.store(f::cr0_read_shadow, guest_cr0);
  vmcs.store(f::cr0_guest_host_mask, x86::cr0{~x86::cr0::ts.raw()});
  vmcs.store(f::guest_cr4, x86::cr4::pae);
  vmcs.store(f::cr4_read_shadow, x86::cr4::pae);
  vmcs.store(f::guest_ia32_efer, x86::efer::lme | x86::efer::lma);
  vmcs.store(f::guest_cs_access_rights, 0xa09b);  // present 64-bit code segment (L = 1)
  vmcs.store(f::guest_rip, 0x1000);
  vmcs.store(f::vm_exit_instruction_length, 3);  // mov cr0, rax
  vmcs.store(f::exit_reason, 28);
  vmcs.store(f::exit_qualification, 0);  // MOV to CR0 from RAX (Table 28-3)

  vmx::gpr_block gprs{};
  gprs[x86::gpr::rax] = written_cr0.raw();  // the guest clears WP
  vmx::register_file<vmx::soft_vmcs> regs(vmcs, gprs);
  const auto out = on_cr_access(vmcs, regs, vmx::guest_cpu_config{});

  assert(out.fault == vmx::cr_write_fault::none);
  assert(out.actions == hvkit::paging::mmu_actions::refresh_permissions);  // WP under EPT: no reset
  assert(vmcs.peek(f::cr0_read_shadow) == written_cr0.raw());
  assert(vmcs.peek(f::guest_cr0) == written_cr0.raw());  // PE, NE, PG already set
  assert(vmcs.peek(f::guest_rip) == 0x1003);

  // PG without PE is #GP(0): an exception is queued, RIP and CR0 stay.
  gprs[x86::gpr::rax] = 0x8000'0000;
  vmx::register_file<vmx::soft_vmcs> again(vmcs, gprs);
  const auto bad = on_cr_access(vmcs, again, vmx::guest_cpu_config{});
  assert(bad.fault == vmx::cr_write_fault::pg_without_pe);
  assert(vmcs.peek(f::vm_entry_interruption_info) == 0x8000'0b0d);  // valid, hardware exception, EC, #GP
  assert(vmcs.peek(f::guest_rip) == 0x1003);
  return 0;
}
