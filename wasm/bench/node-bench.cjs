// W1 training-step timings of node builds of torchlet (a harness, not a test).
//   node bench/node-bench.cjs PKG_DIR [PKG_DIR...]      (e.g. target/pkg/node)
// For batch 1 at 28x28, batch 32 at 28x28 and batch 1 at 12x20 (random pixels and
// labels: the work per step does not depend on the values) it prints microseconds per
// step of CPU time (process.cpuUsage: user + system of this process) and of wall time.
// CPU time leaves out the time slices lost to other processes, so it is the figure to
// trust on a loaded machine. Rounds of the given builds alternate (5 each), and each
// build's best round is kept, so several builds are compared under the same load.
'use strict';
const path = require('path');

function rand(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296);
}

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** A model and data of one case, warmed up; `round()` times `steps` steps. */
function setup(Model, batch, h, w, steps) {
  const r = rand(batch * 1000 + h * 10 + w);
  const x = new Float32Array(batch * h * w).map(() => r());
  const labels = new Uint32Array(batch).map(() => Math.floor(r() * 10));
  const plan = Model.planW1(0.9, batch, h, w);
  const m = Model.w1(0, 0.01, 0.9, plan.trainBytes);
  plan.free();
  for (let i = 0; i < Math.max(3, steps / 10); i++) m.trainStep(x, batch, h, w, labels);
  return {
    round() {
      const c0 = cpuUs();
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < steps; i++) m.trainStep(x, batch, h, w, labels);
      const wall = Number(process.hrtime.bigint() - t0) / 1e3 / steps;
      return { cpu: (cpuUs() - c0) / steps, wall };
    },
    free: () => m.free(),
  };
}

const builds = process.argv.slice(2).map((dir) => [dir, require(path.resolve(dir, 'torchlet.js')).Model]);
if (builds.length === 0) {
  console.error('usage: node bench/node-bench.cjs PKG_DIR [PKG_DIR...]');
  process.exit(2);
}
for (const [b, h, w, steps] of [[1, 28, 28, 300], [32, 28, 28, 12], [1, 12, 20, 600]]) {
  const runs = builds.map(([, Model]) => setup(Model, b, h, w, steps));
  const best = runs.map(() => ({ cpu: Infinity, wall: Infinity }));
  for (let k = 0; k < 5; k++) {
    runs.forEach((run, i) => {
      const t = run.round();
      best[i] = { cpu: Math.min(best[i].cpu, t.cpu), wall: Math.min(best[i].wall, t.wall) };
    });
  }
  runs.forEach((run) => run.free());
  builds.forEach(([dir], i) => {
    console.log(`b${b} ${h}x${w}  ${dir.padEnd(40)} cpu ${best[i].cpu.toFixed(0).padStart(7)} us/step` +
      `  wall ${best[i].wall.toFixed(0).padStart(7)} us/step`);
  });
}
