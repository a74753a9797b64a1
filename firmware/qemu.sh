#!/usr/bin/env bash
# Runs a firmware program in QEMU and decodes its defmt log: the cargo runner of both
# targets (.cargo/config.toml), and what the CI stage and results.sh call.
#
#   bash qemu.sh ELF        # exit status: the program's (semihosting exit; 124 on timeout)
#
# The machine follows the ELF: thumbv7em-none-eabihf runs on mps2-an386 (Cortex-M4F);
# thumbv6m-none-eabi on the micro:bit, or on mps2-an385 when the program was linked for
# its 4 MiB of RAM (feature mps2-an385: the stack starts at the end of RAM). Any
# profile's build (release, m0-size, m0-bench): only the target directory counts.
# -icount shift=6 makes SysTick count instructions (one tick = 0.625 instructions on the
# MPS2 boards, see src/counter.rs); sleep=off lets virtual time run ahead of the wall
# clock (without it a run takes about 40x longer). QEMU_TIMEOUT (seconds, default 600)
# bounds a run, so a program that hangs cannot hang CI.
set -euo pipefail
elf=$1
case "$elf" in
    *thumbv7em-none-eabihf/*) machine=(-machine mps2-an386 -cpu cortex-m4) ;;
    *thumbv6m-none-eabi/*)
        tools="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/host: //p')/bin"
        top=$("$tools/llvm-nm" "$elf" | sed -n 's/^\([0-9a-f]*\) . _stack_start$/\1/p')
        if [ "$top" = 20004000 ]; then machine=(-machine microbit); else machine=(-machine mps2-an385); fi
        ;;
    *) echo "qemu.sh: no board for $elf (expected a path under thumbv7em-none-eabihf/ or thumbv6m-none-eabi/)" >&2
       exit 2 ;;
esac
timeout --foreground "${QEMU_TIMEOUT:-600}" qemu-system-arm "${machine[@]}" -nographic \
    -icount shift=6,sleep=off -semihosting-config enable=on,target=native -kernel "$elf" |
    defmt-print -e "$elf"
