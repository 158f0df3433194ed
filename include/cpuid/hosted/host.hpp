// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted conveniences for cpuid/ (needs libc and the C++ library): read the host
/// into a table, parse the kernel's /proc/cpuinfo, and print a table.
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/cpuid/hosted/host.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "../decode.hpp"
#include "../host.hpp"
#include "../table.hpp"

namespace hvkit::cpuid::hosted {

/// Reads the processor this code runs on. (CPUID answers may differ between CPUs of a
/// hybrid system or in APIC-ID fields; pin the thread if that matters.)
inline result<table<>, table_error> read_host() {
  table<> t;
  if (auto r = read_all(host_source{}, t); !r) return unexpected(r.error());
  return t;
}

/// What Linux reports for the first processor in /proc/cpuinfo.
struct proc_cpuinfo {
  std::string vendor_id;
  std::uint32_t family = 0, model = 0, stepping = 0;
  std::uint32_t physical_bits = 0, virtual_bits = 0;
  std::set<std::string> flags;
  bool valid = false;
};

/// Parses the text of /proc/cpuinfo (x86 format), first processor only.
inline proc_cpuinfo parse_proc_cpuinfo(const std::string& text) {
  proc_cpuinfo out;
  std::istringstream in(text);
  std::string line;
  bool seen_processor = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      if (seen_processor && line.empty()) break;  // end of the first processor's block
      continue;
    }
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    std::string value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (key == "processor") seen_processor = true;
    else if (key == "vendor_id") out.vendor_id = value;
    else if (key == "cpu family") out.family = static_cast<std::uint32_t>(std::stoul(value));
    else if (key == "model") out.model = static_cast<std::uint32_t>(std::stoul(value));
    else if (key == "stepping") out.stepping = static_cast<std::uint32_t>(std::stoul(value));
    else if (key == "flags") {
      std::istringstream fl(value);
      std::string f;
      while (fl >> f) out.flags.insert(f);
    } else if (key == "address sizes") {
      unsigned p = 0, v = 0;
      if (std::sscanf(value.c_str(), "%u bits physical, %u bits virtual", &p, &v) == 2) {
        out.physical_bits = p;
        out.virtual_bits = v;
      }
    }
  }
  out.valid = seen_processor && !out.vendor_id.empty();
  return out;
}

/// Reads and parses /proc/cpuinfo; `valid` is false when it cannot be read.
inline proc_cpuinfo read_proc_cpuinfo(const char* path = "/proc/cpuinfo") {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream s;
  s << f.rdbuf();
  return parse_proc_cpuinfo(s.str());
}

/// Prints one line per entry: "leaf.subleaf: eax ebx ecx edx".
template <std::size_t N>
void print(const table<N>& t, std::FILE* out = stdout) {
  for (const entry& e : t)
    std::fprintf(out, "%08x.%-2u: %08x %08x %08x %08x\n", e.leaf, e.subleaf, e.value.eax, e.value.ebx, e.value.ecx,
                 e.value.edx);
}

}  // namespace hvkit::cpuid::hosted
