/**
 * `dynein-serverless/cdk` (lib/) loads no runtime code: nothing it imports, directly or through
 * core/, is under adapters/, lambdas/ or local/, or is the AWS SDK, esbuild or tsx. The functions
 * deploy pre-built bundles instead (scripts/bundle-lambdas.mjs).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const IMPORT = /^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm;

/** Every module the file imports, transitively: relative files (as repo paths) and packages. */
function closure(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2]!;
      if (spec.startsWith('.')) visit(relative(ROOT, resolve(ROOT, dirname(file), spec)).replace(/\.js$/, '.ts'));
      else packages.add(spec);
    }
  };
  visit(entry);
  return { files, packages };
}

describe('lib/index.ts', () => {
  const { files, packages } = closure('lib/index.ts');

  it('reaches lib/ and core/ only', () => {
    expect(files.size).toBeGreaterThan(5);
    expect([...files].filter((f) => !/^(lib|core)\//.test(f))).toEqual([]);
  });

  it('imports no runtime package: only aws-cdk-lib, constructs and node builtins', () => {
    expect([...packages].filter((p) => !/^(aws-cdk-lib(\/|$)|constructs$|node:)/.test(p)).sort()).toEqual([]);
  });

  it('the check sees imports at all (negative control on a Lambda entry)', () => {
    const lambda = closure('lambdas/dispatch.ts');
    expect([...lambda.files].some((f) => f.startsWith('adapters/'))).toBe(true);
    expect([...lambda.packages].some((p) => p.startsWith('@aws-sdk/'))).toBe(true);
  });
});
