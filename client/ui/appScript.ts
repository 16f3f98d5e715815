import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/**
 * Whether this module runs from its TypeScript source (a clone: `npm start`, `bin/dynein.js` and
 * the tests run it through tsx) rather than from the package's build (`dist/client/ui/appScript.js`).
 */
export const FROM_SOURCES = import.meta.url.endsWith('.ts');

let script: Promise<string> | undefined;

/**
 * The job browser's script (`app.js`): client/ui/browser/ bundled by esbuild with the options of
 * bundleOptions.mjs. From the sources it is bundled in memory on the first call, so a clone needs
 * no build and never serves a stale one; from the package it is the file `npm run build` wrote
 * beside this module (scripts/build-ui.mjs). Read once: a failure is not kept, the next call tries again.
 */
export function appScript(): Promise<string> {
  script ??= (FROM_SOURCES ? bundleSources() : readBuilt()).catch((err: unknown) => {
    script = undefined;
    throw err;
  });
  return script;
}

/** esbuild, a devDependency, is loaded only here: the installed package has none and never comes here. */
async function bundleSources(): Promise<string> {
  const [{ build }, { uiBundleOptions }] = await Promise.all([import('esbuild'), import('./bundleOptions.mjs')]);
  const result = await build({ ...uiBundleOptions, write: false });
  const [bundle] = result.outputFiles;
  if (!bundle) throw new Error('esbuild wrote no app.js for the job browser');
  return bundle.text;
}

async function readBuilt(): Promise<string> {
  const file = new URL('./app.js', import.meta.url);
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    throw new Error(`the job browser's script ${fileURLToPath(file)} is missing: run \`npm run build\` (it bundles client/ui/browser/)`);
  }
}
