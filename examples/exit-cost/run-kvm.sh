#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The KVM column of the exit-cost table: boots Debian's Linux with kvm_intel (or kvm_amd
# npt=1) under Bochs and runs the exit-cost guest under KVM through exit-cost-vmm (no QEMU).
#
#   bash examples/exit-cost/run-kvm.sh [--amd] [--model MODEL] [--kvm-opts "ept=0"] [BUILD_DIR]
#                                                                    (default build/gcc)
# --kvm-opts: more options for kvm-intel / kvm-amd (e.g. ept=0: shadow paging); the image
# then goes to BUILD_DIR/exit-cost-kvm-<opts>.
#
# Needs the targets exit_cost_vmm and exit_cost_guest_bin built in BUILD_DIR.
# The image: examples/hypervisor/nested-kvm/build-image.sh with HVKIT_EXIT_COST_VMM/GUEST
# (kernel command line hvkit.mode=exit-cost), in BUILD_DIR/exit-cost-kvm. The CPU model:
# corei7_skylake_x (Intel, default) or zambezi (--amd). Output: the run's lines
# "exit-cost: kvm <row> tsc_per_rep=<x> handled=<where>" and the hashes; the whole Bochs
# stdout in BUILD_DIR/exit-cost-kvm/<model>.log, the rows in BUILD_DIR/exit-cost-kvm/<model>.txt.
# Environment: HVKIT_DEBIAN_CACHE (package cache, default BUILD_DIR/../debian-cache),
# HVKIT_EXIT_COST_TIMEOUT (seconds, default 1200).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
model=corei7_skylake_x
build=
kvm_opts=
while [ $# -gt 0 ]; do
  case $1 in
    --amd) model=zambezi ;;
    --model) model=$2; shift ;;
    --kvm-opts) kvm_opts=$2; shift ;;
    -h|--help) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) build=$1 ;;
  esac
  shift
done
build=${build:-$root/build/gcc}
build=$(cd "$build" && pwd)
vmm=$build/examples/exit-cost/exit-cost-vmm
guest=$build/examples/exit-cost/exit-cost-guest.bin
# The image's hypervisor slot (/hvkit/kernel.bin) is never run in exit-cost mode: the
# hypervisor if it is built, else the guest stands in for it.
kernel=$build/examples/hypervisor/kernel.bin
[ -f "$kernel" ] || kernel=$guest
for f in "$vmm" "$guest"; do
  [ -f "$f" ] || { echo "run-kvm: missing $f (build exit_cost_vmm exit_cost_guest_bin)" >&2; exit 2; }
done
command -v bochs >/dev/null || { echo "run-kvm: bochs not installed" >&2; exit 77; }
out=$build/exit-cost-kvm${kvm_opts:+-${kvm_opts//[ =,]/-}}
cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$build")/debian-cache}
mkdir -p "$out"
HVKIT_EXIT_COST_VMM=$vmm HVKIT_EXIT_COST_GUEST=$guest HVKIT_NK_KVM_OPTS=$kvm_opts \
  bash "$root/examples/hypervisor/nested-kvm/build-image.sh" "$out" "$cache" "$kernel"
bios=/usr/share/bochs/BIOS-bochs-latest vgabios=/usr/share/vgabios/vgabios.bin
[ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
rd=$out/$model
mkdir -p "$rd"
sed -e "s|@ISO@|$out/kvm-host.iso|" -e "s|@SERIAL@|$rd/l1-console.log|" -e "s|@LOG@|$rd/bochs.log|" \
    -e "s|@BIOS@|$bios|" -e "s|@VGABIOS@|$vgabios|" -e "s|@CPU_MODEL@|$model|" \
    "$root/examples/hypervisor/nested-kvm/bochsrc.in" >"$rd/bochsrc"
printf 'c\nquit\n' >"$rd/bochs.rc"
echo "run-kvm: booting Linux+KVM under Bochs ($model); the guest's lines follow" >&2
t0=$SECONDS
set +e
(cd "$rd" && TERM=dumb timeout --kill-after=10 "${HVKIT_EXIT_COST_TIMEOUT:-1200}" \
   bochs -q -f "$rd/bochsrc" -rc "$rd/bochs.rc" </dev/null 2>&1) | tr -d '\r' | tee "$out/$model.log" |
  grep --line-buffered -E '^(exit-cost|HVKIT-L1)'
set -e
echo "run-kvm: Bochs ran $((SECONDS - t0)) s" >&2
grep -E '^exit-cost: kvm ' "$out/$model.log" >"$out/$model.txt" || true
if ! grep -q 'exit-cost-guest: done' "$out/$model.log"; then
  echo "run-kvm: the guest did not finish (see $out/$model.log, $rd/bochs.log)" >&2
  exit 1
fi
echo "run-kvm: rows in $out/$model.txt" >&2
