// SPDX-License-Identifier: MIT
// A PAE walker needs the PDPTE registers (SDM 4.4.1): building walker_pae from an MMU context
// without the snapshot of load_pdptrs() must not compile (it would report every address
// "not present"). guest_walker, whose mode is known only at run time, reports
// fault_kind::pdptes_not_loaded instead.
#include <hvkit/paging/walker.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

int main() {
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae, {}, x86::gpa{0x1000});
  paging::pdpte_snapshot pd{};
  pd.loaded = true;
  const paging::walker_pae with(mmu, {}, pd);
  const paging::walker_4level four(paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae,
                                                             x86::efer::lme | x86::efer::lma, x86::gpa{0x1000}),
                                   {});
#ifdef HVKIT_COMPILE_FAIL
  const paging::walker_pae without(mmu, {});
  return without.state().pdptes.loaded ? 1 : 0;
#endif
  return with.state().pdptes.loaded && !four.state().pdptes.loaded ? 0 : 1;
}
