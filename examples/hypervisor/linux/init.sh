#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# The initramfs /init of the hvkit Linux guest: mounts, marks the shell prompt for the
# hypervisor (port 0xE9), shows a shell, runs the in-guest checks, powers off through the
# port the hypervisor intercepts.
/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
/bin/hvtest e9 "HVKIT-GUEST INIT uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"
/bin/hvtest e9 "HVKIT-GUEST MARK shell uptime=$(cut -d' ' -f1 /proc/uptime)"
# hvkit.triple_fault on the kernel command line: the hostile-guest run (run --linux
# --triple-fault); the module wrecks the IDT and the guest triple-faults.
case "$(cat /proc/cmdline)" in *hvkit.triple_fault*)
  /bin/hvtest e9 "HVKIT-GUEST INFO triple fault next"
  insmod /lib/modules/hvkit_wp.ko triple_fault=1 ;;
esac
# A shell with its prompt on the console (stdin scripted: the run is unattended).
printf 'uname -sr\necho shell-ok\nexit\n' | PS1='hvkit-linux# ' sh -i 2>&1
insmod /lib/modules/msr.ko && /bin/hvtest e9 "HVKIT-GUEST INFO msr module loaded"
insmod /lib/modules/hvkit_wp.ko && /bin/hvtest e9 "HVKIT-GUEST INFO hvkit_wp module loaded"
dmesg >/tmp/dmesg.txt
/bin/hvtest e9 "HVKIT-GUEST INFO dmesg_lines=$(wc -l </tmp/dmesg.txt)"
grep -E 'Hypervisor detected|PV IPIs|x86/fpu|XSAVE|xstate|x2apic|unchecked MSR|clearcpuid|Kernel panic|segfault|general protection|traps:|Mitigation|Vulnerab|isolation' /tmp/dmesg.txt |
  while read -r line; do /bin/hvtest e9 "HVKIT-GUEST DMESG $line"; done
/bin/hvtest checks
/bin/hvtest e9 "HVKIT-GUEST END uptime=$(cut -d' ' -f1 /proc/uptime)"
/bin/hvtest shutdown
echo "hvtest shutdown returned: the hypervisor did not intercept port 0x8900"
poweroff -f
