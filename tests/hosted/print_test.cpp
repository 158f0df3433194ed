// SPDX-License-Identifier: MIT
// The hosted printers (include/*/hosted/print.hpp, x86/hosted/format.hpp):
//  - every name table against a list typed here: each enumerator has its name, names are
//    distinct and non-empty, every other value of the underlying type (up to a limit) has
//    no name and prints as "type(n)"; operator<< prints what to_string() gives;
//  - golden strings for PTE and EPT-entry flags, a whole guest walk and EPT walk (what
//    hvkit-walk prints), faults, mappings, VMX failures and emulator outcomes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <hvkit/cpuid/hosted/print.hpp>
#include <hvkit/emulate/hosted/print.hpp>
#include <hvkit/paging/hosted/print.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/vmx/hosted/print.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/hosted/format.hpp>

namespace {

using namespace hvkit;
using std::uint64_t;

template <class E>
void check_names(std::string_view type, unsigned long limit, std::vector<std::pair<E, std::string_view>> list) {
  SCOPED_TRACE(std::string(type));
  std::set<std::string_view> seen;
  for (const auto& [v, n] : list) {
    EXPECT_EQ(name(v), n);
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(seen.insert(n).second) << "duplicate name " << n;
    EXPECT_EQ(to_string(v), std::string(n));
    std::ostringstream os;
    os << v;
    EXPECT_EQ(os.str(), std::string(n));
  }
  for (unsigned long raw = 0; raw < limit; ++raw) {
    const E v = static_cast<E>(raw);
    if (std::any_of(list.begin(), list.end(), [&](const auto& p) { return p.first == v; })) continue;
    EXPECT_TRUE(name(v).empty()) << raw << " has the name " << name(v);
    EXPECT_EQ(to_string(v), std::string(type) + "(" + std::to_string(raw) + ")");
  }
}

// The names are constant expressions (no allocation): usable in static tables and asserts.
static_assert(paging::name(paging::fault_kind::not_present) == "not_present");
static_assert(name(paging::role_sync::wp_refreshed) == "wp_refreshed");  // argument-dependent lookup
static_assert(vmx::name(vmx::exit_reason::ept_violation) == "ept_violation");
static_assert(vmx::name(static_cast<vmx::exit_reason>(35)).empty());
static_assert(emulate::name(emulate::mnemonic::xor_) == "xor");
static_assert(cpuid::name(cpuid::msr_verdict::gp) == "gp");
static_assert(x86::name(x86::vector::pf) == "#PF");

TEST(HostedNames, X86) {
  check_names<x86::vector>("vector", 256, {
      {x86::vector::de, "#DE"}, {x86::vector::db, "#DB"}, {x86::vector::nmi, "NMI"}, {x86::vector::bp, "#BP"},
      {x86::vector::of, "#OF"}, {x86::vector::br, "#BR"}, {x86::vector::ud, "#UD"}, {x86::vector::nm, "#NM"},
      {x86::vector::df, "#DF"}, {x86::vector::cso, "CSO"}, {x86::vector::ts, "#TS"}, {x86::vector::np, "#NP"},
      {x86::vector::ss, "#SS"}, {x86::vector::gp, "#GP"}, {x86::vector::pf, "#PF"}, {x86::vector::mf, "#MF"},
      {x86::vector::ac, "#AC"}, {x86::vector::mc, "#MC"}, {x86::vector::xm, "#XM"}, {x86::vector::ve, "#VE"},
      {x86::vector::cp, "#CP"}, {x86::vector::hv, "#HV"}, {x86::vector::vc, "#VC"}, {x86::vector::sx, "#SX"},
  });
  check_names<x86::paging_mode>("paging_mode", 256, {
      {x86::paging_mode::none, "none"}, {x86::paging_mode::two_level, "two_level"},
      {x86::paging_mode::pae, "pae"}, {x86::paging_mode::four_level, "four_level"},
      {x86::paging_mode::five_level, "five_level"},
  });
  EXPECT_EQ(x86::description(x86::paging_mode::four_level), "4-level");
  EXPECT_EQ(x86::description(x86::paging_mode::two_level), "32-bit");
}

TEST(HostedNames, MemoryTypesAndVmFailKinds) {
  check_names<paging::ept_memory_type>("ept_memory_type", 256, {
      {paging::ept_memory_type::uc, "UC"}, {paging::ept_memory_type::wc, "WC"}, {paging::ept_memory_type::wt, "WT"},
      {paging::ept_memory_type::wp, "WP"}, {paging::ept_memory_type::wb, "WB"},
  });
  check_names<vmx::vm_fail::kind>("vm_fail::kind", 256, {
      {vmx::vm_fail::kind::invalid, "VMfailInvalid"}, {vmx::vm_fail::kind::valid, "VMfailValid"},
  });
}

TEST(HostedNames, Paging) {
  check_names<paging::fault_kind>("fault_kind", 256, {
      {paging::fault_kind::none, "none"}, {paging::fault_kind::not_present, "not_present"},
      {paging::fault_kind::reserved_bit, "reserved_bit"}, {paging::fault_kind::permission, "permission"},
      {paging::fault_kind::protection_key, "protection_key"}, {paging::fault_kind::unbacked, "unbacked"},
      {paging::fault_kind::ept_misconfig, "ept_misconfig"}, {paging::fault_kind::non_canonical, "non_canonical"},
      {paging::fault_kind::invalid_pdpte, "invalid_pdpte"},
      {paging::fault_kind::retry_exhausted, "retry_exhausted"},
      {paging::fault_kind::pdptes_not_loaded, "pdptes_not_loaded"},
      {paging::fault_kind::mode_mismatch, "mode_mismatch"},
      {paging::fault_kind::invalid_request, "invalid_request"},
  });
  check_names<paging::walk_stage>("walk_stage", 256, {
      {paging::walk_stage::guest, "guest"}, {paging::walk_stage::ept, "ept"}, {paging::walk_stage::npt, "npt"},
  });
  check_names<paging::memory_error>("memory_error", 256, {
      {paging::memory_error::none, "none"}, {paging::memory_error::unbacked, "unbacked"},
      {paging::memory_error::read_only, "read_only"},
  });
  check_names<paging::eptp_error>("eptp_error", 256, {
      {paging::eptp_error::none, "none"}, {paging::eptp_error::walk_length, "walk_length"},
      {paging::eptp_error::memory_type, "memory_type"}, {paging::eptp_error::ad_unsupported, "ad_unsupported"},
      {paging::eptp_error::reserved_bits, "reserved_bits"},
      {paging::eptp_error::supervisor_shadow_stack_unsupported, "supervisor_shadow_stack_unsupported"},
  });
  check_names<paging::ept_misconfig>("ept_misconfig", 256, {
      {paging::ept_misconfig::none, "none"}, {paging::ept_misconfig::write_without_read, "write_without_read"},
      {paging::ept_misconfig::execute_only_unsupported, "execute_only_unsupported"},
      {paging::ept_misconfig::reserved_memory_type, "reserved_memory_type"},
      {paging::ept_misconfig::large_page_unsupported, "large_page_unsupported"},
      {paging::ept_misconfig::reserved_bits, "reserved_bits"},
  });
  check_names<paging::mapping_step>("mapping_step", 256, {
      {paging::mapping_step::mapping, "mapping"}, {paging::mapping_step::fault, "fault"},
      {paging::mapping_step::end, "end"}, {paging::mapping_step::truncated, "truncated"},
  });
  // Found by argument-dependent lookup next to the type (paging/hosted/print.hpp), also
  // through svm's re-export (svm::role_sync is the same type).
  check_names<paging::role_sync>("role_sync", 256, {
      {paging::role_sync::unchanged, "unchanged"}, {paging::role_sync::wp_refreshed, "wp_refreshed"},
      {paging::role_sync::rebuilt, "rebuilt"},
  });
}

TEST(HostedNames, Cpuid) {
  check_names<cpuid::msr_verdict>("msr_verdict", 256, {
      {cpuid::msr_verdict::not_covered, "not_covered"}, {cpuid::msr_verdict::allow, "allow"},
      {cpuid::msr_verdict::gp, "gp"},
  });
  check_names<cpuid::policy_error>("policy_error", 256, {
      {cpuid::policy_error::none, "none"}, {cpuid::policy_error::table_full, "table_full"},
      {cpuid::policy_error::bad_kvm_base, "bad_kvm_base"}, {cpuid::policy_error::bad_topology, "bad_topology"},
      {cpuid::policy_error::bad_max_leaf, "bad_max_leaf"},
      {cpuid::policy_error::no_basic_leaves, "no_basic_leaves"},
      {cpuid::policy_error::xsave_layout, "xsave_layout"}, {cpuid::policy_error::no_kvm_leaves, "no_kvm_leaves"},
      {cpuid::policy_error::not_hypervisor_leaf, "not_hypervisor_leaf"},
  });
  check_names<cpuid::table_error>("table_error", 256, {
      {cpuid::table_error::none, "none"}, {cpuid::table_error::full, "full"},
  });
  check_names<cpuid::xsave_error>("xsave_error", 256, {
      {cpuid::xsave_error::none, "none"}, {cpuid::xsave_error::unknown_component, "unknown_component"},
      {cpuid::xsave_error::out_of_range, "out_of_range"}, {cpuid::xsave_error::too_large, "too_large"},
  });
  check_names<cpuid::xsave_enumeration>("xsave_enumeration", 256, {
      {cpuid::xsave_enumeration::consistent, "consistent"}, {cpuid::xsave_enumeration::no_size, "no_size"},
      {cpuid::xsave_enumeration::wrong_register, "wrong_register"},
      {cpuid::xsave_enumeration::bad_offset, "bad_offset"}, {cpuid::xsave_enumeration::too_large, "too_large"},
  });
  check_names<cpuid::vendor>("vendor", 256, {
      {cpuid::vendor::unknown, "unknown"}, {cpuid::vendor::intel, "intel"}, {cpuid::vendor::amd, "amd"},
      {cpuid::vendor::hygon, "hygon"}, {cpuid::vendor::zhaoxin, "zhaoxin"}, {cpuid::vendor::centaur, "centaur"},
  });
  check_names<cpuid::rule_id>("rule_id", 256, {
      {cpuid::rule_id::nested_virtualization, "nested_virtualization"},
      {cpuid::rule_id::emulated_only, "emulated_only"},
      {cpuid::rule_id::feature_dependencies, "feature_dependencies"},
      {cpuid::rule_id::topoext_hidden, "topoext_hidden"}, {cpuid::rule_id::hypervisor_bit, "hypervisor_bit"},
      {cpuid::rule_id::xsave_leaf, "xsave_leaf"}, {cpuid::rule_id::topology, "topology"},
      {cpuid::rule_id::hypervisor_leaves, "hypervisor_leaves"},
      {cpuid::rule_id::leaf7_max_subleaf, "leaf7_max_subleaf"},
      {cpuid::rule_id::max_basic_leaf, "max_basic_leaf"},
      {cpuid::rule_id::max_extended_leaf, "max_extended_leaf"}, {cpuid::rule_id::osxsave_ospke, "osxsave_ospke"},
      {cpuid::rule_id::apic_id, "apic_id"}, {cpuid::rule_id::xsave_sizes, "xsave_sizes"},
      {cpuid::rule_id::pv_send_ipi, "pv_send_ipi"},
  });
}

TEST(HostedNames, Emulate) {
  check_names<emulate::outcome_kind>("outcome_kind", 256, {
      {emulate::outcome_kind::done, "done"}, {emulate::outcome_kind::exception, "exception"},
      {emulate::outcome_kind::needs_io, "needs_io"}, {emulate::outcome_kind::needs_mmio, "needs_mmio"},
      {emulate::outcome_kind::unsupported, "unsupported"},
  });
  check_names<emulate::event>("event", 256, {
      {emulate::event::none, "none"}, {emulate::event::halt, "halt"}, {emulate::event::invlpg, "invlpg"},
      {emulate::event::cr_write, "cr_write"}, {emulate::event::dr_write, "dr_write"},
      {emulate::event::msr_write, "msr_write"}, {emulate::event::descriptor_table_load, "descriptor_table_load"},
      {emulate::event::cache_flush, "cache_flush"},
  });
  check_names<emulate::unsupported_reason>("unsupported_reason", 256, {
      {emulate::unsupported_reason::none, "none"}, {emulate::unsupported_reason::instruction, "instruction"},
      {emulate::unsupported_reason::fetch_not_ram, "fetch_not_ram"},
      {emulate::unsupported_reason::page_table_unbacked, "page_table_unbacked"},
      {emulate::unsupported_reason::second_stage_fault, "second_stage_fault"},
      {emulate::unsupported_reason::invalid_context, "invalid_context"},
      {emulate::unsupported_reason::too_many_device_accesses, "too_many_device_accesses"},
  });
  check_names<emulate::mnemonic>("mnemonic", 256, {
      {emulate::mnemonic::invalid, "invalid"}, {emulate::mnemonic::mov, "mov"},
      {emulate::mnemonic::movzx, "movzx"}, {emulate::mnemonic::movsx, "movsx"},
      {emulate::mnemonic::movsxd, "movsxd"}, {emulate::mnemonic::mov_from_sreg, "mov_from_sreg"},
      {emulate::mnemonic::mov_to_sreg, "mov_to_sreg"}, {emulate::mnemonic::xchg, "xchg"},
      {emulate::mnemonic::add, "add"}, {emulate::mnemonic::or_, "or"}, {emulate::mnemonic::adc, "adc"},
      {emulate::mnemonic::sbb, "sbb"}, {emulate::mnemonic::and_, "and"}, {emulate::mnemonic::sub, "sub"},
      {emulate::mnemonic::xor_, "xor"}, {emulate::mnemonic::cmp, "cmp"}, {emulate::mnemonic::test, "test"},
      {emulate::mnemonic::not_, "not"}, {emulate::mnemonic::neg, "neg"}, {emulate::mnemonic::inc, "inc"},
      {emulate::mnemonic::dec, "dec"}, {emulate::mnemonic::bt, "bt"}, {emulate::mnemonic::bts, "bts"},
      {emulate::mnemonic::btr, "btr"}, {emulate::mnemonic::btc, "btc"},
      {emulate::mnemonic::cmpxchg, "cmpxchg"}, {emulate::mnemonic::cmpxchg8b, "cmpxchg8b"},
      {emulate::mnemonic::cmpxchg16b, "cmpxchg16b"}, {emulate::mnemonic::movs, "movs"},
      {emulate::mnemonic::cmps, "cmps"}, {emulate::mnemonic::stos, "stos"}, {emulate::mnemonic::lods, "lods"},
      {emulate::mnemonic::ins, "ins"}, {emulate::mnemonic::outs, "outs"}, {emulate::mnemonic::in, "in"},
      {emulate::mnemonic::out, "out"}, {emulate::mnemonic::sldt, "sldt"}, {emulate::mnemonic::str, "str"},
      {emulate::mnemonic::lldt, "lldt"}, {emulate::mnemonic::ltr, "ltr"}, {emulate::mnemonic::verr, "verr"},
      {emulate::mnemonic::verw, "verw"}, {emulate::mnemonic::sgdt, "sgdt"}, {emulate::mnemonic::sidt, "sidt"},
      {emulate::mnemonic::lgdt, "lgdt"}, {emulate::mnemonic::lidt, "lidt"}, {emulate::mnemonic::smsw, "smsw"},
      {emulate::mnemonic::lmsw, "lmsw"}, {emulate::mnemonic::invlpg, "invlpg"},
      {emulate::mnemonic::mov_from_cr, "mov_from_cr"}, {emulate::mnemonic::mov_to_cr, "mov_to_cr"},
      {emulate::mnemonic::mov_from_dr, "mov_from_dr"}, {emulate::mnemonic::mov_to_dr, "mov_to_dr"},
      {emulate::mnemonic::clts, "clts"}, {emulate::mnemonic::cpuid, "cpuid"}, {emulate::mnemonic::rdmsr, "rdmsr"},
      {emulate::mnemonic::wrmsr, "wrmsr"}, {emulate::mnemonic::hlt, "hlt"}, {emulate::mnemonic::invd, "invd"},
      {emulate::mnemonic::wbinvd, "wbinvd"},
      {emulate::mnemonic::vmcall, "vmcall"},
      {emulate::mnemonic::vmmcall, "vmmcall"},
      {emulate::mnemonic::int3, "int3"},
      {emulate::mnemonic::int_n, "int"},
      {emulate::mnemonic::into, "into"},
      {emulate::mnemonic::int1, "int1"},
  });
  check_names<emulate::decode_error>("decode_error", 256, {
      {emulate::decode_error::truncated, "truncated"}, {emulate::decode_error::too_long, "too_long"},
      {emulate::decode_error::invalid, "invalid"}, {emulate::decode_error::unsupported, "unsupported"},
  });
  check_names<emulate::cpu_mode>("cpu_mode", 256, {
      {emulate::cpu_mode::real, "real"}, {emulate::cpu_mode::vm86, "vm86"},
      {emulate::cpu_mode::protected_, "protected"}, {emulate::cpu_mode::long64, "long64"},
  });
  check_names<emulate::sreg>("sreg", 256, {
      {emulate::sreg::es, "es"}, {emulate::sreg::cs, "cs"}, {emulate::sreg::ss, "ss"}, {emulate::sreg::ds, "ds"},
      {emulate::sreg::fs, "fs"}, {emulate::sreg::gs, "gs"},
  });
}

TEST(HostedNames, Vmx) {
  check_names<vmx::vm_instruction_error>("vm_instruction_error", 4096, {
      {vmx::vm_instruction_error::none, "none"},
      {vmx::vm_instruction_error::vmcall_in_vmx_root, "vmcall_in_vmx_root"},
      {vmx::vm_instruction_error::vmclear_invalid_address, "vmclear_invalid_address"},
      {vmx::vm_instruction_error::vmclear_vmxon_pointer, "vmclear_vmxon_pointer"},
      {vmx::vm_instruction_error::vmlaunch_non_clear_vmcs, "vmlaunch_non_clear_vmcs"},
      {vmx::vm_instruction_error::vmresume_non_launched_vmcs, "vmresume_non_launched_vmcs"},
      {vmx::vm_instruction_error::vmresume_after_vmxoff, "vmresume_after_vmxoff"},
      {vmx::vm_instruction_error::entry_invalid_control_fields, "entry_invalid_control_fields"},
      {vmx::vm_instruction_error::entry_invalid_host_state, "entry_invalid_host_state"},
      {vmx::vm_instruction_error::vmptrld_invalid_address, "vmptrld_invalid_address"},
      {vmx::vm_instruction_error::vmptrld_vmxon_pointer, "vmptrld_vmxon_pointer"},
      {vmx::vm_instruction_error::vmptrld_bad_revision, "vmptrld_bad_revision"},
      {vmx::vm_instruction_error::unsupported_vmcs_component, "unsupported_vmcs_component"},
      {vmx::vm_instruction_error::vmwrite_read_only_component, "vmwrite_read_only_component"},
      {vmx::vm_instruction_error::vmxon_in_vmx_root, "vmxon_in_vmx_root"},
      {vmx::vm_instruction_error::entry_invalid_executive_vmcs_pointer, "entry_invalid_executive_vmcs_pointer"},
      {vmx::vm_instruction_error::entry_non_launched_executive_vmcs, "entry_non_launched_executive_vmcs"},
      {vmx::vm_instruction_error::entry_executive_vmcs_not_vmxon, "entry_executive_vmcs_not_vmxon"},
      {vmx::vm_instruction_error::vmcall_non_clear_vmcs, "vmcall_non_clear_vmcs"},
      {vmx::vm_instruction_error::vmcall_invalid_exit_controls, "vmcall_invalid_exit_controls"},
      {vmx::vm_instruction_error::vmcall_bad_mseg_revision, "vmcall_bad_mseg_revision"},
      {vmx::vm_instruction_error::vmxoff_dual_monitor, "vmxoff_dual_monitor"},
      {vmx::vm_instruction_error::vmcall_invalid_smm_monitor_features, "vmcall_invalid_smm_monitor_features"},
      {vmx::vm_instruction_error::entry_invalid_executive_controls, "entry_invalid_executive_controls"},
      {vmx::vm_instruction_error::entry_events_blocked_by_mov_ss, "entry_events_blocked_by_mov_ss"},
      {vmx::vm_instruction_error::invalid_invept_invvpid_operand, "invalid_invept_invvpid_operand"},
  });
  check_names<vmx::vmx_instruction>("vmx_instruction", 256, {
      {vmx::vmx_instruction::vmxon, "vmxon"}, {vmx::vmx_instruction::vmxoff, "vmxoff"},
      {vmx::vmx_instruction::vmclear, "vmclear"}, {vmx::vmx_instruction::vmptrld, "vmptrld"},
      {vmx::vmx_instruction::vmptrst, "vmptrst"}, {vmx::vmx_instruction::vmread, "vmread"},
      {vmx::vmx_instruction::vmwrite, "vmwrite"}, {vmx::vmx_instruction::vmlaunch, "vmlaunch"},
      {vmx::vmx_instruction::vmresume, "vmresume"}, {vmx::vmx_instruction::invept, "invept"},
      {vmx::vmx_instruction::invvpid, "invvpid"},
  });
  check_names<vmx::cr_write_fault>("cr_write_fault", 256, {
      {vmx::cr_write_fault::none, "none"}, {vmx::cr_write_fault::reserved_bit, "reserved_bit"},
      {vmx::cr_write_fault::pg_without_pe, "pg_without_pe"},
      {vmx::cr_write_fault::nw_without_cd, "nw_without_cd"},
      {vmx::cr_write_fault::long_mode_without_pae, "long_mode_without_pae"},
      {vmx::cr_write_fault::clear_wp_with_cet, "clear_wp_with_cet"},
      {vmx::cr_write_fault::cet_without_wp, "cet_without_wp"},
      {vmx::cr_write_fault::clear_pae_in_long_mode, "clear_pae_in_long_mode"},
      {vmx::cr_write_fault::change_la57_in_long_mode, "change_la57_in_long_mode"},
      {vmx::cr_write_fault::pcide_bad_state, "pcide_bad_state"},
      {vmx::cr_write_fault::clear_pg_in_64bit_mode, "clear_pg_in_64bit_mode"},
      {vmx::cr_write_fault::activate_ia32e_with_cs_l, "activate_ia32e_with_cs_l"},
      {vmx::cr_write_fault::clear_pg_with_pcide, "clear_pg_with_pcide"},
      {vmx::cr_write_fault::cr3_reserved_bit, "cr3_reserved_bit"},
  });
  check_names<vmx::ept_error>("ept_error", 256, {
      {vmx::ept_error::write_without_read, "write_without_read"},
      {vmx::ept_error::execute_only_unsupported, "execute_only_unsupported"},
      {vmx::ept_error::reserved_memory_type, "reserved_memory_type"},
      {vmx::ept_error::large_page_unsupported, "large_page_unsupported"},
      {vmx::ept_error::misaligned_address, "misaligned_address"},
      {vmx::ept_error::address_too_wide, "address_too_wide"},
      {vmx::ept_error::walk_length_unsupported, "walk_length_unsupported"},
      {vmx::ept_error::eptp_memory_type_unsupported, "eptp_memory_type_unsupported"},
      {vmx::ept_error::accessed_dirty_unsupported, "accessed_dirty_unsupported"},
      {vmx::ept_error::eptp_reserved_bits, "eptp_reserved_bits"},
      {vmx::ept_error::invalid_maxphyaddr, "invalid_maxphyaddr"},
      {vmx::ept_error::supervisor_shadow_stack_unsupported, "supervisor_shadow_stack_unsupported"},
  });
  check_names<vmx::exit_reason>("exit_reason", 65536, {
      {vmx::exit_reason::exception_or_nmi, "exception_or_nmi"},
      {vmx::exit_reason::external_interrupt, "external_interrupt"},
      {vmx::exit_reason::triple_fault, "triple_fault"}, {vmx::exit_reason::init_signal, "init_signal"},
      {vmx::exit_reason::sipi, "sipi"}, {vmx::exit_reason::io_smi, "io_smi"},
      {vmx::exit_reason::other_smi, "other_smi"}, {vmx::exit_reason::interrupt_window, "interrupt_window"},
      {vmx::exit_reason::nmi_window, "nmi_window"}, {vmx::exit_reason::task_switch, "task_switch"},
      {vmx::exit_reason::cpuid, "cpuid"}, {vmx::exit_reason::getsec, "getsec"}, {vmx::exit_reason::hlt, "hlt"},
      {vmx::exit_reason::invd, "invd"}, {vmx::exit_reason::invlpg, "invlpg"}, {vmx::exit_reason::rdpmc, "rdpmc"},
      {vmx::exit_reason::rdtsc, "rdtsc"}, {vmx::exit_reason::rsm, "rsm"}, {vmx::exit_reason::vmcall, "vmcall"},
      {vmx::exit_reason::vmclear, "vmclear"}, {vmx::exit_reason::vmlaunch, "vmlaunch"},
      {vmx::exit_reason::vmptrld, "vmptrld"}, {vmx::exit_reason::vmptrst, "vmptrst"},
      {vmx::exit_reason::vmread, "vmread"}, {vmx::exit_reason::vmresume, "vmresume"},
      {vmx::exit_reason::vmwrite, "vmwrite"}, {vmx::exit_reason::vmxoff, "vmxoff"},
      {vmx::exit_reason::vmxon, "vmxon"}, {vmx::exit_reason::cr_access, "cr_access"},
      {vmx::exit_reason::mov_dr, "mov_dr"}, {vmx::exit_reason::io_instruction, "io_instruction"},
      {vmx::exit_reason::rdmsr, "rdmsr"}, {vmx::exit_reason::wrmsr, "wrmsr"},
      {vmx::exit_reason::invalid_guest_state, "invalid_guest_state"},
      {vmx::exit_reason::msr_loading, "msr_loading"}, {vmx::exit_reason::mwait, "mwait"},
      {vmx::exit_reason::monitor_trap_flag, "monitor_trap_flag"}, {vmx::exit_reason::monitor, "monitor"},
      {vmx::exit_reason::pause, "pause"}, {vmx::exit_reason::machine_check_event, "machine_check_event"},
      {vmx::exit_reason::tpr_below_threshold, "tpr_below_threshold"},
      {vmx::exit_reason::apic_access, "apic_access"}, {vmx::exit_reason::virtualized_eoi, "virtualized_eoi"},
      {vmx::exit_reason::gdtr_idtr_access, "gdtr_idtr_access"},
      {vmx::exit_reason::ldtr_tr_access, "ldtr_tr_access"}, {vmx::exit_reason::ept_violation, "ept_violation"},
      {vmx::exit_reason::ept_misconfiguration, "ept_misconfiguration"}, {vmx::exit_reason::invept, "invept"},
      {vmx::exit_reason::rdtscp, "rdtscp"}, {vmx::exit_reason::preemption_timer, "preemption_timer"},
      {vmx::exit_reason::invvpid, "invvpid"}, {vmx::exit_reason::wbinvd_wbnoinvd, "wbinvd_wbnoinvd"},
      {vmx::exit_reason::xsetbv, "xsetbv"}, {vmx::exit_reason::apic_write, "apic_write"},
      {vmx::exit_reason::rdrand, "rdrand"}, {vmx::exit_reason::invpcid, "invpcid"},
      {vmx::exit_reason::vmfunc, "vmfunc"}, {vmx::exit_reason::encls, "encls"},
      {vmx::exit_reason::rdseed, "rdseed"}, {vmx::exit_reason::pml_full, "pml_full"},
      {vmx::exit_reason::xsaves, "xsaves"}, {vmx::exit_reason::xrstors, "xrstors"},
      {vmx::exit_reason::pconfig, "pconfig"}, {vmx::exit_reason::spp_event, "spp_event"},
      {vmx::exit_reason::umwait, "umwait"}, {vmx::exit_reason::tpause, "tpause"},
      {vmx::exit_reason::loadiwkey, "loadiwkey"}, {vmx::exit_reason::enclv, "enclv"},
      {vmx::exit_reason::enqcmd_pasid_translation_failure, "enqcmd_pasid_translation_failure"},
      {vmx::exit_reason::enqcmds_pasid_translation_failure, "enqcmds_pasid_translation_failure"},
      {vmx::exit_reason::bus_lock, "bus_lock"}, {vmx::exit_reason::instruction_timeout, "instruction_timeout"},
      {vmx::exit_reason::seamcall, "seamcall"}, {vmx::exit_reason::tdcall, "tdcall"},
      {vmx::exit_reason::rdmsrlist, "rdmsrlist"}, {vmx::exit_reason::wrmsrlist, "wrmsrlist"},
  });
}


TEST(HostedNames, VmxEventsAndEntry) {
  check_names<vmx::tlb_flush>("tlb_flush", 256, {
      {vmx::tlb_flush::none, "none"}, {vmx::tlb_flush::invvpid_single_context, "invvpid_single_context"},
  });
  check_names<vmx::injection_error>("injection_error", 256, {
      {vmx::injection_error::none, "none"}, {vmx::injection_error::reserved_type, "reserved_type"},
      {vmx::injection_error::mtf_unsupported, "mtf_unsupported"},
      {vmx::injection_error::nmi_vector, "nmi_vector"},
      {vmx::injection_error::exception_vector, "exception_vector"},
      {vmx::injection_error::other_event_vector, "other_event_vector"},
      {vmx::injection_error::error_code_mismatch, "error_code_mismatch"},
      {vmx::injection_error::reserved_bits, "reserved_bits"},
      {vmx::injection_error::error_code_reserved, "error_code_reserved"},
      {vmx::injection_error::instruction_length, "instruction_length"},
  });
  check_names<vmx::activity_state>("activity_state", 4096, {
      {vmx::activity_state::active, "active"}, {vmx::activity_state::hlt, "hlt"},
      {vmx::activity_state::shutdown, "shutdown"}, {vmx::activity_state::wait_for_sipi, "wait_for_sipi"},
  });
  check_names<vmx::entry_state_error>("entry_state_error", 256, {
      {vmx::entry_state_error::none, "none"},
      {vmx::entry_state_error::reserved_interruptibility_bits, "reserved_interruptibility_bits"},
      {vmx::entry_state_error::sti_and_mov_ss, "sti_and_mov_ss"},
      {vmx::entry_state_error::sti_with_if_clear, "sti_with_if_clear"},
      {vmx::entry_state_error::interrupt_under_shadow, "interrupt_under_shadow"},
      {vmx::entry_state_error::interrupt_with_if_clear, "interrupt_with_if_clear"},
      {vmx::entry_state_error::nmi_under_mov_ss, "nmi_under_mov_ss"},
      {vmx::entry_state_error::nmi_under_sti, "nmi_under_sti"},
      {vmx::entry_state_error::nmi_under_virtual_nmi_blocking, "nmi_under_virtual_nmi_blocking"},
      {vmx::entry_state_error::smi_blocking_outside_smm, "smi_blocking_outside_smm"},
      {vmx::entry_state_error::enclave_with_mov_ss, "enclave_with_mov_ss"},
      {vmx::entry_state_error::reserved_activity_state, "reserved_activity_state"},
      {vmx::entry_state_error::shadow_while_inactive, "shadow_while_inactive"},
      {vmx::entry_state_error::event_blocked_by_activity, "event_blocked_by_activity"},
  });
  check_names<vmx::interruption_type>("interruption_type", 256, {
      {vmx::interruption_type::external_interrupt, "external_interrupt"},
      {vmx::interruption_type::reserved, "reserved"}, {vmx::interruption_type::nmi, "nmi"},
      {vmx::interruption_type::hardware_exception, "hardware_exception"},
      {vmx::interruption_type::software_interrupt, "software_interrupt"},
      {vmx::interruption_type::privileged_software_exception, "privileged_software_exception"},
      {vmx::interruption_type::software_exception, "software_exception"},
      {vmx::interruption_type::other_event, "other_event"},
  });
  check_names<vmx::vm_entry_phase>("vm_entry_phase", 256, {
      {vmx::vm_entry_phase::controls, "controls"}, {vmx::vm_entry_phase::host_state, "host_state"},
      {vmx::vm_entry_phase::guest_state, "guest_state"}, {vmx::vm_entry_phase::msr_load, "msr_load"},
  });
  check_names<vmx::entry_failure_qualification>("entry_failure_qualification", 256, {
      {vmx::entry_failure_qualification::none, "none"},
      {vmx::entry_failure_qualification::pdpte_load, "pdpte_load"},
      {vmx::entry_failure_qualification::nmi_injection_blocked_by_sti, "nmi_injection_blocked_by_sti"},
      {vmx::entry_failure_qualification::vmcs_link_pointer, "vmcs_link_pointer"},
  });
  check_names<vmx::vm_entry_outcome>("vm_entry_outcome", 256, {
      {vmx::vm_entry_outcome::success, "success"}, {vmx::vm_entry_outcome::vm_fail_valid, "vm_fail_valid"},
      {vmx::vm_entry_outcome::entry_failure, "entry_failure"},
  });
  check_names<vmx::guest_segment>("guest_segment", 256, {
      {vmx::guest_segment::es, "es"}, {vmx::guest_segment::cs, "cs"}, {vmx::guest_segment::ss, "ss"},
      {vmx::guest_segment::ds, "ds"}, {vmx::guest_segment::fs, "fs"}, {vmx::guest_segment::gs, "gs"},
      {vmx::guest_segment::ldtr, "ldtr"}, {vmx::guest_segment::tr, "tr"},
  });
}

TEST(HostedNames, X86ApicBase) {
  check_names<x86::apic_mode>("apic_mode", 256, {
      {x86::apic_mode::disabled, "disabled"}, {x86::apic_mode::invalid, "invalid"},
      {x86::apic_mode::xapic, "xapic"}, {x86::apic_mode::x2apic, "x2apic"},
  });
  check_names<x86::apic_base_fault>("apic_base_fault", 256, {
      {x86::apic_base_fault::reserved_bit, "reserved_bit"}, {x86::apic_base_fault::invalid_state, "invalid_state"},
      {x86::apic_base_fault::x2apic_to_xapic, "x2apic_to_xapic"},
      {x86::apic_base_fault::disabled_to_x2apic, "disabled_to_x2apic"},
  });
}

TEST(HostedNames, X86MergeAndGpr) {
  check_names<x86::merge_verdict>("merge_verdict", 256, {
      {x86::merge_verdict::deliver_second, "deliver_second"}, {x86::merge_verdict::double_fault, "double_fault"},
      {x86::merge_verdict::shutdown, "shutdown"},
  });
  check_names<x86::gpr>("gpr", 256, {
      {x86::gpr::rax, "rax"}, {x86::gpr::rcx, "rcx"}, {x86::gpr::rdx, "rdx"}, {x86::gpr::rbx, "rbx"},
      {x86::gpr::rsp, "rsp"}, {x86::gpr::rbp, "rbp"}, {x86::gpr::rsi, "rsi"}, {x86::gpr::rdi, "rdi"},
      {x86::gpr::r8, "r8"}, {x86::gpr::r9, "r9"}, {x86::gpr::r10, "r10"}, {x86::gpr::r11, "r11"},
      {x86::gpr::r12, "r12"}, {x86::gpr::r13, "r13"}, {x86::gpr::r14, "r14"}, {x86::gpr::r15, "r15"},
  });
}

// Flags typed from SDM Tables 4-14..4-20 and 29-1..29-7.
TEST(HostedFormat, PteFlags) {
  EXPECT_EQ(paging::pte_flags(paging::pte{0x8000000012345063}, 1, true, true), "P RW A D XD");
  EXPECT_EQ(paging::pte_flags(paging::pte{0x8000000012345063}, 1, true, false), "P RW A D");  // no NXE: no XD
  EXPECT_EQ(paging::pte_flags(paging::pte{0x400010e7}, 2, true, true), "P RW US A D PS PAT");
  EXPECT_EQ(paging::pte_flags(paging::pte{0xa800000000abc167}, 1, true, true, true), "P RW US A D G PK=5 XD");
  EXPECT_EQ(paging::pte_flags(paging::pte{0x9b}, 1, true, false), "P RW PWT PCD PAT");
  EXPECT_EQ(paging::pte_flags(paging::pte{0x167}, 2, false, false), "P RW US A");  // D, G ignored in a table entry
  EXPECT_EQ(paging::pte_flags(paging::pte{0}, 1, true, true), "");
}

TEST(HostedFormat, EptFlags) {
  EXPECT_EQ(paging::ept_flags(paging::ept_entry{0x80000000006001f7}, 2, true), "R W X PS A IPAT WB SVE");
  EXPECT_EQ(paging::ept_flags(paging::ept_entry{0x3007}, 4, false), "R W X");
  EXPECT_EQ(paging::ept_flags(paging::ept_entry{0x5000 | 1 | (2 << 3) | 0x400 | 0x200}, 1, true), "R XU D MT=2");
  EXPECT_EQ(paging::ept_flags(paging::ept_entry{0x55033}, 1, true), "R W WB");
}

// #PF error-code bits, SDM 4.7 (Figure 4-12).
TEST(HostedFormat, PageFaultErrorCode) {
  EXPECT_EQ(to_string(x86::pfec{}), "0x0");
  EXPECT_EQ(to_string(x86::pfec{0x7}), "0x7 [P W U]");
  EXPECT_EQ(to_string(x86::pfec{0x80ff}), "0x80ff [P W U RSVD I PK SS HLAT SGX]");
  EXPECT_EQ(to_string(x86::pfec{0x10100}), "0x10100 [0x10100]");
  EXPECT_EQ(to_string(x86::pfec::write | x86::pfec::implicit_access), "0x2 [W implicit]");
  std::ostringstream os;
  os << (x86::pfec::rsvd | x86::pfec::present);
  EXPECT_EQ(os.str(), "0x9 [P RSVD]");
}

TEST(HostedFormat, Rights) {
  using paging::pte_access;
  EXPECT_EQ(paging::guest_rights(pte_access::write | pte_access::user), "rw- user");
  EXPECT_EQ(paging::guest_rights(pte_access::exec), "r-x supervisor");
  EXPECT_EQ(paging::guest_rights(pte_access::shadow_stack), "r-- supervisor shadow-stack");
  EXPECT_EQ(paging::ept_rights(pte_access::read | pte_access::exec | pte_access::user_exec), "r-xu");
  EXPECT_EQ(to_string(pte_access::read | pte_access::write), "write read");
  EXPECT_EQ(to_string(pte_access{}), "none");
  EXPECT_EQ(to_string(pte_access{0x80}), "pte_access(0x80)");
}

// The tables of examples/walk/make_test_dump.cpp, at guest-physical 0x100000.
struct dump_image {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x8000);
  void put(uint64_t gpa, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[gpa - 0x100000 + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  dump_image() {
    put(0x1017f0, 0x102027);
    put(0x102000, 0x103027);
    put(0x103008, 0x104027);
    put(0x104008, 0x8000000012345063ull);
    put(0x103010, 0x400010e7);
  }
};

TEST(HostedFormat, GuestWalk) {
  const dump_image img;
  const paging::flat_view mem(img.bytes.data(), img.bytes.size(), x86::gpa{0x100000});
  const x86::cr0 cr0{0x80010033};
  const x86::cr4 cr4{0x20};
  const x86::efer efer{0xd00};
  const auto root = x86::cr3_root(x86::cr3{0x101018}, x86::paging_mode::four_level, 52);
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
  const paging::guest_walker w(mmu, paging::cpu_properties{});
  const x86::gva va{0x7f0000201abc};
  EXPECT_EQ(paging::format_walk(w.state(), va, w.translate(mem, va)),
            "gva 0x00007f0000201abc: 4-level paging, root 0x0000000000101000\n"
            "  PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A\n"
            "  PDPTE @ 0x0000000000102000 = 0x0000000000103027  P RW US A\n"
            "  PDE   @ 0x0000000000103008 = 0x0000000000104027  P RW US A\n"
            "  PTE   @ 0x0000000000104008 = 0x8000000012345063  P RW A D XD\n"
            "  -> gpa 0x0000000012345abc (4 KiB page, rw- supervisor, pkey 0)\n");
  const x86::gva big{0x7f0000412345};
  EXPECT_EQ(paging::format_walk(w.state(), big, w.translate(mem, big)),
            "gva 0x00007f0000412345: 4-level paging, root 0x0000000000101000\n"
            "  PML4E @ 0x00000000001017f0 = 0x0000000000102027  P RW US A\n"
            "  PDPTE @ 0x0000000000102000 = 0x0000000000103027  P RW US A\n"
            "  PDE   @ 0x0000000000103010 = 0x00000000400010e7  P RW US A D PS PAT\n"
            "  -> gpa 0x0000000040012345 (2 MiB page, rwx user, pkey 0)\n");
  const x86::gva absent{0x7f0000600000};
  EXPECT_EQ(paging::format_walk(w.state(), absent, w.translate(mem, absent)),
            "gva 0x00007f0000600000: 4-level paging, root 0x0000000000101000\n"
            "  fault: not_present at PDE @ 0x0000000000103018 = 0x0000000000000000 (#PF error code 0x0)\n");
  const x86::gva hole{0x0000800000000000};
  EXPECT_EQ(paging::format_walk(w.state(), hole, w.translate(mem, hole)),
            "gva 0x0000800000000000: 4-level paging, root 0x0000000000101000\n"
            "  fault: non_canonical address (#GP)\n");
  paging::walk_fault no_pdptes{};
  no_pdptes.kind = paging::fault_kind::pdptes_not_loaded;
  no_pdptes.level = 3;
  EXPECT_EQ(paging::to_string(no_pdptes), "pdptes_not_loaded (a PAE walk without the PDPTE registers: load_pdptrs)");
  // A permission fault with its error code (write, user: W/R and U/S, SDM 4.7).
  paging::walk_request req{};
  req.linear = va;
  req.access = x86::pfec::write | x86::pfec::user;
  req.update_ad = false;
  auto m = mem;
  const auto r = w.walk(m, mmu, req);
  ASSERT_FALSE(r);
  EXPECT_EQ(to_string(r.error()),
            "permission at PTE @ 0x0000000000104008 = 0x8000000012345063 (#PF error code 0x7 [P W U])");
  std::ostringstream os;
  os << r.error().kind << ' ' << r.error().vector << ' ' << static_cast<paging::fault_kind>(200);
  EXPECT_EQ(os.str(), "permission #PF fault_kind(200)");
}

TEST(HostedFormat, EptWalkAndMappings) {
  std::vector<std::uint8_t> bytes(0x10000);
  auto put = [&](uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(0x1000, 0x2007);
  put(0x2000, 0x3007);
  put(0x3000, 0x4007);
  put(0x3008, 0x6000f7);  // 2 MiB, WB, IPAT
  put(0x4008, 0x55033);   // R W, WB
  put(0x4010, 0x66002);   // W without R: misconfigured
  const paging::flat_view mem(bytes.data(), bytes.size());
  const auto eptp = paging::make_ept_pointer(x86::hpa{0x1000}, 4, false);
  const auto w = paging::ept_walker::make(eptp, paging::ept_capabilities{});
  ASSERT_TRUE(w);
  EXPECT_EQ(paging::format_ept_walk(*w, x86::gpa{0x1abc}, w->translate(mem, x86::gpa{0x1abc})),
            "gpa 0x0000000000001abc: 4-level EPT, root 0x0000000000001000\n"
            "  EPT PML4E @ 0x0000000000001000 = 0x0000000000002007  R W X\n"
            "  EPT PDPTE @ 0x0000000000002000 = 0x0000000000003007  R W X\n"
            "  EPT PDE @ 0x0000000000003000 = 0x0000000000004007  R W X\n"
            "  EPT PTE @ 0x0000000000004008 = 0x0000000000055033  R W WB\n"
            "  -> hpa 0x0000000000055abc (4 KiB page, rw-, WB)\n");
  auto e = paging::ept_mappings<paging::flat_view>::make(eptp, paging::ept_capabilities{}, mem);
  ASSERT_TRUE(e);
  std::vector<std::string> lines;
  for (const auto& m : *e) lines.push_back(m ? to_string(*m) : "fault: " + to_string(m.error()));
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "0x0000000000001000 -> 0x0000000000055000  4 KiB rw- WB",
                       "fault: ept_misconfig at EPT PTE @ 0x0000000000004010 = 0x0000000000066002 (EPT "
                       "misconfiguration, gpa 0x0000000000002000)",
                       "0x0000000000200000 -> 0x0000000000600000  2 MiB rwx WB IPAT",
                   }));
  EXPECT_EQ(to_string(paging::mapping_step::truncated), "truncated");
}

TEST(HostedFormat, NptNestedWalk) {
  // A 4-level guest over 4-level nested tables (docs/svm.md's example, smaller).
  std::vector<std::uint8_t> bytes(0x40000);
  auto put = [&](uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  };
  put(0x10000, 0x11027);
  put(0x11000, 0x12027);
  put(0x12000, 0x13027);
  for (uint64_t p = 0; p < 8; ++p) put(0x13000 + 8 * p, (0x20000 + 0x1000 * p) | 0x67);
  put(0x21000, 0x2023);
  put(0x22000, 0x3023);
  put(0x23008, 0x4023);
  put(0x24008, 0x7023);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae,
                                             x86::efer::lme | x86::efer::lma, x86::gpa{0x1000});
  const paging::npt_walker_4level npt(x86::hpa{0x10000}, paging::npt_host{true, false}, {});
  const paging::walker_4level g(mmu, {});
  const paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level> n(g, npt);
  const paging::flat_view view(bytes.data(), bytes.size());
  auto mem = view;
  const auto r = n.walk(mem, mmu, {x86::gva{0x201abc}, {}});
  ASSERT_TRUE(r);
  EXPECT_EQ(paging::format_nested_walk(g.state(), x86::gva{0x201abc}, r, paging::walk_stage::npt, true),
            "gva 0x0000000000201abc: 4-level paging, root 0x0000000000001000\n"
            "  PML4E @ 0x0000000000001000 = 0x0000000000002023  P RW A\n"
            "  PDPTE @ 0x0000000000002000 = 0x0000000000003023  P RW A\n"
            "  PDE   @ 0x0000000000003008 = 0x0000000000004023  P RW A\n"
            "  PTE   @ 0x0000000000004008 = 0x0000000000007023  P RW A\n"
            "  -> gpa 0x0000000000007abc (4 KiB page, rwx supervisor, pkey 0)\n"
            "    NPT PML4E @ 0x0000000000010000 = 0x0000000000011027  P RW US A\n"
            "    NPT PDPTE @ 0x0000000000011000 = 0x0000000000012027  P RW US A\n"
            "    NPT PDE @ 0x0000000000012000 = 0x0000000000013027  P RW US A\n"
            "    NPT PTE @ 0x0000000000013038 = 0x0000000000027067  P RW US A D\n"
            "    -> hpa 0x0000000000027abc (4 KiB page, rwx user)\n");
  // The data page supervisor-only in the NPT: an #NPF on the final access.
  put(0x13038, 0x27063);
  const auto f = n.walk(mem, mmu, {x86::gva{0x201abc}, {}});
  ASSERT_FALSE(f);
  EXPECT_EQ(to_string(f.error()),
            "permission at NPT PTE @ 0x0000000000013038 = 0x0000000000027063 (#NPF on the final access, error code "
            "0x5 [P U], gpa 0x0000000000007abc)");
}

TEST(HostedFormat, GuestMapping) {
  paging::mapping m{};
  m.input = 0xffffffff80000000;
  m.size = 0x200000;
  m.page_shift = 21;
  m.output = x86::gpa{0x200000};
  m.rights = paging::pte_access::write | paging::pte_access::exec;
  m.pkey = 3;
  m.memory_type = 5;
  EXPECT_EQ(to_string(m), "0xffffffff80000000 -> 0x0000000000200000  2 MiB rwx supervisor pkey 3 pat 5");
}

TEST(HostedFormat, Vmx) {
  EXPECT_EQ(to_string(vmx::vm_fail::fail_valid(vmx::vmx_instruction::vmwrite,
                                               vmx::vm_instruction_error::unsupported_vmcs_component, 0x4000)),
            "VMfailValid in vmwrite: error 12 (unsupported_vmcs_component), field 0x4000");
  EXPECT_EQ(to_string(vmx::vm_fail::fail_invalid(vmx::vmx_instruction::vmptrld)), "VMfailInvalid in vmptrld");
  EXPECT_EQ(to_string(vmx::exit_reason_field{0x80000021}), "invalid_guest_state (VM-entry failure)");
  EXPECT_EQ(to_string(vmx::exit_reason_field{48}), "ept_violation");
  std::ostringstream os;
  os << vmx::exit_reason::cpuid << ' ' << static_cast<vmx::exit_reason>(35);
  EXPECT_EQ(os.str(), "cpuid exit_reason(35)");
}

TEST(HostedFormat, VmEntryVerdict) {
  static constexpr vmx::vm_entry_rule_info guest{"a_guest_rule", "27.3.1.1", vmx::vm_entry_phase::guest_state};
  EXPECT_EQ(to_string(vmx::make_verdict(guest, vmx::entry_fail_raw(0x6800, 0x20))),
            "entry_failure: invalid_guest_state (VM-entry failure), qualification 0x0, rule a_guest_rule "
            "(SDM 27.3.1.1), guest_cr0 (0x6800) = 0x20");
  static constexpr vmx::vm_entry_rule_info control{"a_control_rule", "27.2.1.1", vmx::vm_entry_phase::controls};
  EXPECT_EQ(to_string(vmx::make_verdict(control, vmx::entry_fail_raw(0x4012, 0x1, 0x6800, 0x2))),
            "vm_fail_valid: error 7 (entry_invalid_control_fields), rule a_control_rule (SDM 27.2.1.1), "
            "vm_entry_controls (0x4012) = 0x1, guest_cr0 (0x6800) = 0x2");
  EXPECT_EQ(to_string(vmx::vm_entry_verdict{}), "success");
}

TEST(HostedFormat, EmulateOutcome) {
  using emulate::outcome;
  EXPECT_EQ(to_string(outcome::make_exception(x86::vector::gp, 0)), "exception #GP error code 0x0");
  EXPECT_EQ(to_string(outcome::make_exception(x86::vector::pf, 2, 0xdead000)),
            "exception #PF error code 0x2 cr2 0xdead000");
  EXPECT_EQ(to_string(outcome::make_exception(x86::vector::ud)), "exception #UD");
  EXPECT_EQ(to_string(outcome::make_done(emulate::event::halt)), "done (halt)");
  EXPECT_EQ(to_string(outcome::make_done()), "done");
  auto u = outcome::make_unsupported(emulate::unsupported_reason::instruction);
  u.op = emulate::mnemonic::and_;
  EXPECT_EQ(to_string(u), "unsupported (instruction: and)");
  outcome io{};
  io.kind = emulate::outcome_kind::needs_io;
  io.write = true;
  io.address = 0x70;
  io.size = 1;
  io.value = 0x8f;
  EXPECT_EQ(to_string(io), "needs_io write port 0x70 size 1 value 0x8f");
}

#if defined(__cpp_lib_format)
TEST(HostedFormat, StdFormat) {
  EXPECT_EQ(std::format("{}|{:>12}|{}", paging::fault_kind::not_present, x86::vector::pf, vmx::exit_reason::hlt),
            "not_present|         #PF|hlt");
}
#endif

}  // namespace
