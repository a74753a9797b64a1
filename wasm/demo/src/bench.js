// Benchmark harness (not a test): W1 "digits-fcn" (and W2 "mobile-fcn", bench-w2.js)
// training steps in this browser, in torchlet (SIMD128 and plain wasm builds) and in
// TensorFlow.js 4.22 with its cpu, webgl and wasm backends. The wasm backend has no
// Conv2DBackpropFilter kernel, so it can only train W1 when the conv filter gradient is
// supplied with tf.customGrad (a conv2d with the input's channels as the batch and the
// batch as the channels); the bench checks that patched gradient against the stock one
// on the cpu backend first.
import initSimd, { Model as ModelSimd } from './pkg/web/index.js';
import initPlain, { Model as ModelPlain } from './pkg/web-nosimd/index.js';
import { data, lcg, time } from './bench-util.js';
import { runW2 } from './bench-w2.js';

const CASES = [[1, 28, 28], [32, 28, 28], [1, 12, 20]];
// ?reverse runs the cases in the opposite order (to check that order does not matter).
if (new URLSearchParams(location.search).has('reverse')) CASES.reverse();
// ?w2only leaves W1's cases out (to try the W2 part alone).
if (new URLSearchParams(location.search).has('w2only')) CASES.length = 0;
const out = document.getElementById('out');
const log = (s) => { out.textContent += s + '\n'; console.log(s); };

async function torchletCase(Model, b, h, w) {
  const { x, labels } = data(b, h, w);
  const plan = Model.planW1(0, b, h, w);
  const m = Model.w1(0, 0.01, 0, plan.trainBytes);
  plan.free();
  const r = await time(() => m.trainStep(x, b, h, w, labels));
  m.free();
  return r;
}

// ---- TensorFlow.js W1 (NHWC) ------------------------------------------------------
/** conv2d 3x3 'same' whose filter gradient is computed with ops the wasm backend has. */
function patchedConv(tf) {
  return tf.customGrad((x, w, save) => {
    save([x, w]);
    return {
      value: tf.conv2d(x, w, 1, 'same'),
      gradFunc: (dy, [xs, ws]) => {
        const dx = tf.conv2dTranspose(dy, ws, xs.shape, 1, 'same');
        // dW[i,j,ci,co] = sum_{n,h,w} xpad[n,h+i,w+j,ci] * dy[n,h,w,co]
        const xt = tf.transpose(tf.pad(xs, [[0, 0], [1, 1], [1, 1], [0, 0]]), [3, 1, 2, 0]);
        const dyt = tf.transpose(dy, [1, 2, 0, 3]);
        const dw = tf.transpose(tf.conv2d(xt, dyt, 1, 'valid'), [1, 2, 0, 3]);
        return [dx, dw];
      },
    };
  });
}

function tfW1(tf, patched) {
  const r = lcg(7);
  const param = (shape, fanIn) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const k = 1 / Math.sqrt(fanIn);
    return tf.variable(tf.tensor(Float32Array.from({ length: n }, () => (2 * r() - 1) * k), shape));
  };
  const p = [param([3, 3, 1, 8], 9), param([8], 9), param([3, 3, 8, 16], 72), param([16], 72),
    param([3, 3, 16, 32], 144), param([32], 144), param([32, 10], 32), param([10], 32)];
  const conv = patched ? patchedConv(tf) : (x, w) => tf.conv2d(x, w, 1, 'same');
  const forward = (x) => {
    let h = tf.maxPool(tf.relu(tf.add(conv(x, p[0]), p[1])), 2, 2, 'valid');
    h = tf.maxPool(tf.relu(tf.add(conv(h, p[2]), p[3])), 2, 2, 'valid');
    h = tf.mean(tf.relu(tf.add(conv(h, p[4]), p[5])), [1, 2]);
    return tf.add(tf.matMul(h, p[6]), p[7]);
  };
  const opt = tf.train.sgd(0.01);
  return {
    step(x, y) {
      const loss = opt.minimize(() => tf.losses.softmaxCrossEntropy(y, forward(x)), true);
      const v = loss.dataSync()[0];
      loss.dispose();
      return v;
    },
    dispose() { p.forEach((t) => t.dispose()); opt.dispose(); },
  };
}

/** A TF.js W1 on random data of one case: `step()` trains once, `dispose()` frees. */
function tfSetup(tf, patched, b, h, w) {
  const { x, labels } = data(b, h, w);
  const xt = tf.tensor4d(x, [b, h, w, 1]);
  const yt = tf.oneHot(tf.tensor1d(Array.from(labels), 'int32'), 10);
  const net = tfW1(tf, patched);
  const dispose = () => { net.dispose(); xt.dispose(); yt.dispose(); };
  try {
    const loss = net.step(xt, yt);
    if (!Number.isFinite(loss)) throw new Error(`loss ${loss}`);
  } catch (e) {
    dispose();
    throw e;
  }
  return { step: () => net.step(xt, yt), dispose };
}

async function tfCase(tf, patched, b, h, w) {
  const net = tfSetup(tf, patched, b, h, w);
  try {
    return await time(net.step);
  } finally {
    net.dispose();
  }
}

/**
 * Paired timing: rounds of torchlet (SIMD128) and of the patched TF.js wasm backend
 * alternate, so both see the same load from other work on the machine; each side's
 * best round is kept. Returns microseconds per step of both.
 */
async function pairedCase(tf, b, h, w, pairs = 5) {
  const { x, labels } = data(b, h, w);
  const plan = ModelSimd.planW1(0, b, h, w);
  const m = ModelSimd.w1(0, 0.01, 0, plan.trainBytes);
  plan.free();
  const net = tfSetup(tf, true, b, h, w);
  try {
    const ours = () => m.trainStep(x, b, h, w, labels);
    let t = Infinity, f = Infinity;
    for (let k = 0; k < pairs; k++) {
      t = Math.min(t, (await time(ours, { rounds: 1, warmMs: 50 })).us);
      f = Math.min(f, (await time(net.step, { rounds: 1, warmMs: 50 })).us);
    }
    return { torchlet: t, tfjs: f };
  } finally {
    net.dispose();
    m.free();
  }
}

/** Largest difference between the patched and the stock filter gradient (cpu). */
function checkPatchedGrad(tf) {
  const r = lcg(3);
  const x = tf.tensor4d(Float32Array.from({ length: 2 * 6 * 5 * 3 }, r), [2, 6, 5, 3]);
  const w = tf.tensor4d(Float32Array.from({ length: 3 * 3 * 3 * 4 }, r), [3, 3, 3, 4]);
  const f = (conv) => tf.grads((a, b) => tf.sum(tf.square(conv(a, b))))([x, w]);
  const [dx0, dw0] = f((a, b) => tf.conv2d(a, b, 1, 'same'));
  const [dx1, dw1] = f(patchedConv(tf));
  const d = Math.max(tf.max(tf.abs(tf.sub(dw0, dw1))).dataSync()[0], tf.max(tf.abs(tf.sub(dx0, dx1))).dataSync()[0]);
  return d / tf.max(tf.abs(dw0)).dataSync()[0];
}

async function run() {
  const tf = window.tf;
  const results = { torchlet: {}, tfjs: {}, notes: [] };
  await initSimd();
  await initPlain();
  const name = ([b, h, w]) => `b${b} ${h}x${w}`;
  for (const [label, M] of [['torchlet wasm+simd128', ModelSimd], ['torchlet wasm', ModelPlain]]) {
    results.torchlet[label] = {};
    for (const c of CASES) {
      const r = await torchletCase(M, ...c);
      results.torchlet[label][name(c)] = r.us;
      log(`${label.padEnd(28)} ${name(c).padEnd(10)} ${r.us.toFixed(0).padStart(9)} us/step (${r.steps} steps)`);
    }
  }
  tf.wasm.setWasmPaths(new URL('tfjs/', location.href).href);
  await tf.setBackend('cpu');
  const rel = checkPatchedGrad(tf);
  log(`patched conv gradient vs stock (cpu): max relative difference ${rel.toExponential(2)}`);
  results.patchedGradRelDiff = rel;
  const configs = [['tfjs cpu', 'cpu', false], ['tfjs webgl', 'webgl', false],
    ['tfjs wasm (stock)', 'wasm', false], ['tfjs wasm + customGrad', 'wasm', true]];
  for (const [label, backend, patched] of configs) {
    results.tfjs[label] = {};
    let ok = false;
    try { ok = await tf.setBackend(backend); } catch (e) { ok = false; }
    if (!ok) {
      log(`${label}: backend ${backend} unavailable in this browser`);
      results.notes.push(`${label}: backend unavailable`);
      continue;
    }
    await tf.ready();
    if (backend === 'wasm') log(`tfjs wasm SIMD: ${await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT')}, threads: ${await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT')}`);
    for (const c of CASES) {
      try {
        const r = await tfCase(tf, patched, ...c);
        results.tfjs[label][name(c)] = r.us;
        log(`${label.padEnd(28)} ${name(c).padEnd(10)} ${r.us.toFixed(0).padStart(9)} us/step (${r.steps} steps)`);
      } catch (e) {
        results.tfjs[label][name(c)] = null;
        log(`${label.padEnd(28)} ${name(c).padEnd(10)} cannot train: ${String(e.message ?? e).slice(0, 120)}`);
      }
    }
  }
  // The headline ratio, robust to the machine's load changing during the run: torchlet
  // SIMD128 against the patched wasm backend (the fastest TF.js configuration so far),
  // in alternating rounds.
  if (results.tfjs['tfjs wasm + customGrad'] && tf.getBackend() === 'wasm') {
    results.paired = {};
    for (const c of CASES) {
      const r = await pairedCase(tf, ...c);
      results.paired[name(c)] = r;
      log(`paired ${name(c).padEnd(10)} torchlet simd128 ${r.torchlet.toFixed(0).padStart(7)} us, tfjs wasm + customGrad ` +
        `${r.tfjs.toFixed(0).padStart(7)} us: TF.js/torchlet ${(r.tfjs / r.torchlet).toFixed(1)}x`);
    }
  }
  // Ratios: the fastest TF.js configuration per case over torchlet (SIMD build).
  for (const c of CASES) {
    const t = results.torchlet['torchlet wasm+simd128'][name(c)];
    const tfs = Object.entries(results.tfjs).filter(([, v]) => v[name(c)]).map(([k, v]) => [k, v[name(c)]]);
    const parts = tfs.map(([k, v]) => `${k} ${(v / t).toFixed(1)}x`).join(', ');
    log(`ratio TF.js/torchlet ${name(c)}: ${parts}`);
  }
  // W2 "mobile-fcn" (bench-w2.js).
  results.w2 = await runW2(tf, log, [['torchlet wasm+simd128', ModelSimd], ['torchlet wasm', ModelPlain]]);
  window.benchResults = results;
  document.body.dataset.benchDone = '1';
  return results;
}

document.getElementById('run').onclick = run;
if (new URLSearchParams(location.search).has('run')) run();
