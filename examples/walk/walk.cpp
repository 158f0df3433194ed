// hvkit-walk: walks the page tables in a raw guest-physical memory dump, the introspection
// use case of hvkit's paging/ walkers.
//
//   hvkit-walk --dump FILE [--base GPA] --cr0 X --cr3 X --cr4 X --efer X
//              (--gva X | --range A B) [--maxphyaddr N] [--no-1g] [--amd]
//
// Numbers take a 0x prefix for hex. The dump is read-only: no A/D flag is set. For --gva the
// chain of entries is printed, for --range one line per page (stepping by the page size).
// The walk is the raw translation (no permission check), like a debugger's.
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/x86/cr3.hpp>
#include <hvkit/x86/paging_mode.hpp>

namespace {

using namespace hvkit;

struct options {
  std::string dump;
  std::uint64_t base = 0, cr0 = 0, cr3 = 0, cr4 = 0, efer = 0;
  bool have_cr0 = false, have_cr3 = false, have_gva = false, have_range = false;
  std::uint64_t gva = 0, from = 0, to = 0;
  unsigned maxphyaddr = 52;
  bool gbpages = true, amd = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "hvkit-walk: %s\n"
               "usage: hvkit-walk --dump FILE [--base GPA] --cr0 X --cr3 X --cr4 X --efer X\n"
               "                  (--gva X | --range A B) [--maxphyaddr N] [--no-1g] [--amd]\n",
               why);
  std::exit(2);
}

std::uint64_t number(const char* s) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') usage((std::string("not a number: ") + s).c_str());
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--dump") o.dump = next();
    else if (a == "--base") o.base = number(next());
    else if (a == "--cr0") o.cr0 = number(next()), o.have_cr0 = true;
    else if (a == "--cr3") o.cr3 = number(next()), o.have_cr3 = true;
    else if (a == "--cr4") o.cr4 = number(next());
    else if (a == "--efer") o.efer = number(next());
    else if (a == "--gva") o.gva = number(next()), o.have_gva = true;
    else if (a == "--range") {
      o.from = number(next());
      o.to = number(next());
      o.have_range = true;
    } else if (a == "--maxphyaddr") {
      o.maxphyaddr = static_cast<unsigned>(number(next()));
      if (o.maxphyaddr < 32 || o.maxphyaddr > 52) usage("--maxphyaddr must be 32..52");
    } else if (a == "--no-1g") o.gbpages = false;
    else if (a == "--amd") o.amd = true;
    else usage(("unknown option " + a).c_str());
  }
  if (o.dump.empty()) usage("--dump is required");
  if (!o.have_cr0 || !o.have_cr3) usage("--cr0 and --cr3 are required");
  if (o.have_gva == o.have_range) usage("give exactly one of --gva and --range");
  if (o.have_range && o.to < o.from) usage("--range A B needs A <= B");
  return o;
}

const char* entry_name(x86::paging_mode m, unsigned level) {
  switch (level) {
    case 5: return "PML5E";
    case 4: return "PML4E";
    case 3: return "PDPTE";
    case 2: return "PDE";
    default: break;
  }
  static_cast<void>(m);
  return "PTE";
}

const char* mode_name(x86::paging_mode m) {
  switch (m) {
    case x86::paging_mode::none: return "paging off";
    case x86::paging_mode::two_level: return "32-bit";
    case x86::paging_mode::pae: return "PAE";
    case x86::paging_mode::four_level: return "4-level";
    case x86::paging_mode::five_level: return "5-level";
  }
  return "?";
}

const char* kind_name(paging::fault_kind k) {
  switch (k) {
    case paging::fault_kind::none: return "none";
    case paging::fault_kind::not_present: return "not present";
    case paging::fault_kind::reserved_bit: return "reserved bit set";
    case paging::fault_kind::permission: return "permission";
    case paging::fault_kind::protection_key: return "protection key";
    case paging::fault_kind::unbacked: return "not in the dump";
    case paging::fault_kind::ept_misconfig: return "EPT misconfiguration";
    case paging::fault_kind::non_canonical: return "non-canonical address";
    case paging::fault_kind::invalid_pdpte: return "invalid PDPTE";
    case paging::fault_kind::retry_exhausted: return "entries kept changing";
  }
  return "?";
}

// The flags of an IA-32 paging entry, in SDM order.
std::string entry_flags(std::uint64_t e, unsigned level, bool leaf, bool nx_mode) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) {
      if (!s.empty()) s += ' ';
      s += name;
    }
  };
  add(e & 1, "P");
  add(e & 2, "RW");
  add(e & 4, "US");
  add(e & 8, "PWT");
  add(e & 16, "PCD");
  add(e & 32, "A");
  add(leaf && (e & 64), "D");
  add(level > 1 && (e & 128), "PS");
  add(leaf && (e & 256), "G");
  add(nx_mode && (e >> 63), "XD");
  return s;
}

std::string page_size_name(std::uint64_t s) {
  if (s == x86::page_size_1g) return "1 GiB";
  if (s == x86::page_size_4m) return "4 MiB";
  if (s == x86::page_size_2m) return "2 MiB";
  return "4 KiB";
}

std::string rights_name(paging::pte_access r) {
  std::string s = "r";
  s += r.test(paging::pte_access::write) ? 'w' : '-';
  s += r.test(paging::pte_access::exec) ? 'x' : '-';
  s += r.test(paging::pte_access::user) ? " user" : " supervisor";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);

  std::FILE* f = std::fopen(o.dump.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "hvkit-walk: cannot open %s: %s\n", o.dump.c_str(), std::strerror(errno));
    return 1;
  }
  std::vector<std::uint8_t> image;
  std::uint8_t chunk[65536];
  for (std::size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) image.insert(image.end(), chunk, chunk + n);
  std::fclose(f);
  const paging::flat_view mem(image.data(), image.size(), x86::gpa{o.base});

  const x86::cr0 cr0{o.cr0};
  const x86::cr4 cr4{o.cr4};
  x86::efer efer{o.efer};
  // EFER.LMA is LME with paging on (SDM 2.2.1); a dump's EFER may have been saved either way.
  if (efer.test(x86::efer::lme) && cr0.test(x86::cr0::pg)) efer = efer.set(x86::efer::lma);
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
      std::printf("PDPTE %u @ 0x%016" PRIx64 " = 0x%016" PRIx64 ": %s (#GP at the load)\n", l.error().index,
                  l.error().address.value(), l.error().value,
                  l.error().kind == paging::pdptr_error::kind_type::unbacked ? "not in the dump" : "reserved bit set");
      return 1;
    }
    pdptes = *l;
  }
  const paging::guest_walker walker(mmu, props, pdptes);
  const bool nx_mode = mode != x86::paging_mode::two_level && efer.test(x86::efer::nxe);

  if (o.have_gva) {
    std::printf("gva 0x%016" PRIx64 ": %s paging, root 0x%016" PRIx64 "\n", o.gva, mode_name(mode), root.value());
    const auto r = walker.translate(mem, x86::gva{o.gva});
    if (r) {
      for (unsigned i = 0; i < r->path.count; ++i) {
        const auto e = r->path[i];
        const bool leaf = i + 1 == r->path.count;
        std::printf("  %-5s @ 0x%016" PRIx64 " = 0x%016" PRIx64 "  %s\n", entry_name(mode, e.level), e.address.value(),
                    e.value, entry_flags(e.value, e.level, leaf, nx_mode).c_str());
      }
      std::printf("  -> gpa 0x%016" PRIx64 " (%s page, %s, pkey %u)\n", r->address.value(),
                  page_size_name(r->page_size()).c_str(), rights_name(r->rights).c_str(), unsigned{r->pkey});
      return 0;
    }
    const auto& e = r.error();
    if (e.kind == paging::fault_kind::non_canonical) {
      std::printf("  fault: non-canonical address (#%s)\n", e.vector == x86::vector::ss ? "SS" : "GP");
      return 1;
    }
    std::printf("  fault: %s at %s @ 0x%016" PRIx64 " = 0x%016" PRIx64 " (#PF error code 0x%" PRIx64 ")\n",
                kind_name(e.kind), entry_name(mode, e.level), e.entry_address.value(), e.entry_value,
                e.error_code.raw());
    return 1;
  }

  // --range: one line per page.
  std::uint64_t va = o.from & ~(x86::page_size_4k - 1);
  unsigned lines = 0;
  while (va < o.to && lines < 1'000'000) {
    const auto r = walker.translate(mem, x86::gva{va});
    std::uint64_t step = x86::page_size_4k;
    if (r) {
      step = r->page_size() - (va & (r->page_size() - 1));
      std::printf("0x%016" PRIx64 " -> 0x%016" PRIx64 "  %s %s\n", va, r->address.value(),
                  page_size_name(r->page_size()).c_str(), rights_name(r->rights).c_str());
    } else {
      const unsigned level = r.error().level;
      std::printf("0x%016" PRIx64 "    %s (%s)\n", va, kind_name(r.error().kind), level ? entry_name(mode, level) : "-");
      // Skip the whole region the failing entry covers (SDM 4.3/4.5: 10 or 9 bits per level).
      if (level > 1) {
        const unsigned bits = mode == x86::paging_mode::two_level ? 10 : 9;
        const std::uint64_t region = std::uint64_t{1} << (12 + bits * (level - 1));
        step = region - (va & (region - 1));
      }
    }
    ++lines;
    if (va + step < va) break;  // wrapped around the address space
    va += step;
  }
  return 0;
}
