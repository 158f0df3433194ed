#!/usr/bin/env bash
# The README's main job: installs what is missing, builds the reference L1 hypervisor and
# boots it under Bochs (or under QEMU+KVM when /dev/kvm offers nested VMX), then prints the
# conformance summary. Arguments go to examples/hypervisor/run (--bochs, --kvm, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${HVKIT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
if [ -x examples/hypervisor/run ]; then
  exec examples/hypervisor/run "$@"
fi
echo "The reference hypervisor is not in this tree yet; running the x86/ layer's tests instead."
cmake --preset gcc >/dev/null
cmake --build --preset gcc -j "$(nproc)" --target test_x86
build/gcc/tests/x86/test_x86
