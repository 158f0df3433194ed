// SPDX-License-Identifier: MIT
// libFuzzer target for the VM-entry checks (vmx/vm_entry_checks.hpp): random VMCS contents.
// The VMCS starts as a valid 64-bit guest/host pair (so the later groups of checks are
// reached), then the input rewrites it: the first 16 bytes choose the processor (capability
// MSRs perturbed, MAXPHYADDR 32-52, LA57, IA-32e mode), then 9-byte records name a field
// of the field table and replace, XOR or OR its value; what is left is physical memory at
// address 0 (virtual-APIC page, VMCS link pointer, PDPT, MSR-load area). Invariants: the
// verdict is consistent with its rule (error 7 for controls, 8 for host state, exit 33 with
// the rule's qualification, exit 34 with an entry number within the count), the first
// violation check_vm_entry_state reports is the first for_each_vm_entry_violation finds,
// and a success has no violation at all.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>
#include <hvkit/vmx/vm_entry_checks.hpp>

namespace {

using namespace hvkit;

void check(bool ok) {
  if (!ok) std::abort();
}

std::uint64_t take(const std::uint8_t*& p, const std::uint8_t* end, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n && p < end; ++i) v |= std::uint64_t{*p++} << (8 * i);
  return v;
}

void golden(vmx::soft_vmcs& v) {
  namespace f = vmx::fields;
  v.store(f::pin_based_controls, 0x16u);
  v.store(f::primary_processor_based_controls, 0x84006172u | (1u << 7));
  v.store(f::secondary_processor_based_controls, 0x2u);
  v.store(f::primary_vm_exit_controls, 0x36dfbu | (1u << 9) | (1u << 20) | (1u << 21));
  v.store(f::vm_entry_controls, 0x11fbu | (1u << 2) | (1u << 9) | (1u << 15));
  v.store(f::ept_pointer, std::uint64_t{0x100000 | (3 << 3) | 6});
  v.store(f::host_cr0, std::uint64_t{0x80000033});
  v.store(f::host_cr3, std::uint64_t{0x200000});
  v.store(f::host_cr4, std::uint64_t{0x2020});
  v.store(f::host_cs_selector, std::uint16_t{8});
  v.store(f::host_ss_selector, std::uint16_t{0x10});
  v.store(f::host_ds_selector, std::uint16_t{0x10});
  v.store(f::host_es_selector, std::uint16_t{0x10});
  v.store(f::host_fs_selector, std::uint16_t{0x10});
  v.store(f::host_gs_selector, std::uint16_t{0x10});
  v.store(f::host_tr_selector, std::uint16_t{0x18});
  v.store(f::host_ia32_efer, std::uint64_t{0xd01});
  v.store(f::host_rip, std::uint64_t{0x104000});
  v.store(f::guest_cr0, std::uint64_t{0x80010031});
  v.store(f::guest_cr3, std::uint64_t{0x3000});
  v.store(f::guest_cr4, std::uint64_t{0x2020});
  v.store(f::guest_dr7, std::uint64_t{0x400});
  v.store(f::guest_cs_selector, std::uint16_t{8});
  v.store(f::guest_cs_limit, 0xffffffffu);
  v.store(f::guest_cs_access_rights, 0xa09bu);
  for (std::uint32_t i = 0; i < 6; ++i) {
    if (i == 1) continue;
    v.store(0x0800 + 2 * i, 0x10);
    v.store(0x4800 + 2 * i, 0xffffffff);
    v.store(0x4814 + 2 * i, 0xc093);
  }
  v.store(f::guest_ldtr_access_rights, 0x10000u);
  v.store(f::guest_tr_selector, std::uint16_t{0x18});
  v.store(f::guest_tr_limit, 0x67u);
  v.store(f::guest_tr_access_rights, 0x8bu);
  v.store(f::guest_rflags, std::uint64_t{2});
  v.store(f::guest_ia32_efer, std::uint64_t{0xd00});
  v.store(f::vmcs_link_pointer, ~std::uint64_t{0});
}

vmx::vm_entry_env env_from(const std::uint8_t*& p, const std::uint8_t* end) {
  vmx::vm_entry_env e;
  auto& c = e.caps;
  c.basic = 0x00d810000000002b;
  c.pinbased = c.true_pinbased = 0x0000007f00000016;
  c.procbased = 0xf7f9fffe0401e172;
  c.true_procbased = 0xf7f9fffe04006172;
  c.exit = 0x007fffff00036dff;
  c.true_exit = 0x007fffff00036dfb;
  c.entry = 0x0000ffff000011ff;
  c.true_entry = 0x0000ffff000011fb;
  c.misc = 0x600401e0;
  c.cr0_fixed0 = 0x80000021;
  c.cr0_fixed1 = 0xffffffff;
  c.cr4_fixed0 = 0x2000;
  c.cr4_fixed1 = 0x003727ff;
  c.procbased2 = 0x02177fff00000000;
  c.ept_vpid_cap = 0x00000f0106334141;
  c.vmfunc = 1;
  const auto b = take(p, end, 8);
  e.maxphyaddr = 32 + static_cast<unsigned>(b & 0xff) % 21;
  e.linear = (b >> 8) & 1 ? x86::linear_width::la57 : x86::linear_width::la48;
  e.in_ia32e_mode = !((b >> 9) & 1);
  // Perturb one capability MSR: XOR a byte of the input into it.
  std::uint64_t* msrs[] = {&c.true_pinbased, &c.true_procbased, &c.procbased2, &c.true_exit, &c.true_entry,
                           &c.misc,          &c.cr0_fixed0,     &c.cr4_fixed1, &c.ept_vpid_cap, &c.procbased3};
  const auto x = take(p, end, 8);
  if ((b >> 10) & 1) *msrs[(b >> 16) % 10] ^= x;
  if ((b >> 11) & 1)
    e.msr_write_faults = [](std::uint32_t index, std::uint64_t v) { return index == 0x175 && (v >> 47) != 0; };
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 16) return 0;
  const std::uint8_t* p = data;
  const std::uint8_t* end = data + size;
  const vmx::vm_entry_env env = env_from(p, end);

  vmx::soft_vmcs v;
  golden(v);
  // Records: a field index byte, then 8 value bytes whose low 2 bits choose the operation
  // (0: replace, 1: XOR, 2: OR, 3: stop).
  while (end - p >= 9) {
    const std::uint8_t idx = *p++;
    const std::uint8_t op = *p & 3;
    const std::uint64_t val = take(p, end, 8);
    if (op == 3) break;
    const auto& fi = vmx::field_table[idx % vmx::field_count];
    if (fi.declared_type == vmx::field_type::exit_info) continue;
    const std::uint64_t old = v.read(fi.encoding).value();
    v.store(fi.encoding, op == 0 ? val : op == 1 ? old ^ val : old | val);
  }
  std::vector<std::uint8_t> ram(p, end);
  ram.resize(0x4000, 0);
  const paging::flat_view mem{ram.data(), ram.size()};

  const auto r = vmx::check_vm_entry(v, env, mem);
  check(r.has_value());  // the soft VMCS has every field
  const vmx::vm_entry_verdict& verdict = r.value();
  const auto s = vmx::read_vm_entry_state(v, mem);
  check(s.has_value());

  const vmx::vm_entry_rule* first = nullptr;
  unsigned violations = 0;
  vmx::for_each_vm_entry_violation(s.value(), env, [&](const vmx::vm_entry_rule& rule, const vmx::vm_entry_hit& h) {
    check(h.failed);
    if (!first) first = &rule;
    ++violations;
  });
  if (first) {
    check(verdict.rule == &first->info);
    const auto again = vmx::check_vm_entry_state(s.value(), env);
    check(same_outcome(again, verdict) && again.rule == verdict.rule);
  }
  if (verdict.ok()) {
    check(violations == 0 && verdict.rule == nullptr);
    return 0;
  }
  check(verdict.rule != nullptr && verdict.hit.failed);
  switch (verdict.rule->phase) {
    case vmx::vm_entry_phase::controls:
      check(verdict.error == vmx::vm_instruction_error::entry_invalid_control_fields);
      break;
    case vmx::vm_entry_phase::host_state:
      check(verdict.error == vmx::vm_instruction_error::entry_invalid_host_state);
      break;
    case vmx::vm_entry_phase::guest_state:
      check(verdict.exit_reason == 0x80000021u);
      check(verdict.exit_qualification == 0 || verdict.exit_qualification == 2 || verdict.exit_qualification == 3 ||
            verdict.exit_qualification == 4);
      break;
    case vmx::vm_entry_phase::msr_load:
      check(violations == 0 && verdict.exit_reason == 0x80000022u);
      check(verdict.exit_qualification >= 1 && verdict.exit_qualification <= s.value().entry_msr_load_count);
      break;
  }
  return 0;
}
