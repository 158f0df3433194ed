#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-guest.sh OUT FORKS ITERS PAIRS SYM MODES
# Builds the ssdd guest: Debian's cloud kernel and an initramfs with busybox, rt-tests' ssdd
# and the shared libraries `ldd` lists for it (the machine's own glibc, the release the
# package was built for), the hvkit_kernexec module (built against Debian's headers, as
# the Linux guest's hvkit_wp.ko is), tscmark (examples/linux-baseline) and l2-init.sh as
# /init, with /etc/ssdd.conf holding the parameters. Packages are fetched with
# scripts/debian-fetch.sh into $HVKIT_DEBIAN_CACHE (default OUT/../debian-cache).
# Outputs in OUT: vmlinuz, initrd.img, append.txt (the guest's command line) and
# bundle.cpio (the three, for l1-qemu.sh). MODES: the module's hvkit= values, comma-separated
# (l2-init.sh): 0 for KVM, 1,2 for the hvkit hypervisor. Exit 77 when a package or tool is missing.
set -euo pipefail
[ $# -eq 6 ] || { echo "usage: $0 OUT FORKS ITERS PAIRS SYM MODES" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1" && out=$(cd "$1" && pwd)
forks=$2 iters=$3 pairs=$4 sym=$5 modes=$6
cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$out")/debian-cache}
skip() { echo "HVKIT-RUN SKIP: $*"; exit 77; }
for t in apt-get dpkg-deb gcc make ldd; do command -v $t >/dev/null || skip "$t not installed"; done
fetch() { bash "$root/scripts/debian-fetch.sh" "$cache" "$@" || { [ $? = 3 ] && skip "Debian package not available: $*"; exit 1; }; }
image_pkg=$(fetch linux-image-cloud-amd64 | tail -1)
fetch busybox-static rt-tests >/dev/null
abi=${image_pkg#linux-image-}
kver=${abi%-cloud-amd64}
fetch "linux-headers-$abi" "linux-headers-$kver-common" "linux-kbuild-$(echo "$kver" | cut -d. -f1,2)" >/dev/null
hdr=$cache/root/usr/src/linux-headers-$abi
# Debian's header Makefile includes the common tree by its installed path: the unpacked copy.
sed -i "s|^include .*/usr/src/\(linux-headers-[^/]*-common\)/Makefile|include $cache/root/usr/src/\1/Makefile|" "$hdr/Makefile"

if [ ! -f "$out/hvkit_kernexec.ko" ] || [ "$here/module/hvkit_kernexec.c" -nt "$out/hvkit_kernexec.ko" ]; then
  rm -rf "$out/module" && cp -r "$here/module" "$out/module"
  cc=gcc; command -v gcc-12 >/dev/null && cc=gcc-12
  make -C "$hdr" M="$out/module" CC=$cc modules >"$out/module.log" 2>&1 ||
    { tail -20 "$out/module.log" >&2; echo "build-guest: module build failed" >&2; exit 1; }
  cp "$out/module/hvkit_kernexec.ko" "$out/hvkit_kernexec.ko"
fi

rfs=$out/rootfs
rm -rf "$rfs"
mkdir -p "$rfs"/{bin,sbin,usr/bin,etc,proc,sys,dev,tmp,lib/modules,lib64}
cp "$cache/root/bin/busybox" "$rfs/bin/busybox"
for a in $("$rfs/bin/busybox" --list); do [ "$a" = busybox ] || ln -s busybox "$rfs/bin/$a"; done
ssdd=$cache/root/usr/bin/ssdd
cp "$ssdd" "$rfs/usr/bin/ssdd"
for l in $(ldd "$ssdd" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u); do
  mkdir -p "$rfs$(dirname "$l")" && cp -L "$l" "$rfs$l"
done
cp "$out/hvkit_kernexec.ko" "$rfs/lib/modules/"
gcc -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie -O2 -Wall -Wextra -Werror \
  -o "$rfs/bin/tscmark" "$root/examples/linux-baseline/tscmark.c"
install -m 755 "$here/l2-init.sh" "$rfs/init"
printf 'FORKS=%s\nITERS=%s\nPAIRS=%s\nSYM=%s\nMODES="%s"\n' "$forks" "$iters" "$pairs" "$sym" "${modes//,/ }" >"$rfs/etc/ssdd.conf"
if command -v lz4 >/dev/null; then
  (cd "$rfs" && find . | LC_ALL=C sort | "$rfs/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) | lz4 -l -9 -q -f - "$out/initrd.img"
else
  (cd "$rfs" && find . | LC_ALL=C sort | "$rfs/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -9 >"$out/initrd.img"
fi
cp "$cache/root/boot/vmlinuz-$abi" "$out/vmlinuz"
echo "console=ttyS0 quiet mitigations=off panic=-1" >"$out/append.txt"
(cd "$out" && printf 'vmlinuz\ninitrd.img\nappend.txt\n' | "$rfs/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) >"$out/bundle.cpio"
echo "build-guest: $out: kernel $abi, initrd $(stat -c %s "$out/initrd.img") bytes, ssdd --forks=$forks --iters=$iters, kprobe $sym, $pairs WP window(s) per hit, module runs hvkit=$modes" >&2
