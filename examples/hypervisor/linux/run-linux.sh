#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# examples/hypervisor/run --linux: the hvkit reference hypervisor hosting Debian's Linux
# kernel in VMX non-root operation (or as an SVM guest: --amd), booted to a shell, checked
# from inside the guest.
#
#   run --linux [--bochs | --amd | --kvm | --qemu-tcg] [--build-dir DIR] [--timeout SECONDS] [--cpu MODEL]
#               [--ips N] [--megs N] [--no-build] [--quiet] [--triple-fault] [--smp N] [--pv-send-ipi]
#               [--shadow | --shadow-no-root-cache]
#
# Builds the hypervisor and the guest image (linux/build-image.sh: kernel, busybox and
# headers fetched from Debian into DIR/../debian-cache or $HVKIT_DEBIAN_CACHE, shared with
# the nested-KVM run), boots under Bochs (default) or under
# QEMU+KVM when /dev/kvm offers nested VMX, and prints the summary: time to the shell
# prompt (wall and emulated), exits by reason, the in-guest verdicts, CR0.WP toggles.
# --amd: Bochs with an AMD CPU model (zambezi unless --cpu names another, e.g. ryzen): the
# same image runs its SVM backend (nested paging), with the same in-guest checks.
# --qemu-tcg: QEMU's TCG with -cpu max, the third SVM implementation (nested paging, none of
# NRIP save, decode assists, VMCB clean bits, flush-by-ASID): every intercepted instruction
# is decoded from guest memory to be skipped.
# --triple-fault: the hostile run: the guest kernel triple-faults on purpose after its shell
# prompt; passes when the hypervisor reports it and ends the run itself.
# --shadow: the hypervisor built with HVKIT_HV_SHADOW (build dir DIR-shadow): no EPT/NPT, the
# guest's memory virtualized by hvkit's shadow MMU (docs/shadow-mmu.md); one vCPU.
# --shadow-no-root-cache: the same without cached roots across role changes (every CR0.WP
# toggle rebuilds; build dir DIR-shadow-nocache), the baseline of the CR0.WP table.
# --smp N: N processors (Bochs `cpu: count=N`): the hypervisor runs a vCPU on each, the guest
# starts its application processors with INIT/SIPI (docs/smp.md); with --amd as well (SVM).
# --pv-send-ipi: the hypervisor offers KVM_FEATURE_PV_SEND_IPI and implements KVM_HC_SEND_IPI
# ("hvkit.pv_send_ipi" on the kernel command line); the runner then expects Linux's "setup PV
# IPIs" and hypercalls with --smp N > 1, and neither without the option. Both this and
# --triple-fault change the image's kernel command line: not with --no-build.
# Exit status: 0 every check passed; 1 a check failed or the run died; 77 skipped.
# Artifacts in DIR: linux-e9.log (the hypervisor's channel), linux-serial.log (the guest's
# console), bochs-linux.log, bochsrc-linux.
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
hvdir=$(cd "$here/.." && pwd)
root=$(cd "$hvdir/../.." && pwd)
build_dir=${HVKIT_HV_BUILD_DIR:-$root/build/hypervisor}
mode=auto
timeout_s=${HVKIT_LINUX_TIMEOUT:-600}
cpu_model=${HVKIT_LINUX_CPU:-tigerlake}
ips=${HVKIT_LINUX_IPS:-50000000}
megs=${HVKIT_LINUX_MEGS:-512}
do_build=1
cpus=1
quiet=0
cmdline=${HVKIT_LINUX_CMDLINE:-"console=ttyS0 quiet nokaslr panic=-1 mitigations=off"}
amd=0
cpu_given=0
shadow=OFF
shadow_nocache=OFF
pv_send_ipi=0
while [ $# -gt 0 ]; do
  case "$1" in
    --linux) ;;
    --bochs) mode=bochs ;;
    --amd) mode=bochs; amd=1 ;;
    --kvm) mode=kvm ;;
    --qemu-tcg) mode=qemu_tcg ;;
    --build-dir) build_dir=$2; shift ;;
    --build-dir=*) build_dir=${1#*=} ;;
    --timeout) timeout_s=$2; shift ;;
    --timeout=*) timeout_s=${1#*=} ;;
    --cpu) cpu_model=$2; cpu_given=1; shift ;;
    --cpu=*) cpu_model=${1#*=}; cpu_given=1 ;;
    --ips) ips=$2; shift ;;
    --megs) megs=$2; shift ;;
    --no-build) do_build=0 ;;
    --smp) cpus=$2; shift ;;
    --smp=*) cpus=${1#*=} ;;
    --triple-fault) cmdline="$cmdline hvkit.triple_fault" ;;
    --shadow) shadow=ON ;;
    --shadow-no-root-cache) shadow=ON; shadow_nocache=ON ;;
    --pv-send-ipi) cmdline="$cmdline hvkit.pv_send_ipi"; pv_send_ipi=1 ;;
    --quiet) quiet=1 ;;
    --verbose|--dump-cpuid) ;;  # options of the conformance run (scripts/hypervisor.sh passes them to both)
    --nested-kvm-in-bochs) echo "HVKIT-RUN SKIP: the Linux guest run has no nested-KVM mode"; exit 77 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run --linux: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
case "$build_dir" in /*) ;; *) build_dir=$PWD/$build_dir ;; esac
[ "$shadow" = ON ] && build_dir=$build_dir-shadow
[ "$shadow_nocache" = ON ] && build_dir=$build_dir-nocache
[ "$shadow" = ON ] && [ "$cpus" != 1 ] && { echo "run --linux: --shadow runs one vCPU (one shadow MMU)" >&2; exit 2; }
[ "$amd" = 1 ] && [ "$cpu_given" = 0 ] && cpu_model=zambezi
skip() { echo "HVKIT-RUN SKIP: $*"; exit 77; }
die() { echo "HVKIT-RUN ERROR: $*" >&2; exit 1; }
note() { [ "$quiet" = 1 ] || echo "hvkit-run: $*"; }

kvm_nested_vmx() {
  [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qw vmx /proc/cpuinfo || return 1
  grep -qiE '^(1|y)' /sys/module/kvm_intel/parameters/nested 2>/dev/null || return 1
  command -v qemu-system-x86_64 >/dev/null
}
if [ "$mode" = auto ]; then if kvm_nested_vmx; then mode=kvm; else mode=bochs; fi; fi
if [ "$mode" = qemu_tcg ]; then
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
elif [ "$mode" = kvm ]; then
  kvm_nested_vmx || skip "KVM mode needs /dev/kvm with kvm_intel nested=1 and qemu-system-x86_64"
else
  command -v bochs >/dev/null || skip "bochs not installed (apt-get install bochs bochsbios vgabios bochs-term)"
fi

# ---- build: the hypervisor (the same image as the conformance run), then the guest image --
if [ "$do_build" = 1 ]; then
  gen=()
  command -v ninja >/dev/null && [ ! -f "$build_dir/CMakeCache.txt" ] && gen=(-G Ninja)
  mkdir -p "$build_dir" || die "cannot create $build_dir"
  note "building the hypervisor in $build_dir"
  cmake -S "$hvdir" -B "$build_dir" "${gen[@]}" -DHVKIT_HV_SHADOW=$shadow -DHVKIT_HV_SHADOW_NO_ROOT_CACHE=$shadow_nocache \
    >"$build_dir/configure.log" 2>&1 ||
    { cat "$build_dir/configure.log" >&2; die "cmake configure failed"; }
  cmake --build "$build_dir" -j 2 >"$build_dir/build.log" 2>&1 ||
    { tail -50 "$build_dir/build.log" >&2; die "build failed (log: $build_dir/build.log)"; }
  note "building the Linux guest image (Debian packages cached in ${HVKIT_DEBIAN_CACHE:-$(dirname "$build_dir")/debian-cache})"
  image_info=$(bash "$here/build-image.sh" "$build_dir" "$build_dir/kernel.bin" "$cmdline")
  rc=$?
  [ $rc = 77 ] && { echo "$image_info" | grep 'HVKIT-RUN SKIP' || echo "HVKIT-RUN SKIP: guest image"; exit 77; }
  [ $rc = 0 ] || die "guest image build failed"
  image_info=$(echo "$image_info" | tail -1)
  echo "$image_info" >"$build_dir/linux-image/info.txt"
  note "guest image: $image_info"
else
  image_info=$(cat "$build_dir/linux-image/info.txt" 2>/dev/null)
fi
img=$build_dir/linux-image
e9=$build_dir/linux-e9.log
serial=$build_dir/linux-serial.log
rm -f "$e9" "$serial"

# ---- boot --------------------------------------------------------------------------------------
start_ns=$(date +%s%N)
if [ "$mode" = bochs ]; then
  [ -f "$img/hvkit-linux.iso" ] || die "no ISO at $img/hvkit-linux.iso"
  vgabios=/usr/share/vgabios/vgabios.bin
  [ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
  sed -e "s|@ISO@|$img/hvkit-linux.iso|g" -e "s|@SERIAL@|$serial|g" -e "s|@LOG@|$build_dir/bochs-linux.log|g" \
      -e "s|@BIOS@|/usr/share/bochs/BIOS-bochs-latest|g" -e "s|@VGABIOS@|$vgabios|g" \
      -e "s|@CPU_MODEL@|$cpu_model|g" -e "s|@MEGS@|$megs|g" -e "s|@IPS@|$ips|g" -e "s|@CPUS@|$cpus|g" \
      "$here/bochsrc.in" >"$build_dir/bochsrc-linux"
  printf 'c\nquit\n' >"$build_dir/bochs-linux.rc"
  if [ "$amd" = 1 ]; then
    # Bochs 2.7 SVM erratum (docs/hypervisor-results.md): a guest triple fault reaches the
    # SHUTDOWN intercept only after a debugger break and a CPU panic; the CPU's panics are
    # reported and the break continued (the hostile run's one triple fault).
    sed -i -e 's/^panic: action=fatal/panic: action=fatal, cpu0=report/' "$build_dir/bochsrc-linux"
    printf 'c\nc\nquit\n' >"$build_dir/bochs-linux.rc"
  fi
  note "booting Linux under the hypervisor under Bochs ($cpu_model, ips=$ips, ${megs} MiB), timeout ${timeout_s}s"
  # Bochs prints port 0xE9 on its stdout (with its term display's few bytes).
  (cd "$build_dir" && TERM=dumb exec timeout --kill-after=10 "$timeout_s" \
     bochs -q -f "$build_dir/bochsrc-linux" -rc "$build_dir/bochs-linux.rc" </dev/null >"$e9" 2>&1) &
else
  if [ "$mode" = qemu_tcg ]; then
    note "booting Linux under the hypervisor under QEMU TCG (-cpu max: SVM with nested paging), timeout ${timeout_s}s"
    accel=(-accel tcg -cpu max)
  else
    note "booting Linux under the hypervisor under QEMU+KVM (nested VMX), timeout ${timeout_s}s"
    accel=(-enable-kvm -cpu host,+vmx)
  fi
  timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 "${accel[@]}" -m "$megs" -smp "$cpus" \
    -kernel "$build_dir/kernel.bin" -append "linux $cmdline" \
    -initrd "$img/isoroot/boot/vmlinuz vmlinuz,$img/isoroot/boot/initrd.img initrd" \
    -serial "file:$serial" -debugcon "file:$e9" -global isa-debugcon.iobase=0xe9 \
    -device isa-debug-exit,iobase=0xf4,iosize=0x04 -display none -no-reboot -monitor none \
    </dev/null >"$build_dir/qemu-linux.log" 2>&1 &
fi
emu_pid=$!
first_line_ms= shell_ms=
while kill -0 $emu_pid 2>/dev/null; do
  now_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
  [ -z "$first_line_ms" ] && [ -s "$serial" ] && first_line_ms=$now_ms
  [ -z "$shell_ms" ] && grep -aq 'HVKIT-GUEST MARK shell' "$e9" 2>/dev/null && shell_ms=$now_ms
  sleep 0.25
done
wait $emu_pid
emu_rc=$?
wall_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))

# ---- parse and summarize ---------------------------------------------------------------------------
[ -f "$e9" ] || die "no hypervisor output (emulator exit $emu_rc)"
tr -d '\r' <"$e9" | grep -a '^HVKIT' >"$e9.txt"
tr -d '\r' <"$serial" 2>/dev/null >"$serial.txt" || : >"$serial.txt"
awk -v mode="$mode" -v cpus="$cpus" -v pv_send_ipi="$pv_send_ipi" -v cpu="$cpu_model" -v ips="$ips" -v wall_ms="$wall_ms" -v shell_ms="${shell_ms:-}" \
    -v first_ms="${first_line_ms:-}" -v emu_rc="$emu_rc" -v image="$image_info" -v e9="$e9" -v serial="$serial" '
function pad(s, n) { s = s ""; while (length(s) < n) s = s " "; return s }
function kv(line, key,    m) {
  if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); return substr(m, length(key) + 2) }
  return ""
}
function hex(s,    v, i, c) { s = tolower(s); sub(/^0x/, "", s); v = 0
  for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
  return v }
function bit(v, b) { return int(v / 2 ^ b) % 2 }
function check(name, pass, detail) {
  checks[++nchecks] = name; cstat[nchecks] = pass ? "PASS" : "FAIL"; cdet[nchecks] = detail
  if (pass) npass++; else nfail++
}
BEGIN {
  # Linux /proc/cpuinfo names of CPUID bits (the kernel'"'"'s arch/x86/include/asm/cpufeatures.h),
  # "<leaf>/<subleaf>/<register>/<bit> <name>": the oracle for the flags check, typed apart
  # from hvkit. Bits Linux never prints under their own name are left out.
  n = split("1/0/edx/0 fpu,1/0/edx/1 vme,1/0/edx/2 de,1/0/edx/3 pse,1/0/edx/4 tsc,1/0/edx/5 msr,1/0/edx/6 pae," \
    "1/0/edx/7 mce,1/0/edx/8 cx8,1/0/edx/9 apic,1/0/edx/11 sep,1/0/edx/12 mtrr,1/0/edx/13 pge,1/0/edx/14 mca," \
    "1/0/edx/15 cmov,1/0/edx/16 pat,1/0/edx/17 pse36,1/0/edx/18 pn,1/0/edx/19 clflush,1/0/edx/21 dts," \
    "1/0/edx/22 acpi,1/0/edx/23 mmx,1/0/edx/24 fxsr,1/0/edx/25 sse,1/0/edx/26 sse2,1/0/edx/27 ss,1/0/edx/28 ht," \
    "1/0/edx/29 tm,1/0/edx/31 pbe," \
    "1/0/ecx/0 pni,1/0/ecx/1 pclmulqdq,1/0/ecx/2 dtes64,1/0/ecx/3 monitor,1/0/ecx/4 ds_cpl,1/0/ecx/5 vmx," \
    "1/0/ecx/6 smx,1/0/ecx/7 est,1/0/ecx/8 tm2,1/0/ecx/9 ssse3,1/0/ecx/10 cid,1/0/ecx/11 sdbg,1/0/ecx/12 fma," \
    "1/0/ecx/13 cx16,1/0/ecx/14 xtpr,1/0/ecx/15 pdcm,1/0/ecx/17 pcid,1/0/ecx/18 dca,1/0/ecx/19 sse4_1," \
    "1/0/ecx/20 sse4_2,1/0/ecx/21 x2apic,1/0/ecx/22 movbe,1/0/ecx/23 popcnt,1/0/ecx/24 tsc_deadline_timer," \
    "1/0/ecx/25 aes,1/0/ecx/26 xsave,1/0/ecx/28 avx,1/0/ecx/29 f16c,1/0/ecx/30 rdrand,1/0/ecx/31 hypervisor," \
    "6/0/eax/0 dtherm,6/0/eax/1 ida,6/0/eax/2 arat,6/0/eax/4 pln,6/0/eax/6 pts,6/0/eax/7 hwp,6/0/eax/8 hwp_notify," \
    "6/0/eax/9 hwp_act_window,6/0/eax/10 hwp_epp,6/0/eax/11 hwp_pkg_req,6/0/eax/19 hfi," \
    "7/0/ebx/0 fsgsbase,7/0/ebx/1 tsc_adjust,7/0/ebx/2 sgx,7/0/ebx/3 bmi1,7/0/ebx/4 hle,7/0/ebx/5 avx2," \
    "7/0/ebx/7 smep,7/0/ebx/8 bmi2,7/0/ebx/9 erms,7/0/ebx/10 invpcid,7/0/ebx/11 rtm,7/0/ebx/12 cqm," \
    "7/0/ebx/14 mpx,7/0/ebx/15 rdt_a,7/0/ebx/16 avx512f,7/0/ebx/17 avx512dq,7/0/ebx/18 rdseed,7/0/ebx/19 adx," \
    "7/0/ebx/20 smap,7/0/ebx/21 avx512ifma,7/0/ebx/23 clflushopt,7/0/ebx/24 clwb,7/0/ebx/25 intel_pt," \
    "7/0/ebx/26 avx512pf,7/0/ebx/27 avx512er,7/0/ebx/28 avx512cd,7/0/ebx/29 sha_ni,7/0/ebx/30 avx512bw," \
    "7/0/ebx/31 avx512vl," \
    "7/0/ecx/1 avx512vbmi,7/0/ecx/2 umip,7/0/ecx/3 pku,7/0/ecx/4 ospke,7/0/ecx/5 waitpkg,7/0/ecx/6 avx512_vbmi2," \
    "7/0/ecx/8 gfni,7/0/ecx/9 vaes,7/0/ecx/10 vpclmulqdq,7/0/ecx/11 avx512_vnni,7/0/ecx/12 avx512_bitalg," \
    "7/0/ecx/13 tme,7/0/ecx/14 avx512_vpopcntdq,7/0/ecx/16 la57,7/0/ecx/22 rdpid,7/0/ecx/24 bus_lock_detect," \
    "7/0/ecx/25 cldemote,7/0/ecx/27 movdiri,7/0/ecx/28 movdir64b,7/0/ecx/29 enqcmd,7/0/ecx/30 sgx_lc," \
    "7/0/edx/2 avx512_4vnniw,7/0/edx/3 avx512_4fmaps,7/0/edx/4 fsrm,7/0/edx/8 avx512_vp2intersect," \
    "7/0/edx/10 md_clear,7/0/edx/14 serialize,7/0/edx/16 tsxldtrk,7/0/edx/18 pconfig,7/0/edx/19 arch_lbr," \
    "7/0/edx/22 amx_bf16,7/0/edx/23 avx512_fp16,7/0/edx/24 amx_tile,7/0/edx/25 amx_int8,7/0/edx/28 flush_l1d," \
    "7/0/edx/29 arch_capabilities," \
    "d/1/eax/0 xsaveopt,d/1/eax/1 xsavec,d/1/eax/2 xgetbv1,d/1/eax/3 xsaves," \
    "80000001/0/edx/11 syscall,80000001/0/edx/20 nx,80000001/0/edx/22 mmxext,80000001/0/edx/25 fxsr_opt," \
    "80000001/0/edx/26 pdpe1gb,80000001/0/edx/27 rdtscp,80000001/0/edx/29 lm,80000001/0/edx/30 3dnowext," \
    "80000001/0/edx/31 3dnow,80000001/0/ecx/0 lahf_lm,80000001/0/ecx/1 cmp_legacy,80000001/0/ecx/2 svm," \
    "80000001/0/ecx/5 abm,80000001/0/ecx/6 sse4a,80000001/0/ecx/7 misalignsse,80000001/0/ecx/8 3dnowprefetch," \
    "80000001/0/ecx/11 xop,80000001/0/ecx/16 fma4,80000001/0/ecx/21 tbm,80000001/0/ecx/22 topoext", tab, ",")
  for (i = 1; i <= n; i++) { split(tab[i], kvp, " "); flagbit[i] = kvp[1]; flagname[i] = kvp[2] }
  nflag = n
}
FILENAME == serial { next }
/^HVKIT POLICY CPUID / { k = sprintf("%x/%x", hex($4), hex($5)); pol[k] = $6 " " $7 " " $8 " " $9; next }
/^HVKIT POLICY XCR0 / { pol_xcr0 = hex($4); next }
/^HVKIT GUEST HVKIT-GUEST CPUID / { k = sprintf("%x/%x", hex($5), hex($6)); gst[k] = $7 " " $8 " " $9 " " $10; ngst++; next }
/^HVKIT GUEST HVKIT-GUEST FLAGS/ { flags_seen = 1; flags_acc = substr($0, length("HVKIT GUEST HVKIT-GUEST FLAGS") + 1); flags_open = 1; next }
/^HVKIT GUEST HVKIT-GUEST SIGNATURE / { sig = $5; pvf = kv($0, "pv_features"); hints = kv($0, "hints"); next }
/^HVKIT GUEST HVKIT-GUEST RESULT / {
  d = ""; for (i = 7; i <= NF; i++) d = d (i > 7 ? " " : "") $i
  check("guest." $5, $6 == "PASS", d); next
}
/^HVKIT GUEST HVKIT-GUEST DMESG .*unchecked MSR access/ { unchecked++; if (unchecked <= 3) unchecked_lines = unchecked_lines " [" substr($0, index($0, "unchecked")) "]"; next }
/^HVKIT GUEST HVKIT-GUEST DMESG .*(segfault at|traps:|general protection)/ { faults++; if (faults <= 2) fault_lines = fault_lines " [" substr($0, 32) "]"; next }
/^HVKIT GUEST HVKIT-GUEST DMESG .*context size is/ {
  match($0, /features 0x[0-9a-f]+/); linux_xfeat = hex(substr($0, RSTART + 9, RLENGTH - 9))
  match($0, /size is [0-9]+/); linux_xsize = substr($0, RSTART + 8, RLENGTH - 8) + 0
  linux_xfmt = ($0 ~ /compacted/) ? "compacted" : "standard"; next
}
/^HVKIT GUEST HVKIT-GUEST DMESG .*XSAVE consistency problem|xstate.*disabl/ { linux_xsave_off = 1; next }
/^HVKIT GUEST HVKIT-GUEST DMESG .*Hypervisor detected: / { hv_detected = substr($0, index($0, "detected: ") + 10); next }
/^HVKIT GUEST HVKIT-GUEST SMP / { smp_online = kv($0, "online"); smp_procs = kv($0, "cpuinfo_processors"); smp_same = kv($0, "flags_identical"); next }
/^HVKIT GUEST HVKIT-GUEST IPI / { ipi[++nipi] = sprintf("%-6s %-8s %-8s %-6s %-16s %-8s %s", kv($0, "cpu"), kv($0, "rounds"), kv($0, "wakeups"), kv($0, "lost"), kv($0, "tsc_per_wakeup"), kv($0, "res"), kv($0, "cal")); next }
/^HVKIT LINUX vcpu / { vc[++nvc] = $0; pv_calls += kv($0, "pv_send_ipi_calls"); next }
/^HVKIT LINUX ibpb cpu=/ { ib[++nib] = sprintf("%-6s %-10s %-10s %-10s %-10s %-12s %s", kv($0, "cpu"), kv($0, "switches_same_guest"), kv($0, "switches_cross_guest"), kv($0, "barriers"), kv($0, "expected"), kv($0, "guest2_slices"), kv($0, "unexpected")); next }
/^HVKIT GUEST HVKIT-GUEST DMESG .*PV IPIs/ { pv_msg = substr($0, index($0, "DMESG ") + 6); next }
/^HVKIT GUEST HVKIT-GUEST IPICOST / { ipicost = sprintf("%s calls each: one target %s TSC, all but self %s TSC (guest TSC per smp_call_function with wait); sender only: send_IPI %s, send_IPI_mask (one CPU) %s, send_IPI_mask_allbutself %s, send_IPI_allbutself %s TSC", kv($0, "calls"), kv($0, "tsc_one_target"), kv($0, "tsc_all_but_self"), kv($0, "send_ipi"), kv($0, "send_ipi_mask_one"), kv($0, "send_ipi_mask_allbutself"), kv($0, "send_ipi_allbutself")); next }
/^HVKIT ERRATUM / { errata = errata "\n  erratum: " substr($0, 15); next }
/^HVKIT GUEST HVKIT-GUEST INIT / { init_uptime = kv($0, "uptime"); next }
/^HVKIT GUEST HVKIT-GUEST MARK shell/ { shell_uptime = kv($0, "uptime"); next }
/^HVKIT GUEST HVKIT-GUEST END / { end_uptime = kv($0, "uptime"); next }
/^HVKIT GUEST / {
  if (flags_open && $0 !~ /HVKIT-GUEST/) { flags_acc = flags_acc substr($0, 13); next }
  flags_open = 0; next
}
/^HVKIT LINUX mark shell / { mark_tsc = kv($0, "tsc"); mark_exits = kv($0, "exits"); next }
/^HVKIT LINUX end / { end_reason = kv($0, "reason"); end_tsc = kv($0, "tsc"); next }
/^HVKIT LINUX wp / { m = kv($0, "mode"); wpt[m] = kv($0, "toggles"); wpe[m] = kv($0, "cr_exits"); wpm[m] = kv($0, "guest_mismatches"); wptsc[m] = kv($0, "tsc_per_toggle"); next }
/^HVKIT SHADOW / { shadow_line = substr($0, 14); next }
/^HVKIT LINUX counts / { counts = $0; next }
/^HVKIT LINUX msr_gp / { msr_gp_list = msr_gp_list " " $5 ":" $4; next }
/^HVKIT EXITS / { if (!(($4 " " $5) in rs)) { rs[$4 " " $5] = 1; reasons[++nr] = $4 " " $5 } ex[$3, $4 " " $5] = $6; exn[$3, $4] = $6; next }
/^HVKIT RESULT / { d = ""; for (i = 5; i <= NF; i++) d = d (i > 5 ? " " : "") $i; check("hv." $3, $4 == "PASS", d); next }
/^HVKIT DONE / { done = $3; next }
/^HVKIT SKIP / { skipmsg = substr($0, 12); next }
/^HVKIT ERROR / { errs = errs "\n  error: " substr($0, 13); next }
/^HVKIT ERRATUM / { errs = errs "\n  CPU erratum (counted, not a failure): " substr($0, 15); next }
END {
  # 1. Raw CPUID in the guest == the policy, leaf by leaf.
  bad = ""; nleaf = 0
  for (k in pol) { nleaf++; if (!(k in gst)) bad = bad " " k ":missing"; else if (gst[k] != pol[k]) bad = bad " " k ":[" gst[k] "]!=[" pol[k] "]" }
  if (ngst > 0) check("runner.cpuid_leaves_equal_policy", bad == "", "leaves=" nleaf (bad == "" ? "" : " differ:" bad))
  # 1b. The processors Linux brought up: every one the hypervisor runs a vCPU on.
  if (smp_online != "")
    check("runner.smp_cpus_online", smp_online == cpus && smp_procs == cpus && smp_same == 1,
          "expected=" cpus " online=" smp_online " cpuinfo_processors=" smp_procs " flags_identical=" smp_same)
  # 1c. PV_SEND_IPI: offered, Linux says "setup PV IPIs" and calls KVM_HC_SEND_IPI; not offered,
  #     neither (Linux needs more than one possible CPU for it: arch/x86/kernel/kvm.c).
  if (cpus > 1 && nvc > 0) {
    if (pv_send_ipi) check("runner.pv_send_ipi_used", pv_msg != "" && pv_calls > 0, "linux=[" pv_msg "] hypercalls=" (pv_calls + 0))
    else check("runner.pv_send_ipi_unused", pv_msg == "" && pv_calls == 0, "linux=[" pv_msg "] hypercalls=" (pv_calls + 0))
  }
  # 2. /proc/cpuinfo flags == the flags the policy implies (the table above).
  if (flags_seen) {
    nf = split(flags_acc, fl, " "); for (i = 1; i <= nf; i++) have[fl[i]] = 1
    missing = ""; extra = ""; nexp = 0
    # Linux sets ARAT itself on AMD families above 11h, whatever CPUID 6 says (init_amd in
    # arch/x86/kernel/cpu/amd.c): expected there from the vendor and family of the policy.
    split(pol["0/0"], v0, " "); split(pol["1/0"], v1, " "); f1 = hex(v1[1])
    family = int(f1 / 256) % 16; if (family == 15) family += int(f1 / 2 ^ 20) % 256
    linux_arat = (hex(v0[2]) == hex("68747541") && family > 17)
    # ... and PREFETCHW (3dnowprefetch) on every AMD CPU with long mode or 3DNow! (same file).
    split(pol["80000001/0"], e1, " ")
    linux_prefetchw = (hex(v0[2]) == hex("68747541") && (bit(hex(e1[4]), 29) || bit(hex(e1[4]), 31)))
    for (i = 1; i <= nflag; i++) {
      split(flagbit[i], p, "/"); k = p[1] "/" p[2]
      if (!(k in pol)) continue
      split(pol[k], r, " "); reg = (p[3] == "eax") ? r[1] : (p[3] == "ebx") ? r[2] : (p[3] == "ecx") ? r[3] : r[4]
      want = bit(hex(reg), p[4] + 0) || (flagname[i] == "arat" && linux_arat) || (flagname[i] == "3dnowprefetch" && linux_prefetchw)
      if (want) nexp++
      if (want && !(flagname[i] in have)) missing = missing " " flagname[i]
      if (!want && (flagname[i] in have)) extra = extra " " flagname[i]
    }
    check("runner.cpuinfo_flags_equal_policy", missing == "" && extra == "",
          "expected_flags=" nexp (missing != "" ? " missing:" missing : "") (extra != "" ? " unexpected:" extra : ""))
  }
  # 3. The signature, and no paravirtual feature the hypervisor does not implement (it
  #    implements none; hints are hints).
  if (sig != "") {
    split(pol["40000000/0"], s, " ")
    check("runner.hypervisor_signature", sig == "KVMKVMKVM" && hv_detected == "KVM",
          "cpuid=" sig " linux_detected=" hv_detected)
    pv_impl = pv_send_ipi ? 2048 : 0  # KVM_FEATURE_PV_SEND_IPI, bit 11 (the only one implemented, on request)
    check("runner.pv_features_implemented", hex(pvf) == pv_impl, "pv_features=" pvf " implemented=" sprintf("0x%x", pv_impl) " hints=" hints)
  }
  # 4. XSAVE: Linux enabled exactly the policy XCR0 with the policy size for its format.
  if (linux_xsize > 0 || linux_xsave_off) {
    split(pol["d/0"], d0, " "); split(pol["d/1"], d1, " ")
    want_size = (linux_xfmt == "compacted") ? hex(d1[2]) : hex(d0[2])
    check("runner.xsave_linux_agrees", !linux_xsave_off && linux_xfeat == pol_xcr0 && linux_xsize == want_size,
          sprintf("linux_features=0x%x policy_xcr0=0x%x linux_size=%d policy_size=%d format=%s%s", linux_xfeat, pol_xcr0,
                  linux_xsize, want_size, linux_xfmt, linux_xsave_off ? " LINUX_DISABLED_XSAVE" : ""))
  }
  # 5. Every MSR the policy implies works: no "unchecked MSR access" warning in the guest.
  if (ngst > 0) check("runner.no_unchecked_msr_access", unchecked == 0, "warnings=" (unchecked + 0) unchecked_lines)
  # 6. No guest process died of a fault (a wrong XSAVE layout or a lost register shows here).
  if (ngst > 0) check("runner.no_guest_process_faults", faults == 0, "faults=" (faults + 0) fault_lines)

  print ""
  print "hvkit reference hypervisor hosting Linux: " mode " run" (mode == "bochs" ? " (" cpu ", ips=" ips ")" : "")
  print "  guest image: " image
  print "  hypervisor log (port 0xE9): " e9
  print "  guest console (COM1):       " serial
  printf "  wall time: %.1f s total", wall_ms / 1000
  if (first_ms != "") printf ", first kernel line on the console at %.1f s", first_ms / 1000
  if (shell_ms != "") printf ", shell prompt at %.1f s", shell_ms / 1000
  print ""
  if (mark_tsc != "" && mode == "bochs")
    printf "  emulated time to the shell prompt: %.2f s (TSC since the hypervisor started / ips), guest uptime %s s\n", mark_tsc / ips, shell_uptime
  else if (shell_uptime != "") print "  guest uptime at the shell prompt: " shell_uptime " s"
  if (end_reason != "") print "  run ended: " end_reason (end_uptime != "" ? ", guest uptime " end_uptime " s" : "")
  print ""
  if (nr > 0) {
    print "  VM exits by reason"
    print "    " pad("reason", 24) pad("boot", 10) "whole run"
    for (j = 1; j <= nr; j++) print "    " pad(reasons[j], 24) pad((("boot", reasons[j]) in ex) ? ex["boot", reasons[j]] : "0", 10) ex["total", reasons[j]]
    print "    (boot = until the shell prompt; I/O = the intercepted ports only, mostly the guest'"'"'s own 0xE9 lines)"
    print ""
  }
  if (nvc > 0) {
    print "  vCPUs (one per processor; INIT/SIPI exits of the guest'"'"'s AP start-up)"
    for (j = 1; j <= nvc; j++) { l = vc[j]; sub(/^HVKIT LINUX vcpu /, "", l); print "    vcpu " l }
    print ""
  }
  if (nib > 0) {
    print "  IBPB per processor (skip_same_guest; the Linux vCPU and guest 2'"'"'s two control blocks B1, B2:"
    print "  expected barriers = 1 + cross-guest switches; guest 2 slices B1/B2; unexpected guest-2 exits)"
    print "    " sprintf("%-6s %-10s %-10s %-10s %-10s %-12s %s", "cpu", "same", "cross", "barriers", "expected", "slices", "unexpected")
    for (j = 1; j <= nib; j++) print "    " ib[j]
    print ""
  }
  if (nipi > 0) {
    print "  cross-CPU wake-ups (futex ping-pong between CPU 0 and CPU k; res/cal: rescheduling and"
    print "  function-call IPIs Linux counted in /proc/interrupts during the run)"
    print "    " sprintf("%-6s %-8s %-8s %-6s %-16s %-8s %s", "cpu", "rounds", "wakeups", "lost", "tsc/wakeup", "res", "cal")
    for (j = 1; j <= nipi; j++) print "    " ipi[j]
    if (ipicost != "") print "    IPI cost: " ipicost
    print ""
  }
  if (shadow_line != "") print "  shadow MMU: " shadow_line
  if (counts != "") print "  MSR #GP injected " kv(counts, "msr_gp") ", MSRs emulated " kv(counts, "msr_emulated") ", XSETBV ok " kv(counts, "xsetbv_ok") " / #GP " kv(counts, "xsetbv_gp") ", VMX instructions #UD " kv(counts, "vmx_ud") ", guest XCR0 " kv(counts, "guest_xcr0")
  if (msr_gp_list != "") print "  MSRs that #GP (first ones):" substr(msr_gp_list, 1, 300)
  print ""
  if (("guest_owned" in wpt) || ("intercepted" in wpt)) {
    print "  CR0.WP toggles in the guest kernel (hvkit_wp.ko, raw MOV to CR0)"
    print "    " pad("CR0.WP", 14) pad("toggles", 10) pad("CR exits", 10) pad("exits/toggle", 14) pad("TSC/toggle", 12) "guest mismatches"
    split("guest_owned intercepted", ms, " ")
    for (i = 1; i <= 2; i++) if (ms[i] in wpt)
      print "    " pad(ms[i], 14) pad(wpt[ms[i]], 10) pad(wpe[ms[i]], 10) pad(sprintf("%.3f", wpt[ms[i]] ? wpe[ms[i]] / wpt[ms[i]] : 0), 14) pad(wptsc[ms[i]], 12) wpm[ms[i]]
    if (shadow_line != "") print "    (shadow paging: CR0.WP is in the shadow role and stays intercepted in both runs)"

    print ""
  } else if (image ~ /module=skipped/) print "  CR0.WP module: " image "\n"
  print "  checks"
  for (i = 1; i <= nchecks; i++) print "    " pad(cstat[i], 6) checks[i] ": " cdet[i]
  if (errs != "") print errs
  if (errata != "") print errata
  if (skipmsg != "") { print "HVKIT-RUN SKIP: " skipmsg; exit 77 }
  ok = done == "PASS" && nfail == 0 && npass > 0
  if (done == "") print "  no HVKIT DONE line: the hypervisor did not finish (emulator status " emu_rc ")"
  printf "HVKIT-RUN %s: Linux %s, %d checks passed, %d failed\n", ok ? "PASS" : "FAIL",
         (shell_uptime != "" ? "reached its shell prompt" : "did not reach its shell prompt"), npass, nfail
  exit ok ? 0 : 1
}' "$e9.txt" "$serial.txt"
rc=$?
[ "$mode" = bochs ] && grep -aE 'VMFAIL|>>PANIC<<' "$build_dir/bochs-linux.log" 2>/dev/null | grep -v 'Shutdown port' | head -3 | sed 's/^/  bochs: /'
exit $rc
