import { BatchWriteItemCommand, GetItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys, payloadAttribute } from '../../adapters/dynamoJobStore.js';
import { sortKey } from '../../core/model/jobId.js';
import { JobLister } from '../../core/jobs/listing.js';
import type { ListedJob } from '../../core/jobs/replies.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { isoMs } from '../../core/model/messages.js';
import type { JobRow } from '../../core/model/ports.js';
import { statusHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, runAllGroups, submitJobs, type TestSystem } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 8, groupCount: 2 };

/** A table-path job row written the way ingest writes it (its id signed by the deployment). */
function rowOf(sys: TestSystem, tenant: string, dueMs: number, schedule?: string): JobRow {
  const { shard, random } = sys.w.codec.placement(tenant, sys.w.config.settings.shardCount);
  const jobId = sys.w.codec.encode({ tenant, shard, dueMs, path: 't', random });
  return { shard, dueMs, jobId, tenant, payload: '{"big":"' + 'x'.repeat(200) + '"}', ...(schedule ? { schedule } : {}) };
}

async function putRows(sys: TestSystem, rows: readonly JobRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 50) await Promise.all(rows.slice(i, i + 50).map((r) => sys.w.store.putJob(r)));
}

/** A plain row's item (no schedule, tags, priority...) as `putJob` stores it: see {@link bulkPutRows}. */
const plainItem = (r: JobRow): Record<string, AttributeValue> => ({
  ...keys.row(r),
  tenant: { S: r.tenant },
  state: { S: 'SCHEDULED' },
  leaseUntil: { N: '0' },
  ...payloadAttribute(r.payload),
});

/**
 * Thousands of plain rows for the listing's cost figures, in batches of 25 (a PutItem each took
 * 2.3 ms of CPU a row here, most of that test's writing time). The first is written by `putJob` and
 * its stored item must equal {@link plainItem}'s: the rows are the items `putJob` writes.
 */
async function bulkPutRows(sys: TestSystem, rows: readonly JobRow[]): Promise<void> {
  const [first, ...rest] = rows;
  expect(await sys.w.store.putJob(first!)).toBe('created');
  const stored = await em.dynamo.send(new GetItemCommand({ TableName: sys.tableName, Key: keys.row(first!), ConsistentRead: true }));
  expect(stored.Item).toEqual(plainItem(first!));
  const batches = Array.from({ length: Math.ceil(rest.length / 25) }, (_, b) => rest.slice(b * 25, b * 25 + 25));
  await Promise.all(
    batches.map(async (batch) => {
      let pending = batch.map((r) => ({ PutRequest: { Item: plainItem(r) } }));
      while (pending.length > 0) {
        const res = await em.dynamo.send(new BatchWriteItemCommand({ RequestItems: { [sys.tableName]: pending } }));
        pending = (res.UnprocessedItems?.[sys.tableName] ?? []) as typeof pending;
      }
    }),
  );
}

/** Follows the cursors to the end; returns every page. */
async function allPages(sys: TestSystem, tenant: string, query: Record<string, string> = {}, between?: () => Promise<void>) {
  const pages: { jobs: ListedJob[]; nextCursor?: string }[] = [];
  let cursor: string | undefined;
  do {
    const page = await sys.w.lister.list(tenant, { ...query, ...(cursor ? { cursor } : {}) });
    pages.push(page);
    cursor = page.nextCursor;
    if (between) await between();
  } while (cursor !== undefined);
  return pages;
}

const ids = (pages: { jobs: ListedJob[] }[]) => pages.flatMap((p) => p.jobs.map((j) => j.jobId));
const keyOf = (j: { runAt?: string; jobId: string }) => sortKey(Date.parse(j.runAt!), j.jobId);

/** The listing route as API Gateway invokes the status function. */
async function get(sys: TestSystem, tenant: string, query: Record<string, string>) {
  const event = {
    ...httpEvent('GET', `/v1/tenants/${tenant}/jobs`, { pathParameters: { tenant }, routeKey: 'GET /v1/tenants/{tenant}/jobs' }),
    queryStringParameters: query,
  };
  const res = await statusHandler(sys.w)(event);
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

describe('listing a tenant’s jobs', () => {
  it('lists submitted jobs in runAt order, filtered by state, time, schedule and order, tenant by tenant', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo', 'other'] });
    const ingest = sys.startIngest();
    const base = Date.now() + 3_600_000;
    const demo = await submitJobs(
      sys,
      'demo',
      Array.from({ length: 40 }, (_, i) => ({ payload: { i }, runAt: isoMs(base + (i % 20) * 1_000) })),
    );
    const other = await submitJobs(
      sys,
      'other',
      Array.from({ length: 15 }, (_, i) => ({ payload: { i }, runAt: isoMs(base + i * 1_000) })),
    );
    // Wait for ingest to store them all.
    for (let t = Date.now() + 20_000; Date.now() < t;) {
      const n = ids(await allPages(sys, 'demo', { limit: '1000' })).length;
      if (n === 40) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await ingest.stop();
    const cancelled = demo.slice(0, 5).map((j) => j.jobId);
    for (const id of cancelled) await sys.w.jobs.cancel('demo', id);
    const expected = [...demo].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1)).map((j) => j.jobId);

    // Every job once, in (runAt, jobId) order, across pages of 7.
    const pages = await allPages(sys, 'demo', { limit: '7' });
    expect(ids(pages)).toEqual(expected);
    expect(pages.length).toBe(6);
    expect(pages.at(-1)!.nextCursor).toBeUndefined();
    // Status objects as GET of one job answers them.
    const first = pages[0]!.jobs[0]!;
    expect(first).toEqual(await sys.w.jobs.status('demo', first.jobId));
    expect(pages.flatMap((p) => p.jobs).every((j) => j.tenant === 'demo')).toBe(true);

    // Isolation: each tenant sees its own jobs only.
    expect(ids(await allPages(sys, 'other', { limit: '4' }))).toEqual(
      [...other].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1)).map((j) => j.jobId),
    );

    // state
    const c = ids(await allPages(sys, 'demo', { state: 'CANCELLED', limit: '2' }));
    expect(c.sort()).toEqual([...cancelled].sort());
    const s = await allPages(sys, 'demo', { state: 'SCHEDULED' });
    expect(ids(s)).toEqual(expected.filter((id) => !cancelled.includes(id)));
    expect(s.flatMap((p) => p.jobs).every((j) => j.state === 'SCHEDULED')).toBe(true);
    expect(ids(await allPages(sys, 'demo', { state: 'QUEUED' }))).toEqual([]);

    // from/to are inclusive on runAt.
    const window = ids(await allPages(sys, 'demo', { from: isoMs(base + 5_000), to: isoMs(base + 9_000), limit: '3' }));
    expect(window).toEqual(
      expected.filter((id) => {
        const due = Date.parse(demo.find((j) => j.jobId === id)!.runAt);
        return due >= base + 5_000 && due <= base + 9_000;
      }),
    );
    expect(window).toHaveLength(10);

    // desc is the exact reverse.
    expect(ids(await allPages(sys, 'demo', { order: 'desc', limit: '6' }))).toEqual([...expected].reverse());
    expect(ids(await allPages(sys, 'demo', { order: 'desc', to: isoMs(base + 1_000), limit: '1' }))).toEqual(
      expected.slice(0, 4).reverse(),
    );
  });

  it('lists occurrences of a schedule, scheduled and delivered (markers keep the schedule), and dead-lettered jobs', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo'] });
    const soon = Date.now() + 1_500;
    const nightly = Array.from({ length: 6 }, (_, i) => rowOf(sys, 'demo', soon + i * 100, 'nightly'));
    const later = Array.from({ length: 3 }, (_, i) => rowOf(sys, 'demo', Date.now() + 3_600_000 + i, 'nightly'));
    const plain = Array.from({ length: 5 }, (_, i) => rowOf(sys, 'demo', soon + i * 100));
    await putRows(sys, [...nightly, ...later, ...plain]);
    const dead = rowOf(sys, 'demo', Date.now() + 7_200_000);
    await sys.w.store.putDead(dead, 'demo', Date.now(), Date.now() + 86_400_000);

    const dispatch = runAllGroups(sys.w.dispatch);
    try {
      for (let t = Date.now() + 20_000; Date.now() < t;) {
        const q = ids(await allPages(sys, 'demo', { state: 'QUEUED', limit: '1000' }));
        if (q.length === 11) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await dispatch.stop();
    }
    const queuedNightly = (await allPages(sys, 'demo', { state: 'QUEUED', schedule: 'nightly' })).flatMap((p) => p.jobs);
    expect(queuedNightly.map((j) => j.jobId)).toEqual(nightly.map((r) => r.jobId));
    for (const j of queuedNightly) {
      expect(j).toMatchObject({ state: 'QUEUED', schedule: 'nightly' });
      expect(Date.parse(j.deliveredAt!)).toBeGreaterThanOrEqual(Date.parse(j.runAt!));
    }
    const allNightly = ids(await allPages(sys, 'demo', { schedule: 'nightly', limit: '4' }));
    expect(allNightly).toEqual([...nightly, ...later].map((r) => r.jobId));
    const deadJobs = (await allPages(sys, 'demo', { state: 'DEAD_LETTERED' })).flatMap((p) => p.jobs);
    expect(deadJobs).toEqual([await sys.w.jobs.status('demo', dead.jobId)]);
    expect(deadJobs[0]!.state).toBe('DEAD_LETTERED');
  });

  it('gives every job exactly once, in order, while jobs are added and dispatched', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo', 'other'] });
    const now = Date.now();
    // Rows coming due over the next 8 s (dispatched while the pages are read), and later ones.
    const present = Array.from({ length: 240 }, (_, i) => rowOf(sys, 'demo', now + 1_500 + (i % 120) * 60 + (i >= 120 ? 3_600_000 : 0)));
    await putRows(sys, [...present, ...Array.from({ length: 60 }, (_, i) => rowOf(sys, 'other', now + 1_500 + i * 100))]);
    const added: JobRow[] = [];
    const dispatch = runAllGroups(sys.w.dispatch);
    let adding = true;
    const adder = (async () => {
      const until = Date.now() + 7_000;
      while (adding && Date.now() < until) {
        const row = rowOf(sys, 'demo', Date.now() + 1_500 + Math.floor(Math.random() * 3_600_000));
        added.push(row);
        await sys.w.store.putJob(row);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      // Start once dispatch has begun (the first row coming due delivered: on a busy machine that
      // takes longer than on a quiet one): the cursor then runs through rows as they are being sent.
      const first = { shard: present[0]!.shard, dueMs: present[0]!.dueMs, jobId: present[0]!.jobId };
      for (const until = Date.now() + 30_000; (await sys.w.store.getRow(first))?.state !== 'QUEUED';) {
        if (Date.now() > until) throw new Error('dispatch did not deliver the first row in 30 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      const pace = () => new Promise<void>((r) => setTimeout(r, 100));
      const [all, scheduled] = await Promise.all([
        allPages(sys, 'demo', { limit: '9' }, pace),
        allPages(sys, 'demo', { state: 'SCHEDULED', limit: '11' }, pace),
      ]);
      adding = false;
      await adder;
      const seen = all.flatMap((p) => p.jobs);
      const keys = seen.map(keyOf);
      // Strictly increasing: in order, and no job twice.
      for (let i = 1; i < keys.length; i++) expect(keys[i - 1]! < keys[i]!).toBe(true);
      // Every job that existed throughout is there, whatever its state by then.
      const seenIds = new Set(seen.map((j) => j.jobId));
      expect(present.filter((r) => !seenIds.has(r.jobId))).toEqual([]);
      expect(seen.every((j) => j.tenant === 'demo')).toBe(true);
      // Dispatch was under way while they were listed (how many were still SCHEDULED then depends
      // on the machine's pace: a busy one delivered them all first); jobs added ahead of the cursor appear too.
      const soon = new Set(present.slice(0, 120).map((r) => r.jobId));
      const states = new Set(seen.filter((j) => soon.has(j.jobId)).map((j) => j.state));
      expect(states.has('QUEUED')).toBe(true);
      expect(added.length).toBeGreaterThan(0);
      expect([...seenIds].filter((id) => added.some((r) => r.jobId === id)).length).toBeGreaterThan(0);
      const sKeys = scheduled.flatMap((p) => p.jobs).map(keyOf);
      for (let i = 1; i < sKeys.length; i++) expect(sKeys[i - 1]! < sKeys[i]!).toBe(true);
      // The jobs due in an hour stayed SCHEDULED throughout: every one of them is listed.
      const sIds = new Set(scheduled.flatMap((p) => p.jobs.map((j) => j.jobId)));
      expect(present.slice(120).filter((r) => !sIds.has(r.jobId))).toEqual([]);
    } finally {
      adding = false;
      await adder;
      await dispatch.stop();
    }
  });

  it('refuses cursors it did not issue, tampered with, of another tenant or other filters', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo', 'other'] });
    const due = Date.now() + 3_600_000;
    await putRows(sys, [
      ...Array.from({ length: 10 }, (_, i) => rowOf(sys, 'demo', due + i)),
      ...Array.from({ length: 10 }, (_, i) => rowOf(sys, 'other', due + i)),
    ]);
    const page = await sys.w.lister.list('demo', { limit: '3', state: 'SCHEDULED' });
    const cursor = page.nextCursor!;
    expect(cursor).toBeDefined();
    // The same cursor with another page size continues where it left off.
    const next = await sys.w.lister.list('demo', { limit: '5', state: 'SCHEDULED', cursor });
    expect(next.jobs).toHaveLength(5);
    expect(keyOf(next.jobs[0]!) > keyOf(page.jobs.at(-1)!)).toBe(true);

    const [text, tag] = cursor.split('.') as [string, string];
    const forged = Buffer.from(Buffer.from(text, 'base64url').toString('utf8').replace(/^\d/, '0'), 'utf8').toString('base64url');
    const flipped = tag.slice(0, -1) + (tag.endsWith('A') ? 'B' : 'A');
    const other = (await sys.w.lister.list('other', { limit: '3', state: 'SCHEDULED' })).nextCursor!;
    for (const [tenant, query] of [
      ['demo', { state: 'SCHEDULED', cursor: `${forged}.${tag}` }],
      ['demo', { state: 'SCHEDULED', cursor: `${text}.${flipped}` }],
      ['demo', { state: 'SCHEDULED', cursor: 'bm90LW91cnM' }],
      ['demo', { state: 'SCHEDULED', cursor: other }],
      ['other', { state: 'SCHEDULED', cursor }],
      ['demo', { cursor }],
      ['demo', { state: 'SCHEDULED', order: 'desc', cursor }],
      ['demo', { state: 'SCHEDULED', from: isoMs(due), cursor }],
    ] as const) {
      const res = await get(sys, tenant, query);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('ValidationError');
      expect(res.body.error.message).toMatch(/^cursor /);
    }
  });

  it('answers 400 naming the parameter for bad input, 404 for an unknown tenant', async () => {
    const sys = await createSystem(em, { settings, tenants: ['demo'] });
    const cases: [Record<string, string>, string][] = [
      [{ state: 'NOPE' }, 'state'],
      [{ state: 'scheduled' }, 'state'],
      [{ limit: '0' }, 'limit'],
      [{ limit: '1001' }, 'limit'],
      [{ limit: '1.5' }, 'limit'],
      [{ limit: 'ten' }, 'limit'],
      [{ from: 'yesterday' }, 'from'],
      [{ to: '2030-02-30T00:00:00Z' }, 'to'],
      [{ from: '2030-01-02T00:00:00Z', to: '2030-01-01T00:00:00Z' }, 'to'],
      [{ order: 'up' }, 'order'],
      [{ schedule: 'no spaces' }, 'schedule'],
      [{ status: 'QUEUED' }, 'status'],
    ];
    for (const [query, param] of cases) {
      const res = await get(sys, 'demo', query);
      expect({ query, status: res.status, code: res.body.error?.code }).toEqual({ query, status: 400, code: 'ValidationError' });
      expect(res.body.error.message.startsWith(`${param} `)).toBe(true);
    }
    expect((await get(sys, 'nobody', {})).status).toBe(404);
    const ok = await get(sys, 'demo', { state: 'SCHEDULED', from: '2030-01-01T00:00:00.0001+01:00', limit: '1000', order: 'desc' });
    expect(ok).toEqual({ status: 200, body: { jobs: [] } });
  });

  it('reads little more per page than it returns (one tenant, 64 shards), and bounds a sparse tenant’s page', async () => {
    const sys = await createSystem(em, {
      settings: { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 64, groupCount: 8 },
      tenants: ['demo'],
    });
    const due = Date.now() + 3_600_000;
    await bulkPutRows(
      sys,
      Array.from({ length: 1_500 }, (_, i) => rowOf(sys, 'demo', due + i * 10)),
    );
    const figures: Record<string, number>[] = [];
    for (const limit of [100, 1000]) {
      let cursor: string | undefined;
      const reads: number[] = [];
      const queries: number[] = [];
      const units: number[] = [];
      let listed = 0;
      do {
        const before = sys.w.store.stats.listingReadUnits ?? 0;
        const page = await sys.w.lister.list('demo', { limit: String(limit), ...(cursor ? { cursor } : {}) });
        cursor = page.nextCursor;
        listed += page.jobs.length;
        if (page.jobs.length === limit) {
          reads.push(sys.w.lister.lastPage.items);
          queries.push(sys.w.lister.lastPage.queries);
          units.push((sys.w.store.stats.listingReadUnits ?? 0) - before);
        }
      } while (cursor);
      expect(listed).toBe(1_500);
      const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
      figures.push({ limit, itemsReadPerPage: mean(reads), queriesPerPage: mean(queries), rruPerPage: mean(units) });
      // Each shard is read at least once past the page's end: limit + a few items per shard.
      expect(Math.max(...reads)).toBeLessThanOrEqual(limit + 4 * 64);
    }
    console.log('listing cost, one tenant, 64 shards:', JSON.stringify(figures));

    // A tenant with 1 job in 100 of the range: each page stops at its read cap (before its limit
    // of 10, all of rare's jobs) and still answers a cursor. A table of their own: the listing
    // reads through busy's rows, not demo's as well.
    const mixed = await createSystem(em, { settings: sys.w.config.settings, tenants: ['busy', 'rare'] });
    await bulkPutRows(mixed, [
      ...Array.from({ length: 1_000 }, (_, i) => rowOf(mixed, 'busy', due + 100_000 + i)),
      ...Array.from({ length: 10 }, (_, i) => rowOf(mixed, 'rare', due + 100_000 + i * 100)),
    ]);
    const sparse = new JobLister({
      store: mixed.w.store,
      codec: mixed.w.codec,
      tenants: new TenantRegistry(mixed.w.store),
      clock: { now: () => Date.now() },
      settings: mixed.w.config.settings,
      maxReadPerPage: 300,
    });
    let cursor: string | undefined;
    const seen: string[] = [];
    let pages = 0;
    do {
      const page = await sparse.list('rare', { limit: '10', ...(cursor ? { cursor } : {}) });
      pages++;
      seen.push(...page.jobs.map((j) => j.jobId));
      expect(sparse.lastPage.items).toBeLessThanOrEqual(300 + 64);
      cursor = page.nextCursor;
    } while (cursor);
    expect(pages).toBeGreaterThan(3);
    expect(seen).toHaveLength(10);
    expect(new Set(seen).size).toBe(10);
  });
});
