#!/usr/bin/env bash
# Flash and static RAM of every firmware program (llvm-size, from rustup's llvm-tools),
# checked against the budgets below, plus the engine's own code size.
#
#   bash size-report.sh [OUT]     # builds nothing; run `cargo build --release` first
#
# The engine-code lines also report the size-first build when it is there:
#   cargo build --release --features small-kernels --target-dir target/small-kernels \
#       --bin w1_train_size --bin kernel_bench --bin fault
#
# Flash = text + data (cortex-m-rt puts .vector_table, .text, .rodata in "text");
# static RAM = data + bss (the stack comes on top: it grows down from the end of RAM).
# Two checks per size: the hard limit in the table below (what the program must fit) and
# the budget in size-budget.txt (today's size, checked in): a size more than 2% past its
# budget fails, so that growth is a decision (raise the budget in the same change and
# say why), not an accident. Budgets that are goals (issue 41) replace today's figures
# once they are met.
# Writes the report to OUT (default size-report.txt) and exits 1 when a check fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${1:-size-report.txt}
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/host: //p')/bin"
size="$bin/llvm-size"
nm="$bin/llvm-nm"
[ -x "$size" ] || { echo "llvm-size missing: rustup component add llvm-tools" >&2; exit 1; }

# program target flash-limit ram-limit [profile] (bytes; '-' = no limit; profile
# default release: finetune_m0 is built at m0-size, opt-level "z", see Cargo.toml)
programs=(
    "w1_step thumbv7em-none-eabihf 131072 -"
    "w1_train_size thumbv7em-none-eabihf 131072 -"
    "finetune thumbv7em-none-eabihf 139264 -"
    "finetune_model thumbv7em-none-eabihf 278528 -"
    "bad_input thumbv7em-none-eabihf 139264 -"
    "kernel_bench thumbv7em-none-eabihf 131072 -"
    "finetune_m0 thumbv6m-none-eabi 69632 16384 m0-size"
)
# Raised on 2026-12-01, openly: finetune from 128 to 136 KiB and finetune_m0 from 64 to
# 68 KiB of flash. Issue 38's checks (the plan's MAC count in every op, the planner's
# logarithmic searches, plan_inference, the optimizers' float checks) grew them to
# 131,548 and 66,664 bytes (64,988 before); the micro:bit's nRF51 has 256 KiB, the 64 KiB
# was this project's own goal, and issue 41 ("Footprint") is to bring finetune_m0 back
# under 60 KiB (4 KiB of 64 free).
# Raised on 2026-12-02, openly: finetune_model from 256 to 272 KiB and bad_input from
# 128 to 136 KiB. Issue 43's ops (broadcasting add/sub/mul/div; silu, slice,
# channel_shuffle, unsqueeze, squeeze in the registry, which finetune_model links
# whole) grew finetune_model from 261,592 to 272,400 bytes (552 bytes under its old
# budget before) and bad_input from 129,496 to 131,668 (its add and mul broadcast);
# by symbol: the four binary ops and their rules 8.0 KB, the broadcast walk 2.8 KB,
# slice 2.3 KB, channel_shuffle 1.5 KB, silu 1.0 KB, squeeze/unsqueeze 0.9 KB. The
# board has 4 MiB of flash; issue 41 ("Footprint") is to cut what programs that look
# no op up by name pay for the registry.
# finetune_m0 (Cortex-M0, micro:bit): RAM = data + bss + the stack's painted high-water
# mark, read from the program's own log (target/qemu-finetune_m0.log, written by
# .ci/stages/50-firmware.sh), and enforced, like its 64 KiB flash budget. Every M4F
# program has the one 128 KiB budget but finetune_model, 256 KiB: it runs any model by
# op name, so it links every op's forward and backward (the board has 4 MiB of flash).
m0_log=${M0_LOG:-target/qemu-finetune_m0.log}
budgets=size-budget.txt
# The budget of NAME (a program's flash or ram, or an engine-code line), '-' if none.
budget() { awk -v k="$1" '$1==k{print $2; f=1} END{if(!f) print "-"}' "$budgets"; }
# "ok" or why SIZE is more than 2% past BUDGET.
growth() { # SIZE BUDGET
    awk -v n="$1" -v b="$2" 'BEGIN { if (b != "-" && n * 100 > b * 102)
        printf "GREW %.1f%% past budget %d\n", (n / b - 1) * 100, b; else print "ok" }'
}

{
    echo "# torchlet firmware sizes: release profile (opt-level \"s\", fat LTO, panic abort);"
    echo "# finetune_m0 at profile m0-size (the same with opt-level \"z\")"
    echo "# made by firmware/size-report.sh with llvm-size; flash = text + data, RAM = data + bss"
    echo "# (+ the painted stack high-water for thumbv6m, from the program's log)"
    printf '%-14s %-22s %9s %9s %12s %10s  %s\n' program target flash ram flash-limit ram-limit verdict
    for p in "${programs[@]}"; do
        read -r name target fbud rbud prof <<<"$p"
        prof=${prof:-release}
        elf="target/$target/$prof/$name"
        [ -f "$elf" ] || { echo "missing $elf (cargo build --profile $prof --target $target)" >&2; exit 1; }
        read -r text data bss _ < <("$size" "$elf" | tail -n 1)
        flash=$((text + data)) ram=$((data + bss)) verdict=ok
        if [ "$target" = thumbv6m-none-eabi ]; then
            stack=$(sed -n 's/.*stack high-water \([0-9]*\) bytes = .*/\1/p' "$m0_log" 2>/dev/null | tail -n 1)
            if [ -z "$stack" ]; then
                verdict="STACK NOT MEASURED (run the program first: $m0_log)"
            else
                ram=$((ram + stack))
            fi
        fi
        for k in flash ram; do
            g=$(growth "${!k}" "$(budget "$name.$k")")
            [ "$g" = ok ] || verdict="$k $g"
        done
        if [ "$fbud" != - ] && [ "$flash" -ge "$fbud" ]; then verdict="OVER FLASH BUDGET"; fi
        if [ "$rbud" != - ] && [ "$ram" -ge "$rbud" ]; then verdict="OVER RAM BUDGET"; fi
        printf '%-14s %-22s %9d %9d %12s %10s  %s\n' "$name" "$target" "$flash" "$ram" "$fbud" "$rbud" "$verdict"
    done
    echo
    echo "# Engine code, without weights or sample data: w1_train_size (the smallest program"
    echo "# that trains W1: init, meta plan, forward with W1's ops only, cross-entropy, backward,"
    echo "# SGD, errors; plus boot, defmt and exit) minus fault (the same boot, defmt, exit)."
    sec() { "$size" -A "$1" | awk -v s="$2" '$1==s{print $2}'; }
    engine() { # DIR LABEL KEY
        local a="$1/w1_train_size" f="$1/fault" s n
        for s in .text .rodata; do
            n=$(($(sec "$a" $s) - $(sec "$f" $s)))
            echo "$2 $s: w1_train_size $(sec "$a" $s), fault $(sec "$f" $s), engine $n bytes: $(growth "$n" "$(budget "engine$s.$3")")"
        done
    }
    engine target/thumbv7em-none-eabihf/release "default (M-profile conv kernels)" default
    small=target/small-kernels/thumbv7em-none-eabihf/release
    if [ -f "$small/w1_train_size" ] && [ -f "$small/fault" ]; then
        engine "$small" "feature small-kernels (generic conv kernels)" small-kernels
    else
        echo "feature small-kernels: not built (see the head of size-report.sh)"
    fi
} | tee "$out"
# The block above runs in a subshell (it is piped): its verdicts are read back from the report.
if grep -Eq 'OVER FLASH BUDGET|OVER RAM BUDGET|NOT MEASURED|GREW' "$out"; then
    echo "FAIL: a firmware size is over its limit or grew more than 2% past its budget in $budgets (see $out)" >&2
    exit 1
fi
