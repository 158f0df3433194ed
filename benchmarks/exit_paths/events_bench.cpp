// SPDX-License-Identifier: MIT
// Event handling on every VM exit, each beside a hand-written minimal version in this binary
// (same soft_vmcs backend, same pre-generated exits; results checked equal before timing):
//  BM_complete_exit_events/hvkit   vmx::complete_exit_events (read the IDT-vectoring and
//                                  NMI-unblocking information, re-inject, fix blocking by NMI)
//  BM_complete_exit_events/minimal the same rules written out with raw VMREAD/VMWRITE
//  BM_inject_exception/hvkit       vmx::inject_exception (read what is pending, merge per
//                                  SDM Table 6-5, write the injection)
//  BM_inject_exception/minimal     the same with a bit-mask classification and raw accesses
// The exits are a shuffled mix in which most exits carry no event (as CPUID, I/O and MSR
// exits do), so the common path dominates but the branch predictor cannot learn the pattern.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "iterations.hpp"

#include <hvkit/vmx/event_injection.hpp>
#include <hvkit/vmx/reinjection.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

namespace vmx = hvkit::vmx;
namespace x86 = hvkit::x86;

namespace {

constexpr std::size_t n_exits = 256;  // 256 pre-filled VMCSs (~0.5 MB): fits L2, defeats prediction

// Encodings (SDM Vol. 3D Appendix B) for the hand-written side.
constexpr std::uint32_t enc_idt_info = 0x4408, enc_idt_error = 0x440a, enc_exit_len = 0x440c,
                        enc_exit_intr_info = 0x4404, enc_qual = 0x6400, enc_interruptibility = 0x4824,
                        enc_entry_info = 0x4016, enc_entry_error = 0x4018, enc_entry_len = 0x401a,
                        enc_pin_based = 0x4000;

struct exit_sample {
  vmx::exit_reason reason;
  std::uint32_t idt_info, idt_error, length, exit_intr_info;
  std::uint64_t qualification;
  std::uint32_t interruptibility;
};

std::vector<exit_sample> make_exits() {
  std::mt19937 rng(27);
  std::vector<exit_sample> v;
  for (std::size_t i = 0; i < n_exits; ++i) {
    exit_sample s{vmx::exit_reason::cpuid, 0, 0, 2, 0, 0, (rng() & 1) ? 8u : 0u};
    const unsigned k = rng() % 100;
    if (k < 60) {
      static constexpr vmx::exit_reason quiet[] = {vmx::exit_reason::cpuid, vmx::exit_reason::io_instruction,
                                                   vmx::exit_reason::rdmsr, vmx::exit_reason::cr_access};
      s.reason = quiet[rng() % 4];
    } else if (k < 75) {  // EPT violation, NMI unblocking due to IRET in 1 of 4
      s.reason = vmx::exit_reason::ept_violation;
      s.qualification = 0x181 | ((rng() % 4 == 0) ? 0x1000u : 0u);
    } else if (k < 85) {  // exception exit (#PF, #UD, NMI), bit 12 in 1 of 4
      s.reason = vmx::exit_reason::exception_or_nmi;
      static constexpr std::uint32_t ex[] = {0x80000b0e, 0x80000306, 0x80000202, 0x80000b08};
      s.exit_intr_info = ex[rng() % 4] | ((rng() % 4 == 0) ? 0x1000u : 0u);
    } else {  // during event delivery: external interrupt, #PF with error code, NMI, INT n
      s.reason = (rng() & 1) ? vmx::exit_reason::ept_violation : vmx::exit_reason::exception_or_nmi;
      static constexpr std::uint32_t ev[] = {0x800000ef, 0x80000b0e, 0x80000202, 0x80000480};
      s.idt_info = ev[rng() % 4];
      s.idt_error = 6;
    }
    v.push_back(s);
  }
  return v;
}

std::vector<vmx::soft_vmcs> make_vmcss(const std::vector<exit_sample>& exits) {
  std::vector<vmx::soft_vmcs> out(exits.size());
  for (std::size_t i = 0; i < exits.size(); ++i) {
    auto& b = out[i];
    const auto& s = exits[i];
    b.store(enc_idt_info, s.idt_info);
    b.store(enc_idt_error, s.idt_error);
    b.store(enc_exit_len, s.length);
    b.store(enc_exit_intr_info, s.exit_intr_info);
    b.store(enc_qual, s.qualification);
    b.store(enc_interruptibility, s.interruptibility);
  }
  return out;
}

// The rules of SDM 28.2.3/28.2.4 written out: one VMREAD in the common case. It reads the
// pin-based controls where bit 12 matters (the SDM 28.2.2 "undefined" case); the pin-based
// controls are 0 in every sample, so the answers are the same whether or not the library
// applies that rule.
[[gnu::always_inline]] inline std::uint32_t complete_minimal(vmx::soft_vmcs& b, vmx::exit_reason reason) {
  const auto idt = static_cast<std::uint32_t>(b.read(enc_idt_info).value());
  bool set_nmi = false, clear_nmi = false;
  if (idt >> 31) {
    const std::uint32_t type = (idt >> 8) & 7;
    if (idt & 0x800) (void)b.write(enc_entry_error, b.read(enc_idt_error).value());
    if (type == 4 || type == 5 || type == 6) (void)b.write(enc_entry_len, b.read(enc_exit_len).value());
    (void)b.write(enc_entry_info, idt & 0x80000fffu);
    clear_nmi = type == 2;
  } else if (reason == vmx::exit_reason::exception_or_nmi || reason == vmx::exit_reason::ept_violation ||
             reason == vmx::exit_reason::pml_full || reason == vmx::exit_reason::spp_event) {
    // Bit 12 is undefined with "NMI exiting" 1 and "virtual NMIs" 0 (SDM 28.2.2).
    const auto pin = b.read(enc_pin_based).value();
    if (!(pin & 8) || (pin & 32)) {
      if (reason == vmx::exit_reason::exception_or_nmi) {
        const auto i = b.read(enc_exit_intr_info).value();
        set_nmi = (i >> 31) && (i & 0xff) != 8 && (i & 0x1000);
      } else {
        set_nmi = (b.read(enc_qual).value() >> 12) & 1;
      }
    }
  }
  if (set_nmi || clear_nmi) {
    const auto s = b.read(enc_interruptibility).value();
    const auto n = set_nmi ? (s | 8) : (s & ~std::uint64_t{8});
    if (n != s) (void)b.write(enc_interruptibility, n);
  }
  return idt;
}

void BM_complete_exit_events_hvkit(benchmark::State& state) {
  const auto exits = make_exits();
  auto vmcss = make_vmcss(exits);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto r = vmx::complete_exit_events(vmcss[i], exits[i].reason);
    // Observe what a caller consumes, as the minimal side does (its 4-byte return value);
    // DoNotOptimize on the whole result<> would force its 36 bytes to memory every iteration.
    benchmark::DoNotOptimize(r.has_value() ? r->reinject.info.raw() : 1u);
    i = (i + 1) % n_exits;
  }
}

void BM_complete_exit_events_minimal(benchmark::State& state) {
  const auto exits = make_exits();
  auto vmcss = make_vmcss(exits);
  std::size_t i = 0;
  for (auto _ : state) {
    const auto r = complete_minimal(vmcss[i], exits[i].reason);
    benchmark::DoNotOptimize(r);
    i = (i + 1) % n_exits;
  }
}

// ---- injection ----------------------------------------------------------------------------

struct inject_sample {
  std::uint32_t pending;  // VM-entry interruption information already written (0: none)
  x86::exception_event second;
};

std::vector<inject_sample> make_injections() {
  std::mt19937 rng(6);
  std::vector<inject_sample> v;
  static constexpr std::uint32_t pend[] = {0x800000ef /* ext int */, 0x80000b0e /* #PF */, 0x80000b0d /* #GP */,
                                           0x80000b08 /* #DF */, 0x80000306 /* #UD */};
  static constexpr x86::exception_event sec[] = {{x86::vector::gp, 0}, {x86::vector::pf, 2}, {x86::vector::ud, 0},
                                                 {x86::vector::db, 0}};
  for (std::size_t i = 0; i < n_exits; ++i) {
    const std::uint32_t p = rng() % 100 < 70 ? 0 : pend[rng() % 5];
    v.push_back({p, sec[rng() % 4]});
  }
  return v;
}

constexpr std::uint32_t contributory = (1u << 0) | (0xfu << 10) | (1u << 21);  // SDM Table 6-4
constexpr std::uint32_t page_fault_class = (1u << 14) | (1u << 20);
constexpr std::uint32_t with_error_code = (1u << 8) | (0x1fu << 10) | (1u << 17) | (1u << 21);

// Returns the written interruption information, or 0 on shutdown (nothing written).
[[gnu::always_inline]] inline std::uint32_t inject_minimal(vmx::soft_vmcs& b, x86::exception_event e) {
  const auto pending = static_cast<std::uint32_t>(b.read(enc_entry_info).value());
  unsigned v = static_cast<unsigned>(e.v);
  std::uint32_t ec = e.error_code;
  if ((pending >> 31) && ((pending >> 8) & 7) == 3) {  // only a hardware exception is classed
    const unsigned first = pending & 0xff;
    const std::uint32_t a = 1u << first, bm = 1u << v;
    if (first == 8) {
      if (bm & (contributory | page_fault_class)) return 0;
    } else if (((a & contributory) && (bm & contributory)) ||
               ((a & page_fault_class) && (bm & (contributory | page_fault_class)))) {
      v = 8;
      ec = 0;
    }
  }
  const bool has_ec = ((with_error_code >> v) & 1u) != 0;
  if (has_ec) (void)b.write(enc_entry_error, ec);
  const std::uint32_t info = 0x80000300u | v | (has_ec ? 0x800u : 0u);
  (void)b.write(enc_entry_info, info);
  return info;
}

void BM_inject_exception_hvkit(benchmark::State& state) {
  const auto samples = make_injections();
  vmx::soft_vmcs b;
  std::size_t i = 0;
  for (auto _ : state) {
    b.store(enc_entry_info, samples[i].pending);  // the processor's side: what is pending
    const auto r = vmx::inject_exception(b, samples[i].second);
    // As above: the value the minimal side returns (0 on shutdown, else what was written).
    benchmark::DoNotOptimize(!r || r->verdict == x86::merge_verdict::shutdown ? 0u : r->event.info.raw());
    i = (i + 1) % n_exits;
  }
}

void BM_inject_exception_minimal(benchmark::State& state) {
  const auto samples = make_injections();
  vmx::soft_vmcs b;
  std::size_t i = 0;
  for (auto _ : state) {
    b.store(enc_entry_info, samples[i].pending);
    const auto r = inject_minimal(b, samples[i].second);
    benchmark::DoNotOptimize(r);
    i = (i + 1) % n_exits;
  }
}

// Both sides must leave the same VM-entry fields and interruptibility state behind.
bool same_results() {
  const auto exits = make_exits();
  auto a = make_vmcss(exits), m = make_vmcss(exits);
  for (std::size_t i = 0; i < n_exits; ++i) {
    if (!vmx::complete_exit_events(a[i], exits[i].reason)) return false;
    (void)complete_minimal(m[i], exits[i].reason);
    for (std::uint32_t enc : {enc_entry_info, enc_entry_error, enc_entry_len, enc_interruptibility})
      if (a[i].read(enc).value() != m[i].read(enc).value()) return false;
  }
  const auto samples = make_injections();
  for (const auto& s : samples) {
    vmx::soft_vmcs x, y;
    x.store(enc_entry_info, s.pending);
    y.store(enc_entry_info, s.pending);
    const auto q = vmx::inject_exception(x, s.second);
    const auto r = inject_minimal(y, s.second);
    if (!q) return false;
    if ((q->verdict == x86::merge_verdict::shutdown) != (r == 0)) return false;
    if (r != 0 && (x.read(enc_entry_info).value() != y.read(enc_entry_info).value() ||
                   x.read(enc_entry_error).value() != y.read(enc_entry_error).value()))
      return false;
  }
  return true;
}

const bool registered = [] {
  if (!same_results()) {
    std::fprintf(stderr, "events_bench: hvkit and the minimal versions disagree\n");
    std::abort();
  }
  exit_paths::register_benchmark("BM_complete_exit_events/hvkit", BM_complete_exit_events_hvkit);
  exit_paths::register_benchmark("BM_complete_exit_events/minimal", BM_complete_exit_events_minimal);
  exit_paths::register_benchmark("BM_inject_exception/hvkit", BM_inject_exception_hvkit);
  exit_paths::register_benchmark("BM_inject_exception/minimal", BM_inject_exception_minimal);
  return true;
}();

}  // namespace
