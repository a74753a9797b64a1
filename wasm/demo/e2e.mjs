// End-to-end test of the demo in headless Chromium (Debian's chromium, playwright-core):
// train until the held-out accuracy passes 90%, draw a digit with the mouse, check the
// prediction and the arena plan, fine-tune, feed a bad size and check the engine's
// error, and save a screenshot; then load an ONNX file exported from PyTorch (and a
// refused one), check its plan, and train it past ONNX_BAR; then W2 (mobile-fcn): a
// bias-only fine-tune on the drawing and a full update past W2_BAR. Exits non-zero on
// any failure.
//   node e2e.mjs [OUT_DIR] [--bench]   (serves dist/ with python3 -m http.server on 127.0.0.1)
// --bench then runs the benchmark page (bench.html) in the same browser.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { runMeta } from './results.mjs';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core'); // found through NODE_PATH (.ci/install.sh)

const here = path.dirname(new URL(import.meta.url).pathname);
const outArg = process.argv.slice(2).find((a) => !a.startsWith('--'));
const out = path.resolve(outArg ?? path.join(here, '..', '..', 'target', 'wasm-e2e'));
const TRAIN_TIMEOUT_MS = 8 * 60 * 1000;
// "Load your own model": W1 exported by PyTorch (torch.onnx.export, TorchScript
// exporter; tests/golden/make_onnx_zoo.py) must pass this held-out accuracy on the digits.
const ONNX_FIXTURE = path.join(here, '..', '..', 'tests', 'golden', 'onnx', 'w1.ts.onnx');
const ONNX_BAR = 0.9;
// W2 "mobile-fcn", pretrained in PyTorch on 28x28 digits (the page's "Load W2"), trained
// fully on the cropped digits in the page must pass this held-out accuracy.
const W2_BAR = 0.9;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitForServer(url) {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server at ${url} did not start`);
}

export async function launch(scratch) {
  for (const d of ['tmp', 'config', 'cache', 'profile']) fs.mkdirSync(path.join(scratch, d), { recursive: true });
  return chromium.launchPersistentContext(path.join(scratch, 'profile'), {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: {
      ...process.env,
      TMPDIR: path.join(scratch, 'tmp'),
      XDG_CONFIG_HOME: path.join(scratch, 'config'),
      XDG_CACHE_HOME: path.join(scratch, 'cache'),
    },
    viewport: { width: 1100, height: 1500 },
  });
}

export async function serve(dir) {
  const port = await freePort();
  const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dir], {
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}/`;
  await waitForServer(url);
  return { url, stop: () => server.kill() };
}

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

async function drawStroke(page, points) {
  const box = await page.locator('#pad').boundingBox();
  await page.mouse.move(box.x + points[0][0], box.y + points[0][1]);
  await page.mouse.down();
  for (const [x, y] of points.slice(1)) await page.mouse.move(box.x + x, box.y + y, { steps: 8 });
  await page.mouse.up();
}

async function bench(ctx, url) {
  const loadStart = os.loadavg()[0];
  const page = await ctx.newPage();
  page.on('console', (m) => console.log(`[bench] ${m.text()}`));
  await page.goto(`${url}bench.html?run`);
  await page.waitForSelector('body[data-bench-done="1"]', { timeout: 10 * 60 * 1000 });
  const results = await page.evaluate(() => window.benchResults);
  const cmd = 'bash .ci/test.sh wasm (node wasm/demo/e2e.mjs OUT --bench)';
  results.meta = runMeta(loadStart, await page.evaluate(() => navigator.userAgent), cmd);
  fs.writeFileSync(path.join(out, 'bench.json'), JSON.stringify(results, null, 2));
  console.log(`benchmark results in ${path.join(out, 'bench.json')}`);
}

/** Waits until the held-out accuracy passes `bar` (training started); returns it and the seconds. */
async function trainPast(page, bar) {
  const t0 = Date.now();
  let acc = 0;
  while (acc <= bar) {
    if (Date.now() - t0 > TRAIN_TIMEOUT_MS) throw new Error(`held-out accuracy ${acc} after ${TRAIN_TIMEOUT_MS} ms`);
    if (await page.$('body[data-trained="1"]')) throw new Error(`training finished at held-out accuracy ${acc}`);
    await page.waitForTimeout(1000);
    acc = Number(await page.getAttribute('#heldout', 'data-acc'));
  }
  return { acc, secs: (Date.now() - t0) / 1000 };
}

async function main() {
  fs.mkdirSync(out, { recursive: true });
  const site = await serve(path.join(here, 'dist'));
  const ctx = await launch(path.join(out, 'chromium'));
  const problems = [];
  try {
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
    const fetched = []; // every URL the page and its worker requested
    ctx.on('request', (r) => fetched.push(new URL(r.url()).pathname));
    const wasmFetched = () => fetched.filter((p) => p.endsWith('.wasm')).join(', ');
    await page.goto(site.url);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    console.log(await page.textContent('#data-status'));

    // 1. Train until the held-out accuracy passes 90%.
    await page.click('#train');
    const { acc, secs } = await trainPast(page, 0.9);
    const stats = await page.textContent('.stats');
    check(acc > 0.9, `held-out accuracy ${(acc * 100).toFixed(1)}% > 90% after ${secs.toFixed(0)} s (${stats.replace(/\s+/g, ' ').trim()})`);
    await page.click('#stop');

    // 2. Draw a "7" with the mouse: a prediction and an arena plan appear.
    await drawStroke(page, [[70, 60], [210, 60], [120, 230]]);
    await page.waitForSelector('#prediction[data-cls]', { timeout: 30000 });
    const pred = await page.textContent('#prediction');
    const size = await page.textContent('#input-size');
    check(/^\d \(\d+\.\d%\)$/.test(pred), `prediction shown: "${pred}" for a drawing fed at ${size}`);
    check((await page.locator('#probs .bar').count()) === 10, 'ten class probabilities shown');
    const [h, w] = size.split(' x ').map(Number);
    check(h > 4 && w > 4 && !(h === 28 && w === 28), `input kept its native cropped size ${h}x${w}`);
    const summary = await page.textContent('#plan-summary');
    check(summary.includes(`1x1x${h}x${w}`) && /training step [\d.]+ KiB/.test(summary), `arena plan shown: "${summary}"`);
    check((await page.locator('#plan tr').count()) === 12, 'plan lists the 11 layers of W1');
    const lastShape = await page.textContent('#plan tr:last-child td:last-child');
    check(lastShape === '[1, 10]', `last layer shape ${lastShape}`);

    // 3. Fine-tune on the drawing with its right label.
    await page.click('#label-7');
    await page.waitForFunction(() => document.querySelector('#finetune-status').textContent.length > 0, null, { timeout: 30000 });
    check(true, `fine-tune: ${await page.textContent('#finetune-status')}`);

    // 4. A bad input (a size too small for W1) shows the engine's error.
    await page.fill('#plan-h', '3');
    await page.fill('#plan-w', '3');
    await page.click('#plan-btn');
    await page.waitForFunction(() => document.querySelector('#error').textContent.length > 0, null, { timeout: 30000 });
    const err = await page.textContent('#error');
    check(/^Error from the engine: (max_pool2d|conv2d|adaptive_avg_pool2d)/.test(err), `engine error shown: "${err}"`);
    await page.screenshot({ path: path.join(out, 'screenshot.png'), fullPage: true });
    check(true, `screenshot saved to ${path.join(out, 'screenshot.png')}`);

    // 5. The model is still usable: plan a good size again.
    await page.fill('#plan-h', '12');
    await page.fill('#plan-w', '20');
    await page.click('#plan-btn');
    await page.waitForFunction(() => document.querySelector('#error').textContent === '', null, { timeout: 30000 });
    check((await page.textContent('#plan-summary')).includes('1x1x12x20'), 'plan works again after the error');

    // 6. Weights: export (a download), a corrupt file is refused, the export loads back.
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
    const saved = path.join(out, 'w1.tlwt');
    await download.saveAs(saved);
    const blob = fs.readFileSync(saved);
    check(blob.subarray(0, 4).toString('latin1') === 'TLWT' && blob.length > 6218 * 4, `weights exported: ${blob.length} bytes`);
    const bad = Buffer.from(blob);
    bad[bad.length >> 1] ^= 0x40;
    await page.setInputFiles('#import', { name: 'bad.tlwt', mimeType: 'application/octet-stream', buffer: bad });
    await page.waitForFunction(() => document.querySelector('#error').textContent.length > 0, null, { timeout: 30000 });
    const werr = await page.textContent('#error');
    check(werr.startsWith('Error from the engine: corrupt data'), `corrupt weights refused: "${werr}"`);
    await page.setInputFiles('#import', saved);
    await page.waitForFunction(() => document.querySelector('#weights-status').textContent.startsWith('Loaded'), null, { timeout: 30000 });
    check((await page.textContent('#error')) === '', `weights loaded back: ${await page.textContent('#weights-status')}`);

    // 7. Load your own model: a file that is not ONNX is refused with the importer's
    // message; then W1 exported by PyTorch loads, plans (per-node shapes) and trains
    // on the digits past ONNX_BAR.
    check(fetched.includes('/pkg/web/torchlet_bg.wasm') && !fetched.some((p) => p.includes('onnx')),
      `training layers and weights downloaded the engine only: ${wasmFetched()}`);
    await page.setInputFiles('#onnx', { name: 'bad.onnx', mimeType: 'application/octet-stream', buffer: Buffer.from('not onnx') });
    await page.waitForFunction(() => document.querySelector('#error').textContent.length > 0, null, { timeout: 30000 });
    const oerr = await page.textContent('#error');
    check(oerr.startsWith('Error from the engine: not a readable ONNX model'), `bad ONNX file refused: "${oerr}"`);
    await page.setInputFiles('#onnx', ONNX_FIXTURE);
    await page.waitForFunction(() => document.querySelector('#onnx-status').textContent.startsWith('Loaded'), null, { timeout: 60000 });
    check((await page.textContent('#error')) === '', `ONNX model loaded: ${await page.textContent('#onnx-status')}`);
    check(fetched.filter((p) => p === '/pkg/onnx/torchlet_onnx_bg.wasm').length === 1,
      `the importer was downloaded once, on the first ONNX file: ${wasmFetched()}`);
    const rows = await page.locator('#onnx-plan tr').count();
    const first = await page.textContent('#onnx-plan tr:nth-child(2) td:nth-child(2)');
    const firstShape = await page.textContent('#onnx-plan tr:nth-child(2) td:last-child');
    const onnxLast = await page.textContent('#onnx-plan tr:last-child td:last-child');
    check(rows > 8 && first === 'conv2d' && firstShape === '[1, 8, 28, 28]' && onnxLast === '[1, 10]',
      `ONNX plan: ${rows - 1} nodes, first ${first} ${firstShape}, last ${onnxLast}; ${await page.textContent('#onnx-plan-summary')}`);
    await page.click('#train');
    const onnx = await trainPast(page, ONNX_BAR);
    check(onnx.acc > ONNX_BAR, `w1.ts.onnx (PyTorch export) trained in the page: held-out accuracy ${(onnx.acc * 100).toFixed(1)}% > ${ONNX_BAR * 100}% after ${onnx.secs.toFixed(0)} s`);
    await page.click('#stop');
    await page.screenshot({ path: path.join(out, 'screenshot-onnx.png'), fullPage: true });

    // 8. W2: "Load W2" imports tests/golden/w2/w2.onnx; a bias-only fine-tune on the
    // drawing trains only its biases, BatchNorm affine parameters and classifier; then
    // the full update trains it on the cropped digits past W2_BAR.
    await page.click('#load-w2');
    await page.waitForFunction(() => document.querySelector('#onnx-status').textContent.startsWith('Loaded w2.onnx'), null, { timeout: 60000 });
    const w2First = await page.textContent('#onnx-plan tr:nth-child(2) td:last-child');
    check((await page.textContent('#error')) === '' && w2First === '[1, 8, 14, 14]',
      `W2 loaded: ${await page.textContent('#onnx-status')} (stem output ${w2First})`);
    await page.check('#bias-only');
    await page.evaluate(() => { document.querySelector('#finetune-status').textContent = ''; });
    await page.click('#label-7');
    await page.waitForFunction(() => document.querySelector('#finetune-status').textContent.length > 0, null, { timeout: 30000 });
    const ft = await page.textContent('#finetune-status');
    check((await page.textContent('#error')) === '' && ft.includes('bias-only (1,722 of 18,602 parameters)'),
      `W2 bias-only fine-tune: ${ft}`);
    await page.uncheck('#bias-only');
    await page.click('#train');
    const w2 = await trainPast(page, W2_BAR);
    check(w2.acc > W2_BAR, `W2 (full update) trained in the page: held-out accuracy ${(w2.acc * 100).toFixed(1)}% > ${W2_BAR * 100}% after ${w2.secs.toFixed(0)} s`);
    await page.click('#stop');
    await page.screenshot({ path: path.join(out, 'screenshot-w2.png'), fullPage: true });

    check(problems.length === 0, `no page or console errors${problems.length ? ': ' + problems.join('; ') : ''}`);
    await page.close();

    // 7. The benchmark harness (numbers, not a test), in the same browser run.
    if (process.argv.includes('--bench')) await bench(ctx, site.url);
  } finally {
    await ctx.close();
    site.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(`e2e FAILED: ${e.stack ?? e}`);
    process.exit(1);
  });
}
