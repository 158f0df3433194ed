#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the bare-Bochs Linux baseline: the Linux guest's initramfs (examples/hypervisor/
# linux/init.sh) with this file in its place. Up to the shell-prompt mark it does what the
# guest's /init does (mounts, the INIT line, the MARK line on port 0xE9); the MARK line
# carries the guest's TSC (tscmark), because no hypervisor is there to time-stamp it. Then
# the same scripted shell, and Bochs is stopped through its shutdown port.
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
/bin/tscmark e9 "HVKIT-GUEST INIT uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"
/bin/tscmark e9 "HVKIT-GUEST MARK shell uptime=$(cut -d' ' -f1 /proc/uptime)"
printf 'uname -sr\necho shell-ok\nexit\n' | PS1='hvkit-linux# ' sh -i 2>&1
# Evidence of what this kernel made of the bare CPU (the hypervisor run reports the same
# from its policy): vendor, model, flags count, XSAVE, clearcpuid.
grep -m1 'model name' /proc/cpuinfo | sed 's/^/HVKIT-GUEST INFO /' | while read -r l; do /bin/tscmark e9 "$l"; done
dmesg | grep -E 'x86/fpu|XSAVE|xstate|clearcpuid|tsc:|Hypervisor|Kernel panic|segfault|traps:' |
  while read -r l; do /bin/tscmark e9 "HVKIT-GUEST DMESG $l"; done
# hvkit.dmesg on the command line (run-baseline.sh --dmesg): the whole kernel log on the
# console after the mark, for a per-initcall comparison of two boots (with initcall_debug).
case "$(cat /proc/cmdline)" in *hvkit.dmesg*)
  echo "HVKIT-DMESG-BEGIN"; dmesg; echo "HVKIT-DMESG-END" ;;
esac
/bin/tscmark e9 "HVKIT-GUEST END uptime=$(cut -d' ' -f1 /proc/uptime)"
/bin/tscmark shutdown
poweroff -f
