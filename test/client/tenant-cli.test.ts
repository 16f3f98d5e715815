import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { DyneinClient } from '../../client/client.js';
import { ForbiddenError, TenantNotFoundError, ValidationError } from '../../client/errors.js';
import { adminHandler, statusHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { serveApi } from '../support/localApi.js';
import { signedFetch } from '../support/localStack.js';
import { createSystem, type TestSystem } from '../support/system.js';

/**
 * The operator API behind the local API server (the admin key on the admin routes only, tenant
 * keys refused there), the SDK's methods, and `dynein tenant show|pause|resume|set` in process
 * through a local.json holding the operator key.
 */
let em: Emulators;
let sys: TestSystem;
let server: Server;
let endpoint: string;
const dataDir = mkdtempSync(join(tmpdir(), 'dynein-tenant-cli-'));
const keys = {
  demo: { accessKeyId: 'AKIDDEMO', secretAccessKey: 'demo-secret' },
  other: { accessKeyId: 'AKIDOTHER', secretAccessKey: 'o' },
};
const admin = { accessKeyId: 'AKIDADMIN', secretAccessKey: 'admin-secret' };

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['demo', 'other'] });
  ({ server, endpoint } = await serveApi(em, sys, {
    keys,
    admin,
    handlers: { status: statusHandler(sys.w), admin: adminHandler(sys.w) },
    dataDir,
    localTenants: ['demo'],
  }));
});
afterAll(async () => {
  server?.close();
  await em?.stop();
});

async function run(...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--data-dir', dataDir], { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(l) });
  return { code, out, err };
}

describe('the local API server on the admin routes', () => {
  it('lets the admin key call every admin route, and nothing else', async () => {
    expect((await signedFetch(endpoint, admin, 'GET', '/v1/admin/tenants/demo')).status).toBe(200);
    expect((await signedFetch(endpoint, admin, 'POST', '/v1/admin/tenants/other/pause')).json).toMatchObject({ paused: true });
    expect((await signedFetch(endpoint, admin, 'POST', '/v1/admin/tenants/other/resume')).json).toMatchObject({ paused: false });
    const set = await signedFetch(endpoint, admin, 'PUT', '/v1/admin/tenants/other/settings', '{"weight":4}');
    expect([set.status, set.json.settings]).toEqual([200, { weight: 4 }]);
    // The audit trail names the operator's access key id locally.
    expect(set.json.changes.at(-1)).toMatchObject({ action: 'settings', by: admin.accessKeyId });
    // The admin key has no tenant: the tenant routes refuse it, as API Gateway would without a tenant grant.
    const tenantRoute = await signedFetch(endpoint, admin, 'GET', '/v1/tenants/demo/jobs');
    expect([tenantRoute.status, tenantRoute.json]).toEqual([403, { message: 'Forbidden' }]);
  });

  it('refuses tenant keys on every admin route with 403, their own tenant included, writing nothing', async () => {
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['POST', '/pause', undefined],
      ['POST', '/resume', undefined],
      ['PUT', '/settings', '{"weight":9}'],
    ] as const) {
      const r = await signedFetch(endpoint, keys.demo, method, `/v1/admin/tenants/demo${suffix}`, body);
      expect([r.status, r.json], `${method} ${suffix}`).toEqual([403, { message: 'Forbidden' }]);
    }
    expect((await new DyneinClient({ endpoint, region: 'us-east-1', credentials: admin }).getTenantControls('demo')).rev).toBe(0);
    // The tenant key still works on its own routes.
    expect((await signedFetch(endpoint, keys.demo, 'GET', '/v1/tenants/demo/jobs')).status).toBe(200);
  });
});

describe('DyneinClient operator methods', () => {
  it('shows, pauses, resumes and sets settings with typed replies and errors', async () => {
    const ops = new DyneinClient({ endpoint, region: 'us-east-1', credentials: admin });
    const paused = await ops.pauseTenant('other');
    expect(paused.paused).toBe(true);
    expect(Date.parse(paused.pausedAt!)).toBeGreaterThan(0);
    const set = await ops.setTenantSettings('other', { maxDeliveriesPerSecond: 100, maxSubmitsPerSecond: null });
    expect(set.settings).toEqual({ maxDeliveriesPerSecond: 100, weight: 4 });
    expect((await ops.resumeTenant('other')).paused).toBe(false);
    expect((await ops.getTenantControls('other')).changes.map((c) => c.action).slice(-3)).toEqual(['pause', 'settings', 'resume']);
    await expect(ops.getTenantControls('nobody')).rejects.toBeInstanceOf(TenantNotFoundError);
    await expect(ops.setTenantSettings('other', { weight: 0 })).rejects.toBeInstanceOf(ValidationError);
    const tenantClient = new DyneinClient({ endpoint, region: 'us-east-1', credentials: keys.demo });
    await expect(tenantClient.pauseTenant('demo')).rejects.toBeInstanceOf(ForbiddenError);
  });
});

describe('dynein tenant', () => {
  it('lists show, pause, resume and set in its help', async () => {
    const help = await run('tenant', '--help');
    expect(help.code).toBe(0);
    for (const c of ['show', 'pause', 'resume', 'set']) expect(help.out.join('\n')).toMatch(new RegExp(`^  ${c} `, 'm'));
    expect((await run('tenant', 'set', '--help')).out.join('\n')).toContain('--max-deliveries-per-second');
  });

  it('shows, pauses, sets and resumes with the local operator key', async () => {
    const shown = await run('tenant', 'show', 'demo');
    expect(shown).toMatchObject({ code: 0, out: ['demo  running', '  maxDeliveriesPerSecond none  maxSubmitsPerSecond none  weight 1'] });
    const paused = await run('tenant', 'pause', 'demo');
    expect(paused.code).toBe(0);
    expect(paused.out[0]).toMatch(/^demo {2}PAUSED since \d{4}-\d\d-\d\dT/);
    expect(paused.out.at(-1)).toMatch(/ {4}\S+ {2}pause {2}by AKIDADMIN$/);
    const set = await run('tenant', 'set', 'demo', '--max-deliveries-per-second', '50', '--weight', '3', '--json');
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out[0]!)).toMatchObject({ tenant: 'demo', paused: true, settings: { maxDeliveriesPerSecond: 50, weight: 3 } });
    const cleared = await run('tenant', 'set', 'demo', '--max-deliveries-per-second', 'none', '--max-submits-per-second', '7');
    expect(cleared.out[1]).toBe('  maxDeliveriesPerSecond none  maxSubmitsPerSecond 7  weight 3');
    const resumed = await run('tenant', 'resume', 'demo', '--json');
    expect(JSON.parse(resumed.out[0]!)).toMatchObject({ paused: false, rev: 4 });
  });

  it('refuses bad command lines with one line and exit 2, and API errors with exit 1', async () => {
    for (const args of [
      ['tenant'],
      ['tenant', 'stop', 'demo'],
      ['tenant', 'pause'],
      ['tenant', 'pause', 'demo', 'other'],
      ['tenant', 'set', 'demo'],
      ['tenant', 'set', 'demo', '--weight', '0'],
      ['tenant', 'set', 'demo', '--weight', 'heavy'],
      ['tenant', 'set', 'demo', '--max-deliveries-per-second', '100001'],
      ['tenant', 'set', 'demo', '--max-submits-per-second', '-1'],
      ['tenant', 'show', 'demo', '--bogus'],
    ]) {
      const r = await run(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toHaveLength(1);
    }
    expect((await run('tenant', 'set', 'demo', '--weight', '0')).err[0]).toMatch(/--weight must be a whole number from 1 to 1000/);
    const missing = await run('tenant', 'show', 'nobody');
    expect(missing.code).toBe(1);
    expect(missing.err).toHaveLength(1);
    expect(missing.err[0]).toMatch(/^dynein: TenantNotFound \(HTTP 404\)/);
  });

  it('says how to fix a local.json without an operator key', async () => {
    const old = mkdtempSync(join(tmpdir(), 'dynein-tenant-cli-old-'));
    writeFileSync(join(old, 'local.json'), JSON.stringify({ endpoint, region: 'us-east-1', sqsEndpoint: em.sqsEndpoint, tenants: {} }));
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['tenant', 'show', 'demo', '--data-dir', old], { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code).toBe(1);
    expect(err[0]).toMatch(/no operator key .*restart it/);
  });
});
