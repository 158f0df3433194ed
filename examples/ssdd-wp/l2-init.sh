#!/bin/sh
# SPDX-License-Identifier: MIT
# /init of the ssdd guest (the Linux guest that runs the CR0.WP workload; build-guest.sh).
# Runs rt-tests' ssdd once without the KERNEXEC model, once with its kprobe but no CR0 write
# (pairs=0), then once per MODES value
# with hvkit_kernexec loaded (CR0.WP toggled around a write to read-only data on every kprobe
# hit), timing each with the guest's TSC (under Bochs: emulated instructions) and its uptime.
# Parameters from /etc/ssdd.conf (FORKS, ITERS, PAIRS, SYM, MODES). MODES lists the module's hvkit= values,
# one ssdd run each: 0 under any hypervisor (no hypercall); under the hvkit reference
# hypervisor 1 (CR0.WP guest-owned) and 2 (intercepted). Result lines start with "HVKIT-SSDD ".
# Then the guest ends: under QEMU (-no-reboot) by reboot, under the hvkit hypervisor through
# the shutdown port 0x8900, which that hypervisor intercepts.
export PATH=/bin:/usr/bin:/sbin
/bin/busybox mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
. /etc/ssdd.conf
hvkit=0
case " $MODES " in *" 1 "*|*" 2 "*) hvkit=1 ;; esac  # under the hvkit hypervisor: its 0xE9 channel too
out() { echo "HVKIT-SSDD $*"; [ $hvkit = 0 ] || /bin/tscmark e9 "HVKIT-SSDD $*"; }
up() { cut -d' ' -f1 /proc/uptime; }
P=/sys/module/hvkit_kernexec/parameters
out "start kernel=$(uname -r) uptime=$(up) forks=$FORKS iters=$ITERS pairs=$PAIRS sym=$SYM modes=$MODES"
run() {  # $1: label
  t0=$(/bin/tscmark tsc); u0=$(up)
  /usr/bin/ssdd --forks="$FORKS" --iters="$ITERS" >/tmp/ssdd.out 2>&1
  rc=$?
  t1=$(/bin/tscmark tsc); u1=$(up)
  h=0 w=0 r=0
  [ -d $P ] && { h=$(cat $P/hits); w=$(cat $P/cr0_writes); r=$(cat $P/ro_writes); }
  out "run $1 status=$rc ticks=$((t1 - t0)) uptime_s=$(echo "$u0 $u1" | awk '{printf "%.2f", $2 - $1}') hits=$h cr0_writes=$w ro_writes=$r"
  tail -3 /tmp/ssdd.out | while read -r l; do out "ssdd: $l"; done
}
run no_module
# The kprobe alone (pairs=0: the handler runs, no CR0 write): the floor that a free
# (guest-owned, 9-instruction) MOV to CR0 barely raises; intercepted writes are measured
# against it.
if insmod /lib/modules/hvkit_kernexec.ko sym="$SYM" pairs=0 2>/tmp/insmod.err; then
  run kprobe_only
  rmmod hvkit_kernexec
fi
for m in $MODES; do
  if insmod /lib/modules/hvkit_kernexec.ko sym="$SYM" pairs="$PAIRS" hvkit="$m" 2>/tmp/insmod.err; then
    run kernexec_hvkit$m
    rmmod hvkit_kernexec
    out "module hvkit=$m $(dmesg | grep 'hvkit_kernexec: [0-9]* hits' | tail -1 | sed 's/^\[[^]]*\] //')"
  else
    out "FAIL insmod hvkit_kernexec: $(cat /tmp/insmod.err)"
  fi
done
dmesg | grep -E 'hvkit_kernexec|BUG|Oops|WARNING|segfault' | head -10 | while read -r l; do out "dmesg: $l"; done
out "end uptime=$(up)"
[ $hvkit = 0 ] || /bin/tscmark shutdown
reboot -f
