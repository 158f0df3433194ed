// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, VMX backend under shadow paging (run --shadow): the CR-access
// exits. CR3 loads and stores exit (the real CR3 is the shadow root); CR0/CR4 writes to the
// bits the shadow-paging ownership policy keeps (vmx::make_guest_owned({.ept = false})) exit
// and are checked with paging_kind::shadow, then the shadow MMU loads the new context
// (core/shadow_paging.hpp, docs/shadow-mmu.md "Integration").
#include "../core/shadow_paging.hpp"
#include "vmx_backend.hpp"

namespace hv {

bool handle_cr_shadow(vcpu& regs, hvkit::vmx::cr_access_qualification q) {
  namespace v = hvkit::vmx;
  using acc = v::cr_access_qualification::access;
  auto& vmcs = regs.backend();
  auto cr = v::read_cr_context(vmcs, guest_config());
  if (!cr) {
    vmx_failed(cr.error());
    return false;
  }
  v::cr_context c = cr.value();
  c.cr3 = core::shadow::guest_cr3().raw();  // the guest's CR3, not the shadow root
  c.efer = core::shadow::guest_efer();       // the real EFER.NXE is 1
  if (q.type() == acc::mov_from_cr) {
    const v::cr_read_outcome rd = v::evaluate_cr_read(q, c, 0);
    if (!rd.valid) {
      kprintf("HVKIT ERROR unhandled CR read qualification=0x%llx\n", (unsigned long long)q.raw());
      run.status = run_status::fatal_exit;
      return false;
    }
    regs.write(rd.gpr, rd.value);
    return static_cast<bool>(v::skip_instruction(regs));
  }
  const auto src = v::cr_source_value(regs, q, c);
  if (!src) {
    vmx_failed(src.error());
    return false;
  }
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, src.value(), hvkit::paging::paging_kind::shadow);
  if (out.cr != 0 && out.cr != 3 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    run.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    ++run.cr_gp_injected;
    inject(regs, x86::vector::gp, 0);
    return true;
  }
  const x86::cr3 cr3_after{out.cr == 3 ? out.value : c.cr3};
  const hvkit::emulate::shadow_exit e = core::shadow::cr_written(out, cr3_after);
  if (e.action == hvkit::emulate::shadow_exit_action::inject) {
    ++run.cr_gp_injected;  // a PAE PDPTE with a reserved bit: #GP(0), nothing changed (SDM 4.4.1)
    inject(regs, x86::vector::gp, 0);
    return true;
  }
  if (out.cr != 3) {
    if (out.actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++run.mmu_resets;
    store_crs({c.cr0, c.cr4, c.efer}, out.after);
    const hvkit::paging::cpu_role role = hvkit::paging::make_cpu_role(out.after.cr0, out.after.cr4, out.after.efer);
    run.mmu = {role, x86::cr3_root(cr3_after, role.mode(), guest_cpu_properties().maxphyaddr)};
  }
  vmwrite(fields::guest_cr3, e.root.value());
  return static_cast<bool>(v::skip_instruction(regs));
}

}  // namespace hv
