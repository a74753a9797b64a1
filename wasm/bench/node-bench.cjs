// W1 training-step timings of a node build of torchlet (a harness, not a test).
//   node bench/node-bench.cjs PKG_DIR [PKG_DIR...]
// Prints microseconds per step for batch 1 at 28x28, batch 32 at 28x28 and batch 1 at
// 12x20 (random pixels and labels: the work per step does not depend on the values).
'use strict';
const path = require('path');

function rand(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296);
}

function timeCase(Model, batch, h, w, steps) {
  const r = rand(batch * 1000 + h * 10 + w);
  const x = new Float32Array(batch * h * w).map(() => r());
  const labels = new Uint32Array(batch).map(() => Math.floor(r() * 10));
  const m = Model.w1(0, 0.01, 0.9, Model.planW1(0.9, batch, h, w).trainBytes);
  for (let i = 0; i < Math.max(3, steps / 10); i++) m.trainStep(x, batch, h, w, labels);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < steps; i++) m.trainStep(x, batch, h, w, labels);
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / steps;
  m.free();
  return us;
}

for (const dir of process.argv.slice(2)) {
  const { Model } = require(path.resolve(dir, 'torchlet.js'));
  const cases = [[1, 28, 28, 400], [32, 28, 28, 40], [1, 12, 20, 400]];
  const out = cases.map(([b, h, w, n]) => `b${b} ${h}x${w}: ${timeCase(Model, b, h, w, n).toFixed(0)} us`);
  console.log(`${path.basename(dir)}: ${out.join(' | ')}`);
}
