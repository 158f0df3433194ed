#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's main job: installs what is missing, builds the reference L1 hypervisor and
# boots it under Bochs (or under QEMU+KVM when /dev/kvm offers nested VMX), prints the
# conformance summary, then boots Debian's unmodified Linux kernel under the same hypervisor
# to a shell and prints that summary (examples/hypervisor/run --linux; the kernel and
# busybox are fetched from Debian into the build directory once). Arguments go to
# examples/hypervisor/run (--bochs, --kvm, --cpu, ...) for both runs; HVKIT_SKIP_LINUX=1
# leaves the Linux boot out. Exit status: 0 both passed (a skipped Linux boot, e.g. no
# package mirror, is reported and does not fail the job), else the failing run's status.
set -uo pipefail
cd "$(dirname "$0")/.."
[ "${HVKIT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh || exit $?
bash examples/hypervisor/run "$@"
conformance=$?
[ "${HVKIT_SKIP_LINUX:-0}" = 1 ] && exit $conformance
echo
bash examples/hypervisor/run --linux "$@"
linux=$?
[ $linux = 77 ] && linux=0
[ $conformance != 0 ] && exit $conformance
exit $linux
