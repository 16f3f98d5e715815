// How esbuild bundles the job browser's script (client/ui/browser/, TypeScript) into the one
// `app.js` the page loads. Shared by `npm run build` (scripts/build-ui.mjs writes
// dist/client/ui/app.js) and by the `dynein ui` server run from the sources (client/ui/appScript.ts
// bundles in memory), so both serve the same script. Plain JavaScript, so that the build script
// runs it on plain node; tsc neither checks nor emits it (its types: bundleOptions.d.mts).
import { fileURLToPath } from 'node:url';

export const uiBundleOptions = {
  entryPoints: [fileURLToPath(new URL('./browser/main.ts', import.meta.url))],
  bundle: true,
  // One classic script (`<script src="app.js">`, no module loader): its names stay out of the page's globals.
  format: 'iife',
  platform: 'browser',
  // Browsers of 2020 on (the script uses optional chaining, async/await, spread).
  target: 'es2020',
  // Readable as served: a 20 KB script from localhost gains nothing from minifying, and whoever
  // opens the browser's devtools (or the package's dist/) reads the code that runs, no source map needed.
  minify: false,
  sourcemap: false,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
};
