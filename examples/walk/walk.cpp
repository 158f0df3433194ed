// SPDX-License-Identifier: MIT
// hvkit-walk: walks the page tables in a guest's memory image, the introspection use case
// of hvkit's paging/ walkers. The image is raw dumps (--dump, --region: several regions with
// holes between) or an ELF core from QEMU's dump-guest-memory / virsh dump (its CR0, CR3
// and CR4 are taken from the core's CPU-state note); paging/hosted/image.hpp reads it. The
// printing is the library's (paging/hosted/print.hpp), the enumeration of --mappings is
// paging/mappings.hpp, --read is paging/read_virtual.hpp.
//
// The dump is read-only: no A/D flag is set. The walks are raw translations (no permission
// check), like a debugger's.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/hosted/image.hpp>
#include <hvkit/paging/hosted/print.hpp>
#include <hvkit/paging/mappings.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/read_virtual.hpp>
#include <hvkit/paging/region_memory.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/x86/address.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/efer.hpp>
#include <hvkit/x86/paging_mode.hpp>

namespace {

using namespace hvkit;

constexpr const char* usage_text =
    "usage: hvkit-walk IMAGE --cr0 X --cr3 X [--cr4 X] [--efer X]\n"
    "                  (--gva X | --range A B | --mappings [--range A B] | --read X N [--raw])\n"
    "                  [--maxphyaddr N] [--no-1g] [--amd] [--max-lines N]\n"
    "       hvkit-walk IMAGE --eptp X (--gpa X | --mappings [--range A B])\n"
    "       hvkit-walk IMAGE --eptp X --cr0 X --cr3 X ... (--gva X | --mappings)\n"
    "       hvkit-walk IMAGE --info\n"
    "  IMAGE is --dump FILE [--base GPA] and/or --region GPA FILE ...\n"
    "\n"
    "Walks the guest page tables in a guest's memory image (read-only: no A/D flag is set;\n"
    "no permission check, like a debugger).\n"
    "\n"
    "  --dump FILE       a raw dump whose first byte is guest-physical address --base, or an\n"
    "                    ELF core (QEMU dump-guest-memory without -p, virsh dump\n"
    "                    --memory-only --format elf): its PT_LOAD segments by physical address,\n"
    "                    and CR0, CR3, CR4 of its first vCPU unless given below\n"
    "  --base GPA        guest-physical address of the raw dump's first byte (default 0)\n"
    "  --region GPA FILE another raw file at GPA (repeatable): an image with holes; reads\n"
    "                    outside every region are unbacked\n"
    "  --info            list the image's regions and the core's CPU state\n"
    "  --cr0/--cr3/--cr4/--efer X\n"
    "                    the guest's control registers; they select the paging mode\n"
    "                    (EFER.LMA is derived from LME and CR0.PG). A core has no EFER: when\n"
    "                    its CS.L is set, LME, LMA and NXE are assumed (0xd00; said on stderr)\n"
    "  --read X N        read N bytes at guest-virtual X through the walker (crossing pages);\n"
    "                    a hex dump, or the bytes themselves with --raw; a fault stops it\n"
    "                    with the address that failed\n"
    "  --gva X           print the chain of entries for X and its translation or fault\n"
    "  --range A B       one line per page (or not-present region) of [A, B); the\n"
    "                    non-canonical hole is one line\n"
    "  --mappings        one line per mapped page, skipping everything not present, with\n"
    "                    --range A B only the pages overlapping [A, B)\n"
    "  --eptp X          an EPT pointer (SDM 25.6.11): with --gpa, the EPT walk of a\n"
    "                    guest-physical address; with --mappings alone, every EPT mapping;\n"
    "                    with --mappings and the guest's control registers, every mapping of\n"
    "                    the guest's linear addresses through its paging and EPT (nested)\n"
    "  --gpa X           with --eptp: print the chain of EPT entries for X\n"
    "                    (--gva X with --eptp and the guest's registers: a nested walk)\n"
    "  --maxphyaddr N    the guest's MAXPHYADDR, 32..52 (default 52)\n"
    "  --no-1g           no 1 GiB pages (PS in a PDPTE is reserved)\n"
    "  --amd             AMD: bit 8 of a PML4E/PML5E is reserved\n"
    "  --max-lines N     stop --range/--mappings after N lines (default 1000000); the cut-off\n"
    "                    is printed and the exit status is 3\n"
    "  --help            this text\n"
    "\n"
    "Numbers take a 0x prefix for hex. Exit status: 0 success, 1 the walk faulted (--gva,\n"
    "--read) or the image cannot be read, 2 bad arguments, 3 output cut off at --max-lines.\n";

struct options {
  std::string dump;
  std::vector<std::pair<std::uint64_t, std::string>> regions;
  bool info = false, have_read = false, raw = false, have_cr4 = false, have_efer = false;
  std::uint64_t read_at = 0, read_size = 0;
  std::uint64_t base = 0, cr0 = 0, cr3 = 0, cr4 = 0, efer = 0;
  bool have_cr0 = false, have_cr3 = false, have_gva = false, have_range = false, mappings = false;
  bool have_eptp = false, have_gpa = false;
  std::uint64_t gva = 0, from = 0, to = 0, eptp = 0, gpa = 0;
  std::uint64_t max_lines = 1'000'000;
  unsigned maxphyaddr = 52;
  bool gbpages = true, amd = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "hvkit-walk: %s\n%s", why.c_str(), usage_text);
  std::exit(2);
}

std::uint64_t number(const char* s) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || *s == '-') usage(std::string("not a number: ") + s);
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    } else if (a == "--dump") o.dump = next();
    else if (a == "--base") o.base = number(next());
    else if (a == "--cr0") o.cr0 = number(next()), o.have_cr0 = true;
    else if (a == "--cr3") o.cr3 = number(next()), o.have_cr3 = true;
    else if (a == "--cr4") o.cr4 = number(next()), o.have_cr4 = true;
    else if (a == "--efer") o.efer = number(next()), o.have_efer = true;
    else if (a == "--region") {
      const std::uint64_t at = number(next());
      o.regions.emplace_back(at, next());
    } else if (a == "--info") o.info = true;
    else if (a == "--read") {
      o.read_at = number(next());
      o.read_size = number(next());
      o.have_read = true;
    } else if (a == "--raw") o.raw = true;
    else if (a == "--gva") o.gva = number(next()), o.have_gva = true;
    else if (a == "--range") {
      o.from = number(next());
      o.to = number(next());
      o.have_range = true;
    } else if (a == "--mappings") o.mappings = true;
    else if (a == "--eptp") o.eptp = number(next()), o.have_eptp = true;
    else if (a == "--gpa") o.gpa = number(next()), o.have_gpa = true;
    else if (a == "--max-lines") o.max_lines = number(next());
    else if (a == "--maxphyaddr") {
      o.maxphyaddr = static_cast<unsigned>(number(next()));
      if (!x86::is_valid_maxphyaddr(o.maxphyaddr)) usage("--maxphyaddr must be 32..52");
    } else if (a == "--no-1g") o.gbpages = false;
    else if (a == "--amd") o.amd = true;
    else usage("unknown option " + a);
  }
  if (o.dump.empty() && o.regions.empty()) usage("--dump or --region is required");
  if (o.info) return o;
  if (o.have_gva + (o.have_range && !o.mappings) + o.mappings + o.have_gpa + o.have_read != 1)
    usage("give exactly one of --gva, --gpa, --range, --mappings and --read");
  if (o.raw && !o.have_read) usage("--raw goes with --read");
  if (o.have_read && o.have_eptp) usage("--read walks the guest's own tables (no --eptp)");
  if (o.have_eptp && o.have_range && !o.mappings) usage("--range with --eptp needs --mappings");
  if (o.have_gva && o.have_range) usage("--gva and --range exclude each other");
  if (o.have_range && o.to < o.from) usage("--range A B needs A <= B");
  return o;
}

void say(const std::string& s) { std::fputs(s.c_str(), stdout); }

// The non-canonical hole of IA-32e paging: [lo, hi], or lo > hi when there is none.
struct hole {
  std::uint64_t lo = 1, hi = 0;
};
hole hole_of(x86::paging_mode m) {
  if (m == x86::paging_mode::four_level) return {0x0000'8000'0000'0000u, 0xffff'7fff'ffff'ffffu};
  if (m == x86::paging_mode::five_level) return {0x0100'0000'0000'0000u, 0xfeff'ffff'ffff'ffffu};
  return {};
}

int print_cut_off(std::uint64_t lines, std::uint64_t next) {
  std::printf("hvkit-walk: output cut off after %llu lines, next address %s: raise --max-lines or narrow --range\n",
              static_cast<unsigned long long>(lines), hosted::hex16(next).c_str());
  return 3;
}

template <class T>
std::uint64_t first_address(const T& m) {
  if constexpr (requires { m.linear; }) return m.linear;
  else return m.input;
}

// Prints every item of a mapping cursor, then a summary line; says a cut-off (exit 3).
template <class Pages>
int list(Pages& pages, std::uint64_t max_lines) {
  std::uint64_t lines = 0, found = 0, faults = 0;
  for (const auto& m : pages) {
    if (lines == max_lines) return print_cut_off(lines, m ? first_address(*m) : m.error().linear.value());
    if (m) {
      say(to_string(*m) + '\n');
      ++found;
    } else {
      say("fault: " + to_string(m.error()) + " (" + hosted::hex16(m.error().linear.value()) + ")\n");
      ++faults;
    }
    ++lines;
  }
  std::printf("%llu mappings, %llu faults, %llu entries read%s\n", static_cast<unsigned long long>(found),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(pages.reads()),
              pages.truncated() ? " (stopped at the read limit)" : "");
  return 0;
}

// --info: the regions and, for a core, its first vCPU's registers.
int print_info(const paging::memory_image& image) {
  std::uint64_t total = 0;
  for (const auto& r : image.regions()) {
    std::printf("region %s - %s (%llu bytes)\n", hosted::hex16(r.base.value()).c_str(),
                hosted::hex16(r.end() - 1).c_str(), static_cast<unsigned long long>(r.size));
    total += r.size;
  }
  std::printf("%zu regions, %llu bytes\n", image.regions().size(), static_cast<unsigned long long>(total));
  if (const auto& core = image.core(); core && core->has_cpu_state) {
    const auto& c = core->cpu0;
    std::printf("core: %zu vCPU notes; vCPU 0 (QEMU state version %u): RIP %s RFLAGS %s CS %#x%s\n", core->cpus,
                c.version, hosted::hex16(c.rip).c_str(), hosted::hex(c.rflags).c_str(), c.cs.selector,
                c.cs_long() ? " (64-bit)" : "");
    std::printf("  CR0 %s CR2 %s CR3 %s CR4 %s\n", hosted::hex(c.cr[0]).c_str(), hosted::hex(c.cr[2]).c_str(),
                hosted::hex(c.cr[3]).c_str(), hosted::hex(c.cr[4]).c_str());
  } else if (image.core()) {
    std::puts("core: no QEMU CPU-state note");
  }
  return 0;
}

// --read X N: the bytes through the walker, as a hex dump (16 a line) or raw.
int read_range(const paging::guest_walker& walker, const paging::region_view& mem, const options& o) {
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(o.read_size));
  const auto r = paging::read_virtual(walker, mem, x86::gva{o.read_at}, buf.data(), buf.size());
  const std::size_t got = r ? buf.size() : r.error().bytes_read;
  if (o.raw) {
    std::fwrite(buf.data(), 1, got, stdout);
  } else {
    for (std::size_t line = 0; line < got; line += 16) {
      std::string hexes, text;
      for (std::size_t i = line; i < line + 16; ++i) {
        if (i < got) {
          static constexpr char digits[] = "0123456789abcdef";
          hexes += digits[buf[i] >> 4];
          hexes += digits[buf[i] & 15];
          hexes += ' ';
          text += buf[i] >= 0x20 && buf[i] < 0x7f ? static_cast<char>(buf[i]) : '.';
        } else {
          hexes += "   ";
        }
      }
      say(hosted::hex16(o.read_at + line) + "  " + hexes + " |" + text + "|\n");
    }
  }
  if (!r) {
    std::fflush(stdout);
    std::fprintf(o.raw ? stderr : stdout, "fault: %s\n", to_string(r.error()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {

  options o = parse(argc, argv);
  paging::memory_image image;
  auto add = [&](const std::string& file, std::uint64_t base) {
    if (const auto r = image.add_file(file, x86::gpa{base}); !r) {
      std::fprintf(stderr, "hvkit-walk: %s: %s\n", file.c_str(), to_string(r.error()).c_str());
      std::exit(1);
    }
  };
  if (!o.dump.empty()) add(o.dump, o.base);
  for (const auto& [at, file] : o.regions) add(file, at);
  const auto view = image.view();
  if (!view) return 1;  // add() refused any set of regions that makes no view
  const paging::region_view mem = *view;
  if (o.info) return print_info(image);

  // Registers a core carries, unless given on the command line (EFER is not in a core).
  if (const auto& core = image.core(); core && core->has_cpu_state) {
    const auto& cpu = core->cpu0;
    if (!o.have_cr0) o.cr0 = cpu.cr[0], o.have_cr0 = true;
    if (!o.have_cr3) o.cr3 = cpu.cr[3], o.have_cr3 = true;
    if (!o.have_cr4) o.cr4 = cpu.cr[4], o.have_cr4 = true;
    if (!o.have_efer && cpu.cs_long()) {
      o.efer = (hvkit::x86::efer::lme | hvkit::x86::efer::lma | hvkit::x86::efer::nxe).raw();
      std::fputs("hvkit-walk: EFER is not in the core; CS.L is set, so LME, LMA and NXE are assumed (0xd00): "
                 "give --efer to override\n", stderr);
    }
  }
  const bool ept_only = o.have_eptp && !o.have_cr3;
  if (!ept_only && (!o.have_cr0 || !o.have_cr3)) usage("--cr0 and --cr3 are required (or an ELF core with them)");
  if (o.have_gpa && !ept_only) usage("--gpa needs --eptp (and no guest registers)");

  // EPT: the capabilities of a processor with every page size and A/D (SDM A.10).
  paging::ept_capabilities caps{};
  caps.maxphyaddr = o.maxphyaddr;
  paging::ept_walker ept{};
  if (o.have_eptp) {
    const auto w = paging::ept_walker::make(paging::ept_pointer{o.eptp}, caps);
    if (!w) {
      std::fprintf(stderr, "hvkit-walk: bad EPTP %s: %s\n", hosted::hex16(o.eptp).c_str(), to_string(w.error()).c_str());
      return 2;
    }
    ept = *w;
  }
  if (o.have_eptp && !o.have_cr3) {
    if (o.have_gpa) {
      const auto r = ept.translate(mem, x86::gpa{o.gpa});
      say(paging::format_ept_walk(ept, x86::gpa{o.gpa}, r));
      return r ? 0 : 1;
    }
    paging::mapping_range range{};
    if (o.have_range) {
      if (o.to == o.from) return 0;
      range = {o.from, o.to - 1};
    }
    auto pages = paging::ept_mappings<paging::region_view>::make(paging::ept_pointer{o.eptp}, caps, mem, range);
    if (!pages) return 2;  // checked by ept_walker::make above
    return list(*pages, o.max_lines);
  }

  const x86::cr0 cr0{o.cr0};
  const x86::cr4 cr4{o.cr4};
  x86::efer efer{o.efer};
  // EFER.LMA is LME with paging on (SDM 2.2.1); a dump's EFER may have been saved either way.
  if (efer.test(x86::efer::lme) && cr0.test(x86::cr0::pg)) efer.set(x86::efer::lma);
  const auto mode = x86::paging_mode_of(cr0, cr4, efer);
  const auto root = x86::cr3_root(x86::cr3{o.cr3}, mode, o.maxphyaddr);
  const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
  paging::cpu_properties props{};
  props.maxphyaddr = o.maxphyaddr;
  props.gbpages = o.gbpages;
  props.amd_nonleaf_bit8 = o.amd;

  paging::pdpte_snapshot pdptes{};
  if (mode == x86::paging_mode::pae) {
    const auto l = paging::load_pdptrs(x86::cr3{o.cr3}, mem, o.maxphyaddr);
    if (!l) {
      std::printf("PDPTE %u @ %s = %s: %s (#GP at the load)\n", l.error().index,
                  hosted::hex16(l.error().address.value()).c_str(),
                  hosted::hex16(l.error().value).c_str(),
                  l.error().kind == paging::pdptr_error::kind_type::unbacked ? "not in the dump" : "reserved bit set");
      return 1;
    }
    pdptes = *l;
  }
  const paging::guest_walker walker(mmu, props, pdptes);

  if (o.have_gva && o.have_eptp) {
    // A nested walk: the guest's tables through EPT, then EPT for the final address.
    const x86::gva va{o.gva};
    const auto& st = walker.state();
    paging::nested_result r = paging::nested_result(unexpected(paging::walk_fault{}));
    switch (mode) {
      case x86::paging_mode::two_level:
        r = paging::nested_walker<paging::format::ia32>(paging::walker_32bit(st), ept).translate(mem, va);
        break;
      case x86::paging_mode::pae:
        r = paging::nested_walker<paging::format::pae>(paging::walker_pae(st), ept).translate(mem, va);
        break;
      case x86::paging_mode::four_level:
        r = paging::nested_walker<paging::format::ia32e<4>>(paging::walker_4level(st), ept).translate(mem, va);
        break;
      case x86::paging_mode::five_level:
        r = paging::nested_walker<paging::format::ia32e<5>>(paging::walker_5level(st), ept).translate(mem, va);
        break;
      case x86::paging_mode::none: {
        paging::translation g{};
        g.address = x86::gpa{o.gva & 0xffff'ffffu};
        g.page_shift = 12;
        g.rights = paging::pte_access::paging_rights;
        const auto second = ept.translate(mem, g.address);
        r = second ? paging::nested_result(paging::nested_translation{g, *second})
                   : paging::nested_result(unexpected(second.error()));
        break;
      }
    }
    say(paging::format_nested_walk(st, va, r));
    return r ? 0 : 1;
  }
  if (o.have_read) return read_range(walker, mem, o);
  if (o.have_gva) {
    const auto r = walker.translate(mem, x86::gva{o.gva});
    say(paging::format_walk(walker.state(), x86::gva{o.gva}, r));
    return r ? 0 : 1;
  }

  if (o.mappings) {
    paging::mapping_range range{};
    if (o.have_range) {
      if (o.to == o.from) return 0;
      range = {o.from, o.to - 1};
    }
    if (o.have_eptp) {
      paging::nested_mappings<paging::ept_walker, paging::region_view> pages(walker.state(), ept, mem, range);
      return list(pages, o.max_lines);
    }
    paging::guest_mappings pages(walker.state(), mem, range);
    return list(pages, o.max_lines);
  }

  // --range: one line per page or not-present region.
  const hole h = hole_of(mode);
  const bool ia32e = mode == x86::paging_mode::four_level || mode == x86::paging_mode::five_level;
  // Without IA-32e paging linear addresses have 32 bits.
  const std::uint64_t to = !ia32e && o.to > 0x1'0000'0000u ? 0x1'0000'0000u : o.to;
  std::uint64_t va = o.from & ~(x86::page_size_4k - 1);
  std::uint64_t lines = 0;
  // Consecutive regions that fault alike (same kind, same level) are one line: "A    kind
  // (entry)", with "through B" when the run covers more than one region.
  struct run_type {
    bool open = false;
    std::uint64_t first = 0, last = 0;
    std::string what;
    unsigned regions = 0;
  } run;
  std::uint64_t cut_at = 0;
  auto emit = [&](std::uint64_t at, const std::string& line) {
    if (lines == o.max_lines) {
      cut_at = at;
      return false;
    }
    say(line + '\n');
    ++lines;
    return true;
  };
  auto flush = [&]() {
    if (!run.open) return true;
    run.open = false;
    std::string line = hosted::hex16(run.first) + "    " + run.what;
    if (run.regions > 1) line += " through " + hosted::hex16(run.last);
    return emit(run.first, line);
  };
  while (va < to) {
    std::uint64_t step = x86::page_size_4k;
    std::string what;
    if (va >= h.lo && va <= h.hi) {
      // The non-canonical hole: no walk takes place (#GP); one line, then the upper half.
      what = "non-canonical (#GP) through " + hosted::hex16(h.hi);
      step = h.hi - va + 1;
    } else if (const auto r = walker.translate(mem, x86::gva{va})) {
      if (!flush()) return print_cut_off(lines, cut_at);
      step = r->page_size() - (va & (r->page_size() - 1));
      if (!emit(va, hosted::hex16(va) + " -> " + hosted::hex16(r->address.value()) + "  " +
                        paging::page_size_name(r->page_shift) + ' ' + paging::guest_rights(r->rights)))
        return print_cut_off(lines, cut_at);
    } else {
      const unsigned level = r.error().level;
      what = to_string(r.error().kind) + " (" + std::string(level ? paging::entry_name(level) : "-") + ")";
      // Skip the whole region the failing entry covers (SDM 4.3/4.5: 10 or 9 bits per level).
      if (level > 1) {
        const unsigned bits = mode == x86::paging_mode::two_level ? 10 : 9;
        const std::uint64_t region = std::uint64_t{1} << (12 + bits * (level - 1));
        step = region - (va & (region - 1));
      }
    }
    if (!what.empty()) {
      if (!(run.open && run.what == what)) {
        if (!flush()) return print_cut_off(lines, cut_at);
        run = run_type{true, va, 0, what, 0};
      }
      run.last = va + step - 1;
      ++run.regions;
    }
    if (va + step < va) break;  // wrapped around the address space: done
    va += step;
  }
  if (!flush()) return print_cut_off(lines, cut_at);
  return 0;
}
