#!/usr/bin/env bash
# WebAssembly front end (wasm/, npm package `torchlet`) and the browser demo:
#   lints -> wasm-bindgen tests in node -> npm package build and `npm pack` contents
#   -> the packed package loads and trains in node -> demo site -> end-to-end test in
#   headless Chromium (train to >90% held-out, draw, plan, bad input, screenshot in
#   target/wasm-e2e/; then W1 exported by PyTorch as ONNX, loaded and trained past 90%;
#   then W2 loaded, fine-tuned bias-only on the drawing and trained past 90%)
#   -> benchmark harness vs TF.js in the same browser run
#   (numbers only, in target/wasm-e2e/bench.json and formatted as wasm/RESULTS.md's
#   block; skip with TORCHLET_WASM_BENCH=0). CI never rewrites wasm/RESULTS.md; it
#   checks that its benchmark block is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust wasm browser
eval "$(bash .ci/install.sh env)"
root=$PWD
out="$root/target/wasm-e2e"
mkdir -p "$out"
# wasm-bindgen-test-runner and Chromium leave profile folders in TMPDIR.
export TMPDIR="$out/tmp" XDG_CONFIG_HOME="$out/xdg-config"
mkdir -p "$TMPDIR" "$XDG_CONFIG_HOME"
cd wasm

echo "--- cargo fmt --check, clippy -D warnings, docs (wasm32)"
cargo fmt -- --check
nice -n 10 cargo clippy --workspace --target wasm32-unknown-unknown --all-targets --release -q -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --target wasm32-unknown-unknown -q

echo "--- wasm-bindgen-test: the bindings, as wasm in node"
nice -n 10 cargo test --target wasm32-unknown-unknown --release 2>&1 | tee "$out/bindings.log"
grep -q "test result: ok. [1-9]" "$out/bindings.log"

echo "--- npm package (wasm-pack: web + simd128, web without simd128, nodejs)"
./build.sh

echo "--- npm API fuzzing in node: seeded calls with hostile numbers, wrong arrays, mutated models"
node fuzz/npm-fuzz.cjs target/pkg/node --seed 1 --calls 3000 --seconds 60 --out "$out/npm-fuzz"

echo "--- npm pack: contents"
(cd target/pkg/npm && npm pack --json --pack-destination "$out" 2>/dev/null) >"$out/pack.json"
node - "$out/pack.json" npm/package.json <<'JS'
const fs = require('fs');
const [pack] = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const want = [...JSON.parse(fs.readFileSync(process.argv[3], 'utf8')).files, 'package.json'].sort();
const got = pack.files.map((f) => f.path).sort();
const missing = want.filter((f) => !got.includes(f)), extra = got.filter((f) => !want.includes(f));
if (pack.name !== 'torchlet' || missing.length || extra.length) {
  console.error(`npm pack: name ${pack.name}, missing ${missing}, unexpected ${extra}`);
  process.exit(1);
}
for (const d of ['web', 'web-nosimd', 'node']) {
  const dts = fs.readFileSync(`target/pkg/npm/${d}/torchlet.d.ts`, 'utf8');
  for (const s of ['export class Model', 'trainStep(', 'predict(', 'static planW1(', 'export class Plan',
    'static load(', 'exportModel(', 'exportSafetensors(', 'setTrainable(']) {
    if (!dts.includes(s)) { console.error(`${d}/torchlet.d.ts lacks "${s}"`); process.exit(1); }
  }
  if (dts.includes('fromOnnx') || dts.includes('onnx')) { console.error(`${d}/torchlet.d.ts: the engine names ONNX`); process.exit(1); }
  if (!fs.readFileSync(`target/pkg/npm/${d}/index.d.ts`, 'utf8').includes('): Promise<Model>;')) {
    console.error(`${d}/index.d.ts lacks fromOnnx's Promise<Model>`); process.exit(1);
  }
}
console.log(`${pack.filename}: ${pack.entryCount} files, ${pack.size} bytes packed, ${pack.unpackedSize} unpacked`);
JS

echo "--- download sizes against wasm/size-budget.json (more than 2% past a budget fails)"
node size-report.mjs target/pkg/npm "$out/pack.json" | tee "$out/size-report.txt"

echo "--- the packed package installs and trains in node"
app="$out/npm-app"
rm -rf "$app" && mkdir -p "$app"
(cd "$app" && printf '{"private":true}\n' >package.json &&
    npm install --no-audit --no-fund --loglevel=error "$out"/torchlet-*.tgz >/dev/null &&
    node -e '
const { Model } = require("torchlet");
const m = Model.w1(0, 0.05, 0.9, 0);
const s1 = m.trainStep(new Float32Array(784).fill(0.5), 1, 28, 28, new Uint32Array([3]));
const s2 = m.trainStep(new Float32Array(240).fill(0.5), 1, 12, 20, new Uint32Array([3]));
let msg = "";
try { m.predict(new Float32Array(5), 1, 28, 28); } catch (e) { msg = e.message; }
if (!(s1.loss > 0 && s2.loss > 0 && msg === "input: data has 5 values, the shape holds 784")) process.exit(1);
console.log(`require("torchlet"): 2 steps (28x28, 12x20), loss ${s2.loss.toFixed(3)}; bad input -> "${msg}"`);
const onnx = require("fs").readFileSync(process.argv[1]);
const loadedBefore = Object.keys(require.cache).filter((k) => k.includes("torchlet_onnx")).length;
Model.fromOnnx(onnx, undefined, 0.05, 0.9, 0).then((o) => {
  const loadedAfter = Object.keys(require.cache).filter((k) => k.includes("torchlet_onnx")).length;
  const l1 = o.trainStep(new Float32Array(784).fill(0.5), 1, 28, 28, new Uint32Array([3])).loss;
  const again = Model.load(o.exportModel(), 0.05, 0.9, 0);
  if (!(loadedBefore === 0 && loadedAfter === 1 && l1 > 0 && again.numParameters === 6218 &&
    o.exportSafetensors().length > 6218 * 4)) process.exit(1);
  console.log(`await Model.fromOnnx(w1.ts.onnx): the importer loaded on first use, a step (loss ${l1.toFixed(3)}), exportModel loads back, exportSafetensors`);
  return Model.fromOnnx(new Uint8Array(8), undefined, 0.05, 0.9, 0);
}).then(() => process.exit(1), (e) => {
  if (!(e instanceof Error) || !e.message) process.exit(1);
  console.log(`await Model.fromOnnx(8 zero bytes) rejects: "${e.message}"`);
});
' "$root/tests/golden/onnx/w1.ts.onnx")

echo "--- wasm/RESULTS.md: the benchmark's block is there and well formed"
node demo/bench.mjs --check RESULTS.md

echo "--- demo site"
cd demo
npm ci --no-audit --no-fund --loglevel=error >/dev/null
node build.mjs

echo "--- end-to-end in headless Chromium"
bench=--bench
[ "${TORCHLET_WASM_BENCH:-1}" = 0 ] && bench=""
node e2e.mjs "$out" $bench
echo "screenshot: $out/screenshot.png"
if [ -n "$bench" ]; then
    echo "--- benchmark block for wasm/RESULTS.md (not written: node demo/bench.mjs --format ... --write-results RESULTS.md)"
    node bench.mjs --format "$out/bench.json" | tee "$out/results-block.md"
fi
