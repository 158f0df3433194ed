#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kernel_image.py VMLINUZ VA N: what the kernel package says is at virtual address VA.

Unpacks the bzImage's compressed payload (the vmlinux ELF; LZ4 legacy, gzip, xz or zstd,
found by its magic, unpacked with the matching command-line tool), finds the PT_LOAD
segment holding VA and prints, on one line: the link-time physical address of VA
(p_paddr + offset: where the kernel runs when not relocated, i.e. with nokaslr) and the
N bytes of the image at VA in hex. This is the oracle independent of the guest and of hvkit.
"""
import struct
import subprocess
import sys

MAGICS = [  # (magic, command that unpacks stdin to stdout)
    (b"\x02\x21\x4c\x18", ["lz4", "-dc"]),
    (b"\x1f\x8b\x08", ["gzip", "-dc"]),
    (b"\xfd7zXZ\x00", ["xz", "-dc"]),
    (b"\x28\xb5\x2f\xfd", ["zstd", "-dc"]),
]


def vmlinux(path):
  z = open(path, "rb").read()
  for magic, cmd in MAGICS:
    at = z.find(magic)
    while at != -1:
      # Trailing data after the stream makes some tools complain: keep what they produced.
      out = subprocess.run(cmd, input=z[at:], capture_output=True).stdout
      if out[:4] == b"\x7fELF":
        return out
      at = z.find(magic, at + 1)
  sys.exit("kernel_image: no compressed vmlinux ELF found in " + path)


def main():
  if len(sys.argv) != 4:
    sys.exit(__doc__)
  elf = vmlinux(sys.argv[1])
  va, n = int(sys.argv[2], 0), int(sys.argv[3], 0)
  phoff, = struct.unpack_from("<Q", elf, 32)
  phentsize, phnum = struct.unpack_from("<HH", elf, 54)
  for i in range(phnum):
    p_type, _, off, vaddr, paddr, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", elf, phoff + i * phentsize)
    if p_type == 1 and vaddr <= va and va + n <= vaddr + filesz:
      at = off + (va - vaddr)
      print("0x%016x %s" % (paddr + (va - vaddr), elf[at:at + n].hex()))
      return
  sys.exit("kernel_image: 0x%x is in no PT_LOAD segment" % va)


if __name__ == "__main__":
  main()
