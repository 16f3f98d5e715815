/**
 * Phase 5: each Lambda as deployed — bundled by esbuild with the options the CDK construct gives
 * `NodejsFunction` (lib/dyneinScheduler.ts) — its size, and the time a fresh Node process takes to
 * import it (the module part of a cold start: top-level configuration and client construction).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { median, progress } from './support.js';

export const LAMBDAS = ['submit', 'ingest', 'dispatch', 'tick', 'status', 'cancel'] as const;

export interface BundleResult {
  bytes: number;
  sourceMapBytes: number;
  /** Median time to `import()` the bundle in a fresh process. */
  loadMs: number;
  /** Median wall time of the whole `node` process (start, import, exit). */
  processMs: number;
  runs: number;
}

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * The bundling options of lib/dyneinScheduler.ts (`bundling: { format: ESM, target: 'node24',
 * minify, sourceMap, mainFields, banner, externalModules: ['@aws-sdk/*'] }`), as esbuild options.
 * Keep the two in step.
 */
export const CDK_BUNDLING = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  minify: true,
  sourcemap: true,
  mainFields: ['module', 'main'],
  banner: {
    js: "import { createRequire as __dyneinCreateRequire } from 'module'; const require = __dyneinCreateRequire(import.meta.url);",
  },
  external: ['@aws-sdk/*'],
} as const;

export async function runBundles(opts: { runs: number }): Promise<Record<string, BundleResult>> {
  // Inside the project, so that the external @aws-sdk/* packages resolve as the runtime provides them.
  const outRoot = join(root, 'node_modules', '.cache', 'dynein-bench-bundles');
  rmSync(outRoot, { recursive: true, force: true });
  const out: Record<string, BundleResult> = {};
  for (const name of LAMBDAS) {
    const dir = join(outRoot, name);
    mkdirSync(dir, { recursive: true });
    const outfile = join(dir, 'index.mjs');
    await build({
      ...CDK_BUNDLING,
      mainFields: [...CDK_BUNDLING.mainFields],
      external: [...CDK_BUNDLING.external],
      entryPoints: [join(root, 'lambdas', `${name}.ts`)],
      outfile,
      logLevel: 'error',
    });
    const env = {
      PATH: process.env.PATH ?? '',
      AWS_REGION: 'us-east-1',
      POWERTOOLS_METRICS_DISABLED: 'true',
      DYNEIN_TABLE: 'dynein-bench',
      DYNEIN_INBOUND_QUEUE_URL: 'https://sqs.us-east-1.amazonaws.com/000000000000/dynein-inbound',
      DYNEIN_ID_KEY: Buffer.alloc(32, 7).toString('base64'),
    };
    const script = `const t = performance.now(); await import(${JSON.stringify(pathToFileURL(outfile).href)}); process.stdout.write(String(performance.now() - t));`;
    const loads: number[] = [];
    const walls: number[] = [];
    for (let i = 0; i < opts.runs; i++) {
      const t0 = performance.now();
      const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env, encoding: 'utf8' });
      walls.push(performance.now() - t0);
      loads.push(Number(stdout));
    }
    out[name] = {
      bytes: statSync(outfile).size,
      sourceMapBytes: statSync(`${outfile}.map`).size,
      loadMs: +median(loads).toFixed(1),
      processMs: +median(walls).toFixed(1),
      runs: opts.runs,
    };
    progress(`bundle ${name}: ${(out[name].bytes / 1024).toFixed(0)} KiB, import ${out[name].loadMs} ms (median of ${opts.runs})`);
  }
  rmSync(outRoot, { recursive: true, force: true });
  return out;
}
