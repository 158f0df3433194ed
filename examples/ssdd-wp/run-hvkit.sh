#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hvkit column of the ssdd CR0.WP table (issue 27 item 7): the ssdd guest (build-guest.sh,
# module runs hvkit=1 and hvkit=2) as the Linux guest of the hvkit reference hypervisor
# directly on Bochs: ssdd without the module, with CR0.WP guest-owned (hypercall 0x68760001,
# RBX=0) and with CR0.WP intercepted (RBX=1); the module's unload hypercall returns the
# CR-access exits the hypervisor counted.
#
#   bash examples/ssdd-wp/run-hvkit.sh [--cpu MODEL] [--forks N] [--iters N] [--pairs N]
#        [--sym SYMBOL] [--hv-build DIR] [BUILD_DIR]
#
# --hv-build: a build directory of `examples/hypervisor/run --linux` (its kernel.bin; default
# BUILD_DIR/hypervisor, built there with the hypervisor's own CMake project when missing).
# Boots with the hypervisor's own GRUB entry and Bochs configuration
# (examples/hypervisor/linux/grub.cfg, bochsrc.in: 512 MiB, ips 50 M) and its guest command
# line. Any model the hypervisor boots Linux on: Intel (VMX) or AMD (SVM, e.g. --cpu
# zambezi); the module's hypercall is VMCALL or VMMCALL by the guest's CPU vendor.
# Output: "HVKIT-SSDD ..." lines and "ssdd-wp: hvkit <model> ..."; logs in BUILD_DIR/ssdd-wp/hvkit-<model>/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cpu=tigerlake forks=2 iters=2000 pairs=1 sym=arch_ptrace build= hvb=
cmdline=${HVKIT_LINUX_CMDLINE:-"console=ttyS0 quiet nokaslr panic=-1 mitigations=off"}
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=$2; shift ;;
    --forks) forks=$2; shift ;;
    --iters) iters=$2; shift ;;
    --pairs) pairs=$2; shift ;;
    --sym) sym=$2; shift ;;
    --hv-build) hvb=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) build=$1 ;;
  esac
  shift
done
build=${build:-$root/build/gcc}
mkdir -p "$build" && build=$(cd "$build" && pwd)
hvb=${hvb:-$build/hypervisor}
export HVKIT_DEBIAN_CACHE=${HVKIT_DEBIAN_CACHE:-$(dirname "$build")/debian-cache}
command -v bochs >/dev/null || { echo "HVKIT-RUN SKIP: bochs not installed"; exit 77; }
if [ ! -f "$hvb/kernel.bin" ]; then
  cmake -S "$root/examples/hypervisor" -B "$hvb" >"$hvb.configure.log" 2>&1 && cmake --build "$hvb" -j 2 >"$hvb.build.log" 2>&1 ||
    { echo "ssdd-wp: building the hypervisor failed ($hvb.build.log)" >&2; exit 1; }
fi
out=$build/ssdd-wp
guest=$out/guest-f$forks-i$iters-p$pairs-$sym-hvkit
bash "$here/build-guest.sh" "$guest" "$forks" "$iters" "$pairs" "$sym" 1,2
rd=$out/hvkit-$cpu
rm -rf "$rd/isoroot" && mkdir -p "$rd/isoroot/boot/grub"
cp "$hvb/kernel.bin" "$rd/isoroot/boot/kernel.bin"
cp "$guest/vmlinuz" "$rd/isoroot/boot/vmlinuz"
cp "$guest/initrd.img" "$rd/isoroot/boot/initrd.img"
sed "s|@CMDLINE@|$cmdline|" "$root/examples/hypervisor/linux/grub.cfg" >"$rd/isoroot/boot/grub/grub.cfg"
grub-mkrescue --install-modules="multiboot normal configfile" --locales= --fonts= --themes= \
  -o "$rd/ssdd.iso" "$rd/isoroot" >"$rd/grub-mkrescue.log" 2>&1 || { cat "$rd/grub-mkrescue.log" >&2; exit 1; }
vgabios=/usr/share/vgabios/vgabios.bin
[ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
sed -e "s|@ISO@|$rd/ssdd.iso|g" -e "s|@SERIAL@|$rd/serial.log|g" -e "s|@LOG@|$rd/bochs.log|g" \
    -e "s|@BIOS@|/usr/share/bochs/BIOS-bochs-latest|g" -e "s|@VGABIOS@|$vgabios|g" \
    -e "s|@CPU_MODEL@|$cpu|g" -e "s|@MEGS@|512|g" -e "s|@IPS@|50000000|g" \
    "$root/examples/hypervisor/linux/bochsrc.in" >"$rd/bochsrc"
printf 'c\nquit\n' >"$rd/bochs.rc"
echo "ssdd-wp: the ssdd guest under the hvkit hypervisor on Bochs ($cpu)" >&2
t0=$SECONDS
set +e
(cd "$rd" && TERM=dumb timeout --kill-after=10 "${HVKIT_SSDD_TIMEOUT:-2400}" \
   bochs -q -f "$rd/bochsrc" -rc "$rd/bochs.rc" </dev/null 2>&1) | tr -d '\r' >"$rd/e9.log"
set -e
echo "ssdd-wp: Bochs ran $((SECONDS - t0)) s" >&2
grep -a 'HVKIT-SSDD' "$rd/e9.log" || true
awk -v cpu="$cpu" -v forks="$forks" -v iters="$iters" -v pairs="$pairs" -v sym="$sym" '
  function kv(line, key,    m) { if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); return substr(m, length(key) + 2) } return "" }
  /HVKIT-SSDD run no_module/ { t0 = kv($0, "ticks") }
  /HVKIT-SSDD run kprobe_only/ { tk = kv($0, "ticks") }
  /HVKIT-SSDD run kernexec_hvkit1/ { t1 = kv($0, "ticks"); w = kv($0, "cr0_writes"); h = kv($0, "hits") }
  /HVKIT-SSDD run kernexec_hvkit2/ { t2 = kv($0, "ticks") }
  /HVKIT-SSDD module hvkit=1/ { if (match($0, /hvkit CR exits [0-9]+/)) e1 = substr($0, RSTART + 15, RLENGTH - 15) }
  /HVKIT-SSDD module hvkit=2/ { if (match($0, /hvkit CR exits [0-9]+/)) e2 = substr($0, RSTART + 15, RLENGTH - 15) }
  END {
    if (t0 == "" || t1 == "" || t2 == "") { print "ssdd-wp: hvkit " cpu " FAIL: no result (see the log)"; exit 1 }
    printf "ssdd-wp: hvkit %s forks=%s iters=%s sym=%s pairs=%s no_module_ticks=%s kprobe_only_ticks=%s guest_owned_ticks=%s intercepted_ticks=%s intercepted/guest_owned=%.3f hits=%s cr0_writes=%s cr_exits_guest_owned=%s cr_exits_intercepted=%s\n",
      cpu, forks, iters, sym, pairs, t0, tk, t1, t2, t2 / t1, h, w, e1, e2
  }' "$rd/e9.log"
