// SPDX-License-Identifier: MIT
// Local APIC: ICR and SELF IPI decoding, the x2APIC MSR access rules (golden values typed from
// SDM Vol. 3A 11.6.1, 11.12.1.2-3, 11.12.9, 11.12.11), and the virtual local APIC's priority
// rules exhaustively against a separately written rule model (SDM 11.8.3.1, 11.8.4, 11.8.5).
#include <gtest/gtest.h>

#include <hvkit/x86/apic_destination.hpp>
#include <hvkit/x86/apic_icr.hpp>
#include <hvkit/x86/apic_registers.hpp>
#include <hvkit/x86/lapic.hpp>

#include <cstdint>
#include <random>

namespace a = hvkit::x86::apic;

namespace {

// ---------------------------------------------------------------- ICR (golden) ---------

TEST(ApicIcr, X2apicFixedPhysical) {
  // Figure 11-28: vector 7:0, delivery mode 10:8, destination mode 11, level 14, trigger 15,
  // shorthand 19:18, destination 63:32.
  auto r = a::decode_x2apic_icr(0x0000'0005'0000'40ecull);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->vector, 0xec);
  EXPECT_EQ(r->mode, a::delivery_mode::fixed);
  EXPECT_EQ(r->dest_mode, a::destination_mode::physical);
  EXPECT_TRUE(r->level_assert);
  EXPECT_EQ(r->trigger, a::trigger_mode::edge);
  EXPECT_EQ(r->shorthand, a::destination_shorthand::none);
  EXPECT_EQ(r->destination, 5u);
}

TEST(ApicIcr, X2apicEveryFieldAtItsBit) {
  // INIT (101), logical, level assert, level trigger, all-excluding-self (11), dest 0xfedcba98.
  const std::uint64_t v = 0xfedc'ba98'0000'0000ull | (3u << 18) | (1u << 15) | (1u << 14) | (1u << 11) | (5u << 8) | 0x12;
  auto r = a::decode_x2apic_icr(v);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->vector, 0x12);
  EXPECT_EQ(r->mode, a::delivery_mode::init);
  EXPECT_EQ(r->dest_mode, a::destination_mode::logical);
  EXPECT_EQ(r->trigger, a::trigger_mode::level);
  EXPECT_EQ(r->shorthand, a::destination_shorthand::all_excluding_self);
  EXPECT_EQ(r->destination, 0xfedc'ba98u);
  EXPECT_EQ(r->to_icr(a::apic_mode::x2apic), v);
  // Start-up (110) and NMI (100).
  EXPECT_EQ(a::decode_x2apic_icr(0x0600 | 0x9a)->mode, a::delivery_mode::startup);
  EXPECT_EQ(a::decode_x2apic_icr(0x0400)->mode, a::delivery_mode::nmi);
}

TEST(ApicIcr, X2apicReservedBitsFault) {
  // "Non-zero writes (by WRMSR instruction) to reserved bits to these registers will raise a
  // general protection fault exception" (11.12.1.3): ICR bits 13, 16, 17, 20..31.
  for (unsigned b : {13u, 16u, 17u, 20u, 25u, 31u})
    EXPECT_EQ(a::decode_x2apic_icr(std::uint64_t{1} << b).error(), a::icr_error::reserved_bits) << b;
  // "WRMSR to the ICR MSR ignores bit 12 of its source operand."
  EXPECT_TRUE(a::decode_x2apic_icr(1u << 12).has_value());
  // Every defined bit alone is accepted.
  for (unsigned b : {0u, 7u, 8u, 10u, 11u, 14u, 15u, 18u, 19u, 32u, 63u})
    EXPECT_TRUE(a::decode_x2apic_icr(std::uint64_t{1} << b).has_value()) << b;
}

TEST(ApicIcr, XapicDestinationFromIcrHigh) {
  // Figure 11-12: the destination field is bits 63:56, i.e. bits 31:24 of ICR high (310H).
  const a::ipi_request r = a::decode_xapic_icr(0x000c'4500u /* all-excl-self, INIT, assert */, 0x0300'0000u);
  EXPECT_EQ(r.destination, 3u);
  EXPECT_EQ(r.mode, a::delivery_mode::init);
  EXPECT_EQ(r.shorthand, a::destination_shorthand::all_excluding_self);
  // Bits 55:32 are not destination bits.
  EXPECT_EQ(a::decode_xapic_icr(0, 0x00ff'ffffu).destination, 0u);
}

TEST(ApicIcr, SelfIpi) {
  // 11.12.11: identical to ICR shorthand self, edge, fixed, with the vector.
  auto r = a::decode_self_ipi(0x31);
  ASSERT_TRUE(r.has_value());
  a::ipi_request want;
  want.vector = 0x31;
  want.shorthand = a::destination_shorthand::self;
  EXPECT_EQ(*r, want);
  EXPECT_EQ(a::decode_self_ipi(0x100).error(), a::icr_error::reserved_bits);
  EXPECT_EQ(a::decode_self_ipi(std::uint64_t{1} << 32).error(), a::icr_error::reserved_bits);
}

TEST(ApicIcr, Classification) {
  a::ipi_request r;
  r.mode = a::delivery_mode::lowest_priority;
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::lowest_priority);
  EXPECT_EQ(a::classify(r, a::apic_mode::x2apic), a::ipi_kind::invalid);  // Figure 11-28: 001 reserved
  r.mode = a::delivery_mode::reserved_3;
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::invalid);
  r.mode = a::delivery_mode::init;
  r.level_assert = false;
  r.trigger = a::trigger_mode::level;
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::init_level_deassert);
  r.level_assert = true;
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::init);
  r.shorthand = a::destination_shorthand::self;
  EXPECT_EQ(a::classify(r, a::apic_mode::xapic), a::ipi_kind::invalid);
  r.mode = a::delivery_mode::fixed;
  EXPECT_EQ(a::classify(r, a::apic_mode::x2apic), a::ipi_kind::fixed);
  r.shorthand = a::destination_shorthand::none;
  r.destination = 0xffff'ffffu;
  EXPECT_TRUE(a::is_broadcast(r, a::apic_mode::x2apic));
  EXPECT_FALSE(a::is_broadcast(r, a::apic_mode::xapic));
}

// ------------------------------------------------------- IPI destination (golden) --------

TEST(ApicDestination, X2apicLogicalId) {
  // 11.12.10.2: "Logical x2APIC ID = [(x2APIC ID[19:4] << 16) | (1 << x2APIC ID[3:0])]".
  EXPECT_EQ(a::x2apic_logical_id(0x25), 0x0002'0020u);
  EXPECT_EQ(a::x2apic_logical_id(0), 0x0000'0001u);
  EXPECT_EQ(a::x2apic_logical_id(0xf'ffff), 0xffff'8000u);
}

TEST(ApicDestination, ShorthandsPhysicalLogical) {
  using m = a::apic_mode;
  auto t = [](std::uint32_t id) { return a::apic_identity{id, a::x2apic_logical_id(id), a::xapic_model::flat}; };
  a::ipi_request r;
  r.destination = 3;
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 0, t(3)));
  EXPECT_FALSE(a::is_destination(r, m::x2apic, 0, t(4)));
  r.destination = 0xffff'ffffu;  // broadcast
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 0, t(4)));
  r.shorthand = a::destination_shorthand::all_excluding_self;
  EXPECT_FALSE(a::is_destination(r, m::x2apic, 4, t(4)));
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 4, t(5)));
  r.shorthand = a::destination_shorthand::self;
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 4, t(4)));
  EXPECT_FALSE(a::is_destination(r, m::x2apic, 4, t(5)));
  // x2APIC logical: cluster 2, processors 0 and 5 of it.
  r.shorthand = a::destination_shorthand::none;
  r.dest_mode = a::destination_mode::logical;
  r.destination = 0x0002'0021u;
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 0, t(0x20)));
  EXPECT_TRUE(a::is_destination(r, m::x2apic, 0, t(0x25)));
  EXPECT_FALSE(a::is_destination(r, m::x2apic, 0, t(0x21)));
  EXPECT_FALSE(a::is_destination(r, m::x2apic, 0, t(0x05)));  // cluster 0
  // xAPIC flat: bit-wise AND of the 8-bit logical IDs; cluster: nibble cluster + member bits.
  r.destination = 0x06;
  EXPECT_TRUE(a::is_destination(r, m::xapic, 0, {1, 0x0400'0000u, a::xapic_model::flat}));
  EXPECT_FALSE(a::is_destination(r, m::xapic, 0, {1, 0x0800'0000u, a::xapic_model::flat}));
  r.destination = 0x32;
  EXPECT_TRUE(a::is_destination(r, m::xapic, 0, {1, 0x3200'0000u, a::xapic_model::cluster}));
  EXPECT_FALSE(a::is_destination(r, m::xapic, 0, {1, 0x2200'0000u, a::xapic_model::cluster}));
  EXPECT_FALSE(a::is_destination(r, m::xapic, 0, {1, 0x3100'0000u, a::xapic_model::cluster}));
}

// ------------------------------------------------------- x2APIC MSR access (golden) ------

TEST(X2apicMsr, OffsetsAndAccess) {
  // Table 11-6 / Table 11-1: MSR = 800H + offset/16.
  EXPECT_EQ(a::x2apic_msr(a::reg::icr_low), 0x830u);
  EXPECT_EQ(a::xapic_offset(a::reg::icr_low), 0x300u);
  EXPECT_EQ(a::xapic_offset(a::reg::icr_high), 0x310u);
  EXPECT_EQ(a::x2apic_msr(a::reg::eoi), 0x80bu);
  EXPECT_EQ(a::x2apic_msr(a::reg::tpr), 0x808u);
  EXPECT_EQ(a::x2apic_msr(a::reg::self_ipi), 0x83fu);
  EXPECT_EQ(a::xapic_offset(a::reg::timer_divide), 0x3e0u);

  using f = a::x2apic_fault;
  // Read-only registers: ID, version, PPR, LDR, ISR/TMR/IRR, current count.
  for (std::uint32_t m : {0x802u, 0x803u, 0x80au, 0x80du, 0x810u, 0x817u, 0x818u, 0x827u, 0x839u}) {
    EXPECT_TRUE(a::check_x2apic_rdmsr(m).has_value()) << std::hex << m;
    EXPECT_EQ(a::check_x2apic_wrmsr(m, 0).error(), f::write_to_read_only) << std::hex << m;
  }
  // Write-only: EOI and SELF IPI ("A RDMSR instruction with address of the SELF IPI register
  // causes a general-protection exception", 11.12.11).
  for (std::uint32_t m : {0x80bu, 0x83fu}) {
    EXPECT_EQ(a::check_x2apic_rdmsr(m).error(), f::read_of_write_only) << std::hex << m;
    EXPECT_TRUE(a::check_x2apic_wrmsr(m, 0).has_value()) << std::hex << m;
  }
  // Not in x2APIC mode: APR, RRD, DFR, ICR high, and the gaps.
  for (std::uint32_t m : {0x800u, 0x801u, 0x804u, 0x809u, 0x80cu, 0x80eu, 0x829u, 0x831u, 0x83au, 0x83du, 0x840u, 0x8ffu, 0x900u}) {
    EXPECT_EQ(a::check_x2apic_rdmsr(m).error(), f::not_a_register) << std::hex << m;
    EXPECT_EQ(a::check_x2apic_wrmsr(m, 0).error(), f::not_a_register) << std::hex << m;
  }
}

TEST(X2apicMsr, ReservedBits) {
  using f = a::x2apic_fault;
  // EOI: "WRMSR of a non-zero value causes #GP(0)"; ESR the same.
  EXPECT_EQ(a::check_x2apic_wrmsr(0x80b, 1).error(), f::reserved_bits);
  EXPECT_EQ(a::check_x2apic_wrmsr(0x828, 0x40).error(), f::reserved_bits);
  EXPECT_TRUE(a::check_x2apic_wrmsr(0x828, 0).has_value());
  // TPR: bits 7:0 only.
  EXPECT_TRUE(a::check_x2apic_wrmsr(0x808, 0xff).has_value());
  EXPECT_EQ(a::check_x2apic_wrmsr(0x808, 0x100).error(), f::reserved_bits);
  // Bits 63:32 of a 32-bit register; the ICR's are its destination.
  EXPECT_EQ(a::check_x2apic_wrmsr(0x838, std::uint64_t{1} << 32).error(), f::reserved_bits);
  EXPECT_TRUE(a::check_x2apic_wrmsr(0x830, std::uint64_t{1} << 32).has_value());
  EXPECT_EQ(a::check_x2apic_wrmsr(0x830, 1u << 13).error(), f::reserved_bits);
}

TEST(X2apicMsr, LvtSvrDivideReservedBits) {
  using f = a::x2apic_fault;
  auto gp = [](std::uint32_t m, std::uint64_t v) {
    auto r = a::check_x2apic_wrmsr(m, v);
    return !r.has_value() && r.error() == f::reserved_bits;
  };
  // LVT timer (Figure 11-8): vector, delivery status 12, mask 16, mode 18:17 defined.
  EXPECT_FALSE(gp(0x832, 0x000700ff | (1u << 12)));
  for (unsigned b : {8u, 11u, 13u, 15u, 19u, 31u}) EXPECT_TRUE(gp(0x832, 1ull << b)) << b;
  // LINT0: delivery mode 10:8, polarity 13, remote IRR 14, trigger 15, mask 16 defined; 11 not.
  EXPECT_FALSE(gp(0x835, 0x0001f7ff));
  EXPECT_TRUE(gp(0x835, 1u << 11));
  EXPECT_TRUE(gp(0x836, 1u << 17));
  // Thermal, PMI, CMCI: no polarity/remote IRR/trigger.
  for (std::uint32_t m : {0x82fu, 0x833u, 0x834u}) {
    EXPECT_FALSE(gp(m, 0x000117ff)) << std::hex << m;
    EXPECT_TRUE(gp(m, 1u << 13)) << std::hex << m;
    EXPECT_TRUE(gp(m, 1u << 15)) << std::hex << m;
  }
  // LVT error: vector, status, mask only.
  EXPECT_FALSE(gp(0x837, 0x000110ff));
  EXPECT_TRUE(gp(0x837, 1u << 8));
  // SVR (Figure 11-23): 7:0, 8, 9, 12 defined.
  EXPECT_FALSE(gp(0x80f, 0x13ff));
  for (unsigned b : {10u, 11u, 13u, 31u}) EXPECT_TRUE(gp(0x80f, 1ull << b)) << b;
  // Divide configuration (Figure 11-10): bits 0, 1, 3.
  EXPECT_FALSE(gp(0x83e, 0xb));
  EXPECT_TRUE(gp(0x83e, 0x4));
  EXPECT_TRUE(gp(0x83e, 0x10));
  // Initial count: all 32 bits.
  EXPECT_FALSE(gp(0x838, 0xffff'ffffu));
}

TEST(XapicMmio, Decode) {
  auto r = a::decode_xapic_mmio(0x300, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->index, 0x30u);
  EXPECT_EQ(r->allowed, a::access::read_write);
  EXPECT_EQ(a::decode_xapic_mmio(0x0e0, 4)->allowed, a::access::read_write);  // DFR: xAPIC only
  EXPECT_EQ(a::decode_xapic_mmio(0x3f0, 4)->allowed, a::access::none);        // SELF IPI: x2APIC only
  EXPECT_EQ(a::decode_xapic_mmio(0x0b0, 4)->allowed, a::access::write_only);  // EOI
  EXPECT_EQ(a::decode_xapic_mmio(0x304, 4).error(), a::xapic_mmio_error::not_aligned_dword);
  EXPECT_EQ(a::decode_xapic_mmio(0x300, 8).error(), a::xapic_mmio_error::not_aligned_dword);
  EXPECT_EQ(a::decode_xapic_mmio(0x1000, 4).error(), a::xapic_mmio_error::outside_page);
}

// ------------------------------------------------ priority rules: the rule model ----------
// Written from the SDM's sentences, independently of lapic.hpp: plain bool arrays and loops.

int model_highest(const bool (&bits)[256]) {
  for (int v = 255; v >= 0; --v)
    if (bits[v]) return v;
  return -1;
}
// 11.8.3.1: "If TPR[7:4] >= ISRV[7:4], PPR[7:0] = TPR[7:0]; else PPR[7:4] = ISRV[7:4], PPR[3:0] = 0."
unsigned model_ppr(unsigned tpr, unsigned isrv) {
  const unsigned tpr_class = tpr / 16, isr_class = isrv / 16;
  if (tpr_class >= isr_class) return tpr;
  return isr_class * 16;
}
// The highest-priority IRR vector is offered if its class is above the PPR's class.
int model_pending_v(int irrv, int isrv, unsigned tpr) {
  if (irrv < 0) return -1;
  const unsigned ppr = model_ppr(tpr, isrv < 0 ? 0u : static_cast<unsigned>(isrv));
  return static_cast<unsigned>(irrv) / 16 > ppr / 16 ? irrv : -1;
}
int model_pending(const bool (&irr)[256], const bool (&isr)[256], unsigned tpr) {
  return model_pending_v(model_highest(irr), model_highest(isr), tpr);
}

TEST(LapicPriority, PprExhaustive) {
  // Every TPR x every ISRV (65 536 cases), through a real ISR.
  for (unsigned isrv = 0; isrv < 256; ++isrv) {
    a::local_apic apic;
    if (isrv >= 16) {
      apic.accept_fixed(static_cast<std::uint8_t>(isrv), a::trigger_mode::edge);
      ASSERT_EQ(apic.acknowledge(), static_cast<int>(isrv));
    }
    for (unsigned tpr = 0; tpr < 256; ++tpr) {
      apic.set_tpr(static_cast<std::uint8_t>(tpr));
      const unsigned isrv_eff = isrv >= 16 ? isrv : 0;
      ASSERT_EQ(apic.ppr(), model_ppr(tpr, isrv_eff)) << "tpr " << tpr << " isrv " << isrv;
      ASSERT_EQ(a::processor_priority(static_cast<std::uint8_t>(tpr), static_cast<std::uint8_t>(isrv)), model_ppr(tpr, isrv));
    }
  }
}

TEST(LapicPriority, DeliveryExhaustiveOneInIrrOneInIsr) {
  // Every (pending vector, in-service vector or none, TPR): 240 x 241 x 256 = 14.8 M cases.
  std::uint64_t checked = 0, delivered = 0;
  for (unsigned irrv = 16; irrv < 256; ++irrv) {
    for (int isrv = -1; isrv < 256; ++isrv) {
      if (isrv >= 0 && isrv < 16) continue;
      a::local_apic apic;
      if (isrv >= 0) {
        apic.accept_fixed(static_cast<std::uint8_t>(isrv), a::trigger_mode::edge);
        ASSERT_EQ(apic.acknowledge(), isrv);
      }
      apic.accept_fixed(static_cast<std::uint8_t>(irrv), a::trigger_mode::edge);
      for (unsigned tpr = 0; tpr < 256; ++tpr) {
        apic.set_tpr(static_cast<std::uint8_t>(tpr));
        const int want = model_pending_v(static_cast<int>(irrv), isrv, tpr);
        const int got = apic.pending();
        if (got != want) {
          FAIL() << "irrv " << irrv << " isrv " << isrv << " tpr " << tpr << ": got " << got << " want " << want;
        }
        ++checked;
        delivered += got >= 0;
      }
    }
  }
  EXPECT_EQ(checked, 240ull * 241ull * 256ull);
  EXPECT_GT(delivered, 0u);
}

TEST(LapicPriority, RandomSetsAcceptAckEoiAgainstModel) {
  // Multi-bit IRR/ISR sets through a random sequence of accept / acknowledge / EOI / TPR
  // writes (fixed seed), the model tracking the same sequence with its own rules.
  std::mt19937_64 rng(0x5eed'26);
  for (int run = 0; run < 500; ++run) {
    a::local_apic apic;
    bool irr[256] = {}, isr[256] = {}, tmr[256] = {};
    unsigned tpr = 0;
    for (int step = 0; step < 64; ++step) {
      const unsigned op = rng() % 4;
      if (op == 0) {
        const auto v = static_cast<std::uint8_t>(rng());
        const bool level = rng() & 1;
        const auto r = apic.accept_fixed(v, level ? a::trigger_mode::level : a::trigger_mode::edge);
        if (v < 16) {
          ASSERT_EQ(r, a::accept_result::illegal_vector);
        } else if (irr[v]) {
          ASSERT_EQ(r, a::accept_result::coalesced);  // "collapsed into the single bit in the IRR"
        } else {
          ASSERT_EQ(r, a::accept_result::accepted);
          irr[v] = true;
          tmr[v] = level;
        }
      } else if (op == 1) {
        const int want = model_pending(irr, isr, tpr);
        ASSERT_EQ(apic.acknowledge(), want);
        if (want >= 0) {
          irr[want] = false;
          isr[want] = true;
        }
      } else if (op == 2) {
        const int want = model_highest(isr);
        const auto e = apic.eoi();
        ASSERT_EQ(e.vector, want);
        if (want >= 0) {
          ASSERT_EQ(e.level_triggered, tmr[want]);
          isr[want] = false;
        }
      } else {
        tpr = static_cast<unsigned>(rng() & 0xff);
        apic.set_tpr(static_cast<std::uint8_t>(tpr));
      }
      for (unsigned v = 0; v < 256; ++v) {
        ASSERT_EQ(apic.irr().test(static_cast<std::uint8_t>(v)), irr[v]);
        ASSERT_EQ(apic.isr().test(static_cast<std::uint8_t>(v)), isr[v]);
      }
      ASSERT_EQ(apic.pending(), model_pending(irr, isr, tpr));
    }
  }
}

TEST(LapicPriority, TwoPerVectorAtMost) {
  // 11.8.4: one in IRR and one in ISR per vector; a third is collapsed.
  a::local_apic apic;
  EXPECT_EQ(apic.accept_fixed(0x40, a::trigger_mode::edge), a::accept_result::accepted);
  EXPECT_EQ(apic.acknowledge(), 0x40);
  EXPECT_EQ(apic.accept_fixed(0x40, a::trigger_mode::edge), a::accept_result::accepted);
  EXPECT_EQ(apic.accept_fixed(0x40, a::trigger_mode::edge), a::accept_result::coalesced);
  // 0x40 is in service: the same class is not above PPR.
  EXPECT_EQ(apic.pending(), -1);
  EXPECT_EQ(apic.eoi().vector, 0x40);
  EXPECT_EQ(apic.pending(), 0x40);
  EXPECT_EQ(apic.accept_fixed(15, a::trigger_mode::edge), a::accept_result::illegal_vector);
  EXPECT_EQ(apic.esr_pending(), a::esr::receive_illegal_vector);
}

// ---------------------------------------------------------------------- timer -------------

TEST(LapicTimer, DivideConfiguration) {
  // Figure 11-10: bits 3,1,0 = 000 -> 2, 001 -> 4, 010 -> 8, 011 -> 16, 100 -> 32, 101 -> 64,
  // 110 -> 128, 111 -> 1.
  const std::uint32_t dcr[8] = {0x0, 0x1, 0x2, 0x3, 0x8, 0x9, 0xa, 0xb};
  const std::uint32_t div[8] = {2, 4, 8, 16, 32, 64, 128, 1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a::timer_divisor(dcr[i]), div[i]) << i;
}

TEST(LapicTimer, OneShot) {
  a::local_apic apic;
  apic.write_lvt_timer(0x30);  // one-shot, unmasked, vector 30H
  apic.write_divide(0x0);      // divide by 2
  apic.write_initial_count(100, 1000);
  EXPECT_EQ(apic.current_count(1000), 100u);
  EXPECT_EQ(apic.current_count(1100), 50u);
  EXPECT_FALSE(apic.poll(1199, 0));
  EXPECT_TRUE(apic.poll(1200, 0));
  EXPECT_EQ(apic.pending(), 0x30);
  EXPECT_EQ(apic.current_count(1300), 0u);
  EXPECT_FALSE(apic.poll(5000, 0));  // one-shot: once
  // "A write of 0 to the initial-count register effectively stops the local APIC timer."
  apic.write_initial_count(10, 0);
  apic.write_initial_count(0, 0);
  EXPECT_FALSE(apic.poll(100, 0));
}

TEST(LapicTimer, MaskedStillExpires) {
  a::local_apic apic;  // LVT timer masked after reset
  apic.write_divide(0xb);
  apic.write_initial_count(5, 0);
  EXPECT_TRUE(apic.poll(5, 0));
  EXPECT_EQ(apic.pending(), -1);
}

TEST(LapicTimer, TscDeadline) {
  a::local_apic apic;
  apic.write_lvt_timer((2u << 17) | 0xef);
  apic.write_initial_count(123, 0);  // ignored in TSC-deadline mode
  EXPECT_EQ(apic.initial_count(), 0u);
  apic.write_tsc_deadline(5000);
  EXPECT_EQ(apic.tsc_deadline(), 5000u);
  EXPECT_FALSE(apic.poll(0, 4999));
  EXPECT_TRUE(apic.poll(0, 5000));
  EXPECT_EQ(apic.pending(), 0xef);
  EXPECT_EQ(apic.tsc_deadline(), 0u);  // disarmed and cleared
  // Leaving TSC-deadline mode disarms.
  apic.write_tsc_deadline(10);
  apic.write_lvt_timer(0xef);
  EXPECT_FALSE(apic.timer_armed());
  EXPECT_EQ(apic.tsc_deadline(), 0u);
  // Outside TSC-deadline mode the MSR write is ignored: re-entering the mode finds it 0.
  apic.write_tsc_deadline(77);
  apic.write_lvt_timer((2u << 17) | 0xef);
  EXPECT_EQ(apic.tsc_deadline(), 0u);
  EXPECT_FALSE(apic.poll(0, 1000));
}

TEST(LapicTimer, Periodic) {
  a::local_apic apic;
  apic.write_lvt_timer((1u << 17) | 0x41);
  apic.write_divide(0xb);  // by 1
  apic.write_initial_count(10, 0);
  EXPECT_EQ(apic.current_count(3), 7u);
  EXPECT_TRUE(apic.poll(10, 0));
  EXPECT_EQ(apic.acknowledge(), 0x41);
  EXPECT_EQ(apic.eoi().vector, 0x41);
  EXPECT_FALSE(apic.poll(19, 0));
  EXPECT_TRUE(apic.poll(20, 0));
}

}  // namespace

namespace {

// IRR, ISR and TMR as eight 32-bit registers (SDM 11.8.4, Figure 11-20: vector v is bit v % 32
// of register v / 32), the TMR after an edge and a level interrupt (11.8.4: "the TMR bit is
// set ... for level-triggered interrupts and cleared for edge-triggered"), TPR read back.
TEST(LapicRegisters, VectorSetWordsTmrAndTpr) {
  a::vector_set s;
  EXPECT_TRUE(s.empty());
  s.set(0x31);
  s.set(0xff);
  EXPECT_FALSE(s.empty());
  EXPECT_EQ(s.word(1), 1u << 17);
  EXPECT_EQ(s.word(7), 1u << 31);
  for (unsigned i : {0u, 2u, 3u, 4u, 5u, 6u}) EXPECT_EQ(s.word(i), 0u) << i;
  s.reset(0x31);
  s.reset(0xff);
  EXPECT_TRUE(s.empty());

  a::local_apic apic;
  EXPECT_EQ(apic.accept_fixed(0x41, a::trigger_mode::level), a::accept_result::accepted);
  EXPECT_EQ(apic.accept_fixed(0x42, a::trigger_mode::edge), a::accept_result::accepted);
  EXPECT_EQ(apic.tmr().word(2), 1u << 1);
  EXPECT_TRUE(apic.irr().test(0x41) && apic.irr().test(0x42));
  apic.set_tpr(0x50);
  EXPECT_EQ(apic.tpr(), 0x50);
  EXPECT_EQ(apic.pending(), -1);  // class 4 <= TPR class 5 (11.8.3.1)
  apic.set_tpr(0x3f);
  EXPECT_EQ(apic.pending(), 0x42);
}

// The LVT timer register reads back what was written; timer mode 11b is reserved (Figure
// 11-8): an armed reserved-mode timer never fires.
TEST(LapicTimer, ReservedModeNeverFires) {
  a::local_apic apic;
  apic.write_lvt_timer(0x30);           // one-shot, vector 30H
  apic.write_initial_count(10, 0);
  apic.write_lvt_timer((3u << 17) | 0x30);  // mode 11b
  EXPECT_EQ(apic.lvt_timer(), (3u << 17) | 0x30u);
  EXPECT_EQ(apic.mode(), a::timer_mode::reserved);
  EXPECT_FALSE(apic.poll(1'000'000, 1'000'000));
  EXPECT_EQ(apic.pending(), -1);
}

}  // namespace
