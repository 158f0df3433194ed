#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The KVM columns of the ssdd CR0.WP table (issue 27 item 7): the ssdd guest (build-guest.sh)
# under QEMU+KVM inside the Bochs-hosted Linux KVM host (examples/hypervisor/nested-kvm's
# image, this directory's l1-qemu.sh in the slot of its exit-cost VMM).
#
#   bash examples/ssdd-wp/run-kvm.sh [--amd] [--model MODEL] [--kvm-opts "ept=0"]
#        [--forks N] [--iters N] [--pairs N] [--sym SYMBOL] [BUILD_DIR]
#
# Columns: Intel with EPT (corei7_skylake_x, kvm_intel: CR0.WP guest-owned, no exit),
# Intel with --kvm-opts ept=0 (shadow paging: every CR0.WP change exits and the shadow MMU
# reacts), AMD with NPT (--amd, zambezi, kvm_amd npt=1: the selective CR0 write intercept
# exits on every WP change, emulated without decode assists). Defaults: --forks 2
# --iters 2000 --pairs 1 --sym arch_ptrace (one kprobe hit per ssdd iteration).
# The hypervisor slot of the image holds BUILD_DIR/examples/hypervisor/kernel.bin when it
# is built (never run in this mode), else a stand-in file.
# Output: lines "HVKIT-SSDD ..." and a summary "ssdd-wp: kvm <column> ..."; the whole Bochs
# stdout in BUILD_DIR/ssdd-wp/<column>.log. Timeout: HVKIT_SSDD_TIMEOUT (default 2400 s).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
model=corei7_skylake_x kvm_opts= forks=2 iters=2000 pairs=1 sym=arch_ptrace build=
while [ $# -gt 0 ]; do
  case $1 in
    --amd) model=zambezi ;;
    --model) model=$2; shift ;;
    --kvm-opts) kvm_opts=$2; shift ;;
    --forks) forks=$2; shift ;;
    --iters) iters=$2; shift ;;
    --pairs) pairs=$2; shift ;;
    --sym) sym=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) build=$1 ;;
  esac
  shift
done
build=${build:-$root/build/gcc}
mkdir -p "$build" && build=$(cd "$build" && pwd)
export HVKIT_DEBIAN_CACHE=${HVKIT_DEBIAN_CACHE:-$(dirname "$build")/debian-cache}
command -v bochs >/dev/null || { echo "HVKIT-RUN SKIP: bochs not installed"; exit 77; }
col=$model${kvm_opts:+-${kvm_opts//[ =,]/-}}
out=$build/ssdd-wp
guest=$out/guest-f$forks-i$iters-p$pairs-$sym
bash "$here/build-guest.sh" "$guest" "$forks" "$iters" "$pairs" "$sym" 0
kernel=$build/examples/hypervisor/kernel.bin
[ -f "$kernel" ] || { kernel=$out/no-hypervisor.bin; echo "not run in this mode" >"$kernel"; }
img=$out/kvm-host${kvm_opts:+-${kvm_opts//[ =,]/-}}
HVKIT_EXIT_COST_VMM=$here/l1-qemu.sh HVKIT_EXIT_COST_GUEST=$guest/bundle.cpio HVKIT_NK_KVM_OPTS=$kvm_opts \
  bash "$root/examples/hypervisor/nested-kvm/build-image.sh" "$img" "$HVKIT_DEBIAN_CACHE" "$kernel"
bios=/usr/share/bochs/BIOS-bochs-latest vgabios=/usr/share/vgabios/vgabios.bin
[ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
rd=$out/$col
mkdir -p "$rd"
sed -e "s|@ISO@|$img/kvm-host.iso|" -e "s|@SERIAL@|$rd/l1-console.log|" -e "s|@LOG@|$rd/bochs.log|" \
    -e "s|@BIOS@|$bios|" -e "s|@VGABIOS@|$vgabios|" -e "s|@CPU_MODEL@|$model|" \
    "$root/examples/hypervisor/nested-kvm/bochsrc.in" >"$rd/bochsrc"
printf 'c\nquit\n' >"$rd/bochs.rc"
echo "ssdd-wp: booting Linux+KVM under Bochs ($model${kvm_opts:+, $kvm_opts}), the ssdd guest under it" >&2
t0=$SECONDS
set +e
(cd "$rd" && TERM=dumb timeout --kill-after=10 "${HVKIT_SSDD_TIMEOUT:-2400}" \
   bochs -q -f "$rd/bochsrc" -rc "$rd/bochs.rc" </dev/null 2>&1) | tr -d '\r' | tee "$out/$col.log" |
  grep --line-buffered -aE 'HVKIT-SSDD|HVKIT-L1'
set -e
echo "ssdd-wp: Bochs ran $((SECONDS - t0)) s" >&2
awk -v col="$col" -v forks="$forks" -v iters="$iters" -v pairs="$pairs" -v sym="$sym" '
  function kv(line, key,    m) { if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); return substr(m, length(key) + 2) } return "" }
  /HVKIT-SSDD run no_module/ { t0 = kv($0, "ticks"); u0 = kv($0, "uptime_s") }
  /HVKIT-SSDD run kprobe_only/ { tk = kv($0, "ticks") }
  /HVKIT-SSDD run kernexec_hvkit0/ { t1 = kv($0, "ticks"); u1 = kv($0, "uptime_s"); h = kv($0, "hits"); w = kv($0, "cr0_writes"); r = kv($0, "ro_writes") }
  END {
    if (t0 == "" || t1 == "") { print "ssdd-wp: kvm " col " FAIL: no result (see the log)"; exit 1 }
    printf "ssdd-wp: kvm %s forks=%s iters=%s sym=%s pairs=%s no_module_ticks=%s kprobe_only_ticks=%s kernexec_ticks=%s kernexec/kprobe_only=%.3f hits=%s hits_per_iter=%.3f cr0_writes=%s ro_writes=%s ticks_per_cr0_write=%.0f uptime_s=%s/%s\n",
      col, forks, iters, sym, pairs, t0, tk, t1, (tk > 0 ? t1 / tk : 0), h, h / (forks * iters), w, r, (w > 0 ? (t1 - tk) / w : 0), u0, u1
  }' "$out/$col.log"
