import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoKeySlots } from '../../adapters/dynamoKeySlots.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, type TestSystem } from '../support/system.js';

/**
 * The slots of concurrency keys (docs/flow-control.md) on the DynamoDB emulator: the limit is the
 * latest submitted, a take is idempotent for a job that holds a slot, never more holders than the
 * limit however many take at once, expired leases are evicted only as read.
 */
let em: Emulators;
let sys: TestSystem;
let slots: DynamoKeySlots;
beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['alpha'] });
  slots = new DynamoKeySlots(sys.tableName, em.dynamo);
});
afterAll(async () => em?.stop());

const HOUR = 3_600_000;

describe('key slots', () => {
  it('gives out at most the limit at once, whoever takes, and again once one is freed', async () => {
    const now = Date.now();
    await slots.setLimit('alpha', 'customer-1', 2, now);
    const takes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => slots.take('alpha', 'customer-1', `job-${i}`, now + HOUR, 2, now)),
    );
    const won = takes.flatMap((t, i) => (t === true ? [`job-${i}`] : []));
    expect(won).toHaveLength(2);
    const full = takes.find((t) => t !== true);
    expect(full).toBeDefined();
    expect([...(full as Exclude<typeof full, true | undefined>).holders.keys()].sort()).toEqual([...won].sort());
    // A job holding a slot takes it again (a retried send, a re-acquired row): still two.
    expect(await slots.take('alpha', 'customer-1', won[0]!, now + 2 * HOUR, 2, now)).toBe(true);
    expect(await slots.take('alpha', 'customer-1', 'job-late', now + HOUR, 2, now)).not.toBe(true);
    await slots.release('alpha', 'customer-1', won[0]!);
    await slots.release('alpha', 'customer-1', won[0]!); // a repeated report frees nothing more
    expect(await slots.take('alpha', 'customer-1', 'job-late', now + HOUR, 2, now)).toBe(true);
    expect(await slots.take('alpha', 'customer-1', 'job-later', now + HOUR, 2, now)).not.toBe(true);
    // Another key, and another tenant's key of the same name, have slots of their own.
    expect(await slots.take('alpha', 'customer-2', 'job-x', now + HOUR, 1, now)).toBe(true);
    expect(await slots.take('beta', 'customer-1', 'job-y', now + HOUR, 1, now)).toBe(true);
  });

  it('keeps the latest submitted limit, whatever order the submits are ingested in', async () => {
    const now = Date.now();
    await slots.setLimit('alpha', 'k-limit', 3, now + 10);
    await slots.setLimit('alpha', 'k-limit', 1, now); // submitted earlier, ingested later: ignored
    const takes = await Promise.all(['a', 'b', 'c', 'd'].map((j) => slots.take('alpha', 'k-limit', j, now + HOUR, 1, now)));
    expect(takes.filter((t) => t === true)).toHaveLength(3);
    const full = takes.find((t) => t !== true);
    expect((full as Exclude<typeof full, true | undefined>).limit).toBe(3);
  });

  it('starts a key nobody set a limit for with the job’s own limit', async () => {
    const now = Date.now();
    expect(await slots.take('alpha', 'k-new', 'a', now + HOUR, 1, now)).toBe(true);
    expect(await slots.take('alpha', 'k-new', 'b', now + HOUR, 1, now)).not.toBe(true);
  });

  it('evicts an expired lease as read, never one renewed since', async () => {
    const now = Date.now();
    await slots.setLimit('alpha', 'k-lease', 1, now);
    expect(await slots.take('alpha', 'k-lease', 'old', now - 1, 1, now)).toBe(true);
    const full = await slots.take('alpha', 'k-lease', 'new', now + HOUR, 1, now);
    expect(full).not.toBe(true);
    const expired = new Map([...(full as Exclude<typeof full, true>).holders].filter(([, until]) => until < now));
    expect([...expired.keys()]).toEqual(['old']);
    // The holder's heartbeat lands first: the eviction as read frees nothing.
    expect(await slots.extend('alpha', 'k-lease', 'old', now + HOUR)).toBe(true);
    expect(await slots.evict('alpha', 'k-lease', expired)).toBe(0);
    expect(await slots.take('alpha', 'k-lease', 'new', now + HOUR, 1, now)).not.toBe(true);
    // Expired again, evicted: the slot is the next job's.
    expect(await slots.extend('alpha', 'k-lease', 'old', now - 1)).toBe(true);
    expect(await slots.evict('alpha', 'k-lease', new Map([['old', now - 1]]))).toBe(1);
    expect(await slots.take('alpha', 'k-lease', 'new', now + HOUR, 1, now)).toBe(true);
    expect(await slots.extend('alpha', 'k-lease', 'gone', now + HOUR)).toBe(false);
  });
});
