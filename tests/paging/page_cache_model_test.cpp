// SPDX-License-Identifier: MIT
// paging/shadow/page_cache.hpp against a model written separately here (a std::map of live
// pages and a list of parent->child links): random sequences of allocate, link, zap,
// zap_frame, remember_root and find_root on a small cache (few guest frames, so hash runs collide and
// wrap), checking after every step that
//   - lookup(gfn, role) finds exactly the live hashed pages (the open-addressing hash stays
//     consistent when a page is removed from the middle of a probe run),
//   - for_each_page_of(gfn) visits exactly the live hashed pages of that frame,
//   - used() is the number of live pages,
//   - no present entry of a live table references a freed page, and no cached root names one.
// The rules of the model: zapping a page frees it and every un-hashed (pass-through) page
// below it and clears every entry referencing it; zap_frame zaps every hashed page of the
// frame; a full root cache evicts its least recently used root (remembered or found longest
// ago), which is released (freed with its un-hashed subtree) unless it is hashed (then it
// stays cached).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <array>
#include <random>
#include <set>
#include <vector>

#include <hvkit/paging/shadow/page_cache.hpp>

namespace paging = hvkit::paging;
namespace shadow = hvkit::paging::shadow;
namespace x86 = hvkit::x86;

namespace {

constexpr unsigned pages = 24;
constexpr unsigned roots = 2;
constexpr std::uint64_t base = 0x4000'0000;

struct model_page {
  std::uint64_t gfn;
  std::uint32_t role;
  bool hashed;
};

struct model {
  std::map<std::uint16_t, model_page> live;
  std::set<std::pair<std::uint16_t, std::uint16_t>> links;  // parent, child
  // The root cache: `roots` slots; a new root takes the first free slot, else the slot whose
  // root was remembered or found longest ago (`used_at`, the model's own clock).
  std::array<std::optional<std::pair<std::uint64_t, std::uint16_t>>, roots> slots{};
  std::array<std::uint64_t, roots> used_at{};
  std::uint64_t clock = 0;

  void free_one(std::uint16_t i) {
    live.erase(i);
    for (auto it = links.begin(); it != links.end();) {
      if (it->first == i || it->second == i) it = links.erase(it);
      else ++it;
    }
  }
  // Frees i and every un-hashed page linked below it.
  void free_tree(std::uint16_t i) {
    std::vector<std::uint16_t> kids;
    for (const auto& [p, c] : links)
      if (p == i && live.count(c) && !live[c].hashed) kids.push_back(c);
    free_one(i);
    for (auto c : kids)
      if (live.count(c)) free_tree(c);
  }
  void zap(std::uint16_t i) {
    free_tree(i);
    drop_dead_roots();
  }
  void drop_dead_roots() {
    for (auto& r : slots)
      if (r && live.count(r->second) == 0) r.reset();
  }

};

class page_cache_model : public ::testing::TestWithParam<unsigned> {};

TEST_P(page_cache_model, random_sequences_agree_with_the_model) {
  auto storage = std::make_unique<shadow::static_cache_storage<pages, roots>>();
  shadow::page_cache cache{storage->view(x86::hpa{base})};
  model m;
  std::mt19937_64 rng(GetParam());
  // Seeds 1-8: 6 guest frames (long probe runs of one frame); seeds 9-16: 40 frames over the
  // 64 hash slots, some at home in the last slots, so that probe runs wrap around the end of
  // the hash and a removal shifts entries back across it.
  const unsigned frames = GetParam() <= 8 ? 6 : 40;
  auto pick = [&](unsigned n) { return static_cast<unsigned>(rng() % n); };
  std::uint64_t next_key = 1;

  auto check = [&](int step) {
    ASSERT_EQ(cache.used(), m.live.size()) << "step " << step;
    for (std::uint64_t g = 0; g < frames; ++g) {
      for (std::uint32_t lvl = 1; lvl <= 4; ++lvl) {
        const paging::page_role role{lvl};
        std::uint16_t want = shadow::page_cache::npos;
        for (const auto& [i, p] : m.live)
          if (p.hashed && p.gfn == g && p.role == lvl) want = i;
        EXPECT_EQ(cache.lookup(x86::gfn{g}, role), want) << "step " << step << " gfn " << g << " level " << lvl;
      }
      std::set<std::uint16_t> seen, want;
      cache.for_each_page_of(x86::gfn{g}, [&](std::uint16_t i) { seen.insert(i); });
      for (const auto& [i, p] : m.live)
        if (p.hashed && p.gfn == g) want.insert(i);
      EXPECT_EQ(seen, want) << "step " << step << " gfn " << g;
    }
    for (const auto& [i, p] : m.live) {
      EXPECT_TRUE(cache.page(i).used);
      EXPECT_EQ(cache.page(i).hashed, p.hashed);
      if (p.role <= 1) continue;
      for (unsigned k = 0; k < 512; ++k) {
        const std::uint64_t e = cache.table(i)[k];
        const std::uint16_t c = cache.child_of(e);
        if (c == shadow::page_cache::npos) continue;
        EXPECT_TRUE(m.live.count(c)) << "step " << step << ": page " << i << " entry " << k << " -> freed " << c;
        EXPECT_TRUE(m.links.count({i, c})) << "step " << step;
      }
    }
    for (const auto& r : m.slots) {
      if (!r) continue;
      const std::array<std::uint64_t, 4> none{};
      EXPECT_EQ(cache.cached_root(r->first, paging::cpu_role{}, none), r->second) << "step " << step;
    }
  };

  for (int step = 0; step < 400; ++step) {
    const unsigned op = pick(11);
    if (op < 4) {  // allocate a hashed page
      const std::uint64_t g = pick(frames);
      const std::uint32_t lvl = 1 + pick(4);
      bool exists = false;
      for (const auto& [i, p] : m.live) exists = exists || (p.hashed && p.gfn == g && p.role == lvl);
      if (exists) continue;  // precondition of allocate
      const std::uint16_t i = cache.allocate(x86::gfn{g}, paging::page_role{lvl});
      if (m.live.size() == pages) {
        EXPECT_EQ(i, shadow::page_cache::npos);
        continue;
      }
      ASSERT_NE(i, shadow::page_cache::npos);
      ASSERT_EQ(m.live.count(i), 0u);
      m.live[i] = {g, lvl, true};
    } else if (op < 6) {  // an un-hashed child linked below a live page of level > 1
      std::vector<std::uint16_t> parents;
      for (const auto& [i, p] : m.live)
        if (p.role > 1) parents.push_back(i);
      if (parents.empty()) continue;
      const std::uint16_t parent = parents[pick(static_cast<unsigned>(parents.size()))];
      const std::uint32_t lvl = m.live[parent].role - 1;
      const std::uint16_t c = cache.allocate(x86::gfn{pick(frames)}, paging::page_role{lvl}, false);
      if (c == shadow::page_cache::npos) continue;
      m.live[c] = {0, lvl, false};
      // A free entry of the parent: overwriting a link would drop a child the model still
      // links (and frees with the parent), an inconsistency of the test, not of the cache.
      auto free_entry = [&] {
        unsigned k = pick(512);
        while (cache.table(parent)[k] != 0) k = (k + 1) % 512;
        return k;
      };
      cache.table(parent)[free_entry()] = cache.address_of(c).value() | paging::pte::present.raw();
      m.links.insert({parent, c});
      // A hashed child linked too (zap of the parent must leave it alone).
      if (pick(2) == 0) {
        for (const auto& [i, p] : m.live)
          if (p.hashed && i != parent && p.role < m.live[parent].role) {
            cache.table(parent)[free_entry()] = cache.address_of(i).value() | paging::pte::present.raw();
            m.links.insert({parent, i});
            break;
          }
      }
    } else if (op < 8) {  // zap one page
      if (m.live.empty()) continue;
      auto it = m.live.begin();
      std::advance(it, pick(static_cast<unsigned>(m.live.size())));
      const std::uint16_t i = it->first;
      cache.zap(i);
      m.zap(i);
    } else if (op == 8) {  // zap every hashed page of one frame
      const std::uint64_t g = pick(frames);
      cache.zap_frame(x86::gfn{g});
      std::vector<std::uint16_t> victims;
      for (const auto& [i, p] : m.live)
        if (p.hashed && p.gfn == g) victims.push_back(i);
      for (auto v : victims)
        if (m.live.count(v)) m.zap(v);
    } else if (op == 10) {  // switch back to a cached root: it becomes the most recently used
      std::vector<unsigned> cached;
      for (unsigned r = 0; r < roots; ++r)
        if (m.slots[r]) cached.push_back(r);
      if (cached.empty()) continue;
      const unsigned r = cached[pick(static_cast<unsigned>(cached.size()))];
      EXPECT_EQ(cache.find_root(m.slots[r]->first, paging::cpu_role{}, {}), m.slots[r]->second) << "step " << step;
      m.used_at[r] = ++m.clock;
    } else {  // remember a root: a hashed page, or a new un-hashed page nothing links to
      std::uint16_t page = shadow::page_cache::npos;
      if (pick(2) == 0) {
        const std::uint32_t lvl = 2 + pick(3);
        page = cache.allocate(x86::gfn{pick(frames)}, paging::page_role{lvl}, false);
        if (page == shadow::page_cache::npos) continue;
        m.live[page] = {0, lvl, false};
      } else {
        std::vector<std::uint16_t> hashed;
        for (const auto& [i, p] : m.live)
          if (p.hashed) hashed.push_back(i);
        if (hashed.empty()) continue;
        page = hashed[pick(static_cast<unsigned>(hashed.size()))];
      }
      const std::uint64_t key = next_key++;
      cache.remember_root(key, paging::cpu_role{}, {}, page);
      unsigned slot = roots;
      for (unsigned r = 0; r < roots && slot == roots; ++r)
        if (!m.slots[r]) slot = r;
      if (slot == roots) {
        slot = 0;
        for (unsigned r = 1; r < roots; ++r)
          if (m.used_at[r] < m.used_at[slot]) slot = r;
        // The evicted root is released (freed with its un-hashed subtree) unless hashed.
        const std::uint16_t old = m.slots[slot]->second;
        m.slots[slot].reset();
        if (old != page && m.live.count(old) && !m.live[old].hashed) {
          m.free_tree(old);
          m.drop_dead_roots();
        }
      }
      m.slots[slot] = std::pair{key, page};
      m.used_at[slot] = ++m.clock;
    }
    check(step);
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(seeds, page_cache_model, ::testing::Range(1u, 17u));

// The root cache by hand: with room for two roots, remember A and B, switch back to A, then
// remember C: B (used longest ago) is evicted and A stays. A round-robin cache would evict A
// (the first slot) although the guest just came back to it.
TEST(page_cache_roots, full_cache_evicts_the_least_recently_used_root) {
  auto storage = std::make_unique<shadow::static_cache_storage<pages, 2>>();
  shadow::page_cache cache{storage->view(x86::hpa{base})};
  const std::array<std::uint64_t, 4> none{};
  const paging::cpu_role role{};
  const std::uint16_t a = cache.allocate(x86::gfn{1}, paging::page_role{4});
  const std::uint16_t b = cache.allocate(x86::gfn{2}, paging::page_role{4});
  const std::uint16_t c = cache.allocate(x86::gfn{3}, paging::page_role{4});
  cache.remember_root(0x1000, role, none, a);
  cache.remember_root(0x2000, role, none, b);
  EXPECT_EQ(cache.find_root(0x1000, role, none), a);
  cache.remember_root(0x3000, role, none, c);
  EXPECT_EQ(cache.cached_root(0x1000, role, none), a);
  EXPECT_EQ(cache.cached_root(0x2000, role, none), shadow::page_cache::npos);
  EXPECT_EQ(cache.cached_root(0x3000, role, none), c);
  EXPECT_EQ(cache.lookup(x86::gfn{2}, paging::page_role{4}), b) << "a hashed root stays cached when evicted";
  // cached_root() only looks: A, though looked at last, is now the least recently used.
  EXPECT_EQ(cache.cached_root(0x1000, role, none), a);
  cache.remember_root(0x2000, role, none, b);
  EXPECT_EQ(cache.cached_root(0x1000, role, none), shadow::page_cache::npos);
  EXPECT_EQ(cache.cached_root(0x3000, role, none), c);
}

}  // namespace
