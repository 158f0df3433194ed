// SPDX-License-Identifier: MIT
// The real host CPU decoded by hvkit, compared with the kernel's view in /proc/cpuinfo.
//
// The oracle is Linux: it reads the same CPUID bits independently. Known differences:
//  - flags Linux synthesizes or derives (constant_tsc, rep_good, nopl, xtopology, cpuid,
//    ibpb, ssbd, ...) have no single CPUID bit: they are not in hvkit's table and are
//    skipped with a message;
//  - kernel_may_clear lists CPUID bits the kernel clears in some configurations (TSX off,
//    4-level paging, BIOS-disabled VMX/SGX, inactive SME/SEV, errata): a host bit set
//    without the flag is then reported, not failed. A flag the kernel shows whose CPUID
//    bit is clear always fails;
//  - "address sizes" physical can be reduced by the kernel when memory encryption steals
//    address bits (SME/TME): compared only when the host has neither.
#include <gtest/gtest.h>

#include <hvkit/cpuid/decode.hpp>
#include <hvkit/cpuid/host.hpp>
#include <hvkit/cpuid/hosted/host.hpp>

#include <cstdio>
#include <set>
#include <string>

namespace cpuid = hvkit::cpuid;
namespace hosted = cpuid::hosted;

namespace {
const std::set<std::string> kernel_may_clear = {
    // TSX disabled (tsx=off, TAA mitigation)
    "hle", "rtm", "tsxldtrk",
    // paging and address-space options (no5lvl, nopcid, noinvpcid, nopku, nox2apic)
    "la57", "pcid", "invpcid", "pku", "x2apic",
    // firmware-disabled or inactive: VMX/SMX (IA32_FEATURE_CONTROL), SVM (VM_CR.SVMDIS),
    // SGX, memory encryption, PPIN
    "vmx", "smx", "svm", "sgx", "sgx_lc", "sme", "sev", "sev_es", "sev_snp", "tme", "pconfig", "amd_ppin",
    // XSAVE family (noxsave, noxsaves, noxsaveopt), and features that need kernel support
    "xsaves", "xsavec", "xsaveopt", "xgetbv1", "enqcmd", "uintr", "arch_lbr", "intel_pt", "lwp", "ibs",
    // errata and idle/timer choices (TSC-deadline microcode erratum, MONITOR/MWAITX quirks,
    // AMD Zen 5 RDSEED erratum: the kernel logs "RDSEED32 is broken" and clears the bit)
    "tsc_deadline_timer", "monitor", "mwaitx", "rdseed",
    // drivers that own the bit (resctrl, intel_pstate/HWP, HFI, CPPC, IRPERF, DCA, PDCM/PMU)
    "cqm", "rdt_a", "hwp", "hwp_notify", "hwp_act_window", "hwp_epp", "hwp_pkg_req", "hfi", "cppc", "irperf",
    "dca", "pdcm", "perfctr_core", "perfctr_nb", "perfctr_llc"};
// Flags that are names of a feature hvkit knows but that the kernel sets from more than
// one source (so the flag can be present while hvkit's bit is clear).
const std::set<std::string> kernel_may_synthesize = {"hypervisor"};
}  // namespace

TEST(cpuid_host, parse_proc_cpuinfo_text) {
  const auto p = hosted::parse_proc_cpuinfo(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
      "stepping\t: 1\nflags\t\t: fpu vme sse2 avx512f\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n"
      "processor\t: 1\nvendor_id\t: GenuineIntel\n");
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.vendor_id, "AuthenticAMD");
  EXPECT_EQ(p.family, 25u);
  EXPECT_EQ(p.model, 17u);
  EXPECT_EQ(p.stepping, 1u);
  EXPECT_EQ(p.physical_bits, 48u);
  EXPECT_EQ(p.virtual_bits, 48u);
  EXPECT_EQ(p.flags, (std::set<std::string>{"fpu", "vme", "sse2", "avx512f"}));
}

TEST(cpuid_host, print_table) {
  cpuid::table<4> t;
  ASSERT_TRUE(t.set(0xd, 1, {0xf, 0x9a8, 0x1800, 0}));
  ASSERT_TRUE(t.set(0x0, 0, {0x1c, 0x68747541, 0x444d4163, 0x69746e65}));
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  hosted::print(t, f);
  std::rewind(f);
  char buf[256] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, n),
            "00000000.0 : 0000001c 68747541 444d4163 69746e65\n"
            "0000000d.1 : 0000000f 000009a8 00001800 00000000\n");
}

class cpuid_host_vs_kernel : public ::testing::Test {
 protected:
  void SetUp() override {
    kernel = hosted::read_proc_cpuinfo();
    if (!kernel.valid) GTEST_SKIP() << "/proc/cpuinfo not readable";
    auto t = hosted::read_host();
    ASSERT_TRUE(t.has_value()) << "host table full";
    host = t.value();
    info = cpuid::decode(host);
  }
  hosted::proc_cpuinfo kernel;
  cpuid::table<> host;
  cpuid::host_info info;
};

TEST_F(cpuid_host_vs_kernel, vendor_family_model_stepping) {
  const auto s = cpuid::vendor_string(host.get(0));
  EXPECT_EQ(std::string(s.data(), s.size()), kernel.vendor_id);
  EXPECT_NE(info.v, cpuid::vendor::unknown) << "vendor " << kernel.vendor_id;
  EXPECT_EQ(info.sig.family, kernel.family);
  EXPECT_EQ(info.sig.model, kernel.model);
  EXPECT_EQ(info.sig.stepping, kernel.stepping);
}

TEST_F(cpuid_host_vs_kernel, address_sizes) {
  EXPECT_EQ(info.widths.linear, kernel.virtual_bits);
  if (info.features.test(cpuid::feat::sme) || info.features.test(cpuid::feat::tme))
    GTEST_SKIP() << "memory encryption may reduce the kernel's physical address bits";
  EXPECT_EQ(info.widths.physical, kernel.physical_bits);
}

TEST_F(cpuid_host_vs_kernel, feature_flags) {
  int compared = 0;
  for (const auto& n : cpuid::named_features) {
    if (!n.in_proc_cpuinfo) continue;
    const bool cpu = info.features.test(n.f);
    const bool os = kernel.flags.count(n.name) != 0;
    ++compared;
    if (os && !cpu && !kernel_may_synthesize.count(n.name)) ADD_FAILURE() << n.name << ": the kernel shows it, CPUID bit clear";
    if (cpu && !os) {
      if (kernel_may_clear.count(n.name))
        std::printf("[   NOTE   ] %s: CPUID bit set, the kernel cleared it (allowed)\n", n.name);
      else
        ADD_FAILURE() << n.name << ": CPUID bit set, not in /proc/cpuinfo";
    }
  }
  std::string skipped;
  for (const auto& f : kernel.flags) {
    const auto* n = cpuid::find_named(f.c_str());
    if (n == nullptr || !n->in_proc_cpuinfo) skipped += " " + f;
  }
  std::printf("[   NOTE   ] %d named features compared; kernel flags without a single CPUID bit in hvkit's table, skipped:%s\n",
              compared, skipped.c_str());
  EXPECT_GT(compared, 100);
  // Something must actually be set on any x86-64 host: the check cannot pass vacuously.
  EXPECT_TRUE(info.features.test(cpuid::feat::lm) && kernel.flags.count("lm"));
  EXPECT_TRUE(info.features.test(cpuid::feat::sse2) && kernel.flags.count("sse2"));
}
