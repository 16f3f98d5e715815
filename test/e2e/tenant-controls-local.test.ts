import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../client/cli.js';
import { signedFetch, startLocalStack } from '../support/localStack.js';

/**
 * `npm start` as a user runs it: local.json's operator key ("admin") calls the admin routes, a
 * tenant key gets 403 there; the key and a pause survive a restart of the whole stack.
 */
type Stack = Awaited<ReturnType<typeof startLocalStack>>;
const running: Stack[] = [];
afterAll(async () => {
  for (const s of running) await s.stop();
});

async function cli(dataDir: string, ...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--data-dir', dataDir], { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(l) });
  return { code, out, err };
}

describe('the operator key of npm start', () => {
  it('calls the admin routes (tenant keys get 403), and stays the same, with the pause, across a restart', async () => {
    const first = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta' });
    running.push(first);
    const local = await first.waitForLocalJson(undefined, 60_000);
    expect(local.admin).toEqual({ accessKeyId: expect.stringMatching(/^AKIA[0-9A-F]{16}$/), secretAccessKey: expect.any(String) });
    const admin = local.admin!;
    expect(Object.values(local.tenants).map((t) => t.accessKeyId)).not.toContain(admin.accessKeyId);

    const shown = await signedFetch(local.endpoint, admin, 'GET', '/v1/admin/tenants/alpha');
    expect([shown.status, shown.json.paused]).toEqual([200, false]);
    for (const [method, path] of [
      ['GET', '/v1/admin/tenants/alpha'],
      ['POST', '/v1/admin/tenants/alpha/pause'],
      ['PUT', '/v1/admin/tenants/beta/settings'],
    ] as const) {
      const r = await signedFetch(local.endpoint, local.tenants.alpha!, method, path, method === 'PUT' ? '{"weight":2}' : undefined);
      expect(r.status, `${method} ${path}`).toBe(403);
    }
    expect((await signedFetch(local.endpoint, admin, 'GET', '/v1/tenants/alpha/jobs')).status).toBe(403);

    const paused = await cli(first.dataDir, 'tenant', 'pause', 'alpha');
    expect(paused.code).toBe(0);
    expect(paused.out[0]).toMatch(/^alpha {2}PAUSED since /);
    expect((await cli(first.dataDir, 'tenant', 'set', 'beta', '--weight', '5')).code).toBe(0);

    await first.stop();
    const second = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta' }, { dataDir: first.dataDir });
    running.push(second);
    const again = await second.waitForLocalJson(undefined, 60_000);
    expect(again.admin).toEqual(admin);
    const show = await cli(second.dataDir, 'tenant', 'show', 'alpha', '--json');
    expect(show.code).toBe(0);
    expect(JSON.parse(show.out[0]!)).toMatchObject({
      tenant: 'alpha',
      paused: true,
      changes: [{ action: 'pause', by: admin.accessKeyId }],
    });
    expect(JSON.parse((await cli(second.dataDir, 'tenant', 'show', 'beta', '--json')).out[0]!).settings).toEqual({ weight: 5 });
  }, 150_000);
});
