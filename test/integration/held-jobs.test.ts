/**
 * Held jobs are never stranded (docs/tenant-controls.md, docs/operating.md): the held rows of any
 * number of tenants in one shard are read back once their tenant may send again; a deregistered
 * tenant's backlog stays within the round's cap while other tenants' rows go out, and is
 * delivered once the tenant is registered again; a held row that is not read back although its
 * tenant may send is reported (the HeldAfterResume metric). Real dispatch on dynalite and fauxqs.
 *
 * The three cases run at once (each its own table and queues): they mostly wait on due times and
 * on the hold lane's looks, and none asserts how late a row goes out.
 */
import { DeleteItemCommand, QueryCommand, type QueryCommandOutput } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, DeleteMessageBatchCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchLoop, type DispatchStepResult } from '../../core/dispatch/loop.js';
import { ParkedTenants } from '../../core/dispatch/parked.js';
import type { QueueSender } from '../../core/model/ports.js';
import { tenantItemKey } from '../../core/model/schema.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { dispatchHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, runAllGroups, submitJobs, type TestSystem } from '../support/system.js';
import { controlsOf } from '../support/controls.js';

/** One shard: every held row of every tenant is in the same hold lane. */
const SETTINGS = { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 1, groupCount: 1 };

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

interface Send {
  readonly jobId: string;
  readonly runAt: string;
  /** Local clock just before the send call. */
  readonly at: number;
}

/** The sender, recording each message it got accepted, with the time its send began. */
function recordingSender(inner: QueueSender): { sender: QueueSender; sends: Send[] } {
  const sends: Send[] = [];
  return {
    sends,
    sender: {
      sendBatch: async (url, messages) => {
        const at = Date.now();
        const failed = await inner.sendBatch(url, messages);
        const refused = new Set(failed.map((f) => f.id));
        for (const m of messages) {
          if (refused.has(m.id)) continue;
          const body = JSON.parse(m.body) as { jobId: string; runAt: string };
          sends.push({ jobId: body.jobId, runAt: body.runAt, at });
        }
        return failed;
      },
    },
  };
}

/** Every item of a partition (consistent, all pages). */
async function partition(sys: TestSystem, pk: string): Promise<Record<string, { S?: string; N?: string }>[]> {
  const items: Record<string, { S?: string; N?: string }>[] = [];
  let start: QueryCommandOutput['LastEvaluatedKey'];
  do {
    const res = await em.dynamo.send(
      new QueryCommand({
        TableName: sys.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: pk } },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    items.push(...((res.Items ?? []) as Record<string, { S?: string; N?: string }>[]));
    start = res.LastEvaluatedKey;
  } while (start);
  return items;
}

interface Row {
  readonly shard: number;
  readonly dueMs: number;
  readonly tenant: string;
  readonly jobId: string;
  readonly payload: string;
  readonly priority?: number;
}

/** Rows written straight to the table (as ingest writes them), 50 writes at once. */
async function writeRows(
  sys: TestSystem,
  jobs: readonly { tenant: string; dueMs: number; payload?: string; priority?: number }[],
): Promise<Row[]> {
  const rows = jobs.map(({ tenant, dueMs, payload, priority }) => {
    const { shard, random } = sys.w.codec.placement(tenant, SETTINGS.shardCount);
    const jobId = sys.w.codec.encode({ tenant, shard, dueMs, path: 't' as const, random });
    return { shard, dueMs, tenant, jobId, payload: payload ?? '{}', ...(priority !== undefined ? { priority } : {}) };
  });
  for (let i = 0; i < rows.length; i += 50) await Promise.all(rows.slice(i, i + 50).map((r) => sys.w.store.putJob(r)));
  return rows;
}

const heldPointers = async (sys: TestSystem) => (await partition(sys, 'p#0')).length;

/** Job rows of `tenant` in shard 0, by state. */
async function statesOf(sys: TestSystem, tenant: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const item of await partition(sys, '0')) if (item.tenant?.S === tenant) out[item.state!.S!] = (out[item.state!.S!] ?? 0) + 1;
  return out;
}

async function until(pred: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Receives every message of a queue until it is empty; answers the job ids (duplicates included). */
async function drain(url: string): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const res = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
    const msgs = res.Messages ?? [];
    if (msgs.length === 0) return ids;
    for (const m of msgs) ids.push((JSON.parse(m.Body ?? '{}') as { jobId: string }).jobId);
    await em.sqs.send(
      new DeleteMessageBatchCommand({ QueueUrl: url, Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })) }),
    );
  }
}

describe.concurrent('held jobs of many tenants', () => {
  it('with 60 tenants still paused ahead of them in the hold lane, the held rows of 60 resumed tenants are all read back: each once, none early, none before the resume', async () => {
    // Tenants sort in the hold lane by name: the 60 that stay paused come first, ahead of the 60
    // resumed. A look finds 50 tenants at most (HOLD_TENANTS_PER_SCAN): the first look after the
    // resume finds only paused ones, and the resumed ones take two more looks (the last wraps round).
    const names = Array.from({ length: 120 }, (_, i) => `t${String(i).padStart(3, '0')}`);
    const stillPaused = new Set(names.slice(0, 60));
    const sys = await createSystem(em, { tenants: names, settings: SETTINGS });
    const controls = controlsOf(Object.fromEntries(names.map((n) => [n, { paused: true }])));
    const { sender, sends } = recordingSender(sys.w.dispatch.sender);
    const deps = { ...sys.w.dispatch, sender, controls: controls.cache };
    let rounds = { stop: async () => {} };
    try {
      // Two rows per tenant (priorities 5 and 7), written straight to the table (as ingest writes them)
      // before dispatch starts, due after it starts.
      const due = Date.now() + 3_000;
      const rows = await writeRows(
        sys,
        names.flatMap((tenant, i) => [5, 7].map((priority, k) => ({ tenant, dueMs: due + i * 3 + k, priority }))),
      );
      rounds = runAllGroups(deps, { owner: 'first' });
      await until(async () => (await heldPointers(sys)) === rows.length, 60_000, 'every job in the hold lane');
      // The shard's mark (kept in the group lease) passes the held rows: only the hold lane leads back to them.
      const last = Math.max(...rows.map((r) => r.dueMs));
      await until(async () => ((await sys.w.store.groupMarks(0))[0] ?? 0) > last, 30_000, 'the mark to pass the held rows');
      // Every dispatcher stops; a new process (no memory of the lane) takes over.
      await rounds.stop();
      expect(sends).toEqual([]);

      const resumed = rows.filter((r) => !stillPaused.has(r.tenant));
      for (const n of names) if (!stillPaused.has(n)) controls.update(n, { paused: false });
      const resumedAt = Date.now();
      rounds = runAllGroups({ ...deps, holdScans: new Map() }, { owner: 'second' });
      await until(() => sends.length >= resumed.length, 120_000, 'every resumed job to be sent');
      await sleep(1_000);

      const ids = sends.map((s) => s.jobId);
      expect(new Set(ids).size).toBe(ids.length);
      expect([...ids].sort()).toEqual(resumed.map((r) => r.jobId).sort());
      for (const s of sends) {
        expect(s.at).toBeGreaterThanOrEqual(resumedAt);
        expect(s.at).toBeGreaterThanOrEqual(Date.parse(s.runAt));
      }
      // Only the paused tenants' pointers stay (one whose row went out through the due range is
      // deleted when a look next meets its tenant).
      await until(async () => (await heldPointers(sys)) === rows.length - resumed.length, 60_000, 'the resumed pointers to go');
      await rounds.stop();
      // The queues hold each job once.
      const received = (await Promise.all(names.map((n) => drain(sys.tenants[n]!.url)))).flat();
      expect(received.sort()).toEqual(resumed.map((r) => r.jobId).sort());
    } finally {
      await rounds.stop();
    }
  }, 300_000);
});

describe.concurrent('parked rows', () => {
  it("a deregistered tenant's backlog, ten times the cap, stays within it while other tenants' rows go out; registered again, each is delivered once", async () => {
    const sys = await createSystem(em, { tenants: ['demo', 'gone'], settings: SETTINGS });
    const { sender, sends } = recordingSender(sys.w.dispatch.sender);
    // The round's cap, three pages, and a backlog ten times the cap. The hold lane gives a tenant
    // back at most a page a look (a look every 500 ms): the backlog's read-back takes 30 looks
    // here (with a cap of 100 and pages of 20, 50 looks for 1,000 rows).
    const cap = { maxHeldRows: 60, pageRows: 20 };
    const backlog = 10 * cap.maxHeldRows;
    // gone's backlog, written straight to the table (as ingest writes them) before any dispatch,
    // overdue once written; then gone is deregistered.
    const due = Date.now() + 300;
    const goneJobs = await writeRows(
      sys,
      Array.from({ length: backlog }, (_, i) => ({ tenant: 'gone', dueMs: due + i, payload: JSON.stringify({ i }) })),
    );
    expect(await statesOf(sys, 'gone')).toEqual({ SCHEDULED: backlog });
    await sleep(Math.max(0, due + backlog - Date.now()));
    const key = tenantItemKey('gone');
    await em.dynamo.send(new DeleteItemCommand({ TableName: sys.tableName, Key: { pk: { S: key.pk }, sk: { S: key.sk } } }));
    // Other tenants' rows, falling due while gone's backlog is overdue: 2 to 3.5 s into the first run.
    const demoDue = Date.now() + 2_000;
    const demoJobs = await writeRows(
      sys,
      Array.from({ length: 30 }, (_, i) => ({ tenant: 'demo', dueMs: demoDue + i * 50, payload: JSON.stringify({ i }) })),
    );
    const demoLast = Math.max(...demoJobs.map((j) => j.dueMs));

    const parked = new ParkedTenants({ recheckMs: 300 });
    const deps = { ...sys.w.dispatch, sender, tenants: new TenantRegistry(sys.w.store, { negativeTtlMs: 100 }), parked };
    const steps: DispatchStepResult[] = [];
    const run = (ms: number, signal?: AbortSignal) => {
      const now = Date.now();
      return dispatchLoop(deps, {
        groups: [0],
        owner: `parked-${now}`,
        ownerStartMs: now,
        untilMs: now + ms,
        limits: cap,
        ...(signal ? { signal } : {}),
        onStep: (r) => steps.push(r),
      });
    };
    // Until 3 s past demo's last row (the round stops reading 1 s before its end): 2 s of parked
    // steps after demo's rows are out.
    await run(demoLast + 3_000 - Date.now());
    expect(sends.map((s) => s.jobId).sort()).toEqual(demoJobs.map((j) => j.jobId).sort());
    for (const s of sends) expect(s.at).toBeGreaterThanOrEqual(Date.parse(s.runAt));
    // The round's tracked rows, parked ones included, stayed within its cap (plus a page read
    // and the acquires in flight, 32 per group, when it was reached).
    for (const r of steps) expect(r.maxTracked).toBeLessThanOrEqual(cap.maxHeldRows + cap.pageRows + 32);
    expect(Math.max(...steps.map((r) => r.parked))).toBeGreaterThan(0);
    expect(steps.every((r) => r.parkedTenants.includes('gone'))).toBe(true);
    // Untouched: all still SCHEDULED.
    expect(await statesOf(sys, 'gone')).toEqual({ SCHEDULED: backlog });

    // Registered again: every parked row, still watched or in the hold lane, is delivered once, never early.
    await sys.w.store.putTenant({ name: 'gone', queueUrl: sys.tenants.gone!.url, dlqUrl: sys.tenants.gone!.dlqUrl });
    const abort = new AbortController();
    const loop = run(180_000, abort.signal);
    try {
      await until(() => sends.length >= demoJobs.length + goneJobs.length, 120_000, "gone's jobs");
      await sleep(1_000);
    } finally {
      abort.abort();
      await loop;
    }
    const ids = sends.map((s) => s.jobId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual([...demoJobs, ...goneJobs].map((j) => j.jobId).sort());
    for (const s of sends) expect(s.at).toBeGreaterThanOrEqual(Date.parse(s.runAt));
    for (const r of steps) expect(r.maxTracked).toBeLessThanOrEqual(cap.maxHeldRows + cap.pageRows + 32);
  }, 300_000);
});

describe.concurrent('HeldAfterResume', () => {
  it('reports a held row not read back although its tenant may send, and neither a paused tenant nor one that drains', async () => {
    const sys = await createSystem(em, { tenants: ['stuck', 'paused', 'resumed'], settings: SETTINGS });
    const controls = controlsOf({ paused: { paused: true } });
    const ingest = sys.startIngest();
    try {
      const due = Date.now() + SETTINGS.lookaheadMs + 3_000; // through the table, however slow the submits
      const [stuck] = await submitJobs(sys, 'stuck', [{ payload: {}, runAt: new Date(due).toISOString() }]);
      await submitJobs(sys, 'paused', [{ payload: {}, runAt: new Date(due).toISOString() }]);
      await submitJobs(sys, 'resumed', [{ payload: {}, runAt: new Date(due).toISOString() }]);
      await until(async () => (await partition(sys, '0')).length === 3, 20_000, 'the rows');
      await ingest.stop();
      const store = sys.w.store;
      const rows = (await partition(sys, '0')).map((i) => {
        const [dueMs, ...rest] = i.sk!.S!.split('#');
        return { tenant: i.tenant!.S!, key: { shard: 0, dueMs: Number(dueMs), jobId: rest.join('#') } };
      });
      expect(rows.find((r) => r.tenant === 'stuck')?.key.jobId).toBe(stuck!.jobId);
      // Every row is in the hold lane (as a paused tenant's would be); stuck's row is also held by
      // a dispatcher that went silent with a long lease: its pointer cannot be read back and stays first.
      await store.putHeldPointers(rows.map((r) => ({ ...r.key, tenant: r.tenant, priority: 5 })));
      const stuckRow = rows.find((r) => r.tenant === 'stuck')!;
      expect(await store.acquire(stuckRow.key, Date.now(), Date.now() + 120_000)).toBeDefined();
      await sleep(Math.max(0, due + 100 - Date.now()));

      const values: Record<string, number[]> = {};
      const telemetry: Telemetry = {
        count() {},
        values: (n, _u, v) => void (values[n] ??= []).push(...v),
        error() {},
      };
      const w = { ...sys.w, dispatch: { ...sys.w.dispatch, controls: controls.cache, holdScans: new Map() } };
      const handler = dispatchHandler(w, telemetry);
      const now = Date.now();
      // Long enough for a second look at the hold lane (5 s after the first: 4 s to spare); the
      // watched row keeps the step busy until then.
      const result = await handler(
        { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + 9_000 },
        { getRemainingTimeInMillis: () => 20_000 },
      );
      expect(result.heldAfterResumeTenants).toEqual(['stuck']);
      expect(result.heldAfterResumeMs).toBeGreaterThan(0);
      expect(result.heldAfterResumeMs).toBeLessThanOrEqual(result.durationMs);
      expect(values.HeldAfterResumeMs).toEqual([result.heldAfterResumeMs]);
      // The resumed tenant's row was read back and sent; the paused one's stays held.
      expect(await statesOf(sys, 'resumed')).toEqual({ QUEUED: 1 });
      expect(await statesOf(sys, 'paused')).toEqual({ SCHEDULED: 1 });
    } finally {
      await ingest.stop();
    }
  }, 60_000);
});
