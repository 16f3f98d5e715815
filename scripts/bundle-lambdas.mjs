#!/usr/bin/env node
/**
 * Bundles the Lambda functions for the CDK constructs (contract 1 in COORDINATION.md):
 * `lambdas/<name>.ts` → `dist/lambdas/<name>/index.mjs` (+ `index.mjs.map`), ESM for Node.js 22,
 * minified, with source maps, `@aws-sdk/*` left to the Lambda runtime and everything else inlined.
 * The constructs deploy these files as they are (`lambda.Code.fromAsset`), so a consumer's
 * `cdk synth` needs neither esbuild nor Docker, and deploys exactly the bundles that were tested.
 *
 *   node scripts/bundle-lambdas.mjs              build every bundle
 *   node scripts/bundle-lambdas.mjs --if-stale   build only if a bundle is missing or older than
 *                                                a file it was built from (what `cdk synth` and
 *                                                the construct tests run first)
 *
 * Plain node (no tsx): it uses esbuild's JS API. Concurrent runs (test workers) take a lock, so
 * a bundle is never read half-written.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The functions the constructs deploy: `lambdas/<name>.ts` each. */
export const LAMBDA_NAMES = [
  'submit',
  'ingest',
  'tick',
  'dispatch',
  'cancel',
  'status',
  'register',
  'schedules',
  'dlq',
  'admin',
  'workflows',
];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'lambdas');
const MANIFEST = join(OUT, 'manifest.json');
const LOCK = join(ROOT, 'dist', '.bundle-lambdas.lock');
const SELF = fileURLToPath(import.meta.url);

// ESM bundles of CommonJS dependencies need `require`.
const BANNER = "import { createRequire as __dyneinCreateRequire } from 'module'; const require = __dyneinCreateRequire(import.meta.url);";

/** Builds every bundle; returns the files it was built from (relative to the repository). */
export async function bundleLambdas() {
  const esbuild = await import('esbuild');
  const inputs = new Set([relative(ROOT, SELF)]);
  for (const name of LAMBDA_NAMES) {
    const result = await esbuild.build({
      absWorkingDir: ROOT,
      entryPoints: [join(ROOT, 'lambdas', `${name}.ts`)],
      outfile: join(OUT, name, 'index.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node24',
      minify: true,
      sourcemap: 'external',
      sourcesContent: false,
      mainFields: ['module', 'main'],
      banner: { js: BANNER },
      external: ['@aws-sdk/*'],
      metafile: true,
      write: false,
      logLevel: 'warning',
    });
    mkdirSync(join(OUT, name), { recursive: true });
    for (const file of result.outputFiles) {
      // Written whole, then renamed: a reader never sees half a file.
      const tmp = `${file.path}.${process.pid}.tmp`;
      writeFileSync(tmp, file.contents);
      renameSync(tmp, file.path);
    }
    for (const input of Object.keys(result.metafile.inputs)) inputs.add(input);
  }
  const list = [...inputs].sort();
  writeFileSync(
    MANIFEST,
    `${JSON.stringify({ note: 'Inputs of the Lambda bundles (scripts/bundle-lambdas.mjs --if-stale compares their times with this file).', bundles: LAMBDA_NAMES, inputs: list }, null, 1)}\n`,
  );
  return list;
}

/** Why the bundles must be (re)built, or undefined when they are up to date. */
export function staleReason() {
  let manifest;
  let builtAt;
  try {
    manifest = JSON.parse(readFileSync(MANIFEST, 'utf8'));
    builtAt = statSync(MANIFEST).mtimeMs;
  } catch {
    return 'no bundles yet';
  }
  if (!LAMBDA_NAMES.every((n) => manifest.bundles?.includes(n))) return 'the list of functions changed';
  for (const name of LAMBDA_NAMES) {
    try {
      statSync(join(OUT, name, 'index.mjs'));
    } catch {
      return `dist/lambdas/${name}/index.mjs is missing`;
    }
  }
  for (const input of manifest.inputs ?? []) {
    let mtime;
    try {
      mtime = statSync(join(ROOT, input)).mtimeMs;
    } catch {
      return `${input} is gone`;
    }
    if (mtime > builtAt) return `${input} changed`;
  }
  return undefined;
}

/**
 * Builds the bundles if they are missing or stale, under a lock (test workers run this at once).
 * Resolves once fresh bundles are in place.
 */
export async function ensureLambdaBundles({ quiet = false } = {}) {
  if (staleReason() === undefined) return false;
  mkdirSync(dirname(LOCK), { recursive: true });
  for (const started = Date.now(); ;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch {
      // Someone else builds: wait for them, then look again. A lock older than two minutes is a crashed run's.
      let age = 0;
      try {
        age = Date.now() - statSync(LOCK).mtimeMs;
      } catch {
        continue;
      }
      if (age > 120_000) rmSync(LOCK, { recursive: true, force: true });
      else if (Date.now() - started > 180_000)
        throw new Error(`bundle-lambdas: ${LOCK} has been held for 3 minutes; remove it if no build runs`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    const reason = staleReason();
    if (reason === undefined) return false;
    const t0 = Date.now();
    await bundleLambdas();
    if (!quiet) process.stderr.write(`bundle-lambdas: ${LAMBDA_NAMES.length} bundles in dist/lambdas (${reason}; ${Date.now() - t0} ms)\n`);
    return true;
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === SELF) {
  const ifStale = process.argv.includes('--if-stale');
  try {
    if (ifStale) await ensureLambdaBundles();
    else {
      const t0 = Date.now();
      const inputs = await bundleLambdas();
      process.stderr.write(
        `bundle-lambdas: ${LAMBDA_NAMES.length} bundles in dist/lambdas from ${inputs.length} files (${Date.now() - t0} ms)\n`,
      );
    }
  } catch (err) {
    process.stderr.write(`bundle-lambdas: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
