import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoControlsStore } from '../../adapters/dynamoControlsStore.js';
import { TenantAdmin } from '../../core/tenants/admin.js';
import { ControlsCache } from '../../core/tenants/controls.js';
import { adminHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { httpApiEventWithIam } from '../support/lambdaEvents.js';
import { createSystem, type TestSystem } from '../support/system.js';

/**
 * The operator API on dynalite with the real SDK client: the controls item (its own key beside the
 * registration, its attributes), the conditional put on `rev`, the service's races between two
 * "Lambda instances", and the handler's replies and errors.
 */
let em: Emulators;
let sys: TestSystem;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['billing', 'search'] });
});
afterAll(async () => em?.stop());

const adminEvent = (method: string, tenant: string, suffix = '', body?: string, userArn = 'arn:aws:iam::123456789012:role/ops') => {
  const path = `/v1/admin/tenants/${tenant}${suffix}`;
  const routeKey = `${method} /v1/admin/tenants/{tenant}${suffix}`;
  return httpApiEventWithIam({ method, path, body, pathParameters: { tenant }, routeKey, iam: { userArn, accessKey: 'AKIDOPS' } });
};

describe('DynamoControlsStore', () => {
  it('writes the controls item at tenant#<name>/controls, beside the registration, and reads it back strongly', async () => {
    const store = new DynamoControlsStore(sys.tableName, em.dynamo);
    expect(await store.getControls('billing')).toBeUndefined();
    const controls = {
      paused: true,
      pausedAtMs: 1_900_000_000_000,
      maxDeliveriesPerSecond: 50,
      weight: 3,
      rev: 1,
      changes: [{ at: 1_900_000_000_000, by: 'ops', action: 'pause' as const }],
    };
    expect(await store.putControls('billing', controls, 0)).toBe(true);
    expect(await store.getControls('billing')).toEqual(controls);
    const raw = await em.dynamo.send(
      new GetItemCommand({ TableName: sys.tableName, Key: { pk: { S: 'tenant#billing' }, sk: { S: 'controls' } }, ConsistentRead: true }),
    );
    expect(raw.Item).toMatchObject({
      paused: { BOOL: true },
      pausedAt: { N: '1900000000000' },
      maxDeliveriesPerSecond: { N: '50' },
      weight: { N: '3' },
      rev: { N: '1' },
      changes: { S: JSON.stringify(controls.changes) },
    });
    expect(raw.Item).not.toHaveProperty('maxSubmitsPerSecond');
    // The registration item is untouched (its stack rewrites it on deploy).
    expect((await sys.w.store.getTenant('billing'))?.queueUrl).toBe(sys.tenants.billing!.url);

    // Conditional on rev: a first write where one exists, or a stale rev, writes nothing.
    expect(await store.putControls('billing', { ...controls, paused: false, rev: 1 }, 0)).toBe(false);
    expect(await store.putControls('billing', { ...controls, paused: false, rev: 2 }, 5)).toBe(false);
    expect((await store.getControls('billing'))?.paused).toBe(true);
    const { pausedAtMs: _p, ...resumed } = { ...controls, paused: false, rev: 2 };
    expect(await store.putControls('billing', resumed, 1)).toBe(true);
    expect(await store.getControls('billing')).toEqual(resumed);
    // And the 5 s cache reads it (what dispatch and submit use).
    expect((await new ControlsCache(store).get('billing')).weight).toBe(3);
  });

  it('stores keyLeaseSeconds as a number beside the other settings, and leaves it out when absent', async () => {
    const store = new DynamoControlsStore(sys.tableName, em.dynamo);
    const key = { pk: { S: 'tenant#lease' }, sk: { S: 'controls' } };
    const controls = { paused: false, weight: 1, keyLeaseSeconds: 60, rev: 1, changes: [] };
    expect(await store.putControls('lease', controls, 0)).toBe(true);
    expect(await store.getControls('lease')).toEqual(controls);
    const raw = await em.dynamo.send(new GetItemCommand({ TableName: sys.tableName, Key: key, ConsistentRead: true }));
    expect(raw.Item).toMatchObject({ keyLeaseSeconds: { N: '60' } });
    // What the dispatcher reads for a key's lease: the cached copy.
    const cache = new ControlsCache(store);
    await cache.get('lease');
    expect(cache.peek('lease').keyLeaseSeconds).toBe(60);

    const { keyLeaseSeconds: _k, ...cleared } = { ...controls, rev: 2 };
    expect(await store.putControls('lease', cleared, 1)).toBe(true);
    expect(await store.getControls('lease')).toEqual(cleared);
    const after = await em.dynamo.send(new GetItemCommand({ TableName: sys.tableName, Key: key, ConsistentRead: true }));
    expect(after.Item).not.toHaveProperty('keyLeaseSeconds');
  });
});

describe('TenantAdmin on DynamoDB', () => {
  it('two instances changing the same tenant at once both land, one after the other (rev retries)', async () => {
    const make = () => new TenantAdmin({ controls: new DynamoControlsStore(sys.tableName, em.dynamo), tenants: sys.w.tenants });
    const [a, b] = [make(), make()];
    const results = await Promise.all([
      a.setSettings('search', '{"maxDeliveriesPerSecond":10}', 'op-a'),
      b.setSettings('search', '{"weight":5}', 'op-b'),
      a.pause('search', 'op-a'),
    ]);
    expect(results.length).toBe(3);
    const final = await a.get('search');
    expect(final).toMatchObject({ paused: true, settings: { maxDeliveriesPerSecond: 10, weight: 5 }, rev: 3 });
    expect(final.changes.map((c) => c.by).sort()).toEqual(['op-a', 'op-a', 'op-b']);
  });
});

describe('the admin handler', () => {
  it('changes an item stored at rev 0', async () => {
    const handle = adminHandler(sys.w);
    await em.dynamo.send(
      new PutItemCommand({
        TableName: sys.tableName,
        Item: { pk: { S: 'tenant#billing' }, sk: { S: 'controls' }, paused: { BOOL: false }, weight: { N: '1' }, rev: { N: '0' } },
      }),
    );
    // An item at rev 0 (written by hand): the first change lands on it.
    const put = await handle(adminEvent('PUT', 'billing', '/settings', '{"maxSubmitsPerSecond":20,"weight":2}'));
    expect(put.statusCode).toBe(200);
    expect(JSON.parse(put.body)).toMatchObject({ rev: 1, settings: { maxSubmitsPerSecond: 20, weight: 2 } });
  });

  it('serves the four routes and their errors', async () => {
    const handle = adminHandler(sys.w);
    // A fresh tenant's controls: the defaults.
    const shown = await handle(adminEvent('GET', 'search'));
    expect(shown.statusCode).toBe(200);
    const paused = JSON.parse((await handle(adminEvent('POST', 'search', '/pause'))).body);
    expect(paused).toMatchObject({ tenant: 'search', paused: true });
    const resumed = await handle(adminEvent('POST', 'search', '/resume'));
    expect(JSON.parse(resumed.body)).toMatchObject({ paused: false });
    expect(JSON.parse(resumed.body).changes.at(-1)).toMatchObject({ action: 'resume', by: 'arn:aws:iam::123456789012:role/ops' });
    const set = await handle(adminEvent('PUT', 'search', '/settings', '{"maxSubmitsPerSecond":20,"maxDeliveriesPerSecond":null}'));
    expect(set.statusCode).toBe(200);
    expect(JSON.parse(set.body).settings).toEqual({ maxSubmitsPerSecond: 20, weight: 5 });
    const lease = await handle(adminEvent('PUT', 'search', '/settings', '{"keyLeaseSeconds":30}'));
    expect(JSON.parse(lease.body).changes.at(-1)).toMatchObject({ action: 'settings', settings: { keyLeaseSeconds: 30 } });
    expect(JSON.parse((await handle(adminEvent('GET', 'search'))).body).settings).toEqual({
      maxSubmitsPerSecond: 20,
      weight: 5,
      keyLeaseSeconds: 30,
    });

    const before = await new DynamoControlsStore(sys.tableName, em.dynamo).getControls('search');
    for (const [event, status, code, says] of [
      [adminEvent('GET', 'nobody'), 404, 'TenantNotFound', /nobody/],
      [adminEvent('POST', 'nobody', '/pause'), 404, 'TenantNotFound', /nobody/],
      [adminEvent('PUT', 'search', '/settings', '{"weight":"heavy"}'), 400, 'ValidationError', /weight/],
      [adminEvent('PUT', 'search', '/settings', '{"maxDeliveriesPerSecond":0}'), 400, 'ValidationError', /maxDeliveriesPerSecond/],
      [adminEvent('PUT', 'search', '/settings', '{"keyLeaseSeconds":5}'), 400, 'ValidationError', /keyLeaseSeconds .* from 10 to 86400/],
      [adminEvent('PUT', 'search', '/settings', '{"paused":true}'), 400, 'ValidationError', /unknown field 'paused'/],
      [adminEvent('PUT', 'search', '/settings', '{'), 400, 'ValidationError', /not JSON/],
      [adminEvent('GET', 'Not_A_Tenant'), 400, 'ValidationError', /tenant name/],
    ] as const) {
      const r = await handle(event);
      const { error } = JSON.parse(r.body);
      expect([r.statusCode, error.code], event.rawPath).toEqual([status, code]);
      expect(error.message).toMatch(says);
    }
    // Nothing was written by the refused requests.
    expect(await new DynamoControlsStore(sys.tableName, em.dynamo).getControls('search')).toEqual(before);
  });
});
