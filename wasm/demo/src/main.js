// The page: talks to the training worker, plots progress, and turns drawings into
// native-size inputs (see README: canvas 280x280 -> 28x28 grid -> ink bounding box).
import { cropInk } from './digits.js';

const $ = (id) => document.getElementById(id);
const worker = new Worker('worker.js', { type: 'module' });
let nextId = 1;
const pending = new Map();
const history = []; // { step, loss, acc? }
/** W2's biases, BatchNorm affine parameters and classifier (TinyTL's "bias-only"), by
 * their PyTorch names in tests/golden/w2/w2.onnx. */
const W2_BIAS_ONLY = ['*.bias', 'stem.1.weight', '*.conv.1.weight', '*.conv.4.weight', '*.conv.7.weight', 'fc.weight'];

function request(msg) {
  const id = nextId++;
  worker.postMessage({ ...msg, id });
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}

function showError(message) {
  $('error').textContent = message ? `Error from the engine: ${message}` : '';
}

worker.onmessage = (e) => {
  const m = e.data;
  if (m.id && pending.has(m.id)) {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.type === 'error') p.reject(new Error(m.message));
    else p.resolve(m);
    return;
  }
  if (m.type === 'error') return showError(m.message);
  ({ ready, progress, eval: evaluated, done })[m.type]?.(m);
};

function ready(m) {
  $('data-status').textContent =
    `Ready in ${(m.ms / 1000).toFixed(1)} s: ${m.train} training and ${m.test} held-out digits, ` +
    `each cropped to its ink (native sizes), W1 with ${m.params} parameters in a ` +
    `${(m.arenaBytes / 1024).toFixed(0)} KiB arena.`;
  $('train').disabled = false;
  document.body.dataset.ready = '1';
}

function progress(m) {
  $('progress').value = m.step / m.total;
  $('step').textContent = `${m.step} / ${m.total}`;
  $('loss').textContent = m.loss.toFixed(3);
  $('train-acc').textContent = `${(100 * m.trainAcc).toFixed(1)}%`;
  $('sps').textContent = m.stepsPerSec.toFixed(1);
  $('usps').textContent = m.usPerStep.toFixed(0);
  history.push({ step: m.step, loss: m.loss });
  plot();
}

function evaluated(m) {
  $('heldout').textContent = `${(100 * m.acc).toFixed(1)}%`;
  $('heldout').dataset.acc = String(m.acc);
  history.push({ step: m.step, acc: m.acc });
  plot();
}

function done() {
  $('train').disabled = false;
  $('stop').disabled = true;
  document.body.dataset.trained = '1';
}

function plot() {
  const c = $('plot'), g = c.getContext('2d');
  const last = history.length ? history[history.length - 1].step : 1;
  g.clearRect(0, 0, c.width, c.height);
  g.strokeStyle = '#eee';
  for (let y = 0; y <= 4; y++) {
    g.beginPath(); g.moveTo(0, (y * c.height) / 4); g.lineTo(c.width, (y * c.height) / 4); g.stroke();
  }
  const line = (key, max, color) => {
    g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
    let first = true;
    for (const h of history) {
      if (h[key] === undefined) continue;
      const x = (h.step / last) * (c.width - 4) + 2;
      const y = c.height - 2 - (Math.min(h[key], max) / max) * (c.height - 4);
      if (first) g.moveTo(x, y); else g.lineTo(x, y);
      first = false;
    }
    g.stroke();
  };
  line('loss', 2.5, '#d33');
  line('acc', 1, '#27c');
}

$('train').onclick = () => {
  $('train').disabled = true;
  $('stop').disabled = false;
  history.length = 0;
  worker.postMessage({
    type: 'train', epochs: +$('epochs').value, batch: +$('batch').value,
    lr: +$('lr').value, evalEvery: 200,
  });
};
$('stop').onclick = () => worker.postMessage({ type: 'stop' });

// ---- drawing ---------------------------------------------------------------------
const pad = $('pad');
const pg = pad.getContext('2d');
let drawing = false;
let current = null; // the cropped input { h, w, data }

function clearPad() {
  pg.fillStyle = '#fff';
  pg.fillRect(0, 0, pad.width, pad.height);
  current = null;
}
clearPad();

const pos = (e) => {
  const r = pad.getBoundingClientRect();
  return [((e.clientX - r.left) * pad.width) / r.width, ((e.clientY - r.top) * pad.height) / r.height];
};
pad.addEventListener('pointerdown', (e) => {
  drawing = true;
  pad.setPointerCapture(e.pointerId);
  const [x, y] = pos(e);
  pg.strokeStyle = '#000'; pg.lineWidth = 22; pg.lineCap = 'round'; pg.lineJoin = 'round';
  pg.beginPath(); pg.moveTo(x, y); pg.lineTo(x + 0.01, y); pg.stroke();
});
pad.addEventListener('pointermove', (e) => {
  if (!drawing) return;
  const [x, y] = pos(e);
  pg.lineTo(x, y); pg.stroke();
});
pad.addEventListener('pointerup', () => {
  if (!drawing) return;
  drawing = false;
  classify();
});
$('clear').onclick = () => {
  clearPad();
  $('prediction').textContent = '–';
  $('probs').textContent = '';
  $('input-size').textContent = '–';
};

/**
 * Canvas pixels -> a 28x28 grid (each cell the mean ink of a 10x10 block of the
 * 280x280 canvas, which matches MNIST's stroke width in pixels) -> the ink's bounding
 * box plus a 1-cell margin. The crop keeps its own size: no resize to 28x28.
 */
function drawingToInput() {
  const img = pg.getImageData(0, 0, pad.width, pad.height).data;
  const G = 28, cell = pad.width / G;
  const grid = new Float32Array(G * G);
  for (let i = 0; i < pad.height; i++) {
    for (let j = 0; j < pad.width; j++) {
      const ink = 1 - img[(i * pad.width + j) * 4] / 255;
      grid[Math.floor(i / cell) * G + Math.floor(j / cell)] += ink / (cell * cell);
    }
  }
  return cropInk(grid, G, G, { threshold: 0.05, margin: 1 });
}

function showPreview(inp) {
  const c = $('preview'), g = c.getContext('2d');
  g.fillStyle = '#000'; g.fillRect(0, 0, c.width, c.height);
  const s = Math.floor(Math.min(c.width / inp.w, c.height / inp.h));
  for (let i = 0; i < inp.h; i++) {
    for (let j = 0; j < inp.w; j++) {
      const v = Math.round(255 * Math.min(1, inp.data[i * inp.w + j]));
      g.fillStyle = `rgb(${v},${v},${v})`;
      g.fillRect(j * s, i * s, s, s);
    }
  }
}

function showProbs(probs) {
  const best = probs.indexOf(Math.max(...probs));
  $('prediction').textContent = `${best} (${(100 * probs[best]).toFixed(1)}%)`;
  $('prediction').dataset.cls = String(best);
  $('probs').innerHTML = probs
    .map((p, k) => `<div class="bar">${k} <span class="fill" style="width:${(200 * p).toFixed(0)}px"></span> ${(100 * p).toFixed(1)}%</div>`)
    .join('');
}

function showPlan(h, w, plan, target = 'plan', summaryId = 'plan-summary') {
  const kib = (b) => `${(b / 1024).toFixed(1)} KiB`;
  $(target).innerHTML =
    `<p id="${summaryId}">Input 1x1x${h}x${w}: training step <b>${kib(plan.trainBytes)}</b> ` +
    `(${plan.trainBytes} bytes), prediction <b>${kib(plan.inferBytes)}</b>, of which ` +
    `parameters, gradients and SGD state ${kib(plan.persistentBytes)}.</p>` +
    '<table><tr><th>#</th><th>layer</th><th>output shape</th></tr>' +
    plan.layers.map((l, i) => `<tr><td>${i + 1}</td><td>${l.name}</td><td>[${l.shape.join(', ')}]</td></tr>`).join('') +
    '</table>';
}

async function classify() {
  const inp = drawingToInput();
  if (!inp) return;
  current = inp;
  $('input-size').textContent = `${inp.h} x ${inp.w}`;
  $('plan-h').value = inp.h;
  $('plan-w').value = inp.w;
  showPreview(inp);
  try {
    const r = await request({ type: 'predict', x: inp.data, h: inp.h, w: inp.w });
    showError('');
    showProbs(r.probs);
    showPlan(r.h, r.w, r.plan);
  } catch (err) {
    $('prediction').textContent = '–';
    $('probs').textContent = '';
    showError(err.message);
  }
}

for (let k = 0; k < 10; k++) {
  const b = document.createElement('button');
  b.textContent = String(k);
  b.id = `label-${k}`;
  b.onclick = async () => {
    if (!current) return;
    try {
      const trainable = $('bias-only').checked ? W2_BIAS_ONLY : undefined;
      const r = await request({ type: 'finetune', x: current.data, h: current.h, w: current.w, label: k, trainable });
      showError('');
      showProbs(r.probs);
      const how = trainable ? `bias-only (${r.trained.toLocaleString('en-US')} of ${r.params.toLocaleString('en-US')} parameters)` : '';
      $('finetune-status').textContent =
        `Fine-tuned 5 steps ${how}${how ? ' ' : ''}on this ${r.h}x${r.w} drawing as "${k}" (loss ${r.loss.toFixed(3)}).`;
    } catch (err) {
      showError(err.message);
    }
  };
  $('labels').appendChild(b);
}

$('plan-btn').onclick = async () => {
  const h = +$('plan-h').value, w = +$('plan-w').value;
  try {
    const r = await request({ type: 'plan', h, w });
    showError('');
    showPlan(h, w, r.plan);
  } catch (err) {
    $('plan').textContent = '';
    showError(err.message);
  }
};

$('export').onclick = async () => {
  try {
    const r = await request({ type: 'exportWeights' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([r.bytes], { type: 'application/octet-stream' }));
    a.download = 'w1.tlwt';
    a.click();
    showError('');
    $('weights-status').textContent = `Exported ${r.bytes.length} bytes (w1.tlwt).`;
  } catch (err) {
    showError(err.message);
  }
};
$('import').onchange = async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    const r = await request({ type: 'importWeights', bytes: await file.arrayBuffer() });
    showError('');
    $('weights-status').textContent = `Loaded ${r.size} bytes from ${file.name}.`;
  } catch (err) {
    $('weights-status').textContent = '';
    showError(err.message);
  } finally {
    e.target.value = '';
  }
};

// ---- load your own model ----------------------------------------------------------
/** Replaces the model with an ONNX file's (`bytes`, and `extra` for external data). */
async function loadOnnx(name, bytes, extra) {
  $('onnx-status').textContent = `Importing ${name}…`;
  try {
    const r = await request({
      type: 'loadOnnx', bytes, data: extra ? await extra.arrayBuffer() : undefined, lr: +$('lr').value,
    });
    showError('');
    $('onnx-status').textContent =
      `Loaded ${name}${extra ? ` with ${extra.name}` : ''}: ${r.params} parameters and buffers, ` +
      `${r.channels} input channel(s), a ${(r.arenaBytes / 1024).toFixed(0)} KiB arena. Press Train.`;
    showPlan(28, 28, r.plan, 'onnx-plan', 'onnx-plan-summary');
    // A fresh model: the accuracy shown is its own from now on.
    history.length = 0;
    plot();
    $('heldout').textContent = '–';
    $('heldout').dataset.acc = '0';
    delete document.body.dataset.trained;
    $('train').disabled = false;
    $('stop').disabled = true;
    document.body.dataset.model = name;
  } catch (err) {
    $('onnx-status').textContent = `${name} was not loaded; the current model is unchanged.`;
    showError(err.message);
  }
}

$('onnx').onchange = async (e) => {
  const file = e.target.files[0];
  if (!file) return;
  try {
    await loadOnnx(file.name, await file.arrayBuffer(), $('onnx-data').files[0]);
  } finally {
    e.target.value = '';
  }
};

$('load-w2').onclick = async () => {
  try {
    const res = await fetch('data/w2.onnx');
    if (!res.ok) throw new Error(`data/w2.onnx: HTTP ${res.status}`);
    await loadOnnx('w2.onnx', await res.arrayBuffer());
  } catch (err) {
    showError(err.message);
  }
};

worker.postMessage({ type: 'init' });
