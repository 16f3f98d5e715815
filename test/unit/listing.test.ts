import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JobIdCodec, sortKey } from '../../core/model/jobId.js';
import {
  JobLister,
  type ListedItem,
  type ListedPage,
  type ListFilter,
  type ListingStore,
  type ListRange,
} from '../../core/jobs/listing.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { HISTORY_STATES } from '../../core/jobs/history.js';

/** The store in memory: a partition's items in sort-key order, Limit counting items evaluated, as DynamoDB does. */
class MemoryListing implements ListingStore {
  readonly parts = new Map<string, ListedItem[]>();
  queries = 0;

  add(partition: string, item: ListedItem): void {
    const list = this.parts.get(partition) ?? [];
    list.push(item);
    list.sort((a, b) => (a.sk < b.sk ? -1 : 1));
    this.parts.set(partition, list);
  }

  async listRange(partition: string, range: ListRange, limit: number, filter: ListFilter): Promise<ListedPage> {
    this.queries++;
    let inRange = (this.parts.get(partition) ?? []).filter((i) => i.sk >= range.fromSk && i.sk <= range.toSk);
    if (range.desc) inRange = [...inRange].reverse();
    if (range.afterSk !== undefined) inRange = inRange.filter((i) => (range.desc ? i.sk < range.afterSk! : i.sk > range.afterSk!));
    const read = inRange.slice(0, limit);
    const more = inRange.length > limit;
    const items = read.filter(
      (i) =>
        i.tenant === filter.tenant &&
        (!filter.states || filter.states.includes(i.state)) &&
        (filter.schedule === undefined || i.schedule === filter.schedule),
    );
    return { items, read: read.length, more, ...(more ? { last: read.at(-1)!.sk } : {}) };
  }
}

const codec = new JobIdCodec(Buffer.alloc(32, 7));
const tenants = new TenantRegistry({ getTenant: async (name) => ({ name, queueUrl: 'q', dlqUrl: 'd' }), putTenant: async () => {} });
const STATES = ['SCHEDULED', 'ACQUIRED', 'QUEUED', 'CANCELLED', 'DEAD'] as const;

function lister(store: ListingStore, shardCount: number, maxReadPerPage?: number) {
  return new JobLister({
    store,
    codec,
    tenants,
    clock: { now: () => 0 },
    settings: { shardCount },
    ...(maxReadPerPage ? { maxReadPerPage } : {}),
  });
}

async function follow(l: JobLister, tenant: string, query: Record<string, string>) {
  const out: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await l.list(tenant, { ...query, ...(cursor ? { cursor } : {}) });
    out.push(...page.jobs.map((j) => sortKey(Date.parse(j.runAt!), j.jobId)));
    cursor = page.nextCursor;
    if (++pages > 10_000) throw new Error('no progress');
  } while (cursor);
  return out;
}

describe('JobLister merge', () => {
  it('pages give exactly the matching jobs, in order, once, for any data, filters, page size and read cap', async () => {
    const job = fc.record({
      tenant: fc.constantFrom('a', 'b'),
      shard: fc.nat(5),
      dueMs: fc.integer({ min: 1, max: 60 }),
      state: fc.constantFrom(...STATES),
      schedule: fc.option(fc.constantFrom('s1', 's2'), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(job, { maxLength: 120 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom(undefined, 'SCHEDULED', 'QUEUED', 'CANCELLED', 'DEAD_LETTERED'),
        fc.option(fc.constantFrom('s1', 's2'), { nil: undefined }),
        fc.boolean(),
        fc.option(fc.tuple(fc.integer({ min: 0, max: 61 }), fc.integer({ min: 0, max: 61 })), { nil: undefined }),
        fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
        async (jobs, limit, state, schedule, desc, window, cap) => {
          const store = new MemoryListing();
          const all = jobs.map((j, n) => {
            const jobId = codec.encode({
              tenant: j.tenant,
              shard: j.shard,
              dueMs: j.dueMs,
              path: 't',
              random: `r${String(n).padStart(15, '0')}`,
            });
            const item: ListedItem = {
              sk: sortKey(j.dueMs, jobId),
              tenant: j.tenant,
              state: j.state,
              ...(j.schedule ? { schedule: j.schedule } : {}),
            };
            store.add(String(j.shard), item);
            return { ...j, sk: item.sk };
          });
          const [from, to] = window ? [Math.min(...window), Math.max(...window)] : [undefined, undefined];
          const stored = { SCHEDULED: ['SCHEDULED', 'ACQUIRED'], QUEUED: ['QUEUED'], CANCELLED: ['CANCELLED'], DEAD_LETTERED: ['DEAD'] };
          const expected = all
            .filter(
              (j) =>
                j.tenant === 'a' &&
                (state === undefined || stored[state].includes(j.state)) &&
                (schedule === undefined || j.schedule === schedule) &&
                (from === undefined || (j.dueMs >= from && j.dueMs <= to!)),
            )
            .map((j) => j.sk)
            .sort();
          if (desc) expected.reverse();
          const query: Record<string, string> = {
            limit: String(limit),
            ...(state ? { state } : {}),
            ...(schedule ? { schedule } : {}),
            ...(desc ? { order: 'desc' } : {}),
            ...(from !== undefined ? { from: new Date(from).toISOString(), to: new Date(to!).toISOString() } : {}),
          };
          expect(await follow(lister(store, 6, cap), 'a', query)).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reads about limit + a few items per shard for one tenant, and a read-capped page still advances', async () => {
    const store = new MemoryListing();
    for (let i = 0; i < 5_000; i++) {
      const shard = (i * 7919) % 64;
      const jobId = codec.encode({ tenant: 'a', shard, dueMs: 1_000 + i, path: 't', random: `r${String(i).padStart(15, '0')}` });
      store.add(String(shard), { sk: sortKey(1_000 + i, jobId), tenant: 'a', state: 'SCHEDULED' });
    }
    const l = lister(store, 64);
    const page = await l.list('a', { limit: '100' });
    expect(page.jobs).toHaveLength(100);
    expect(l.lastPage.items).toBeGreaterThanOrEqual(100 + 63);
    expect(l.lastPage.items).toBeLessThanOrEqual(100 + 4 * 64);
    expect(l.lastPage.queries).toBeLessThanOrEqual(64 * 2);

    const capped = lister(store, 64, 150);
    const first = await capped.list('a', { limit: '1000' });
    expect(first.jobs.length).toBeLessThan(1000);
    expect(capped.lastPage.items).toBeLessThanOrEqual(150 + 64);
    const second = await capped.list('a', { limit: '1000', cursor: first.nextCursor! });
    expect(Date.parse(second.jobs[0]!.runAt!)).toBe(Date.parse(first.jobs.at(-1)?.runAt ?? '1970-01-01T00:00:01.000Z') + 1);
  });
});

describe('JobLister with history states', () => {
  const historyTenants = new TenantRegistry({
    getTenant: async (name) => ({ name, queueUrl: 'q', dlqUrl: 'd', historyTtlMs: 86_400_000 }),
    putTenant: async () => {},
  });
  const NOW = 1_000_000;

  it('lists each job once, as GET shows it: a reported outcome supersedes the delivered marker', async () => {
    const job = fc.record({
      tenant: fc.constantFrom('a', 'b'),
      shard: fc.nat(4),
      dueMs: fc.integer({ min: 1, max: 40 }),
      state: fc.constantFrom('SCHEDULED', 'QUEUED', 'QUEUED', 'CANCELLED'),
      // An outcome record at the job's key in h#<shard>: none, live, or past its TTL.
      outcome: fc.option(fc.record({ state: fc.constantFrom('SUCCEEDED', 'FAILED', 'DEAD'), expired: fc.boolean() }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(job, { maxLength: 80 }),
        fc.integer({ min: 1, max: 9 }),
        fc.constantFrom(undefined, 'DELIVERED', 'SUCCEEDED', 'QUEUED'),
        fc.boolean(),
        fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined }),
        async (jobs, limit, state, desc, cap) => {
          const store = new MemoryListing();
          const expected: string[] = [];
          jobs.forEach((j, n) => {
            const jobId = codec.encode({
              tenant: j.tenant,
              shard: j.shard,
              dueMs: j.dueMs,
              path: 't',
              random: `r${String(n).padStart(15, '0')}`,
            });
            const sk = sortKey(j.dueMs, jobId);
            store.add(String(j.shard), { sk, tenant: j.tenant, state: j.state });
            if (j.outcome)
              store.add(`h#${j.shard}`, {
                sk,
                tenant: j.tenant,
                state: j.outcome.state,
                expiresAtMs: j.outcome.expired ? NOW - 1 : NOW + 1,
              });
            if (j.tenant !== 'a') return;
            const reported = j.outcome && !j.outcome.expired ? j.outcome.state : undefined;
            const shown = reported ?? (j.state === 'QUEUED' ? 'DELIVERED' : j.state);
            const listed =
              state === undefined ||
              (state === 'DELIVERED' && j.state === 'QUEUED' && !reported) ||
              (state === 'SUCCEEDED' && reported === 'SUCCEEDED') ||
              (state === 'QUEUED' && j.state === 'QUEUED');
            if (listed) expected.push(`${sk} ${state === 'QUEUED' ? 'QUEUED' : shown}`);
          });
          expected.sort();
          if (desc) expected.reverse();
          const l = new JobLister({
            store,
            codec,
            tenants: historyTenants,
            clock: { now: () => NOW },
            settings: { shardCount: 5 },
            states: HISTORY_STATES,
            ...(cap ? { maxReadPerPage: cap } : {}),
          });
          const got: string[] = [];
          let cursor: string | undefined;
          let pages = 0;
          do {
            const page = await l.list('a', {
              limit: String(limit),
              ...(state ? { state } : {}),
              ...(desc ? { order: 'desc' } : {}),
              ...(cursor ? { cursor } : {}),
            });
            got.push(...page.jobs.map((j) => `${sortKey(Date.parse(j.runAt!), j.jobId)} ${j.state}`));
            cursor = page.nextCursor;
            if (++pages > 10_000) throw new Error('no progress');
          } while (cursor);
          expect(got).toEqual(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});
