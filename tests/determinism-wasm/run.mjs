// Runs the determinism module in node: node run.mjs path/to/module.wasm
import { readFileSync } from 'node:fs';
const bytes = readFileSync(process.argv[2]);
const { instance } = await WebAssembly.instantiate(bytes, {});
const h = BigInt.asUintN(64, instance.exports.determinism_hash());
console.log('DETERMINISM_HASH ' + h.toString(16).padStart(16, '0'));
