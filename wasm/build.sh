#!/usr/bin/env bash
# Builds the npm package `torchlet` into wasm/target/pkg/npm (and the demo site):
#   web/         wasm-pack --target web, SIMD128 (all current browsers)
#   web-nosimd/  the same without SIMD128, for older browsers
#   node/        wasm-pack --target nodejs, SIMD128 (node >= 16.4)
# Needs wasm-pack, wasm-bindgen 0.2.130 and npm's wasm-opt on PATH
# (bash .ci/install.sh wasm; eval "$(bash .ci/install.sh env)").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=target/pkg
rm -rf "$out"
wp() { # TARGET OUT_DIR RUSTFLAGS
    RUSTFLAGS="$3" nice -n 10 wasm-pack --quiet build --release --no-pack --target "$1" \
        --out-dir "$out/$2" --out-name torchlet
}
simd="-C target-feature=+simd128"
wp web web "$simd"
wp nodejs node "$simd"
wp web web-nosimd ""
npm_dir="$out/npm"
mkdir -p "$npm_dir"
cp npm/package.json README.md "$npm_dir/"
for d in web web-nosimd node; do
    mkdir -p "$npm_dir/$d"
    cp "$out/$d"/torchlet.js "$out/$d"/torchlet.d.ts "$out/$d"/torchlet_bg.wasm \
        "$out/$d"/torchlet_bg.wasm.d.ts "$npm_dir/$d/"
done
# The web builds are ES modules, the node build CommonJS.
for d in web web-nosimd; do printf '{ "type": "module" }\n' >"$npm_dir/$d/package.json"; done
echo "npm package in wasm/$npm_dir ($(du -sh "$npm_dir" | cut -f1))"
