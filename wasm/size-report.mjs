// The npm package's download sizes against the budgets in size-budget.json: each
// module's wasm and JS, raw and gzipped (-9), the engine and the importer apart, and
// the packed tarball. A size more than 2% over its budget fails (exit 1) with the
// numbers, so that growth is a decision (edit the budget in the same change), not an
// accident; the budgets are the goals of issue 41 once met, the measured sizes until then.
//   node size-report.mjs NPM_DIR [PACK_JSON] [--budgets FILE]
// NPM_DIR is ./build.sh's target/pkg/npm; PACK_JSON is `npm pack --json`'s output.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const args = process.argv.slice(2);
const flag = args.indexOf('--budgets');
const budgetsFile = flag >= 0 ? args.splice(flag, 2)[1] : new URL('size-budget.json', import.meta.url).pathname;
const [npmDir, packJson] = args;
if (!npmDir) {
  console.error('usage: node size-report.mjs NPM_DIR [PACK_JSON] [--budgets FILE]');
  process.exit(2);
}
const SLACK = 1.02;

const bytes = (f) => fs.readFileSync(path.join(npmDir, f));
const gz = (b) => zlib.gzipSync(b, { level: 9 }).length;
/** Raw and gzipped bytes of files that are downloaded together. */
function download(files) {
  const all = files.map(bytes);
  return { raw: all.reduce((n, b) => n + b.length, 0), gz: all.reduce((n, b) => n + gz(b), 0) };
}

const engine = (d) => [`${d}/index.js`, `${d}/torchlet.js`, `${d}/torchlet_bg.wasm`];
const importer = ['onnx/torchlet_onnx.js', 'onnx/torchlet_onnx_bg.wasm'];
const sizes = [];
for (const [name, files] of [
  ['web engine (SIMD128): wasm + JS', engine('web')],
  ['web engine without SIMD128: wasm + JS', engine('web-nosimd')],
  ['web importer (Model.fromOnnx): wasm + JS', importer],
  ['web engine + importer', [...engine('web'), ...importer]],
  ['node engine: wasm + JS', engine('node')],
]) {
  const s = download(files);
  sizes.push([`${name}, raw`, s.raw], [`${name}, gzip -9`, s.gz]);
}
if (packJson) {
  const [pack] = JSON.parse(fs.readFileSync(packJson, 'utf8'));
  sizes.push(['npm tarball, packed', pack.size], ['npm tarball, unpacked', pack.unpackedSize]);
}

const budgets = JSON.parse(fs.readFileSync(budgetsFile, 'utf8')).budgets;
let failed = 0;
console.log(`${'size'.padEnd(54)} ${'bytes'.padStart(10)} ${'budget'.padStart(10)}  verdict`);
for (const [name, n] of sizes) {
  const budget = budgets[name];
  let verdict = 'no budget';
  if (budget !== undefined) {
    const over = n > budget * SLACK;
    failed += over;
    verdict = over ? `OVER: ${((n / budget - 1) * 100).toFixed(1)}% past the budget (2% allowed)` : 'ok';
  }
  console.log(`${name.padEnd(54)} ${String(n).padStart(10)} ${String(budget ?? '-').padStart(10)}  ${verdict}`);
}
for (const name of Object.keys(budgets)) {
  if (!sizes.some(([n]) => n === name) && (packJson || !name.startsWith('npm tarball'))) {
    console.log(`budget "${name}" names no size measured here`);
    failed++;
  }
}
if (failed) {
  console.error(`${failed} size(s) over budget (${path.relative(process.cwd(), budgetsFile)}): ` +
    'if the growth is wanted, raise the budget in the same change and say why');
  process.exit(1);
}
