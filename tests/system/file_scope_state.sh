#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The reference hypervisor keeps no file-scope state (docs/hypervisor.md, "State"): every
# object in a writable section (.data, .bss and their subsections) of the image must be on
# the allow-list, each entry with its reason. Objects in read-only sections (constexpr and
# const tables) are not state and are not listed.
#
#   file_scope_state.sh ELF-OR-OBJECT ALLOWLIST
#
# Prints "file-scope state: <name> (<section>, <size> bytes)" for every object not on the
# list and "allow-list entry not found: <name>" for every entry that names no object (the
# list stays exact), and exits 1 if there is either; 0 otherwise; 77 if ELF does not exist
# (the hypervisor was not built: its system test was skipped).
set -u -o pipefail
elf=$1 list=$2
[ -f "$elf" ] || { echo "SKIP: $elf not built"; exit 77; }
command -v readelf >/dev/null && command -v c++filt >/dev/null || { echo "SKIP: readelf/c++filt missing"; exit 77; }

# Section index -> name, for the writable data sections only.
declare -A writable=()
while read -r idx name; do writable[$idx]=$name; done < <(
  readelf -SW "$elf" | sed -n 's/^ *\[ *\([0-9]*\)\] \([^ ]*\) .*/\1 \2/p' |
    awk '$2 ~ /^\.(data|bss)(\.|$)/ { print }')

# Objects defined in those sections: C++ objects (OBJECT, TLS) and the assembly's data labels
# (NOTYPE), but for the linker script's markers (__bss_start, __pool_end, ...: reserved names).
found=$(readelf -sW "$elf" |
  awk 'NR > 3 && ($4 == "OBJECT" || $4 == "TLS" || ($4 == "NOTYPE" && $8 !~ /^(__|\.L)/)) && $8 != "" { print $7, $3, $8 }' |
  while read -r ndx size sym; do
    [ -n "${writable[$ndx]+x}" ] || continue
    printf '%s\t%s\t%s\n' "$(printf '%s' "$sym" | c++filt)" "${writable[$ndx]}" "$size"
  done | sort -u)

allowed=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$list" | sort -u)
bad=0
while IFS=$'\t' read -r name section size; do
  [ -n "$name" ] || continue
  if ! grep -qxF -- "$name" <<<"$allowed"; then
    echo "file-scope state: $name ($section, $size bytes)"
    bad=1
  fi
done <<<"$found"
while read -r name; do
  [ -n "$name" ] || continue
  if ! cut -f1 <<<"$found" | grep -qxF -- "$name"; then
    echo "allow-list entry not found: $name"
    bad=1
  fi
done <<<"$allowed"
n=$(grep -c . <<<"$found")
[ $bad -eq 0 ] && echo "PASS: $n objects in writable sections, all on the allow-list ($list)"
exit $bad
