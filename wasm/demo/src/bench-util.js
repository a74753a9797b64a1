// Shared by the benchmark page's modules: seeded random data and the timing loop.

/** A seeded generator of uniform numbers in [0, 1). */
export function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
}

/** Random inputs and labels of one case (the same for every library). */
export function data(b, h, w) {
  const r = lcg(b * 1000 + h * 10 + w);
  const x = new Float32Array(b * h * w).map(() => r());
  const labels = new Uint32Array(b).map(() => Math.floor(r() * 10));
  return { x, labels };
}

/**
 * Microseconds per call of `step`: after a warm-up of at least 3 calls and `warmMs`, the
 * best of 3 rounds, each the mean over at least `minMs` and `minSteps` calls (the best
 * round is the one least disturbed by other work on the machine).
 */
export async function time(step, { minMs = 500, minSteps = 3, rounds = 3, warmMs = 300 } = {}) {
  const w0 = performance.now();
  for (let i = 0; i < 3 || performance.now() - w0 < warmMs; i++) await step();
  let best = Infinity, total = 0;
  for (let k = 0; k < rounds; k++) {
    let n = 0;
    const t0 = performance.now();
    while (n < minSteps || performance.now() - t0 < minMs) {
      await step();
      n++;
    }
    best = Math.min(best, ((performance.now() - t0) * 1000) / n);
    total += n;
  }
  return { us: best, steps: total };
}
