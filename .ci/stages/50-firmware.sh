#!/usr/bin/env bash
# Firmware (firmware/, its own workspace): builds the Cortex-M programs, runs each in
# QEMU under a timeout, checks the exit status and the expected defmt lines, and
# checks flash/RAM against the budgets (firmware/size-report.sh). The M0 programs on
# mps2-an385 (determinism run, kernel cost) run in the stage fixed (40-fixed.sh); here
# they are linted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust qemu defmt
eval "$(bash .ci/install.sh env)"
cd firmware

echo "--- cargo fmt / clippy (firmware workspace)"
cargo fmt -p torchlet-firmware -- --check
cargo clippy --release -q -- -D warnings

echo "--- build (thumbv7em-none-eabihf)"
cargo build --release -q

echo "--- build (the size-first feature small-kernels: w1_train_size, kernel_bench, fault)"
# Its own target dir, so the default programs above are not rebuilt; size-report.sh
# reports its engine code next to the default's.
cargo build --release -q --features small-kernels --target-dir target/small-kernels \
    --bin w1_train_size --bin kernel_bench --bin fault

echo "--- clippy / build (thumbv6m-none-eabi: the Cortex-M0 programs)"
cargo clippy --profile m0-size -q --target thumbv6m-none-eabi --bin finetune_m0 -- -D warnings
cargo clippy --profile m0-bench -q --target thumbv6m-none-eabi --features mps2-an385 --bins -- -D warnings
# finetune_m0 at its own profile m0-size (opt-level "z", Cargo.toml): 64 KiB of flash.
cargo build --profile m0-size -q --target thumbv6m-none-eabi --bin finetune_m0

# run_bin BIN [TARGET [STATUS]]: runs the program in QEMU (qemu.sh, the runner of
# .cargo/config.toml, under a 300 s timeout), keeps the decoded log, fails unless it
# exits with STATUS (default 0).
# With DIR set (a --target-dir), runs DIR's build and logs to target/qemu-$bin$SUFFIX.log;
# with PROFILE set, that profile's build (default release).
run_bin() {
    local bin=$1 target=${2:-thumbv7em-none-eabihf} want=${3:-0}
    local elf="${DIR:-target}/$target/${PROFILE:-release}/$bin" log="target/qemu-$bin${SUFFIX:-}.log" rc=0 t0=$SECONDS
    set +e
    QEMU_TIMEOUT=300 bash qemu.sh "$elf" >"$log" 2>&1
    rc=$?
    set -e
    grep -vE ' step [0-9]+ ' "$log" || true   # per-step lines stay in the log file
    echo "($bin: exit status $rc, $((SECONDS - t0)) s, log $PWD/$log)"
    if [ "$rc" -ne "$want" ]; then
        echo "FAIL: $bin exited with status $rc, expected $want" >&2
        exit 1
    fi
}
# expect BIN REGEX: the log of BIN has a line matching REGEX.
expect() {
    grep -Eq "$2" "target/qemu-$1.log" || { echo "FAIL: $1: no line matching '$2'" >&2; exit 1; }
}

echo "--- w1_step: one W1 training step per W1 case (M4F, mps2-an386)"
run_bin w1_step
expect w1_step 'step batch 1 28x28: loss [0-9.]+, [0-9]+ instructions .*high-water [0-9]+ bytes \(plan [0-9]+\)'
expect w1_step 'step batch 1 12x20: loss [0-9.]+, [0-9]+ instructions'
expect w1_step 'batch 32 28x28 not run: the planner says it does not fit the [0-9]+-byte arena: arena exhausted'
expect w1_step 'PASS w1_step'

echo "--- finetune: on-device fine-tuning on cropped digits (M4F)"
run_bin finetune
expect finetune 'plan [0-9]+x[0-9]+: [0-9]+ arena bytes'
expect finetune 'epoch 1 step 0 [0-9]+x[0-9]+: loss [0-9.]+, [0-9]+ instructions'
expect finetune 'steps whose high-water differed from the plan: 0$'
expect finetune 'heap: 1 allocation\(s\) in total'
expect finetune 'held-out accuracy: before [0-9]+/[0-9]+, after [0-9]+/[0-9]+ \(required: \+[0-9]+ points\)'
expect finetune 'PASS finetune'

echo "--- finetune_model: the same fine-tuning, the network from a model file in flash (M4F)"
# The committed model file is what `torchlet convert` makes of the committed ONNX export.
(cd .. && OUT=firmware/target/w1_pretrained.tlm bash firmware/make_w1_model.sh --convert-only)
cmp target/w1_pretrained.tlm assets/w1_pretrained.tlm ||
    { echo "FAIL: assets/w1_pretrained.tlm is not what make_w1_model.sh --convert-only makes" >&2; exit 1; }
run_bin finetune_model
expect finetune_model 'model file: [0-9]+ bytes of flash \(CRC-32 ok\), 1 inputs, 8 tensors, 11 nodes'
expect finetune_model 'plan 28x28 training step: all parameters train [0-9]+ bytes; classifier only, frozen in RAM [0-9]+ bytes; classifier only, frozen read in place from flash [0-9]+ bytes'
expect finetune_model 'steps whose high-water differed from the plan: 0$'
expect finetune_model 'second run: classifier only, the convolutions frozen and read in place from flash'
expect finetune_model 'model built from the file: 8 parameters, 6 of them read in place from flash'
expect finetune_model 'PASS finetune_model'
# W1 through the model file is W1: the first run (every parameter trains) must print
# finetune's fingerprint, per-step losses, plans, high-water marks and accuracy.
first_run() { sed '/--- second run/q' "target/qemu-$1.log" | sed -E 's/^[0-9]+ +(INFO|WARN|ERROR) +//'; }
same() { # WHAT SED-EXPRESSION
    local a b
    a=$(first_run finetune | sed -nE "$2") b=$(first_run finetune_model | sed -nE "$2")
    [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: finetune_model's $1 differ from finetune's" >&2; exit 1; }
    echo "finetune_model: $1 equal to finetune's ($(printf '%s\n' "$a" | wc -l) lines)"
}
same "weights fingerprint" 's/.*fingerprint (0x[0-9a-f]+).*/\1/p'
same "plans" 's/^(plan [0-9]+x[0-9]+: [0-9]+ arena bytes)$/\1/p'
same "per-step losses and high-water marks" 's/^(epoch [0-9]+ step [0-9]+ [0-9x]+: loss [^,]+), [0-9]+ instructions, (arena .*)$/\1 \2/p'
same "held-out accuracy" 's/^(held-out accuracy: .*)$/\1/p'
expect finetune_model 'held-out accuracy: before [0-9]+/[0-9]+, after [0-9]+/[0-9]+ \(required: \+20 points\)'

echo "--- finetune_w2: W2 (mobile-fcn) from its model file, biases + classifier fine-tuned in 64 KiB of RAM (M4F)"
(cd .. && OUT=firmware/target/w2_pretrained.tlm bash firmware/make_w2_model.sh)
cmp target/w2_pretrained.tlm assets/w2_pretrained.tlm ||
    { echo "FAIL: assets/w2_pretrained.tlm is not what make_w2_model.sh makes" >&2; exit 1; }
# Linked with a 64 KiB RAM region (feature ram64k); the size-first kernels (feature
# small-kernels) keep the convolutions' stack small.
cargo clippy --release -q --features ram64k,small-kernels --target-dir target/ram64k \
    --bin finetune_w2 --bin finetune_w2_int8 -- -D warnings
cargo build --release -q --features ram64k,small-kernels --target-dir target/ram64k \
    --bin finetune_w2 --bin finetune_w2_int8
DIR=target/ram64k run_bin finetune_w2
expect finetune_w2 'model file: [0-9]+ bytes of flash \(CRC-32 ok\), 92 tensors, 45 nodes; training 17 tensors'
expect finetune_w2 'plan 28x28 training step: all parameters train [0-9]+ bytes; biases \+ classifier, the rest read in place from flash, [0-9]+ bytes'
expect finetune_w2 'steps whose high-water differed from the plan: 0$'
expect finetune_w2 'instructions per training step: mean [0-9]+'
expect finetune_w2 'held-out accuracy: before [0-9]+/100, after [0-9]+/100 \(required: \+20 points\)'
expect finetune_w2 'RAM: static [0-9]+ bytes \+ stack high-water [0-9]+ bytes = [0-9]+ of 65536 bytes'
expect finetune_w2 'PASS finetune_w2'

echo "--- finetune_w2_int8: the same with int8 convolution weights read in place from flash (M4F)"
(cd .. && OUT=firmware/target/w2_int8.tlm bash firmware/make_w2_model.sh --int8)
cmp target/w2_int8.tlm assets/w2_int8.tlm ||
    { echo "FAIL: assets/w2_int8.tlm is not what make_w2_model.sh --int8 makes" >&2; exit 1; }
DIR=target/ram64k run_bin finetune_w2_int8
expect finetune_w2_int8 'model file: [0-9]+ bytes of flash \(CRC-32 ok\), 92 tensors, 45 nodes; training 17 tensors'
expect finetune_w2_int8 'plan 28x28 training step: biases \+ classifier, the rest read in place from flash \(15 int8 convolution weights\), [0-9]+ bytes'
expect finetune_w2_int8 'steps whose high-water differed from the plan: 0$'
expect finetune_w2_int8 'held-out accuracy: before [0-9]+/100, after [0-9]+/100 \(required: \+20 points\)'
expect finetune_w2_int8 'RAM: static [0-9]+ bytes \+ stack high-water [0-9]+ bytes = [0-9]+ of 65536 bytes'
expect finetune_w2_int8 'PASS finetune_w2_int8'

echo "--- bad_input: corrupt weights, oversized sample, step longer than the tape (M4F)"
run_bin bad_input
expect bad_input 'two-sample step on a tape of 32 records: training step refused: tape full: capacity 32; weights kept'
expect bad_input 'corrupt weights blob refused: corrupt data: weights: CRC-32 checksum mismatch; weights kept'
expect bad_input 'sample 28x28 skipped, the planner says: arena exhausted: needed [0-9]+ bytes'
expect bad_input 'step refused: arena exhausted: needed [0-9]+ bytes, [0-9]+ available, in [^(]+ \((forward|backward)\); weights kept'
expect bad_input 'PASS bad_input'
if grep -q 'FAIL' target/qemu-bad_input.log; then echo "FAIL: bad_input" >&2; exit 1; fi

echo "--- kernel_bench: instructions per MAC of the f32 conv kernels (M4F)"
run_bin kernel_bench
expect kernel_bench 'all W1 conv passes at 28x28: [0-9]+ MACs, [0-9]+ instructions, [0-9.]+ instructions/MAC'
expect kernel_bench 'depthwise 3x3 32ch 14x14, all three passes: [0-9.]+ instructions/MAC'
expect kernel_bench 'pointwise 1x1 16->32 14x14, all three passes: [0-9.]+ instructions/MAC'
# The program compares every shape with the generic kernels (its inline assembly's
# test) and fails on a mismatch; the lines say it ran.
expect kernel_bench 'depthwise 3x3 32ch 14x14: results equal the generic kernels'
expect kernel_bench 'pointwise 1x1 16->32 14x14: results equal the generic kernels'
expect kernel_bench 'odd shapes: results match the generic kernels'

echo "--- w1_train_size: the program whose size is the engine's code (M4F), default and small-kernels"
run_bin w1_train_size
expect w1_train_size 'train step 28x28: loss [0-9.]+, high-water [0-9]+ bytes \(plan [0-9]+\)'
expect w1_train_size 'PASS w1_train_size'
# The size-first build trains too, and its conv kernels' instructions per MAC are
# printed (about 2 s of QEMU each).
DIR=target/small-kernels SUFFIX=-small run_bin w1_train_size
expect w1_train_size-small 'PASS w1_train_size'
DIR=target/small-kernels SUFFIX=-small run_bin kernel_bench
expect kernel_bench-small 'all W1 conv passes at 28x28: [0-9]+ MACs, [0-9]+ instructions, [0-9.]+ instructions/MAC'

echo "--- finetune_m0: Q16 head fine-tuning in 16 KiB of RAM (M0, microbit)"
PROFILE=m0-size run_bin finetune_m0 thumbv6m-none-eabi
expect finetune_m0 '[0-9]+ distinct sample sizes planned'
expect finetune_m0 'a 200x200 sample would be skipped: the planner finds no size that fits the arena'
expect finetune_m0 'epoch 1 step 0 [0-9]+x[0-9]+ used at [0-9]+x[0-9]+: loss [0-9.]+, arena [0-9]+ bytes \(plan [0-9]+\)'
expect finetune_m0 'fine-tuning samples resized to fit: [0-9]+/[0-9]+, held-out: [0-9]+/[0-9]+; skipped: 0'
expect finetune_m0 'steps whose high-water differed from the plan: 0$'
expect finetune_m0 'RAM: static [0-9]+ bytes \+ stack high-water [0-9]+ bytes = [0-9]+ of 16384 bytes'
expect finetune_m0 'held-out accuracy: before [0-9]+/[0-9]+, after [0-9]+/[0-9]+ \(required: \+[0-9]+ points\)'
expect finetune_m0 'PASS finetune_m0'
# Fixed point is integer arithmetic: the host exporter, running the device's own code
# (firmware/src/w1_head.rs, assets.rs) on the same assets, must print the device's
# accuracy, and the committed int8 weights must be what the exporter makes.
sim=$( (cd .. && cargo run --release -q -p torchlet-tests --example export_m0_assets -- --check) |
    sed -n 's/^simulated held-out accuracy: \(before [0-9]*\/[0-9]*, after [0-9]*\/[0-9]*\)$/\1/p')
dev=$(sed -n 's/.*held-out accuracy: \(before [0-9]*\/[0-9]*, after [0-9]*\/[0-9]*\) (required.*/\1/p' target/qemu-finetune_m0.log)
echo "finetune_m0 held-out accuracy: device '$dev', host simulation '$sim'"
[ -n "$dev" ] && [ "$dev" = "$sim" ] || { echo "FAIL: the host simulation of finetune_m0 differs from the device" >&2; exit 1; }

echo "--- fault: a HardFault must end the run with status 102, not hang QEMU (M4F)"
run_bin fault thumbv7em-none-eabihf 102
expect fault 'ERROR +HardFault at pc 0x[0-9a-f]+'

echo "--- sizes against the budgets (committed snapshot: firmware/size-report.txt)"
bash size-report.sh target/size-report.txt
# The M0 program's line is checked here explicitly: flash under 64 KiB, RAM (static +
# painted stack) under 16 KiB, and its stack really measured.
grep -Eq '^finetune_m0 .*  ok$' target/size-report.txt ||
    { echo "FAIL: finetune_m0 over its flash or RAM budget, or its stack was not measured" >&2; exit 1; }
