#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-image.sh OUT_DIR CACHE_DIR KERNEL_BIN
# Builds the KVM host image that `examples/hypervisor/run --nested-kvm-in-bochs` boots under
# Bochs: OUT_DIR/kvm-host.iso, a GRUB CD with Debian 12's cloud kernel and an initramfs
# holding busybox, irqbypass.ko / kvm.ko and both vendors' modules, kvm-intel.ko and
# kvm-amd.ko (one image for Intel and AMD CPU models: /init loads the one whose extension
# /proc/cpuinfo shows; kvm-amd depends on kvm only), qemu-system-x86_64 with exactly the
# shared libraries `ldd` lists and the firmware it loads, the hypervisor's KERNEL_BIN, the
# shared QEMU command line (../qemu-kvm.sh), l1tool and /init.
#
# Packages: the kernel and busybox-static are fetched with scripts/debian-fetch.sh into
# CACHE_DIR (apt-get download + dpkg-deb -x, never installed); QEMU is the machine's own
# qemu-system-x86_64 (scripts/packages.txt installs qemu-system-x86), copied with its
# libraries and firmware. The image is rebuilt only when an input changed (OUT_DIR/image.stamp).
# Exit status: 0 built or reused; 77 a package or tool is missing (message on stderr);
# 1 anything else.
# Exit-cost mode (examples/exit-cost/run-kvm.sh): with HVKIT_EXIT_COST_VMM and
# HVKIT_EXIT_COST_GUEST set (the exit_cost_vmm program and the flat exit-cost guest), both
# go into /hvkit/ and the kernel command line gets hvkit.mode=exit-cost: /init then runs the
# VMM on the guest instead of QEMU. Use another OUT_DIR for that image. HVKIT_NK_KVM_OPTS
# (e.g. "ept=0") adds hvkit.kvm_opts=... to the command line: /init appends those options
# (commas become spaces) to the kvm-intel / kvm-amd insmod.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 OUT_DIR CACHE_DIR KERNEL_BIN" >&2; exit 2; }
out=$1 cache=$2 hv_kernel=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd)
cache=$(cd "$cache" && pwd)
skip() { echo "build-image: $*" >&2; exit 77; }
log() { echo "build-image: $*" >&2; }

for t in grub-mkrescue xorriso g++ ldd; do command -v $t >/dev/null || skip "$t not installed"; done
qemu=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
[ -f "$hv_kernel" ] || { echo "build-image: no hypervisor kernel at $hv_kernel" >&2; exit 1; }

# ---- packages (cached) ---------------------------------------------------------------------
set +e
pkgs=$(bash "$root/scripts/debian-fetch.sh" "$cache" linux-image-cloud-amd64 busybox-static)
rc=$?
set -e
[ $rc -eq 0 ] || { [ $rc -eq 3 ] && skip "Debian packages could not be fetched (see above)"; exit 1; }
kpkg=$(echo "$pkgs" | grep '^linux-image-') || exit 1
kver=${kpkg#linux-image-}
vmlinuz=$cache/root/boot/vmlinuz-$kver
config=$cache/root/boot/config-$kver
moddir=$cache/root/lib/modules/$kver/kernel
busybox=$cache/root/bin/busybox
kmods=("$moddir/virt/lib/irqbypass.ko" "$moddir/arch/x86/kvm/kvm.ko" "$moddir/arch/x86/kvm/kvm-intel.ko"
       "$moddir/arch/x86/kvm/kvm-amd.ko")
for f in "$vmlinuz" "$config" "$busybox" "${kmods[@]}"; do
  [ -f "$f" ] || { echo "build-image: missing $f in the unpacked packages" >&2; exit 1; }
done

# An lz4 initramfs reaches /init much sooner under Bochs than gzip (decompression is emulated).
if grep -q '^CONFIG_RD_LZ4=y' "$config" && command -v lz4 >/dev/null; then
  compress=(lz4 -l -9 -q); comp=lz4
else
  compress=(gzip -9); comp=gzip
fi

# QEMU's firmware: SeaBIOS and the option ROMs QEMU loads for -kernel (multiboot).
firmware=(/usr/share/seabios/bios.bin /usr/share/seabios/bios-256k.bin)
for f in kvmvapic.bin linuxboot.bin linuxboot_dma.bin multiboot.bin multiboot_dma.bin pvh.bin; do
  firmware+=("/usr/share/qemu/$f")
done
for f in "${firmware[@]}"; do [ -e "$f" ] || skip "QEMU firmware $f not installed (qemu-system-data, seabios)"; done
libs=$(ldd "$qemu" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)

cmdline="console=ttyS0 quiet mitigations=off panic=0"
exit_cost=()
if [ -n "${HVKIT_EXIT_COST_VMM:-}" ] || [ -n "${HVKIT_EXIT_COST_GUEST:-}" ]; then
  exit_cost=("${HVKIT_EXIT_COST_VMM:?}" "${HVKIT_EXIT_COST_GUEST:?}")
  for f in "${exit_cost[@]}"; do [ -f "$f" ] || { echo "build-image: no $f" >&2; exit 1; }; done
  cmdline="$cmdline hvkit.mode=exit-cost"
fi
# Extra options for the vendor's KVM module (e.g. ept=0), passed by /init to insmod.
[ -z "${HVKIT_NK_KVM_OPTS:-}" ] || cmdline="$cmdline hvkit.kvm_opts=${HVKIT_NK_KVM_OPTS// /,}"

# ---- reuse? --------------------------------------------------------------------------------
stamp=$( { echo "$kpkg $comp $cmdline"; sha256sum "$hv_kernel" "$here/init" "$here/l1tool.cpp" "$here/grub.cfg" \
           "$here/build-image.sh" "$here/../qemu-kvm.sh" "$qemu" "$vmlinuz" $libs ${exit_cost[@]+"${exit_cost[@]}"}; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/kvm-host.iso" ] && [ "$(cat "$out/image.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "reusing $out/kvm-host.iso"
  exit 0
fi

# ---- initramfs ---------------------------------------------------------------------------------
ir=$out/initramfs
rm -rf "$ir" "$out/isoroot" "$out/image.stamp"
mkdir -p "$ir"/{bin,dev,proc,sys,tmp,lib/modules,hvkit,lib64}
cp "$busybox" "$ir/bin/busybox"
for a in $("$busybox" --list); do [ "$a" = busybox ] || ln -s busybox "$ir/bin/$a"; done
cp "${kmods[@]}" "$ir/lib/modules/"
g++ -std=c++20 -static -nostdlib -ffreestanding -fno-exceptions -fno-rtti -fno-asynchronous-unwind-tables \
    -fno-stack-protector -fno-pie -no-pie -O2 -Wall -Wextra -Werror -o "$ir/hvkit/l1tool" "$here/l1tool.cpp"
cp "$here/init" "$ir/init"
cp "$here/../qemu-kvm.sh" "$ir/hvkit/qemu-kvm.sh"
cp "$hv_kernel" "$ir/hvkit/kernel.bin"
chmod 755 "$ir/init" "$ir/hvkit/qemu-kvm.sh"
if [ ${#exit_cost[@]} -eq 2 ]; then
  install -m 755 "${exit_cost[0]}" "$ir/hvkit/exit-cost-vmm"
  install -m 644 "${exit_cost[1]}" "$ir/hvkit/exit-cost-guest.bin"
fi
# qemu-system-x86_64 in /usr/bin (QEMU looks for firmware relative to its binary: ../share/qemu,
# ../share/seabios), its libraries at their own paths (the dynamic loader's default search).
mkdir -p "$ir/usr/bin"
cp "$qemu" "$ir/usr/bin/qemu-system-x86_64"
for l in $libs; do mkdir -p "$ir$(dirname "$l")"; cp -L "$l" "$ir$l"; done
[ -e "$ir/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$ir/lib64/"
for f in "${firmware[@]}"; do mkdir -p "$ir$(dirname "$f")"; cp -L "$f" "$ir$f"; done
(cd "$ir" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | "${compress[@]}" >"$out/initrd.img"

# ---- GRUB CD -----------------------------------------------------------------------------------
mkdir -p "$out/isoroot/boot/grub"
cp "$vmlinuz" "$out/isoroot/boot/vmlinuz"
cp "$out/initrd.img" "$out/isoroot/boot/initrd.img"
sed "s|@CMDLINE@|$cmdline|" "$here/grub.cfg" >"$out/isoroot/boot/grub/grub.cfg"
grub-mkrescue --install-modules="linux normal configfile" --locales= --fonts= --themes= \
  -o "$out/kvm-host.iso" "$out/isoroot" >"$out/grub-mkrescue.log" 2>&1 ||
  { cat "$out/grub-mkrescue.log" >&2; exit 1; }
rm -rf "$out/isoroot"
echo "$stamp" >"$out/image.stamp"
log "built $out/kvm-host.iso: $kpkg, $(du -sm "$ir" | cut -f1) MB initramfs ($comp $(( $(stat -c %s "$out/initrd.img") / 1048576 )) MB), QEMU $("$qemu" --version | head -1)"
