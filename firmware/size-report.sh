#!/usr/bin/env bash
# Flash and static RAM of every firmware program (llvm-size, from rustup's llvm-tools),
# checked against the budgets below, plus the engine's own code size.
#
#   bash size-report.sh [OUT]     # builds nothing; run `cargo build --release` first
#
# Flash = text + data (cortex-m-rt puts .vector_table, .text, .rodata in "text");
# static RAM = data + bss (the stack comes on top: it grows down from the end of RAM).
# Writes the report to OUT (default size-report.txt) and exits 1 when a budget is broken.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${1:-size-report.txt}
bin="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/host: //p')/bin"
size="$bin/llvm-size"
nm="$bin/llvm-nm"
[ -x "$size" ] || { echo "llvm-size missing: rustup component add llvm-tools" >&2; exit 1; }

# program target flash-budget ram-budget (bytes; '-' = no budget)
programs=(
    "w1_step thumbv7em-none-eabihf 131072 -"
    "finetune thumbv7em-none-eabihf 131072 -"
    "bad_input thumbv7em-none-eabihf 163840 -"
    "kernel_bench thumbv7em-none-eabihf 131072 -"
)
# The M0 program joins here once fixed point lands:
#   "NAME thumbv6m-none-eabi 65536 16384"

fail=0
{
    echo "# torchlet firmware sizes: release profile (opt-level \"s\", fat LTO, panic abort)"
    echo "# made by firmware/size-report.sh with llvm-size; flash = text + data, RAM = data + bss"
    printf '%-14s %-22s %9s %9s %12s %10s  %s\n' program target flash ram flash-budget ram-budget verdict
    for p in "${programs[@]}"; do
        read -r name target fbud rbud <<<"$p"
        elf="target/$target/release/$name"
        [ -f "$elf" ] || { echo "missing $elf (cargo build --release --target $target)" >&2; exit 1; }
        read -r text data bss _ < <("$size" "$elf" | tail -n 1)
        flash=$((text + data)) ram=$((data + bss)) verdict=ok
        if [ "$fbud" != - ] && [ "$flash" -ge "$fbud" ]; then verdict="OVER FLASH BUDGET"; fail=1; fi
        if [ "$rbud" != - ] && [ "$ram" -ge "$rbud" ]; then verdict="OVER RAM BUDGET"; fail=1; fi
        printf '%-14s %-22s %9d %9d %12s %10s  %s\n' "$name" "$target" "$flash" "$ram" "$fbud" "$rbud" "$verdict"
    done
    echo
    echo "# Engine code, without weights or sample data:"
    elf=target/thumbv7em-none-eabihf/release/w1_step
    code=$("$size" -A "$elf" | awk '$1==".text"{print $2}')
    ro=$("$size" -A "$elf" | awk '$1==".rodata"{print $2}')
    echo "w1_step (engine + boot + defmt, trains W1, no assets): .text $code bytes, .rodata $ro bytes"
    for name in w1_step finetune; do
        elf="target/thumbv7em-none-eabihf/release/$name"
        eng=$("$nm" -S -C --radix=d "$elf" | awk 'tolower($3) ~ /^[tr]$/ {
            n = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", n)
            if (n ~ /^(<?torchlet::|<f32 as torchlet|libm::)/) s += $2 + 0
        } END {print s + 0}')
        echo "$name: symbols of torchlet and libm (after LTO inlining; a lower bound): $eng bytes"
    done
} | tee "$out"
exit "$fail"
