import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * package.json as other teams install it (#11): the two entry points, the files whitelist, and
 * dependencies that a client-only install can live with. What npm actually packs and installs is
 * checked end to end by .ci/consumer-check.sh; this catches a wrong manifest in a second.
 */
interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  type: string;
  exports: Record<string, string | Record<string, Record<string, string>>>;
  files: string[];
  license?: string;
  sideEffects?: boolean;
  engines: Record<string, string>;
  bin: Record<string, string>;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
}
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as Manifest;

/**
 * Every package a module imports at run time (not `import type`), following relative imports
 * from the entry files. Returns the bare package names and the files visited.
 */
function runtimeImports(entries: string[]): { packages: Set<string>; files: Set<string> } {
  const packages = new Set<string>();
  const files = new Set<string>();
  const builtins = new Set(builtinModules);
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/^(?:import|export)\s+(?<typeOnly>type\s+)?(?:[^'";]*?\s+from\s+)?'(?<spec>[^']+)'/gm)) {
      const { typeOnly, spec } = m.groups ?? {};
      if (spec === undefined) throw new Error(`${file}: an import without a specifier: ${m[0]}`);
      if (typeOnly) continue;
      if (spec.startsWith('.')) {
        const target = join(dirname(file), spec.replace(/\.js$/, '.ts'));
        if (existsSync(target)) queue.push(target);
        continue;
      }
      if (spec.startsWith('node:') || builtins.has(spec)) continue;
      packages.add(
        spec
          .split('/')
          .slice(0, spec.startsWith('@') ? 2 : 1)
          .join('/'),
      );
    }
  }
  return { packages, files };
}

describe('package.json', () => {
  it('is the installable dynein-serverless, ESM, with a real version', () => {
    expect(pkg.name).toBe('dynein-serverless');
    expect(pkg.private).toBeUndefined();
    expect(pkg.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.type).toBe('module');
  });

  it('exports the client as ".", the Lambda wrapper as "./lambda", the constructs as "./cdk", and package.json; ESM and CommonJS, types first', () => {
    const both = (base: string) => ({
      import: { types: `./dist/${base}.d.ts`, default: `./dist/${base}.js` },
      require: { types: `./dist/${base}.d.cts`, default: `./dist/${base}.cjs` },
    });
    expect(pkg.exports).toEqual({
      '.': both('client/index'),
      './lambda': both('client/lambda'),
      './cdk': both('lib/index'),
      './openapi.yaml': './docs/openapi.yaml',
      './package.json': './package.json',
    });
    for (const [entry, source] of [
      ['.', 'client/index.ts'],
      ['./lambda', 'client/lambda.ts'],
      ['./cdk', 'lib/index.ts'],
    ] as const) {
      for (const condition of Object.values(pkg.exports[entry] as Record<string, Record<string, string>>)) {
        expect(Object.keys(condition)[0]).toBe('types');
      }
      expect(existsSync(source), `${source} (the source of ${entry})`).toBe(true);
    }
    expect(pkg.sideEffects).toBe(false);
  });

  it('keeps Powertools out of the client entry: only "./lambda" loads it', () => {
    const client = runtimeImports(['client/index.ts']);
    expect([...client.packages].filter((p) => p.startsWith('@aws-lambda-powertools/'))).toEqual([]);
    expect([...client.files].map((f) => relative('.', f))).not.toContain('client/lambda.ts');
    expect([...runtimeImports(['client/lambda.ts']).packages]).toContain('@aws-lambda-powertools/batch');
  });

  it('supports Node 22.12 and newer (require(esm) without a flag) and runs the Lambdas on nodejs24.x', () => {
    expect(pkg.engines.node).toBe('>=22.12');
    expect(readFileSync('scripts/bundle-lambdas.mjs', 'utf8')).toMatch(/target: 'node24'/);
  });

  it('ships only built output, the CLI and the docs, under the Apache-2.0 licence', () => {
    expect(pkg.files).toEqual(['dist', 'bin/dynein.js', 'docs', 'README.md', 'CHANGELOG.md']);
    // npm packs LICENSE whatever `files` says; the field is what registries and scanners read.
    expect(pkg.license).toBe('Apache-2.0');
    expect(readFileSync('LICENSE', 'utf8')).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
    expect(readFileSync('CHANGELOG.md', 'utf8')).toMatch(/^## \[Unreleased\]|^## \[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}$/m);
    expect(pkg.bin).toEqual({ dynein: 'bin/dynein.js' });
    expect(pkg.scripts.prepack).toBe('npm run build');
    expect(pkg.scripts.build).toMatch(/tsc -p tsconfig\.build\.json && node scripts\/build-cjs\.mjs && node scripts\/bundle-lambdas\.mjs/);
  });

  it('makes aws-cdk-lib, constructs and the local stack optional peers, kept as devDependencies', () => {
    for (const name of Object.keys(pkg.peerDependencies)) {
      expect(pkg.peerDependenciesMeta[name]?.optional, name).toBe(true);
      expect(pkg.devDependencies[name], `${name} is a devDependency of the repo`).toBeDefined();
      expect(pkg.dependencies[name], `${name} is not a dependency`).toBeUndefined();
    }
    expect(Object.keys(pkg.peerDependencies)).toEqual(
      expect.arrayContaining(['aws-cdk-lib', 'constructs', 'dynalite', 'fauxqs', 'aws-local-stepfunctions']),
    );
    for (const heavy of ['aws-cdk-lib', 'constructs', 'esbuild', 'tsx', 'typescript'])
      expect(pkg.dependencies[heavy], heavy).toBeUndefined();
  });

  it("declares every package the client and the CLI import at run time, and nothing they don't", () => {
    const { packages, files } = runtimeImports(['client/index.ts', 'client/lambda.ts', 'client/cli/index.ts']);
    expect([...files].map((f) => relative('.', f)).filter((f) => !/^(client|core)\//.test(f))).toEqual([]);
    const typesOnly = Object.keys(pkg.dependencies).filter((d) => d.startsWith('@types/'));
    expect([...packages].sort()).toEqual(
      Object.keys(pkg.dependencies)
        .filter((d) => !typesOnly.includes(d))
        .sort(),
    );
  });
});
