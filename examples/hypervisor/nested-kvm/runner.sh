# SPDX-License-Identifier: MIT
# examples/hypervisor/nested-kvm/runner.sh: the --nested-kvm-in-bochs and
# --nested-kvm-amd-in-bochs modes of examples/hypervisor/run (sourced by it; uses its
# variables: here, build_dir, kernel, serial, timeout_s, quiet, verbose, nested_kvm_model).
#
# Layers, outermost first:
#   L0  Bochs 2.7: an Intel CPU model with VMX and EPT (corei7_skylake_x), or an AMD one
#       with SVM and nested paging (zambezi)                      tag "L0 bochs"
#   L1  Debian's Linux with kvm_intel nested=1 or kvm_amd nested=1 npt=1 (the same image:
#       /init loads the module of the CPU's vendor), QEMU as its VMM
#                                                                 tags "L1 init", "L1 qemu", "L1 kernel"
#   L2  the hvkit reference hypervisor (QEMU's KVM guest)         tag "L2 hvkit"
#   L3  its guests (conformance guest, 32-bit guest, guest B)      tag "L3 guest"
# Channels: /init relays QEMU's COM1 (the hypervisor's console) and its own lines
# ("HVKIT-L1 ...") to port 0xE9, which Bochs prints on its stdout; the L1 kernel console
# is the outer COM1 (a file). The runner timestamps every stdout line on arrival.

nested_kvm_default_timeout=1200   # whole Bochs run; ~3 min on an idle 2-core machine

# The L0 CPU model's vendor and virtualization extension, for the messages and the report.
nested_kvm_l0() {
  case $nested_kvm_model in
    zambezi|trinity_apu|ryzen) echo "$nested_kvm_model, SVM+NPT" ;;
    *) echo "$nested_kvm_model, VMX+EPT" ;;
  esac
}

nested_kvm_check_tools() {
  command -v bochs >/dev/null || skip "bochs not installed (apt-get install bochs bochsbios vgabios bochs-term)"
  command -v grub-mkrescue >/dev/null && command -v xorriso >/dev/null ||
    skip "grub-mkrescue/xorriso not installed (apt-get install grub-pc-bin grub-common xorriso mtools)"
  command -v qemu-system-x86_64 >/dev/null ||
    skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86): the KVM host image carries the machine's QEMU"
}

# Tags one line of Bochs' stdout with its layer.
nested_kvm_layer() {
  case $1 in
    HVKIT-L1\ qemu:*) echo "L1 qemu" ;;
    HVKIT-L1\ *) echo "L1 init" ;;
    HVKIT\ *) echo "L2 hvkit" ;;
    guest:*) echo "L3 guest" ;;
    *) echo "L0 bochs" ;;
  esac
}

# Where a run's artifacts go: the image directory itself for the default Intel model (as
# before AMD runs existed), DIR/nested-kvm-MODEL for any other model, so that an Intel and
# an AMD run in one build directory share the image but keep their own logs.
nested_kvm_rundir() {
  if [ "$nested_kvm_model" = corei7_skylake_x ]; then echo "$build_dir/nested-kvm"
  else echo "$build_dir/nested-kvm-$nested_kvm_model"
  fi
}

nested_kvm_boot() {
  local nk=$build_dir/nested-kvm rd
  rd=$(nested_kvm_rundir)
  mkdir -p "$rd" || die "cannot create $rd"
  # Shared with the Linux guest runs (linux/build-image.sh): the same cloud kernel, fetched once.
  local cache=${HVKIT_DEBIAN_CACHE:-$(dirname "$build_dir")/debian-cache}
  note "building the KVM host image (Debian packages cached in $cache)"
  # One image for both vendors (/init picks kvm_intel or kvm_amd): an Intel and an AMD run with
  # the same build directory build it once.
  bash "$here/nested-kvm/build-image.sh" "$nk" "$cache" "$kernel"
  case $? in
    0) ;;
    77) skip "the KVM host image cannot be built here (see the build-image line above)" ;;
    *) die "building the KVM host image failed" ;;
  esac
  local bios=/usr/share/bochs/BIOS-bochs-latest vgabios=/usr/share/vgabios/vgabios.bin
  [ -f "$vgabios" ] || vgabios=/usr/share/bochs/VGABIOS-lgpl-latest
  sed -e "s|@ISO@|$nk/kvm-host.iso|" -e "s|@SERIAL@|$rd/l1-console.log|" -e "s|@LOG@|$rd/bochs.log|" \
      -e "s|@BIOS@|$bios|" -e "s|@VGABIOS@|$vgabios|" -e "s|@CPU_MODEL@|$nested_kvm_model|" \
      "$here/nested-kvm/bochsrc.in" >"$rd/bochsrc"
  # The debugger (compiled into Debian's Bochs) stops before the first instruction: continue.
  # The run ends when /init writes "Shutdown" to port 0x8900 (Bochs exits with status 1).
  printf 'c\nquit\n' >"$rd/bochs.rc"
  rm -f "$rd/l1-console.log" "$rd/stream.log" "$rd/layers.log"
  note "booting the KVM host under Bochs ($(nested_kvm_l0), 2 GiB), time budget ${timeout_s}s"
  local t0=${EPOCHREALTIME/./} line ms
  (cd "$rd" && TERM=dumb timeout --kill-after=10 "$timeout_s" \
     bochs -q -f "$rd/bochsrc" -rc "$rd/bochs.rc" </dev/null 2>&1; echo "HVKIT-NK-STATUS $?") |
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%$'\r'}
    ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    printf '%s %s\n' "$ms" "$line" >>"$rd/stream.log"
    if [ "$quiet" != 1 ]; then
      case $line in
        HVKIT-L1\ *) printf '  [%6.1fs] %-9s %s\n' "$(bc_div "$ms")" "$(nested_kvm_layer "$line")" "${line#HVKIT-L1 }" ;;
        "HVKIT BOOT"*|"HVKIT DONE"*|"HVKIT SUMMARY"*|"HVKIT ERROR"*) printf '  [%6.1fs] %-9s %s\n' "$(bc_div "$ms")" "L2 hvkit" "$line" ;;
      esac
    fi
  done
  emu_rc=$(sed -n 's/^[0-9]* HVKIT-NK-STATUS //p' "$rd/stream.log" | tail -1)
  emu_rc=${emu_rc:-1}
  emu_log=$rd/bochs.log
  # The hypervisor's own serial stream (L2 and L3 lines), for the common summary.
  sed -n -E 's/^[0-9]+ (HVKIT [A-Z]|guest:)/\1/p' "$rd/stream.log" >"$serial"
}

bc_div() { printf '%d.%d' $(( $1 / 1000 )) $(( ($1 % 1000) / 100 )); }

# Stage times, layer counts and the L1 evidence; prints before the common summary.
nested_kvm_report() {
  local nk
  nk=$(nested_kvm_rundir)
  [ -f "$nk/stream.log" ] || return 0
  : >"$nk/layers.log"
  local ms line tag
  while read -r ms line; do
    case $line in HVKIT-NK-STATUS*) continue ;; esac
    tag=$(nested_kvm_layer "$line")
    printf '%8s %-9s %s\n' "$(bc_div "$ms")" "$tag" "$line" >>"$nk/layers.log"
  done <"$nk/stream.log"
  if [ -f "$nk/l1-console.log" ]; then
    tr -d '\r' <"$nk/l1-console.log" | sed 's/^/       - L1 kernel /' >>"$nk/layers.log"
  fi
  local ext=+vmx
  case $(nested_kvm_l0) in *SVM*) ext=+svm ;; esac
  awk -v verbose="$verbose" -v nk="$nk" -v timeout_s="$timeout_s" -v emu_rc="$emu_rc" \
      -v l0="$(nested_kvm_l0)" -v ext="$ext" '
    function sec(ms) { return sprintf("%.1f", ms / 1000) }
    function upt(line,   m) { if (match(line, /uptime=[0-9.]+/)) return substr(line, RSTART + 7, RLENGTH - 7); return "" }
    { ms = $1; line = substr($0, length($1) + 2); last = ms }
    line ~ /^HVKIT-NK-STATUS/ { next }
    line ~ /^HVKIT-L1 init / && t_init == "" { t_init = ms; u_init = upt(line) }
    line ~ /^HVKIT-L1 kvm_(intel|amd) / && t_kvm == "" { t_kvm = ms; kvm_line = substr(line, 10); kvm_mod = $3; sub(/_/, "-", kvm_mod) }
    line ~ /^HVKIT-L1 insmod kvm-(intel|amd)/ { u_kvm = upt(line) }
    line ~ /^HVKIT-L1 qemu start/ && t_qemu == "" { t_qemu = ms; u_qemu = upt(line) }
    line ~ /^HVKIT BOOT/ && t_boot == "" { t_boot = ms }
    line ~ /^HVKIT DONE/ && t_done == "" { t_done = ms }
    line ~ /^HVKIT-L1 qemu exit/ && t_exit == "" { t_exit = ms; u_exit = upt(line); qemu_exit = line }
    line ~ /^HVKIT-L1 (FAIL|dmesg)/ { l1note[++nl1] = substr(line, 10) }
    line ~ /^HVKIT-L1 / { n["L1"]++; next }
    line ~ /^HVKIT / { n["L2"]++; next }
    line ~ /^guest:/ { n["L3"]++; next }
    { n["L0"]++ }
    END {
      print ""
      print "nested KVM in Bochs: layers and stages"
      print "  L0 Bochs 2.7 (" l0 ") > L1 Linux KVM (" (kvm_line != "" ? kvm_line : "module not loaded") ")"
      print "  > QEMU -enable-kvm -cpu host," ext " (examples/hypervisor/qemu-kvm.sh) > L2 hvkit hypervisor > L3 its guests"
      printf "  lines by layer: L0 bochs %d, L1 KVM host %d, L2 hvkit %d, L3 guests %d (tagged transcript: %s/layers.log)\n", n["L0"], n["L1"], n["L2"], n["L3"], nk
      print "  stage                                       wall s (host)   L1 uptime s (emulated)"
      printf "  %-44s %-15s %s\n", "Linux boot (Bochs start to /init)", (t_init != "" ? sec(t_init) : "-"), u_init
      printf "  %-44s %-15s %s\n", "KVM load (irqbypass, kvm, " (kvm_mod != "" ? kvm_mod : "kvm-intel/amd") ")", (t_kvm != "" && t_init != "" ? sec(t_kvm - t_init) : "-"), (u_kvm != "" && u_init != "" ? sprintf("%.2f", u_kvm - u_init) : "")
      printf "  %-44s %-15s\n", "QEMU start to the hypervisor'"'"'s first line", (t_boot != "" && t_qemu != "" ? sec(t_boot - t_qemu) : "-")
      printf "  %-44s %-15s %s\n", "hypervisor run (first line to DONE)", (t_done != "" && t_boot != "" ? sec(t_done - t_boot) : "-"), (u_exit != "" && u_qemu != "" ? sprintf("%.2f (QEMU start to exit)", u_exit - u_qemu) : "")
      printf "  %-44s %-15s\n", "whole Bochs run", sec(last)
      for (i = 1; i <= nl1; i++) print "  L1: " l1note[i]
      if (t_done == "") {
        stage = (t_init == "" ? "Linux boot" : t_kvm == "" ? "KVM load" : t_boot == "" ? "QEMU start" : "hypervisor run")
        if (emu_rc == 124 || emu_rc == 137)
          print "  TIME BUDGET EXCEEDED: " timeout_s " s were not enough; the run was stopped in stage \"" stage "\" (raise it with --timeout SECONDS or HVKIT_HV_TIMEOUT)"
        else
          print "  the run did not finish: it ended in stage \"" stage "\" (Bochs exit status " emu_rc "; see the L1 lines above and " nk "/bochs.log)"
      }
    }' "$nk/stream.log"
}
