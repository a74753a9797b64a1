// Trains W1 on the variable-size digits in node with a node build of the package, the
// same recipe the page's worker uses (seeds, buckets, lr / 10 for the last third): a
// measuring tool for choosing the recipe.
//   node train-node.mjs PKG_DIR DIGITS_BIN [BATCH] [LR] [EPOCHS]
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { parseDigits, croppedDigits, batches, rng, heldOutAccuracy } from './src/digits.js';

const [pkg, bin, batch = '16', lr = '0.05', epochs = '3'] = process.argv.slice(2);
const { Model } = createRequire(import.meta.url)(path.resolve(pkg, 'torchlet.js'));
const { train, test } = croppedDigits(parseDigits(fs.readFileSync(bin)));
const B = +batch;
const model = Model.w1(1, +lr, 0.9, 0);
const steps = +epochs * (Math.ceil(train.length / B) + 10);
const stream = batches(train, B, rng(1));
let t0 = performance.now(), lossSum = 0, seen = 0, trainTime = 0;
for (let s = 1; s <= steps; s++) {
  model.lr = s - 1 < (2 * steps) / 3 ? +lr : +lr / 10;
  const b = stream.next().value;
  const t = performance.now();
  lossSum += model.trainStep(b.x, b.n, b.h, b.w, b.labels).loss;
  trainTime += performance.now() - t;
  seen += b.n;
  if (s % 100 === 0 || s === steps) {
    const te = performance.now();
    const acc = heldOutAccuracy(model, test);
    console.log(`step ${s} samples ${seen} loss ${(lossSum / 100).toFixed(3)} held-out ${(acc * 100).toFixed(1)}% ` +
      `train ${(trainTime / 1000).toFixed(1)} s eval ${((performance.now() - te) / 1000).toFixed(1)} s`);
    lossSum = 0;
  }
}
console.log(`train ${train.length} test ${test.length} total ${((performance.now() - t0) / 1000).toFixed(1)} s`);
