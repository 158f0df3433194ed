// SPDX-License-Identifier: MIT
// EXITINFO decoders, EVENTINJ/EXITINTINFO encodings, ASIDs, TLB control and clean bits, with
// golden values typed from AMD APM Vol. 2 (15.10.2 Figure 15-2, 15.11, 15.20 Figure 15-3,
// 15.25.6, 15.33.1, 15.16, 15.15.3).
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/svm/clean_bits.hpp>
#include <hvkit/svm/event_injection.hpp>
#include <hvkit/svm/exit_info.hpp>
#include <hvkit/svm/intercepts.hpp>
#include <hvkit/svm/tlb.hpp>
#include <hvkit/x86/event.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;

namespace {

TEST(ExitInfo, Ioio) {
  // OUT DX, AL to port 3F8h: TYPE=0, SZ8 (bit 4), A16 not reported for non-string: 0x03f8'0010.
  const svm::ioio_info out{0x03f8'0010};
  EXPECT_FALSE(out.in());
  EXPECT_EQ(out.port(), 0x3f8);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_FALSE(out.string());
  // REP INSW with 64-bit addressing, ES (SEG=0), port 1F0h: IN(0) STR(2) REP(3) SZ16(5) A64(9).
  const svm::ioio_info ins{0x01f0'0000u | 1u | 4u | 8u | 0x20u | 0x200u};
  EXPECT_TRUE(ins.in());
  EXPECT_TRUE(ins.string());
  EXPECT_TRUE(ins.rep());
  EXPECT_EQ(ins.size(), 2u);
  EXPECT_EQ(ins.address_size(), 64u);
  EXPECT_EQ(ins.segment(), 0u);
  // IN EAX, 71h: SZ32 (bit 6).
  const svm::ioio_info in32{0x0071'0041};
  EXPECT_EQ(in32.size(), 4u);
  EXPECT_EQ(in32.port(), 0x71);
  // OUTSB through DS (SEG=3 in bits 12:10) with 32-bit addressing (A32, bit 8).
  const svm::ioio_info outs{0x0080'0000u | 4u | 0x10u | 0x100u | (3u << 10)};
  EXPECT_EQ(outs.segment(), 3u);
  EXPECT_EQ(outs.address_size(), 32u);
  EXPECT_EQ(svm::ioio_info{0x10u | 0x20u}.size(), 0u);  // two size bits: malformed
}

TEST(ExitInfo, Msr) {
  EXPECT_FALSE(svm::msr_is_write(0));
  EXPECT_TRUE(svm::msr_is_write(1));
}

TEST(ExitInfo, CrAccessWithAndWithoutDecodeAssists) {
  using S = svm::cr_access::source;
  // MOV CR0, RBX with decode assists: bit 63 and GPR 3.
  EXPECT_EQ(svm::decode_cr_access(0x8000'0000'0000'0003ull, true), (svm::cr_access{S::mov, 3}));
  EXPECT_EQ(svm::decode_cr_access(0x8000'0000'0000'000full, true), (svm::cr_access{S::mov, 15}));
  // LMSW / CLTS: bit 63 clear.
  EXPECT_EQ(svm::decode_cr_access(0, true), (svm::cr_access{S::other, 0}));
  // No decode assists (Bochs' models): nothing may be read from EXITINFO1.
  EXPECT_EQ(svm::decode_cr_access(0x8000'0000'0000'0003ull, false), (svm::cr_access{S::not_decoded, 0}));
  EXPECT_EQ(svm::cr_write_trap_value(0x8005'0033), 0x8005'0033u);
}

TEST(ExitInfo, Exceptions) {
  const auto pf = svm::decode_exception(svm::exit_code{0x4e}, 0x7, 0xdead'b000);
  EXPECT_EQ(pf.vector, 14u);
  EXPECT_EQ(pf.error_code, 7u);
  EXPECT_EQ(pf.fault_address().value(), 0xdead'b000u);
  const auto gp = svm::decode_exception(svm::exception_exit(13), 0x10, 0);
  EXPECT_EQ(gp.vector, 13u);
  EXPECT_EQ(gp.error_code, 0x10u);
  EXPECT_EQ(svm::swint_vector(0x80), 0x80);
  EXPECT_EQ(svm::invlpg_address(0xffff'8000'0000'1000ull).value(), 0xffff'8000'0000'1000ull);
}

TEST(ExitInfo, NestedPageFault) {
  // A write to a not-present nested entry during the final access: P=0, RW=1, US=1, bit 32.
  const auto a = svm::decode_npf(0x1'0000'0006ull, 0x1234'5000);
  EXPECT_FALSE(a.error.is_present());
  EXPECT_TRUE(a.error.is_write());
  EXPECT_TRUE(a.error.is_user());
  EXPECT_TRUE(a.error.is_final_translation());
  EXPECT_FALSE(a.error.is_guest_page_table_walk());
  EXPECT_EQ(a.address.value(), 0x1234'5000u);
  // A guest page-table read hitting a reserved bit: P=1, RSV=1, US=1, bit 33.
  const svm::npf_error_code b{0x2'0000'000dull};
  EXPECT_TRUE(b.is_present());
  EXPECT_TRUE(b.is_reserved());
  EXPECT_FALSE(b.is_write());
  EXPECT_TRUE(b.is_guest_page_table_walk());
  EXPECT_FALSE(b.is_final_translation());
  EXPECT_EQ(b.pfec(), 0xdu);
  // An instruction fetch (ID, bit 4).
  EXPECT_TRUE(svm::npf_error_code{0x1'0000'0015ull}.is_fetch());
  EXPECT_EQ(svm::npf_error_code::make(0x7, true, false).raw(), 0x1'0000'0007ull);
  EXPECT_EQ(svm::npf_error_code::make(0x5, false, true).raw(), 0x2'0000'0005ull);
}

TEST(EventInjection, GoldenEncodings) {
  // Figure 15-3: vector 7:0, TYPE 10:8, EV 11, V 31, ERRORCODE 63:32.
  EXPECT_EQ(svm::to_eventinj(x86::event::exception(x86::vector::gp, 0x18, x86::vendor::amd)).eventinj.raw(), 0x0000'0018'8000'0b0dull);
  EXPECT_EQ(svm::to_eventinj(x86::event::exception(x86::vector::pf, 0x2, x86::vendor::amd)).eventinj.raw(), 0x0000'0002'8000'0b0eull);
  EXPECT_EQ(svm::to_eventinj(x86::event::exception(x86::vector::ud, 0, x86::vendor::amd)).eventinj.raw(), 0x8000'0306ull);
  EXPECT_EQ(svm::to_eventinj(x86::event::exception(x86::vector::gp, 0x18, x86::vendor::amd, false)).eventinj.raw(), 0x8000'030dull);
  EXPECT_EQ(svm::to_eventinj(x86::event::nmi()).eventinj.raw(), 0x8000'0202ull);
  EXPECT_EQ(svm::to_eventinj(x86::event::external_interrupt(0x20)).eventinj.raw(), 0x8000'0020ull);
  const auto intn = svm::to_eventinj(x86::event::int_n(0x80, 2));
  EXPECT_EQ(intn.eventinj.raw(), 0x8000'0480ull);
  EXPECT_EQ(intn.rip_advance, 2);
  const auto bp = svm::to_eventinj(x86::event::int3());
  EXPECT_EQ(bp.eventinj.raw(), 0x8000'0303ull);  // TYPE 3: INT3 is an exception in SVM's classes
  EXPECT_EQ(bp.rip_advance, 1);
  const auto icebp = svm::to_eventinj(x86::event::int1());
  EXPECT_EQ(icebp.eventinj.raw(), 0x8000'0301ull);  // TYPE 3: #DB without the DPL check
  EXPECT_EQ(icebp.rip_advance, 1);
  // #DF and AMD's #VC / #SX push an error code.
  EXPECT_EQ(svm::to_eventinj(x86::event::exception(x86::vector::df, 0, x86::vendor::amd)).eventinj.raw(), 0x8000'0b08ull);
  EXPECT_TRUE(svm::to_eventinj(x86::event::exception(x86::vector::sx, 1, x86::vendor::amd)).eventinj.has_error_code());
}

TEST(EventInjection, ExitIntInfoRoundTrips) {
  const x86::event evs[] = {x86::event::exception(x86::vector::pf, 0x6, x86::vendor::amd), x86::event::nmi(),
                            x86::event::external_interrupt(0x31), x86::event::exception(x86::vector::de, 0, x86::vendor::amd)};
  for (const auto& e : evs) EXPECT_EQ(svm::to_event(svm::to_eventinj(e).eventinj), e);
  const auto bp = svm::to_event(svm::event_info{0x8000'0303ull});
  EXPECT_EQ(bp.kind, x86::event_kind::software_exception);
  EXPECT_EQ(svm::to_event(svm::event_info{0x8000'0304ull}).kind, x86::event_kind::software_exception);  // INTO
  EXPECT_EQ(svm::to_event(svm::event_info{0x8000'0301ull}).kind, x86::event_kind::hardware_exception);  // #DB or INT1
  EXPECT_EQ(svm::to_event(svm::event_info{0x8000'0403ull}).kind, x86::event_kind::software_interrupt);  // INT 3 (CD 03)
  const auto swi = svm::to_event(svm::event_info{0x8000'0421ull});
  EXPECT_EQ(swi.kind, x86::event_kind::software_interrupt);
  EXPECT_EQ(swi.vector, 0x21);
}

TEST(EventInjection, VmrunChecks) {
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0306ull}), svm::injection_error::none);
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0106ull}), svm::injection_error::reserved_type);
  for (std::uint64_t t : {5u, 6u, 7u})
    EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0000ull | (t << 8)}), svm::injection_error::reserved_type);
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'1306ull}), svm::injection_error::reserved_bits);
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x0000'0106ull}), svm::injection_error::none);  // V=0
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0305ull}, true), svm::injection_error::impossible_in_mode);
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0305ull}, false), svm::injection_error::none);
}

TEST(EventInjection, InjectMergesWithThePendingEvent) {
  svm::soft_vmcb v;
  EXPECT_EQ(svm::inject_exception(v, {x86::vector::gp, 0}), x86::merge_verdict::deliver_second);
  EXPECT_EQ(svm::read_injection(v).raw(), 0x8000'0b0dull);
  // #PF while #GP pending: contributory then page fault -> deliver #PF (SDM Table 6-5).
  // #GP while #GP pending: contributory + contributory -> #DF(0).
  EXPECT_EQ(svm::inject_exception(v, {x86::vector::gp, 0}), x86::merge_verdict::double_fault);
  EXPECT_EQ(svm::read_injection(v).raw(), 0x8000'0b08ull);
  // #GP while #DF pending: shutdown, nothing written.
  EXPECT_EQ(svm::inject_exception(v, {x86::vector::gp, 0}), x86::merge_verdict::shutdown);
  EXPECT_EQ(svm::read_injection(v).raw(), 0x8000'0b08ull);
}

TEST(EventInjection, InstructionEventsAdvanceRip) {
  svm::soft_vmcb v;
  svm::write(v, svm::fields::rip, std::uint64_t{0x1000});
  svm::write_injection(v, svm::to_eventinj(x86::event::int_n(0x21, 2)));
  EXPECT_EQ(svm::read(v, svm::fields::rip), 0x1002u);
  EXPECT_EQ(svm::read(v, svm::fields::event_injection), 0x8000'0421ull);
}

TEST(Tlb, ControlValues) {
  EXPECT_EQ(static_cast<int>(svm::tlb_control::flush_all), 1);
  EXPECT_EQ(static_cast<int>(svm::tlb_control::flush_asid), 3);
  EXPECT_EQ(static_cast<int>(svm::tlb_control::flush_asid_non_global), 7);
  EXPECT_TRUE(svm::valid_tlb_control(1, false));
  EXPECT_FALSE(svm::valid_tlb_control(3, false));
  EXPECT_TRUE(svm::valid_tlb_control(3, true));
  EXPECT_FALSE(svm::valid_tlb_control(2, true));
  EXPECT_EQ(svm::flush_guest(false), svm::tlb_control::flush_all);
  EXPECT_EQ(svm::flush_guest(true), svm::tlb_control::flush_asid);
  svm::soft_vmcb v;
  svm::set_asid(v, 5, svm::tlb_control::flush_asid);
  EXPECT_EQ(v.page().bytes[0x058], 5);
  EXPECT_EQ(v.page().bytes[0x05c], 3);
}

TEST(Tlb, AsidAllocatorGenerations) {
  svm::asid_allocator alloc{4};  // ASIDs 1, 2, 3
  svm::asid_allocator::assignment a, b, c, d;
  EXPECT_EQ(alloc.assign(a), svm::tlb_control::do_nothing);
  EXPECT_EQ(alloc.assign(b), svm::tlb_control::do_nothing);
  EXPECT_EQ(alloc.assign(c), svm::tlb_control::do_nothing);
  EXPECT_EQ(a.asid, 1u);
  EXPECT_EQ(c.asid, 3u);
  EXPECT_EQ(alloc.assign(a), svm::tlb_control::do_nothing);  // still current
  EXPECT_EQ(alloc.assign(d), svm::tlb_control::flush_all);   // out of ASIDs: new generation
  EXPECT_EQ(d.asid, 1u);
  EXPECT_EQ(alloc.assign(a), svm::tlb_control::do_nothing);  // re-assigned in the new generation
  EXPECT_EQ(a.asid, 2u);
  EXPECT_NE(a.asid, d.asid);
}

TEST(CleanBits, GroupsOfTheFields) {
  namespace f = svm::fields;
  EXPECT_EQ(svm::clean_bit_of(f::intercept_misc1.offset), 0);
  EXPECT_EQ(svm::clean_bit_of(f::tsc_offset.offset), 0);
  EXPECT_EQ(svm::clean_bit_of(f::msrpm_base_pa.offset), 1);
  EXPECT_EQ(svm::clean_bit_of(f::guest_asid.offset), 2);
  EXPECT_EQ(svm::clean_bit_of(f::interrupt_control.offset), 3);
  EXPECT_EQ(svm::clean_bit_of(f::n_cr3.offset), 4);
  EXPECT_EQ(svm::clean_bit_of(f::g_pat.offset), 4);
  EXPECT_EQ(svm::clean_bit_of(f::cr0.offset), 5);
  EXPECT_EQ(svm::clean_bit_of(f::efer.offset), 5);
  EXPECT_EQ(svm::clean_bit_of(f::dr7.offset), 6);
  EXPECT_EQ(svm::clean_bit_of(f::gdtr_base.offset), 7);
  EXPECT_EQ(svm::clean_bit_of(f::cs_attrib.offset), 8);
  EXPECT_EQ(svm::clean_bit_of(f::cpl.offset), 8);
  EXPECT_EQ(svm::clean_bit_of(f::cr2.offset), 9);
  EXPECT_EQ(svm::clean_bit_of(f::dbgctl.offset), 10);
  EXPECT_EQ(svm::clean_bit_of(f::avic_backing_page.offset), 11);
  EXPECT_EQ(svm::clean_bit_of(f::rip.offset), -1);
  EXPECT_EQ(svm::clean_bit_of(f::event_injection.offset), -1);
  EXPECT_EQ(svm::clean_bit_of(f::tlb_control.offset), -1);
  EXPECT_EQ(svm::clean_bit_of(f::fs_base.offset), -1);  // FS/GS/TR/LDTR come from VMLOAD
}

TEST(CleanBits, TrackerMarksChangedGroupsDirty) {
  svm::soft_vmcb v;
  svm::clean_tracker t{v, true};
  svm::write(t, svm::fields::cr0, std::uint64_t{0x11});
  t.prepare_vmrun();  // first run: nothing clean
  EXPECT_EQ(svm::read(v, svm::fields::vmcb_clean), 0u);
  svm::write(t, svm::fields::cr0, std::uint64_t{0x11});  // unchanged: stays clean
  svm::write(t, svm::fields::rip, std::uint64_t{0x2000});  // not in any group
  t.prepare_vmrun();
  EXPECT_EQ(svm::read(v, svm::fields::vmcb_clean), 0xfffu);
  svm::write(t, svm::fields::cr4, std::uint64_t{0x20});
  svm::set_intercept(t, svm::intercept::hlt);
  t.prepare_vmrun();
  EXPECT_EQ(svm::read(v, svm::fields::vmcb_clean), 0xfffu & ~0x21u);  // CRx and I dirty
  t.invalidate();
  t.prepare_vmrun();
  EXPECT_EQ(svm::read(v, svm::fields::vmcb_clean), 0u);
}

TEST(CleanBits, NoOpWithoutSupport) {
  svm::soft_vmcb v;
  svm::clean_tracker t{v, false};
  svm::write(t, svm::fields::cr0, std::uint64_t{0x11});
  v.reset_counts();
  t.prepare_vmrun();
  EXPECT_EQ(v.stores(), 0u);
  EXPECT_EQ(svm::read(v, svm::fields::vmcb_clean), 0u);
}

}  // namespace

#include <hvkit/vmx/event_injection.hpp>

namespace {

// One vocabulary, two encodings: each x86::event gives the VMX injection the vmx constructors
// (typed from SDM Table 25-17) give, and the EVENTINJ typed from APM Figure 15-3.
TEST(EventVocabulary, VmxAndSvmAgreeWhereTheArchitectureDoes) {
  namespace vmx = hvkit::vmx;
  struct row {
    x86::event e;
    vmx::injected_event vmx_expected;
    std::uint64_t svm_expected;
  };
  const row rows[] = {
      {x86::event::exception(x86::vector::gp, 0x18, x86::vendor::amd), vmx::hardware_exception(x86::vector::gp, 0x18), 0x0000'0018'8000'0b0dull},
      {x86::event::exception(x86::vector::pf, 2, x86::vendor::amd), vmx::hardware_exception(x86::vector::pf, 2), 0x0000'0002'8000'0b0eull},
      {x86::event::exception(x86::vector::ud, 0, x86::vendor::amd), vmx::hardware_exception(x86::vector::ud), 0x8000'0306ull},
      {x86::event::exception(x86::vector::gp, 5, x86::vendor::amd, false), vmx::hardware_exception(x86::vector::gp, 5, false), 0x8000'030dull},
      {x86::event::nmi(), vmx::nmi(), 0x8000'0202ull},
      {x86::event::external_interrupt(0x30), vmx::external_interrupt(0x30), 0x8000'0030ull},
      {x86::event::int_n(0x80, 2), vmx::software_interrupt(0x80, 2), 0x8000'0480ull},
      {x86::event::int3(), vmx::int3(1), 0x8000'0303ull},
      {x86::event::into(), vmx::into(1), 0x8000'0304ull},
      {x86::event::int1(), vmx::privileged_software_exception(1), 0x8000'0301ull},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(vmx::from_event(r.e), r.vmx_expected) << int(r.e.vector);
    EXPECT_EQ(vmx::to_event(r.vmx_expected), r.e) << int(r.e.vector);
    EXPECT_EQ(svm::to_eventinj(r.e).eventinj.raw(), r.svm_expected) << int(r.e.vector);
  }
}

}  // namespace
