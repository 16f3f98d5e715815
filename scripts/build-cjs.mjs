// `npm run build`, after tsc: the CommonJS twin of every module the package's entry points reach,
// for `require('dynein-serverless')` (and `/lambda`, `/cdk`) from CommonJS code: a `cdk init`
// project's Jest runtime, ts-node, older tools. Each module `dist/x/y.js` gets `dist/x/y.cjs`
// (transpiled file by file, not bundled, so one process loads each module once: the entry points
// share their error classes) and each `dist/x/y.d.ts` gets `dist/x/y.d.cts`, with relative
// specifiers pointing at the twins. The ESM and CommonJS graphs are separate module instances: a
// program that loads both gets two copies of each class (docs/install.md).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build, transform } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const ENTRIES = ['client/index.ts', 'client/lambda.ts', 'lib/index.ts'];
const started = Date.now();

// The modules the entry points reach (ours only; packages stay `require`s of the consumer's).
const graph = await build({
  absWorkingDir: root,
  entryPoints: ENTRIES,
  bundle: true,
  write: false,
  platform: 'node',
  format: 'esm',
  packages: 'external',
  metafile: true,
  logLevel: 'silent',
  outdir: 'unused',
});
const sources = Object.keys(graph.metafile.inputs).filter((f) => f.endsWith('.ts') && !f.startsWith('node_modules/'));

/** `./x.js` (or `../a/b.js`) → `./x.cjs`: the relative specifiers of our own modules. */
const toCjs = (code, quote) =>
  code.replace(new RegExp(`(require\\(|from |import\\()${quote}(\\.\\.?/[^${quote}]+)\\.js${quote}`, 'g'), `$1${quote}$2.cjs${quote}`);

let declarations = 0;
for (const source of sources) {
  const base = source.replace(/\.ts$/, '');
  const esm = `${root}dist/${base}.js`;
  if (!existsSync(esm)) throw new Error(`build-cjs: ${source} reached from an entry point but tsc wrote no dist/${base}.js`);
  const text = readFileSync(`${root}${source}`, 'utf8');
  // import.meta has no CommonJS form: its url is this file's, as in the ESM build.
  const metaUrl = text.includes('import.meta.url')
    ? {
        define: { 'import.meta.url': '__dyneinImportMetaUrl' },
        banner: 'const __dyneinImportMetaUrl = require("node:url").pathToFileURL(__filename).href;',
      }
    : {};
  const { code, warnings } = await transform(text, {
    loader: 'ts',
    format: 'cjs',
    platform: 'node',
    target: 'node22',
    sourcefile: source,
    ...metaUrl,
    logLevel: 'silent',
  });
  if (warnings.length > 0) throw new Error(`build-cjs: ${source}: ${warnings.map((w) => w.text).join('; ')}`);
  if (/\bimport\.meta\b/.test(code)) throw new Error(`build-cjs: ${source} uses import.meta beyond .url, which has no CommonJS form`);
  writeFileSync(`${root}dist/${base}.cjs`, toCjs(code, '"'));
  const dts = `${root}dist/${base}.d.ts`;
  if (existsSync(dts)) {
    const text = readFileSync(dts, 'utf8').replace(/\n\/\/# sourceMappingURL=.*\n?$/, '\n');
    writeFileSync(`${root}dist/${base}.d.cts`, toCjs(toCjs(text, "'"), '"'));
    declarations++;
  }
}
console.log(
  `build-cjs: ${sources.length} CommonJS modules and ${declarations} declaration files beside dist/**/*.js (${Date.now() - started} ms)`,
);
