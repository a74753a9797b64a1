#!/usr/bin/env bash
# Regenerates the device results: builds the firmware programs, runs each in QEMU
# (qemu.sh, the cargo runner) and writes what they print, with the command of each, the
# date, the commit and the QEMU version, to RESULTS.md.
#
#   bash results.sh           # rewrites RESULTS.md (about 1 min of QEMU after the builds)
#   bash results.sh OUT       # writes OUT instead (for example target/RESULTS.md)
#
# Every figure is a program's own output (per-step lines are left out; the full logs
# stay in target/results/). Fails if a program fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${1:-RESULTS.md}
eval "$(bash ../.ci/install.sh env)"
logs=target/results
mkdir -p "$logs"

m0=(m0_determinism m0_kernel_cost m0_frozen_q16 m0_frozen_q8)
echo "--- builds" >&2
cargo build --release -q
cargo build --release -q --features small-kernels --target-dir target/small-kernels \
    --bin w1_train_size --bin kernel_bench --bin fault
cargo build --profile m0-size -q --target thumbv6m-none-eabi --bin finetune_m0
cargo build --release -q --features ram64k,small-kernels --target-dir target/ram64k --bin finetune_w2 --bin finetune_w2_int8
cargo build --profile m0-bench -q --target thumbv6m-none-eabi --features mps2-an385 "${m0[@]/#/--bin=}"

# run NAME ELF: runs the program, keeps its log in $logs/NAME.log, fails unless it exits 0.
run() {
    local name=$1 elf=$2 rc=0
    echo "--- $name" >&2
    bash qemu.sh "$elf" >"$logs/$name.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        cat "$logs/$name.log" >&2
        echo "FAIL: $name exited with status $rc" >&2
        exit 1
    fi
}
m4=target/thumbv7em-none-eabihf/release
run finetune $m4/finetune
run finetune_model $m4/finetune_model
run finetune_w2 target/ram64k/thumbv7em-none-eabihf/release/finetune_w2
run finetune_w2_int8 target/ram64k/thumbv7em-none-eabihf/release/finetune_w2_int8
run w1_step $m4/w1_step
run kernel_bench $m4/kernel_bench
run w1_train_size $m4/w1_train_size
run kernel_bench-small target/small-kernels/thumbv7em-none-eabihf/release/kernel_bench
run finetune_m0 target/thumbv6m-none-eabi/m0-size/finetune_m0
for b in "${m0[@]}"; do run "$b" "target/thumbv6m-none-eabi/m0-bench/$b"; done
echo "--- size-report.sh" >&2
M0_LOG=$logs/finetune_m0.log bash size-report.sh "$logs/size-report.txt" >&2

# section TITLE COMMAND LOG: a heading, the command, and the log without per-step lines
# and without defmt's timestamp and level columns.
section() {
    printf '\n## %s\n\n`%s`\n\n```text\n' "$1" "$2"
    grep -vE ' step [0-9]+ ' "$3" | sed -E 's/^[0-9]+ +(INFO|WARN|ERROR) +//'
    printf '```\n'
}
tmp=$(mktemp)
{
    echo "# torchlet on the device: measured results"
    echo
    dirty=$(git diff --quiet HEAD -- .. 2>/dev/null || echo ' with uncommitted changes')
    echo "Written by \`firmware/results.sh\` on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD)$dirty."
    echo "$(qemu-system-arm --version | head -n 1); $(rustc --version)."
    echo "Each section is what one program printed (per-step lines left out); the commands"
    echo "run from \`firmware/\`. Instruction counts are SysTick under QEMU \`-icount shift=6\`"
    echo "(README.md: Counting instructions): instructions, not cycles, identical run to run."
    section "Fine-tuning on the Cortex-M4F (f32)" \
        "cargo run --release --bin finetune" "$logs/finetune.log"
    section "Fine-tuning a network from a model file on the Cortex-M4F (f32; W1 from PyTorch via ONNX)" \
        "cargo run --release --bin finetune_model" "$logs/finetune_model.log"
    section "Fine-tuning W2 (mobile-fcn) in 64 KiB of RAM on the Cortex-M4F (f32; biases + classifier)" \
        "cargo run --release --features ram64k,small-kernels --target-dir target/ram64k --bin finetune_w2" \
        "$logs/finetune_w2.log"
    section "The same with int8 convolution weights read in place from flash" \
        "cargo run --release --features ram64k,small-kernels --target-dir target/ram64k --bin finetune_w2_int8" \
        "$logs/finetune_w2_int8.log"
    section "One W1 training step on the Cortex-M4F" \
        "cargo run --release --bin w1_step" "$logs/w1_step.log"
    section "f32 conv kernels on the Cortex-M4F: instructions per MAC" \
        "cargo run --release --bin kernel_bench" "$logs/kernel_bench.log"
    section "The same with the size-first kernels (feature small-kernels)" \
        "cargo run --release --features small-kernels --target-dir target/small-kernels --bin kernel_bench" \
        "$logs/kernel_bench-small.log"
    section "The smallest W1 training program (engine code size)" \
        "cargo run --release --bin w1_train_size" "$logs/w1_train_size.log"
    section "Fine-tuning on the Cortex-M0 (Q16.16) in 16 KiB of RAM" \
        "cargo run --profile m0-size --target thumbv6m-none-eabi --bin finetune_m0" "$logs/finetune_m0.log"
    for b in "${m0[@]}"; do
        case "$b" in
            m0_determinism) title="Fixed-point determinism run on the Cortex-M0 (hash shared with x86_64 and wasm32)" ;;
            m0_kernel_cost) title="Conv kernels on the Cortex-M0: soft-float f32 against Q16.16" ;;
            m0_frozen_q16) title="Frozen W1 trunk on the Cortex-M0, Q16.16 weights" ;;
            m0_frozen_q8) title="Frozen W1 trunk on the Cortex-M0, int8 weights" ;;
        esac
        section "$title" \
            "cargo run --profile m0-bench --target thumbv6m-none-eabi --features mps2-an385 --bin $b" \
            "$logs/$b.log"
    done
    printf '\n## Flash and RAM against the budgets\n\n`bash size-report.sh` (after the builds above)\n\n```text\n'
    cat "$logs/size-report.txt"
    printf '```\n'
} >"$tmp"
mv "$tmp" "$out"
echo "wrote $out" >&2
