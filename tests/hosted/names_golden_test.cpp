// SPDX-License-Identifier: MIT
// The hosted names of the svm/ and paging/ enumerations (svm/hosted/print.hpp,
// paging/hosted/image.hpp): every value of the underlying type, 0 to 255. A value the type
// lists prints as the enumerator's identifier (the convention of x86/hosted/format.hpp), typed
// here by hand; every other value prints as "type(N)". Where the enumerator stands for an
// architectural encoding (TLB_CONTROL, the VMCB clean bits, the state-save segments), the
// encoding is checked too, against the AMD APM Vol. 2 table quoted at the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include <hvkit/paging/hosted/image.hpp>
#include <hvkit/paging/hosted/print.hpp>
#include <hvkit/svm/hosted/print.hpp>

namespace svm = hvkit::svm;
namespace paging = hvkit::paging;

namespace {

// check_names calls name() and to_string() unqualified: argument-dependent lookup must find
// every printer next to its type (paging::role_sync's in hvkit::paging, though svm re-exports
// the type and svm/hosted/print.hpp brings its printer along).

// Every value 0..255 of E: the listed ones print as their identifier, the others as "type(N)".
template <class E>
void check_names(const std::map<unsigned, std::string>& listed, const std::string& type) {
  for (unsigned v = 0; v < 256; ++v) {
    const E e = static_cast<E>(v);
    const auto it = listed.find(v);
    if (it != listed.end()) {
      EXPECT_EQ(std::string(name(e)), it->second) << type << " " << v;
      EXPECT_EQ(to_string(e), it->second) << type << " " << v;
    } else {
      EXPECT_TRUE(name(e).empty()) << type << " " << v;
      EXPECT_EQ(to_string(e), type + "(" + std::to_string(v) + ")");
    }
  }
}

// APM Vol. 2, 15.16.1 "TLB Flush" (TLB_CONTROL, VMCB offset 058h bits 39:32):
//   "00h—Do nothing. 01h—Flush entire TLB (all entries, all ASIDs) on VMRUN. ...
//    03h—Flush this guest's TLB entries. 07h—Flush this guest's non-global TLB entries."
TEST(hosted_names_golden, svm_tlb_control) {
  check_names<svm::tlb_control>({{0x00, "do_nothing"}, {0x01, "flush_all"}, {0x03, "flush_asid"},
                                 {0x07, "flush_asid_non_global"}},
                                "tlb_control");
}

// APM Vol. 2, 15.15.3 "VMCB Clean Field", the table of clean bits: bit 0 I (intercepts, TSC
// offset, pause filter), 1 IOPM (IOPM_BASE, MSRPM_BASE), 2 ASID, 3 TPR (V_TPR, V_IRQ ...),
// 4 NP (nested paging: NCR3, G_PAT), 5 CRx (CR0, CR3, CR4, EFER), 6 DRx (DR6, DR7), 7 DT
// (GDT/IDT base and limit), 8 SEG (CS, DS, SS, ES, CPL), 9 CR2, 10 LBR (DbgCtlMsr, last-branch
// MSRs), 11 AVIC (AVIC APIC_BAR, backing page, logical and physical tables).
TEST(hosted_names_golden, svm_clean_bits) {
  check_names<svm::clean_bit>({{0, "intercepts"},
                               {1, "iopm"},
                               {2, "asid"},
                               {3, "tpr"},
                               {4, "np"},
                               {5, "crx"},
                               {6, "drx"},
                               {7, "dt"},
                               {8, "seg"},
                               {9, "cr2"},
                               {10, "lbr"},
                               {11, "avic"}},
                              "clean_bit");
  // The groups of some VMCB fields (APM Appendix B, Table B-1 and B-2 offsets): the intercept
  // vectors at 000h-017h (I), IOPM_BASE_PA 040h (IOPM), guest ASID 058h (ASID), V_TPR 060h
  // (TPR), N_CR3 0B0h (NP), CR4 548h and CR0 558h (CRx), DR7 560h (DRx), GDTR 460h (DT),
  // CPL 4CBh and ES 400h (SEG), CR2 640h, DBGCTL 670h (LBR).
  EXPECT_EQ(svm::clean_bit_of(0x000), 0);
  EXPECT_EQ(svm::clean_bit_of(0x040), 1);
  EXPECT_EQ(svm::clean_bit_of(0x058), 2);
  EXPECT_EQ(svm::clean_bit_of(0x060), 3);
  EXPECT_EQ(svm::clean_bit_of(0x0b0), 4);
  EXPECT_EQ(svm::clean_bit_of(0x548), 5);
  EXPECT_EQ(svm::clean_bit_of(0x558), 5);
  EXPECT_EQ(svm::clean_bit_of(0x560), 6);
  EXPECT_EQ(svm::clean_bit_of(0x460), 7);
  EXPECT_EQ(svm::clean_bit_of(0x4cb), 8);
  EXPECT_EQ(svm::clean_bit_of(0x400), 8);
  EXPECT_EQ(svm::clean_bit_of(0x640), 9);
  EXPECT_EQ(svm::clean_bit_of(0x670), 10);
}

// APM Vol. 2, Appendix B, Table B-2 "VMCB Layout, State Save Area": ES at 000h, CS 010h,
// SS 020h, DS 030h, FS 040h, GS 050h, GDTR 060h, LDTR 070h, IDTR 080h, TR 090h (the state-save
// area starts at VMCB offset 400h). The enum value is the 16-byte slot.
TEST(hosted_names_golden, svm_segments) {
  check_names<svm::segment>({{0, "es"}, {1, "cs"}, {2, "ss"}, {3, "ds"}, {4, "fs"}, {5, "gs"}, {7, "ldtr"}, {9, "tr"}},
                            "segment");
  EXPECT_EQ(svm::offset_of(svm::segment::es), 0x400u);
  EXPECT_EQ(svm::offset_of(svm::segment::cs), 0x410u);
  EXPECT_EQ(svm::offset_of(svm::segment::ss), 0x420u);
  EXPECT_EQ(svm::offset_of(svm::segment::ds), 0x430u);
  EXPECT_EQ(svm::offset_of(svm::segment::fs), 0x440u);
  EXPECT_EQ(svm::offset_of(svm::segment::gs), 0x450u);
  EXPECT_EQ(svm::offset_of(svm::segment::ldtr), 0x470u);
  EXPECT_EQ(svm::offset_of(svm::segment::tr), 0x490u);
}

TEST(hosted_names_golden, svm_enumerations) {
  check_names<svm::injection_error>(
      {{0, "none"}, {1, "reserved_type"}, {2, "reserved_bits"}, {3, "impossible_in_mode"}, {4, "not_an_exception"}},
      "injection_error");
  check_names<svm::not_npf>({{0, "guest_stage"}, {1, "other_stage"}, {2, "host_side"}}, "not_npf");
  check_names<svm::cr0_write_intercept>({{0, "all"}, {1, "selective"}, {2, "none"}}, "cr0_write_intercept");
  check_names<paging::role_sync>({{0, "unchanged"}, {1, "wp_refreshed"}, {2, "rebuilt"}}, "role_sync");
  for (unsigned v = 0; v < 256; ++v) {
    const auto s = static_cast<svm::cr_access::source>(v);
    const char* want = v == 0 ? "mov" : v == 1 ? "other" : v == 2 ? "not_decoded" : "";
    EXPECT_EQ(std::string(svm::name(s)), want) << v;
  }
}

// The cr_access decoding as text: MOV names the GPR (APM 15.8.1 "Decode Assist": EXITINFO1
// bits 3:0 "the number of the GPR"), the others name the instructions.
TEST(hosted_names_golden, svm_cr_access_text) {
  svm::cr_access a{};
  a.from = svm::cr_access::source::mov;
  a.gpr = 3;
  EXPECT_EQ(to_string(a), "MOV with rbx");
  a.from = svm::cr_access::source::other;
  EXPECT_EQ(to_string(a), "CLTS, LMSW or SMSW");
  a.from = svm::cr_access::source::not_decoded;
  EXPECT_EQ(to_string(a), "not decoded (no decode assists)");
  a.from = static_cast<svm::cr_access::source>(9);
  EXPECT_EQ(to_string(a), "cr_access(9)");
}

TEST(hosted_names_golden, paging_image_enumerations) {
  check_names<paging::region_error>(
      {{0, "none"}, {1, "unsorted"}, {2, "overlapping"}, {3, "wraps"}, {4, "no_data"}}, "region_error");
  check_names<paging::elf_core_error>({{0, "none"},
                                       {1, "truncated"},
                                       {2, "not_elf"},
                                       {3, "elf32"},
                                       {4, "big_endian"},
                                       {5, "not_core"},
                                       {6, "not_x86_64"},
                                       {7, "bad_program_headers"},
                                       {8, "segment_outside_file"},
                                       {9, "too_many_regions"},
                                       {10, "overlapping"},
                                       {11, "address_wraps"},
                                       {12, "bad_note"}},
                                      "elf_core_error");
  check_names<paging::read_failure>({{0, "translation"}, {1, "memory"}}, "read_failure");
}

}  // namespace
