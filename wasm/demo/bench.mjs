// Runs only the benchmark page (bench.html) in headless Chromium and saves bench.json.
//   node bench.mjs [OUT_DIR]
import fs from 'node:fs';
import path from 'node:path';
import { launch, serve } from './e2e.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const out = path.resolve(process.argv[2] ?? path.join(here, '..', '..', 'target', 'wasm-e2e'));
fs.mkdirSync(out, { recursive: true });
const site = await serve(path.join(here, 'dist'));
const ctx = await launch(path.join(out, 'chromium'));
try {
  const page = await ctx.newPage();
  page.on('console', (m) => console.log(`[bench] ${m.text()}`));
  page.on('pageerror', (e) => console.log(`[bench] page error: ${e.message}`));
  await page.goto(`${site.url}bench.html?run${process.argv.includes("--reverse") ? "&reverse" : ""}`);
  await page.waitForSelector('body[data-bench-done="1"]', { timeout: 10 * 60 * 1000 });
  fs.writeFileSync(path.join(out, 'bench.json'), JSON.stringify(await page.evaluate(() => window.benchResults), null, 2));
} finally {
  await ctx.close();
  site.stop();
}
