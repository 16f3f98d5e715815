// `npm run build`, step 3 (COORDINATION.md contract 1): one pre-bundled Lambda per function, so a
// consumer's `cdk synth` needs neither esbuild nor Docker and deploys the bundles that were tested.
// Writes dist/lambdas/<name>/index.mjs (+ .map) from lambdas/<name>.ts: ESM, node22, minified,
// source maps, @aws-sdk/* external (the Lambda runtime provides it), everything else inlined.
// Stand-in written by the package work (#11) with exactly the contract's behaviour; the cdk
// work owns this file.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const NAMES = ['submit', 'ingest', 'tick', 'dispatch', 'cancel', 'status'];

await Promise.all(
  NAMES.map((name) =>
    build({
      absWorkingDir: root,
      entryPoints: [`lambdas/${name}.ts`],
      outfile: `dist/lambdas/${name}/index.mjs`,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      minify: true,
      sourcemap: true,
      mainFields: ['module', 'main'],
      external: ['@aws-sdk/*'],
      // ESM bundles of CommonJS dependencies need `require`.
      banner: { js: "import { createRequire as __dyneinCreateRequire } from 'module'; const require = __dyneinCreateRequire(import.meta.url);" },
      logLevel: 'warning',
    }),
  ),
);
console.log(`bundle-lambdas: ${NAMES.length} bundles in dist/lambdas/`);
