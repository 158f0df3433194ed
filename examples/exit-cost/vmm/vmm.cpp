// SPDX-License-Identifier: MIT
// exit-cost-vmm: a tiny static VMM on /dev/kvm (no QEMU) that runs the exit-cost guest
// (examples/exit-cost/guest) for the KVM column of the exit-cost table.
//
//   exit-cost-vmm GUEST.bin
//
// It creates a VM with 32 MiB of memory at guest-physical 0, writes identity page tables
// (2 MiB pages, 0-4 GiB) at 0x1000, loads the flat guest at 0x1000000, sets up 64-bit mode
// (CR0.PE|PG|WP|NE, CR4.PAE, EFER.LME|LMA, a 64-bit code segment) with the CPUID KVM
// supports, and runs it. KVM handles CPUID, RDMSR, MOV to CR0 and HLT in the kernel; the
// I/O-port and MMIO exits come here (KVM_EXIT_IO, KVM_EXIT_MMIO):
//   port 0xE9: console bytes (lines relayed to stdout), port 0x700: the measured port
//   write (discarded), port 0xF4: the end; MMIO page 0xD0000000: the measured write
//   (discarded). Anything else ends the run with an error.
// Output (stdout): the guest's lines as they are, then one line per row:
//   exit-cost: kvm <row> tsc_per_rep=<x> handled=<in-kernel|user-space|no-exit|floor>
//              kernel_exits_per_rep=<x> user_exits_per_rep=<y>
// (exits per repetition from KVM's vCPU statistics: where each row was handled, measured),
// and the user-space exit counts by kind.
// Exit status: 0 when the guest reached its end, 1 otherwise.
#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <hvkit/x86/cr.hpp>
#include <hvkit/x86/efer.hpp>
#include <string>
#include <vector>

namespace {

constexpr std::uint64_t mem_size = 32u << 20, pml4_gpa = 0x1000, guest_gpa = 0x100'0000;
constexpr std::uint64_t mmio_page = 0xd000'0000;
constexpr std::uint16_t port_console = 0xe9, port_end = 0xf4, port_test = 0x700;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "exit-cost-vmm: %s: %s\n", what, std::strerror(errno));
  std::fflush(stdout);
  std::exit(1);
}

int ioctl_or_die(int fd, unsigned long req, const void* arg, const char* what) {
  const int r = ioctl(fd, req, arg);
  if (r < 0) die(what);
  return r;
}

std::uint64_t fnv1a(const std::vector<unsigned char>& b) {
  std::uint64_t h = 0xcbf2'9ce4'8422'2325u;
  for (unsigned char c : b) h = (h ^ c) * 0x100'0000'01b3u;
  return h;
}

void put64(unsigned char* mem, std::uint64_t gpa, std::uint64_t v) { std::memcpy(mem + gpa, &v, 8); }

// Identity map of 0-4 GiB with 2 MiB pages: PML4 0x1000, PDPT 0x2000, four PDs 0x3000-0x6fff.
void build_page_tables(unsigned char* mem) {
  constexpr std::uint64_t p = 1, rw = 2, ps = 0x80;
  put64(mem, pml4_gpa, 0x2000 | p | rw);
  for (std::uint64_t i = 0; i < 4; ++i) {
    put64(mem, 0x2000 + 8 * i, (0x3000 + 0x1000 * i) | p | rw);
    for (std::uint64_t j = 0; j < 512; ++j)
      put64(mem, 0x3000 + 0x1000 * i + 8 * j, ((i << 30) | (j << 21)) | p | rw | ps);
  }
}

kvm_segment segment(std::uint16_t sel, std::uint8_t type, bool code) {
  kvm_segment s{};
  s.base = 0;
  s.limit = 0xffff'ffff;
  s.selector = sel;
  s.type = type;
  s.present = 1;
  s.dpl = 0;
  s.db = code ? 0 : 1;
  s.s = 1;
  s.l = code ? 1 : 0;
  s.g = 1;
  return s;
}

// The vCPU's binary statistics (KVM_GET_STATS_FD, Linux 5.14+): the counter "exits" (every
// VM exit), read at every console line. Between two row lines, the exits that came to user
// space are the KVM_RUN returns this VMM saw; the rest of "exits" stayed in the kernel.
struct vcpu_stats {
  int fd = -1;
  std::uint64_t data_offset = 0;
  long exits = -1;  // byte offset in the data block
  bool open(int vcpu) {
    fd = ioctl(vcpu, KVM_GET_STATS_FD, 0);
    if (fd < 0) return false;
    kvm_stats_header h{};
    if (pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return false;
    data_offset = h.data_offset;
    // Each descriptor: flags (u32), exponent (s16), size (u16), offset (u32), bucket_size
    // (u32), then the name in name_size bytes; read by hand (as for kvm_cpuid2, C++ sees a
    // different sizeof for the header's flexible-array struct).
    constexpr std::size_t desc_fixed = 16, offset_at = 8;
    const std::size_t dsize = desc_fixed + h.name_size;
    std::vector<char> d(dsize * h.num_desc + 1);
    if (pread(fd, d.data(), d.size() - 1, h.desc_offset) != static_cast<ssize_t>(d.size() - 1)) return false;
    for (std::uint32_t i = 0; i < h.num_desc; ++i) {
      const char* k = d.data() + i * dsize;
      std::uint32_t off;
      std::memcpy(&off, k + offset_at, 4);
      const std::string name(k + desc_fixed, strnlen(k + desc_fixed, h.name_size));
      if (name == "exits") exits = off;
    }
    return exits >= 0;
  }
  std::uint64_t read(long off) const {
    std::uint64_t v = 0;
    if (pread(fd, &v, sizeof v, static_cast<off_t>(data_offset + off)) != static_cast<ssize_t>(sizeof v)) return 0;
    return v;
  }
};

// Where KVM handles each row when the vCPU statistics are missing (otherwise the measured
// exit counts decide): expected for KVM 6.1 on VMX with EPT and on SVM with NPT: CPUID, RDMSR of
// EFER and a MOV to CR0 that changes WP exit and are handled in the kernel; CR0.TS is
// guest-owned; I/O and MMIO exits without an in-kernel device come to user space).
const char* handled(const std::string& row) {
  if (row == "empty") return "floor";
  if (row == "cr0_ts") return "no-exit";
  if (row == "out_port" || row == "mmio_write") return "user-space";
  return "in-kernel";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: exit-cost-vmm GUEST.bin\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<unsigned char> image;
  {
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) die(argv[1]);
    unsigned char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) image.insert(image.end(), buf, buf + n);
    std::fclose(f);
  }
  if (image.empty() || image.size() > mem_size - guest_gpa - 0x10000) {
    std::fprintf(stderr, "exit-cost-vmm: %s: bad guest size %zu\n", argv[1], image.size());
    return 1;
  }
  std::printf("exit-cost-vmm: guest %s bytes=%zu fnv1a=%016llx\n", argv[1], image.size(),
              static_cast<unsigned long long>(fnv1a(image)));

  const int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0) die("/dev/kvm");
  if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) die("KVM_GET_API_VERSION");
  const int vm = ioctl(kvm, KVM_CREATE_VM, 0);
  if (vm < 0) die("KVM_CREATE_VM");
  // VMX without unrestricted guest needs a TSS area below 4 GiB; harmless otherwise (Intel only).
  if (ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_SET_TSS_ADDR) > 0) (void)ioctl(vm, KVM_SET_TSS_ADDR, 0xfffb'd000ul);

  void* m = mmap(nullptr, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) die("mmap guest memory");
  auto* mem = static_cast<unsigned char*>(m);
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = mem_size;
  region.userspace_addr = reinterpret_cast<std::uint64_t>(mem);
  ioctl_or_die(vm, KVM_SET_USER_MEMORY_REGION, &region, "KVM_SET_USER_MEMORY_REGION");
  build_page_tables(mem);
  std::memcpy(mem + guest_gpa, image.data(), image.size());

  const int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
  if (vcpu < 0) die("KVM_CREATE_VCPU");
  const int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (run_size < static_cast<int>(sizeof(kvm_run))) die("KVM_GET_VCPU_MMAP_SIZE");
  auto* run = static_cast<kvm_run*>(mmap(nullptr, static_cast<std::size_t>(run_size), PROT_READ | PROT_WRITE,
                                         MAP_SHARED, vcpu, 0));
  if (run == MAP_FAILED) die("mmap kvm_run");

  // CPUID: what KVM supports (long mode must be in it before EFER.LME is accepted). The
  // buffer is laid out by hand: in C++ the header's flexible-array macro makes
  // sizeof(kvm_cpuid2) 12 instead of the kernel's 8, which changes the ioctl numbers too
  // (KVM then answers EINVAL). The kernel's layout: nent, padding, entries at offset 8.
  constexpr unsigned max_entries = 256;
  constexpr unsigned long get_supported_cpuid = _IOC(_IOC_READ | _IOC_WRITE, KVMIO, 0x05, 8);
  constexpr unsigned long set_cpuid2 = _IOC(_IOC_WRITE, KVMIO, 0x90, 8);
  static_assert(sizeof(kvm_cpuid_entry2) == 40);
  std::vector<std::uint32_t> cpuid_buf(2 + max_entries * sizeof(kvm_cpuid_entry2) / 4);
  cpuid_buf[0] = max_entries;
  auto* cpuid = cpuid_buf.data();
  if (ioctl(kvm, get_supported_cpuid, cpuid) < 0) {
    // Seen on a KVM host that is itself a guest: try without (KVM_SET_SREGS may refuse EFER.LME).
    std::fprintf(stderr, "exit-cost-vmm: KVM_GET_SUPPORTED_CPUID: %s (going on without KVM_SET_CPUID2)\n",
                 std::strerror(errno));
  } else {
    std::printf("exit-cost-vmm: CPUID: %u entries from KVM_GET_SUPPORTED_CPUID\n", cpuid_buf[0]);
    ioctl_or_die(vcpu, set_cpuid2, cpuid, "KVM_SET_CPUID2");
  }

  kvm_sregs sregs{};
  ioctl_or_die(vcpu, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS");
  sregs.cs = segment(0x8, 0xb, true);
  sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = segment(0x10, 0x3, false);
  sregs.cr3 = pml4_gpa;
  namespace x86 = hvkit::x86;
  sregs.cr4 = x86::cr4::pae.raw();
  sregs.cr0 = (x86::cr0::pg | x86::cr0::wp | x86::cr0::ne | x86::cr0::et | x86::cr0::pe).raw();
  sregs.efer = (x86::efer::lme | x86::efer::lma).raw();
  ioctl_or_die(vcpu, KVM_SET_SREGS, &sregs, "KVM_SET_SREGS");
  kvm_regs regs{};
  regs.rip = guest_gpa;
  regs.rflags = 2;
  ioctl_or_die(vcpu, KVM_SET_REGS, &regs, "KVM_SET_REGS");

  vcpu_stats stats;
  const bool have_stats = stats.open(vcpu);
  if (!have_stats) std::fprintf(stderr, "exit-cost-vmm: no vCPU statistics (KVM_GET_STATS_FD): exit counts not shown\n");
  std::uint64_t last_exits = 0, runs = 0, last_runs = 0;

  std::string line;
  struct row_result {
    std::string name, per_rep;
    double kernel_exits = -1, user_exits = -1;  // per repetition (warm-up included in the count)
  };
  std::vector<row_result> rows;
  unsigned long long n_console = 0, n_port = 0, n_mmio = 0, n_other = 0;
  bool done = false;
  while (!done) {
    if (ioctl(vcpu, KVM_RUN, 0) < 0) {
      if (errno == EINTR) continue;
      die("KVM_RUN");
    }
    ++runs;
    switch (run->exit_reason) {
      case KVM_EXIT_IO: {
        const auto* data = reinterpret_cast<const unsigned char*>(run) + run->io.data_offset;
        if (run->io.direction != KVM_EXIT_IO_OUT || run->io.size != 1) {
          ++n_other;
          std::fprintf(stderr, "exit-cost-vmm: unexpected I/O port 0x%x dir %d size %d\n", run->io.port,
                       run->io.direction, run->io.size);
          done = true;
          break;
        }
        if (run->io.port == port_test) {
          ++n_port;
        } else if (run->io.port == port_console) {
          ++n_console;
          for (unsigned i = 0; i < run->io.count; ++i) {
            const char c = static_cast<char>(data[i]);
            if (c != '\n') {
              line += c;
              continue;
            }
            std::printf("%s\n", line.c_str());
            // exit-cost-guest: row=NAME reps=N tsc=T tsc_per_rep=X
            const auto r = line.find("row="), p = line.find("tsc_per_rep="), n = line.find("reps=");
            const std::uint64_t e = have_stats ? stats.read(stats.exits) : 0;
            if (r != std::string::npos && p != std::string::npos && n != std::string::npos) {
              row_result rr{line.substr(r + 4, line.find(' ', r) - r - 4), line.substr(p + 12)};
              // The timed repetitions plus the 16 of the warm-up; this line's own bytes are
              // console exits (one each, the newline included).
              const double reps = std::strtod(line.c_str() + n + 5, nullptr) + 16;
              if (have_stats) {
                const double all_user = static_cast<double>(runs - last_runs);
                const double console = static_cast<double>(line.size() + 1);
                rr.user_exits = (all_user - console) / reps;
                rr.kernel_exits = (static_cast<double>(e - last_exits) - all_user) / reps;
              }
              rows.push_back(rr);
            }
            last_exits = e, last_runs = runs;
            line.clear();
          }
        } else if (run->io.port == port_end) {
          done = true;
        } else {
          ++n_other;
          std::fprintf(stderr, "exit-cost-vmm: unexpected OUT to port 0x%x\n", run->io.port);
          done = true;
        }
        break;
      }
      case KVM_EXIT_MMIO:
        if (run->mmio.is_write && (run->mmio.phys_addr & ~0xfffull) == mmio_page) {
          ++n_mmio;
        } else {
          ++n_other;
          std::fprintf(stderr, "exit-cost-vmm: unexpected MMIO %s at 0x%llx\n", run->mmio.is_write ? "write" : "read",
                       static_cast<unsigned long long>(run->mmio.phys_addr));
          done = true;
        }
        break;
      case KVM_EXIT_HLT:
        std::fprintf(stderr, "exit-cost-vmm: the guest halted before its end\n");
        done = true;
        ++n_other;
        break;
      default: {
        kvm_regs r{};
        (void)ioctl(vcpu, KVM_GET_REGS, &r);
        std::fprintf(stderr, "exit-cost-vmm: exit reason %u at rip 0x%llx (hardware reason 0x%llx)\n",
                     run->exit_reason, static_cast<unsigned long long>(r.rip),
                     static_cast<unsigned long long>(run->hw.hardware_exit_reason));
        ++n_other;
        done = true;
      }
    }
  }
  for (const auto& r : rows)
    std::printf("exit-cost: kvm %s tsc_per_rep=%s handled=%s kernel_exits_per_rep=%.3f user_exits_per_rep=%.3f\n",
                r.name.c_str(), r.per_rep.c_str(),
                r.kernel_exits < 0 ? handled(r.name)
                : r.user_exits >= 0.5 ? "user-space"
                : r.kernel_exits >= 0.5 ? "in-kernel"
                : r.name == "empty" ? "floor" : "no-exit",
                r.kernel_exits, r.user_exits);
  std::printf("exit-cost-vmm: user-space exits: console %llu, port 0x700 %llu, mmio %llu, unexpected %llu\n", n_console,
              n_port, n_mmio, n_other);
  return n_other == 0 && rows.size() == 7 ? 0 : 1;
}
