import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as lambda from 'aws-cdk-lib/aws-lambda';

/** The functions the constructs deploy, each pre-bundled in `dist/lambdas/<name>/index.mjs`. */
export type BundleName =
  'submit' | 'ingest' | 'tick' | 'dispatch' | 'cancel' | 'status' | 'schedules' | 'register' | 'dlq' | 'admin' | 'workflows';

const PACKAGE_NAME = 'dynein-serverless';
let cached: string | undefined;

/**
 * The directory holding the Lambda bundles: `<package root>/dist/lambdas`, the package root found
 * by walking up from this file to the `package.json` named `dynein-serverless` (from `lib/` in the
 * repository, from `dist/lib/` in the installed package).
 */
export function bundlesDir(): string {
  if (cached) return cached;
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === PACKAGE_NAME)
          return (cached = join(dir, 'dist', 'lambdas'));
      } catch {
        // not a readable package.json: keep walking up
      }
    }
    if (dirname(dir) === dir) throw new Error(`Lambda bundles: no package.json named '${PACKAGE_NAME}' above ${start}`);
  }
}

/** The pre-built code of one function; throws one line naming the fix when the bundle is missing. */
export function bundleCode(name: BundleName): lambda.Code {
  const dir = bundlesDir();
  if (!existsSync(join(dir, name, 'index.mjs'))) throw new Error(`Lambda bundles missing at ${dir}: run \`npm run build\``);
  return lambda.Code.fromAsset(join(dir, name));
}
