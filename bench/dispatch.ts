/**
 * Phase 2: dispatch throughput against the storage ceiling.
 *
 * A burst of rows all due at the same millisecond (already due when dispatch starts) goes
 * through the real dispatch loop (every shard group in parallel, as the tick runs them): query,
 * conditional acquire, send to the tenant queue, delivered marker in a batch. In the same run, on
 * the same table, the storage ceiling: how fast dynalite performs exactly the writes a dispatched
 * job needs (one conditional acquire, one marker put in a batch of 25) at the same concurrency, with
 * nothing else going on. The ratio says how much of the storage's speed the dispatcher uses.
 */
import { setMaxListeners } from 'node:events';
import { BatchWriteItemCommand, PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { keys } from '../adapters/dynamoJobStore.js';
import { forEachLimit } from '../core/util/backoff.js';
import { shardsOfGroup } from '../core/model/config.js';
import { dispatchLoop } from '../core/dispatch/loop.js';
import type { QueueSender, RowKey } from '../core/model/ports.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, type TestSystem } from '../test/support/system.js';
import { processCpuUs, progress, realisticPayload, sleep } from './support.js';

/** Conditional acquires in flight per group: core/dispatch/round.ts's default. */
export const ACQUIRE_CONCURRENCY = 32;

export interface BurstResult {
  jobs: number;
  /** Jobs sent and recorded per second, from the start of dispatch to the last delivered marker. */
  jobsPerSec: number;
  /** Jobs sent per second, from the start of dispatch to the last send. */
  sentPerSec: number;
  durationMs: number;
  /** Items the due-range queries read (DynamoDB's ScannedCount). */
  itemsRead: number;
  /** CPU time of the dispatching process per job (the emulators run in processes of their own). */
  cpuUsPerJob: number;
  /** Highest heap used while the burst was dispatched (sampled every 5 ms). */
  peakHeapBytes?: number;
  /** CPU time of the table emulator (dynalite, a process of its own) per job: the storage work a job costs. */
  storageCpuUsPerJob?: number;
}

/** The table emulator's CPU time so far (µs), when the benchmark runs it in a process of its own. */
export function storageCpu(em: Emulators): number | undefined {
  return processCpuUs((em as { pids?: { dynamo?: number } }).pids?.dynamo);
}

const perJob = (a: number | undefined, b: number | undefined, n: number) =>
  a === undefined || b === undefined ? undefined : Math.round((b - a) / n);

/** A figure measured in repeats: the median, and the spread (min–max) around it. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  values: number[];
}

export function spread(values: readonly number[], digits = 3): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  const r = (x: number) => +x.toFixed(digits);
  return { median: r(median), min: r(sorted[0] ?? 0), max: r(sorted.at(-1) ?? 0), values: values.map(r) };
}

/**
 * The median repeat's burst (its figures), with the medians of the rates and the ratio: the burst
 * and the ceiling are measured `repeats` times, interleaved in the same window.
 */
export interface DispatchResult extends BurstResult {
  ceilingJobsPerSec: number;
  /**
   * Median over `repeats` interleaved pairs of (burst rate / the ceiling measured right beside it):
   * on a shared machine a pair sees the same load on both sides, and the median drops the pairs
   * another process disturbed on one side only. Spread in `repeats.ratioToCeiling`.
   */
  ratioToCeiling: number;
  repeats: { jobsPerSec: Spread; ceilingJobsPerSec: Spread; ratioToCeiling: Spread; storageCpuRatio?: Spread };
  /**
   * The ceiling's storage CPU per job over the burst's (median over the repeats): the share of the
   * storage's work per job that is the job's own writes. Unlike the rates, it does not move with
   * what else the machine runs: on a shared machine it is the figure to steer by.
   */
  storageCpuRatio?: number;
  /** Items dispatch rounds read per job sent at phase 1's steady load (set from phase 1 when it ran). */
  itemsReadPerJobSteady?: number;
  ceiling: {
    concurrency: number;
    rows: number;
    /** Conditional acquires (UpdateItem) per second, alone. */
    conditionalWritesPerSec: number;
    /** Delivered markers written per second in BatchWriteItem of 25, alone. */
    batchedMarkersPerSec: number;
    /** Writes a dispatched job needs: the acquire and the marker (its put came with ingest). */
    writesPerJob: number;
    /** The table emulator's CPU per job doing only those writes. */
    storageCpuUsPerJob?: number;
  };
  settings: { shards: number; groups: number; lookaheadMs: number; payloadBytes: number };
}

/** The system phases 2 and 4 share: default settings (64 shards, 8 groups, 5 s lookahead). */
export function dispatchSystem(em: Emulators): Promise<TestSystem> {
  return createSystem(em, { tenants: ['demo'] });
}

/** Writes `n` job rows straight into the table (parallel BatchWriteItem), as ingest would have. */
export async function writeRows(
  em: Emulators,
  sys: TestSystem,
  n: number,
  due: (i: number) => number,
  opts: { payload?: string; prefix?: string } = {},
): Promise<RowKey[]> {
  const { settings } = sys.w.config;
  const payload = opts.payload ?? JSON.stringify(realisticPayload(0));
  const rows: RowKey[] = [];
  const items: Record<string, AttributeValue>[] = [];
  for (let i = 0; i < n; i++) {
    const shard = i % settings.shardCount;
    const dueMs = due(i);
    const jobId = sys.w.codec.encode({
      tenant: 'demo',
      shard,
      dueMs,
      path: 't',
      random: `${opts.prefix ?? 'b'}${String(i).padStart(15, '0')}`.slice(-16),
    });
    rows.push({ shard, dueMs, jobId });
    items.push({
      ...keys.row({ shard, dueMs, jobId }),
      tenant: { S: 'demo' },
      state: { S: 'SCHEDULED' },
      leaseUntil: { N: '0' },
      payload: { S: payload },
    });
  }
  const chunks: Record<string, AttributeValue>[][] = [];
  for (let i = 0; i < items.length; i += 25) chunks.push(items.slice(i, i + 25));
  await forEachLimit(chunks, 32, async (chunk) => {
    let pending = chunk.map((Item) => ({ PutRequest: { Item } }));
    while (pending.length > 0) {
      const res = await em.dynamo.send(new BatchWriteItemCommand({ RequestItems: { [sys.tableName]: pending } }));
      pending = (res.UnprocessedItems?.[sys.tableName] ?? []) as typeof pending;
    }
  });
  return rows;
}

/**
 * The rows a burst writes straight into the table are due already: ingest would have written
 * them long before, ahead of every dispatcher's read position (or noted them in the late lane).
 * An earlier burst on the same table left its marks past them in the group lease items: set every
 * shard's mark back to just before the burst (an expired lease), as a dispatcher that had read up
 * to there would have left it.
 */
async function positionsBefore(em: Emulators, sys: TestSystem, dueMs: number): Promise<void> {
  const { settings } = sys.w.config;
  await Promise.all(
    Array.from({ length: settings.groupCount }, (_, g) => {
      const marks = Object.fromEntries(shardsOfGroup(g, settings).map((shard) => [String(shard), { N: String(dueMs - 1) }]));
      const Item = {
        ...keys.groupLease(g),
        owner: { S: 'bench-reset' },
        ownerStart: { N: '0' },
        leaseUntil: { N: '0' },
        marks: { M: marks },
      };
      return em.dynamo.send(new PutItemCommand({ TableName: sys.tableName, Item }));
    }),
  );
}

/**
 * Dispatches a burst of `n` rows all due at one millisecond (already past) with the real loop
 * over every group, and times it until every row is sent and recorded.
 */
/** Times a burst's dispatcher for one group is started in all before its failure fails the burst. */
const DISPATCH_ATTEMPTS = 4;

export async function burst(em: Emulators, sys: TestSystem, n: number, label: string): Promise<BurstResult> {
  const dueMs = Date.now() - 1_000;
  await writeRows(em, sys, n, () => dueMs, { prefix: label });
  await positionsBefore(em, sys, dueMs);
  let recorded = 0;
  let lastSent = 0;
  const inner = sys.w.dispatch.sender;
  const sender: QueueSender = {
    async sendBatch(url, messages) {
      const failed = await inner.sendBatch(url, messages);
      lastSent = performance.now();
      return failed;
    },
  };
  const store = sys.w.store;
  const countingStore = Object.create(store) as typeof store;
  countingStore.markDelivered = async (rows, at) => {
    const left = await store.markDelivered(rows, at);
    recorded += rows.length - left.length;
    return left;
  };
  const deps = { ...sys.w.dispatch, sender, store: countingStore };
  const readBefore = store.stats.itemsRead;
  const abort = new AbortController();
  setMaxListeners(100, abort.signal);
  const cpu0 = process.cpuUsage();
  const storage0 = storageCpu(em);
  const started = performance.now();
  const owner = `bench-${label}-${Date.now()}`;
  const ownerStartMs = Date.now();
  // Each group's dispatcher, started again when it fails (an emulator that drops a connection
  // under load), as the tick's Retry starts a failed dispatch step again; a failure is kept, not
  // left unhandled while the loop below waits.
  let failure: unknown;
  const runGroup = async (group: number): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await dispatchLoop(deps, { groups: [group], owner, ownerStartMs, untilMs: ownerStartMs + 600_000, signal: abort.signal });
      } catch (err) {
        if (abort.signal.aborted || attempt === DISPATCH_ATTEMPTS) throw err;
        progress(`burst ${label}: group ${group}'s dispatcher failed (${String(err)}): started again (attempt ${attempt + 1})`);
        await sleep(200);
      }
    }
  };
  const loops = Promise.all(Array.from({ length: sys.w.config.settings.groupCount }, (_, group) => runGroup(group))).catch(
    (err: unknown) => void (failure ??= err),
  );
  const timeoutAt = started + 300_000;
  let peakHeapBytes = 0;
  while (recorded < n && performance.now() < timeoutAt && failure === undefined) {
    peakHeapBytes = Math.max(peakHeapBytes, process.memoryUsage().heapUsed);
    await sleep(5);
  }
  const done = performance.now();
  const cpu = process.cpuUsage(cpu0);
  const storage1 = storageCpu(em);
  abort.abort();
  await loops;
  if (failure !== undefined) throw failure;
  if (recorded < n) throw new Error(`burst ${label}: only ${recorded} of ${n} rows dispatched within 300 s`);
  const durationMs = done - started;
  return {
    jobs: n,
    jobsPerSec: Math.round(n / (durationMs / 1000)),
    sentPerSec: Math.round(n / ((lastSent - started) / 1000)),
    durationMs: Math.round(durationMs),
    itemsRead: store.stats.itemsRead - readBefore,
    cpuUsPerJob: Math.round((cpu.user + cpu.system) / n),
    peakHeapBytes,
    storageCpuUsPerJob: perJob(storage0, storage1, n),
  };
}

/**
 * The storage alone, doing exactly the writes a dispatched job needs at the dispatch's
 * concurrency and nothing else (no queries, no queue, no timers): chunks of 25 rows, each
 * acquired with the dispatch's own conditional UpdateItem (25 in parallel) and then replaced by
 * their delivered markers in one BatchWriteItem, `concurrency / 25` chunks in flight. Before that, the conditional writes
 * alone, at `concurrency` in flight.
 */
export async function storageCeiling(
  em: Emulators,
  sys: TestSystem,
  n: number,
  concurrency: number,
  opts: { alone?: boolean } = {},
): Promise<DispatchResult['ceiling'] & { jobsPerSec: number }> {
  const store = sys.w.store;
  const acquire = async (k: RowKey) => {
    const now = Date.now();
    if (!(await store.acquire(k, now, now + 30_000))) throw new Error('ceiling: acquire failed');
  };
  const mark = async (chunk: RowKey[]) => {
    const now = Date.now();
    if (
      (
        await store.markDelivered(
          chunk.map((k) => ({ ...k, tenant: 'demo', expiresAtMs: k.dueMs + 7 * 86_400_000 })),
          now,
        )
      ).length > 0
    )
      throw new Error('ceiling: marker write failed');
  };
  const chunked = (rows: RowKey[]) => Array.from({ length: Math.ceil(rows.length / 25) }, (_, i) => rows.slice(i * 25, i * 25 + 25));

  let t0 = 0;
  let t1 = 0;
  let t2 = 0;
  if (opts.alone !== false) {
    const alone = await writeRows(em, sys, n, () => Date.now() + 86_400_000, { prefix: 'a' });
    t0 = performance.now();
    await forEachLimit(alone, concurrency, acquire);
    t1 = performance.now();
    await forEachLimit(chunked(alone), Math.max(1, Math.round(concurrency / 25)), mark);
    t2 = performance.now();
  }

  const mixed = await writeRows(em, sys, n, () => Date.now() + 86_400_000, { prefix: 'c' });
  const s3 = storageCpu(em);
  const t3 = performance.now();
  await forEachLimit(chunked(mixed), Math.max(1, Math.round(concurrency / 25)), async (chunk) => {
    await Promise.all(chunk.map(acquire));
    await mark(chunk);
  });
  const t4 = performance.now();
  const s4 = storageCpu(em);
  return {
    concurrency,
    rows: n,
    conditionalWritesPerSec: t1 > t0 ? Math.round(n / ((t1 - t0) / 1000)) : 0,
    batchedMarkersPerSec: t2 > t1 ? Math.round(n / ((t2 - t1) / 1000)) : 0,
    writesPerJob: 2,
    jobsPerSec: Math.round(n / ((t4 - t3) / 1000)),
    storageCpuUsPerJob: perJob(s3, s4, n),
  };
}

export async function runDispatch(
  em: Emulators,
  sys: TestSystem,
  opts: { burst: number; warmup: number; repeats: number; ceilingRows: number },
): Promise<DispatchResult> {
  const { settings } = sys.w.config;
  const concurrency = settings.groupCount * ACQUIRE_CONCURRENCY;
  // Warm-up of both paths (code loaded, connections open, dynalite's LevelDB past its first writes).
  progress(`dispatch: warm-up: a burst of ${opts.warmup} and a ceiling of ${opts.warmup} rows`);
  await burst(em, sys, opts.warmup, 'w');
  await storageCeiling(em, sys, opts.warmup, concurrency);
  const bursts: BurstResult[] = [];
  const ceilings: Awaited<ReturnType<typeof storageCeiling>>[] = [];
  for (let i = 0; i < opts.repeats; i++) {
    // Interleaved, alternating which goes first: a drift of the machine's load falls on both.
    const runBurst = async () => bursts.push(await burst(em, sys, opts.burst, `d${i}`));
    const runCeiling = async () => ceilings.push(await storageCeiling(em, sys, opts.ceilingRows, concurrency, { alone: false }));
    if (i % 2 === 0) {
      await runBurst();
      await runCeiling();
    } else {
      await runCeiling();
      await runBurst();
    }
    const b = bursts[i]!;
    const c = ceilings[i]!;
    progress(
      `dispatch: repeat ${i + 1}/${opts.repeats}: burst of ${opts.burst} at ${b.jobsPerSec} jobs/s (sent ${b.sentPerSec}/s, ${b.cpuUsPerJob} µs CPU per job, storage ${b.storageCpuUsPerJob ?? '?'} µs per job), ceiling ${c.jobsPerSec} jobs/s over ${opts.ceilingRows} rows (storage ${c.storageCpuUsPerJob ?? '?'} µs per job): ratio ${(b.jobsPerSec / c.jobsPerSec).toFixed(2)}`,
    );
  }
  const ratios = bursts.map((b, i) => b.jobsPerSec / ceilings[i]!.jobsPerSec);
  const cpuRatios = bursts.flatMap((b, i) => {
    const c = ceilings[i]!.storageCpuUsPerJob;
    return b.storageCpuUsPerJob && c ? [c / b.storageCpuUsPerJob] : [];
  });
  const repeats = {
    jobsPerSec: spread(
      bursts.map((b) => b.jobsPerSec),
      0,
    ),
    ceilingJobsPerSec: spread(
      ceilings.map((c) => c.jobsPerSec),
      0,
    ),
    ratioToCeiling: spread(ratios),
    ...(cpuRatios.length === bursts.length ? { storageCpuRatio: spread(cpuRatios) } : {}),
  };
  // The repeat whose ratio is the median gives the burst's other figures.
  const m = ratios.indexOf([...ratios].sort((a, b) => a - b)[Math.floor((ratios.length - 1) / 2)]!);
  // The writes alone (conditional acquires, then batched markers), once, for the table.
  const { jobsPerSec: lastCeiling, ...ceiling } = await storageCeiling(em, sys, opts.ceilingRows, concurrency);
  progress(
    `dispatch: the writes alone: ${ceiling.conditionalWritesPerSec} conditional writes/s, ${ceiling.batchedMarkersPerSec} batched markers/s (and the ceiling once more: ${lastCeiling} jobs/s)`,
  );
  progress(
    `dispatch: median ratio ${repeats.ratioToCeiling.median} (${repeats.ratioToCeiling.min}–${repeats.ratioToCeiling.max}), ${repeats.jobsPerSec.median} jobs/s against a ceiling of ${repeats.ceilingJobsPerSec.median}${repeats.storageCpuRatio ? `; storage CPU ratio ${repeats.storageCpuRatio.median} (${repeats.storageCpuRatio.min}–${repeats.storageCpuRatio.max})` : ''}`,
  );
  return {
    ...bursts[m]!,
    jobsPerSec: repeats.jobsPerSec.median,
    ceilingJobsPerSec: repeats.ceilingJobsPerSec.median,
    ratioToCeiling: repeats.ratioToCeiling.median,
    ...(repeats.storageCpuRatio ? { storageCpuRatio: repeats.storageCpuRatio.median } : {}),
    repeats,
    ceiling,
    settings: {
      shards: settings.shardCount,
      groups: settings.groupCount,
      lookaheadMs: settings.lookaheadMs,
      payloadBytes: JSON.stringify(realisticPayload(0)).length,
    },
  };
}
