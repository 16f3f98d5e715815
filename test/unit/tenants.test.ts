import { describe, expect, it } from 'vitest';
import { TenantNotFoundError, ValidationError } from '../../core/model/errors.js';
import type { TenantRecord, TenantStore } from '../../core/model/ports.js';
import { TenantRegistry } from '../../core/tenants/registry.js';

/** A registry store that counts reads, over a map the test edits. */
function countingStore(initial: TenantRecord[]) {
  const records = new Map(initial.map((r) => [r.name, r]));
  const store: TenantStore & { reads: number } = {
    reads: 0,
    async getTenant(name) {
      store.reads++;
      return records.get(name);
    },
    async putTenant(r) {
      records.set(r.name, r);
    },
  };
  return store;
}

const demo: TenantRecord = { name: 'demo', queueUrl: 'https://q/demo', dlqUrl: 'https://q/demo-dlq' };

describe('TenantRegistry', () => {
  it('reads a tenant once per ttl and concurrent lookups share one read', async () => {
    let now = 1_000;
    const store = countingStore([demo]);
    const reg = new TenantRegistry(store, { ttlMs: 30_000, clock: { now: () => now } });
    const all = await Promise.all([reg.require('demo'), reg.require('demo'), reg.lookup('demo')]);
    expect(all).toEqual([demo, demo, demo]);
    expect(store.reads).toBe(1);
    now += 14_999;
    await reg.require('demo');
    expect(store.reads).toBe(1);
    now += 31_000; // expired, nobody looked meanwhile: the lookup reads
    await reg.require('demo');
    expect(store.reads).toBe(2);
  });

  it('reads a copy past half its life again in the background, serving it meanwhile', async () => {
    let now = 0;
    const records = new Map([[demo.name, demo]]);
    let reads = 0;
    let release: (() => void) | undefined;
    const slow: TenantStore = {
      async getTenant(name) {
        reads++;
        if (reads > 1) await new Promise<void>((r) => (release = r)); // the refresh hangs until released
        return records.get(name);
      },
      putTenant: async () => {},
    };
    const reg = new TenantRegistry(slow, { ttlMs: 30_000, clock: { now: () => now } });
    await reg.require('demo');
    now = 20_000;
    const moved = { ...demo, queueUrl: 'https://q/demo-2' };
    records.set(demo.name, moved);
    // Answered from the copy at once, although the read it started has not returned.
    await expect(reg.require('demo')).resolves.toEqual(demo);
    expect(reads).toBe(2);
    await expect(reg.require('demo')).resolves.toEqual(demo); // one refresh at a time
    expect(reads).toBe(2);
    release!();
    await new Promise((r) => setImmediate(r));
    await expect(reg.require('demo')).resolves.toEqual(moved);
    now = 20_000 + 29_999; // the refreshed copy lives a full ttl from its read
    await expect(reg.require('demo')).resolves.toEqual(moved);
  });

  it('answers 404 for an unknown tenant and notices a new one after the short negative ttl', async () => {
    let now = 0;
    const store = countingStore([]);
    const reg = new TenantRegistry(store, { negativeTtlMs: 2_000, clock: { now: () => now } });
    await expect(reg.require('late')).rejects.toBeInstanceOf(TenantNotFoundError);
    await store.putTenant({ ...demo, name: 'late' });
    now += 1_999;
    await expect(reg.require('late')).rejects.toBeInstanceOf(TenantNotFoundError);
    now += 1;
    await expect(reg.require('late')).resolves.toMatchObject({ name: 'late' });
  });

  it('refuses a malformed name without reading', async () => {
    const store = countingStore([demo]);
    const reg = new TenantRegistry(store);
    for (const bad of ['Demo', '-demo', 'a'.repeat(41), '', 'de mo']) {
      await expect(reg.require(bad)).rejects.toBeInstanceOf(ValidationError);
    }
    expect(store.reads).toBe(0);
  });

  it('does not cache a failed read', async () => {
    const store = countingStore([demo]);
    let fail = true;
    const flaky: TenantStore = {
      getTenant: async (n) => (fail ? Promise.reject(new Error('network')) : store.getTenant(n)),
      putTenant: store.putTenant,
    };
    const reg = new TenantRegistry(flaky);
    await expect(reg.require('demo')).rejects.toThrow('network');
    fail = false;
    await expect(reg.require('demo')).resolves.toEqual(demo);
  });
});

describe('TenantRegistry with the deployment’s queue URLs', () => {
  const queues = {
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/111/p-t-{tenant}',
    dlqUrl: 'https://sqs.eu-west-1.amazonaws.com/111/p-d-{tenant}',
  };
  const own = (name: string): TenantRecord => ({
    name,
    queueUrl: `https://sqs.eu-west-1.amazonaws.com/111/p-t-${name}`,
    dlqUrl: `https://sqs.eu-west-1.amazonaws.com/111/p-d-${name}`,
  });

  it('uses a record naming the tenant’s own queues; refuses one naming another tenant’s, account’s or region’s, and says why', async () => {
    const refused: [string, string][] = [];
    const store = countingStore([
      own('a'),
      { ...own('b'), queueUrl: own('a').queueUrl },
      { ...own('c'), dlqUrl: own('c').dlqUrl.replace('/111/', '/222/') },
      { ...own('d'), queueUrl: own('d').queueUrl.replace('eu-west-1', 'us-east-1') },
    ]);
    const reg = new TenantRegistry(store, { queues, onRefused: (t, r) => void refused.push([t, r]) });
    expect(await reg.require('a')).toEqual(own('a'));
    for (const t of ['b', 'c', 'd']) {
      expect(await reg.lookup(t)).toBeUndefined();
      await expect(reg.require(t)).rejects.toBeInstanceOf(TenantNotFoundError);
    }
    // Cached like a record: one read and one report per tenant, not one per look.
    expect(refused.map(([t]) => t)).toEqual(['b', 'c', 'd']);
    expect(refused[0]![1]).toBe(`tenant 'b' names queue ${own('a').queueUrl}, not its own queue ${own('b').queueUrl}`);
    expect(refused[1]![1]).toMatch(/^tenant 'c' names DLQ https:\/\/sqs\.eu-west-1\.amazonaws\.com\/222\/p-d-c, not its own DLQ/);
  });

  it('a refused record fixed in the table is used once read again', async () => {
    let now = 0;
    const store = countingStore([{ ...own('b'), queueUrl: own('a').queueUrl }]);
    const reg = new TenantRegistry(store, { queues, ttlMs: 1_000, clock: { now: () => now } });
    expect(await reg.lookup('b')).toBeUndefined();
    await store.putTenant(own('b'));
    now = 1_001;
    expect(await reg.lookup('b')).toEqual(own('b'));
  });
});
