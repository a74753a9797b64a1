// The browser benchmark's block of wasm/RESULTS.md: what a run needs to record about
// itself (date, commit, machine, load, browser, command), the block formatted from
// bench.json, and the replacement of the block between the markers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const BEGIN = '<!-- bench:begin -->';
export const END = '<!-- bench:end -->';
const CASES = ['b1 28x28', 'b32 28x28', 'b1 12x20'];
const W2_CASES = ['b1 28x28', 'b32 28x28', 'b1 20x14'];

function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '?';
  }
}

/** The run's description, taken when it ends; `loadStart` is the 1-minute load at its start. */
export function runMeta(loadStart, userAgent, command) {
  const dirty = sh('git', ['status', '--porcelain', '--untracked-files=no']);
  return {
    date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    commit: sh('git', ['rev-parse', '--short', 'HEAD']) + (dirty && dirty !== '?' ? ' with uncommitted changes' : ''),
    cpu: os.cpus()[0]?.model?.trim() ?? '?',
    cores: os.cpus().length,
    loadStart: loadStart.toFixed(2),
    loadEnd: os.loadavg()[0].toFixed(2),
    browser: (String(userAgent).match(/(Headless)?Chrome\/[\d.]+/) ?? ['?'])[0],
    node: process.version,
    command,
  };
}

const us = (v) => (v == null ? 'cannot train' : Math.round(v).toLocaleString('en-US'));

/**
 * One network's table: a row per torchlet build and TF.js configuration, the ratio of the
 * fastest TF.js to torchlet (SIMD128), and the paired rounds (`against` names the TF.js
 * side when it is not the patched wasm backend).
 */
function table(title, cases, r) {
  const rows = [`| µs per ${title} training step | ${cases.join(' | ')} |`, `|---|${cases.map(() => '---:').join('|')}|`];
  const row = (label, cells) => rows.push(`| ${label} | ${cells.join(' | ')} |`);
  for (const [label, v] of Object.entries(r.torchlet ?? {})) row(label, cases.map((c) => us(v[c])));
  for (const [label, v] of Object.entries(r.tfjs ?? {})) {
    row(label, cases.map((c) => (c in v ? us(v[c]) : 'unavailable')));
  }
  const ours = r.torchlet?.['torchlet wasm+simd128'] ?? {};
  row('**fastest TF.js / torchlet wasm+simd128**', cases.map((c) => {
    const best = Math.min(...Object.values(r.tfjs ?? {}).map((v) => v[c] ?? Infinity));
    return Number.isFinite(best) && ours[c] ? `**${(best / ours[c]).toFixed(1)}x**` : '-';
  }));
  const paired = r.paired ?? {};
  if (Object.keys(paired).length) {
    const against = [...new Set(Object.values(paired).map((p) => p.against ?? 'tfjs wasm + customGrad'))];
    row(`paired rounds: torchlet wasm+simd128 / ${against.join(' or ')}`, cases.map((c) =>
      (paired[c] ? `${us(paired[c].torchlet)} / ${us(paired[c].tfjs)}` +
        (against.length > 1 ? ` (${paired[c].against})` : '') : '-')));
    row('**paired ratio TF.js / torchlet**', cases.map((c) =>
      (paired[c] ? `**${(paired[c].tfjs / paired[c].torchlet).toFixed(1)}x**` : '-')));
  }
  return rows;
}

/** The markdown block for bench.json's content (`results.meta` from `runMeta`). */
export function formatBlock(r) {
  const m = r.meta ?? {};
  const w2 = r.w2
    ? ['', ...table('W2', W2_CASES, r.w2), '',
      'W2 is tests/golden/w2/w2.onnx in torchlet (PyTorch\'s eval-mode export: no dropout) and the same ' +
        'network in TF.js ops, both in training mode (BatchNorm batch statistics). Patched TF.js W2 ' +
        `gradients against the stock ones (cpu backend): max relative difference ${r.w2.patchedGradRelDiff?.toExponential?.(1) ?? '?'}.`]
    : [];
  return [
    `Measured ${m.date ?? '?'} at commit ${m.commit ?? '?'} in ${m.browser ?? '?'} (node ${m.node ?? '?'}), ` +
      `on ${m.cpu ?? '?'} (${m.cores ?? '?'} cores), load average ${m.loadStart ?? '?'} at the start and ` +
      `${m.loadEnd ?? '?'} at the end, by`,
    `\`${m.command ?? '?'}\`:`,
    '',
    ...table('W1', CASES, r),
    '',
    `Patched TF.js filter gradient against the stock one (cpu backend): max relative difference ` +
      `${r.patchedGradRelDiff?.toExponential?.(1) ?? '?'}.`,
    ...w2,
    '',
  ].join('\n');
}

/** `text` with the marked block replaced by `block`; throws when the markers are not one pair. */
export function replaceBlock(text, block) {
  const b = text.split(BEGIN).length - 1, e = text.split(END).length - 1;
  const i = text.indexOf(BEGIN), j = text.indexOf(END);
  if (b !== 1 || e !== 1 || j < i) throw new Error(`needs one "${BEGIN}" before one "${END}" (found ${b} and ${e})`);
  return `${text.slice(0, i)}${BEGIN}\n${block}${text.slice(j)}`;
}

/** Throws unless `file` has one marked block whose first line is a "Measured" line. */
export function checkResultsFile(file) {
  const text = fs.readFileSync(file, 'utf8');
  replaceBlock(text, '');
  const block = text.slice(text.indexOf(BEGIN) + BEGIN.length).trimStart();
  if (!/^Measured .* at commit .* by\n/.test(block) || !block.includes('| torchlet wasm+simd128 |')) {
    throw new Error(`${file}: the block must start with a "Measured ... at commit ... by" line and hold the table`);
  }
}

/** Writes the block of `results` into `file`. */
export function writeResults(file, results) {
  fs.writeFileSync(file, replaceBlock(fs.readFileSync(file, 'utf8'), formatBlock(results)));
}
