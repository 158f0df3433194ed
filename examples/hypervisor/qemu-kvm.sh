#!/bin/sh
# SPDX-License-Identifier: MIT
# qemu-kvm.sh KERNEL SERIAL [QEMU-OPTION...]
# The one QEMU+KVM command line of the reference hypervisor: `run --kvm` on a host with
# nested VMX or nested SVM and the /init of the KVM host image that `run --nested-kvm-in-bochs`
# boots under Bochs (Intel or AMD CPU model) both execute this file, so they run exactly the
# same invocation.
# KERNEL is the multiboot kernel.bin; SERIAL a QEMU chardev for COM1 (file:PATH, stdio).
# POSIX sh (it also runs under busybox sh). QEMU exits through isa-debug-exit: status
# (value << 1) | 1, so 1 when the hypervisor wrote 0 (all checks passed), 3 otherwise.
# qemu-kvm.sh --tcg KERNEL SERIAL [...]: the same command line without KVM, on QEMU's TCG
# with -cpu max (AMD SVM with nested paging, no NRIP save, decode assists, VMCB clean bits
# or flush-by-ASID: the third SVM implementation `run --qemu-tcg` checks the backend on).
accel="-enable-kvm"
if [ "${1:-}" = --tcg ]; then accel="-accel tcg"; shift; fi
[ $# -ge 2 ] || { echo "usage: qemu-kvm.sh [--tcg] KERNEL SERIAL [QEMU-OPTION...]" >&2; exit 2; }
kernel=$1
serial=$2
shift 2
# -nodefaults: no VGA, NIC, disks or monitor (no option ROMs to find); the hypervisor needs
# only COM1 and the debug-exit port. -cpu host with the vendor's virtualization extension
# (the host's /proc/cpuinfo: vmx -> +vmx, nested VMX through kvm_intel nested=1; svm -> +svm,
# nested SVM through kvm_amd nested=1): the hypervisor picks its backend from CPUID.
cpuinfo=${HVKIT_CPUINFO:-/proc/cpuinfo}  # replaced only by tests/system/kvm_detection.sh
if grep -qw svm "$cpuinfo" && ! grep -qw vmx "$cpuinfo"; then ext=+svm; else ext=+vmx; fi
cpu="host,$ext"
[ "$accel" = "-enable-kvm" ] || cpu=max
exec qemu-system-x86_64 $accel -cpu $cpu -m 256 -nodefaults -display none \
  -no-reboot -kernel "$kernel" -serial "$serial" \
  -device isa-debug-exit,iobase=0xf4,iosize=0x04 "$@"
