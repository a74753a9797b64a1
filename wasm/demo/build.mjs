// Assembles the static site in dist/: the page, the worker, the digits and the wasm
// package (built by wasm-pack --target web into ../target/pkg/web; see README).
//   node build.mjs [PKG_WEB_DIR]
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

const here = path.dirname(new URL(import.meta.url).pathname);
const dist = path.join(here, 'dist');
const pkg = path.resolve(process.argv[2] ?? path.join(here, '..', 'target', 'pkg', 'web'));
fs.mkdirSync(path.join(dist, 'pkg'), { recursive: true });
for (const f of fs.readdirSync(path.join(here, 'src'))) {
  fs.copyFileSync(path.join(here, 'src', f), path.join(dist, f));
}
for (const f of ['torchlet.js', 'torchlet_bg.wasm']) {
  fs.copyFileSync(path.join(pkg, f), path.join(dist, 'pkg', f));
}
const bin = path.join(dist, 'data', 'digits.bin');
if (!fs.existsSync(bin)) execFileSync('node', [path.join(here, 'build-data.mjs'), bin], { stdio: 'inherit' });
console.log(`site ready in ${dist}`);
