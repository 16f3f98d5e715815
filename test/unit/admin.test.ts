import { describe, expect, it } from 'vitest';
import { TenantAdmin, parseSettingsChange } from '../../core/tenants/admin.js';
import { MAX_AUDIT, type ControlsStore, type TenantControls } from '../../core/tenants/controls.js';
import { ConcurrentModificationError, TenantNotFoundError, ValidationError } from '../../core/model/errors.js';
import { TenantRegistry } from '../../core/tenants/registry.js';

/** An in-memory ControlsStore with the adapter's conditional put, and a hook to lose races. */
function memoryStore() {
  const items = new Map<string, TenantControls>();
  const store: ControlsStore & { items: typeof items; puts: number; beforePut?: (tenant: string) => void } = {
    items,
    puts: 0,
    async getControls(tenant) {
      return items.get(tenant);
    },
    async putControls(tenant, controls, expectedRev) {
      store.beforePut?.(tenant);
      store.puts++;
      if ((items.get(tenant)?.rev ?? 0) !== expectedRev) return false;
      items.set(tenant, structuredClone(controls));
      return true;
    },
  };
  return store;
}

function setup(opts: { attempts?: number } = {}) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const store = memoryStore();
  const logs: { message: string; fields: Record<string, unknown> }[] = [];
  const tenants = new TenantRegistry({
    getTenant: async (name) => (name === 'billing' ? { name, queueUrl: 'q', dlqUrl: 'd' } : undefined),
    putTenant: async () => {},
  });
  const admin = new TenantAdmin({
    controls: store,
    tenants,
    clock: { now: () => now },
    log: (message, fields) => logs.push({ message, fields }),
    ...opts,
  });
  return { admin, store, logs, tick: (ms: number) => (now += ms) };
}

describe('parseSettingsChange', () => {
  it('accepts any of the three fields, null clearing a limit', () => {
    expect(parseSettingsChange('{"maxDeliveriesPerSecond":100000,"maxSubmitsPerSecond":null,"weight":1000}')).toEqual({
      maxDeliveriesPerSecond: 100_000,
      maxSubmitsPerSecond: null,
      weight: 1000,
    });
    expect(parseSettingsChange('{"weight":1}')).toEqual({ weight: 1 });
  });

  it('accepts keyLeaseSeconds from 10 to 86400, or null for the default', () => {
    expect(parseSettingsChange('{"keyLeaseSeconds":10}')).toEqual({ keyLeaseSeconds: 10 });
    expect(parseSettingsChange('{"keyLeaseSeconds":86400,"weight":2}')).toEqual({ keyLeaseSeconds: 86_400, weight: 2 });
    expect(parseSettingsChange('{"keyLeaseSeconds":null}')).toEqual({ keyLeaseSeconds: null });
  });

  it.each([
    [undefined, /request body is required/],
    ['not json', /not JSON/],
    ['[1]', /must be a JSON object/],
    ['{}', /at least one of/],
    ['{"weight":2,"paused":true}', /unknown field 'paused'/],
    ['{"maxDeliveriesPerSecond":0}', /maxDeliveriesPerSecond must be .* from 1 to 100000/],
    ['{"maxDeliveriesPerSecond":100001}', /maxDeliveriesPerSecond must be/],
    ['{"maxSubmitsPerSecond":"5"}', /maxSubmitsPerSecond must be .* got "5"/],
    ['{"maxSubmitsPerSecond":2.5}', /maxSubmitsPerSecond must be a whole number/],
    ['{"weight":0}', /weight must be a whole number from 1 to 1000/],
    ['{"weight":1001}', /weight must be/],
    ['{"weight":null}', /weight must be .* got null/],
    [
      '{"keyLeaseSeconds":9}',
      /keyLeaseSeconds must be a whole number of seconds from 10 to 86400, or null for the default \(900\), got 9$/,
    ],
    ['{"keyLeaseSeconds":86401}', /keyLeaseSeconds must be .* got 86401/],
    ['{"keyLeaseSeconds":60.5}', /keyLeaseSeconds must be a whole number/],
    ['{"keyLeaseSeconds":"60"}', /keyLeaseSeconds must be .* got "60"/],
    ['{"keyLeaseSeconds":60,"leaseSeconds":60}', /unknown field 'leaseSeconds': the settings are .* and keyLeaseSeconds/],
  ])('refuses %s', (body, message) => {
    expect(() => parseSettingsChange(body)).toThrow(ValidationError);
    expect(() => parseSettingsChange(body)).toThrow(message);
  });
});

describe('TenantAdmin', () => {
  it('shows the defaults of a tenant nobody set controls for, and 404 for an unregistered one', async () => {
    const { admin } = setup();
    expect(await admin.get('billing')).toEqual({ tenant: 'billing', paused: false, settings: { weight: 1 }, rev: 0, changes: [] });
    await expect(admin.get('nobody')).rejects.toBeInstanceOf(TenantNotFoundError);
    await expect(admin.pause('nobody', 'ops')).rejects.toBeInstanceOf(TenantNotFoundError);
    await expect(admin.get('Bad_Name')).rejects.toBeInstanceOf(ValidationError);
  });

  it('pauses (pausedAt set), resumes, records who did it and logs each change with before and after', async () => {
    const { admin, logs, tick } = setup();
    const paused = await admin.pause('billing', 'arn:aws:iam::1:user/ops');
    expect(paused).toMatchObject({ paused: true, pausedAt: '2030-01-01T00:00:00.000Z', rev: 1 });
    expect(paused.changes).toEqual([{ at: '2030-01-01T00:00:00.000Z', by: 'arn:aws:iam::1:user/ops', action: 'pause' }]);
    tick(60_000);
    const resumed = await admin.resume('billing', 'AKIDOPS');
    expect(resumed.paused).toBe(false);
    expect(resumed).not.toHaveProperty('pausedAt');
    expect(resumed.changes.map((c) => [c.action, c.by])).toEqual([
      ['pause', 'arn:aws:iam::1:user/ops'],
      ['resume', 'AKIDOPS'],
    ]);
    expect(logs.map((l) => l.message)).toEqual(['tenant controls changed', 'tenant controls changed']);
    expect(logs[0]!.fields).toMatchObject({
      tenant: 'billing',
      action: 'pause',
      by: 'arn:aws:iam::1:user/ops',
      before: { paused: false, weight: 1 },
      after: { paused: true, weight: 1 },
    });
  });

  it('answers 200 for pause of a paused tenant and resume of a running one, writing and recording nothing', async () => {
    const { admin, store, tick } = setup();
    await admin.pause('billing', 'a');
    tick(5_000);
    const again = await admin.pause('billing', 'b');
    expect(again).toMatchObject({ paused: true, pausedAt: '2030-01-01T00:00:00.000Z', rev: 1 });
    expect(again.changes).toHaveLength(1);
    await admin.resume('billing', 'a');
    const twice = await admin.resume('billing', 'b');
    expect(twice).toMatchObject({ paused: false, rev: 2 });
    expect(store.puts).toBe(2);
    expect((await admin.setSettings('billing', '{"weight":1}', 'c')).rev).toBe(2);
    expect(store.puts).toBe(2);
  });

  it('sets, merges and clears settings; a bad body writes nothing', async () => {
    const { admin, store } = setup();
    let r = await admin.setSettings('billing', '{"maxDeliveriesPerSecond":50,"weight":3}', 'ops');
    expect(r.settings).toEqual({ maxDeliveriesPerSecond: 50, weight: 3 });
    r = await admin.setSettings('billing', '{"maxSubmitsPerSecond":20}', 'ops');
    expect(r.settings).toEqual({ maxDeliveriesPerSecond: 50, maxSubmitsPerSecond: 20, weight: 3 });
    r = await admin.setSettings('billing', '{"maxDeliveriesPerSecond":null}', 'ops');
    expect(r.settings).toEqual({ maxSubmitsPerSecond: 20, weight: 3 });
    expect(r.changes.at(-1)).toMatchObject({ action: 'settings', by: 'ops', settings: { maxSubmitsPerSecond: 20, weight: 3 } });
    expect(store.items.get('billing')).not.toHaveProperty('maxDeliveriesPerSecond');
    const puts = store.puts;
    await expect(admin.setSettings('billing', '{"weight":0}', 'ops')).rejects.toThrow(/weight must be/);
    await expect(admin.setSettings('nobody', '{"weight":0}', 'ops')).rejects.toBeInstanceOf(ValidationError);
    expect(store.puts).toBe(puts);
    expect(store.items.get('billing')!.weight).toBe(3);
  });

  it('sets the key lease (shown, recorded, logged), takes a repeat as no change, and clears it with null', async () => {
    const { admin, store, logs } = setup();
    let r = await admin.setSettings('billing', '{"keyLeaseSeconds":120}', 'ops');
    expect(r.settings).toEqual({ weight: 1, keyLeaseSeconds: 120 });
    expect(r.changes.at(-1)).toMatchObject({ action: 'settings', by: 'ops', settings: { weight: 1, keyLeaseSeconds: 120 } });
    expect(logs.at(-1)!.fields).toMatchObject({ before: { paused: false, weight: 1 }, after: { keyLeaseSeconds: 120 } });
    expect(store.items.get('billing')!.keyLeaseSeconds).toBe(120);
    expect((await admin.get('billing')).settings.keyLeaseSeconds).toBe(120);

    // The same value again changes nothing: no write, no record.
    const puts = store.puts;
    r = await admin.setSettings('billing', '{"keyLeaseSeconds":120,"weight":1}', 'ops');
    expect([r.rev, store.puts]).toEqual([1, puts]);
    expect(logs.at(-1)!.message).toBe('tenant controls unchanged');

    // Another setting keeps the lease; null clears it (back to the default, not shown).
    r = await admin.setSettings('billing', '{"weight":4}', 'ops');
    expect(r.settings).toEqual({ weight: 4, keyLeaseSeconds: 120 });
    r = await admin.setSettings('billing', '{"keyLeaseSeconds":null}', 'ops');
    expect(r.settings).toEqual({ weight: 4 });
    expect(r.rev).toBe(3);
    expect(store.items.get('billing')).not.toHaveProperty('keyLeaseSeconds');
    // Clearing a lease that is not set changes nothing.
    r = await admin.setSettings('billing', '{"keyLeaseSeconds":null}', 'ops');
    expect([r.rev, store.puts]).toEqual([3, puts + 2]);
  });

  it(`keeps the last ${MAX_AUDIT} changes, oldest first`, async () => {
    const { admin, tick } = setup();
    for (let i = 1; i <= 25; i++) {
      tick(1_000);
      await admin.setSettings('billing', JSON.stringify({ weight: i + 1 }), `op-${i}`);
    }
    const r = await admin.get('billing');
    expect(r.rev).toBe(25);
    expect(r.changes).toHaveLength(MAX_AUDIT);
    expect(r.changes[0]!.by).toBe('op-6');
    expect(r.changes.at(-1)).toMatchObject({ by: 'op-25', settings: { weight: 26 } });
  });

  it('retries a write that lost the race on rev, keeping both changes', async () => {
    const { admin, store } = setup();
    let raced = false;
    store.beforePut = (tenant) => {
      if (raced) return;
      raced = true;
      // Another operator's write lands between our read and our write.
      store.items.set(tenant, {
        paused: false,
        weight: 7,
        rev: 1,
        changes: [{ at: 0, by: 'other', action: 'settings', settings: { weight: 7 } }],
      });
    };
    const r = await admin.setSettings('billing', '{"maxDeliveriesPerSecond":10}', 'me');
    expect(r.settings).toEqual({ maxDeliveriesPerSecond: 10, weight: 7 });
    expect(r.rev).toBe(2);
    expect(r.changes.map((c) => c.by)).toEqual(['other', 'me']);
  });

  it('answers ConcurrentModification after losing every attempt, having written nothing', async () => {
    const { admin, store } = setup({ attempts: 2 });
    let rev = 0;
    store.beforePut = (tenant) => store.items.set(tenant, { paused: false, weight: 1, rev: ++rev, changes: [] });
    const err = await admin.pause('billing', 'me').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConcurrentModificationError);
    expect((err as ConcurrentModificationError).status).toBe(409);
    expect(store.puts).toBe(2);
    expect(store.items.get('billing')!.paused).toBe(false);
  });
});
