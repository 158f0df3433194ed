// SPDX-License-Identifier: MIT
// The paging printers (paging/hosted/print.hpp) on what print_test.cpp leaves out: the SDM's
// names of the paging-structure entries (Vol. 3A 4.5: "PML5 entry (PML5E)", "PML4E", "PDPTE",
// "PDE", "PTE"), the page sizes of Chapter 4 ("4-KByte", "2-MByte", "4-MByte" with 32-bit
// paging, "1-GByte"), and the one-line walk faults of the kinds without an architectural
// fault (unbacked memory, entries that kept changing) in each stage, in the format the
// header documents.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <hvkit/paging/hosted/print.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

namespace {

unsigned rt(unsigned v) {
  volatile unsigned x = v;
  return x;
}

TEST(paging_text_golden, entry_names) {
  EXPECT_EQ(paging::entry_name(rt(5)), "PML5E");
  EXPECT_EQ(paging::entry_name(rt(4)), "PML4E");
  EXPECT_EQ(paging::entry_name(rt(3)), "PDPTE");
  EXPECT_EQ(paging::entry_name(rt(2)), "PDE");
  EXPECT_EQ(paging::entry_name(rt(1)), "PTE");
  EXPECT_EQ(paging::entry_name(rt(0)), "?");
  EXPECT_EQ(paging::entry_name(rt(6)), "?");
}

TEST(paging_text_golden, page_sizes) {
  EXPECT_EQ(paging::page_size_name(rt(12)), "4 KiB");
  EXPECT_EQ(paging::page_size_name(rt(21)), "2 MiB");
  EXPECT_EQ(paging::page_size_name(rt(22)), "4 MiB");
  EXPECT_EQ(paging::page_size_name(rt(30)), "1 GiB");
  EXPECT_EQ(paging::page_size_name(rt(32)), "4 GiB");
  EXPECT_EQ(paging::page_size_name(rt(39)), "2^39 bytes");
}

TEST(paging_text_golden, faults_without_an_architectural_fault) {
  paging::walk_fault f;
  f.kind = paging::fault_kind::unbacked;
  f.guest_physical = x86::gpa{0x1234000};
  EXPECT_EQ(to_string(f), "unbacked (not backed: 0x0000000001234000)");
  f.kind = paging::fault_kind::retry_exhausted;
  EXPECT_EQ(to_string(f), "retry_exhausted (the entries kept changing)");
  f.kind = paging::fault_kind::invalid_pdpte;
  f.vector = x86::vector::gp;
  EXPECT_EQ(to_string(f), "invalid_pdpte (#GP at the PDPTE load)");
  f.kind = paging::fault_kind::mode_mismatch;
  EXPECT_EQ(to_string(f), "mode_mismatch (the walker's format is not the context's paging mode)");
  f.kind = paging::fault_kind::invalid_request;
  EXPECT_EQ(to_string(f), "invalid_request (the request contradicts itself)");
  // The EPT and NPT stages: where the entry was, then the guest-physical address.
  f.kind = paging::fault_kind::unbacked;
  f.stage = paging::walk_stage::ept;
  f.level = 4;
  f.set_entry_address(x86::hpa{0x5000});
  f.entry_value = 0x6007;
  EXPECT_EQ(to_string(f),
            "unbacked at EPT PML4E @ 0x0000000000005000 = 0x0000000000006007 (not backed, gpa 0x0000000001234000)");
  f.stage = paging::walk_stage::npt;
  f.level = 2;
  EXPECT_EQ(to_string(f),
            "unbacked at NPT PDE @ 0x0000000000005000 = 0x0000000000006007 (not backed, gpa 0x0000000001234000)");
  f.kind = paging::fault_kind::retry_exhausted;
  EXPECT_EQ(to_string(f), "retry_exhausted at NPT PDE @ 0x0000000000005000 = 0x0000000000006007 (the entries kept "
                          "changing, gpa 0x0000000001234000)");
}

}  // namespace
