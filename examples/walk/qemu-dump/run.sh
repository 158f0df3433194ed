#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh WORK_DIR HVKIT_WALK
# A real memory image for hvkit-walk: boots Debian's cloud kernel (fetched with
# scripts/debian-fetch.sh, as the hypervisor's Linux guest does) under QEMU TCG (no
# hypervisor, no KVM) with `nokaslr`, lets its /init print what the guest reports about its
# kernel (/proc/kallsyms addresses, the /proc/iomem physical ranges of the kernel image,
# /proc/version), dumps the guest's memory with the HMP command `dump-guest-memory` (ELF,
# without paging: PT_LOAD segments by physical address and the "QEMU" CPU-state notes), then
# checks with hvkit-walk, which reads the core's CR0/CR3/CR4 itself, that the guest kernel's
# own addresses (its /proc/kallsyms: _text, linux_banner) translate to the physical
# addresses the guest reports (/proc/iomem: Kernel code, Kernel rodata + offset) and the
# kernel package's image gives (its ELF segments' p_paddr), that the bytes read there are
# the package's (and linux_banner's text is the guest's /proc/version), and that the direct
# map (page_offset_base, read through hvkit-walk, + the physical address) agrees.
# HVKIT_DUMP_REUSE=1 reuses WORK_DIR's dump instead of booting again.
# Exit 0 all checks passed, 1 a check failed, 77 skipped (packages or QEMU missing).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
skip() { echo "HVKIT-DUMP SKIP: $*"; exit 77; }
fail() { echo "HVKIT-DUMP FAIL: $*"; exit 1; }
[ $# -eq 2 ] || { echo "usage: $0 WORK_DIR HVKIT_WALK" >&2; exit 2; }
mkdir -p "$1"
work=$(cd "$1" && pwd) walk=$(realpath "$2")
cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$work")/debian-cache}
for t in qemu-system-x86_64 apt-get dpkg-deb gzip; do command -v $t >/dev/null || skip "$t not installed"; done
fetch() { bash "$root/scripts/debian-fetch.sh" "$cache" "$@" || { rc=$?; [ $rc = 3 ] && skip "Debian package not available: $*"; exit $rc; }; }
image_pkg=$(fetch linux-image-cloud-amd64 | tail -1)
fetch busybox-static >/dev/null
abi=${image_pkg#linux-image-}
vmlinuz=$cache/root/boot/vmlinuz-$abi sysmap=$cache/root/boot/System.map-$abi
[ -f "$vmlinuz" ] && [ -f "$sysmap" ] || fail "no $vmlinuz or $sysmap"

# ---- initramfs: busybox and /init ----------------------------------------------------------
rootfs=$work/rootfs
rm -rf "$rootfs" && mkdir -p "$rootfs/bin"
cp "$cache/root/bin/busybox" "$rootfs/bin/busybox"
cp "$here/init" "$rootfs/init" && chmod +x "$rootfs/init"
(cd "$rootfs" && find . | LC_ALL=C sort | "$rootfs/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$work/initrd.img"

# ---- boot, wait for READY, dump, quit --------------------------------------------------------
core=$work/guest.core serial=$work/serial.log
start=$(date +%s)
if [ "${HVKIT_DUMP_REUSE:-0}" = 1 ] && [ -s "$core" ] && [ -s "$serial" ]; then
  echo "HVKIT-DUMP INFO reusing $core (HVKIT_DUMP_REUSE=1)"
else
rm -f "$core" "$serial" "$work/monitor.in"
mkfifo "$work/monitor.in"
qemu-system-x86_64 -accel tcg -m 512 -smp 1 -nodefaults -display none -no-reboot \
  -kernel "$vmlinuz" -initrd "$work/initrd.img" \
  -append 'console=ttyS0 nokaslr nopti quiet panic=-1' \
  -serial "file:$serial" -monitor stdio <"$work/monitor.in" >"$work/monitor.log" 2>&1 &
qemu=$!
exec 3>"$work/monitor.in"
trap 'kill $qemu 2>/dev/null || true' EXIT
timeout=${HVKIT_DUMP_TIMEOUT:-240}
until grep -q 'HVKIT-GUEST READY' "$serial" 2>/dev/null; do
  kill -0 $qemu 2>/dev/null || fail "QEMU ended before the guest was ready (see $serial, $work/monitor.log)"
  [ $(( $(date +%s) - start )) -lt "$timeout" ] || fail "guest not ready after ${timeout}s (see $serial)"
  sleep 1
done
booted=$(( $(date +%s) - start ))
echo "dump-guest-memory $core" >&3
echo "quit" >&3
exec 3>&-
wait $qemu || true
trap - EXIT
[ -s "$core" ] || fail "no dump written (see $work/monitor.log)"
echo "HVKIT-DUMP INFO booted in ${booted}s, dump $(stat -c %s "$core") bytes, total $(( $(date +%s) - start ))s"
fi
tr -d '\r' <"$serial" | grep 'HVKIT-GUEST' | tee "$work/guest.txt"

# ---- what the guest said, what the package says, what hvkit-walk finds ------------------------
# Oracles: the guest's own /proc/kallsyms (virtual addresses), /proc/iomem (the physical
# ranges of its kernel image) and /proc/version; the kernel package's image (kernel_image.py:
# the vmlinux ELF in vmlinuz, its segments' physical addresses and bytes). The package's
# System.map is a placeholder (Debian ships the real one in the -dbg package, 280 MB), so
# the symbols' addresses come from the guest, with nokaslr the link-time ones.
guest_sym() { awk -v s="$1" '$2 == "KALLSYMS" && $5 == s {print "0x" $3}' "$work/guest.txt"; }
iomem_start() { awk -v s="$1" '$2 == "IOMEM" && $5 == "Kernel" && $6 == s {split($3, r, "-"); print "0x" r[1]}' "$work/guest.txt"; }
walk() { "$walk" --dump "$core" "$@" 2>/dev/null; }
walk_hex() { walk --read "$1" "$2" --raw | od -An -v -tx1 | tr -d ' \n'; }
hex16() { printf '0x%016x' "$1"; }
pass=0
check() {  # check WHAT GOT EXPECTED
  if [ "$2" = "$3" ]; then echo "HVKIT-DUMP PASS $1: $2"; pass=$((pass + 1)); else fail "$1: got '$2', expected '$3'"; fi
}
walk --info | sed 's/^/HVKIT-DUMP INFO /'
for s in _text __start_rodata linux_banner page_offset_base; do
  [ -n "$(guest_sym $s)" ] || fail "$s missing from the guest's /proc/kallsyms"
done
# _text: the first byte of the kernel's code.
text_va=$(guest_sym _text)
read -r pkg_pa pkg_hex < <(python3 "$here/kernel_image.py" "$vmlinuz" "$text_va" 64)
walk --gva "$text_va" | tee "$work/walk.txt" | sed 's/^/HVKIT-DUMP WALK /'
got_pa=$(awk '$1 == "->" && $2 == "gpa" {print $3}' "$work/walk.txt")
check "_text ($text_va): hvkit-walk's gpa = the guest's Kernel code start" "$got_pa" "$(hex16 "$(iomem_start code)")"
check "_text: = the package's physical address" "$got_pa" "$pkg_pa"
check "_text: the 64 bytes hvkit-walk reads = the package's" "$(walk_hex "$text_va" 64)" "$pkg_hex"
# linux_banner: in .rodata; its text is /proc/version.
banner_va=$(guest_sym linux_banner)
expect_pa=$(hex16 $(( $(iomem_start rodata) + banner_va - $(guest_sym __start_rodata) )))
read -r pkg_pa pkg_hex < <(python3 "$here/kernel_image.py" "$vmlinuz" "$banner_va" 256)
walk --gva "$banner_va" | tee "$work/walk.txt" | sed 's/^/HVKIT-DUMP WALK /'
got_pa=$(awk '$1 == "->" && $2 == "gpa" {print $3}' "$work/walk.txt")
check "linux_banner ($banner_va): hvkit-walk's gpa = the guest's Kernel rodata start + offset" "$got_pa" "$expect_pa"
check "linux_banner: = the package's physical address" "$got_pa" "$pkg_pa"
got_hex=$(walk_hex "$banner_va" 256)
check "linux_banner: the 256 bytes hvkit-walk reads = the package's" "$got_hex" "$pkg_hex"
version=$(awk '$2 == "VERSION" {sub(/^HVKIT-GUEST VERSION /, ""); print; exit}' "$work/guest.txt")
version_hex=$(printf '%s\n' "$version" | od -An -v -tx1 | tr -d ' \n')
check "linux_banner: its text = the guest's /proc/version line" "${got_hex:0:${#version_hex}}" "$version_hex"
# The direct map: page_offset_base's value (read through hvkit-walk) + the physical address.
pob=0x$(walk --read "$(guest_sym page_offset_base)" 8 --raw | od -An -v -tx8 | tr -d ' \n')
dm_va=$(printf '0x%x' $(( pob + expect_pa )))
check "direct map ($pob + gpa): the 256 bytes there are the same" "$(walk_hex "$dm_va" 256)" "$pkg_hex"
echo "HVKIT-DUMP RESULT PASS: $pass checks, $(( $(date +%s) - start ))s"
