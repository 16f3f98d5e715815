// `npm run build`, last step: the local stack (`npm start` in the repo, `dynein local` from the
// installed package) as four plain-node ESM bundles in dist/local/: start.mjs forks services.mjs
// (fauxqs; it forks tableService.mjs, dynalite) and compute.mjs (API, event source, tick). Our code and its small runtime
// deps (powertools, middy) are inlined; dynalite, fauxqs, aws-local-stepfunctions and @aws-sdk/*
// stay imports, resolved from the consumer's node_modules (optional peer dependencies, installed
// with `npm install -D` only by those who run the local stack). The bare packages the bundles
// import are written to dist/local/peers.json, which `dynein local` checks before it starts (those
// imported dynamically only on AWS's paths are not among them).
// `--outdir=DIR` (inside the repository, so that the bundles resolve its node_modules) writes them
// there instead: the system tests run the local stack from such a copy (test/support/testBuild.ts).
import { builtinModules } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const outdirArg = process.argv.find((a) => a.startsWith('--outdir='));
const outdir = outdirArg ? outdirArg.slice('--outdir='.length) : 'dist/local';
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
const EXTERNAL = ['dynalite', 'fauxqs', 'aws-local-stepfunctions', '@aws-sdk/*'];
/** Never inside a local-stack bundle: the CDK side and the build tools. */
const FORBIDDEN = /node_modules\/(aws-cdk-lib|constructs|esbuild|tsx|typescript)\//;

const result = await build({
  absWorkingDir: root,
  entryPoints: {
    start: 'local/start.ts',
    services: 'local/services.ts',
    tableService: 'local/tableService.ts',
    compute: 'local/compute.ts',
  },
  outdir,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node22',
  minify: true,
  sourcemap: true,
  mainFields: ['module', 'main'],
  external: EXTERNAL,
  // ESM bundles of CommonJS dependencies need `require`.
  banner: {
    js: "import { createRequire as __dyneinCreateRequire } from 'module'; const require = __dyneinCreateRequire(import.meta.url);",
  },
  metafile: true,
  logLevel: 'warning',
});

const inputs = Object.keys(result.metafile.inputs);
const forbidden = inputs.filter((f) => FORBIDDEN.test(f));
if (forbidden.length > 0) throw new Error(`build-local: the local stack bundles must not contain ${forbidden.join(', ')}`);

const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
const packageOf = (spec) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');
const imported = new Set(
  Object.values(result.metafile.outputs)
    .flatMap((o) => o.imports)
    // A dynamic import loads only on a path the local stack never takes (the Step Functions starter:
    // the local tick starts in process): not a package the local stack needs.
    .filter((i) => i.external && i.kind !== 'dynamic-import' && !builtins.has(i.path))
    .map((i) => packageOf(i.path)),
);
const peers = [...imported].filter((p) => !(p in (pkg.dependencies ?? {}))).sort();
const undeclared = peers.filter((p) => !(p in (pkg.peerDependencies ?? {})));
if (undeclared.length > 0)
  throw new Error(
    `build-local: the local stack imports ${undeclared.join(', ')}: declare each in package.json peerDependencies (optional) or dependencies`,
  );
writeFileSync(
  resolve(root, outdir, 'peers.json'),
  `${JSON.stringify({ packages: peers.map((name) => ({ name, range: pkg.peerDependencies[name] })) }, null, 2)}\n`,
);
console.log(`build-local: ${outdir}/{start,services,tableService,compute}.mjs; the local stack needs ${peers.join(', ')}`);
