/**
 * The system tests' global setup: the local stack and the `dynein` CLI built from the sources
 * once per run, as plain-node bundles, so that each of the suite's ~25 local stacks and ~150 CLI
 * runs starts without tsx. `npm start` through tsx costs about 5.7 CPU-seconds a start against
 * 3.7 for the bundles (ready in 2.9 s against 1.8), a CLI command about 0.53 against 0.29: some
 * 80 CPU-seconds over the suite, on two cores it shares with itself. The bundles are built from the
 * sources of this checkout at every run (never `dist/`, which may be stale), into a folder of this
 * run inside node_modules (where their external imports resolve), removed at the end; a folder a
 * killed run left behind is removed by the next.
 *
 * The tests that are about `npm start` or `bin/dynein.js` themselves still run them
 * (`startLocalStack(env, { npmStart: true })`; test/package; `dynein ui` and `dynein local`, whose
 * assets sit beside the built CLI, not beside a bundle).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Absolute paths of this run's bundles. */
    testBuild: { localStart: string; cli: string };
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const runs = join(root, 'node_modules', '.cache', 'dynein-tests');
  const dir = join(runs, String(process.pid));
  mkdirSync(dir, { recursive: true });
  for (const pid of readdirSync(runs))
    if (pid !== String(process.pid) && !alive(Number(pid))) rmSync(join(runs, pid), { recursive: true, force: true });
  const started = Date.now();
  await Promise.all([
    promisify(execFile)(process.execPath, ['scripts/build-local.mjs', `--outdir=${join(dir, 'local')}`], { cwd: root }),
    build({
      absWorkingDir: root,
      stdin: {
        contents: "import { main } from './client/cli/index.ts';\nprocess.exitCode = await main(process.argv.slice(2));\n",
        resolveDir: root,
        sourcefile: 'dynein-cli-for-tests.ts',
        loader: 'ts',
      },
      outfile: join(dir, 'cli.mjs'),
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      sourcemap: true,
      packages: 'external',
      logLevel: 'warning',
    }),
  ]);
  project.provide('testBuild', { localStart: join(dir, 'local', 'start.mjs'), cli: join(dir, 'cli.mjs') });
  console.log(`test build: the local stack and the CLI bundled for the system tests in ${Date.now() - started} ms`);
  return () => rmSync(dir, { recursive: true, force: true });
}

/** Whether a process `pid` runs (signal 0 checks without sending). */
function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
