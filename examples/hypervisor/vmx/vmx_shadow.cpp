// SPDX-License-Identifier: MIT
// hvkit reference hypervisor, VMX backend under shadow paging (run --shadow): the CR-access
// exits. CR3 loads and stores exit (the real CR3 is the shadow root); CR0/CR4 writes to the
// bits the shadow-paging ownership policy keeps (vmx::make_guest_owned({.ept = false})) exit
// and are checked with paging_kind::shadow, then the shadow MMU loads the new context
// (core/shadow_paging.hpp, docs/shadow-mmu.md "Integration").
#include "../core/shadow_paging.hpp"
#include "vmx_backend.hpp"

namespace hv {

// A MOV to CR under shadow paging; `c` is the guest's view (its CR3 and EFER, which
// handle_cr() put in place of the shadow root and the real EFER.NXE = 1).
bool handle_cr_write_shadow(const vmx_host& h, vcpu& regs, hvkit::vmx::cr_access_qualification q, const hvkit::vmx::cr_context& c,
                            run_state& st) {
  namespace v = hvkit::vmx;
  const auto src = v::cr_source_value(regs, q, c);
  if (!src) {
    vmx_failed(src.error(), st);
    return false;
  }
  const v::cr_write_outcome out = v::evaluate_cr_write(q, c, src.value(), hvkit::paging::paging_kind::shadow);
  if (out.cr != 0 && out.cr != 3 && out.cr != 4) {
    kprintf("HVKIT ERROR unhandled CR access qualification=0x%llx\n", (unsigned long long)q.raw());
    st.status = run_status::fatal_exit;
    return false;
  }
  if (out.fault != v::cr_write_fault::none) {
    ++st.cr_gp_injected;
    inject(regs, st, x86::vector::gp, 0);
    return true;
  }
  const x86::cr3 cr3_after{out.cr == 3 ? out.value : c.cr3};
  const hvkit::emulate::shadow_exit e = core::shadow::cr_written(st, out, cr3_after);
  if (e.action == hvkit::emulate::shadow_exit_action::inject) {
    ++st.cr_gp_injected;  // a PAE PDPTE with a reserved bit: #GP(0), nothing changed (SDM 4.4.1)
    inject(regs, st, x86::vector::gp, 0);
    return true;
  }
  if (out.cr != 3) {
    if (out.actions.any(hvkit::paging::mmu_actions::reset_mmu)) ++st.mmu_resets;
    store_crs(h, {c.cr0, c.cr4, c.efer}, out.after, st);
    const hvkit::paging::cpu_role role = hvkit::paging::make_cpu_role(out.after.cr0, out.after.cr4, out.after.efer);
    st.mmu = {role, x86::cr3_root(cr3_after, role.mode(), guest_cpu_properties(st.cpu->model).maxphyaddr)};
  }
  vmwrite(fields::guest_cr3, e.root.value());
  return static_cast<bool>(v::skip_instruction(regs));
}

}  // namespace hv
