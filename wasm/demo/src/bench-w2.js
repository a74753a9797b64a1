// W2 "mobile-fcn" in the benchmark page: training steps (BatchNorm on batch statistics,
// running statistics updated, SGD lr 0.01) of torchlet's W2, loaded from PyTorch's ONNX
// export (tests/golden/w2/w2.onnx, copied to data/w2.onnx by build.mjs), against the same
// network written in TensorFlow.js ops (NHWC). The export is in eval mode, which leaves
// the dropout out, so the TF.js network has none either.
//
// TF.js's wasm backend has no gradient kernels for conv2d's filter nor for depthwise
// conv2d, so it can only train W2 with tf.customGrad versions of them ("wasm +
// customGrad"): the stem's filter gradient as a dilated conv2d, the depthwise input
// gradient as a depthwise conv2d of the (zero-upsampled) output gradient with the
// flipped filter, the depthwise filter gradient as a dilated depthwise conv2d over the
// (image, channel) pairs, and the pointwise (1x1) convolutions as matMul. The bench checks those gradients against the stock ones on
// the cpu backend first.
import { data, lcg, time } from './bench-util.js';

export const W2_CASES = [[1, 28, 28], [32, 28, 28], [1, 20, 14]];
const name = ([b, h, w]) => `b${b} ${h}x${w}`;
/** (in, out, stride, expansion) of the five inverted residual blocks. */
const BLOCKS = [[8, 8, 1, 1], [8, 16, 2, 4], [16, 16, 1, 4], [16, 32, 2, 4], [32, 32, 1, 4]];

/** torchlet's W2 from the ONNX file, with an arena planned for this case. */
async function torchletW2(Model, onnx, b, h, w) {
  const probe = await Model.fromOnnx(onnx, undefined, 0.01, 0, 0);
  const plan = probe.plan(b, h, w);
  const bytes = plan.trainBytes;
  plan.free();
  probe.free();
  return Model.fromOnnx(onnx, undefined, 0.01, 0, bytes);
}

async function torchletCase(Model, onnx, b, h, w) {
  const { x, labels } = data(b, h, w);
  const m = await torchletW2(Model, onnx, b, h, w);
  try {
    return await time(() => m.trainStep(x, b, h, w, labels));
  } finally {
    m.free();
  }
}

// ---- TensorFlow.js W2 (NHWC) ------------------------------------------------------
/** The stem's conv2d (3x3, stride 2, padding 1) with its filter gradient as a conv2d of
 * dilation 2; its input (the images) needs no gradient, so that one is zeros. */
function stemConv(tf) {
  return tf.customGrad((x, w, save) => {
    save([x]);
    return {
      value: tf.conv2d(x, w, 2, 1),
      gradFunc: (dy, [xs]) => {
        // dW[i,j,ci,co] = sum_{n,h,w} xpad[n,2h+i,2w+j,ci] * dy[n,h,w,co]
        const xt = tf.transpose(tf.pad(xs, [[0, 0], [1, 1], [1, 1], [0, 0]]), [3, 1, 2, 0]);
        const dyt = tf.transpose(dy, [1, 2, 0, 3]);
        const full = tf.conv2d(xt, dyt, 1, 'valid', 'NHWC', 2);
        const dw = tf.transpose(tf.slice(full, [0, 0, 0, 0], [-1, 3, 3, -1]), [1, 2, 0, 3]);
        return [tf.zerosLike(xs), dw];
      },
    };
  });
}

/** depthwiseConv2d 3x3, padding 1, stride `s` (1 or 2), with both gradients from ops
 * the wasm backend has. */
function depthwiseConv(tf, s) {
  return tf.customGrad((x, w, save) => {
    save([x, w]);
    return {
      value: tf.depthwiseConv2d(x, w, s, 1),
      gradFunc: (dy, [xs, ws]) => {
        const [n, h, wd, c] = xs.shape;
        const [, ho, wo] = dy.shape;
        let up = dy; // dy[o] at 2o, zeros between, for stride 2
        if (s === 2) {
          const z = [[0, 0], [0, 0], [0, 1], [0, 0]];
          up = tf.reshape(tf.pad(tf.reshape(dy, [n * ho, wo, 1, c]), z), [n, ho, 1, 2 * wo * c]);
          up = tf.reshape(tf.pad(up, z), [n, 2 * ho, 2 * wo, c]);
        }
        const pad = [[0, 0], [1, h + 1 - up.shape[1]], [1, wd + 1 - up.shape[2]], [0, 0]];
        const dx = tf.depthwiseConv2d(tf.pad(up, pad), tf.reverse(ws, [0, 1]), 1, 'valid');
        // dW[i,j,c] = sum_{n,h,w} xpad[n,sh+i,sw+j,c] * dy[n,h,w,c]: a depthwise conv2d
        // of dilation s over the (image, channel) pairs, with dy as the filter, summed
        // over the images (faster than tap by tap: 2x at batch 1, 3x or more at 32).
        const xp = tf.pad(xs, [[0, 0], [1, 1], [1, 1], [0, 0]]);
        const xt = tf.reshape(tf.transpose(xp, [1, 2, 0, 3]), [1, h + 2, wd + 2, n * c]);
        const f = tf.reshape(tf.transpose(dy, [1, 2, 0, 3]), [ho, wo, n * c, 1]);
        const full = tf.depthwiseConv2d(xt, f, 1, 'valid', 'NHWC', s);
        const dw = tf.sum(tf.reshape(tf.slice(full, [0, 0, 0, 0], [1, 3, 3, n * c]), [3, 3, n, c]), 2);
        return [dx, tf.reshape(dw, [3, 3, c, 1])];
      },
    };
  });
}

/** W2 in TF.js ops; `patched` uses the custom gradients above. Same seed, same values. */
function tfW2(tf, patched) {
  const r = lcg(11);
  const vars = [];
  const v = (t, trainable = true) => {
    const x = tf.variable(t, trainable);
    vars.push(x);
    return x;
  };
  const param = (shape, fanIn) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const k = 1 / Math.sqrt(fanIn);
    return v(tf.tensor(Float32Array.from({ length: n }, () => (2 * r() - 1) * k), shape));
  };
  // Training-mode BatchNorm: batch statistics normalise; PyTorch's running statistics
  // update (momentum 0.1, unbiased variance) happens beside the gradient's path.
  const bn = (c) => {
    const gamma = v(tf.ones([c])), beta = v(tf.zeros([c]));
    const rm = v(tf.zeros([c]), false), rv = v(tf.ones([c]), false);
    return (x) => {
      const { mean, variance } = tf.moments(x, [0, 1, 2]);
      const m = x.size / c;
      rm.assign(tf.add(tf.mul(rm, 0.9), tf.mul(mean, 0.1)));
      rv.assign(tf.add(tf.mul(rv, 0.9), tf.mul(variance, (0.1 * m) / (m - 1))));
      return tf.batchNorm(x, mean, variance, beta, gamma, 1e-5);
    };
  };
  const pw = (x, w) => {
    if (!patched) return tf.conv2d(x, w, 1, 'valid');
    const [n, h, wd, c] = x.shape;
    const co = w.shape[3];
    return tf.reshape(tf.matMul(tf.reshape(x, [n * h * wd, c]), tf.reshape(w, [c, co])), [n, h, wd, co]);
  };
  const dws = patched ? [null, depthwiseConv(tf, 1), depthwiseConv(tf, 2)] : null;
  const dw = (x, w, s) => (patched ? dws[s](x, w) : tf.depthwiseConv2d(x, w, s, 1));
  const stem = patched ? stemConv(tf) : (x, w) => tf.conv2d(x, w, 2, 1);
  const stemW = param([3, 3, 1, 8], 9), stemBn = bn(8);
  const blocks = BLOCKS.map(([cin, cout, s, e]) => {
    const mid = cin * e;
    const ex = e === 1 ? null : [param([1, 1, cin, mid], cin), bn(mid)];
    const d = [param([3, 3, mid, 1], 9), bn(mid)];
    const p = [param([1, 1, mid, cout], mid), bn(cout)];
    return (x) => {
      let y = ex ? tf.relu6(ex[1](pw(x, ex[0]))) : x;
      y = tf.relu6(d[1](dw(y, d[0], s)));
      y = p[1](pw(y, p[0]));
      return s === 1 && cin === cout ? tf.add(x, y) : y;
    };
  });
  const fcW = param([32, 10], 32), fcB = param([10], 32);
  const forward = (x) => {
    let h = tf.relu6(stemBn(stem(x, stemW)));
    for (const b of blocks) h = b(h);
    return tf.add(tf.matMul(tf.mean(h, [1, 2]), fcW), fcB);
  };
  const loss = (x, y) => tf.losses.softmaxCrossEntropy(y, forward(x));
  const opt = tf.train.sgd(0.01);
  return {
    step(x, y) {
      const l = opt.minimize(() => loss(x, y), true);
      const val = l.dataSync()[0];
      l.dispose();
      return val;
    },
    /** Gradients of the loss for the trainable variables, in creation order. */
    grads(x, y) {
      const trainable = vars.filter((t) => t.trainable);
      return tf.tidy(() => {
        const { grads } = tf.variableGrads(() => loss(x, y), trainable);
        return trainable.map((t) => grads[t.name]);
      });
    },
    dispose() { vars.forEach((t) => t.dispose()); opt.dispose(); },
  };
}

/** A TF.js W2 on random data of one case: `step()` trains once, `dispose()` frees. */
function tfSetup(tf, patched, b, h, w) {
  const { x, labels } = data(b, h, w);
  const xt = tf.tensor4d(x, [b, h, w, 1]);
  const yt = tf.oneHot(tf.tensor1d(Array.from(labels), 'int32'), 10);
  const net = tfW2(tf, patched);
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

/** Largest difference, relative to the largest stock value, between the patched and the
 * stock gradients of every W2 parameter (current backend), at batch 2 and 20x14. */
export function checkPatchedW2(tf) {
  const { x, labels } = data(2, 20, 14);
  return tf.tidy(() => {
    const xt = tf.tensor4d(x, [2, 20, 14, 1]);
    const yt = tf.oneHot(tf.tensor1d(Array.from(labels), 'int32'), 10);
    const [a, b] = [false, true].map((p) => tfW2(tf, p));
    const ga = a.grads(xt, yt), gb = b.grads(xt, yt);
    a.dispose();
    b.dispose();
    let diff = 0, scale = 0;
    ga.forEach((g, i) => {
      diff = Math.max(diff, tf.max(tf.abs(tf.sub(g, gb[i]))).dataSync()[0]);
      scale = Math.max(scale, tf.max(tf.abs(g)).dataSync()[0]);
    });
    return diff / scale;
  });
}

/**
 * Paired timing against one TF.js configuration (the current backend): rounds of
 * torchlet (SIMD128) and TF.js alternate, so both see the same load; best rounds kept.
 */
async function pairedCase(tf, patched, Model, onnx, b, h, w, pairs = 5) {
  const { x, labels } = data(b, h, w);
  const m = await torchletW2(Model, onnx, b, h, w);
  const net = tfSetup(tf, patched, b, h, w);
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

/** Every W2 case in torchlet's builds and TF.js's configurations, then paired rounds
 * against the fastest TF.js configuration of each case. */
export async function runW2(tf, log, builds) {
  const results = { torchlet: {}, tfjs: {}, paired: {}, notes: [] };
  const onnx = new Uint8Array(await (await fetch('data/w2.onnx')).arrayBuffer());
  for (const [label, M] of builds) {
    results.torchlet[label] = {};
    for (const c of W2_CASES) {
      const r = await torchletCase(M, onnx, ...c);
      results.torchlet[label][name(c)] = r.us;
      log(`W2 ${label.padEnd(28)} ${name(c).padEnd(10)} ${r.us.toFixed(0).padStart(9)} us/step (${r.steps} steps)`);
    }
  }
  await tf.setBackend('cpu');
  const rel = checkPatchedW2(tf);
  log(`W2 patched gradients vs stock (cpu): max relative difference ${rel.toExponential(2)}`);
  results.patchedGradRelDiff = rel;
  const configs = [['tfjs cpu', 'cpu', false], ['tfjs webgl', 'webgl', false],
    ['tfjs wasm (stock)', 'wasm', false], ['tfjs wasm + customGrad', 'wasm', true]];
  const available = [];
  for (const [label, backend, patched] of configs) {
    results.tfjs[label] = {};
    let ok = false;
    try { ok = await tf.setBackend(backend); } catch (e) { ok = false; }
    if (!ok) {
      log(`W2 ${label}: backend ${backend} unavailable in this browser`);
      results.notes.push(`${label}: backend unavailable`);
      continue;
    }
    await tf.ready();
    available.push([label, backend, patched]);
    for (const c of W2_CASES) {
      let net;
      try {
        net = tfSetup(tf, patched, ...c);
        const r = await time(net.step);
        results.tfjs[label][name(c)] = r.us;
        log(`W2 ${label.padEnd(28)} ${name(c).padEnd(10)} ${r.us.toFixed(0).padStart(9)} us/step (${r.steps} steps)`);
      } catch (e) {
        results.tfjs[label][name(c)] = null;
        log(`W2 ${label.padEnd(28)} ${name(c).padEnd(10)} cannot train: ${String(e.message ?? e).slice(0, 120)}`);
      } finally {
        net?.dispose();
      }
    }
  }
  const [, ModelSimd] = builds[0];
  for (const c of W2_CASES) {
    const best = available.filter(([label]) => results.tfjs[label][name(c)])
      .sort((a, b) => results.tfjs[a[0]][name(c)] - results.tfjs[b[0]][name(c)])[0];
    if (!best) continue;
    const [label, backend, patched] = best;
    await tf.setBackend(backend);
    await tf.ready();
    const r = await pairedCase(tf, patched, ModelSimd, onnx, ...c);
    results.paired[name(c)] = { ...r, against: label };
    log(`W2 paired ${name(c).padEnd(10)} torchlet simd128 ${r.torchlet.toFixed(0).padStart(7)} us, ${label} ` +
      `${r.tfjs.toFixed(0).padStart(7)} us: TF.js/torchlet ${(r.tfjs / r.torchlet).toFixed(1)}x`);
  }
  return results;
}
