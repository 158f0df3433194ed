#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the ssdd guest under KVM inside the Bochs-hosted Linux (the L1 KVM host of
# examples/hypervisor/nested-kvm). run-kvm.sh puts this script into that image in the slot
# of the exit-cost VMM, so the image's /init calls it as `l1-qemu.sh BUNDLE` after loading
# kvm_intel / kvm_amd; BUNDLE (in the guest slot) is a newc cpio of the guest's vmlinuz,
# initrd.img and append.txt (its kernel command line). stdout goes to port 0xE9.
set -u
mkdir -p /tmp/l2 && cd /tmp/l2 || exit 1
cpio -i <"$1" 2>/dev/null || { echo "HVKIT-SSDD FAIL cannot unpack $1"; exit 1; }
echo "HVKIT-SSDD qemu start uptime=$(cut -d' ' -f1 /proc/uptime)"
qemu-system-x86_64 -enable-kvm -cpu host -m 256 -nodefaults -display none -no-reboot -monitor none \
  -serial stdio -kernel vmlinuz -initrd initrd.img -append "$(cat append.txt)" </dev/null 2>&1 | tr -d '\r'
echo "HVKIT-SSDD qemu exit uptime=$(cut -d' ' -f1 /proc/uptime)"
