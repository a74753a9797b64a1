// The training worker: owns the torchlet model, so the page never freezes. It trains
// in chunks of steps and yields between chunks, so predictions, plans and fine-tuning
// requests from the page are answered while training runs.
import init, { Model } from './pkg/web/index.js';
import { parseDigits, croppedDigits, batches, rng, heldOutAccuracy } from './digits.js';

let model = null;
let data = null;
let training = false;
let run = 0; // the current training loop; loading a model ends the old one

const post = (m) => self.postMessage(m);
const tick = () => new Promise((r) => setTimeout(r, 0));

async function setup() {
  const t0 = performance.now();
  await init();
  const buf = await (await fetch('data/digits.bin')).arrayBuffer();
  data = croppedDigits(parseDigits(buf));
  model = Model.w1(1, 0.1, 0.9, 0);
  post({
    type: 'ready',
    train: data.train.length,
    test: data.test.length,
    params: model.numParameters,
    arenaBytes: model.arenaBytes,
    ms: performance.now() - t0,
  });
}

async function train({ epochs, batch, lr, evalEvery }) {
  if (training) return;
  training = true;
  const mine = ++run;
  const stream = batches(data.train, batch, rng(1));
  const stepsPerEpoch = Math.ceil(data.train.length / batch) + 10; // bucket remainders
  const total = epochs * stepsPerEpoch;
  let step = 0, lossSum = 0, accSum = 0, n = 0, busy = 0;
  const t0 = performance.now();
  while (step < total && training && run === mine) {
    const c0 = performance.now();
    for (let k = 0; k < 10 && step < total; k++, step++) {
      // Step decay: the last third of the run at a tenth of the rate.
      model.lr = step < (2 * total) / 3 ? lr : lr / 10;
      const b = stream.next().value;
      const s = model.trainStep(b.x, b.n, b.h, b.w, b.labels);
      lossSum += s.loss;
      accSum += s.accuracy;
      n++;
    }
    busy += performance.now() - c0;
    post({
      type: 'progress', step, total, loss: lossSum / n, trainAcc: accSum / n,
      stepsPerSec: (1000 * step) / busy, usPerStep: (1000 * busy) / step,
      elapsed: (performance.now() - t0) / 1000,
    });
    lossSum = accSum = n = 0;
    if (step % evalEvery < 10 || step >= total) {
      post({ type: 'eval', step, acc: heldOutAccuracy(model, data.test) });
    }
    await tick();
  }
  if (run !== mine) return; // a loaded model replaced this one: nothing to report
  training = false;
  post({ type: 'done', step });
}

function planOf(h, w) {
  const p = model.plan(1, h, w);
  const j = JSON.parse(p.toJSON());
  p.free();
  return j;
}

const handlers = {
  init: setup,
  train,
  stop() { training = false; },
  predict({ x, h, w }) {
    const plan = planOf(h, w);
    const probs = Array.from(model.predict(x, 1, h, w));
    return { type: 'prediction', h, w, probs, plan };
  },
  plan({ h, w }) {
    return { type: 'plan', h, w, plan: planOf(h, w) };
  },
  async loadOnnx({ bytes, data, lr = 0.05 }) {
    // Stop a running training loop (it exits at its next chunk) and swap the model only
    // once the new one is built: a refused file leaves the current model in place.
    const next = await Model.fromOnnx(new Uint8Array(bytes), data ? new Uint8Array(data) : undefined, lr, 0.9, 0);
    training = false;
    run++;
    model.free();
    model = next;
    return {
      type: 'loaded', params: model.numParameters, arenaBytes: model.arenaBytes,
      channels: model.inChannels, plan: planOf(28, 28),
    };
  },
  exportWeights() {
    const bytes = model.exportWeights();
    return { type: 'weights', bytes };
  },
  importWeights({ bytes }) {
    model.importWeights(new Uint8Array(bytes));
    return { type: 'imported', size: bytes.byteLength };
  },
  // `trainable`: name patterns of the only parameters that train (bias-only), with
  // BatchNorm statistics frozen, for these steps; afterwards everything trains again.
  finetune({ x, h, w, label, steps = 5, lr = 0.01, trainable }) {
    if (trainable) model.setTrainable(trainable);
    const trained = model.trainedParameters;
    const keep = model.lr;
    model.lr = lr;
    let loss = NaN;
    try {
      for (let i = 0; i < steps; i++) loss = model.trainStep(x, 1, h, w, new Uint32Array([label])).loss;
    } finally {
      model.lr = keep;
      if (trainable) model.setTrainable([]);
    }
    const probs = Array.from(model.predict(x, 1, h, w));
    return { type: 'finetuned', h, w, label, loss, probs, trained, params: model.trainedParameters };
  },
};

self.onmessage = async (e) => {
  const { id, type } = e.data;
  try {
    const r = await handlers[type](e.data);
    if (r) post({ ...r, id });
  } catch (err) {
    // Engine errors arrive as JS Errors carrying the engine's message.
    post({ type: 'error', id, request: type, message: err instanceof Error ? err.message : String(err) });
  }
};
