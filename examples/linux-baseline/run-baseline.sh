#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Linux-boot baseline of the exit-cost work (issue 27 item 5): the Linux guest's kernel
# and initramfs booted DIRECTLY on Bochs, no hypervisor, with the same memory, ips, CPU
# model, Bochs configuration and kernel command line as `examples/hypervisor/run --linux`;
# prints the emulated time from the kernel's entry to the shell-prompt mark, the quantity
# the hypervisor's run prints as "emulated time to the shell prompt".
#
#   bash examples/linux-baseline/run-baseline.sh [--cpu MODEL] [--ips N] [--megs N]
#        [--build-dir DIR] [--rootfs DIR] [--timeout S] [--extra-cmdline "..."]
#        [--hv-log LINUX_E9_LOG] [--hypervisor KERNEL_BIN] [--dmesg]
#
# --rootfs: the guest's unpacked initramfs tree (BUILD/linux-image/rootfs of a `run --linux`
#   build directory); default: built here with examples/hypervisor/linux/build-image.sh.
# --extra-cmdline: added to the guest's command line. Default per model, the workarounds a
#   bare Bochs 2.7 needs (docs/linux-guest.md, "Linux directly on Bochs"): tigerlake and
#   corei7_icelake_u "clearcpuid=580" (FSRM), ryzen "clearcpuid=154,221" (XSAVE, MWAITX);
#   none for zambezi, trinity_apu, corei7_skylake_x, broadwell_ult. "none" for none.
# --hv-log: the hypervisor run's port-0xE9 log (BUILD/linux-e9.log of `run --linux`): the
#   script then also prints the ratio and the hypervisor's exits per emulated second of boot.
#
# --hypervisor: boot the same baseline initramfs under the hvkit reference hypervisor instead
#   (KERNEL_BIN: a `run --linux` build's kernel.bin, multiboot, with the hypervisor's GRUB
#   entry); the time is then the hypervisor's own "HVKIT LINUX mark shell tsc=" and no
#   workaround is added to the command line (the hypervisor's CPUID policy does that).
# --dmesg: adds "initcall_debug hvkit.dmesg" to the command line; /init prints the whole
#   kernel log on the console (BUILD/MODEL[-hv]/serial.log) after the mark, and the script
#   saves the per-initcall times in initcalls.txt, for comparing two boots.
#
# The measurement hook: the hypervisor's run counts host TSC from just before its first VM
# entry (the kernel's 64-bit entry) to the moment the guest's "HVKIT-GUEST MARK shell" line
# reaches port 0xE9. Here the start is the first instruction executed at the kernel's load
# address (a Bochs debugger physical breakpoint; "Next at t=" is Bochs' tick count, which is
# its TSC), and the end is the guest's own RDTSC as the MARK line goes out (tscmark).
# Bochs' TSC advances by one per emulated instruction (and idle time at the same rate), so
# ticks / ips are emulated seconds. Output lines start with "linux-baseline:".
# Exit status 0 when the shell mark was reached, 1 otherwise, 77 when a tool is missing.
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cpu=tigerlake ips=50000000 megs=512 timeout_s=900 rootfs= hv_log= extra=default hv_kernel= dmesg=0
build=$root/build/linux-baseline
# The hypervisor run's guest command line (linux/run-linux.sh), word for word.
cmdline=${HVKIT_LINUX_CMDLINE:-"console=ttyS0 quiet nokaslr panic=-1 mitigations=off"}
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=$2; shift ;;
    --ips) ips=$2; shift ;;
    --megs) megs=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --rootfs) rootfs=$2; shift ;;
    --timeout) timeout_s=$2; shift ;;
    --extra-cmdline) extra=$2; shift ;;
    --hv-log) hv_log=$2; shift ;;
    --hypervisor) hv_kernel=$(realpath "$2"); shift ;;
    --dmesg) dmesg=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run-baseline: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$extra" = default ]; then
  case $cpu in
    tigerlake|corei7_icelake_u) extra=clearcpuid=580 ;;
    ryzen) extra=clearcpuid=154,221 ;;
    *) extra= ;;
  esac
fi
[ "$extra" = none ] && extra=
[ -n "$hv_kernel" ] && extra=
[ "$dmesg" = 1 ] && cmdline="$cmdline initcall_debug hvkit.dmesg"
full_cmdline="$cmdline${extra:+ $extra}"
for t in bochs grub-mkrescue xorriso gcc; do
  command -v $t >/dev/null || { echo "HVKIT-RUN SKIP: $t not installed"; exit 77; }
done
mkdir -p "$build" && build=$(cd "$build" && pwd)
cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$build")/debian-cache}
export HVKIT_DEBIAN_CACHE=$cache

# ---- the guest's initramfs tree (the hypervisor run's own builder) ------------------------
if [ -z "$rootfs" ]; then
  : >"$build/no-hypervisor.bin"   # build-image.sh also makes the hypervisor's ISO: a stand-in
  info=$(bash "$root/examples/hypervisor/linux/build-image.sh" "$build/hvimage" "$build/no-hypervisor.bin" "$cmdline")
  rc=$?
  [ $rc = 77 ] && { echo "$info" | grep 'HVKIT-RUN SKIP' || echo "HVKIT-RUN SKIP: guest image"; exit 77; }
  [ $rc = 0 ] || { echo "run-baseline: building the guest image failed" >&2; exit 1; }
  rootfs=$build/hvimage/linux-image/rootfs
fi
[ -x "$rootfs/init" ] || { echo "run-baseline: no guest initramfs tree at $rootfs" >&2; exit 1; }
abi=$(bash "$root/scripts/debian-fetch.sh" "$cache" linux-image-cloud-amd64 | tail -1)
vmlinuz=$cache/root/boot/vmlinuz-${abi#linux-image-}
[ -f "$vmlinuz" ] || { echo "run-baseline: no $vmlinuz" >&2; exit 1; }

# ---- the baseline initramfs: the guest's tree, /init replaced, tscmark added --------------
img=$build/image
rm -rf "$img" && mkdir -p "$img/isoroot/boot/grub"
cp -a "$rootfs" "$img/rootfs"
cp "$here/init.sh" "$img/rootfs/init" && chmod 755 "$img/rootfs/init"
gcc -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie -O2 -Wall -Wextra -Werror \
  -o "$img/rootfs/bin/tscmark" "$here/tscmark.c" || exit 1
bb=$cache/root/bin/busybox
if command -v lz4 >/dev/null; then   # the compression build-image.sh chooses
  (cd "$img/rootfs" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) | lz4 -l -9 -q -f - "$img/isoroot/boot/initrd.img"
else
  (cd "$img/rootfs" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -9 >"$img/isoroot/boot/initrd.img"
fi
cp "$vmlinuz" "$img/isoroot/boot/vmlinuz"
if [ -n "$hv_kernel" ]; then
  cp "$hv_kernel" "$img/isoroot/boot/kernel.bin"
  sed "s|@CMDLINE@|$full_cmdline|" "$root/examples/hypervisor/linux/grub.cfg" >"$img/isoroot/boot/grub/grub.cfg"
else
cat >"$img/isoroot/boot/grub/grub.cfg" <<EOF
set timeout=0
set default=0
terminal_output console
menuentry "Linux directly on Bochs (hvkit baseline)" {
  linux /boot/vmlinuz $full_cmdline
  initrd /boot/initrd.img
}
EOF
fi
grub-mkrescue --install-modules="linux multiboot normal configfile" --locales= --fonts= --themes= \
  -o "$img/baseline.iso" "$img/isoroot" >"$img/grub-mkrescue.log" 2>&1 ||
  { cat "$img/grub-mkrescue.log" >&2; exit 1; }

# ---- boot ---------------------------------------------------------------------------------
rd=$build/$cpu${hv_kernel:+-hv}
mkdir -p "$rd"
vgabios=/usr/share/vgabios/vgabios.bin
[ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
sed -e "s|@ISO@|$img/baseline.iso|g" -e "s|@SERIAL@|$rd/serial.log|g" -e "s|@LOG@|$rd/bochs.log|g" \
    -e "s|@BIOS@|/usr/share/bochs/BIOS-bochs-latest|g" -e "s|@VGABIOS@|$vgabios|g" \
    -e "s|@CPU_MODEL@|$cpu|g" -e "s|@MEGS@|$megs|g" -e "s|@IPS@|$ips|g" \
    "$root/examples/hypervisor/linux/bochsrc.in" >"$rd/bochsrc"
# The kernel's entry: GRUB's 32-bit boot protocol jumps to code32_start, where it loaded the
# protected-mode code: the kernel's preferred address (pref_address, 16 MiB for this kernel)
# when free. (1 MiB is no good: GRUB's own decompressed core runs there first.) The first hit
# is the entry (the decompressed kernel starts at the same address later); the breakpoint is
# then deleted. The report checks the opcode bytes Bochs shows at the breakpoint against the
# first bytes of the kernel's protected-mode code.
setup_sects=$(od -An -tu1 -j 0x1f1 -N1 "$vmlinuz" | tr -d ' ')
[ "$setup_sects" = 0 ] && setup_sects=4
entry_bytes=$(od -An -tx1 -j $(( (setup_sects + 1) * 512 )) -N1 "$vmlinuz" | tr -d ' ')
pref=$(od -An -tx8 -j 0x258 -N8 "$vmlinuz" | tr -d ' ')
if [ -n "$hv_kernel" ]; then printf 'c\nquit\n' >"$rd/bochs.rc"   # the hypervisor times the boot itself
else printf 'pb 0x%x\nc\nd 1\nc\nquit\n' "$((16#$pref))" >"$rd/bochs.rc"; fi
rm -f "$rd/serial.log" "$rd/stdout.log"
echo "linux-baseline: booting $(basename "$vmlinuz") directly on Bochs ($cpu, ips=$ips, ${megs} MiB), cmdline: $full_cmdline" >&2
t0=$SECONDS
(cd "$rd" && TERM=dumb exec timeout --kill-after=10 "$timeout_s" bochs -q -f "$rd/bochsrc" -rc "$rd/bochs.rc" \
   </dev/null >"$rd/stdout.log" 2>&1)
emu_rc=$?
wall=$((SECONDS - t0))

# ---- report ---------------------------------------------------------------------------------
tr -d '\r' <"$rd/stdout.log" >"$rd/stdout.txt"
if [ "$dmesg" = 1 ]; then   # "initcall NAME+0x.../0x... returned R after N usecs" -> "NAME N"
  tr -d '\r' <"$rd/serial.log" | sed -n '/HVKIT-DMESG-BEGIN/,/HVKIT-DMESG-END/p' >"$rd/dmesg.txt"
  sed -n 's/.*initcall \([^ +]*\)[^ ]* returned .* after \([0-9]*\) usecs.*/\1 \2/p' "$rd/dmesg.txt" >"$rd/initcalls.txt"
  echo "linux-baseline: kernel log in $rd/dmesg.txt, $(wc -l <"$rd/initcalls.txt") initcall times in $rd/initcalls.txt" >&2
fi
[ -n "$hv_kernel" ] && hv_log=$rd/stdout.txt   # the hypervisor's own mark line is the measurement
awk -v cpu="$cpu" -v ips="$ips" -v megs="$megs" -v wall="$wall" -v emu_rc="$emu_rc" -v cmdline="$full_cmdline" \
    -v hvlog="$hv_log" -v rd="$rd" -v entry_bytes="$entry_bytes" -v hvmode="${hv_kernel:+1}" '
function kv(line, key,    m) {
  if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); return substr(m, length(key) + 2) }
  return ""
}
FILENAME != hvlog && /Breakpoint [0-9]/ && bp == "" { bp = $0; want_t = 1; next }
FILENAME != hvlog && want_t && /Next at t=/ { match($0, /t=[0-9]+/); t_entry = substr($0, RSTART + 2, RLENGTH - 2); want_t = 2; next }
FILENAME != hvlog && want_t == 2 { bp_insn = $0; want_t = 0; next }
FILENAME != hvlog && /HVKIT-GUEST INIT / { init_tsc = kv($0, "tsc"); init_up = kv($0, "uptime"); next }
FILENAME != hvlog && /HVKIT-GUEST MARK shell/ { mark_tsc = kv($0, "tsc"); mark_up = kv($0, "uptime"); next }
FILENAME != hvlog && /HVKIT-GUEST END / { end_up = kv($0, "uptime"); next }
FILENAME != hvlog && /HVKIT-GUEST (INFO|DMESG) / { sub(/ tsc=[0-9]+$/, ""); info[++ni] = $0; next }
FILENAME == hvlog && /^HVKIT LINUX mark shell / { hv_tsc = kv($0, "tsc"); hv_exits = kv($0, "exits"); next }
FILENAME == hvlog && /^HVKIT EXITS boot / { hv_ex[++nhx] = $4 " " $5 "=" $6; next }
FILENAME == hvlog && /^HVKIT GUEST HVKIT-GUEST MARK shell/ { hv_up = kv($0, "uptime"); next }
END {
  printf "linux-baseline: model=%s ips=%d megs=%d wall=%ds bochs_status=%d\n", cpu, ips, megs, wall, emu_rc
  printf "linux-baseline: cmdline: %s\n", cmdline
  if (hvmode) {
    if (hv_tsc == "") { print "linux-baseline: FAIL no \"HVKIT LINUX mark shell\" line from the hypervisor (see " rd "/stdout.txt)"; exit 1 }
    printf "linux-baseline: under the hvkit hypervisor: emulated time to the shell prompt: %.3f s (%d TSC from its first VM entry / ips), guest uptime %s s, exits %d\n", hv_tsc / ips, hv_tsc, hv_up, hv_exits
    exit 0
  }
  if (t_entry == "") { print "linux-baseline: FAIL the kernel entry breakpoint was not reached (see " rd "/stdout.txt)"; exit 1 }
  n = split(bp_insn, w, "; "); got = w[n]
  if (substr(got, 1, length(entry_bytes)) != entry_bytes) { print "linux-baseline: FAIL the breakpoint is not the kernel entry (bytes " got ", the kernel starts with " entry_bytes "): " bp_insn; exit 1 }
  printf "linux-baseline: kernel entry at tick %d (%.3f s emulated after reset: BIOS and GRUB): %s\n", t_entry, t_entry / ips, bp_insn
  if (mark_tsc == "") { print "linux-baseline: FAIL no shell mark (see " rd "/stdout.txt, " rd "/serial.log)"; exit 1 }
  for (i = 1; i <= ni; i++) print "linux-baseline: guest: " substr(info[i], 13)
  printf "linux-baseline: init at %.3f s emulated (guest uptime %s)\n", (init_tsc - t_entry) / ips, init_up
  bare = (mark_tsc - t_entry) / ips
  printf "linux-baseline: emulated time to the shell prompt: %.3f s (%d ticks from the kernel entry / ips), guest uptime %s s\n", bare, mark_tsc - t_entry, mark_up
  if (hvlog != "") {
    if (hv_tsc == "") { print "linux-baseline: no \"HVKIT LINUX mark shell\" line in " hvlog; exit 0 }
    hv = hv_tsc / ips
    printf "linux-boot-overhead: model=%s hvkit=%.3f bare=%.3f ratio=%.4f (target <= 1.10) hvkit_uptime=%s bare_uptime=%s\n", cpu, hv, bare, hv / bare, hv_up, mark_up
    ex = ""; for (i = 1; i <= nhx; i++) ex = ex " " hv_ex[i]
    printf "linux-boot-overhead: hvkit exits until the shell prompt: %d (%.0f per emulated second):%s\n", hv_exits, hv_exits / hv, ex
  }
}' $([ -n "$hv_kernel" ] || echo "$rd/stdout.txt") ${hv_log:+"$hv_log"}
