/**
 * `dynein local`: the local stack of `npm start`, from an installed package. The package ships it
 * as plain-node bundles (dist/local/*.mjs, built by scripts/build-local.mjs) that import dynalite,
 * fauxqs, aws-local-stepfunctions and two AWS SDK clients from the consumer's node_modules:
 * optional peer dependencies, listed in dist/local/peers.json. In the repository (this file run
 * through tsx) it starts local/start.ts itself.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { UsageError } from './errors.js';

export interface LocalOptions {
  readonly port?: string;
  readonly tenants?: string;
  readonly dataDir?: string;
}

interface Peers {
  readonly packages: readonly { name: string; range: string }[];
}

/** The packages the local stack needs that do not resolve from here, with their version ranges. */
export function missingPeers(peersFile: URL, resolve: (name: string) => unknown = (name) => import.meta.resolve(name)): Peers['packages'] {
  const { packages } = JSON.parse(readFileSync(peersFile, 'utf8')) as Peers;
  return packages.filter(({ name }) => {
    try {
      resolve(name);
      return false;
    } catch {
      return true;
    }
  });
}

/** The one line telling how to install them: `npm install -D 'dynalite@^4.0.0' ...`. */
export function installCommand(missing: Peers['packages']): string {
  const quote = (s: string) => (/^[\w@/.:-]+$/.test(s) ? s : `'${s}'`);
  return `npm install -D ${missing.map((p) => quote(`${p.name}@${p.range}`)).join(' ')}`;
}

/**
 * Starts the local stack in this process (it runs until Ctrl-C; its children are forked from
 * it). Resolves once it is ready. Throws a {@link UsageError} naming the `npm install -D` command
 * when a package it needs is not installed.
 */
export async function startLocal(o: LocalOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const fromSource = import.meta.url.endsWith('.ts');
  const start = new URL(fromSource ? '../../local/start.ts' : '../../local/start.mjs', import.meta.url);
  if (!existsSync(start))
    throw new Error(`the local stack is missing from this install (${fileURLToPath(start)}): reinstall dynein-serverless`);
  if (!fromSource) {
    const missing = missingPeers(new URL('../../local/peers.json', import.meta.url));
    if (missing.length > 0)
      throw new UsageError(`the local stack needs ${missing.map((p) => p.name).join(', ')}, not installed: ${installCommand(missing)}`);
  }
  if (o.port !== undefined) env.DYNEIN_PORT = o.port;
  if (o.tenants !== undefined) env.DYNEIN_TENANTS = o.tenants;
  if (o.dataDir !== undefined) env.DYNEIN_DATA_DIR = o.dataDir;
  await import(start.href);
}
