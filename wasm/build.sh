#!/usr/bin/env bash
# Builds the npm package `torchlet` into wasm/target/pkg/npm (and the demo site):
#   web/         wasm-pack --target web, SIMD128 (all current browsers)
#   web-nosimd/  the same without SIMD128, for older browsers
#   node/        wasm-pack --target nodejs, SIMD128 (node >= 16.4)
#   onnx/, onnx-node/  the ONNX importer (crate onnx/), a module of its own for the web
#                builds and for node, loaded by Model.fromOnnx on first use
# Each engine folder's index.js is the entry (npm/entry/): the engine and Model.fromOnnx.
# Needs wasm-pack, wasm-bindgen 0.2.130 and npm's wasm-opt on PATH
# (bash .ci/install.sh wasm; eval "$(bash .ci/install.sh env)").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=target/pkg
rm -rf "$out"
wp() { # CRATE_DIR TARGET OUT_DIR OUT_NAME RUSTFLAGS
    RUSTFLAGS="$5" nice -n 10 wasm-pack --quiet build "$1" --release --no-pack --target "$2" \
        --out-dir "$PWD/$out/$3" --out-name "$4"
}
simd="-C target-feature=+simd128"
wp . web web torchlet "$simd"
wp . nodejs node torchlet "$simd"
wp . web web-nosimd torchlet ""
wp onnx web onnx torchlet_onnx ""
wp onnx nodejs onnx-node torchlet_onnx ""
npm_dir="$out/npm"
mkdir -p "$npm_dir"
cp npm/package.json README.md "$npm_dir/"
for d in web web-nosimd node onnx onnx-node; do
    mkdir -p "$npm_dir/$d"
    name=torchlet
    case $d in onnx*) name=torchlet_onnx ;; esac
    cp "$out/$d/$name.js" "$out/$d/$name.d.ts" "$out/$d/${name}_bg.wasm" "$npm_dir/$d/"
done
for d in web web-nosimd; do
    cp npm/entry/web.js "$npm_dir/$d/index.js"
    { printf "export * from './torchlet.js';\nexport { default } from './torchlet.js';\n\n"
      cat npm/entry/from-onnx.d.ts; } >"$npm_dir/$d/index.d.ts"
done
cp npm/entry/node.js "$npm_dir/node/index.js"
{ printf "export * from './torchlet.js';\n\n"; cat npm/entry/from-onnx.d.ts; } >"$npm_dir/node/index.d.ts"
# The web builds are ES modules, the node builds CommonJS.
for d in web web-nosimd onnx; do printf '{ "type": "module" }\n' >"$npm_dir/$d/package.json"; done
echo "npm package in wasm/$npm_dir ($(du -sh "$npm_dir" | cut -f1))"
