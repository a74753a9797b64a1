// Runs the benchmark page (bench.html) in headless Chromium and saves bench.json; with
// --write-results, also replaces the marked block of a results file (wasm/RESULTS.md).
//   node bench.mjs [OUT_DIR] [--reverse] [--w2only] [--write-results FILE]   (needs dist/: node build.mjs)
//   node bench.mjs --format BENCH_JSON [--write-results FILE]     (block of an earlier run, e.g. CI's)
//   node bench.mjs --check FILE                                   (the block is there and well formed)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checkResultsFile, formatBlock, runMeta, writeResults } from './results.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const argv = process.argv.slice(2);
const opt = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const write = opt('--write-results');
const fail = (msg) => {
  console.error(msg);
  process.exit(2);
};

if (opt('--check')) {
  try {
    checkResultsFile(opt('--check'));
  } catch (e) {
    fail(e.message);
  }
  console.log(`${opt('--check')}: benchmark block present`);
} else if (opt('--format')) {
  const results = JSON.parse(fs.readFileSync(opt('--format'), 'utf8'));
  if (write) {
    writeResults(write, results);
    console.log(`wrote the benchmark block of ${write}`);
  } else {
    process.stdout.write(formatBlock(results));
  }
} else {
  if (write) {
    try {
      checkResultsFile(write); // before spending minutes on the run
    } catch (e) {
      if (!/must start with/.test(e.message)) fail(e.message);
    }
  }
  const { launch, serve } = await import('./e2e.mjs');
  const skip = new Set(['--write-results', write]);
  const outArg = argv.find((a) => !a.startsWith('--') && !skip.has(a));
  const out = path.resolve(outArg ?? path.join(here, '..', '..', 'target', 'wasm-e2e'));
  fs.mkdirSync(out, { recursive: true });
  const loadStart = os.loadavg()[0];
  const site = await serve(path.join(here, 'dist'));
  const ctx = await launch(path.join(out, 'chromium'));
  try {
    const page = await ctx.newPage();
    page.on('console', (m) => console.log(`[bench] ${m.text()}`));
    page.on('pageerror', (e) => console.log(`[bench] page error: ${e.message}`));
    const query = (argv.includes('--reverse') ? '&reverse' : '') + (argv.includes('--w2only') ? '&w2only' : '');
    await page.goto(`${site.url}bench.html?run${query}`);
    await page.waitForSelector('body[data-bench-done="1"]', { timeout: 10 * 60 * 1000 });
    const results = await page.evaluate(() => window.benchResults);
    const cmd = ['node wasm/demo/bench.mjs', ...argv].join(' ');
    results.meta = runMeta(loadStart, await page.evaluate(() => navigator.userAgent), cmd);
    fs.writeFileSync(path.join(out, 'bench.json'), JSON.stringify(results, null, 2));
    if (write) {
      writeResults(write, results);
      console.log(`wrote the benchmark block of ${write}`);
    }
  } finally {
    await ctx.close();
    site.stop();
  }
}
