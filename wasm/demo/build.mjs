// Assembles the static site in dist/: the page, the worker, the digits and the wasm
// package (built by ../build.sh into ../target/pkg; see README) and, for the
// benchmark page, TensorFlow.js from node_modules.
//   node build.mjs [PKG_ROOT]
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

const here = path.dirname(new URL(import.meta.url).pathname);
const dist = path.join(here, 'dist');
const pkgRoot = path.resolve(process.argv[2] ?? path.join(here, '..', 'target', 'pkg'));
fs.mkdirSync(path.join(dist, 'pkg'), { recursive: true });
for (const f of fs.readdirSync(path.join(here, 'src'))) {
  fs.copyFileSync(path.join(here, 'src', f), path.join(dist, f));
}
// The npm package's web builds as the package lays them out: the SIMD128 build for the
// page, the plain one too for the benchmark page, and the importer Model.fromOnnx loads.
for (const d of ['web', 'web-nosimd', 'onnx']) {
  fs.mkdirSync(path.join(dist, 'pkg', d), { recursive: true });
  for (const f of fs.readdirSync(path.join(pkgRoot, 'npm', d))) {
    fs.copyFileSync(path.join(pkgRoot, 'npm', d, f), path.join(dist, 'pkg', d, f));
  }
}
// TensorFlow.js for the benchmark page only.
const tfjs = path.join(here, 'node_modules', '@tensorflow');
fs.mkdirSync(path.join(dist, 'tfjs'), { recursive: true });
for (const f of ['tfjs/dist/tf.min.js', 'tfjs-backend-wasm/dist/tf-backend-wasm.min.js',
  'tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm', 'tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm',
  'tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm']) {
  fs.copyFileSync(path.join(tfjs, f), path.join(dist, 'tfjs', path.basename(f)));
}
// W2 as PyTorch exports it, for the benchmark page.
fs.mkdirSync(path.join(dist, 'data'), { recursive: true });
fs.copyFileSync(path.join(here, '..', '..', 'tests', 'golden', 'w2', 'w2.onnx'), path.join(dist, 'data', 'w2.onnx'));
const bin = path.join(dist, 'data', 'digits.bin');
if (!fs.existsSync(bin)) execFileSync('node', [path.join(here, 'build-data.mjs'), bin], { stdio: 'inherit' });
console.log(`site ready in ${dist}`);
