// `npm run build`, after tsc: the job browser's script (client/ui/browser/, TypeScript) bundled by
// esbuild into dist/client/ui/app.js, beside the `dynein ui` server that serves it
// (client/ui/appScript.ts). The options are those the server uses to bundle in memory when it runs
// from the sources (client/ui/bundleOptions.mjs). `node scripts/build-ui.mjs [outfile]` writes
// elsewhere (a check of the build without touching dist/).
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { uiBundleOptions } from '../client/ui/bundleOptions.mjs';

const outfile = process.argv[2] ?? fileURLToPath(new URL('../dist/client/ui/app.js', import.meta.url));
const result = await build({ ...uiBundleOptions, outfile, metafile: true });
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`build-ui: ${outfile} (${Math.round(bytes / 1024)} KB)`);
