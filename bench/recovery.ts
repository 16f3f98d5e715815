/**
 * Phase 7: recovery after an outage. The table holds `overdueRows` rows that fell due while
 * nothing dispatched (due between an hour and a second ago, in every shard, as ingest wrote
 * them); the real dispatch loop runs every group in this process (dynalite and fauxqs each in a
 * process of their own, as in phases 2 and 4) and drains them, while jobs keep falling due
 * (written through ingest's own code, due 4 to 6 s after their write, `freshPerSec` a second).
 *
 * Measured: the drain rate (overdue rows sent and recorded per second) against the dispatch
 * rate of the same run with no backlog (a burst of `emptyRows` rows due at once, on a fresh
 * table of the same emulator, right after the drain; the run before the load is reported too);
 * the process's resident memory while dispatching with no backlog before the load (`steadyRssMb`,
 * the median of samples every 100 ms) and its peak during the drain (`peakRssMb`); then every message in the tenant queue is received once: `lost` (a job
 * never delivered), `early` (SQS's SentTimestamp before runAt), `duplicates` (a job delivered
 * twice). Fresh jobs' lateness is taken at the dispatcher (due → SendMessageBatch acknowledged),
 * since the queue holds the whole backlog in front of them.
 */
import { setMaxListeners } from 'node:events';
import { BatchWriteItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { keys, payloadAttribute } from '../adapters/dynamoJobStore.js';
import { forEachLimit } from '../core/util/backoff.js';
import { ingestJob } from '../core/ingest/ingest.js';
import { dispatchLoop, type DispatchStepResult } from '../core/dispatch/loop.js';
import type { JobStore, QueueSender } from '../core/model/ports.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, type TestSystem } from '../test/support/system.js';
import { storageCpu } from './dispatch.js';
import { handledLater, progress, realisticPayload, sleep, summarize, type Summary } from './support.js';

export interface RecoveryResult {
  overdueRows: number;
  /** Overdue rows sent and recorded per second, from the start of dispatch to the last one. */
  drainJobsPerSec: number;
  /** drainJobsPerSec over the rate of the same run with no backlog (`empty`: right after the drain, on a fresh table, the median of 3 runs). */
  ratioToEmpty: number;
  /** The same over the rate measured before the backlog was loaded. */
  ratioToEmptyBefore: number;
  /**
   * The table emulator's CPU per job with no backlog (right after) over its CPU per job during the
   * drain (the fresh jobs' writes included, a few per hundred rows): the storage work an overdue
   * row costs beside a job due alone. Unlike the rates, it does not move with the machine's load.
   */
  storageCpuRatio?: number;
  /** Median resident memory of this process while dispatching with no backlog, MB. */
  steadyRssMb: number;
  /** Highest resident memory during the drain, MB. */
  peakRssMb: number;
  lost: number;
  early: number;
  duplicates: number;
  /**
   * The run with no backlog: a burst of rows due at once, on a fresh table, right after the drain
   * (its RSS: the run before the backlog was loaded, where `steadyRssMb` comes from).
   */
  empty: { rows: number; jobsPerSec: number; durationMs: number; peakRssMb: number; before: { jobsPerSec: number; durationMs: number } };
  drainMs: number;
  /** Jobs that fell due during the drain: due → send acknowledged at the dispatcher. */
  fresh: { jobs: number; lateness: Summary; sentAfterLastBacklogRow: number };
  /** Items read per overdue row (due-range pages, late lanes, probes): each is read about once. */
  itemsReadPerJob: number;
  /** Most rows a round tracked at once (read, not yet final), and rows held at most (acquired, unsent) per round cap. */
  maxTracked: number;
  rssBeforeMb: number;
  loadMs: number;
  consumeMs: number;
}

const MB = 1024 * 1024;
const rssMb = () => +(process.memoryUsage.rss() / MB).toFixed(1);

/** Samples this process's RSS every 100 ms until stopped. */
function sampleRss(): { stop(): number[] } {
  const samples: number[] = [rssMb()];
  const timer = setInterval(() => samples.push(rssMb()), 100);
  return {
    stop() {
      clearInterval(timer);
      samples.push(rssMb());
      return samples;
    },
  };
}

const settle = async () => {
  (globalThis as { gc?: () => void }).gc?.();
  await sleep(1_000);
};

/** Job id whose random part carries `prefix` and `i`, so that a delivery maps back to its index without a table of ids. */
function idOf(sys: TestSystem, prefix: string, i: number, shard: number, dueMs: number): string {
  return sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random: `${prefix}${String(i).padStart(15, '0')}` });
}
const indexOf = (jobId: string, prefix: string): number | undefined => {
  const random = jobId.split('.')[5] ?? '';
  return random.startsWith(prefix) ? Number(random.slice(1)) : undefined;
};

/** Writes `n` rows straight into the table as ingest would have, 25 per BatchWriteItem, generated as they go (flat memory). */
async function writeRows(em: Emulators, sys: TestSystem, n: number, prefix: string, due: (i: number) => number): Promise<void> {
  const { settings } = sys.w.config;
  const payload = payloadAttribute(JSON.stringify(realisticPayload(0)));
  const chunks = Array.from({ length: Math.ceil(n / 25) }, (_, c) => c);
  await forEachLimit(chunks, 32, async (c) => {
    const items: Record<string, AttributeValue>[] = [];
    for (let i = c * 25; i < Math.min(n, c * 25 + 25); i++) {
      const shard = i % settings.shardCount;
      const dueMs = due(i);
      items.push({
        ...keys.row({ shard, dueMs, jobId: idOf(sys, prefix, i, shard, dueMs) }),
        tenant: { S: 'demo' },
        state: { S: 'SCHEDULED' },
        leaseUntil: { N: '0' },
        ...payload,
      });
    }
    let pending = items.map((Item) => ({ PutRequest: { Item } }));
    while (pending.length > 0) {
      const res = await em.dynamo.send(new BatchWriteItemCommand({ RequestItems: { [sys.tableName]: pending } }));
      pending = (res.UnprocessedItems?.[sys.tableName] ?? []) as typeof pending;
    }
  });
}

/**
 * The dispatch loop of every group over `sys`, in this process, counting what it sends and
 * records per id prefix; the first send of each row of a prefix in `sizes` is timed (typed
 * arrays: the bench's own bookkeeping stays small beside what it measures).
 */
function startDispatch(sys: TestSystem, sizes: Record<string, number>) {
  const recorded = new Map<string, number>();
  const sentAt = new Map(Object.entries(sizes).map(([prefix, n]) => [prefix, new Float64Array(n).fill(Number.NaN)]));
  const inner = sys.w.dispatch.sender;
  const prefixOf = (jobId: string) => (jobId.split('.')[5] ?? '').slice(0, 1);
  const sender: QueueSender = {
    async sendBatch(url, messages) {
      const failed = await inner.sendBatch(url, messages);
      const at = Date.now();
      const bad = new Set(failed.map((f) => f.id));
      for (const m of messages) {
        if (bad.has(m.id)) continue;
        const jobId = JSON.parse(m.body).jobId as string;
        const prefix = prefixOf(jobId);
        const times = sentAt.get(prefix);
        const i = indexOf(jobId, prefix);
        if (times && i !== undefined && i < times.length && Number.isNaN(times[i]!)) times[i] = at;
      }
      return failed;
    },
  };
  const store = Object.create(sys.w.store) as JobStore;
  store.markDelivered = async (rows, at) => {
    const left = await sys.w.store.markDelivered(rows, at);
    const failed = new Set(left.map((k) => k.jobId));
    for (const r of rows) if (!failed.has(r.jobId)) recorded.set(prefixOf(r.jobId), (recorded.get(prefixOf(r.jobId)) ?? 0) + 1);
    return left;
  };
  const deps = { ...sys.w.dispatch, sender, store };
  const steps: DispatchStepResult[] = [];
  const abort = new AbortController();
  setMaxListeners(100, abort.signal);
  const started = Date.now();
  const owner = `recovery-${started}`;
  const loops = Array.from({ length: sys.w.config.settings.groupCount }, (_, group) =>
    handledLater(
      dispatchLoop(deps, {
        groups: [group],
        owner,
        ownerStartMs: started,
        untilMs: started + 3_600_000,
        signal: abort.signal,
        onStep: (r) => steps.push(r),
      }),
    ),
  );
  return {
    started,
    steps,
    /** When each row of `prefix` was first sent (NaN: never). */
    sentAt: (prefix: string) => sentAt.get(prefix) ?? new Float64Array(0),
    /** Waits until `n` rows of `prefix` are recorded (their delivered markers written); false on timeout. */
    async until(prefix: string, n: number, timeoutMs: number): Promise<boolean> {
      const end = Date.now() + timeoutMs;
      while ((recorded.get(prefix) ?? 0) < n && Date.now() < end) await sleep(20);
      return (recorded.get(prefix) ?? 0) >= n;
    },
    async stop(): Promise<void> {
      abort.abort();
      await Promise.all(loops);
    },
  };
}

/** Receives every message in the queue once (a long visibility timeout, nothing deleted). */
async function receiveAll(
  em: Emulators,
  queueUrl: string,
  onMessage: (jobId: string, runAtMs: number, sentMs: number) => void,
): Promise<number> {
  let received = 0;
  let idle = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (idle < 16) {
        const res = await em.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            VisibilityTimeout: 3_600,
            MessageAttributeNames: ['runAt'],
            MessageSystemAttributeNames: ['SentTimestamp'],
          }),
        );
        const msgs = res.Messages ?? [];
        if (msgs.length === 0) idle++;
        else idle = 0;
        for (const m of msgs) {
          received++;
          const body = JSON.parse(m.Body ?? '{}') as { jobId?: string; runAt?: string };
          onMessage(
            body.jobId ?? '',
            Date.parse(m.MessageAttributes?.runAt?.StringValue ?? body.runAt ?? ''),
            Number(m.Attributes?.SentTimestamp ?? 0),
          );
        }
      }
    }),
  );
  return received;
}

/**
 * A table, queues and wiring of their own. dynalite makes a new table ACTIVE on a timer, which a
 * busy emulator (right after a large drain) may run late: a write then finds no table yet; retry.
 */
async function freshSystem(em: Emulators): Promise<TestSystem> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await createSystem(em, { tenants: ['demo'] });
    } catch (err) {
      if ((err as Error).name !== 'ResourceNotFoundException' || attempt >= 20) throw err;
      await sleep(500);
    }
  }
}

/** A burst of `rows` rows due at once on a fresh table of the same emulator, with no backlog: its rate and RSS samples. */
async function emptyRun(
  em: Emulators,
  rows: number,
): Promise<{ jobsPerSec: number; durationMs: number; rss: number[]; storageCpuUsPerJob?: number }> {
  const emptySys = await freshSystem(em);
  const emptyDue = Date.now() - 1_000;
  await writeRows(em, emptySys, rows, 'E', () => emptyDue);
  await settle();
  const rss = sampleRss();
  const storage0 = storageCpu(em);
  const e = startDispatch(emptySys, {});
  const done = await e.until('E', rows, 600_000);
  const durationMs = Date.now() - e.started;
  const storage1 = storageCpu(em);
  const samples = rss.stop();
  await e.stop();
  if (!done) throw new Error(`recovery: the burst with no backlog was not dispatched within 600 s`);
  return {
    jobsPerSec: Math.round(rows / (durationMs / 1000)),
    durationMs,
    rss: samples,
    ...(storage0 !== undefined && storage1 !== undefined ? { storageCpuUsPerJob: (storage1 - storage0) / rows } : {}),
  };
}

/** Runs with no backlog after the drain, the median kept. */
const EMPTY_RUNS_AFTER = 3;

export async function runRecovery(
  em: Emulators,
  opts: { overdueRows: number; emptyRows: number; freshPerSec: number },
): Promise<RecoveryResult> {
  // The run with no backlog, on a table of its own: a burst due at once.
  progress(`recovery: the dispatch rate with no backlog (a burst of ${opts.emptyRows} rows due at once, fresh table)`);
  const before = await emptyRun(em, opts.emptyRows);
  const steadyRssMb = summarize(before.rss).p50Ms;
  progress(`recovery: ${before.jobsPerSec} jobs/s with no backlog; RSS median ${steadyRssMb} MB, max ${Math.max(...before.rss)} MB`);

  // The outage: overdue rows, due between an hour and a second ago (oldest first in index order).
  const sys = await freshSystem(em);
  const now = Date.now();
  progress(`recovery: loading ${opts.overdueRows} overdue rows (due between 1 h and 1 s ago)`);
  const t0 = Date.now();
  await writeRows(em, sys, opts.overdueRows, 'R', (i) => now - 1_000 - Math.floor(((opts.overdueRows - i) / opts.overdueRows) * 3_600_000));
  const loadMs = Date.now() - t0;
  await settle();
  const rssBeforeMb = rssMb();

  // Jobs keep falling due during the drain, written through ingest's own code (late lane included).
  progress(`recovery: draining ${opts.overdueRows} overdue rows while ${opts.freshPerSec} jobs/s fall due (RSS ${rssBeforeMb} MB)`);
  const freshDue: number[] = [];
  const freshWrites: Promise<unknown>[] = [];
  const freshStop = new AbortController();
  const drainSampler = sampleRss();
  const drainStorage0 = storageCpu(em);
  const d = startDispatch(sys, { R: opts.overdueRows, F: Math.ceil((opts.freshPerSec * 1_800_000) / 1000) + 1 });
  const freshLoad = (async () => {
    for (let i = 0; !freshStop.signal.aborted; i++) {
      await sleep(d.started + (i * 1000) / opts.freshPerSec - Date.now());
      if (freshStop.signal.aborted) break;
      const shard = i % sys.w.config.settings.shardCount;
      const dueMs = Date.now() + 4_000 + Math.floor(Math.random() * 2_000);
      freshDue.push(dueMs);
      freshWrites.push(
        ingestJob(sys.w.ingest, {
          jobId: idOf(sys, 'F', i, shard, dueMs),
          tenant: 'demo',
          shard,
          dueMs,
          payload: JSON.stringify({ fresh: i }),
        }),
      );
    }
  })();
  const drained = await d.until('R', opts.overdueRows, 1_800_000);
  const drainMs = Date.now() - d.started;
  const drainStorage1 = storageCpu(em);
  freshStop.abort();
  await freshLoad;
  await Promise.all(freshWrites);
  const drainRss = drainSampler.stop();
  if (!drained) {
    await d.stop();
    throw new Error(`recovery: the backlog was not dispatched within 1,800 s`);
  }
  // The last fresh jobs fall due within 6 s.
  await d.until('F', freshDue.length, 60_000);
  await d.stop();
  const drainRate = Math.round(opts.overdueRows / (drainMs / 1000));
  const peakRssMb = Math.max(...drainRss);
  // The rate with no backlog again right after, on a fresh table of the same emulator: the same
  // machine load and the same storage underneath (dynalite's LevelDB is slower for a while after a
  // large load, whichever table is written), as the backlog phase measures it.
  // Three runs, the median kept (by rate; its storage CPU the median of the three too): a short
  // burst's rate on a shared machine varies more than the drain's.
  const afters = [];
  for (let i = 0; i < EMPTY_RUNS_AFTER; i++) afters.push(await emptyRun(em, opts.emptyRows));
  const after = [...afters].sort((a, b) => a.jobsPerSec - b.jobsPerSec)[Math.floor(afters.length / 2)]!;
  const storageAfter = afters.map((a) => a.storageCpuUsPerJob).filter((x): x is number => x !== undefined);
  if (storageAfter.length === afters.length)
    after.storageCpuUsPerJob = [...storageAfter].sort((a, b) => a - b)[Math.floor(storageAfter.length / 2)];
  const emptyRate = after.jobsPerSec;
  const drainStorageUs =
    drainStorage0 !== undefined && drainStorage1 !== undefined ? (drainStorage1 - drainStorage0) / opts.overdueRows : undefined;
  const storageCpuRatio = drainStorageUs && after.storageCpuUsPerJob ? +(after.storageCpuUsPerJob / drainStorageUs).toFixed(3) : undefined;
  progress(
    `recovery: ${drainRate} jobs/s over ${opts.overdueRows} overdue rows against ${emptyRate} with no backlog right after (${before.jobsPerSec} before): ratio ${(drainRate / emptyRate).toFixed(2)}${storageCpuRatio !== undefined ? ` (storage CPU per job ${Math.round(after.storageCpuUsPerJob!)} µs with no backlog, ${Math.round(drainStorageUs!)} µs draining: ratio ${storageCpuRatio})` : ''}; RSS peak ${peakRssMb} MB against ${steadyRssMb} MB steady`,
  );

  // Every message once: lost, early, duplicates.
  const t1 = Date.now();
  const backlogCount = new Uint8Array(opts.overdueRows);
  const freshCount = new Uint8Array(freshDue.length);
  let early = 0;
  const received = await receiveAll(em, sys.tenants.demo!.url, (jobId, runAtMs, sentMs) => {
    if (sentMs < runAtMs) early++;
    const r = indexOf(jobId, 'R');
    if (r !== undefined && r < backlogCount.length) backlogCount[r]!++;
    const f = indexOf(jobId, 'F');
    if (f !== undefined && f < freshCount.length) freshCount[f]!++;
  });
  const consumeMs = Date.now() - t1;
  let lost = 0;
  let duplicates = 0;
  for (const counts of [backlogCount, freshCount]) {
    for (const n of counts) {
      if (n === 0) lost++;
      else duplicates += n - 1;
    }
  }
  progress(`recovery: received ${received} messages: ${lost} lost, ${early} early, ${duplicates} duplicates`);

  // Fresh jobs against the backlog: due → sent at the dispatcher, and how many went out only after the last backlog row although due before it.
  const lastBacklogSend = d.sentAt('R').reduce((m, t) => (Number.isNaN(t) ? m : Math.max(m, t)), 0);
  const freshLateness: number[] = [];
  let sentAfterLast = 0;
  d.sentAt('F').forEach((at, i) => {
    if (Number.isNaN(at) || i >= freshDue.length) return;
    freshLateness.push(at - freshDue[i]!);
    if (at > lastBacklogSend && freshDue[i]! < lastBacklogSend) sentAfterLast++;
  });
  const itemsRead = d.steps.reduce((n, s) => n + s.itemsRead, 0);
  return {
    overdueRows: opts.overdueRows,
    drainJobsPerSec: drainRate,
    ratioToEmpty: +(drainRate / emptyRate).toFixed(3),
    steadyRssMb,
    peakRssMb,
    lost,
    early,
    duplicates,
    empty: {
      rows: opts.emptyRows,
      jobsPerSec: emptyRate,
      durationMs: after.durationMs,
      peakRssMb: Math.max(...before.rss),
      before: { jobsPerSec: before.jobsPerSec, durationMs: before.durationMs },
    },
    ratioToEmptyBefore: +(drainRate / before.jobsPerSec).toFixed(3),
    ...(storageCpuRatio !== undefined ? { storageCpuRatio } : {}),
    drainMs,
    fresh: { jobs: freshDue.length, lateness: summarize(freshLateness), sentAfterLastBacklogRow: sentAfterLast },
    itemsReadPerJob: +(itemsRead / (opts.overdueRows + freshDue.length)).toFixed(3),
    maxTracked: Math.max(0, ...d.steps.map((s) => s.maxTracked)),
    rssBeforeMb,
    loadMs,
    consumeMs,
  };
}
