import { writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { type ApiServerOptions, startApiServer } from '../../local/apiServer.js';
import type { TenantKeys } from '../../local/settings.js';
import type { Emulators } from './emulators.js';
import type { TestSystem } from './system.js';

/** A route a test does not serve: a call to it fails the test. */
const unused = () => Promise.reject(new Error('not in this test'));

/**
 * The local API server (SigV4 checked as API Gateway does) over a test system's handlers, and a
 * local.json in `dataDir` that points the CLI at it: `localTenants` (their keys and queues) and
 * the operator key when given.
 */
export async function serveApi(
  em: Emulators,
  sys: TestSystem,
  opts: {
    readonly keys: Readonly<Record<string, TenantKeys>>;
    readonly handlers: Partial<ApiServerOptions['handlers']>;
    readonly dataDir: string;
    readonly localTenants: readonly string[];
    readonly admin?: TenantKeys;
  },
): Promise<{ server: Server; endpoint: string }> {
  const server = await startApiServer({
    port: 0,
    region: 'us-east-1',
    keys: opts.keys,
    ...(opts.admin ? { admin: opts.admin } : {}),
    handlers: { submit: unused, status: unused, cancel: unused, ...opts.handlers },
    metrics: () => ({}),
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const tenants = Object.fromEntries(
    opts.localTenants.map((name) => [name, { ...opts.keys[name]!, queueUrl: sys.tenants[name]!.url, dlqUrl: sys.tenants[name]!.dlqUrl }]),
  );
  writeFileSync(
    join(opts.dataDir, 'local.json'),
    JSON.stringify({ endpoint, region: 'us-east-1', sqsEndpoint: em.sqsEndpoint, tenants, ...(opts.admin ? { admin: opts.admin } : {}) }),
  );
  return { server, endpoint };
}
