#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The exit-cost table from two runs of the same guest:
#   bash examples/exit-cost/table.sh HVKIT_LOG KVM_LOG
# HVKIT_LOG: any log holding the guest's lines under the hvkit hypervisor
#   ("exit-cost-guest: hash=..." and "exit-cost-guest: row=<r> ... tsc_per_rep=<x>", with or
#   without a prefix); KVM_LOG: run-kvm.sh's <model>.log (the same guest lines, and the VMM's
#   "exit-cost: kvm <row> ... handled=<where>"). Prints per row
#   exit-cost: <row> hvkit=<tsc> kvm=<tsc> ratio=<hvkit/kvm> kvm_handled=<where>
# and fails (status 1) when the two guests' hashes differ or a row is missing.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 HVKIT_LOG KVM_LOG" >&2; exit 2; }
hash_of() { sed -n 's/.*exit-cost-guest: hash=\([0-9a-f]*\).*/\1/p' "$1" | head -1; }
h1=$(hash_of "$1") h2=$(hash_of "$2")
if [ -z "$h1" ] || [ "$h1" != "$h2" ]; then
  echo "exit-cost: guest hashes differ or are missing: hvkit=${h1:-none} kvm=${h2:-none}" >&2
  exit 1
fi
echo "exit-cost: guest hash=$h1 (both runs)"
awk '
  FNR == 1 { file++ }
  /exit-cost-guest: row=/ {
    match($0, /row=[a-z0-9_]+/); r = substr($0, RSTART + 4, RLENGTH - 4)
    match($0, /tsc_per_rep=[0-9.]+/); t = substr($0, RSTART + 12, RLENGTH - 12)
    if (file == 1) { hv[r] = t; if (!(r in hseen)) { horder[++hn] = r; hseen[r] = 1 } } else { kvm[r] = t; if (!(r in seen)) { order[++n] = r; seen[r] = 1 } }
  }
  file == 2 && /^exit-cost: kvm / { match($0, /handled=[a-z-]+/); where[$3] = substr($0, RSTART + 8, RLENGTH - 8) }
  END {
    bad = 0
    for (i = 1; i <= n; i++) {
      r = order[i]
      if (!(r in hv)) { print "exit-cost: " r " missing in the hvkit run"; bad = 1; continue }
      printf "exit-cost: %s hvkit=%s kvm=%s ratio=%s kvm_handled=%s\n", r, hv[r], kvm[r],
             (kvm[r] > 0 ? sprintf("%.3f", hv[r] / kvm[r]) : "-"), (r in where ? where[r] : "?")
    }
    # Rows only the hvkit run has (cr0_wp_intercepted: cr0_wp of the WP-intercepted run).
    for (i = 1; i <= hn; i++) if (!(horder[i] in seen))
      printf "exit-cost: %s hvkit=%s kvm=- ratio=- kvm_handled=-\n", horder[i], hv[horder[i]]
    exit bad
  }' "$1" "$2"
