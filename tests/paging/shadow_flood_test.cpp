// SPDX-License-Identifier: MIT
// Write flooding in the shadow MMU (shadow_mmu::set_write_flood_threshold()): every sequence
// of up to 6 events over a small 4-level guest (fix-ups through two page tables, writes to
// each table frame, the root's included), for thresholds 1-4, against a model written here
// from the rule's statement alone: a frame's count grows by one per reported write while a
// shadow page mirrors it, a fix-up whose walk goes through the frame's table sets it to 0 and
// mirrors the frame (write protection), and the threshold-th write unprotects the frame
// unless it holds the current root. After every event the frames the MMU mirrors and its
// count of flood unprotects must be the model's. The guest-visible side (every access equal
// to the walker's with the rule on) is shadow_random_test.cpp's and fuzz/shadow_mmu.cpp's.
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include <hvkit/paging/shadow/shadow_mmu.hpp>

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
namespace shadow = hvkit::paging::shadow;

constexpr std::uint64_t P = 1, RW = 2, US = 4;
constexpr std::uint64_t host_ram = 0x1000'0000, host_tables = 0x4000'0000;

// The guest: PML4 in frame 1, PDPT 2, PD 3, page tables 4 (PD entry 0) and 6 (PD entry 1),
// data frames 8 (va 0) and 9 (va 0x20'0000).
struct guest {
  std::vector<std::uint8_t> ram = std::vector<std::uint8_t>(16 * 4096);
  std::unique_ptr<shadow::static_cache_storage<12, 2>> storage = std::make_unique<shadow::static_cache_storage<12, 2>>();
  shadow::page_cache cache{storage->view(x86::hpa{host_tables})};
  shadow::linear_frame_map map{x86::hpa{host_ram}, 16};
  paging::cpu_role role = paging::make_cpu_role(x86::cr0::pe | x86::cr0::pg | x86::cr0::wp, x86::cr4::pae,
                                                x86::efer::lme | x86::efer::lma | x86::efer::nxe);
  guest() {
    put(0x1000, P | RW | US | 0x2000);
    put(0x2000, P | RW | US | 0x3000);
    put(0x3000, P | RW | US | 0x4000);
    put(0x3008, P | RW | US | 0x6000);
    put(0x4000, P | RW | US | 0x8000);
    put(0x6000, P | RW | US | 0x9000);
  }
  void put(std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) ram[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
};

// Events: a fix-up (a host #PF at va 0 or 0x20'0000 answered by page_fault()), or a write of
// 8 bytes to entry 100 of a table frame (an entry no walk uses; the value written is the one
// there, 0), reported with table_written() as the emulator does.
enum class ev : std::uint8_t { fix0, fix1, w1, w3, w4, w6 };
constexpr std::array<ev, 6> events{ev::fix0, ev::fix1, ev::w1, ev::w3, ev::w4, ev::w6};
constexpr std::array<std::uint64_t, 5> frames{1, 2, 3, 4, 6};

struct model {
  unsigned threshold;
  std::array<bool, 8> mirrored{};
  std::array<unsigned, 8> count{};
  std::uint64_t unprotects = 0;
  void fix(std::initializer_list<std::uint64_t> path) {
    for (std::uint64_t f : path) {
      mirrored[f] = true;
      count[f] = 0;
    }
  }
  void write(std::uint64_t f) {
    if (!mirrored[f]) return;
    if (++count[f] < threshold || f == 1) return;  // frame 1 holds the current root
    mirrored[f] = false;
    count[f] = 0;
    ++unprotects;
  }
  void apply(ev e) {
    switch (e) {
      case ev::fix0: fix({1, 2, 3, 4}); break;
      case ev::fix1: fix({1, 2, 3, 6}); break;
      case ev::w1: write(1); break;
      case ev::w3: write(3); break;
      case ev::w4: write(4); break;
      case ev::w6: write(6); break;
    }
  }
};

void apply(guest& g, shadow::shadow_mmu<shadow::linear_frame_map>& mmu, ev e) {
  paging::flat_memory mem(g.ram.data(), g.ram.size());
  paging::walk_request r{};
  switch (e) {
    case ev::fix0:
    case ev::fix1: {
      r.linear = x86::gva{e == ev::fix0 ? 0x10u : 0x20'0010u};
      const shadow::fault_answer a = mmu.page_fault(mem, r);
      ASSERT_EQ(a.action, shadow::fault_action::fixed);
      break;
    }
    case ev::w1: static_cast<void>(mmu.table_written(x86::gpa{0x1000 + 8 * 100}, 8)); break;
    case ev::w3: static_cast<void>(mmu.table_written(x86::gpa{0x3000 + 8 * 100}, 8)); break;
    case ev::w4: static_cast<void>(mmu.table_written(x86::gpa{0x4000 + 8 * 100}, 8)); break;
    case ev::w6: static_cast<void>(mmu.table_written(x86::gpa{0x6000 + 8 * 100}, 8)); break;
  }
}

TEST(shadow_flood, every_sequence_of_six_events_matches_the_model) {
  guest g;
  constexpr unsigned length = 6;
  unsigned sequences = 0, with_unprotects = 0, reprotected = 0;
  for (unsigned threshold = 1; threshold <= 4; ++threshold) {
    std::array<unsigned, length> seq{};
    for (;;) {
      g.cache.zap_all();
      shadow::shadow_mmu mmu{g.cache, g.map};
      mmu.set_write_flood_threshold(threshold);
      mmu.load(g.role, x86::gpa{0x1000});
      model m{threshold};
      m.mirrored[1] = true;  // the root is mirrored from load() on
      bool was_unprotected = false;
      for (unsigned i = 0; i < length; ++i) {
        const ev e = events[seq[i]];
        apply(g, mmu, e);
        m.apply(e);
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
        for (std::uint64_t f : frames)
          ASSERT_EQ(g.cache.mirrors(x86::gfn{f}), m.mirrored[f])
              << "threshold " << threshold << " frame " << f << " after event " << i << " of sequence " << sequences;
        ASSERT_EQ(mmu.flood_unprotects(), m.unprotects) << "threshold " << threshold << " sequence " << sequences;
        if (m.unprotects > 0 && !was_unprotected) was_unprotected = true;
        else if (was_unprotected && (e == ev::fix0 || e == ev::fix1)) ++reprotected;
      }
      ++sequences;
      with_unprotects += m.unprotects > 0;
      unsigned k = 0;
      while (k < length && ++seq[k] == events.size()) seq[k++] = 0;
      if (k == length) break;
    }
  }
  // Not vacuous: frames were unprotected and protected again by a later walk.
  EXPECT_EQ(sequences, 4u * 46656u);
  EXPECT_GT(with_unprotects, sequences / 8);  // 42,040 of them
  EXPECT_GT(reprotected, 0u);
}

// The case the rule is for: a frame that held a page table is written as data. Without the
// rule every write exits and is emulated; with threshold 4 the fourth write unprotects it and
// the next write fault on it is fixed with a writable host entry (no more emulation).
TEST(shadow_flood, a_flooded_frame_is_written_natively_afterwards) {
  for (const unsigned threshold : {0u, 4u}) {
    guest g;
    // The kernel maps the page-table frame 4 at va 0x1000 (PTE 1 of frame 4 itself).
    g.put(0x4008, P | RW | 0x4000);
    shadow::shadow_mmu mmu{g.cache, g.map};
    mmu.set_write_flood_threshold(threshold);
    mmu.load(g.role, x86::gpa{0x1000});
    paging::flat_memory mem(g.ram.data(), g.ram.size());
    paging::walk_request r{};
    r.linear = x86::gva{0x1000 + 8 * 200};
    r.access = x86::pfec::write;
    unsigned emulated = 0;
    for (unsigned i = 0; i < 8; ++i) {
      const shadow::fault_answer a = mmu.page_fault(mem, r);
      if (a.action == shadow::fault_action::emulate_protected) {
        ++emulated;
        static_cast<void>(mmu.table_written(a.gpa, 8));  // the emulated store
      } else {
        EXPECT_EQ(a.action, shadow::fault_action::fixed);
      }
    }
    // The write's own walk goes through frame 4 (its PTE is there), so each fix-up attempt
    // restarts the count: the rule must not unprotect a table the guest is walking.
    EXPECT_EQ(emulated, 8u) << threshold;
    EXPECT_EQ(mmu.flood_unprotects(), 0u);
  }
  for (const unsigned threshold : {0u, 4u}) {
    guest g;
    // Frame 6's table, reached through PD entry 1, is mirrored by a fix-up at va 0x20'0000;
    // the kernel then writes frame 6 through an alias in frame 4's table (va 0x1000).
    g.put(0x4008, P | RW | 0x6000);
    shadow::shadow_mmu mmu{g.cache, g.map};
    mmu.set_write_flood_threshold(threshold);
    mmu.load(g.role, x86::gpa{0x1000});
    paging::flat_memory mem(g.ram.data(), g.ram.size());
    paging::walk_request r{};
    r.linear = x86::gva{0x20'0000};
    ASSERT_EQ(mmu.page_fault(mem, r).action, shadow::fault_action::fixed);
    ASSERT_TRUE(g.cache.mirrors(x86::gfn{6}));
    r.linear = x86::gva{0x1000 + 8 * 200};
    r.access = x86::pfec::write;
    unsigned emulated = 0, fixed = 0;
    for (unsigned i = 0; i < 8; ++i) {
      const shadow::fault_answer a = mmu.page_fault(mem, r);
      if (a.action == shadow::fault_action::emulate_protected) {
        ++emulated;
        static_cast<void>(mmu.table_written(a.gpa, 8));
      } else if (a.action == shadow::fault_action::fixed) {
        ++fixed;
      }
    }
    if (threshold == 0) {
      EXPECT_EQ(emulated, 8u);
      EXPECT_TRUE(g.cache.mirrors(x86::gfn{6}));
    } else {
      EXPECT_EQ(emulated, 4u);
      EXPECT_EQ(fixed, 4u);
      EXPECT_FALSE(g.cache.mirrors(x86::gfn{6}));
      EXPECT_EQ(mmu.flood_unprotects(), 1u);
    }
  }
}

}  // namespace
