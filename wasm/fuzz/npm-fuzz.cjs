#!/usr/bin/env node
// Fuzzes the npm package's API in node with seeded random calls (issue 38): every
// exported function and setter, with hostile numbers (0, negative, NaN, Infinity,
// 2^32, 2^53, fractions), arrays of wrong length and type, and random ONNX files,
// model files and weights mutated from the fixtures in tests/golden/onnx and
// tests/golden/w2. Each call must either work or throw an `Error`; a trap
// (`WebAssembly.RuntimeError`, "unreachable"), a non-Error throw or a model that no
// longer trains after a refused call is a failure. Failing cases are written to
// OUT_DIR as JSON (rerun one with --replay FILE); the cases kept in
// fuzz/regressions/ are replayed first.
//
//   node fuzz/npm-fuzz.cjs PKG_DIR [--seed N] [--calls N] [--seconds S] [--out DIR] [--replay FILE]
//
// PKG_DIR is a `--target nodejs` build (wasm/target/pkg/node after ./build.sh), with the
// importer's node build beside it (../onnx-node).
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const pkgDir = path.resolve(args[0] || 'target/pkg/node');
const seed0 = Number(opt('--seed', 1));
const maxCalls = Number(opt('--calls', 3000));
const seconds = Number(opt('--seconds', 50));
const outDir = path.resolve(opt('--out', 'target/npm-fuzz'));
const replay = opt('--replay', null);
const root = path.resolve(__dirname, '../..');
const regressions = path.join(__dirname, 'regressions');

// ---- the package (loaded again after a trap: a trapped instance is not trusted)
let T, O;
const onnxDir = path.join(pkgDir, '..', 'onnx-node');
function load() {
  for (const k of Object.keys(require.cache)) {
    if (k.startsWith(pkgDir) || k.startsWith(onnxDir)) delete require.cache[k];
  }
  T = require(path.join(pkgDir, 'torchlet.js'));
  O = require(path.join(onnxDir, 'torchlet_onnx.js'));
}
load();
// Model.fromOnnx (the package's index.js) is async only to load the importer; these are
// its two steps, called in turn.
const fromOnnx = (bytes, externalData, ...rest) => T.Model.load(O.onnxToModel(bytes, externalData), ...rest);

// ---- seeded randomness (mulberry32)
let state = seed0 >>> 0;
function rand() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rand() * n);
const pick = (a) => a[int(a.length)];
const chance = (p) => rand() < p;

const HOSTILE = [0, -0, -1, NaN, Infinity, -Infinity, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 28,
  2 ** 53, 2 ** 53 + 2, 2.5, 0.5, -0.5, 1e-300, 1e300, -(2 ** 31), Number.MAX_VALUE, 65536, 65535];
const number = () => (chance(0.5) ? pick(HOSTILE) : int(chance(0.7) ? 40 : 300));
const size = () => (chance(0.75) ? 1 + int(chance(0.8) ? 32 : 96) : pick(HOSTILE));
const junk = () => pick([undefined, null, 'x', '28', {}, [], true, () => 1, Symbol('s'), 10n]);

// ---- fixtures
const golden = (p) => fs.readFileSync(path.join(root, 'tests/golden', p));
const onnx = [];
for (const f of fs.readdirSync(path.join(root, 'tests/golden/onnx')).filter((f) => f.endsWith('.onnx'))) {
  const data = path.join(root, 'tests/golden/onnx', f + '.data');
  onnx.push({ name: f, bytes: golden('onnx/' + f), data: fs.existsSync(data) ? fs.readFileSync(data) : undefined });
}
onnx.push({ name: 'w2.onnx', bytes: golden('w2/w2.onnx') });

function mutate(buf) {
  const b = Buffer.from(buf);
  let out = b;
  for (let n = 1 + int(8); n > 0; n--) {
    const k = int(6), at = int(out.length || 1);
    if (k === 0) out[at] ^= 1 << int(8);
    else if (k === 1) out[at] = pick([0, 0xff, 0x7f, 0x80, 1]);
    else if (k === 2) out = out.subarray(0, at);
    else if (k === 3) out = Buffer.concat([out.subarray(0, at), out.subarray(int(out.length), int(out.length) + int(64)), out.subarray(at)]);
    else if (k === 4) for (let i = 0; i < 4 && at + i < out.length; i++) out[at + i] = 0xff;
    else out = Buffer.concat([out.subarray(0, at), Buffer.from([int(256), int(256)]), out.subarray(at)]);
  }
  return new Uint8Array(out);
}

function floats(n) {
  if (chance(0.05)) return junk();
  if (chance(0.1)) return Array.from({ length: n }, () => pick([0.5, NaN, Infinity, -1e30]));
  return new Float32Array(n).fill(0.5);
}
function labels(n) {
  const k = int(10);
  if (k === 0) return junk();
  if (k === 1) return Array.from({ length: n }, () => pick([2.5, NaN, -1, 2 ** 32, 3, Infinity]));
  if (k === 2) return new Float64Array(n).fill(pick([0.5, NaN, 1e10]));
  return Uint32Array.from({ length: n }, () => int(chance(0.9) ? 10 : 20));
}

// ---- the calls: each returns a description of its arguments and runs them
const LAYERS = ['{"type":"conv2d","out_channels":%,"kernel_size":%,"padding":%}', '{"type":"relu"}',
  '{"type":"max_pool2d","kernel_size":%}', '{"type":"avg_pool2d","kernel_size":%}', '{"type":"global_avg_pool2d"}',
  '{"type":"flatten"}', '{"type":"linear","out_features":%}', '{"type":"batch_norm2d","eps":%}',
  '{"type":"softmax","dim":%}', '{"type":"dropout","p":%}', '{"type":"conv1d","out_channels":%,"kernel_size":%}',
  '{"type":"conv_transpose2d","out_channels":%,"kernel_size":%,"stride":%}', '{"type":"group_norm","num_groups":%}'];
const jsonNumber = () => pick(['1', '2', '3', '8', '0', '-1', '1e9', '4294967296', '2.5', '65535', '1e300', 'null', '"x"', '[3,2]', '[0,1]']);
const layersJson = () => '[' + Array.from({ length: 1 + int(6) }, () => pick(LAYERS).replace(/%/g, jsonNumber)).join(',') + ']';

function externalFor(f) {
  const name = f.name + '.data';
  const k = int(8);
  if (!f.data || k === 0) return pick([undefined, null, junk()]);
  if (k === 1) return { [name]: f.data };
  if (k === 2) return new Map([[name, f.data]]);
  if (k === 3) return { ['../' + name]: f.data, '/etc/passwd': new Uint8Array(4) };
  if (k === 4) return chance(0.5) ? mutate(f.data) : f.data.subarray(0, int(f.data.length));
  return f.data;
}

let pool = []; // { m, c, kind }
const newModel = {
  w1: () => ({ m: T.Model.w1(1, 0.05, 0.9, 0), c: 1, kind: 'w1' }),
  onnx: () => ({ m: fromOnnx(golden('onnx/w1.ts.onnx'), undefined, 0.05, 0.9, 0), c: 1, kind: 'onnx' }),
  w2: () => ({ m: fromOnnx(golden('w2/w2.onnx'), undefined, 0.05, 0.9, 0), c: 1, kind: 'w2' }),
  layers: () => ({ m: T.Model.fromLayers('[{"type":"conv2d","out_channels":4,"kernel_size":3,"padding":1},{"type":"relu"},{"type":"global_avg_pool2d"},{"type":"flatten"},{"type":"linear","out_features":10}]', 2, 3, 0.05, 0.9, 0), c: 2, kind: 'layers' }),
};
function fillPool() {
  pool = Object.values(newModel).map((f) => f());
}

// The model's good step, after resetting what a call may legitimately have changed.
function goodStep(p) {
  p.m.lr = 0.05;
  p.m.maxMacs = 1e10;
  const s = p.m.trainStep(new Float32Array(p.c * 28 * 28).fill(0.5), 1, 28, 28, new Uint32Array([3]));
  if (!(typeof s.loss === 'number')) throw new Error('good step returned no loss');
}

// Each op: [name, weight, fn(p) -> [description, thunk]]
const OPS = [
  ['Model.w1', 3, () => { const a = [number(), pick([0.05, number()]), pick([0.9, number()]), pick([0, 1 << 20, number(), 4.2e9])]; return [a, () => T.Model.w1(...a)]; }],
  ['Model.fromLayers', 4, () => { const a = [layersJson(), size(), number(), 0.05, pick([0, 0.9, number()]), pick([0, 1 << 20, number()])]; return [a, () => T.Model.fromLayers(...a)]; }],
  ['Model.fromOnnx', 8, () => {
    const f = pick(onnx), bytes = chance(0.85) ? mutate(f.bytes) : f.bytes;
    const a = [bytes, externalFor(f), pick([0.05, number()]), pick([0.9, number()]), pick([1 << 20, 8 << 20, number(), 0]), chance(0.8) ? undefined : pick([['*.bias'], ['nothing'], [], ['*']])];
    if (a[4] === 0 && bytes !== f.bytes) a[4] = 8 << 20; // a mutated model's auto-sized arena could be GBs: legal, but not on a shared machine
    return [[f.name, bytes.length, ...a.slice(1)], () => fromOnnx(...a)];
  }],
  ['Model.load', 5, (p) => { const b = mutate(modelFile(p)); const a = [b, 0.05, pick([0.9, number()]), pick([1 << 20, 8 << 20, number()])]; return [[b.length, ...a.slice(1)], () => T.Model.load(...a)]; }],
  ['Model.planW1', 4, () => { const a = [pick([0.9, number()]), size(), size(), size()]; return [a, () => T.Model.planW1(...a)]; }],
  ['plan', 6, (p) => { const a = [size(), size(), size()]; return [a, () => { const r = p.m.plan(...a); r.layers; r.toJSON(); }]; }],
  ['trainStep', 14, (p) => {
    const [b, h, w] = [size(), size(), size()];
    const n = chance(0.7) && [b, h, w].every(Number.isInteger) && b * h * w * p.c < 1e6 ? b * h * w * p.c : int(3000);
    const a = [floats(n), b, h, w, labels(chance(0.8) && Number.isInteger(b) && b < 1e4 ? b : int(5))];
    return [[`x[${a[0] && a[0].length}]`, b, h, w, a[4] && Array.from(a[4]).slice(0, 4)], () => p.m.trainStep(...a)];
  }],
  ['predict', 8, (p) => {
    const [b, h, w] = [size(), size(), size()];
    const n = chance(0.7) && [b, h, w].every(Number.isInteger) && b * h * w * p.c < 1e6 ? b * h * w * p.c : int(3000);
    return [[n, b, h, w], () => p.m.predict(floats(n), b, h, w)];
  }],
  ['evaluate', 4, (p) => {
    const [c, h, w] = [chance(0.7) ? int(4) : number(), size(), size()];
    const n = Number.isInteger(c) && [h, w].every(Number.isInteger) && c * h * w * p.c < 1e6 ? c * h * w * p.c : int(3000);
    return [[n, c, h, w], () => p.m.evaluate(floats(n), c, h, w, labels(Number.isInteger(c) && c < 1e4 ? c : 2))];
  }],
  ['importWeights', 4, (p) => { const b = chance(0.2) ? junk() : mutate(p.m.exportWeights()); return [[b && b.length], () => p.m.importWeights(b)]; }],
  ['exportModel', 2, (p) => [[], () => p.m.exportModel()]],
  ['exportSafetensors', 2, (p) => [[], () => p.m.exportSafetensors()]],
  ['setTrainable', 3, (p) => { const a = pick([['*.bias'], ['fc.*', 'nothing'], [], ['zz'], [''], ['*'], junk()]); return [[a], () => p.m.setTrainable(a)]; }],
  ['setCompactSaves', 1, (p) => { const a = pick([true, false, junk()]); return [[String(a)], () => p.m.setCompactSaves(a)]; }],
  ['lr=', 2, (p) => { const a = number(); return [[a], () => { p.m.lr = a; }]; }],
  ['maxMacs=', 2, (p) => { const a = pick([number(), 1e4, 1e10]); return [[a], () => { p.m.maxMacs = a; }]; }],
  ['getters', 1, (p) => [[], () => [p.m.steps, p.m.arenaBytes, p.m.highWaterBytes, p.m.numParameters, p.m.trainedParameters, p.m.inChannels, p.m.loss, p.m.accuracy, p.m.lr, p.m.maxMacs]]],
];
const modelFiles = {};
function modelFile(p) {
  if (!modelFiles[p.kind]) {
    try { modelFiles[p.kind] = p.m.exportModel(); } catch { modelFiles[p.kind] = golden('onnx/w1.ts.onnx'); }
  }
  return modelFiles[p.kind];
}
const totalWeight = OPS.reduce((s, o) => s + o[1], 0);
function pickOp() {
  let r = rand() * totalWeight;
  for (const o of OPS) if ((r -= o[1]) < 0) return o;
  return OPS[0];
}

// ---- running
const counts = {}; // op -> { ok, threw }
const failures = [];
const describe = (v) => JSON.stringify(v, (k, x) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : typeof x === 'bigint' ? `${x}n` : x instanceof Uint8Array ? `bytes[${x.length}]` : x));
function isTrap(e) {
  return e instanceof WebAssembly.RuntimeError || !(e instanceof Error) || /unreachable|recursive use of an object|null pointer passed to rust/i.test(e.message);
}
function fail(kind, op, argsDesc, e, seed, i) {
  const c = { kind, op, args: argsDesc, error: String(e && e.stack || e), seed, call: i };
  failures.push(c);
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, `failure-${seed}-${i}.json`), JSON.stringify(c, null, 1));
  console.log(`FAIL ${kind}: ${op} ${argsDesc}: ${String(e && e.message || e).slice(0, 200)}`);
  load();
  fillPool();
}
// Runs calls i0..i0+n from seed `seed` (each call reseeds, so a case replays alone).
function run(seed, i0, n, deadline) {
  let i = i0;
  for (; i < i0 + n && Date.now() < deadline; i++) {
    state = (seed * 1000003 + i) >>> 0;
    const pIndex = int(pool.length), p = pool[pIndex];
    const [name, , make] = pickOp();
    let desc = '?', created = null;
    try {
      const [a, thunk] = make(p);
      desc = describe(a);
      const r = thunk();
      if (r && typeof r.free === 'function' && r.__wbg_ptr !== undefined && r instanceof T.Model) created = r;
      else if (r && typeof r.free === 'function') r.free();
      (counts[name] ||= { ok: 0, threw: 0 }).ok++;
    } catch (e) {
      (counts[name] ||= { ok: 0, threw: 0 }).threw++;
      if (isTrap(e)) { fail('trap', name, desc, e, seed, i); continue; }
    }
    // A new model trains; the pool's model still trains after whatever happened.
    try {
      if (created) { goodStep({ m: created, c: created.inChannels, kind: 'new' }); }
    } catch (e) {
      if (isTrap(e)) { fail('trap in a new model', name, desc, e, seed, i); continue; }
    } finally {
      if (created) created.free();
    }
    try { goodStep(p); } catch (e) { fail(isTrap(e) ? 'trap after the call' : 'unusable after the call', name, desc, e, seed, i); }
  }
  return i - i0;
}

fillPool();
const t0 = Date.now();
let replayed = 0;
const cases = replay ? [replay] : fs.existsSync(regressions) ? fs.readdirSync(regressions).filter((f) => f.endsWith('.json')).map((f) => path.join(regressions, f)) : [];
for (const f of cases) {
  const c = JSON.parse(fs.readFileSync(f, 'utf8'));
  const before = failures.length;
  run(c.seed, c.call, 1, Infinity);
  replayed++;
  if (failures.length > before) console.log(`regression ${path.basename(f)} fails again`);
}
const calls = replay ? 0 : run(seed0, 0, maxCalls, t0 + seconds * 1000);
const secs = ((Date.now() - t0) / 1000).toFixed(1);
let ok = 0, threw = 0;
for (const [op, c] of Object.entries(counts).sort()) {
  ok += c.ok; threw += c.threw;
  console.log(`${op.padEnd(18)} ${String(c.ok).padStart(6)} worked ${String(c.threw).padStart(6)} threw an Error`);
}
console.log(`npm-fuzz: seed ${seed0}, ${calls} calls + ${replayed} regression cases in ${secs} s: ${ok} worked, ${threw} threw, ${failures.length} failures (traps or unusable models)`);
process.exit(failures.length ? 1 : 0);
