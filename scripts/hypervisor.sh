#!/usr/bin/env bash
# The README's main job: installs what is missing, builds the reference L1 hypervisor and
# boots it under Bochs (or under QEMU+KVM when /dev/kvm offers nested VMX), then prints the
# conformance summary. Arguments go to examples/hypervisor/run (--bochs, --kvm, --cpu, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${HVKIT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
exec bash examples/hypervisor/run "$@"
