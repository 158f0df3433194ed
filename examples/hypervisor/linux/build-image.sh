#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-image.sh BUILD_DIR KERNEL_BIN CMDLINE
# Builds the Linux guest's boot image for the hvkit hypervisor, cached in BUILD_DIR:
#   - Debian's cloud kernel, its msr.ko, busybox-static and the kernel headers, fetched with
#     scripts/debian-fetch.sh into BUILD_DIR/../debian-cache (apt-get download + dpkg-deb -x,
#     nothing installed on the host);
#   - hvtest (static, host gcc) and the hvkit_wp kernel module (built against the fetched
#     headers; the kernel was built with gcc-12, as the host's);
#   - the initramfs (busybox cpio newc, lz4 -l if lz4 is there, else gzip);
#   - the ISO: GRUB, the hypervisor (multiboot), vmlinuz and the initramfs as modules.
# Exit status 77 with "HVKIT-RUN SKIP: ..." when a package cannot be fetched or a tool is
# missing; 1 on a build error. Prints "module=built|skipped:<why>" on the last line.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
skip() { echo "HVKIT-RUN SKIP: $*"; exit 77; }
mkdir -p "$1"
build=$(cd "$1" && pwd) kernel_bin=$(realpath "$2") cmdline=$3
# Shared with the other Debian-image runs (nested-kvm/): $HVKIT_DEBIAN_CACHE, else a
# debian-cache beside the build directory, so the kernel is fetched once.
cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$build")/debian-cache}
for t in apt-get dpkg-deb gcc make grub-mkrescue xorriso; do
  command -v $t >/dev/null || skip "$t not installed (needed to build the Linux guest image)"
done

fetch() { bash "$root/scripts/debian-fetch.sh" "$cache" "$@" || { rc=$?; [ $rc = 3 ] && skip "Debian package not available: $* (apt-get update?)"; exit $rc; }; }
image_pkg=$(fetch linux-image-cloud-amd64 | tail -1)
fetch busybox-static >/dev/null
abi=${image_pkg#linux-image-}                  # 6.1.0-57-cloud-amd64
vmlinuz=$cache/root/boot/vmlinuz-$abi
moddir=$cache/root/lib/modules/$abi
[ -f "$vmlinuz" ] || { echo "build-image: no $vmlinuz" >&2; exit 1; }

img=$build/linux-image
mkdir -p "$img"
# ---- the static test program -------------------------------------------------------------
if [ ! -f "$img/hvtest" ] || [ "$here/hvtest.c" -nt "$img/hvtest" ] || [ "$here/hvtest_smp.c" -nt "$img/hvtest" ]; then
  gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$img/hvtest" "$here/hvtest.c" "$here/hvtest_smp.c"
fi

# ---- the hvkit_wp kernel module against Debian's headers -----------------------------------
module_status=built
kver=${abi%-cloud-amd64}                        # 6.1.0-57
kbuild_pkg=linux-kbuild-$(echo "$kver" | cut -d. -f1,2)
if [ ! -f "$img/hvkit_wp.ko" ] || [ "$here/module/hvkit_wp.c" -nt "$img/hvkit_wp.ko" ]; then
  if bash "$root/scripts/debian-fetch.sh" "$cache" "linux-headers-$abi" "linux-headers-$kver-common" "$kbuild_pkg" >/dev/null 2>"$img/headers.err"; then
    hdr=$cache/root/usr/src/linux-headers-$abi
    # Debian's header Makefile includes the common tree by its installed path: point it
    # at the unpacked copy.
    sed -i "s|^include .*/usr/src/\(linux-headers-[^/]*-common\)/Makefile|include $cache/root/usr/src/\1/Makefile|" "$hdr/Makefile"
    rm -rf "$img/module" && cp -r "$here/module" "$img/module"
    cc=gcc; command -v gcc-12 >/dev/null && cc=gcc-12
    if make -C "$hdr" M="$img/module" CC=$cc modules >"$img/module.log" 2>&1; then
      cp "$img/module/hvkit_wp.ko" "$img/hvkit_wp.ko"
    else
      module_status="skipped:module_build_failed(see $img/module.log)"
    fi
  else
    module_status="skipped:headers_not_fetchable($(tail -1 "$img/headers.err"))"
  fi
fi

# ---- initramfs -------------------------------------------------------------------------------
rootfs=$img/rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs/bin" "$rootfs/lib/modules" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev"
cp "$cache/root/bin/busybox" "$rootfs/bin/busybox"
ln -sf busybox "$rootfs/bin/sh"
cp "$img/hvtest" "$rootfs/bin/hvtest"
cp "$here/init.sh" "$rootfs/init" && chmod +x "$rootfs/init"
msr_ko=$(find "$moddir" -name msr.ko | head -1)
[ -n "$msr_ko" ] && cp "$msr_ko" "$rootfs/lib/modules/msr.ko"
[ -f "$img/hvkit_wp.ko" ] && cp "$img/hvkit_wp.ko" "$rootfs/lib/modules/hvkit_wp.ko"
bb=$cache/root/bin/busybox
if command -v lz4 >/dev/null; then
  (cd "$rootfs" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) | lz4 -l -9 -q -f - "$img/initrd.img"
else
  (cd "$rootfs" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -9 >"$img/initrd.img"
fi

# ---- ISO ---------------------------------------------------------------------------------------
iso=$img/isoroot
rm -rf "$iso" && mkdir -p "$iso/boot/grub"
cp "$kernel_bin" "$iso/boot/kernel.bin"
cp "$vmlinuz" "$iso/boot/vmlinuz"
cp "$img/initrd.img" "$iso/boot/initrd.img"
sed "s|@CMDLINE@|$cmdline|" "$here/grub.cfg" >"$iso/boot/grub/grub.cfg"
grub-mkrescue --install-modules="multiboot normal configfile" --locales= --fonts= --themes= \
  -o "$img/hvkit-linux.iso" "$iso" >"$img/grub-mkrescue.log" 2>&1
echo "kernel=$abi vmlinuz_bytes=$(stat -c %s "$vmlinuz") initrd_bytes=$(stat -c %s "$img/initrd.img") module=$module_status"
