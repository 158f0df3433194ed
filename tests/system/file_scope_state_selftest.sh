#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Shows that file_scope_state.sh finds file-scope state: an object file with a global, a
# static, a function-local static and an assembly data label (all state), and a const table
# (not state), checked against three allow-lists: one naming exactly the four (passes), one
# missing one of them (fails, naming it), one with an entry no object has (fails).
set -u -o pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cxx=${1:-${CXX:-c++}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/state.cpp" <<'CPP'
int visible_counter;
static int hidden_counter = 3;
extern const int table[2];
const int table[2] = {1, 2};
int use() {
  static int calls;
  hidden_counter += table[1];
  return ++calls + hidden_counter + visible_counter;
}
asm(".pushsection .bss\n.globl asm_word\nasm_word: .skip 8\n.popsection");
CPP
"$cxx" -std=c++20 -O2 -c "$tmp/state.cpp" -o "$tmp/state.o" || { echo "FAIL: cannot compile"; exit 1; }
printf '%s\n' visible_counter hidden_counter 'use()::calls' asm_word > "$tmp/all.txt"
printf '%s\n' visible_counter 'use()::calls' asm_word > "$tmp/missing.txt"
cp "$tmp/all.txt" "$tmp/extra.txt"; echo 'gone_counter  # removed long ago' >> "$tmp/extra.txt"
check() { bash "$here/file_scope_state.sh" "$tmp/state.o" "$1" > "$tmp/out" 2>&1; }
fail=0
check "$tmp/all.txt" || { echo "FAIL: the exact allow-list was refused:"; cat "$tmp/out"; fail=1; }
if check "$tmp/missing.txt" || ! grep -q '^file-scope state: hidden_counter ' "$tmp/out" ||
   [ "$(grep -c '^file-scope state:' "$tmp/out")" != 1 ]; then
  echo "FAIL: the static missing from the list was not the one reported:"; cat "$tmp/out"; fail=1
fi
if check "$tmp/extra.txt" || ! grep -q '^allow-list entry not found: gone_counter$' "$tmp/out"; then
  echo "FAIL: a stale allow-list entry was not reported:"; cat "$tmp/out"; fail=1
fi
grep -q 'table' "$tmp/out" && { echo "FAIL: a const table was reported as state"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: file_scope_state.sh finds a global, a static, a function-local static and an assembly label, and not a const table"
exit $fail
