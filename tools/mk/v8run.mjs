// Runs a Go program compiled to WASM (GOOS=wasip1) in Node's V8, the
// runtime Envoy uses by default, for `make bench`:
//   node mk/v8run.mjs prog.wasm [args...]
// The program sees the whole file system and the environment.
import { WASI } from 'node:wasi';
import { readFileSync } from 'node:fs';

const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [file, ...args], env: process.env, preopens: { '/': '/' }, returnOnExit: true });
const module = await WebAssembly.compile(readFileSync(file));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
