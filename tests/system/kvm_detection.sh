#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kvm_detection.sh RUN: the host detection of `examples/hypervisor/run --kvm` (and of the
# default mode) against fake /proc/cpuinfo, /sys/module and /dev/kvm (HVKIT_CPUINFO,
# HVKIT_SYS_MODULE, HVKIT_DEV_KVM) and a fake qemu-system-x86_64 that records its arguments:
# an Intel host needs vmx and kvm_intel nested, an AMD host svm and kvm_amd nested (1 or Y);
# QEMU then gets -cpu host,+vmx or host,+svm (qemu-kvm.sh). Anything missing is a skip
# (exit 77) that names it. Needs neither KVM nor QEMU nor a build.
set -u
run=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/bin" "$t/build" "$t/sys/kvm_intel/parameters" "$t/sys/kvm_amd/parameters"
printf '#!/bin/sh\necho "$@" >"%s/qemu.args"\nexit 1\n' "$t" >"$t/bin/qemu-system-x86_64"
chmod +x "$t/bin/qemu-system-x86_64"
: >"$t/build/kernel.bin"
: >"$t/kvm"
echo "flags : fpu pae lm svm npt" >"$t/amd"
echo "flags : fpu pae lm vmx ept" >"$t/intel"
echo "flags : fpu pae lm hypervisor" >"$t/none"
failures=0

# case NAME EXPECTED_RC TEXT_IN_OUTPUT QEMU_CPU_ARG CPUINFO NESTED_INTEL NESTED_AMD [DEV]
# (NESTED_*: the parameter file's content, "-" = module not loaded; QEMU_CPU_ARG "-" = QEMU
# must not run; DEV defaults to the fake /dev/kvm)
case_() {
  local name=$1 want_rc=$2 text=$3 qarg=$4 cpuinfo=$5 ni=$6 na=$7 dev=${8:-$t/kvm} out rc
  rm -f "$t/qemu.args" "$t"/sys/kvm_*/parameters/nested
  [ "$ni" = - ] || echo "$ni" >"$t/sys/kvm_intel/parameters/nested"
  [ "$na" = - ] || echo "$na" >"$t/sys/kvm_amd/parameters/nested"
  out=$(HVKIT_CPUINFO=$t/$cpuinfo HVKIT_SYS_MODULE=$t/sys HVKIT_DEV_KVM=$dev PATH="$t/bin:$PATH" \
        bash "$run" --kvm --no-build --build-dir "$t/build" 2>&1)
  rc=$?
  local bad=
  if [ "$want_rc" = 77 ]; then [ $rc -eq 77 ] || bad="exit status $rc, expected 77"
  else [ $rc -ne 77 ] || bad="skipped"
  fi
  grep -qF -- "$text" <<<"$out" || bad="$bad${bad:+; }no line with '$text'"
  if [ "$qarg" = - ]; then [ ! -f "$t/qemu.args" ] || bad="$bad${bad:+; }QEMU ran"
  else grep -qF -- "-cpu $qarg " "$t/qemu.args" 2>/dev/null || bad="$bad${bad:+; }QEMU not run with -cpu $qarg"
  fi
  if [ -n "$bad" ]; then
    echo "FAIL $name: $bad"; sed 's/^/    /' <<<"$out"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

case_ amd_nested_1     0  "booting under QEMU+KVM (AMD, kvm_amd nested=1)"   host,+svm amd   -  1
case_ amd_nested_Y     0  "booting under QEMU+KVM (AMD, kvm_amd nested=Y)"   host,+svm amd   -  Y
case_ intel_nested_Y   0  "booting under QEMU+KVM (Intel, kvm_intel nested=Y)" host,+vmx intel Y  -
case_ amd_nested_0     77 "AMD host: kvm_amd nested=0 (load it with nested=1)" - amd     -  0
case_ amd_intel_module 77 "AMD host: kvm_amd is not loaded"                    - amd     Y  -
case_ intel_nested_N   77 "Intel host: kvm_intel nested=N"                     - intel   N  -
case_ amd_no_dev_kvm   77 "AMD host without a read-write $t/nonexistent"      - amd     -  1 "$t/nonexistent"
case_ neither          77 "the CPU shows neither vmx nor svm"                  - none    Y  Y
echo "$failures failed"
[ $failures -eq 0 ]
